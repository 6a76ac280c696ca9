r"""Lost in the middle on real questions: Liu et al.'s multi-document QA and key-value files.

Chapter :ref:`ch-realqa`.  The design is one frozen object, :data:`DESIGN` (the data files and
their SHA-256, the models, the documents per prompt and the gold positions, the pilot and the
test questions, the scoring, the prior, the families of comparisons), recorded in the registry
(:mod:`posbias_nb.experiments.base.design`) before any test question is scored.  Every measurement is
:func:`posbias_nb.experiments.prompt.user_task.task_run` (``posbias task``) on the design's questions:

* :func:`pilot`: the pilot questions (disjoint from the test ones), which chose how many test
  questions the budget must allow (:func:`power_n`);
* :func:`qa_run` and :func:`kv_run`: the test questions of the NQ-open oracle file and the
  key-value examples, the gold passage (record) moved across the design's positions;
* :func:`prior`: the content-free rollout prior of the gold document in every prompt (the
  structural theory's positional row, :func:`posbias_nb.theory.layout_influence` with each
  layer's measured :math:`\lambda_t`, summed over the document's tokens);
* :func:`jacobian_prior`: the measured influence of the gold document in every prompt (the
  Jacobian of the last prompt token's final hidden state with respect to each input embedding,
  summed over the document's tokens with :func:`posbias_nb.measure.span_profile`);
* :func:`decisions`: the pre-declared families, Holm within each.

The study is a package of modules with one job each: :mod:`.config` (the files and the design),
:mod:`.measurements` (the runs and the priors) and :mod:`.statistics` (tables, intervals, the
families).  Its names are read from here as before.
"""
from __future__ import annotations

# the verdict code's dotted names (design.VERDICT_CODE), the chapter and other studies read these here
from .config import CHAPTER, DESIGN, JACOBIAN_DEFINITION, data_path, published_path  # noqa: F401
from .measurements import gold_spans, jacobian_prior, kv_run, pilot, prepared, prior, qa_run  # noqa: F401
from .statistics import decisions, first_middle_last, link, link_family, matrices, paired_by_slot, power_n, power_rule  # noqa: F401

__all__ = ["DESIGN", "data_path", "published_path", "pilot", "qa_run", "kv_run", "matrices", "prior", "gold_spans", "first_middle_last", "paired_by_slot", "power_rule", "power_n", "decisions", "link", "jacobian_prior"]
