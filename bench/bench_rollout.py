"""Benchmark: the last-row rollout against full matrix-product chains.

``rollout.rollout(kernels, lambdas)`` pulls e_L through the stack with T vector-matrix products,
O(T L^2).  The alternatives form the whole P = R_T ... R_1, O(T L^3):

* ``full``   -- ``rollout.rollout(..., full=True)``: P <- (1-l) P + l (A_t @ P), one matmul a layer;
* ``direct`` -- the textbook chain: build every R_t = (1-l) I + l A_t and multiply them out.

All three are run in one process on the same kernels (T = 24 different ALiBi-like kernels per
length), the last rows are checked to agree, and the best of several repeats is reported.
BLAS runs single-threaded by default (set OPENBLAS_NUM_THREADS / OMP_NUM_THREADS to change it).

Run:  .venv/bin/python bench/bench_rollout.py [--lengths 64 128 ...] [--depth 24]
Writes bench/results/rollout.json and prints a table.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

# one BLAS thread unless told otherwise: the ratio should measure the algorithms, not how the
# matrix products of the full chain share the cores with whatever else runs on the machine
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from posbias_nb import __version__, rollout  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "rollout.json"


def best_time(fn, min_total=0.3, min_repeats=3, max_repeats=50):
    """Best wall time of ``fn()`` over repeats (at least ``min_repeats`` and ``min_total`` s)."""
    times, out = [], None
    while len(times) < max_repeats:
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= min_repeats and sum(times) >= min_total:
            break
    return min(times), len(times), out


def direct_chain(kernels, lambdas):
    L = kernels.shape[1]
    eye = np.eye(L)
    P = eye
    for A, lam in zip(kernels, lambdas):
        P = ((1.0 - lam) * eye + lam * A) @ P
    return P[-1]


def make_stack(L, T, rng):
    # per-layer ALiBi kernels with a random slope scale: realistic, different in every layer
    return np.stack([rollout.alibi(L, 8, scale=float(s)) for s in rng.uniform(0.0, 2.0, T)])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256, 512, 1024])
    ap.add_argument("--depth", type=int, default=24)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)

    rng = np.random.default_rng(0)
    T = args.depth
    rows = []
    print(f"rollout benchmark: T = {T} layers, one kernel per layer, best of repeats")
    print(f"{'L':>6} {'last row [ms]':>14} {'full=True [ms]':>15} {'direct [ms]':>12} "
          f"{'full/last':>10} {'direct/last':>12} {'max |diff|':>11}")
    for L in args.lengths:
        K = make_stack(L, T, rng)
        lam = rng.uniform(0.05, 0.95, T)
        t_last, n_last, v_last = best_time(lambda: rollout.rollout(K, lam))
        t_full, n_full, P_full = best_time(lambda: rollout.rollout(K, lam, full=True))
        t_dir, n_dir, v_dir = best_time(lambda: direct_chain(K, lam))
        diff = float(max(np.abs(v_last - P_full[-1]).max(), np.abs(v_last - v_dir).max()))
        if diff > 1e-12:
            raise SystemExit(f"rollouts disagree at L = {L}: max |diff| = {diff:.3e}")
        row = dict(L=L, T=T, last_row_s=t_last, full_s=t_full, direct_s=t_dir,
                   ratio_full=t_full / t_last, ratio_direct=t_dir / t_last,
                   repeats=dict(last_row=n_last, full=n_full, direct=n_dir), max_abs_diff=diff)
        rows.append(row)
        print(f"{L:>6} {1e3 * t_last:>14.3f} {1e3 * t_full:>15.3f} {1e3 * t_dir:>12.3f} "
              f"{row['ratio_full']:>10.1f} {row['ratio_direct']:>12.1f} {diff:>11.1e}")

    meta = dict(
        benchmark="rollout: last row (vector-matrix) vs full matrix-product chains",
        package_version=__version__, numpy=np.__version__, python=platform.python_version(),
        machine=platform.machine(), cpu_count=os.cpu_count(),
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        blas_threads=os.environ.get("OPENBLAS_NUM_THREADS"),
        note="last_row and full include the package's input validation (two O(T L^2) passes); "
             "direct is the bare matrix chain without validation",
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(dict(meta=meta, results=rows), indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
