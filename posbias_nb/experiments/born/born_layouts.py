r"""Born with a layout: Jacobian profiles at random init against each layout's theory row.

Chapter :ref:`ch-layouts`.  The design is one frozen object, :data:`DESIGN` (models and their
layouts, lengths, windows, probes, the two pre-declared comparisons), recorded in the registry
(:mod:`posbias_nb.experiments.base.design`).  For each study model:

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

from ... import cache, metrics, models, stats, theory
from ...measure import cached, entry
from ..base.design import Design, check, decide_rule, rule_effect

__all__ = ["DESIGN", "study_spec", "layout", "init_seeds", "measure", "rows", "agreements",
           "decisions", "decide", "effect", "ablation_sides", "beyond_reach", "middle_shares",
           "SWITCHES", "switch_off", "ablation", "ablations"]

DEFINITION = "layouts-v2"  # bump when a definition below changes (the design has its own hash)
# the layout entries' own version: v2 stores the sinks as floats beside the kinds' text
_LAYOUT_DEF = "layouts-layout-v2"

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
    # the random initialisations of every configuration, read on the same windows and probes
    # (seed 0's); the claims' units are the (initialisation, window) table, its interval
    # stats.two_way_mean_interval
    init_seeds=[0, 1, 2],
    # decides nothing: what in the real Gemma-3 block makes the layout row lose for Gemma-3 as
    # shipped; each switched off alone (and all together) in that random-init config, seed 0
    ablations=dict(model="gemma3-shipped", init_seed=0,
                   switches=["qk_norm", "rope_bases", "embed_scale", "sandwich_norms", "all"]),
    fit=["gemma3-shipped", "gemma3-hybrid", "gemma3-sliding", "mistral", "gpt-oss", "llama4"],
    middle=["gemma3-hybrid", "gemma3-full"],
    threshold=0.0, family_alpha=0.05,
    # the chapter's other verdict rules (design.decide_rule): the exact check of the O(L) rows,
    # and the side of each ablation's gap (which decides nothing, the prose reads it)
    rules=dict(
        exact={"direction": "greater", "threshold": 0.5, "exact": True,
               "says": "every layout's O(L) row equals the dense product of its layers (1 when "
                       "all do, 0 otherwise)"},
        ablation={"direction": "greater", "threshold": 0.0,
                  "says": "with a departure switched off the layout row wins: the interval of "
                          "the log-Pearson gap, layout minus N^H, above 0"},
    ),
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
              "def": _LAYOUT_DEF, **entry.library_versions()}

    def compute():
        # the model that measure() profiles (memoised: one initialisation, loaded once);
        # model_layout switches it to eager attention for its check and back
        m, _, _ = entry.profile_model(spec, "random", int(DESIGN["seed"]))
        found = models.model_layout(m, length=L)
        # the kinds as text, the sinks as floats: a sink logit is read from float32 attention
        # rows, so it moves in its 7th digit with the machine and the thread count, and the
        # recorded-entry check (cache.agree) compares floats to a tolerance, text exactly
        kinds = theory.Layout(tuple(dataclasses.replace(x, sink=None) for x in found.layers))
        sinks = np.array([np.nan if x.sink is None else x.sink for x in found.layers])
        return {"layout": np.asarray(str(kinds)), "sinks": sinks}

    got = cache.cached("layouts-layout", params, compute)
    kinds = theory.parse_layout(str(got["layout"]))
    sinks = np.asarray(got["sinks"], dtype=float)
    if len(sinks) != kinds.depth:
        raise RuntimeError(f"layouts-layout entry of {name!r}: {len(sinks)} sinks for "
                           f"{kinds.depth} layers")
    return theory.Layout(tuple(x if np.isnan(s) else dataclasses.replace(x, sink=float(s))
                               for x, s in zip(kinds.layers, sinks)))


def init_seeds() -> list[int]:
    """The design's initialisation seeds (the first is the windows' and probes' seed)."""
    return [int(x) for x in _checked()["init_seeds"]]


def measure(name: str, init_seed: int | None = None) -> np.ndarray:
    """The study model's measured profiles at random init, ``(windows, L)``: the initialisation
    ``init_seed`` (default: the design's ``seed``) read on the design's windows and probes."""
    spec = study_spec(name)
    d = DESIGN
    res = cached.profile(spec, "random", length=int(d["models"][name]["length"]),
                         probes=int(d["probes"]), batch=int(d["windows"]), seed=int(d["seed"]),
                         progress=False, init_seed=init_seed)
    return np.asarray(res["per_sequence"], dtype=np.float64)


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


