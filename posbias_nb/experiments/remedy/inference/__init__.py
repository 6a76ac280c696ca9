r"""Inference-time remedies measured on the task, on the influence prior and on the cost.

Chapter :ref:`ch-inference`.  Five arms (:data:`ARMS`), each a remedy of
:mod:`posbias_nb.models.remedies` applied to a pretrained model without retraining: the three
papers' own methods (Yu et al.'s hidden scaling, Zhang et al.'s Ms-PoE, Hsieh et al.'s
attention calibration) and two variants of ours beside them, named apart.

The design is one frozen object, :data:`DESIGN`, whose hash the registry
(:mod:`posbias_nb.experiments.base.design`) records with the date and reason of every change; the
chapter prints both.  For each arm and model:

* the **task**: key-value retrieval at the pre-declared slots, the paired change of the gold
  value's log-probability on the test examples (an example is the unit: its slots averaged,
  then a t interval over examples), accuracy beside it (Wilson over examples, never pooled
  prompts);
* the **prior**: the hidden-state influence profile of the last token of offline text windows,
  the paired change of the middle's share (t over windows), pretrained and at initialization;
* the **cost**: the paired change of the next-token loss on held-out windows, over the rows a
  task answer would occupy (t over windows).

Free parameters are chosen on the tuning examples (``tune``), never on the test examples.  The
verdicts are decided family by family with Holm's correction (:func:`decisions`,
:func:`posbias_nb.stats.holm_family`).  Everything is cached (namespaces ``inference-*``).

The study is a package of modules with one job each: :mod:`.config` (the design),
:mod:`.measurements` (what is cached), :mod:`.statistics` (summaries and verdicts) and
:mod:`.commands` (the remedies on a user's model).  Its names are read from here as before.
"""
from __future__ import annotations

# the verdict code's dotted names (design.VERDICT_CODE), the chapter and other studies read these here
from .config import ARMS, CHAPTER, DESIGN, FAMILIES, GRID, slots  # noqa: F401
from .measurements import arm_params, channel, cost_arms, diagnostics, prior_arms, task_arms, text_prior, tune  # noqa: F401
from .statistics import control_moved, decisions, summary, verdict_effect  # noqa: F401
from .commands import DUMMIES, remedy_run, retrieval_remedy_run  # noqa: F401

__all__ = ["DESIGN", "CHAPTER", "ARMS", "GRID", "FAMILIES", "channel", "text_prior", "tune", "task_arms", "prior_arms", "cost_arms", "summary", "decisions", "diagnostics", "remedy_run", "retrieval_remedy_run", "slots", "arm_params", "verdict_effect"]
