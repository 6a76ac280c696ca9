"""The layouts study's statistics: theory rows fitted to the measured profiles, their
agreement per window, the middle's shares, the pre-declared family decided with Holm's
correction (:func:`decisions`), the declared rules' verdict words, and the ablations' gaps."""
from __future__ import annotations

import numpy as np

from .... import metrics, stats, theory
from ...base.design import decide_rule, rule_effect
from .config import EARLY, _checked, init_seeds
from .measurements import ablation, layout, measure

__all__ = ["rows", "agreement_of", "agreements", "beyond_reach", "middle_shares", "decisions",
           "claim_rule", "decide", "effect", "ablation_sides", "ablations"]


def rows(name: str, init_seed: int | None = None, P=None) -> dict:
    r"""The mean profile and the two theory rows (each with its own fitted :math:`\alpha`),
    over the positions the layout reaches (``mask``), for one initialisation (or for the
    profiles ``P`` given)."""
    P = measure(name, init_seed) if P is None else np.asarray(P, dtype=np.float64)
    lay = layout(name)
    L = P.shape[1]
    mask = theory.log_layout_influence(lay, L, 0.5) > -np.inf
    p = P.mean(0)
    a_lay = metrics.fit_layout_alpha(p, lay, mask)
    a_full = metrics.fit_layout_alpha(p, theory.Layout.full(lay.depth), mask)
    return dict(P=P, p=p / p[mask].sum(), mask=mask, layout=lay, L=L,
                alpha_layout=a_lay, alpha_full=a_full,
                t_layout=theory.layout_influence(lay, L, a_lay),
                t_full=theory.influence(L, lay.depth, a_full))


def agreement_of(r: dict) -> dict:
    """Per window of one initialisation: each statistic against each row, and the gaps."""
    m = r["mask"]
    out = {}
    for stat, fn in (("log_pearson", metrics.log_pearson), ("spearman", metrics.spearman)):
        for row in ("layout", "full"):
            out[f"{stat}_{row}"] = np.array([fn(w[m], r[f"t_{row}"][m]) for w in r["P"]])
        out[f"{stat}_gap"] = out[f"{stat}_layout"] - out[f"{stat}_full"]
    return out


def agreements(name: str) -> dict:
    r"""Per (initialisation, window): log-Pearson and Spearman of the profile against each row
    (reachable positions, each initialisation with its own fitted rows), ``(K, W)`` tables,
    their two-way intervals (:func:`posbias_nb.stats.two_way_mean_interval`), and the paired
    gaps layout minus :math:`N^H`.  The rows, profiles and fitted :math:`\alpha` of the first
    initialisation come with them (the figure's); ``alpha_layout_seeds`` and
    ``alpha_full_seeds`` give every initialisation's."""
    per = [rows(name, s) for s in init_seeds()]
    out = dict(per[0])
    out["alpha_layout_seeds"] = np.array([r["alpha_layout"] for r in per])
    out["alpha_full_seeds"] = np.array([r["alpha_full"] for r in per])
    tabs = [agreement_of(r) for r in per]
    for k in tabs[0]:
        out[k] = np.stack([t[k] for t in tabs])
        out[f"{k}_ci"] = stats.two_way_mean_interval(out[k])
    return out


def beyond_reach(name: str) -> dict:
    """The measured influence at the positions beyond the layout's reach (where its row is
    exactly 0), over every initialisation: their count and the largest absolute value there."""
    P = np.concatenate([measure(name, s) for s in init_seeds()])
    lay = layout(name)
    zero = theory.log_layout_influence(lay, P.shape[1], 0.5) == -np.inf
    return dict(n=int(zero.sum()), max=float(np.abs(P[:, zero]).max()) if zero.any() else 0.0)


def middle_shares(name: str) -> np.ndarray:
    """The middle's share of each window's profile (central half, :func:`metrics.middle_share`),
    a ``(K, W)`` table: one row per initialisation."""
    return np.array([[metrics.middle_share(w) for w in measure(name, s)] for s in init_seeds()])


def decisions() -> dict:
    """The pre-declared family (module docstring), decided with Holm's correction."""
    d = _checked()
    claims = {f"fit:{n}": dict(x=agreements(n)[f"{d['agreement']}_gap"],
                               threshold=float(d["threshold"]), direction="greater")
              for n in d["fit"]}
    hyb, full = d["middle"]
    claims["middle"] = dict(x=middle_shares(hyb) - middle_shares(full),
                            threshold=float(d["threshold"]), direction="greater")
    return stats.holm_family(claims, alpha=float(d["family_alpha"]))


def claim_rule(claim: str) -> dict:
    rules = _checked().as_dict()["rules"]
    if claim not in rules:
        raise ValueError(f"the layouts design declares no rule {claim!r}; declared: "
                         f"{', '.join(sorted(rules))}")
    return rules[claim]


def decide(claim: str, interval) -> str:
    """The verdict word of ``interval`` under the design's declared rule ``claim`` (``"exact"``,
    ``"ablation"``: :data:`DESIGN` ``rules``), by :func:`posbias_nb.experiments.base.design.decide_rule`.
    Chapter :ref:`ch-layouts`.  ValueError for a claim the design does not declare."""
    return decide_rule(claim_rule(claim), interval)


def effect(claim: str, interval) -> dict:
    """The verdict row's ``effect`` under the declared rule ``claim``
    (:func:`posbias_nb.experiments.base.design.rule_effect`)."""
    return rule_effect(claim_rule(claim), interval)


def ablation_sides(results: dict) -> dict:
    """``{switch: word}``: for each ablation's result (:func:`ablations`), which side of 0 the
    interval of its log-Pearson gap lies on, by the declared rule ``ablation`` ("holds": the
    layout row wins with that departure switched off, "fails": it still loses,
    "inconclusive": undecided).  Chapter :ref:`ch-layouts`."""
    return {k: decide("ablation", v["gap_ci"]) for k, v in results.items()}


def ablations() -> dict:
    """Per switch of the design (and ``"none"``, the model as measured by :func:`measure`): the
    per-window log-Pearson gap layout minus :math:`N^H` (rows refitted on that profile), its t
    interval over the windows, and the measured, layout-row and :math:`N^H` shares of the
    first :data:`EARLY` positions.  Decides nothing (a diagnostic of the design)."""
    d = _checked()["ablations"]
    name = d["model"]
    out = {}
    for sw in ("none", *d["switches"]):
        P = measure(name, int(d["init_seed"])) if sw == "none" else ablation(sw)
        r = rows(name, P=P)
        gap = agreement_of(r)["log_pearson_gap"]
        m = r["mask"]
        first = slice(0, min(EARLY, r["L"]))
        share = lambda q: float(q[first][m[first]].sum() / q[m].sum())  # noqa: E731
        out[sw] = dict(gap=gap, gap_ci=stats.mean_interval(gap),
                       log_pearson_layout=agreement_of(r)["log_pearson_layout"],
                       early_measured=share(r["p"]), early_layout=share(r["t_layout"]),
                       early_full=share(r["t_full"]),
                       alpha_layout=r["alpha_layout"], alpha_full=r["alpha_full"])
    return out