# --------------------------------------------------------------------------------------------
# Gemma-3 as shipped: which departure of its block from uniform attention at init (issue 34)

#: What each switch of the design's ``ablations`` turns off in the random-init Gemma-3 block.
SWITCHES = {
    "qk_norm": "the RMS norms of the queries and keys (q_norm, k_norm): identity",
    "rope_bases": "the local layers' RoPE base 10^4: the global layers' 10^6 in every layer",
    "embed_scale": "the embedding scale sqrt(d) = sqrt(640): 1",
    "sandwich_norms": "the norms after attention and after the MLP (post_attention_layernorm, "
                      "post_feedforward_layernorm): identity",
    "all": "all four at once",
}


def switch_off(model, switch: str) -> None:
    """Turn one departure of the Gemma-3 block off, in place (:data:`SWITCHES`).

    Raises
    ------
    ValueError
        An unknown switch, or a model without the Gemma-3 parts the switch names (the patch
        would otherwise change nothing, silently).
    """
    import torch

    if switch not in SWITCHES:
        raise ValueError(f"unknown switch {switch!r}: use one of {', '.join(SWITCHES)}")
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    try:
        every = switch == "all"
        if every or switch == "qk_norm":
            for layer in layers:
                layer.self_attn.q_norm, layer.self_attn.k_norm  # noqa: B018  (both must exist)
                layer.self_attn.q_norm = torch.nn.Identity()
                layer.self_attn.k_norm = torch.nn.Identity()
        if every or switch == "rope_bases":
            r = inner.rotary_emb
            with torch.no_grad():
                for kind in ("inv_freq", "original_inv_freq"):
                    getattr(r, f"sliding_attention_{kind}").copy_(
                        getattr(r, f"full_attention_{kind}"))
        if every or switch == "embed_scale":
            with torch.no_grad():
                inner.embed_tokens.embed_scale.fill_(1.0)
        if every or switch == "sandwich_norms":
            for layer in layers:
                layer.post_attention_layernorm, layer.post_feedforward_layernorm  # noqa: B018
                layer.post_attention_layernorm = torch.nn.Identity()
                layer.post_feedforward_layernorm = torch.nn.Identity()
    except (AttributeError, TypeError) as e:
        raise ValueError(f"switch {switch!r} needs a Gemma-3 text model: {e}") from None


def ablation(switch: str) -> np.ndarray:
    """The measured profiles ``(windows, L)`` of the design's ablation model (Gemma-3 as shipped,
    random init, the design's ablation seed) with ``switch`` off: the same windows and probes as
    :func:`measure`, cached (namespace ``layouts-ablation``)."""
    from ...measure.jacobian import influence_profile
    from ...tasks.text import text_batch

    d = _checked()
    ab = d["ablations"]
    if switch not in ab["switches"]:
        raise ValueError(f"switch {switch!r} is not in the design: {', '.join(ab['switches'])}")
    name = ab["model"]
    spec = study_spec(name)
    L, seed, init = int(d["models"][name]["length"]), int(d["seed"]), int(ab["init_seed"])
    info = models.describe(spec)
    params = {"model": spec.name, "fingerprint": info["fingerprint"], "length": L,
              "windows": int(d["windows"]), "probes": int(d["probes"]), "seed": seed,
              "init_seed": init, "switch": switch, "def": DEFINITION, **entry.library_versions()}

    def compute():
        import torch

        m, tok, _ = models.load(spec, weights="random", seed=init, attn="sdpa")
        ids = text_batch(tok, L, int(d["windows"]), seed=seed,
                         vocab_size=m.get_input_embeddings().num_embeddings)
        one = torch.as_tensor(np.asarray(ids[:1]), dtype=torch.long)
        with torch.no_grad():
            before = m(one).logits
        switch_off(m, switch)
        with torch.no_grad():
            after = m(one).logits
        if torch.equal(before, after):  # checked by behaviour: the switch must change the model
            raise RuntimeError(f"switching {switch!r} off left the model's output unchanged")
        res = influence_profile(m, ids, probes=int(d["probes"]), seed=seed, progress=False)
        return {"per_window": res["per_sequence"]}

    return np.asarray(cache.cached("layouts-ablation", params, compute)["per_window"],
                      dtype=np.float64)


#: The first positions whose share of the influence :func:`ablations` reports.
EARLY = 128


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
