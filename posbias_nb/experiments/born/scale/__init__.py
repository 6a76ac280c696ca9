r"""Born at the scale people use: 7B-class architectures at random init, a width ladder on the
CPU and the full width on a GPU.

Chapter :ref:`ch-scale`.  The design is one frozen object, :data:`DESIGN`, recorded in the
registry (:mod:`posbias_nb.experiments.base.design`) before any of its data:

* five published configurations (:data:`posbias_nb.models.SCALE_MODELS`: Llama-3.1-8B,
  Qwen2.5-7B, Mistral-7B-v0.1, Gemma-3-4B and -12B), each at three hidden sizes of its **width
  ladder** (:func:`posbias_nb.models.at_width`: depth, head counts and layout kept, head and MLP
  widths scaled), under two **initialisers**: transformers' own (``"hf"``, every weight with
  std 0.02 at every width) and a width-aware one (``"fan-in"``, std ``width ** -0.5``);
* per (configuration, width, initialiser), the hidden-state influence of the last token
  (:func:`posbias_nb.measure.cached.profile`) on the design's text windows, and the layout's
  exact row (:func:`posbias_nb.theory.layout_influence`, the layout checked by behaviour,
  :func:`layout`) at the :math:`\alpha` fitted on the mean profile;
* four **shape statistics** per window (:func:`window_stats`): the Spearman correlation of the
  window's profile with that row, the :math:`\alpha` fitted on the window alone, and
  :math:`\log_{10}` of the first-to-middle and last-to-middle ratios (the middle of
  :func:`posbias_nb.metrics.regions`).

The claims (:func:`decisions`), declared before the data: for each initialiser, one family under
Holm's correction of one claim per configuration and statistic, "the statistic at the widest
rung minus at the narrowest lies within the design's margin", an equivalence claim
(:func:`posbias_nb.stats.holm_family`, ``direction="within"``) over the windows, paired (the
same token windows at every width).  "holds": the shape does not depend on width within the
margin; "fails": it moves by more than the margin; otherwise inconclusive.

On a GPU (:func:`gpu_profile`, ``bench/gpu_born.py``), the same configurations at their full
width and at the design's long lengths, with the time of the profile against its bare floor
(:func:`floor_seconds`); those entries are recorded with their device and cannot be re-measured
on a CPU: ``make test`` checks their provenance and re-measures their reduced-width twins
(:data:`posbias_nb.provenance.plan.GPU_MEASURED`).

The study is a package of modules with one job each: :mod:`.config` (the design),
:mod:`.measurements` (the CPU ladder, cached), :mod:`.statistics` (rows, statistics,
decisions), :mod:`.gpu` (full width on a GPU), :mod:`.words` (tables and verdict rows) and
:mod:`.records` (the GPU runs recorded).  Its names are read from here as before.
"""
from __future__ import annotations

# the verdict code's dotted names (design.VERDICT_CODE), the chapter and other studies read these here
from .config import DEFINITION, DESIGN, GPU_GRAPH_BUDGET, STATS, STAT_WORDS  # noqa: F401
from .measurements import ladder, layout, measure, spec, twin_key, unverified  # noqa: F401
from .statistics import BINS, cell, decisions, gpu_summary, row, valley, widths_table, window_stats  # noqa: F401
from .gpu import floor_seconds, gpu_cell, gpu_inputs, gpu_params, gpu_plan, gpu_profile  # noqa: F401
from .words import INIT_WORDS, configurations, ladder_summary, verdict_rows  # noqa: F401
from .records import gpu_provenance, gpu_runs, gpu_status  # noqa: F401

__all__ = ["DESIGN", "ladder", "spec", "layout", "measure", "twin_key", "row", "window_stats", "cell", "widths_table", "decisions", "valley", "gpu_plan", "gpu_inputs", "gpu_params", "gpu_profile", "floor_seconds", "gpu_cell", "unverified", "STATS", "STAT_WORDS", "GPU_GRAPH_BUDGET", "configurations", "ladder_summary", "verdict_rows", "INIT_WORDS", "gpu_runs", "gpu_status", "gpu_summary", "gpu_provenance", "BINS"]
