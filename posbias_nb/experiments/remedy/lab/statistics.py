"""The remedies lab's statistics, over seeds (the unit of replication is the seed): steps to a
threshold, the middle against the edges, arm differences, the residual rollout's predicted
profile, and the claims' rules and verdicts."""
from __future__ import annotations

import numpy as np
from ...base.design import check, decide_rule, rule_effect
from .config import DESIGN

__all__ = ["steps_to_threshold", "middle_and_edges", "units", "contrast", "middle_vs_edges", "predicted_profile", "predicted_ratio", "arm_difference", "decide", "effect"]


def steps_to_threshold(curve, steps, threshold: float = 0.5) -> np.ndarray:
    """First checkpoint step at which each position's accuracy reaches ``threshold``.

    ``curve`` (C, P) and ``steps`` (C,) as returned by :func:`train_run`.  A position that never
    gets there is right-censored at ``steps[-1] + (steps[-1] - steps[-2])`` (one checkpoint
    interval past the end), so it counts as slower than any that did (chapter
    :ref:`ch-remedies`).
    """
    c = np.asarray(curve, float)
    s = np.asarray(steps, float)
    if c.ndim != 2 or s.ndim != 1 or c.shape[0] != s.size or s.size < 2:
        raise ValueError(f"curve (C, P) and steps (C,) with C >= 2 needed, got {c.shape}, "
                         f"{s.shape}")
    hit = c >= threshold
    censor = s[-1] + (s[-1] - s[-2])
    first = np.where(hit.any(0), s[np.argmax(hit, axis=0)], censor)
    return first


def claim_rule(claim: str) -> dict:
    check(DESIGN)
    rules = DESIGN.as_dict()["rules"]
    if claim not in rules:
        raise ValueError(f"the remedies design declares no rule {claim!r}; declared: "
                         f"{', '.join(sorted(rules))}")
    return rules[claim]


def decide(claim: str, interval, **given) -> str:
    """The verdict word of ``interval`` under the design's declared rule ``claim``
    (:data:`DESIGN` ``rules``; :func:`posbias_nb.experiments.base.design.decide_rule`); ``given``
    supplies what a data-set rule names (``factorial=``, ``predicted=``).  Chapter
    :ref:`ch-remedies`.  ValueError for a claim the design does not declare, or a missing or
    unexpected given value."""
    return decide_rule(claim_rule(claim), interval, **given)


def effect(claim: str, interval, **given) -> dict:
    """The verdict row's ``effect`` under the declared rule ``claim``
    (:func:`posbias_nb.experiments.base.design.rule_effect`)."""
    return rule_effect(claim_rule(claim), interval, **given)


def middle_and_edges(position) -> tuple[np.ndarray, np.ndarray]:
    """Indices into the evaluated answer positions: the middle, and the two ends.

    The book's one middle (:func:`posbias_nb.metrics.regions`) applied to the ``P`` evaluated
    slots: the central half of them, against the first and the last slot.  Declared from ``P``
    alone, before any data (chapter :ref:`ch-remedies`); with the chapter's eight positions
    1, 10, 18, 27, 35, 44, 52, 61 the middle is 18, 27, 35, 44.

    >>> middle_and_edges([1, 10, 18, 27, 35, 44, 52, 61])
    (array([2, 3, 4, 5]), array([0, 7]))
    """
    from ....metrics import regions

    pos = np.asarray(position)
    if pos.ndim != 1 or pos.size < 3:
        raise ValueError(f"need at least 3 evaluated positions, got {pos.shape}")
    r = regions(pos.size)
    return r.indices("middle"), np.r_[r.indices("first"), r.indices("last")]


def units(results, what: str = "auc", per_seed: bool = True) -> np.ndarray:
    """Per-seed numbers at every evaluated position: shape (seeds, positions); with
    ``per_seed=False`` one row per seed x held-out example (rows of one seed share an
    initialization, so they are *not* independent units).

    ``what``: ``"auc"`` the accuracy averaged over the checkpoints (the area under the learning
    curve, a learning-speed score in [0, 1]); ``"final"`` the correctness after training;
    ``"grad"`` the norm of the loss gradient at the answer token at init.  Rows of two arms
    trained with the same seeds are paired (same init, same held-out examples).
    Chapter :ref:`ch-remedies`.
    """
    key = {"auc": "curve_correct", "final": "correct", "grad": "grad_init_value"}
    if what not in key:
        raise ValueError(f"what must be one of {', '.join(key)}, got {what!r}")
    out = []
    for r in results:
        x = np.asarray(r[key[what]], float)
        x = (x.mean(0) if what == "auc" else x).T
        out.append(x.mean(0, keepdims=True) if per_seed else x)
    return np.concatenate(out)


