"""The fast path's statistics: intervals, the gold-slot groups, the landing gains and their check,
the carried remedy's test claims."""
from __future__ import annotations

import json
import numpy as np
from .... import metrics, stats
from ...._validate import positive_int
from .config import RANKED

__all__ = ["landing_gains", "landing_check"]


def as_interval(t) -> dict:
    e, lo, hi = (float(v) for v in t)
    return {"estimate": e, "low": lo, "high": hi}

def gold_slot_groups(n_pos: int) -> dict:
    """The middle gold slots (:func:`posbias_nb.metrics.regions` of the gold slots) and the
    two edge ones, as ``posbias fix`` reads them."""
    r = metrics.regions(n_pos)
    return {"middle": list(range(n_pos))[r.middle], "edges": [0, n_pos - 1]}

def by_slot(values, example, slot, n_ex: int, n_pos: int) -> np.ndarray:
    M = np.full((n_ex, n_pos), np.nan)
    M[np.asarray(example), np.asarray(slot)] = values
    return M

def landing_gains(base, landing, positions, n_slots: int) -> dict:
    """Estimated per-example gains of placements, from the model as it is (module docstring).

    ``base`` ``(examples, J)``: log p with the gold passage at each gold slot ``positions``
    (``J`` increasing 0-based slots of ``n_slots``); ``landing`` ``(settings, examples, J)``:
    the slot the gold passage lands in under each setting when it was asked at gold slot ``j``.
    Returns ``{"all", "middle", "edges"}``, each ``(settings, examples)``: the mean over the
    gold slots (all of them, the middle ones, the first and last) of the estimated log p at the
    landing slot less the measured log p at the slot asked.

    >>> g = landing_gains([[-3.0, -5.0, -1.0]], [[[2, 2, 2]]], [0, 1, 3], 4)
    >>> [round(float(v), 3) for v in g["all"][0]]  # -3 at slot 2 (between -5 and -1) vs -3
    [0.0]
    >>> landing_gains([[-3.0, -5.0, -1.0]], [[[3, 3, 3]]], [0, 1, 3], 4)["all"].tolist()
    [[2.0]]
    """
    base = np.asarray(base, dtype=float)
    landing = np.asarray(landing)
    pos = np.asarray(positions, dtype=float)
    n_slots = positive_int("n_slots", n_slots, minimum=2)
    if base.ndim != 2 or base.shape[1] != len(pos):
        raise ValueError(f"base must be (examples, {len(pos)} gold slots), got {base.shape}")
    if landing.ndim != 3 or landing.shape[1:] != base.shape:
        raise ValueError(f"landing must be (settings, {base.shape[0]}, {base.shape[1]}), got "
                         f"{landing.shape}")
    if not np.all(np.diff(pos) > 0) or pos[0] < 0 or pos[-1] >= n_slots:
        raise ValueError(f"positions must increase within 0..{n_slots - 1}, got {positions!r}")
    if landing.size and (landing.min() < 0 or landing.max() >= n_slots):
        raise ValueError(f"landing slots must lie in 0..{n_slots - 1}, got "
                         f"{int(landing.min())}..{int(landing.max())}")
    if not np.all(np.isfinite(base)):
        raise ValueError("base holds a non-finite log p")
    est = np.stack([np.stack([np.interp(landing[s, e], pos, base[e])
                              for e in range(base.shape[0])]) for s in range(landing.shape[0])]) \
        if landing.size else np.zeros(landing.shape)
    d = est - base[None]
    sl = gold_slot_groups(len(pos))
    return {"all": d.mean(-1), "middle": d[..., sl["middle"]].mean(-1),
            "edges": d[..., sl["edges"]].mean(-1)}

