"""The confirmatory study's configuration: its design (locked before any question was
scored), the arms, the non-inferiority margin, the questions (none another chapter scored) and
the realqa prompts the slot qualities are read from (chapter :ref:`ch-practice`)."""
from __future__ import annotations

import numpy as np

from ...base import prompts, study
from ...base.design import Design, check
from ...prompt import placement, realqa

__all__ = ["DEFINITION", "ARMS", "MARGIN", "DESIGN", "used_examples", "questions", "realqa_part"]

DEFINITION = "confirm-v1"  # bump when a definition below changes the numbers
_SEED = 20263
_N = 64
#: The arms scored on every question, in this order (the model as it is is scored beside).
ARMS = ("primary", "ceiling", "haystack", "curve-order", "prior-born", "prior-measured",
        "shuffle")
#: The non-inferiority margin of the priors against the curve (nats of the mean all-slot log p;
#: the theory family's margin of ``posbias fix``).
MARGIN = placement.THEORY["margin"]


def used_examples() -> list[int]:
    """The file's questions some chapter has scored: the pilot and test questions of
    :ref:`ch-realqa`, and those ``posbias fix`` draws at its quick and full sizes (seed 0)."""
    n = realqa.DESIGN["data"]["qa"]["examples_in_file"]
    got = set(realqa.DESIGN["pilot"]) | set(realqa.DESIGN["test"])
    for sizes in (prompts.FIX_QUICK, prompts.FIX_DEFAULTS):
        got |= {int(i) for i in study.draw_examples(n, sizes["examples"], 0)}
    return sorted(int(i) for i in got)


def questions() -> list[int]:
    """The design's questions: 0-based indices into the NQ-open oracle file, in a fixed
    permutation's order, none that another chapter scored (the pilot and test questions of
    :ref:`ch-realqa`, and those ``posbias fix`` draws at its quick and full sizes)."""
    n = realqa.DESIGN["data"]["qa"]["examples_in_file"]
    skip = set(used_examples())
    perm = np.random.default_rng([_SEED, 0xC0F]).permutation(n)
    return [int(i) for i in perm if int(i) not in skip][:_N]


#: The study's design, fixed before any of its questions was scored (registry ``confirm``).
DESIGN = Design("confirm", {
    "data": dict(realqa.DESIGN["data"]["qa"]),
    "models": ["smollm2-135m", "gemma3-270m"],
    "weights": "pretrained", "seed": 0,
    "documents": 10,
    "positions": [0, 2, 4, 7, 9],
    "questions": questions(),
    "excluded": used_examples(),
    "ranker": "bm25",
    "declared_from": "the log p curves of the realqa chapter's 14 test questions (10 documents, "
                     "the same gold slots): the last slot is each model's best (SmolLM2 -8.80 "
                     "against an all-slot mean of -9.92, Gemma-3 -6.75 against -7.50), so the "
                     "primary remedy puts the top document last",
    # the text below is the design as registered before the data (the measurement's cache key
    # holds its hash); the registry's second entry changed one thing in the code that reads it:
    # the accuracy's Wilson interval is over questions, not over prompts (decisions())
    "primary": {"arm": "primary", "remedy": "long-context-reorder",
                "setting": {"ranker": "bm25"},
                "claim": "the mean over questions of the all-slot gain (log p under the remedy "
                         "minus the model as it is, averaged over the five original gold slots) "
                         "is above 0",
                "sided": "one-sided at alpha 0.05: holds when the one-sided 95% lower t bound is "
                         "above 0, fails when the one-sided 95% upper bound is at or below 0",
                "robustness": "sign-flip permutation test of the per-question gains, one-sided, "
                              "9,999 flips, seed 0 (stats.paired_test)",
                "accuracy": "best_subspan_em of a greedy answer (32 new tokens, to the first "
                            "line) under the primary and under the ceiling, Wilson over prompts "
                            "per arm, and the paired difference (t over questions); the model as "
                            "it is gets no greedy answer here (five more generations a question: "
                            "over the budget), its log p is the claim's reference"},
    "ceiling": {"arm": "ceiling",
                "what": "the gold passage moved to the model's best slot by the realqa curve "
                        "(read between gold slots by linear interpolation), the other "
                        "documents in their order: a perfect ranker's placement",
                "claim": "all-slot gain above 0, one-sided t at alpha 0.05 (positive control: "
                         "if it does not hold, no reorder can be seen at this size)"},
    "secondary": {
        "arms": {"haystack": ["lost-in-the-middle-ranker", {"ranker": "bm25"}],
                 "curve-order": ["curve-order", {"ranker": "bm25"}],
                 "prior-born": ["prior-order", {"ranker": "bm25", "prior": "born"}],
                 "prior-measured": ["prior-order", {"ranker": "bm25", "prior": "measured"}],
                 "shuffle": ["random shuffle of the documents, one seeded permutation per "
                             "question (seed 20263), the same for every original slot", {}]},
        "qualities": "placement.slot_qualities on the realqa test prompts (the model as it is, "
                     "pretrained, seed 0): curve from their recorded log p, the born prior at "
                     "alpha 0.5, the measured Jacobian prior",
        "claims": [["haystack", "gain > 0"], ["curve-order", "gain > 0"],
                   ["prior-born", "gain > 0"], ["prior-measured", "gain > 0"],
                   ["primary - shuffle", "> 0"],
                   ["prior-born - curve-order", f"> -{MARGIN}"],
                   ["prior-measured - curve-order", f"> -{MARGIN}"]],
        "family": "Holm at alpha 0.05 over the seven claims, per model; two-sided t intervals "
                  "(stats.holm_family)"},
    "scoring": "teacher-forced log p of the file's first gold answer after 'Answer:'; identical "
               "prompts scored once",
    "power": {"from": "the per-question SD of the realqa gold-last gain (last slot minus the "
                      "all-slot mean): SmolLM2 1.30 nats, Gemma-3 0.72 nats (14 questions)",
              "detectable": "with 64 questions, one-sided t at 0.05, power 0.8: 0.41 nats "
                            "(SmolLM2) and 0.23 nats (Gemma-3); the design asks at most 0.5",
              "rule": "stats.detectable_effect(sd, 64)"},
    "alpha": 0.05,
    "max_new_tokens": 32,
    "twenty_documents": "not run: the budget of this session holds one count",
})


def _checked() -> dict:
    check(DESIGN)
    return DESIGN.as_dict()


def realqa_part():
    """The realqa chapter's test prompts (its questions, 10 documents, its gold slots): where
    the slot qualities are read, before this study's data."""
    d = realqa.DESIGN
    return prompts.prepare(realqa.data_path("qa"), d["documents"], list(d["positions"]), None,
                         None, 0, "liu-qa", select=list(d["test"]))
