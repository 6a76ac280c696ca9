"""The pipeline study's statistics: recall@k with its interval, each arm's gain per question,
the exact McNemar test, and the design's verdicts per setting (:func:`decisions`)."""
from __future__ import annotations

import numpy as np

from .... import stats
from .config import _K_MAX, ARMS, SHUFFLES, _checked
from .measurements import retrieve

__all__ = ["recall", "gains", "mcnemar_p", "decisions"]


def recall(retriever: str, k: int | None = None, select=None) -> tuple[float, float, float]:
    """Recall@k of ``retriever`` (the share of questions whose gold passage is among its top
    ``k``, default the design's), over every question of the file or over ``select``, with its
    Wilson 95% interval: ``(share, low, high)``."""
    k = int(_checked()["k"] if k is None else k)
    if not 1 <= k <= _K_MAX:
        raise ValueError(f"k must lie in 1..{_K_MAX}, got {k!r}")
    r = np.asarray(retrieve(retriever)["gold_rank"])
    if select is not None:
        r = r[np.asarray(select, dtype=np.int64)]
    hit = (r >= 0) & (r < k)
    return stats.proportion_interval(int(hit.sum()), int(hit.size))


def gains(res) -> dict:
    """Per question, each arm's gain over the retriever's order (log p under the arm minus
    under the retriever's order), and ``"shuffles"``, the mean of the four shuffles' gains:
    ``{arm: (questions,)}``."""
    lp = np.asarray(res["logprob"], dtype=float)
    out = {a: lp[i] - lp[0] for i, a in enumerate(ARMS)}
    out["shuffles"] = np.mean([out[a] for a in SHUFFLES], axis=0)
    return out


def mcnemar_p(a, b) -> float:
    """The exact McNemar test's two-sided p of paired 0/1 outcomes (binomial on the discordant
    pairs; 1.0 when there are none)."""
    from scipy.stats import binomtest

    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    n10, n01 = int(np.sum(a & ~b)), int(np.sum(~a & b))
    return 1.0 if n10 + n01 == 0 else float(binomtest(n10, n10 + n01, 0.5).pvalue)


def decisions(results: dict) -> dict:
    """The design's verdicts per setting from :func:`run`'s results (``{(model, retriever):
    run(model, retriever)}``): ``primary`` (one-sided bounds, verdict, permutation p,
    detectable effect at the realised spread, questions needed for 0.3 and 0.5 nats),
    ``secondary`` (:func:`posbias_nb.stats.holm_family`), ``answers`` (each arm's accuracy,
    Wilson; the paired difference, Newcombe, its verdict and the exact McNemar p), ``recall``
    (the setting's questions, Wilson), ``n``, ``n_retrieved``."""
    d = _checked()
    alpha = float(d["alpha"])
    k = int(d["k"])
    out = {}
    for (model, retriever), res in results.items():
        g = gains(res)
        x = g["primary"]
        n = int(x.size)
        iv = stats.one_sided_bounds(x, 1 - alpha)
        sd = float(np.std(x, ddof=1))
        primary = {"interval": iv, "two_sided": stats.mean_interval(x),
                   "verdict": stats.decide(iv),
                   "p_perm": stats.paired_test(x, np.zeros_like(x), "greater").pvalue,
                   "sd": sd, "n": n, "detectable": stats.detectable_effect(sd, n, alpha),
                   "needed": {e: stats.units_needed(e, sd, alpha) for e in (0.3, 0.5)}}
        gr = np.asarray(res["gold_rank"])
        found = (gr >= 0) & (gr < k)

        def subset(mask):
            return dict(x=x[mask], testable=int(mask.sum()) >= 3)

        fam = {"curve-order": dict(x=g["curve-order"]),
               "prior-measured": dict(x=g["prior-measured"]),
               "primary - shuffles": dict(x=x - g["shuffles"]),
               "primary | gold retrieved": subset(found),
               "primary | gold not retrieved": subset(~found)}
        for c in fam.values():
            if not c.get("testable", True) and c["x"].size < 2:
                c["x"] = None
        ok = np.asarray(res["correct"], dtype=bool)
        diff = stats.paired_proportion_interval(ok[1].astype(int), ok[0].astype(int))
        answers = {"retriever": stats.proportion_interval(int(ok[0].sum()), n),
                   "primary": stats.proportion_interval(int(ok[1].sum()), n),
                   "primary - retriever": diff, "verdict": stats.decide(diff),
                   "p_mcnemar": mcnemar_p(ok[1], ok[0]),
                   "discordant": (int(np.sum(ok[1] & ~ok[0])), int(np.sum(~ok[1] & ok[0])))}
        out[(model, retriever)] = {
            "primary": primary, "secondary": stats.holm_family(fam, alpha),
            "answers": answers,
            "recall": stats.proportion_interval(int(found.sum()), n),
            "gains": {a: stats.mean_interval(v) for a, v in g.items() if a != "retriever"},
            "n": n, "n_retrieved": int(found.sum())}
    return out
