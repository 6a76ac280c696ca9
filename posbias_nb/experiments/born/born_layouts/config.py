"""The layouts study's configuration: its design (locked before its data), the definition
versions of its cache entries, the study models' specs, the initialisation seeds, the switches of
the Gemma-3 ablation and the early window it reports (chapter :ref:`ch-layouts`)."""
from __future__ import annotations

import dataclasses

from .... import models
from ...base.design import Design, check

__all__ = ["DEFINITION", "DESIGN", "study_spec", "init_seeds", "SWITCHES", "EARLY"]

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

def init_seeds() -> list[int]:
    """The design's initialisation seeds (the first is the windows' and probes' seed)."""
    return [int(x) for x in _checked()["init_seeds"]]


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


#: The first positions whose share of the influence :func:`ablations` reports.
EARLY = 128
