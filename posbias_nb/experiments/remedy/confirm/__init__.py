r"""Does a reorder help a real retrieval prompt?  The book's confirmatory study of the prompt
remedies (issue 53), chapter :ref:`ch-practice`.

``posbias fix --quick`` (chapter :ref:`ch-documents`) could not see what it looked
for: at 5 documents and 16 test questions the smallest gain it detects is larger than a perfect
reorder's.  This study is sized to see it.  Its design (:data:`DESIGN`, registry ``confirm``)
was fixed before any of its questions was scored, from what the book had already measured:

* **the questions**: 64 NQ-open questions (Liu et al.'s oracle file) that no chapter had used
  (:func:`questions`: a fixed permutation of the file, the questions of *Lost in the middle on
  real questions* and of ``posbias fix``'s runs left out), 10 documents a prompt, the gold
  passage at the five gold slots 1, 3, 5, 8, 10;
* **the claims, per model, declared from the curves of** :ref:`ch-realqa` **(14 questions, 10
  documents)**: both models hear the last slot best, so the primary remedy is LangChain's
  ``LongContextReorder`` at an even count (the top document last), with BM25 as the ranker (no
  model needed: what a pipeline has; the two rankers of ``posbias fix`` put the gold passage
  first equally often on its tuning prompts).  The primary claim is declared one-sided: the mean
  all-slot gain in log p per question is above 0, Student *t* at 5%
  (:func:`posbias_nb.stats.one_sided_bounds`), a sign-flip permutation test beside it.  The
  positive control is the **ceiling**: the gold passage moved to the model's best slot, what a
  perfect ranker would give.  A secondary family (Holm at 5%, two-sided intervals): Haystack's
  rule, curve-order, prior-order (born and measured prior), the primary against a **random
  shuffle** of the same documents (Cuconasu et al.'s baseline), and the two priors against the
  curve (non-inferiority within :data:`MARGIN` nats);
* **the power**: from the spread of the realqa gold-last gain, the design states the smallest
  gain its test detects with 80% power (:func:`posbias_nb.stats.detectable_effect`).

The measurement (:func:`run`) scores every arm's prompt for each question and original gold
slot (teacher-forced log p of the first gold answer, :func:`posbias_nb.measure.scoring.score_and_generate`),
and a greedy answer (Liu et al.'s ``best_subspan_em``) under the primary and the ceiling.  Entries are cached by question (namespace ``confirm``), so ``make test`` re-measures
two questions of each.  :func:`decisions` grades it.

The study is a package of modules with one job each: :mod:`.config` (the design, the arms, the
questions), :mod:`.measurements` (what is cached), :mod:`.statistics` (the gains, the
verdicts) and :mod:`.words`.  Its names are read from here as before.
"""
from __future__ import annotations

# the verdict code's dotted names (design.VERDICT_CODE) and the pipeline study read these here
from .config import (ARMS, DEFINITION, DESIGN, MARGIN, questions, realqa_part,  # noqa: F401
                     used_examples)
from .measurements import (GENERATED, ceiling_order, measure, placement_orders,  # noqa: F401
                           qualities, run)
from .statistics import decisions, gains
from .words import primary_label, verdict_phrase

__all__ = ["DESIGN", "ARMS", "MARGIN", "questions", "qualities", "run", "measure", "gains", "decisions",
           "primary_label", "verdict_phrase"]
