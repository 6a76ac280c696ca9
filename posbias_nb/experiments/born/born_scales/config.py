"""The born-scales study's configuration: its design (locked before its data), the statistics it
decides, its parts and the groups of matrices in words."""
from __future__ import annotations

from .. import scale
from ...base.design import Design, check

__all__ = ["DESIGN", "STATS", "STAT_WORDS", "PARTS", "GROUP_WORDS"]


DEFINITION = "born-scales-v1"  # bump when a definition below changes (the design has its own hash)

#: The five shape statistics of a window (:func:`window_stats`).
STATS = ("spearman", "alpha", "first_middle", "last_middle", "scatter")

#: Each statistic in words.
STAT_WORDS = {**scale.STAT_WORDS, "scatter": "the log10 scatter around the row"}

#: The study's four parts, each one Holm family.
PARTS = ("matched", "factorial", "control", "prediction")

#: The groups of matrices in words.
GROUP_WORDS = {"qk": "query/key matrices", "block": "rest of each block",
               "embed": "embedding"}

#: The study's design, fixed before its data (registry ``born-scales``).
DESIGN = Design("born-scales", dict(
    # the width ladder of Born at scale, for the three shapes without QK-norm
    ladder={"llama3.1-8b": [128, 256, 512], "qwen2.5-7b": [112, 224, 448],
            "mistral-7b": [128, 256, 512]},
    length=1024, windows=8, probes=2, seed=0,
    # matched logit scale: every group at sqrt(g / width) on every rung
    matched=dict(g=[0.05, 0.3, 1.6]),
    # at the narrowest rung, each group at 0.02 (low) or 0.02 * sqrt(published / width) (high)
    factorial=dict(shapes=["llama3.1-8b", "qwen2.5-7b"], low=0.02),
    # Gemma-3-4B (QK-norm) at its narrowest rung: query/key at base * factor against base
    control=dict(model="gemma3-4b", width=80, base=0.02, factor=10),
    # the factorial's all-high cell at the GPU design's length, on its windows
    prediction=dict(shapes=["llama3.1-8b", "qwen2.5-7b"], length=8192),
    margins={"spearman": 0.05, "alpha": 0.05, "first_middle": 0.30103,
             "last_middle": 0.30103, "scatter": 0.1},
    family_alpha=0.05, power=0.8,
))


def _checked():
    check(DESIGN)
    return DESIGN
