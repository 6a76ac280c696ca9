"""The remedies lab at a bigger size (chapter ``book/remedies.md``), for machines with more time or a GPU.

Every arm of :data:`posbias_nb.experiments.remedy.lab.ARMS` (uniform, start- and edge-biased data, the
three remedies, the residual lever at 0.5 and 2), trained for more seeds and steps than the
chapter can afford on 2 CPU cores, at the chapter's size or a deeper and longer one.  Each run is
cached (``posbias_nb.cache``), so an interrupted sweep resumes.  Writes one JSON with, per arm and
seed: positions, final accuracy, learning curves, lambda at init and after training, the trained
influence profile; and per arm the summaries the chapter reports, each a t interval over seeds
(``stats.mean_interval``): middle - ends area under the learning curve (the middle of
``remedies.middle_and_edges``), and the middle share of influence (``metrics.middle_share``).

Run:  make sweep                         (defaults below; SWEEP_ARGS="..." passes options)
      .venv/bin/python bench/train_sweep.py --seeds 10 --steps 1000 --layers 4 --length 128 \
          --device cuda --out bench/results/train-sweep.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--task", default="kv")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--arms", default="all", help="comma-separated names, or 'all'")
    ap.add_argument("--workers", type=int, default=1, help="runs trained at once (processes)")
    ap.add_argument("--out", default="bench/results/train-sweep.json")
    a = ap.parse_args(argv)

    from posbias_nb import metrics, stats
    from posbias_nb.experiments.remedy import lab as train

    arms = list(train.ARMS) if a.arms == "all" else a.arms.split(",")
    cfg = dict(task=a.task, layers=a.layers, width=a.width, length=a.length, steps=a.steps,
               device=a.device)
    out = {"config": {**cfg, "seeds": a.seeds}, "arms": {}}
    t0 = time.time()
    for arm in arms:
        t = time.time()
        res = train.run_arms([arm], seeds=range(a.seeds), progress=a.workers == 1,
                             workers=a.workers, **cfg)[arm]
        pos = res[0]["position"]
        auc = train.units(res, "auc")  # (seeds, positions): the seeds are the units
        mm = np.array([metrics.middle_share(r["influence"][1:]) for r in res])
        c = train.contrast(auc, pos)
        out["arms"][arm] = {
            "position": pos.tolist(),
            "auc_middle_minus_ends": list(train.middle_vs_edges(auc, pos)) if len(res) > 1
            else [float(c[0])] * 3,
            "influence_middle_share": list(stats.mean_interval(mm)) if len(mm) > 1
            else [float(mm[0])] * 3,
            "runs": [{"seed": s, "accuracy": r["accuracy"].tolist(),
                      "curve": r["curve"].tolist(), "curve_steps": r["curve_steps"].tolist(),
                      "lambda_init": r["lambda_init"].tolist(), "lambda": r["lambda"].tolist(),
                      "influence": r["influence"].tolist()} for s, r in enumerate(res)],
        }
        print(f"{arm}: {time.time() - t:.0f} s, middle - ends AUC "
              f"{out['arms'][arm]['auc_middle_minus_ends']}", file=sys.stderr, flush=True)
    out["wall_s"] = time.time() - t0
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
