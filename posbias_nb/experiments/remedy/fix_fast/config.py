"""The fast path's configuration: its design (locked before its data), the ranked prompt remedies it
tunes, the definition version of its cache entries."""
from __future__ import annotations

from ...prompt import placement
from ...base.design import Design

__all__ = ["DESIGN", "RANKED"]


DEFINITION = "fix-fast-v1"  # bump when a definition below changes the numbers

#: The prompt remedies the fast path searches: those that place documents by a ranking, whose
#: prompt holds the same passages in another order (the landing slot says where the gold goes).
RANKED = placement.RANKED

#: The fast path's design (registry: ``designs.json``), fixed before its first measurement.
DESIGN = Design("fix-fast", {
    "applies_to": "posbias fix --fast (with or without --quick); the fifth design's split, "
                  "sizes, grids and test otherwise",
    "remedies": list(RANKED),
    "tuning": "no rewritten prompt scored: each setting's log p on a tuning prompt estimated by "
              "the model as it is on the same example with the gold passage at the slot the "
              "setting puts it in (measured gold slots, linear interpolation between them); "
              "the question likelihood computed only where a setting uses it",
    "rule": "the fifth design's (fix.select_one) on the estimated all-slot gains: per remedy the "
            "setting with the largest mean estimated gain, the remedy with the largest such "
            "gain above 0 carried",
    "test": "the carried remedy alone, scored, answered and timed by fix.evaluate against the "
            "model as it is; one-sided Student t at 0.05 over test questions, a sign-flip "
            "permutation test beside it; no other remedy measured on the test part",
    "power": "from the estimated per-question gain's SD on the tuning part (a lower bound of "
             "the scored spread: the detectable gain is optimistic)",
    "floor_ratio": 1.3,
    "alpha": 0.05,
})
