"""Two chapter workers with one torch thread each, or one worker with two? (issue 33)

    python bench/bench_workers.py        (writes bench/results/workers.json; a quiet machine)

The same jobs, run twice, in fresh processes with the measurement cache off:

* ``serial``: one after the other, each process with 2 torch/BLAS threads (``make notebooks``
  with ``NB_WORKERS=1 NB_THREADS=2``);
* ``parallel``: two at a time, each with 1 thread (the default, ``NB_WORKERS=2 NB_THREADS=1``).

Two mixes, because the chapters are of both kinds: ``torch`` (Jacobian profiles of random-init
models: matrix products, where two threads already use both cores) and ``python`` (sympy
derivations, exact rationals, plots: one core each, whatever the thread setting).  Each mix is
timed ``--rounds`` times per setting, alternating, and the medians are kept.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

JOBS = {
    "torch": [
        "from posbias_nb import measure; measure.profile('gpt2', length=512, probes=4, batch=2, "
        "seed=0, progress=False)",
        "from posbias_nb import measure; measure.profile('smollm2-135m', length=384, probes=4, "
        "batch=2, seed=0, progress=False)",
    ],
    "python": [
        "from posbias_nb import theory; [theory.influence(64, 6, '1/3', exact=True) "
        "for _ in range(3)]; theory.shape_map(2048, 64, [0.1 * k for k in range(1, 10)])",
        "from posbias_nb import plots, theory; import matplotlib; matplotlib.use('Agg'); "
        "import io; [plots.force_figure(1024, {'a': theory.influence(1024, d, 0.5)}, [0.5], [0.5], "
        "'alpha')[0].savefig(io.BytesIO(), format='png') for d in (2, 4, 8, 16)]; theory.layout_influence('12*sliding:8', 400, '1/2', exact=True)",
    ],
}


def _run(code: str, threads: int) -> float:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               POSBIAS_CACHE_DIR="off", HF_HUB_OFFLINE="1", MPLBACKEND="Agg")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)
    return time.perf_counter() - t0


def serial(jobs) -> float:
    t0 = time.perf_counter()
    for j in jobs:
        _run(j, 2)
    return time.perf_counter() - t0


def parallel(jobs) -> float:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(2) as ex:
        list(ex.map(lambda j: _run(j, 1), jobs))
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "workers.json"))
    a = ap.parse_args(argv)
    out = {}
    for mix, jobs in JOBS.items():
        t = {"serial": [], "parallel": []}
        for _ in range(a.rounds):
            t["serial"].append(serial(jobs))
            t["parallel"].append(parallel(jobs))
        med = {k: statistics.median(v) for k, v in t.items()}
        out[mix] = {"seconds": {k: [round(x, 1) for x in v] for k, v in t.items()},
                    "median": {k: round(v, 1) for k, v in med.items()},
                    "parallel_over_serial": round(med["parallel"] / med["serial"], 3)}
        print(mix, out[mix], flush=True)
    Path(a.out).write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(),
        "python": platform.python_version(), "mixes": out,
        "note": "serial: one process at a time with 2 threads; parallel: two at a time with 1 "
                "thread each (bench/bench_workers.py)"}, indent=1) + "\n")


if __name__ == "__main__":
    main()