def landing_check(tuning: dict, base, positions, n_slots: int) -> dict:
    """How well the landing-slot estimate tracks scored tuning gains: for a run of the full
    path's :func:`posbias_nb.experiments.remedy.fix.tune_settings` (``tuning``, whose ``prompt.gold_slot``
    holds each scored prompt's landing slot) and its base log p ``(examples, gold slots)``.
    Per ranked setting: the scored and the estimated mean all-slot gain; over the settings,
    Spearman's rho between them, and whether the estimate carries the same remedy and setting
    as the scores.  Per example and setting: the estimate's error (scored less estimated), its
    mean with a 95% t interval clustered by example (the mean over settings per example)."""
    base = np.asarray(base, dtype=float)
    E, J = base.shape
    rows, scored, est_all = [], [], []
    gold = (tuning.get("prompt") or {}).get("gold_slot") or {}
    for name in RANKED:
        t = tuning.get(name)
        if not isinstance(t, dict) or not t.get("all_gain_by_example"):
            continue
        for j, st in enumerate(t["grid"]):
            k = f"{name}:{json.dumps(st, sort_keys=True)}"
            if k not in gold:
                continue
            land = np.asarray(gold[k], dtype=np.int64).reshape(1, E, J)
            g = landing_gains(base, land, positions, n_slots)["all"][0]
            sc = np.asarray(t["all_gain_by_example"][j], dtype=float)
            rows.append({"remedy": name, "setting": dict(st), "scored": float(sc.mean()),
                         "estimated": float(g.mean())})
            scored.append(sc)
            est_all.append(g)
    if len(rows) < 2:
        raise ValueError("the tuning result holds fewer than 2 scored ranked settings")
    S, G = np.array(scored), np.array(est_all)
    err = (S - G).mean(0)  # per example, over the settings
    from ....metrics import spearman

    def best(key):
        i = max(range(len(rows)), key=lambda i: rows[i][key])
        return (rows[i]["remedy"], rows[i]["setting"]) if rows[i][key] > 0 else None

    return {"settings": rows, "spearman": float(spearman([r["scored"] for r in rows],
                                                          [r["estimated"] for r in rows])),
            "error": as_interval(stats.mean_interval(err)), "examples": int(E),
            "same_carried": best("scored") == best("estimated"),
            "carried_scored": best("scored"), "carried_estimated": best("estimated")}

def judged_claims(res, carried, setting, part) -> dict:
    """The test part's statistics of the carried remedy, with the keys of
    :func:`posbias_nb.experiments.remedy.fix.evaluate`'s for a prompt remedy (its page and figure
    read them); no Holm family (one remedy is tested)."""
    n_pos = len(part["positions"])
    n_ex = len(part["items"])
    sl = gold_slot_groups(n_pos)

    def mat(name, dtype=float):
        return by_slot(np.asarray(res[name], dtype=dtype), res["example"], res["slot"], n_ex,
                        n_pos)

    lp, ok, b_lp, b_ok = mat("logprob"), mat("correct"), mat("base_logprob"), mat("base_correct")
    d = lp - b_lp
    every, mid = d.mean(1), d[:, sl["middle"]].mean(1)
    sec = np.asarray(res["seconds"], dtype=float)
    iv = as_interval

    def per_slot(M):
        return [iv(stats.mean_interval(M[:, j])) for j in range(n_pos)]

    def acc(M):
        return [iv(stats.proportion_interval(int(M[:, j].sum()), n_ex)) for j in range(n_pos)]

    return {"base": {"logprob": per_slot(b_lp), "accuracy": acc(b_ok)}, "n_examples": n_ex,
            carried: {
                "logprob": per_slot(lp), "logprob_change": per_slot(d), "accuracy": acc(ok),
                "middle_gain_per_example": [float(v) for v in mid],
                "middle_gain": iv(stats.mean_interval(mid)),
                "all_gain_per_example": [float(v) for v in every],
                "all_gain": iv(stats.mean_interval(every)),
                "edge_change": iv(stats.mean_interval(d[:, sl["edges"]].mean(1))),
                "accuracy_change": [iv(stats.paired_proportion_interval(ok[:, j], b_ok[:, j]))
                                    for j in range(n_pos)],
                "base_logprob": per_slot(b_lp), "base_accuracy": acc(b_ok),
                "accuracy_kind": "best_subspan_em of a greedy generation (Liu et al.)",
                "gold_slot": [int(v) + 1 for v in np.asarray(res["gold_slot"])],
                "cost": {"nll_change": None, "nll_base": None,
                         "nll_reason": "not measured: a prompt remedy leaves the model as it "
                                       "is, so its next-token loss on text cannot move",
                         # the scoring pass, and one short pass a document to rank by the
                         # question likelihood
                         "passes": 1 + (int(part["documents"]) if setting["ranker"] ==
                                        "question-likelihood" else 0),
                         "latency_ratio": iv(tuple(np.exp(v) for v in stats.mean_interval(
                             np.log(sec[:, 1] / sec[:, 0])))),
                         "seconds_base": float(np.median(sec[:, 0])),
                         "seconds": float(np.median(sec[:, 1])), "peak_mib_change": None,
                         "windows": 0, "prompts": int(len(sec)),
                         "latency_includes": "the ranking, the placement and the scoring pass"},
                "verdict": None, "adjusted": None, "p_holm": None, "level": None}}
