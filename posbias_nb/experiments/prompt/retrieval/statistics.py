"""The retrieval study's statistics: a run's accuracies with their intervals, Liu et al.'s outcome
classes, the outcome and prior matrices, the regions' accuracies and contrasts, the link between
the priors and the accuracy."""
from __future__ import annotations

import re
import numpy as np
from .... import metrics, stats
from ...._validate import choice
from ....measure import entry
from ....results import Result
from .config import CSV_COLUMNS, LIU_COLUMNS, LIU_OUTCOMES, _MARGIN, _UUID, _UUID_START

__all__ = ["link_stats", "as_matrix", "outcome_matrices", "paired_contrast", "prior_matrices", "edge_ratios", "region_accuracy", "region_differences", "region_pairs", "contrast_family", "ratio_interval", "liu_outcome", "run_result"]


def _ragged(lists):
    lens = np.array([len(x) for x in lists], dtype=np.int64)
    flat = np.concatenate([np.asarray(x, dtype=np.int64) for x in lists]) if lists else \
        np.zeros(0, np.int64)
    return flat, lens

def _unragged(flat, lens):
    ends = np.cumsum(lens)
    return [flat[e - n:e].tolist() for e, n in zip(ends, lens)]

def run_result(res, model, task, positions, examples, length, seed, weights, variant):
    """The :class:`~posbias_nb.results.Result` of :func:`retrieval_run` from its scores."""
    from .... import models

    info = models.describe(model)
    acc = stats.summarize(res["gold_index"], res["example"], res["correct"].astype(float), positions,
                    kind="proportion")
    prompts = _unragged(res["prompt_flat"], res["prompt_len"])
    answers = _unragged(res["answer_flat"], res["answer_len"])
    liu = variant == "liu"
    recs = []
    for i, (e, k, p, a, c) in enumerate(zip(res["example"], res["gold_index"], prompts, answers,
                                            res["correct"])):
        rec = {"example": int(e), "gold_index": int(k), "prompt_ids": p, "answer_ids": a,
               "correct": bool(c)}
        if liu:
            rec["output"] = str(res["output_text"][i])
        else:
            rec["logprob"] = float(res["logprob"][i])
        recs.append(rec)
    n_items = int(res["n_items"])
    from .... import __version__

    data = {
        "position": list(range(positions)),
        "depth": [k / (positions - 1) for k in range(positions)],
        "item": [int(x) for x in res["item"][:positions]],
        "accuracy": acc["mean"].tolist(), "accuracy_low": acc["low"].tolist(),
        "accuracy_high": acc["high"].tolist(),
    }
    if not liu:
        lp = stats.summarize(res["gold_index"], res["example"], res["logprob"], positions)
        data.update(logprob=lp["mean"].tolist(), logprob_low=lp["low"].tolist(),
                    logprob_high=lp["high"].tolist())
    data["examples"] = recs
    meta = {"model": info["name"], "weights": weights, "task": task, "variant": variant,
            "positions": positions, "examples": examples, "length": length, "seed": seed,
            "n_items": n_items if n_items >= 0 else None,
            "prompt_tokens_mean": float(np.mean(res["prompt_len"])),
            "chat_template": bool(res["chat"]), "level": 0.95,
            "interval": "accuracy: Wilson score interval per position; log-probability: "
                        "Student t over examples",
            "scoring": ("greedy generation of up to the value's tokens + "
                        f"{_MARGIN}, case-insensitive substring match" if liu else
                        "teacher-forced exact match and log-probability"),
            "version": __version__, **entry.library_versions()}
    return Result(data, meta=meta, columns=LIU_COLUMNS if liu else CSV_COLUMNS)

