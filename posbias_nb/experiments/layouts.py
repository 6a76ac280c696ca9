r"""Born with a layout: Jacobian profiles at random init against each layout's theory row.

Chapter :ref:`ch-layouts`.  The design is one frozen object, :data:`DESIGN` (models and their
layouts, lengths, windows, probes, the two pre-declared comparisons), recorded in the registry
(:mod:`posbias_nb.experiments.design`).  For each study model:

* its **layout**, read from the config and checked by behaviour
  (:func:`posbias_nb.models.model_layout`, sinks included);
* its **measured profile**: the hidden-state influence of the last token at random init,
  :data:`DESIGN` ``windows`` text windows (:func:`posbias_nb.measure.cached.profile`);
* two **theory rows**, each with its own :math:`\alpha` fitted on the mean profile (log
  criterion, over the positions the layout can reach): the layout's,
  :func:`posbias_nb.theory.layout_influence`, and the plain :math:`N^H` row,
  :func:`posbias_nb.theory.influence`;
* per window, the Pearson correlation of the logs and the Spearman correlation between the
  window's profile and each row, over the reachable positions.

The comparisons (:func:`decisions`), declared in :data:`DESIGN` before the data, decided as one
family with Holm's correction (:func:`posbias_nb.stats.holm_family`):

* ``fit:<model>``: the layout row agrees better than :math:`N^H` (paired by window, the gap of
  the log-Pearson correlations greater than 0), for every model whose layout is not all full;
* ``middle``: the middle's share (the central half, :func:`posbias_nb.metrics.regions`) is
  larger in the hybrid than in its all-full twin, paired by window (same windows, same probes).

A sliding stack's influence beyond its reach is exactly 0: :func:`beyond_reach` returns it, a
check of the code, not a verdict.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .. import cache, metrics, models, stats, theory
from ..measure import cached, entry
from .design import Design, check

__all__ = ["DESIGN", "study_spec", "layout", "measure", "rows", "agreements", "decisions",
           "beyond_reach", "middle_shares"]

_DEF = "layouts-v2"  # bump when a definition below changes (the design has its own hash)

_ALL_FULL = ["full_attention"] * 18
_ALL_SLIDING = ["sliding_attention"] * 18

#: The study's design, fixed before its data (registry ``layouts``).
DESIGN = Design("layouts", dict(
    models={
        "gemma3-shipped": dict(base="gemma3-270m", overrides={}, length=640,
                               role="Gemma-3-270M as shipped (5:1, window 512), beyond the window"),
        "gemma3-hybrid": dict(base="gemma3-270m", overrides={"sliding_window": 32}, length=512,
                              role="the same 5:1 layout, window shrunk to 32 (L/w = 16)"),
        "gemma3-full": dict(base="gemma3-270m",
                            overrides={"sliding_window": 32, "layer_types": _ALL_FULL},
                            length=512, role="its all-full twin"),
        "gemma3-sliding": dict(base="gemma3-270m",
                               overrides={"sliding_window": 32, "layer_types": _ALL_SLIDING},
                               length=512, role="its all-sliding twin"),
        "mistral": dict(base="mistral_small", overrides={"sliding_window": 16}, length=256,
                        role="a Mistral-style sliding stack, 8 layers of window 16, "
                             "L > H(w-1) = 120"),
        "gpt-oss": dict(base="gpt_oss_small", overrides={"sliding_window": 16}, length=256,
                        role="a GPT-OSS-style stack: band 16 alternating with full layers, "
                             "a sink in every head"),
        "llama4": dict(base="llama4_small", overrides={"attention_chunk_size": 32},
                       length=256, role="a Llama-4-style stack: chunks of 32 in three layers "
                                        "of four, global NoPE layers"),
    },
    windows=8, probes=4, seed=0, agreement="log_pearson",
    fit=["gemma3-shipped", "gemma3-hybrid", "gemma3-sliding", "mistral", "gpt-oss", "llama4"],
    middle=["gemma3-hybrid", "gemma3-full"],
    threshold=0.0, family_alpha=0.05,
))

_BASES = {"gemma3-270m": None, "mistral_small": models.configs.mistral_small,
          "gpt_oss_small": models.configs.gpt_oss_small,
          "llama4_small": models.configs.llama4_small}


def _checked():
    check(DESIGN)
    return DESIGN


def study_spec(name: str) -> models.ModelSpec:
    """The :class:`~posbias_nb.models.ModelSpec` of a study model (random init only)."""
    d = _checked()["models"]
    if name not in d:
        raise ValueError(f"unknown study model {name!r}: use one of {', '.join(d)}")
    m = d[name]
    ov = {k: (list(v) if isinstance(v, tuple) else v) for k, v in m["overrides"].items()}
    if m["base"] == "gemma3-270m":
        base = models.ZOO["gemma3-270m"]
        return dataclasses.replace(base, name=f"layouts/{name}", pretrained=None,
                                   overrides={**base.overrides, **ov}, description=m["role"])
    fn = _BASES[m["base"]]
    return models.ModelSpec(f"layouts/{name}", fn().model_type, m["role"], fn,
                            max_length=4096, overrides=ov)


def layout(name: str) -> theory.Layout:
    """The study model's layout, decided by behaviour (:func:`posbias_nb.models.model_layout`
    at the study length), cached."""
    spec = study_spec(name)
    L = int(DESIGN["models"][name]["length"])
    info = models.describe(spec)
    params = {"model": spec.name, "fingerprint": info["fingerprint"], "length": L,
              "def": _DEF, **entry.library_versions()}

    def compute():
        # the model that measure() profiles (memoised: one initialisation, loaded once);
        # model_layout switches it to eager attention for its check and back
        m, _, _ = entry.profile_model(spec, "random", int(DESIGN["seed"]))
        return {"layout": np.asarray(str(models.model_layout(m, length=L)))}

    return theory.parse_layout(str(cache.cached("layouts-layout", params, compute)["layout"]))


def measure(name: str) -> np.ndarray:
    """The study model's measured profiles at random init, ``(windows, L)``."""
    spec = study_spec(name)
    d = DESIGN
    res = cached.profile(spec, "random", length=int(d["models"][name]["length"]),
                         probes=int(d["probes"]), batch=int(d["windows"]), seed=int(d["seed"]),
                         progress=False)
    return np.asarray(res["per_sequence"], dtype=np.float64)


