"""The retrieval study's configuration: its design (locked before its data), the priors it links,
Liu et al.'s published numbers and departures, the columns of a run's table and the run's
cache parameters."""
from __future__ import annotations

import re
from ....measure import entry
from ....tasks.kv_needle import check_args
from ...base.design import Design

__all__ = ["DESIGN", "PRIORS", "LIU_MPT30B", "LIU_DEPARTURES", "CSV_COLUMNS", "LIU_OUTCOMES", "LIU_RETRIEVAL_ERRORS", "LIU_COLUMNS", "run_params"]


PRIORS = ("hidden", "rollout", "argmax_prob")

_DEF_VERSION = "retrieval-v2"  # bump when the prompts or the scores change

#: Liu et al. (2023), mpt-30b-instruct, 140 keys: gold item index and accuracy (their Fig. 7).
LIU_MPT30B = {"item": [0, 34, 69, 104, 139], "n_items": 140,
              "accuracy": [1.0, 0.936, 0.886, 0.804, 0.962]}

#: Where the chapter's fast task (``variant="hex"``) departs from Liu et al.'s; the ``"liu"``
#: variant undoes the first, third and fourth.
LIU_DEPARTURES = (
    "keys and values are 8 hexadecimal digits, not 36-character UUIDs",
    "a prompt holds about 15 pairs (350 tokens), not 75, 140 or 300",
    "the answer is started by a forced opening quote",
    "scored by teacher-forced exact match, not free generation scored by substring match",
)

#: The chapter's design (*From prior to behaviour*), locked: its hash is the registry's latest
#: entry for "retrieval" (:mod:`posbias_nb.experiments.base.design`).
DESIGN = Design("retrieval", {
    "task": {"task": "kv", "positions": 7, "examples": 30, "length": 350, "seed": 0},
    "runs": {"G": ["gemma3-270m", "pretrained", 30], "S": ["smollm2-135m", "pretrained", 30],
             "R": ["gemma3-270m", "random", 3]},
    "readout": {"model": "gemma3-270m", "examples": 3, "prior": "argmax_prob"},
    "liu": {"model": "gemma3-270m", "positions": 3, "examples": 24, "length": 800},
    "families": {"task_u": "first and last slot minus the middle region, log p, per model "
                           "(Holm over the four)",
                 "liu": "first and last pair minus the middle pair, accuracy (Newcombe, Holm "
                        "over the two)"},
    "link": {"n_boot": 2000, "seed": 0},
    "alpha": 0.05,
})

CSV_COLUMNS = ("position", "depth", "item", "accuracy", "accuracy_low", "accuracy_high",
               "logprob", "logprob_low", "logprob_high")

LIU_COLUMNS = CSV_COLUMNS[:6]

_MARGIN = 8  # generated tokens beyond the value's own token count (variant "liu")

def run_params(model, task, positions, examples, length, seed, weights, variant="hex") -> dict:
    task, positions, examples, length, seed = check_args(task, positions, examples, length, seed,
                                                         variant)
    info = entry.checked(model, weights, length, 1, seed)
    key = entry.run_key(info, weights, length, None, seed, text=task == "needle", task=task,
                        positions=positions, examples=examples, definition=_DEF_VERSION)
    if variant != "hex":
        key["variant"] = variant
    return key

#: What a Liu et al. generation can be (:func:`liu_outcome`), in the order they are tested.
LIU_OUTCOMES = ("correct", "another pair's value", "a UUID not in the prompt",
                "cut short (a prefix of the value)", "a wrong UUID, cut short", "no UUID")

#: The outcomes that are retrieval errors (a wrong UUID, whole or cut short).
LIU_RETRIEVAL_ERRORS = ("another pair's value", "a UUID not in the prompt",
                        "a wrong UUID, cut short")

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

#: The start of a UUID at the end of an output (8 hex digits, then its groups, each maybe cut).
_UUID_START = re.compile(r"[0-9a-f]{8}(-[0-9a-f]{0,4}(-[0-9a-f]{0,4}(-[0-9a-f]{0,4}"
                         r"(-[0-9a-f]{0,12})?)?)?)?$")
