r"""``posbias fix --fast``: the prompt remedies' fast path (design ``fix-fast``, issue 62).

The fifth design of ``posbias fix`` (:func:`posbias_nb.experiments.remedy.fix.select_one`: tune on one
part, carry the best remedy to the test part, test it alone, one-sided) spends most of its time
above its floor (the model as it is on the tuning and the test prompts, ``bench/bench_fix.py``)
scoring every setting of every prompt remedy on the tuning part, and scoring and answering
every chosen remedy on the test part where only the carried one is judged.  This design makes
two changes, and nothing else:

1. **Tuning by the landing slot.**  No rewritten prompt is scored on the tuning part.  For each
   tuning example, each gold slot it was asked at and each setting of a ranked prompt remedy
   (:data:`RANKED`), the slot the gold passage lands in is found by the setting's ranker and
   placement alone (BM25 reads text; the question likelihood costs one short pass per document,
   made only where a setting uses it).  The setting's log p on that prompt is *estimated* by the
   model as it is on the same example with the gold passage at that slot: its log p at the gold
   slots measured, read at the landing slot by linear interpolation between them (the curve's
   own reading, :func:`posbias_nb.experiments.prompt.placement.slot_qualities`).  The estimated gain is
   that, less the measured log p at the slot it was asked at (:func:`landing_gains`); the
   all-slot rule and the fifth design's selection then run on the estimates unchanged.
2. **Only the carried remedy on the test part**, scored, answered (greedy, best_subspan_em) and
   timed against the model as it is by :func:`posbias_nb.experiments.remedy.fix.evaluate` itself; the
   other remedies' test-part changes, exploratory in the fifth design, are not measured.

The estimate ignores what a placement does to the other passages' order.  How well it tracks
the scored tuning gains is measured on runs that scored them (the book's and the full path's
records, :func:`landing_check`); ``bench/results/fix-landing.json`` holds the check.  The power
statement comes from the estimates' spread over the tuning questions, which leaves out that
order's share of the spread: the detectable gain it states is a lower bound (said in the result).
The verdict itself is the test part's, scored, as in the fifth design.

The design is a package of modules with one job each: :mod:`.config` (the design),
:mod:`.statistics` (intervals, landing gains, claims), :mod:`.measurements` (what is cached) and
:mod:`.run` (the command end to end).  Its names are read from here as before.
"""
from __future__ import annotations

# the verdict code's dotted names (design.VERDICT_CODE), the chapter and other studies read these here
from .config import DEFINITION, DESIGN, RANKED  # noqa: F401
from .statistics import as_interval, by_slot, gold_slot_groups, judged_claims, landing_check, landing_gains  # noqa: F401
from .measurements import judge_test_part, landing_slots, quality_orders, remedy_params, tune_settings  # noqa: F401
from .run import fix  # noqa: F401

__all__ = ["DESIGN", "RANKED", "landing_gains", "landing_slots", "landing_check", "tune_settings", "fix"]
