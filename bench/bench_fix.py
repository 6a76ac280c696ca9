"""Time of ``posbias fix --quick`` with an empty measurement cache (issue 36's target: at most
5 minutes for a 135M model with 24 examples on two cores), with every remedy and with the
calibration left out (``--remedies hidden-scaling,ms-poe``), and issue 45's fast path, the
prompt remedies a user on a laptop takes (``--remedies long-context-reorder,curve-order,
prior-order``, target at most 3 minutes); ``--full`` adds the run at the default sizes (48
examples of 10 documents).  ``--only WORDS``: the runs whose name holds WORDS (the others keep
their last result, with its date).  As ``bench_report.py``: each run its own process, the
de-quantized weights kept, a quiet machine.  Results go to ``bench/results/fix.json``; the
README quotes them.
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
FAST = "long-context-reorder,curve-order,prior-order"
RUNS = {"quick, all remedies": ["--quick"],
        "quick, without the calibration": ["--quick", "--remedies", "hidden-scaling,ms-poe"],
        "quick, the prompt remedies' fast path": ["--quick", "--remedies", FAST]}
#: Each run's target where it is not TARGET_S.
TARGETS = {"quick, the prompt remedies' fast path": 180.0}


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    runs = dict(RUNS, **({"full, all remedies": []} if "--full" in argv else {}))
    only = argv[argv.index("--only") + 1] if "--only" in argv else None
    dest = Path(__file__).with_name("results") / "fix.json"
    old = json.loads(dest.read_text()) if dest.exists() else {}
    kept = {r["run"]: r for r in old.get("runs", [])}
    today = time.strftime("%Y-%m-%d")
    for name, args in runs.items():
        if only is not None and only not in name:
            if name in kept:
                kept[name].setdefault("date", old.get("date"))
            continue
        kept[name] = dict(run=name, **timed(["fix", "--model", MODEL, "--data", DATA, *args],
                                            MODEL, out_flag=True), date=today,
                          target_s=TARGETS.get(name, TARGET_S))
    rows = [kept[n] for n in runs if n in kept]
    for r in rows:
        r.setdefault("target_s", TARGETS.get(r["run"], TARGET_S))
        r["within_target"] = r["seconds"] <= r["target_s"]
    out = {"command": f"posbias fix --model {MODEL} --data nq-open-oracle.jsonl.gz [...]",
           "cache": "empty measurement cache, de-quantized weights present", "runs": rows,
           "target_s": TARGET_S, "cpus": os.cpu_count(),
           "cpu": platform.processor() or platform.machine(), "date": today}
    dest.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
