"""Time of ``posbias fix --quick`` with an empty measurement cache (issue 36's target: at most
5 minutes for a 135M model with 24 examples on two cores), with every remedy and with the
calibration left out (``--remedies hidden-scaling,ms-poe``); ``--full`` adds the run at the
default sizes (48 examples of 10 documents).  As ``bench_report.py``: each run its own
process, the de-quantized weights kept, a quiet machine.  Results go to
``bench/results/fix.json``; the README quotes them.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_report import timed  # noqa: E402

DATA = str(Path(__file__).resolve().parents[1] / "data" / "liu2023" / "nq-open-oracle.jsonl.gz")
MODEL = "smollm2-135m"
TARGET_S = 300.0
RUNS = {"quick, all remedies": ["--quick"],
        "quick, without the calibration": ["--quick", "--remedies", "hidden-scaling,ms-poe"]}


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    runs = dict(RUNS, **({"full, all remedies": []} if "--full" in argv else {}))
    rows = [dict(run=name, **timed(["fix", "--model", MODEL, "--data", DATA, *args],
                                   MODEL, out_flag=True)) for name, args in runs.items()]
    out = {"command": f"posbias fix --model {MODEL} --data nq-open-oracle.jsonl.gz [...]",
           "cache": "empty measurement cache, de-quantized weights present", "runs": rows,
           "target_s": TARGET_S, "cpus": os.cpu_count(),
           "cpu": platform.processor() or platform.machine(), "date": time.strftime("%Y-%m-%d")}
    dest = Path(__file__).with_name("results") / "fix.json"
    dest.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
