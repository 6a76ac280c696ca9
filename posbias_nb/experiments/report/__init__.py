r"""``posbias report``: one model's position bias, born and trained, in one page.

The report answers a practitioner's question -- does *my* model lose the middle, where, how badly,
and is it the architecture or the training? -- with four sections and a summary, each computed
by the functions the chapters use (nothing is re-implemented here):

1. **Born vs trained** (chapters :ref:`ch-init` and :ref:`ch-after`).  The Jacobian influence
   profile of the last token's final hidden state (:func:`posbias_nb.measure.profile`, or
   :func:`~posbias_nb.measure.shared_profile` for a packaged zoo model, so both read the same
   token ids) over ``windows >= 8`` disjoint text windows, for the model and for its
   **random-init twin** (the same configuration, ``weights="random"``, the same seed).  Each
   window's profile is normalized to sum 1; per position, the mean over windows with a Student
   *t* 95% interval (:func:`posbias_nb.stats.mean_interval`).  The theory row
   ``theory.influence(L, H, alpha)`` is overlaid with both ``H`` and ``alpha`` fitted
   (:func:`posbias_nb.metrics.fit_theory`).  Headline numbers, each computed **per window** and
   summarized over windows with a *t* interval (ratios on the log scale,
   :func:`posbias_nb.experiments.prompt.retrieval.ratio_interval`):

   * ``ptv`` -- the robust peak-to-valley (:func:`posbias_nb.metrics.robust_peak_to_valley`,
     ``ends = 0.02``);
   * ``valley`` -- where the valley sits, as a fraction of the context (its position / L);
   * ``primacy`` and ``recency`` -- the first and the last token's influence over the median of
     the pre-declared middle (:func:`posbias_nb.metrics.regions`), as in
     :func:`~posbias_nb.metrics.profile_summary`;
   * ``change_*`` -- trained over born, paired by window (the same token ids where the
     tokenizer allows; ``meta["paired_ids"]`` says whether they were).

2. **Structural prediction** (chapter :ref:`ch-prediction`, :eq:`eq-pred-measured`).  The
   measured :math:`\lambda_t` and kernels (:func:`posbias_nb.measure.capture`, hooks), the
   residual-aware rollout (:func:`posbias_nb.measure.predict`, ``"residual"``, and the
   attention-only rollout for contrast) against the measured profile: Spearman and :math:`W_1`
   with bootstrap intervals over windows (:func:`posbias_nb.metrics.prediction_scores`), at
   ``min(L, STRUCTURAL_MAX)`` tokens (the kernels take ``T L^2`` floats).  An architecture the
   hooks do not know gets the hooks' own one-line reason instead of numbers.

3. **The task** (chapter *From prior to behaviour*).  Key-value retrieval
   (:func:`posbias_nb.experiments.prompt.retrieval.retrieval_run`): accuracy (Wilson) and answer
   log-probability (*t* over examples) by gold position, the pre-declared edge-vs-middle
   contrasts with Holm's correction (:func:`~posbias_nb.experiments.prompt.retrieval.contrast_family`),
   and a depth x length heatmap as needle-in-a-haystack tools draw it (prompt lengths up to
   about ``0.85 L``).

4. **Span view**.  The influence on the answer position of each prompt of one example
   (:func:`~posbias_nb.experiments.prompt.retrieval.retrieval_link`, hidden-state prior), summed over
   every key-value pair (:func:`posbias_nb.measure.span_profile`): the prior read at the unit the
   task retrieves.

5. **Summary**: one sentence per pre-declared claim, its verdict word from
   :func:`posbias_nb.stats.decide` and its numbers from the sections above; no word is typed
   by hand.  Each claim shows the interval its verdict reads: 95%, or for the two retrieval
   contrasts the t interval at Holm's step-down level.

Everything is cached (:mod:`posbias_nb.cache`): each measurement under its own key, and the
report's numbers under one key of every argument, so a second run that only writes elsewhere
reads them back and only draws the figures.  :func:`write_report` writes ``index.html``
(self-contained: figures as base64 PNG data URIs, no script, no external resource) and
``report.json``; every headline number on the page carries ``data-key`` and ``data-value``
attributes that name its place in ``report.json``.

**Where each part lives** (a package of modules with one job each):
:mod:`~posbias_nb.experiments.report.config` the design and the sizes;
:mod:`~posbias_nb.experiments.report.measurements` the four sections' measurements;
:mod:`~posbias_nb.experiments.report.statistics` the per-window numbers and their intervals;
:mod:`~posbias_nb.experiments.report.claims` the pre-declared claims and their verdicts;
:mod:`~posbias_nb.experiments.report.words` the reasons and the summary's sentences;
:mod:`~posbias_nb.experiments.report.run` the entry point :func:`report`;
:mod:`~posbias_nb.experiments.report.drawing` and :mod:`~posbias_nb.experiments.report.page`
draw and write a result and measure nothing (in
:data:`posbias_nb.provenance.code.NOT_COMPUTING`: editing them moves no recorded number).
"""
from __future__ import annotations

from .config import DESIGN, SETTINGS, STRUCTURAL_MAX, TWINS
from .drawing import figures
from .page import headline_items, write_report
from .run import report
from .words import ZERO_REASON

__all__ = ["report", "write_report", "figures", "SETTINGS", "STRUCTURAL_MAX",
           "headline_items", "DESIGN", "TWINS", "ZERO_REASON"]