def rows(name: str) -> dict:
    r"""The mean profile and the two theory rows (each with its own fitted :math:`\alpha`),
    over the positions the layout reaches (``mask``)."""
    P = measure(name)
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


def agreements(name: str) -> dict:
    """Per window: log-Pearson and Spearman of the profile against each row (reachable
    positions), their t intervals, and the paired gaps layout minus :math:`N^H`."""
    r = rows(name)
    m = r["mask"]
    out = dict(r)
    for stat, fn in (("log_pearson", metrics.log_pearson), ("spearman", metrics.spearman)):
        for row in ("layout", "full"):
            x = np.array([fn(w[m], r[f"t_{row}"][m]) for w in r["P"]])
            out[f"{stat}_{row}"] = x
            out[f"{stat}_{row}_ci"] = stats.mean_interval(x)
        gap = out[f"{stat}_layout"] - out[f"{stat}_full"]
        out[f"{stat}_gap"] = gap
        out[f"{stat}_gap_ci"] = stats.mean_interval(gap)
    return out


def beyond_reach(name: str) -> dict:
    """The measured influence at the positions beyond the layout's reach (where its row is
    exactly 0): their count and the largest absolute value found there."""
    P = measure(name)
    lay = layout(name)
    zero = theory.log_layout_influence(lay, P.shape[1], 0.5) == -np.inf
    return dict(n=int(zero.sum()), max=float(np.abs(P[:, zero]).max()) if zero.any() else 0.0)


def middle_shares(name: str) -> np.ndarray:
    """The middle's share of each window's profile (central half, :func:`metrics.middle_share`)."""
    return np.array([metrics.middle_share(w) for w in measure(name)])


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
