r"""Where real models are born: the born profile as a function of the scales an initialiser sets.

Chapter :ref:`ch-born-scales`.  The seed's theory assumes uniform attention at initialization.
Without QK-norm a logit's std at init is :math:`g = \sigma_{qk}^2 d`
(:func:`posbias_nb.theory.logit_scale`), so whether the premise holds depends on the scale of
the query/key matrices and the width, not on the architecture alone.  transformers' initialiser
(one std, 0.02, for every matrix) ties three scales together: the query/key matrices (the
logits), the rest of each block (what a block adds to the residual stream) and the embedding
(the residual stream's own scale).  This study separates them, with one std per group of
matrices (:func:`posbias_nb.models.at_width` with ``std=``, the groups decided by behaviour in
:mod:`posbias_nb.models.init_scales`).

The design is one frozen object, :data:`DESIGN`, registered (study ``born-scales``) before any of
its data.  Four parts, each a family of equivalence claims under Holm's correction
(:func:`decisions`), on the same token windows at every cell (paired by window):

* ``matched``: every group at :math:`\sigma = \sqrt{g/d}` on each rung of the width ladder of
  *Born at scale* (Llama, Qwen and Mistral shapes), for each :math:`g` of the design: per shape,
  :math:`g` and statistic, "the widest rung minus the narrowest lies within the margin";
* ``factorial``: at the narrowest rung, each group low (0.02, transformers' std) or high (the
  std with which that group has, at this width, the scale 0.02 gives it at the published width:
  :math:`0.02\sqrt{D/d}`), all eight cells; per shape, group and statistic, "the group's main
  effect (its four high cells minus its four low cells) lies within the margin";
* ``control``: Gemma-3-4B (QK-norm) at its narrowest rung with its query/key matrices ×10
  against ×1: "the change lies within the margin";
* ``prediction``: the narrowest rung at the full-width scales (the factorial's all-high cell)
  at the GPU design's length and windows of *Born at scale*, against the full-width GPU
  entries: "GPU minus narrow lies within the margin".

Five shape statistics per window (:func:`window_stats`): the four of *Born at scale*
(:func:`posbias_nb.experiments.born.scale.window_stats`) and the **scatter** around the layout row, the
root mean square of :math:`\log_{10}` of the window's profile over the row, both normalised over
the reachable positions.  "holds": the statistic does not move beyond its margin; "fails": it
moves beyond it; otherwise inconclusive.  Each claim carries the smallest difference its windows
detect with 80% power (:func:`posbias_nb.stats.detectable_effect`, two-sided, at the family's
level over its number of claims: Bonferroni, conservative for Holm).

The study is a package of modules with one job each: :mod:`.config` (the design),
:mod:`.measurements` (the cells, cached), :mod:`.statistics` (the families and their
decisions), :mod:`.words` (the verdict rows) and :mod:`.published` (the published initialisers).
Its names are read from here as before.
"""
from __future__ import annotations

# the verdict code's dotted names (design.VERDICT_CODE), the chapter and other studies read these here
from .config import DEFINITION, DESIGN, GROUP_WORDS, PARTS, STATS, STAT_WORDS  # noqa: F401
from .measurements import architecture, cell, cell_stats, cell_std, factorial_cells, full_std, gpu_windows, matched_std, measure, prediction_cell, spec, window_stats  # noqa: F401
from .statistics import cell_scales, cells, decisions, detectable, logit_check, moved_by_group, operator_agreement, operator_stats, operator_table, part_claims, summary, update_ratio  # noqa: F401
from .words import moved_text, verdict_rows  # noqa: F401
from .published import RECIPE_SHAPE, formula, recipes  # noqa: F401

__all__ = ["DESIGN", "STATS", "STAT_WORDS", "PARTS", "GROUP_WORDS", "matched_std", "full_std", "factorial_cells", "cell_std", "spec", "measure", "window_stats", "cell", "decisions", "detectable", "update_ratio", "gpu_windows", "prediction_cell", "summary", "verdict_rows", "formula", "recipes", "RECIPE_SHAPE", "cell_scales", "cells", "operator_stats", "moved_by_group", "moved_text", "architecture", "logit_check", "operator_table", "operator_agreement"]
