r"""Does reordering help a real retrieval pipeline?  The pipeline study (issue 62), chapter
:ref:`ch-practice`.

The confirmatory study (:mod:`posbias_nb.experiments.remedy.confirm`) always put the gold passage in the
prompt, among nine other questions' gold passages, and compared the reorder with the mean of five
fixed gold slots.  A pipeline's alternative is different: leave the retriever's order as it is.
This study asks that question where retrieval can fail.  Its design (:data:`DESIGN`, registry
``pipeline``) was fixed before any of its questions was scored:

* **the corpus**: every distinct passage of Liu et al.'s NQ-open oracle file
  (:func:`posbias_nb.tasks.corpus.oracle_corpus`, 2600 passages for 2655 questions);
* **two retrievers** over it, top-10: BM25 (:class:`posbias_nb.tasks.corpus.BM25Index`) and
  all-MiniLM-L6-v2 (:class:`posbias_nb.measure.dense.DenseIndex`); a question's gold passage is
  in its prompt only where the retriever found it; recall@k over every question of the file and
  over the study's (Wilson);
* **the questions**: fresh ones (a fixed permutation of the file, every question that the
  realqa chapter, ``posbias fix`` or the confirmatory study scored left out), 112 for
  SmolLM2-135M and the first 64 of them for Gemma-3-270M, sized from the confirmatory study's
  *realised* spread;
* **the arms** on each question's retrieved set: the retriever's own order (the reference: the
  top passage first), LangChain's ``LongContextReorder`` over it (the primary: the remedy the
  confirmatory study supports; at 10 documents it puts the top passage last), the curve order
  and the measured-prior order of the confirmatory study, and 4 seeded random shuffles;
* **the claims**, per model and retriever: the primary (one-sided *t* at 5%, a sign-flip
  permutation test beside it) that the reorder raises the gold answer's teacher-forced log p
  over the retriever's order; a Holm family of five (curve order, measured-prior order, the
  primary against the mean of the shuffles, the primary on the questions whose gold was
  retrieved and on those whose gold was not); and the answers: greedy answers under the
  retriever's order and the reorder, paired accuracy (``best_subspan_em``), Newcombe's paired
  interval decides, an exact McNemar test beside it.

:func:`measure` scores one setting's questions, cached in chunks of 16 questions (namespace
``pipeline``; each chunk's questions are its parts, so ``make test`` re-measures a few);
:func:`retrieve` caches each retriever's ranking of every question of the file (namespace
``pipeline-retrieve``).  :func:`decisions` grades them.

The study is a package of modules with one job each: :mod:`.config` (the design, the arms, the
questions), :mod:`.measurements` (what is cached), :mod:`.statistics` (recall, gains, verdicts)
and :mod:`.words`.  Its names are read from here as before.
"""
from __future__ import annotations

# the verdict code's dotted names (design.VERDICT_CODE) read these here
from .config import (ARMS, CHUNK, DEFINITION, DESIGN, GENERATED, SETTINGS,  # noqa: F401
                     SHUFFLES, questions, used_examples)
from .measurements import corpus, measure, placement_orders, retrieve, run  # noqa: F401
from .statistics import decisions, gains, mcnemar_p, recall  # noqa: F401
from .words import setting_label, verdict_phrase

__all__ = ["DESIGN", "ARMS", "SETTINGS", "CHUNK", "questions", "corpus", "retrieve", "recall",
           "measure", "run", "gains", "decisions", "verdict_phrase", "setting_label"]
