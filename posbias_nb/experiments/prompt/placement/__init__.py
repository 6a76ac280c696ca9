r"""``posbias fix``'s prompt remedies: where the documents go, measured on one part of the
user's examples (chapter :ref:`ch-documents`).

:mod:`posbias_nb.experiments.remedy.fix` calls :func:`on_tuning` on the tuning part and
:func:`on_test` on the test part; this module measures, ``fix`` decides.  Each prompt of a part holds the example's
gold passage at one gold slot among its distractors (:func:`posbias_nb.experiments.base.prompts.prepare`);
a prompt remedy rewrites that prompt (:func:`place`, the same placement as
:func:`posbias_nb.experiments.base.prompts.prompt_remedy`, which ``posbias task --remedy-file`` and a
pipeline apply), and the gold answer is scored after the rewritten prompt.  A reorder moves the
gold passage wherever its rank sends it, so the record keeps the slot it came from: the change
of log p is paired by example and original gold slot.

**The settings** (:func:`grid`): each ranked remedy once per ranker (BM25 of the question, the
question likelihood of LongLLMLingua, and for a plain file the file's own order);
``prior-order`` once per ranker and prior; ``query-aware`` and ``attention-sort`` once.

**The slot qualities** (:func:`slot_qualities`), all learnt on the tuning part only:

- ``curve``: the mean log p of the gold answer at each gold slot with the model as it is (the
  runs ``fix`` makes anyway); slots between two gold slots are read by linear interpolation
  (``--quick`` scores every slot, so none is read so);
- ``born``: the last row of the layout's :math:`\prod_t ((1-\alpha)I + \alpha K_t)`
  (:func:`posbias_nb.theory.layout_influence`, the model's layout decided by behaviour) at
  :data:`BORN_ALPHA`, at each tuning prompt's own length, summed over each slot's tokens and
  averaged over the prompts: theory only, no forward pass beyond the layout's check;
- ``measured``: the model's Jacobian influence profile on text windows
  (:func:`posbias_nb.measure.profile`, :data:`MEASURED_PRIOR`) at the tuning prompts' mean
  length, each window's profile normalised to sum 1, the mean over windows; a prompt's slot
  spans are mapped onto it in proportion to the prompt's length.

Only the order of the slots by quality decides a placement, so the cache keys hold that order.

The module is a package of modules with one job each: :mod:`.config` (the settings),
:mod:`.measurements` (the slot qualities, the placement, the cached runs) and
:mod:`.statistics` (the theory's comparisons, the rankers' top-1).  Its names are read from
here as before.
"""
from __future__ import annotations

from ....remedy_table import PROMPT as PROMPT_REMEDIES  # noqa: F401  (the remedies it searches)

# the verdict code's dotted names (design.VERDICT_CODE), the chapter and other studies read these here
from .config import BORN_ALPHA, MEASURED_PRIOR, RANKED, THEORY, grid, json_key, rankers  # noqa: F401
from .measurements import born_prior, measured_prior, on_test, on_tuning, place, rank, slot_curve, slot_qualities  # noqa: F401
from .statistics import ranker_top1, theory_family, theory_settings  # noqa: F401

__all__ = ["PROMPT_REMEDIES", "RANKED", "BORN_ALPHA", "MEASURED_PRIOR", "THEORY", "rankers", "grid", "theory_settings", "theory_family", "slot_qualities", "rank", "place", "on_tuning", "on_test", "ranker_top1"]
