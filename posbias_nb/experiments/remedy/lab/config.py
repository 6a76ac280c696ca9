"""The remedies lab's configuration: the remedies and their settings, the definition versions of
its entries, the sizes of its evaluation, the chapter's configuration and arms, and its design
(locked before its data)."""
from __future__ import annotations

from ...base.design import Design

__all__ = ["REMEDIES", "TWIN_KEYS", "TWIN_STEPS", "CHAPTER", "ARMS", "TABLE_COLUMNS", "JSON_KEYS", "DESIGN", "DEVICES", "MIDDLE_WEIGHT", "OVERSAMPLE_P", "CURRICULUM_FRAC", "N_EX", "N_PROBE"]


REMEDIES = ("none", "weighted", "oversample", "curriculum")

DEVICES = ("cpu", "cuda")

MIDDLE_WEIGHT, OVERSAMPLE_P, CURRICULUM_FRAC = 4.0, 0.5, 0.3

# v3: the init gradient is read at the answer token p (v2 read p + 1, a filler token)
# v4: the remedies' middle is the central half of the answer positions (was the middle third)
_VERSION = "train-v4"

N_EX = 32   # held-out examples per evaluated answer position

N_PROBE = 8  # held-out sequences for the influence profile and the hooks

#: The twin's version: its outputs and dtype (a change re-keys every twin)
_TWIN_VERSION = "train-twin-v1"

#: The steps of the chapter's twins (:func:`run_twins`): the most steps of
#: ``bench/bench_twin_rounding.py``'s grid at which the twin still catches every change of the
#: training step that the float32 check on the recording CPU catches (a unit test compares)
TWIN_STEPS = 100

#: The arrays of a twin: continuous, so that another CPU's rounding moves them by a measured,
#: tiny amount (accuracies flip where a float32 run's do; a twin has none)
TWIN_KEYS = ("train_loss", "curve_loss", "loss", "influence", "lambda")

#: The CSV columns of ``posbias train``: one row per evaluated answer position.
TABLE_COLUMNS = ("position", "accuracy", "loss", "steps_to_half", "grad_init")

#: The keys of its JSON object (besides ``meta``).
JSON_KEYS = ("position", "accuracy", "loss", "influence", "lambda", "lambda_init", "curve",
             "curve_steps", "grad_init")

#: The chapter's configuration: 2 layers, width 64, L = 64, 200 steps of batch 32 (equal compute
#: for every arm), kv recall with 4 pairs.
CHAPTER = dict(task="kv", layers=2, width=64, length=64, steps=200)

#: The arms of the chapter's experiments: name -> keyword arguments of :func:`train_run`.
ARMS = {
    "uniform": dict(answer_positions="uniform"),
    "start": dict(answer_positions="start"),
    "edges": dict(answer_positions="edges"),
    "weighted": dict(answer_positions="edges", remedy="weighted"),
    "oversample": dict(answer_positions="edges", remedy="oversample"),
    "curriculum": dict(answer_positions="edges", remedy="curriculum"),
    "residual_x2": dict(answer_positions="uniform", residual_scale=2.0),
    "residual_x0.5": dict(answer_positions="uniform", residual_scale=0.5),
}

#: The chapter's design (*Fixing it in training*), locked: the registry's latest entry for
#: "remedies" (:mod:`posbias_nb.experiments.base.design`).  The chapter reads its seeds, arms, depths
#: and families from here.
DESIGN = Design("remedies", {
    "config": dict(CHAPTER),
    "arms": {k: dict(v) for k, v in ARMS.items()},
    "chapter_arms": ["uniform", "edges", "weighted", "oversample", "curriculum"],
    "seeds": 10,
    "depths": [2, 4, 8],
    "remedies": ["weighted", "oversample", "curriculum"],
    "remedy_level": "Bonferroni over the three remedies: 1 - 0.05 / 3",
    "residual_scales": [0.5, 1.0, 2.0],
    # each claim's declared rule (design.decide_rule), applied by decide() and verdict_rows()
    "rules": {
        "grad": {"direction": "less", "threshold": 1.0,
                 "says": "the gradient at init, middle over ends, below 1"},
        "depth": {"direction": "less", "threshold": 0.0,
                  "says": "the middle-over-ends gradient ratio falls from 2 to 8 layers, seed by "
                          "seed: the change below 0"},
        "factorial": {"direction": "less", "threshold": {"given": "factorial"},
                      "says": "at the deepest depth H the measured ratio below the seed's "
                              "1/(H-1)!, which the chapter supplies"},
        "speed": {"direction": "less", "threshold": 0.0, "testable": False,
                  "says": "the middle learns slower (area under the curve, middle minus ends, "
                          "below 0); not testable at 2 layers, where the rollout has no dead "
                          "zone"},
        "biased": {"direction": "less", "threshold": 0.0,
                   "says": "answers at the ends widen the middle-minus-ends gap against "
                           "uniform data: the paired change below 0"},
        "influ": {"direction": "less", "threshold": 0.0,
                  "says": "answers at the ends shrink the influence's middle share: the paired "
                          "change below 0"},
        "narrows": {"direction": "greater", "threshold": 0.0,
                    "says": "a remedy narrows the valley against the edges arm: the gap's "
                            "paired change above 0"},
        "faster": {"direction": "greater", "threshold": 0.0,
                   "says": "with a remedy the middle learns faster: above 0"},
        "slower": {"direction": "less", "threshold": 0.0,
                   "says": "with a remedy the ends learn slower: below 0"},
        "lever": {"direction": {"sign_of": "predicted"}, "threshold": 0.0,
                  "says": "the initial middle share moves (alpha 0.5 vs 2) in the direction "
                          "the rollout predicts: the sign of the predicted change, which the "
                          "chapter supplies"},
        "size": {"direction": {"opposite_sign_of": "predicted"}, "threshold": 0.0,
                 "says": "the measured change is smaller than the predicted one: measured "
                         "minus predicted on the side opposite to the prediction's sign"},
    },
})