def liu_outcome(output: str, value: str, others=()) -> str:
    """Which of :data:`LIU_OUTCOMES` a generated ``output`` is, for the gold ``value`` and the
    prompt's ``others`` values: it contains the value (case-insensitive, Liu et al.'s rule);
    it gives another pair's value, or a UUID absent from the prompt (a retrieval error); it is
    a prefix of the value, cut by the token budget (a scoring limit); it ends in the start of
    a *different* UUID, cut by the budget (a retrieval error, :data:`LIU_RETRIEVAL_ERRORS`);
    or it holds no UUID at all (a format failure).

    Examples
    --------
    >>> v = "0b9d5e0f-1c2d-4e3f-8a9b-0c1d2e3f4a5b"
    >>> liu_outcome(' "' + v + '"', v), liu_outcome(' "0b9d5e0f-1c2d', v), liu_outcome(" ok", v)
    ('correct', 'cut short (a prefix of the value)', 'no UUID')
    >>> liu_outcome(' "77aa0c1e-5b', v)
    'a wrong UUID, cut short'
    """
    o, v = str(output).lower(), str(value).lower()
    if v in o:
        return LIU_OUTCOMES[0]
    found = _UUID.findall(o)
    if found:
        return LIU_OUTCOMES[1] if found[0] in {str(x).lower() for x in others} else LIU_OUTCOMES[2]
    tail = re.findall(r"[0-9a-f-]{4,}", o)
    if tail and v.startswith(tail[-1]) and o.rstrip().endswith(tail[-1]):
        return LIU_OUTCOMES[3]
    if _UUID_START.search(o.rstrip()):
        return LIU_OUTCOMES[4]
    return LIU_OUTCOMES[5]

def as_matrix(example, gold_index, values) -> np.ndarray:
    """Per-prompt values as an ``(E, P)`` array (example x gold position)."""
    ex, gi, v = (np.asarray(x) for x in (example, gold_index, values))
    M = np.full((int(ex.max()) + 1, int(gi.max()) + 1), np.nan)
    M[ex, gi] = v
    return M

def outcome_matrices(result: dict) -> dict:
    """``accuracy`` and ``logprob`` of a :func:`retrieval_run` result as ``(E, P)`` arrays
    (``logprob`` only where the run has one)."""
    ex = [r["example"] for r in result["examples"]]
    gi = [r["gold_index"] for r in result["examples"]]
    out = {"accuracy": as_matrix(ex, gi, [float(r["correct"]) for r in result["examples"]])}
    if result["examples"] and "logprob" in result["examples"][0]:
        out["logprob"] = as_matrix(ex, gi, [r["logprob"] for r in result["examples"]])
    return out

def region_accuracy(matrix, region: str = "middle"):
    """Accuracy over the slots of one pre-declared ``region`` (:func:`posbias_nb.metrics.regions`)
    of an ``(examples, positions)`` 0/1 matrix, pooled over its prompts, with its Wilson 95%
    interval: ``(estimate, low, high)``.  (Prompts of one example are pooled as independent.)

    >>> [round(v, 3) for v in region_accuracy(np.array([[1, 0, 0, 1], [1, 0, 1, 1]]))]
    [0.25, 0.046, 0.699]
    """
    M = np.asarray(matrix, dtype=float)
    if M.ndim != 2 or not np.all((M == 0) | (M == 1)):
        raise ValueError(f"matrix must be a 2-D 0/1 array, got shape {M.shape}")
    R = M[:, getattr(metrics.regions(M.shape[1]), region)]
    return tuple(float(v) for v in stats.proportion_interval(int(R.sum()), R.size))

def region_differences(matrix) -> dict:
    """Per example (row of an ``(E, P)`` array), the first slot minus the middle and the last
    slot minus the middle, the middle being the **mean over the central region**
    :func:`posbias_nb.metrics.regions` ``(P).middle`` (for ``P = 7``: slots 2, 3, 4), declared
    from ``P`` alone before any data is seen.  Returns ``{"first": (E,), "last": (E,)}``.

    Examples
    --------
    >>> d = region_differences([[3.0, 0, 1, 1, 1, 0, 2.0]])
    >>> float(d["first"][0]), float(d["last"][0])
    (2.0, 1.0)
    """
    M = np.asarray(matrix, dtype=float)
    if M.ndim != 2 or M.shape[1] < 3:
        raise ValueError(f"need an (examples, positions >= 3) array, got shape {M.shape}")
    mid = M[:, metrics.regions(M.shape[1]).middle].mean(1)
    return {"first": M[:, 0] - mid, "last": M[:, -1] - mid}

