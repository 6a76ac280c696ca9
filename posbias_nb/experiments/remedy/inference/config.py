"""The inference-time remedies study's configuration: its design (locked before its data), the arms
and their grids, the families of claims, the chapter's sizes and slots."""
from __future__ import annotations

from .... import remedy_table
from ...base.design import Design, check

__all__ = ["DESIGN", "CHAPTER", "ARMS", "GRID", "FAMILIES", "slots"]


_DEF = "inference-v3"  # bump when a definition below changes (the design has its own hash)

#: The arms: the remedy each applies, whose method it is, and which rows it changes ("last":
#: the prompt's last token and the answer only, so the prompt is computed once for all of them).
#: (The design names its arms; what each is, the remedy table says.)
ARMS = {n: {"remedy": n, "method": remedy_table.TABLE[n]["method"],
            "ours": remedy_table.TABLE[n]["ours"], "rows": remedy_table.TABLE[n]["rows"]}
        for n in ("hidden-scaling", "hidden-scaling-all", "ms-poe", "attention-calibration",
                  "prior-calibration")}

_MODELS = ("smollm2-135m", "gemma3-270m")

#: The hyperparameter grids (the tuning examples choose one setting per arm and model): each
#: remedy's own, from the remedy table.
GRID = {n: remedy_table.TABLE[n]["grid"] for n in ARMS}

_PRIOR_ARMS = ("hidden-scaling", "hidden-scaling-all", "ms-poe", "prior-calibration")

#: The pre-declared families of comparisons (Holm within each).
FAMILIES = {
    "task": [f"{m}/{a}" for m in _MODELS for a in ARMS],
    "prior": [f"{m}/{a}" for m in _MODELS for a in _PRIOR_ARMS],
    "init": [f"{m}/{a}" for m in _MODELS for a in _PRIOR_ARMS],
    "cost": [f"{m}/{a}" for m in _MODELS for a in _PRIOR_ARMS],
    "versus": [f"{m}/{a}" for m in _MODELS for a in ("hidden-scaling-all", "prior-calibration")],
}

_VERSUS = {"hidden-scaling-all": "hidden-scaling", "prior-calibration": "attention-calibration"}

#: The chapter's design, fixed before the measurements it governs (registry: ``designs.json``).
DESIGN = Design("inference", {
    "models": list(_MODELS),
    "retrieval": {"task": "kv", "positions": 7, "examples": 28, "length": 250, "seed": 0},
    "slots": [3],                  # the central slot of seven (the centre of regions(7).middle)
    "tune": list(range(0, 4)),     # the examples that choose the settings (and the channel)
    "test": list(range(4, 28)),    # the examples the verdicts use: 24
    "channel_search": {"samples": 8, "length": 1000, "seed": 0, "top": 10, "scale": 0.0},
    "prior_fit": {"windows": 8, "seed": 0},   # offline text: our prior calibration's prior
    "profile": {"length": 128, "windows": 8, "probes": 2, "seed": 7},
    "cost": {"windows": 8, "seed": 1},
    "arms": {a: dict(v) for a, v in ARMS.items()},
    "grid": {a: [dict(s) for s in g] for a, g in GRID.items()},
    "rules": {
        "task": {"statistic": "paired change of the gold value's log p at the slots, per "
                              "example", "threshold": 0.0, "direction": "greater"},
        "prior": {"statistic": "paired change of the middle share of the influence, per "
                               "window (pretrained)", "threshold": 0.0, "direction": "greater"},
        "init": {"statistic": "per-window relative change of the middle share at "
                              "initialization", "band": [-0.05, 0.05], "direction": "within",
                 "control": "testable only if the same remedy moves the pretrained prior "
                            "outside the band (its 95% interval outside it); measured only "
                            "where it is testable"},
        "cost": {"statistic": "paired change of the next-token loss (nats), per held-out "
                              "window", "threshold": 0.05, "direction": "less"},
        "versus": {"statistic": "ours minus the paper's arm, task log p gain, per example",
                   "threshold": 0.0, "direction": "greater"},
    },
    "families": FAMILIES,
    "alpha": 0.05,
    # added after the verdicts had been seen: they decide nothing (see the registry)
    "diagnostics": {"pi": "position interpolation at 1.2 in Ms-PoE's layers, test prompts",
                    "recall": "argmax of the calibrated and of the raw document attention "
                              "against the gold pair, test prompts"},
})

#: The design as a plain read-only mapping (``CHAPTER["test"]``).
CHAPTER = DESIGN.spec

def _checked():
    check(DESIGN)  # a design that moved without a dated registry entry is refused

def slots() -> list[int]:
    """The pre-declared slots the task is scored at."""
    return [int(s) for s in CHAPTER["slots"]]

def _arm(name):
    if name not in ARMS:
        raise ValueError(f"arm must be one of {', '.join(ARMS)}; got {name!r}")
    return ARMS[name]
