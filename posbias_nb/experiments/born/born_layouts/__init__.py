r"""Born with a layout: Jacobian profiles at random init against each layout's theory row.

Chapter :ref:`ch-layouts`.  The design is one frozen object, :data:`DESIGN` (models and their
layouts, lengths, windows, probes, the two pre-declared comparisons), recorded in the registry
(:mod:`posbias_nb.experiments.base.design`).  For each study model:

* its **layout**, read from the config and checked by behaviour
  (:func:`posbias_nb.models.model_layout`, sinks included);
* its **measured profile**: the hidden-state influence of the last token at random init,
  :data:`DESIGN` ``windows`` text windows (:func:`posbias_nb.measure.cached.profile`);
* two **theory rows**, each with its own :math:`\alpha` fitted on the mean profile (log
  criterion, over the positions the layout can reach): the layout's,
  :func:`posbias_nb.theory.layout_influence`, and the plain :math:`N^H` row,
  :func:`posbias_nb.theory.influence`;
* per window, the Pearson correlation of the logs and the Spearman correlation between the
  window's profile and each row, over the reachable positions.

The comparisons (:func:`decisions`), declared in :data:`DESIGN` before the data, decided as one
family with Holm's correction (:func:`posbias_nb.stats.holm_family`):

* ``fit:<model>``: the layout row agrees better than :math:`N^H` (paired by window, the gap of
  the log-Pearson correlations greater than 0), for every model whose layout is not all full;
* ``middle``: the middle's share (the central half, :func:`posbias_nb.metrics.regions`) is
  larger in the hybrid than in its all-full twin, paired by window (same windows, same probes).

A sliding stack's influence beyond its reach is exactly 0: :func:`beyond_reach` returns it, a
check of the code, not a verdict.

The study is a package of modules with one job each: :mod:`.config` (the design, the specs,
the seeds), :mod:`.measurements` (what is cached), :mod:`.statistics` (the rows, the
agreements, the decisions).  Its names are read from here as before.
"""
from __future__ import annotations

# DEFINITION, agreement_of and claim_rule are read here by the verdict code's dotted names
# (design.VERDICT_CODE), EARLY by the chapter
from .config import DEFINITION, DESIGN, EARLY, SWITCHES, init_seeds, study_spec  # noqa: F401
from .measurements import ablation, layout, measure, switch_off
from .statistics import (ablation_sides, ablations, agreement_of, agreements,  # noqa: F401
                         beyond_reach, claim_rule, decide, decisions, effect, middle_shares, rows)

__all__ = ["DESIGN", "study_spec", "layout", "init_seeds", "measure", "rows", "agreements",
           "decisions", "decide", "effect", "ablation_sides", "beyond_reach", "middle_shares",
           "SWITCHES", "switch_off", "ablation", "ablations"]
