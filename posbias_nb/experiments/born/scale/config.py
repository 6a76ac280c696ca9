"""Born at scale, its configuration: the design (locked before its data), the statistics it
decides and their words, and the GPU's graph budget."""
from __future__ import annotations

from ...base.design import Design, check

__all__ = ["DESIGN", "STATS", "STAT_WORDS", "GPU_GRAPH_BUDGET"]


DEFINITION = "scale-v1"  # bump when a definition below changes (the design has its own hash)

#: The four shape statistics of a window's profile (:func:`window_stats`).
STATS = ("spearman", "alpha", "first_middle", "last_middle")

#: Each statistic in words, for the chapter's sentences.
STAT_WORDS = {"spearman": "the Spearman correlation with the layout row",
              "alpha": "the fitted α",
              "first_middle": "log10 first/middle",
              "last_middle": "log10 last/middle"}

#: The study's design, fixed before its data (registry ``scale``).
DESIGN = Design("scale", dict(
    # hidden sizes of each configuration's ladder: a 1/32, 1/16 and 1/8 of the published width
    # where the heads divide it (Gemma-3-12B's 16 heads of a width/15 need multiples of 240)
    ladder={"llama3.1-8b": [128, 256, 512], "qwen2.5-7b": [112, 224, 448],
            "mistral-7b": [128, 256, 512], "gemma3-4b": [80, 160, 320],
            "gemma3-12b": [240, 480, 720]},
    inits=["hf", "fan-in"],
    length=1024, windows=8, probes=2, seed=0,
    # the layout is checked by behaviour on the narrowest rung at this length (a window of
    # this length or more is invisible there and kept as the config says)
    check_length=1025,
    # equivalence margins of the widest-minus-narrowest difference, per statistic
    margins={"spearman": 0.05, "alpha": 0.05, "first_middle": 0.30103, "last_middle": 0.30103},
    family_alpha=0.05,
    # full width on a GPU, float32 with TF32 off: the items in this order; no item starts
    # after `start_by` seconds of the run, nor one whose predicted end (the same
    # configuration's time at the shorter length times `long_factor`, or nothing known) falls
    # after `end_by`; the profile's time against its bare floor (one forward and `probes`
    # plain backward passes on the same window) for `floor`, run after the first `floor_after`
    # items
    gpu=dict(windows={"8192": 2, "32768": 2}, probes=2, seed=0,
             items=[["mistral-7b", 8192], ["gemma3-4b", 8192], ["mistral-7b", 32768],
                    ["gemma3-4b", 32768], ["llama3.1-8b", 8192], ["qwen2.5-7b", 8192],
                    ["gemma3-12b", 8192], ["llama3.1-8b", 32768], ["qwen2.5-7b", 32768],
                    ["gemma3-12b", 32768]],
             floor=dict(model="gemma3-4b", length=8192), floor_after=2,
             start_by=400, end_by=540, long_factor=8),
))


def _checked():
    check(DESIGN)
    return DESIGN


#: Bytes of autograd graph the GPU run keeps before it recomputes layers
#: (:data:`posbias_nb.measure.jacobian.GRAPH_BUDGET` there; changes only float rounding).
GPU_GRAPH_BUDGET = 24 * 2**30
