r"""The position sweep on real questions, or on the user's own task file: ``posbias task``.

Chapter *Lost in the middle on real questions*; prompts, formats and metric from
:mod:`posbias_nb.tasks.qa`.  For each chosen example the gold passage (or, in a key-value file,
the gold record) is moved across the gold positions while everything else stays in place, and
every prompt is scored two ways:

* **greedy generation**, up to ``max_new_tokens`` tokens or the first newline, scored by Liu et
  al.'s ``best_subspan_em`` on the first line; every generation is kept and classified
  (:func:`posbias_nb.tasks.qa.classify_output`: answer, a distractor's answer, wrong, empty or
  off-format);
* the **teacher-forced log-probability** of the gold answer after ``Answer:`` (the best of the
  gold answers when there are several; :func:`posbias_nb.measure.scoring.score_batch`).  It is
  continuous, so it has power where the accuracy of a small model is near zero.

Per gold position: accuracy with a Wilson interval and mean log p with a Student t interval,
the **example** the unit (each example is asked once at each position).  Two reference lines
(QA files): **closed-book** (the question alone, Liu et al.'s ``closedbook_qa.prompt``) and
**oracle** (the gold passage alone).

Everything the file could get wrong is refused before a model is loaded
(:func:`posbias_nb.tasks.qa.read_task_file`); prompts beyond the model's context are refused
after tokenization and before any forward pass, with their number and the longest.  The run is
cached (namespace ``task``; the key holds the file's SHA-256).

The command is a package of modules with one job each: :mod:`.config` (its constants),
:mod:`.measurements` (the scored prompts, cached) and :mod:`.statistics` (the table and the
Result).  Its names are read from here as before.
"""
from __future__ import annotations

from ...base.prompts import TASK_DEFAULTS as DEFAULTS  # noqa: F401
from ...base.prompts import prepare, prompt_remedy, reorder_documents  # noqa: F401 -- their home was here

# the verdict code's dotted names (design.VERDICT_CODE), the chapter and other studies read these here
from .config import CSV_COLUMNS, DEFINITION, OUTCOMES  # noqa: F401
from .measurements import task_run  # noqa: F401

__all__ = ["task_run", "CSV_COLUMNS", "OUTCOMES", "DEFAULTS"]