def contrast(u, position, ratio: bool = False) -> np.ndarray:
    """Per row of ``u`` (seeds, positions): mean over the middle minus mean over the two ends
    (:func:`middle_and_edges`), or with ``ratio`` middle over ends.

    >>> contrast([[1.0, 0.5, 0.5, 0.5, 0.5, 1.0]], [1, 2, 3, 4, 5, 6]).tolist()
    [-0.5]
    """
    x = np.asarray(u, float)
    if x.ndim != 2 or x.shape[1] != np.asarray(position).size:
        raise ValueError(f"u must be (seeds, positions) with {np.asarray(position).size} "
                         f"positions, got {x.shape}")
    mid, edge = middle_and_edges(position)
    m, e = x[:, mid].mean(1), x[:, edge].mean(1)
    return m / e if ratio else m - e


def middle_vs_edges(u, position, ratio: bool = False, level: float = 0.95):
    """(estimate, low, high): Student *t* interval over seeds
    (:func:`posbias_nb.stats.mean_interval`) of the per-seed :func:`contrast`, middle minus ends
    (or their ratio).

    ``u`` has one row per seed (:func:`units` with ``per_seed=True``): the seeds are the
    independent units; a percentile bootstrap over five seeds covers only ~84%, and resampling
    seed x example rows would ignore that the rows of one seed share an init.
    Chapter :ref:`ch-remedies`.
    """
    from ....stats import mean_interval

    return mean_interval(contrast(u, position, ratio), level=level)


def arm_difference(u_a, u_b, position, where: str = "middle", level: float = 0.95):
    """(estimate, low, high): *t* interval over seeds of the paired difference between two arms
    trained with the same seeds (same init, same held-out examples), seed by seed: of their
    means over the ``"middle"`` or the ``"edges"`` positions (:func:`middle_and_edges`), or,
    for ``"gap"``, of their middle-minus-ends gaps (positive: arm ``a`` has the smaller valley).
    Chapter :ref:`ch-remedies`.

    >>> a = [[1.0, 0.9, 1.0], [1.0, 0.8, 1.0], [1.0, 0.9, 1.0]]
    >>> b = [[1.0, 0.5, 1.0], [1.0, 0.6, 1.0], [1.0, 0.4, 1.0]]
    >>> [round(v, 2) for v in arm_difference(a, b, [1, 2, 3], "gap")]   # 3 seeds: wide
    [0.37, -0.01, 0.75]
    """
    from ....stats import mean_interval

    if where not in ("middle", "edges", "gap"):
        raise ValueError(f"where must be 'middle', 'edges' or 'gap', got {where!r}")
    a, b = np.asarray(u_a, float), np.asarray(u_b, float)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"arms are not paired: shapes {a.shape} and {b.shape}")
    mid, edge = middle_and_edges(position)
    if where == "gap":
        d = contrast(a, position) - contrast(b, position)
    else:
        idx = mid if where == "middle" else edge
        d = a[:, idx].mean(1) - b[:, idx].mean(1)
    return mean_interval(d, level=level)


def predicted_profile(lambdas, length: int) -> np.ndarray:
    r"""The theory's prediction: residual-aware rollout with uniform causal kernels and the given
    :math:`\lambda_t` (``rollout.rollout``; chapter :ref:`ch-rollout`, :eq:`eq-rem-rollout` in
    :ref:`ch-remedies`)."""
    from ....rollout import rollout, uniform_causal

    lam = np.asarray(lambdas, float)
    A = uniform_causal(int(length))
    return rollout([A] * lam.size, lam)


def predicted_ratio(lambdas, position, length: int) -> float:
    """The rollout's middle-over-ends ratio of the gradient at the evaluated answer positions
    (:func:`predicted_profile` read at ``position``, middle and ends of :func:`middle_and_edges`).

    >>> round(predicted_ratio([1.0], [1, 2, 3, 4, 5, 6], 8), 6)   # one uniform layer: flat
    1.0
    """
    pred = predicted_profile(lambdas, length)
    return float(contrast(pred[np.asarray(position)][None], position, ratio=True)[0])