def region_pairs(matrix) -> dict:
    """For an ``(E, P)`` 0/1 matrix whose pre-declared middle region is **one** slot (``P = 3``:
    first, middle, last), the paired outcomes ``{"first": (first, middle), "last": (last,
    middle)}``, each an ``(E,)`` pair of 0/1 arrays, for :func:`contrast_family` to grade with
    :func:`posbias_nb.stats.paired_proportion_interval`.  A wider middle region is averaged by
    :func:`region_differences` instead (its per-example mean is not a 0/1 outcome).

    Examples
    --------
    >>> p = region_pairs([[1, 0, 1], [1, 1, 0]])
    >>> [v.tolist() for v in p["first"]], [v.tolist() for v in p["last"]]
    ([[1.0, 1.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]])
    """
    M = np.asarray(matrix, dtype=float)
    if M.ndim != 2 or M.shape[1] < 3:
        raise ValueError(f"need an (examples, positions >= 3) array, got shape {M.shape}")
    if not np.all((M == 0) | (M == 1)):
        bad = float(M[(M != 0) & (M != 1)][0])
        raise ValueError(f"matrix must hold 0/1 outcomes, got {bad!r}")
    mid = metrics.regions(M.shape[1]).middle
    if mid.stop - mid.start != 1:
        raise ValueError(f"the middle region of {M.shape[1]} positions is {mid.stop - mid.start} "
                         "slots, not one: use region_differences")
    m = M[:, mid.start]
    return {"first": (M[:, 0], m), "last": (M[:, -1], m)}

def contrast_family(diffs: dict, alpha: float = 0.05, seed: int = 0) -> dict:
    r"""Grade a pre-declared family of paired contrasts with Holm's correction.

    ``diffs`` maps a name to one contrast: either the per-example differences (e.g. the
    outputs of :func:`region_differences`), or a pair ``(a, b)`` of paired **0/1** outcome
    arrays (e.g. the outputs of :func:`region_pairs`).  Each claim is "the mean difference is
    greater than 0".  For each contrast:

    * ``interval``: its 95% interval -- for differences, the Student t interval of their mean
      over examples (:func:`posbias_nb.stats.mean_interval`); for a pair of 0/1 outcomes,
      Newcombe's paired interval of ``mean(a) - mean(b)``
      (:func:`posbias_nb.stats.paired_proportion_interval`), which, unlike t, never has zero
      width when every example ties;
    * ``p``: two-sided exact / sign-flip permutation p-value (:func:`posbias_nb.stats.paired_test`),
      ``p_holm`` its Holm-adjusted value over the family (:func:`posbias_nb.stats.holm`);
    * ``level`` and ``adjusted``: the interval at Holm's step-down level for this contrast,
      ``1 - alpha / (m - i + 1)`` for the contrast of rank ``i`` in p (the levels stop
      stepping down at the first contrast Holm does not reject);
    * ``verdict``: :func:`posbias_nb.stats.decide` of ``adjusted`` against 0 — "holds" only
      when the Holm-level interval lies above 0; for differences, "not testable" when they do
      not vary at all (every example ties: no t interval exists); a pair of 0/1 outcomes is
      always testable (all ties give a wide Newcombe interval, "inconclusive").

    Chapter *From prior to behaviour* (the task's U; Liu et al.'s own setting).
    """
    names = list(diffs)
    if not names:
        raise ValueError("contrast_family needs at least one contrast")
    pairs = {k: isinstance(diffs[k], tuple) for k in names}
    D, AB = [], []
    for k in names:
        if pairs[k]:
            if len(diffs[k]) != 2:
                raise ValueError(f"contrast {k!r}: a pair must be (a, b), got {len(diffs[k])} "
                                 "arrays")
            a, b = (np.asarray(v, dtype=float) for v in diffs[k])
            stats.paired_proportion_interval(a, b)  # validates: 0/1, same length
            AB.append((a, b))
            D.append(a - b)
        else:
            AB.append(None)
            D.append(np.asarray(diffs[k], dtype=float))
    p = np.array([stats.paired_test(d, np.zeros_like(d), seed=seed).pvalue for d in D])
    p_holm = stats.holm(p)
    m = len(D)
    order = np.argsort(p, kind="stable")
    level = np.empty(m)
    stepping = True
    frozen = None
    for i, j in enumerate(order):
        div = m - i
        if not stepping:
            div = frozen
        level[j] = 1 - alpha / div
        if stepping and p[j] >= alpha / div:
            stepping, frozen = False, div
    out = {}
    for j, k in enumerate(names):
        if pairs[k]:
            ci = stats.paired_proportion_interval(*AB[j])
            adj = stats.paired_proportion_interval(*AB[j], level=float(level[j]))
            testable = True
        else:
            ci = stats.mean_interval(D[j])
            adj = stats.mean_interval(D[j], level=float(level[j]))
            testable = bool(np.ptp(D[j]) > 0)
        out[k] = {"interval": ci, "adjusted": adj, "level": float(level[j]),
                  "p": float(p[j]), "p_holm": float(p_holm[j]),
                  "verdict": stats.decide(adj, 0.0, testable=testable)}
    return out

