"""Time of ``posbias report --quick`` with an empty measurement cache (issue 33's target: at most
3 minutes for Gemma-3-270M on two cores).  The de-quantized weights are kept
(``$POSBIAS_WEIGHTS_DIR``, default the live cache's ``weights`` folder): de-quantizing a GGUF
is a one-time step of the first use, not timed here.  Each model is run as its own
process, as a user runs it, on a quiet machine.  Results go to ``bench/results/report.json``;
chapter *The report* quotes them.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODELS = ["gemma3-270m", "smollm2-135m"]
TARGET_S = 180.0


def _weights_dir() -> str:
    d = os.environ.get("POSBIAS_WEIGHTS_DIR")
    if d:
        return d
    live = os.environ.get("POSBIAS_CACHE_DIR") or str(Path(__file__).resolve().parents[1]
                                                       / ".cache" / "posbias")
    return str(Path(live) / "weights")


def timed(args, model: str, out_flag: bool = True) -> dict:
    """Seconds of ``posbias ARGS --quiet --out DIR`` as its own process, with an empty
    measurement cache and the de-quantized weights kept."""
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, POSBIAS_CACHE_DIR=d, POSBIAS_WEIGHTS_DIR=_weights_dir(),
                   HF_HUB_OFFLINE="1")
        cmd = [sys.executable, "-m", "posbias_nb", *args, "--quiet"] + \
            (["--out", str(Path(d) / "out")] if out_flag else [])
        load = os.getloadavg()[0]
        t = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        return {"model": model, "seconds": round(time.perf_counter() - t, 1),
                "load_average_before": round(load, 2)}


def main() -> dict:
    rows = [timed(["report", "--model", model, "--quick"], model) for model in MODELS]
    out = {"command": "posbias report --model M --quick", "cache": "empty measurement cache, "
           "de-quantized weights present", "runs": rows, "target_s": TARGET_S,
           "cpus": os.cpu_count(), "cpu": platform.processor() or platform.machine(),
           "date": time.strftime("%Y-%m-%d")}
    dest = Path(__file__).with_name("results") / "report.json"
    dest.parent.mkdir(exist_ok=True)
    dest.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
