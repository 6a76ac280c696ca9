"""The real-questions study's statistics: a run's tables, the paired differences by slot with
their intervals, the power rule, the link of a prior to the curve, and the pre-declared
families decided."""
from __future__ import annotations

import math
import numpy as np
from .... import stats
from .. import retrieval as ret
from .config import CHAPTER, _checked
from .measurements import jacobian_prior, prior

__all__ = ["matrices", "first_middle_last", "paired_by_slot", "power_rule", "power_n", "decisions", "link", "link_family"]


def matrices(res) -> dict:
    """``(questions, positions)`` tables of log p and of correctness from a task result (the
    document rows only), in the design's question and position order."""
    ex = res["examples"]
    pos = [int(g) - 1 for g in res.meta["gold_documents"]]
    lines = list(res.meta["example_lines"])
    E, P = len(lines), len(pos)
    lp, ok = np.full((E, P), np.nan), np.full((E, P), np.nan)
    for r in ex:
        if r["setting"] != "documents":
            continue
        i, j = lines.index(r["example_line"]), pos.index(int(r["gold_document"]) - 1)
        lp[i, j] = r["logprob"]
        ok[i, j] = float(r["outcome"] == "answer")
    if np.isnan(lp).any():
        raise ValueError("a prompt of the run is missing from its examples")
    return {"logprob": lp, "correct": ok, "positions": pos}


def first_middle_last(res) -> dict:
    """The paired log p differences per question: first minus middle, last minus middle."""
    M = matrices(res)
    pos = M["positions"]
    mid = pos.index(int(CHAPTER["middle"]))
    lp = M["logprob"]
    return {"first": lp[:, 0] - lp[:, mid], "last": lp[:, -1] - lp[:, mid]}


def paired_by_slot(res) -> dict:
    """The gold answer's log p at each gold slot minus at the middle slot, paired by question,
    with its 95% t interval over questions (:func:`posbias_nb.stats.mean_interval`): the quantity
    the position family decides, drawn for every slot.  Returns ``slots`` (1-based), ``diff``,
    ``low``, ``high`` (0 at the middle slot, by construction), ``n`` questions and ``middle``
    (1-based)."""
    M = matrices(res)
    lp, pos = M["logprob"], M["positions"]
    mid = pos.index(int(CHAPTER["middle"]))
    ivs = [stats.mean_interval(lp[:, j] - lp[:, mid]) if j != mid else (0.0, 0.0, 0.0)
           for j in range(len(pos))]
    return dict(slots=np.array(pos) + 1, diff=np.array([float(v[0]) for v in ivs]),
                low=np.array([float(v[1]) for v in ivs]),
                high=np.array([float(v[2]) for v in ivs]), n=int(lp.shape[0]),
                middle=pos[mid] + 1)


def power_rule() -> dict:
    """The design's power rule as :func:`power_n`'s keywords: the target power, and the
    one-sided level, ``alpha`` over the position family's claims (Bonferroni, a bound on
    Holm)."""
    d = _checked()
    return {"target": float(d["power"]["target"]),
            "alpha": float(d["alpha"]) / len(d["families"]["position"])}


def power_n(diffs, *, target: float, alpha: float, n_max: int = 400) -> int:
    """The smallest n at which a one-sided t test at ``alpha`` has power ``target`` for the
    effect size of ``diffs`` (mean over standard deviation; noncentral t, ``scipy.stats``).
    The design's rule: ``power_n(diffs, **power_rule())``.

    Raises
    ------
    ValueError
        Fewer than 2 differences, or no spread; no n up to ``n_max`` reaches the power.
    """
    from scipy import stats as st

    x = np.asarray(diffs, dtype=float)
    if x.size < 2 or not x.std(ddof=1) > 0:
        raise ValueError(f"power_n needs at least 2 differences with spread, got {x.tolist()}")
    d = abs(float(x.mean())) / float(x.std(ddof=1))
    for n in range(2, n_max + 1):
        crit = st.t.ppf(1 - alpha, n - 1)
        if st.nct.sf(crit, n - 1, d * math.sqrt(n)) >= target:
            return n
    raise ValueError(f"no n up to {n_max} reaches power {target:g} at alpha {alpha:g} for the "
                     f"effect size {d:.3g}")


def link(model, res, level: float = 0.95, prior_values=None) -> dict:
    """The prior against the task curve: :func:`posbias_nb.experiments.prompt.retrieval.link_stats`
    ``"curve"`` (Spearman of the per-position means, BCa over questions), at ``level``.
    ``prior_values``: :func:`prior` of this model and run, when already computed."""
    pri = prior(model, res) if prior_values is None else np.asarray(prior_values, dtype=float)
    return ret.link_stats(pri, matrices(res)["logprob"], "curve", seed=0, level=level)


def decisions(runs: dict) -> dict:
    """The pre-declared families, ``runs``: model -> its :func:`qa_run`.  ``position``: Holm over
    the four paired t claims (:func:`posbias_nb.stats.holm_family`); ``link``: Holm's step-down
    over the two bootstrap claims on their BCa intervals (:func:`posbias_nb.stats.holm_intervals`:
    both at ``1 - alpha / 2``, the one left at ``1 - alpha`` once the other holds);
    ``link_jacobian``: the same for :func:`jacobian_prior`."""
    d = _checked()
    R = d["rules"]
    claims = {}
    for name in d["families"]["position"]:
        m, e = name.split("/")
        claims[name] = dict(x=first_middle_last(runs[m])[e], threshold=R["position"]["threshold"],
                            direction=R["position"]["direction"])
    out = {"position": stats.holm_family(claims, alpha=d["alpha"])}

    for fam, of in (("link", prior), ("link_jacobian", jacobian_prior)):
        out[fam] = link_family(runs, d["families"][fam], of, R[fam], d["alpha"])
    return out


def link_family(runs, names, prior_of, rule, alpha) -> dict:
    """Holm's step-down (:func:`posbias_nb.stats.holm_intervals`) over the link claims
    ``names`` (``model/...``), each prior computed once per model by ``prior_of``."""
    pri = {n.split("/")[0]: prior_of(n.split("/")[0], runs[n.split("/")[0]]) for n in names}

    def interval_at(name, level):
        m = name.split("/")[0]
        v = link(m, runs[m], level=level, prior_values=pri[m])
        return (v["estimate"], v["low"], v["high"]) if v["low"] is not None else (np.nan,) * 3

    return stats.holm_intervals(interval_at, names, alpha=alpha, threshold=rule["threshold"],
                                direction=rule["direction"])