def paired_contrast(matrix, a: int, b: int):
    """Mean over examples of ``matrix[:, a] - matrix[:, b]`` (position ``a`` against ``b``
    within each example) with its Student t 95% interval over examples (paired):
    ``(estimate, low, high)``."""
    M = np.asarray(matrix, dtype=float)
    return stats.mean_interval(M[:, a] - M[:, b])

def ratio_interval(ratios, level: float = 0.95):
    """Geometric mean of positive per-unit ratios with a t interval on the log scale
    (:func:`posbias_nb.stats.mean_interval` of the logs, exponentiated): ``(est, low, high)``.
    ``ratios`` is ``(units,)`` or ``(units, k)`` (each unit's logs averaged first).

    Examples
    --------
    >>> [round(v, 3) for v in ratio_interval([2.0, 2.0, 8.0, 8.0])]
    [4.0, 1.119, 14.294]
    """
    r = np.asarray(ratios, dtype=float)
    if np.any(~(r > 0)):
        raise ValueError("ratios must be positive and finite")
    lg = np.log(r)
    if lg.ndim == 2:
        lg = lg.mean(1)
    return tuple(float(np.exp(v)) for v in stats.mean_interval(lg, level=level))

def prior_matrices(link: dict) -> dict:
    """From a :func:`retrieval_link` result, ``(E, P)`` arrays of influence **per token**:

    * ``gold`` — the gold value's, in the prompt where it sits at position ``k``;
    * ``positional`` — the item at slot ``k`` when it is *not* the gold one (mean over the
      ``P - 1`` prompts of the example where another slot holds the gold item): the
      content-free positional prior of the same prompts.
    """
    dens = np.asarray(link["slot_share"], float) / np.asarray(link["slot_ntok"], float)
    ex, gi = np.asarray(link["example"]), np.asarray(link["gold_index"])
    E, P = int(ex.max()) + 1, dens.shape[1]
    gold = as_matrix(ex, gi, dens[np.arange(len(gi)), gi])
    pos = np.zeros((E, P))
    for e in range(E):
        rows = dens[ex == e]
        g = gi[ex == e]
        for k in range(P):
            pos[e, k] = rows[g != k, k].mean()
    return {"gold": gold, "positional": pos}

