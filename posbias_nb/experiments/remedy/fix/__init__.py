r"""``posbias fix``: choose an inference-time remedy on one part of the user's own examples, and
judge it on another part that the choice never saw.

Chapter :ref:`ch-documents` (it runs this on the zoo's pretrained models).  The
steps, in order (:func:`fix`):

1. **The split.**  The examples of the task file (:func:`posbias_nb.experiments.base.prompts.prepare`:
   Liu et al.'s QA or key-value format, or the plain one; ``examples`` of them drawn by
   ``seed``) are split by example, never by prompt, into a tuning part and a test part
   (:func:`split`: a seeded permutation, recorded in the output).  Each part's prompts are built
   only from its own examples, and a QA part's distractors are never the other part's gold
   passages (``pool_exclude``).  The test part's prompts are not built before the choice is
   made (``tests/integration/test_fix.py`` plants a test example that raises when it is read).
2. **The choice** (:func:`tune_settings`), on the tuning part only.  Every setting of each remedy's
   grid (:data:`GRID`; the prompt remedies' :func:`posbias_nb.experiments.prompt.placement.grid`) is
   scored against the model as it is: the teacher-forced log-probability of the gold answer at
   every gold position.  Yu et al.'s positional channel is searched as in the chapter (their
   three stages; stage 3 on the tuning prompts at the middle slots).  The rule (:func:`pick`,
   :data:`RULES`): under ``all-slots`` (the third design's, the default) the chosen setting has
   the largest mean change over **all** gold slots, and a remedy is judged only where it is
   above 0 (a reorder moves the gold passage wherever its rank sends it, so what a user sees is
   the mean over every slot the answer may hold); under ``middle`` (the first design's, kept to
   read its verdicts) it has the largest mean gain at the **middle** slots (the central half of
   the gold slots, :func:`posbias_nb.metrics.regions`) among those whose mean change at the
   **edge** slots (the first and the last) is no worse than ``-edge_loss`` nats.
3. **The judgement** (:func:`evaluate`), on the test part: each chosen setting against the
   model as it is, paired by example.  Per gold slot, the change of log p (Student t over
   examples) and the accuracy with and without (Wilson over examples).  The claim of each remedy
   is "the mean all-slot change (or middle-slot gain) in log p per example is greater than 0";
   the remedies form one family, decided with Holm's correction
   (:func:`posbias_nb.stats.holm_family`, verdict words from :func:`posbias_nb.stats.decide`).
   Where every ranked prompt remedy is searched, the theory's comparisons
   (:data:`posbias_nb.experiments.prompt.placement.THEORY`) form a second family.
4. **The cost**, measured in the same run: the paired change of the next-token loss on offline
   text windows (the rows of the second half of each window; t over windows), and the latency
   and peak memory of one scoring pass per test prompt at the middle slots, with and without the
   remedy, interleaved (the per-prompt ratio, t interval of its logarithm).
5. **The remedy file** (:mod:`posbias_nb.models.remedy_file`): written only for a remedy that
   holds on the test part (the largest middle gain among those that hold), with the evidence.
   If none holds, no file is written: that is a result, not a failure.

The accuracy is the teacher-forced greedy match of the gold answer's tokens (the retrieval
chapter's exact match), and the answer scored is the file's first gold answer: one scoring pass
per prompt and setting.  This is not Liu et al.'s ``best_subspan_em`` of a free generation
(``posbias task`` scores that); it is said on the page.

**Attention calibration** (Hsieh et al.) is searched over its temperature.  Its relevance is
measured per prompt, as the paper does at inference: each prompt's documents are found in its
text (:func:`posbias_nb.tasks.qa.document_char_spans`: Liu et al.'s ``Document [i](Title: ...)``
passages, or the records of a key-value prompt), and each is replaced in turn by a fixed dummy
document (:data:`posbias_nb.tasks.qa.DUMMY_DOCUMENT`; the paper asks only that the dummy be
consistent and does not publish its text) for the one extra pass per document that eq. 4 needs.
Under the all-slot rule (the fourth design, issue 46) the search also covers two choices the paper
leaves open, each switched alone and both (``CAL_VARIANTS``): ours, the **length-matched
dummy** (:func:`posbias_nb.tasks.qa.length_matched_dummies`: as many tokens as the document it
replaces) and the **shared normaliser** of eq. 5 (``normaliser="shared"`` of
:func:`posbias_nb.models.remedy`); ``rule="middle"`` searches the paper's reading alone, as the
first design did.  Its remedy file carries the temperature, the layers and, for a variant, its
dummy and normaliser; the caller gives each prompt's spans and relevance (and, for the shared
normaliser, the documents' mean attention: ``models.remedy(model, "remedy.json", spans=...,
relevance=..., attention=...)``).  Its cost on
offline text is not measured: text without documents is left unchanged by it, so the next-token
loss cannot move; its latency includes the extra passes.  Its measurements are cached apart from
the other two remedies' (their entries, measured under the first design, are read as they are).
Every measurement is cached (namespaces ``fix-tune`` and ``fix-test``).

The package, one job a module:

=========================  ==================================================================
:mod:`.config`             the design, the remedies and their grids, the rules, the sizes
:mod:`.parts`              the split by example into two parts, the gold positions, the middle
                           and edge slots
:mod:`.scoring`            what a setting is scored with: records, matrices, the calibration's
                           relevance, the cache keys
:mod:`.tune`               the choice on the tuning part (:func:`tune_settings`, :func:`pick`)
:mod:`.judge`              the judgement on the test part (:func:`evaluate`,
                           :func:`select_one`)
:mod:`.cost`               latency and peak memory of a scoring pass, with and without
:mod:`.words`              the verdicts' and settings' words
:mod:`.run`                the run (:func:`fix`) and its remedy file
:mod:`.page`               the figures and the HTML page (:func:`write_fix`); measures nothing
=========================  ==================================================================
"""
from __future__ import annotations

from .config import (CAL_VARIANTS, DEFAULTS, DEFAULT_RULE, DESIGN, GRID, MIN_TEST,
                     NETWORK_REMEDIES, QUICK, QUICK_DOCUMENTS, REMEDIES, RULES, select_remedies)
from .parts import fix_positions, split
from .tune import calibration_recall, pick, tune_settings
from .judge import arm_name, coinciding, evaluate, select_one
from .words import setting_text, verdict_words
from .run import fix
from .page import PROMPT_LABELS, slot_figure, write_fix
# the verdict code names these as posbias_nb.experiments.remedy.fix.<name> (design.VERDICT_CODE)
from .config import CAL_DEFINITION, DEFINITION, PROMPT_ONLY  # noqa: F401
from .scoring import prompt_params  # noqa: F401
from .parts import slot_groups  # noqa: F401

__all__ = ["DESIGN", "GRID", "REMEDIES", "NETWORK_REMEDIES", "RULES", "DEFAULTS", "QUICK",
           "DEFAULT_RULE", "QUICK_DOCUMENTS", "MIN_TEST", "coinciding", "arm_name", "select_one",
           "verdict_words", "setting_text", "split", "fix_positions", "tune_settings", "evaluate", "fix",
           "write_fix", "calibration_recall", "select_remedies", "pick", "slot_figure",
           "PROMPT_LABELS"]
