"""``posbias task``'s configuration: the definition version of its entries, the columns of its
table and the classes of an output."""
from __future__ import annotations



__all__ = ["CSV_COLUMNS", "OUTCOMES", "DEFINITION"]


DEFINITION = "task-v2"  # bump when a definition below changes (v2: one prefill per prompt)

#: The columns of the table (the CSV output) of :func:`task_run`, one row per gold position
#: and per reference line: accuracy and mean log p, each with its 95% interval.
CSV_COLUMNS = ("setting", "gold_document", "n", "accuracy", "accuracy_low", "accuracy_high",
               "logprob", "logprob_low", "logprob_high")

#: The outcomes a generation is classified into
#: (:func:`posbias_nb.tasks.qa.classify_output`), counted per gold position.
OUTCOMES = ("answer", "distractor", "wrong", "empty", "off-format")