def edge_ratios(link: dict) -> np.ndarray:
    """Per prompt of a :func:`retrieval_link` result: the influence of the first and of the
    last prompt token over the median influence of the prompt's middle region
    (:func:`posbias_nb.metrics.regions` of the prompt length: its central half) — the two arms
    of the U over the whole prompt.  An ``(R, 2)`` array."""
    ends = np.cumsum(link["profile_len"])
    out = []
    for e, n in zip(ends, link["profile_len"]):
        p = np.asarray(link["profile_flat"][e - n:e], float)
        med = np.median(p[metrics.regions(int(n)).middle])
        out.append((p[0] / med, p[-1] / med))
    return np.array(out)

def _two_way(a):
    """Residual of an (E, P) array after example (row) and position (column) means."""
    return a - a.mean(1, keepdims=True) - a.mean(0, keepdims=True) + a.mean()

def link_stats(prior, outcome, kind: str, seed: int = 0, n_boot: int = 2000,
               level: float = 0.95) -> dict:
    """Statistics linking a prior to an outcome, with BCa bootstrap intervals over examples at
    ``level`` (95% by default; :func:`posbias_nb.stats.bootstrap`; an example's prompts are
    resampled together).

    ``prior`` and ``outcome`` are ``(E, P)`` arrays (example x gold position).  ``kind``:

    * ``"curve"`` — Spearman between the per-position means of prior and outcome
      (the shape of the two curves over positions);
    * ``"example"`` — Spearman between prior and outcome over all prompts;
    * ``"within"`` — the same after removing **example and position fixed effects** from both
      (two-way residuals, ``x - row mean - column mean + grand mean``): does the prior predict
      the outcome beyond the position *and* beyond how hard the example is?
    * ``"auc"`` — AUC of the prior for a binary outcome over all prompts;
    * ``"auc_within"`` — AUC of the prior's two-way residual for the binary outcome;
    * ``"r2"`` — the share of the variance of the outcome's per-position means explained by a
      straight line in the log of the prior's per-position means (squared Pearson correlation;
      the prior must be positive).

    Returns ``{"estimate", "low", "high"}``; non-finite values (e.g. an AUC with one class)
    come back as None.
    """
    x, y = np.asarray(prior, dtype=float), np.asarray(outcome, dtype=float)
    if x.shape != y.shape or x.ndim != 2:
        raise ValueError(f"prior and outcome must be (examples, positions) arrays of one shape, "
                         f"got {x.shape} and {y.shape}")
    kinds = ("curve", "example", "within", "auc", "auc_within", "r2")
    choice("kind", kind, kinds)

    def stat(a, b):
        if kind == "curve":
            return metrics.spearman(a.mean(0), b.mean(0))
        if kind == "example":
            return metrics.spearman(a, b)
        if kind == "within":
            return metrics.spearman(_two_way(a), _two_way(b))
        if kind == "auc":
            return metrics.auc(a.ravel(), b.ravel() > 0.5)
        if kind == "auc_within":
            return metrics.auc(_two_way(a).ravel(), b.ravel() > 0.5)
        u, w = np.log(a.mean(0)), b.mean(0)
        if np.ptp(u) == 0 or np.ptp(w) == 0:
            return float("nan")
        return float(np.corrcoef(u, w)[0, 1] ** 2)

    try:
        est = stat(x, y)
    except ValueError:
        est = float("nan")
    if not np.isfinite(est) or x.shape[0] < 2:
        return {"estimate": est if np.isfinite(est) else None, "low": None, "high": None}
    try:
        e, lo, hi = stats.bootstrap(stat, x, y, n_boot=n_boot, seed=seed, level=level)
    except ValueError:
        return {"estimate": est, "low": None, "high": None}
    return {"estimate": e, "low": lo, "high": hi}
