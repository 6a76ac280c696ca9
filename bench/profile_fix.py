"""Where the seconds of ``posbias fix --quick`` go (issue 36, item 5: at most 5 minutes on two
cores for a 135M model with 24 examples).

    python bench/profile_fix.py                       # a cold run under cProfile (~13 min here)
    python bench/profile_fix.py --prof P --cache-log C --fix-json F   # table a run made before

The run is ``bench_fix.py``'s first one (SmolLM2-135M, the NQ-open oracle file, ``--quick``,
every remedy) in its own process, with an empty measurement cache, the de-quantized weights
kept and ``$POSBIAS_CACHE_LOG`` set, under ``python -m cProfile``.  The table
(``bench/results/fix-profile.json``):

* ``stages``: the seconds of each cache entry computed (the tuning part of hidden scaling and
  Ms-PoE, the calibration's tuning part, the test part), from the cache log;
* ``kernels``: the seconds inside torch's matrix products (``torch._C._nn.linear``) and its
  attention kernel (``scaled_dot_product_attention``): work no rearrangement of Python removes;
* ``passes``: calls and cumulative seconds of each kind of pass: a prompt recorded once
  (``measure.prefix.Prefix``), the batched full passes (``measure.scoring.score_batch``: Ms-PoE
  and the model as it is where no prefix serves), the dummy documents' passes after the shared
  prefix (``Prefix.run``) and the last rows scored on a recorded prompt
  (``score_after_prefix``);
* ``repeated_recordings``: prompts recorded more than once (the recordings less the distinct
  prompts of the two parts) and their share of the recording time: the most that recording
  each prompt once could save, bit for bit;
* ``kernel_floor_s``: the kernel seconds less every repeated recording's whole time, a lower
  bound on the kernel seconds of the same computation done with each prompt recorded once.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_report import _weights_dir  # bench/, beside this script

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "liu2023" / "nq-open-oracle.jsonl.gz"
MODEL = "smollm2-135m"
TARGET_S = 300.0
PASSES = {"prompt_recordings": ("posbias_nb/measure/prefix.py", "__init__"),
          "batched_full_passes": ("posbias_nb/measure/scoring.py", "score_batch"),
          "dummy_passes_after_prefix": ("posbias_nb/measure/prefix.py", "run"),
          "last_rows_after_prefix": ("posbias_nb/measure/prefix.py", "score_after_prefix")}
KERNELS = {"linear": "<built-in method torch._C._nn.linear>",
           "attention": "<built-in method torch._C._nn.scaled_dot_product_attention>"}
STAGES = {("fix-tune", 0): "tuning: hidden scaling and Ms-PoE",
          ("fix-tune", 1): "tuning: attention calibration",
          ("fix-test", 0): "test part"}


def _run(d: Path):
    env = dict(os.environ, POSBIAS_CACHE_DIR=str(d / "cache"), POSBIAS_WEIGHTS_DIR=_weights_dir(),
               HF_HUB_OFFLINE="1", POSBIAS_CACHE_LOG=str(d / "cache.log"))
    (d / "cache").mkdir()
    cmd = [sys.executable, "-m", "cProfile", "-o", str(d / "fix.prof"), "-m", "posbias_nb",
           "fix", "--model", MODEL, "--data", str(DATA), "--quick", "--quiet", "--out",
           str(d / "out")]
    load = os.getloadavg()[0]
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    return d / "fix.prof", d / "cache.log", d / "out" / "fix.json", \
        round(time.perf_counter() - t, 1), round(load, 2)


def table(prof, cache_log, fix_json) -> dict:
    st = pstats.Stats(str(prof))
    total = max(v[3] for v in st.stats.values())  # the outermost frame's cumulative time
    kernels, passes = {}, {}
    for (file, _, fn), (cc, nc, tt, ct, _) in st.stats.items():
        for k, name in KERNELS.items():
            if file == "~" and fn == name:
                kernels[k] = round(tt, 1)
        for k, (f, name) in PASSES.items():
            if file.endswith(f) and fn == name:
                passes[k] = {"calls": int(nc), "seconds": round(ct, 1)}
    if set(kernels) != set(KERNELS) or set(passes) != set(PASSES):
        raise ValueError(f"the profile lacks {set(KERNELS) - set(kernels)} "
                         f"{set(PASSES) - set(passes)}")
    stages, seen = {}, {}
    for line in Path(cache_log).read_text().splitlines():
        ev = json.loads(line)
        if ev["event"] == "computed":
            i = seen.get(ev["ns"], 0)
            seen[ev["ns"]] = i + 1
            stages[STAGES.get((ev["ns"], i), f"{ev['ns']} #{i}")] = ev["seconds"]
    fx = json.loads(Path(fix_json).read_text())
    slots = len(fx["meta"]["gold_slots"])
    distinct = slots * (len(fx["split"]["tune"]) + len(fx["split"]["test"]))
    rec = passes["prompt_recordings"]
    repeated = rec["calls"] - distinct
    rep_s = round(rec["seconds"] * repeated / rec["calls"], 1)
    ksum = round(sum(kernels.values()), 1)
    return {"profiled_seconds": round(total, 1), "stages": stages,
            "kernels": dict(kernels, total=ksum), "passes": passes,
            "distinct_prompts": distinct,
            "repeated_recordings": {"count": repeated, "seconds": rep_s},
            "kernel_floor_s": round(ksum - rep_s, 1), "target_s": TARGET_S}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prof"), ap.add_argument("--cache-log"), ap.add_argument("--fix-json")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "fix-profile.json"))
    a = ap.parse_args(argv)
    run = {}
    with tempfile.TemporaryDirectory() as d:
        if a.prof:
            prof, log, fj = a.prof, a.cache_log, a.fix_json
        else:
            prof, log, fj, sec, load = _run(Path(d))
            run = {"wall_seconds": sec, "load_average_before": load}
        out = {"command": f"python -m cProfile -m posbias_nb fix --model {MODEL} --data "
                          f"nq-open-oracle.jsonl.gz --quick",
               "cache": "empty measurement cache, de-quantized weights present", **run,
               **table(prof, log, fj), "cpus": os.cpu_count(),
               "cpu": platform.processor() or platform.machine(),
               "date": time.strftime("%Y-%m-%d")}
    Path(a.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
