"""Benchmark of theory.influence: the O(L*H) suffix-sum recursion against the dense matrix power.

Run: .venv/bin/python bench/bench_theory.py   (writes bench/results/theory.json)

It measures, in one run:
1. the time of `influence(L, H)` against `np.linalg.matrix_power(N, H)[-1]` at growing L, and their ratio;
2. `influence(10**6, 64)` (pure attention) and `influence(10**5, 200, alpha=0.5)` (large depth).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from posbias_nb import theory


def best_of(f, repeat=3):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        ts.append(time.perf_counter() - t0)
    return min(ts), out


def main() -> dict:
    H, alpha = 12, 0.5
    rows = []
    print(f"{'L':>6} {'influence [s]':>14} {'dense power [s]':>16} {'ratio':>8} {'max rel diff':>13}")
    for L in (256, 512, 1024, 2048, 4096):
        t_fast, fast = best_of(lambda: theory.influence(L, H, alpha=alpha))
        N = (1 - alpha) * np.eye(L) + alpha * theory.cesaro(L)
        t_dense, dense = best_of(lambda: np.linalg.matrix_power(N, H)[-1], repeat=1 if L > 2048 else 3)
        mask = dense > 1e-250
        diff = float(np.max(np.abs(fast[mask] - dense[mask]) / dense[mask]))
        rows.append(dict(L=L, depth=H, t_influence=t_fast, t_dense=t_dense, ratio=t_dense / t_fast,
                         max_rel_diff=diff))
        print(f"{L:>6} {t_fast:>14.4f} {t_dense:>16.4f} {t_dense / t_fast:>8.0f} {diff:>13.1e}")
    t_big, row = best_of(lambda: theory.influence(10**6, 64), repeat=1)
    print(f"influence(10**6, 64): {t_big:.2f} s, sum = {row.sum():.15f}")
    t_deep, row2 = best_of(lambda: theory.influence(10**5, 200, alpha=0.5), repeat=1)
    print(f"influence(10**5, 200, alpha=0.5): {t_deep:.2f} s, sum = {row2.sum():.15f}, "
          f"finite: {bool(np.all(np.isfinite(row2)))}")
    result = dict(dense_vs_influence=rows, t_influence_1e6_64=t_big, t_influence_1e5_200=t_deep)
    out = Path(__file__).parent / "results" / "theory.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
