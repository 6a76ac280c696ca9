"""The confirmatory study's statistics: each arm's all-slot gain per question, and the
design's verdicts per model (:func:`decisions`)."""
from __future__ import annotations

import numpy as np

from .... import stats
from .config import ARMS, MARGIN, _checked

__all__ = ["gains", "decisions"]


def gains(res) -> dict:
    """Per question, each arm's all-slot gain (log p under the arm minus the model as it is,
    averaged over the five original gold slots): ``{arm: (questions,)}``."""
    base = np.asarray(res["base_logprob"], dtype=float)
    lp = np.asarray(res["logprob"], dtype=float)
    return {a: (lp[i] - base).mean(axis=1) for i, a in enumerate(ARMS)}


def decisions(results: dict) -> dict:
    """The design's verdicts per model from :func:`run`'s results (``{model: run(model)}``):
    ``primary`` (one-sided bounds, verdict, permutation p, detectable effect at the measured
    spread, questions needed for 0.5 and 1.0 nats), ``ceiling`` (the same), ``secondary``
    (:func:`posbias_nb.stats.holm_family`), ``accuracy`` (Wilson over questions for the primary
    and the ceiling, their paired difference), ``top1`` (BM25's rate of the gold passage first, Wilson over questions)."""
    d = _checked()
    alpha = float(d["alpha"])
    out = {}
    for model, res in results.items():
        g = gains(res)
        n = int(g["primary"].size)

        def one_sided(x):
            iv = stats.one_sided_bounds(x, 1 - alpha)
            sd = float(np.std(x, ddof=1))
            return {"interval": iv, "two_sided": stats.mean_interval(x),
                    "verdict": stats.decide(iv),
                    "p_perm": stats.paired_test(x, np.zeros_like(x), "greater").pvalue,
                    "sd": sd, "n": n,
                    "detectable": stats.detectable_effect(sd, n, alpha),
                    "needed": {e: stats.units_needed(e, sd, alpha) for e in (0.5, 1.0)}}

        fam = {"haystack": dict(x=g["haystack"]), "curve-order": dict(x=g["curve-order"]),
               "prior-born": dict(x=g["prior-born"]),
               "prior-measured": dict(x=g["prior-measured"]),
               "primary - shuffle": dict(x=g["primary"] - g["shuffle"]),
               "prior-born - curve-order": dict(x=g["prior-born"] - g["curve-order"],
                                                threshold=-MARGIN),
               "prior-measured - curve-order": dict(x=g["prior-measured"] - g["curve-order"],
                                                    threshold=-MARGIN)}
        ok = np.asarray(res["correct"], dtype=float)
        acc = {"primary": stats.unit_proportion_interval(ok[0].mean(1)),
               "ceiling": stats.unit_proportion_interval(ok[1].mean(1)),
               "primary - ceiling": stats.mean_interval(ok[0].mean(1) - ok[1].mean(1))}
        top = np.asarray(res["top1"], dtype=bool)
        out[model] = {"primary": one_sided(g["primary"]), "ceiling": one_sided(g["ceiling"]),
                      "secondary": stats.holm_family(fam, alpha), "accuracy": acc,
                      "top1": stats.unit_proportion_interval(top.mean(1)),
                      "gains": {a: stats.mean_interval(v) for a, v in g.items()},
                      "n": n}
    return out
