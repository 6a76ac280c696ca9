"""``posbias fix``'s prompt remedies judged: the theory's comparisons decided with Holm's
correction, and how often each ranker puts the gold passage first."""
from __future__ import annotations

import numpy as np
from .... import stats
from .config import THEORY, json_key

__all__ = ["theory_settings", "theory_family", "ranker_top1"]


def theory_settings(remedies) -> list:
    """The settings the theory's comparisons score (``[(name, setting)]``), where every remedy
    they name is among ``remedies``; else none."""
    need = {"curve-order", "prior-order", "long-context-reorder", "lost-in-the-middle-ranker"}
    if not need <= set(remedies):
        return []
    r = THEORY["ranker"]
    return [("curve-order", {"ranker": r}), ("prior-order", {"ranker": r, "prior": "born"}),
            ("prior-order", {"ranker": r, "prior": "measured"}),
            ("long-context-reorder", {"ranker": r}), ("lost-in-the-middle-ranker", {"ranker": r})]


def _arm(name) -> tuple:
    r = THEORY["ranker"]
    if name.startswith("prior-order:"):
        return ("prior-order", {"ranker": r, "prior": name.split(":")[1]})
    return (name, {"ranker": r})


def theory_family(change, settings, alpha: float = 0.05) -> dict:
    """The theory's comparisons (:data:`THEORY`), decided by Holm's correction
    (:func:`posbias_nb.stats.holm_family`): ``change`` ``(settings, examples)`` is each
    setting's mean all-slot change of log p per example, ``settings`` their ``(name, setting)``.
    Each claim's ``x`` is the paired difference per example; non-inferiority is
    ``x > -margin``, better is ``x > 0``."""
    from .... import stats

    idx = {(n, json_key(s)): i for i, (n, s) in enumerate(settings)}
    claims, diffs = {}, {}
    for a, b, kind in THEORY["claims"]:
        ia, ib = (idx[(n, json_key(s))] for n, s in (_arm(a), _arm(b)))
        x = np.asarray(change[ia]) - np.asarray(change[ib])
        name = f"{a} vs {b} ({kind})"
        diffs[name] = x
        claims[name] = dict(x=x, threshold=-THEORY["margin"] if kind == "non-inferior" else 0.0,
                            direction="greater")
    fam = stats.holm_family(claims, alpha=alpha)
    out = {}
    for name, v in fam.items():
        e, lo, hi = stats.mean_interval(diffs[name])
        out[name] = {"difference": {"estimate": float(e), "low": float(lo), "high": float(hi)},
                     "threshold": claims[name]["threshold"], "verdict": v["verdict"],
                     "p_holm": float(v["p_holm"]) if "p_holm" in v else None}
    return out


def ranker_top1(top1, example, rk) -> dict:
    """How often each ranker puts the gold passage first: ``{ranker: {"hits", "n", "share"
    (estimate, low, high: Wilson over examples, each example the mean of its prompts,
    :func:`posbias_nb.stats.unit_proportion_interval`)}}``."""
    top1 = np.asarray(top1, dtype=bool)
    ex = np.asarray(example)
    units = np.unique(ex)
    out = {}
    for i, r in enumerate(rk):
        e, lo, hi = stats.unit_proportion_interval([top1[i, ex == u].mean() for u in units])
        out[r] = {"hits": int(top1[i].sum()), "n": int(top1[i].size), "units": int(units.size),
                  "share": {"estimate": float(e), "low": float(lo), "high": float(hi)}}
    return out
