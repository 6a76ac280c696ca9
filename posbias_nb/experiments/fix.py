r"""``posbias fix``: choose an inference-time remedy on one part of the user's own examples, and
judge it on another part that the choice never saw.

Chapter :ref:`ch-documents` (it runs this on the zoo's pretrained models).  The
steps, in order (:func:`fix`):

1. **The split.**  The examples of the task file (:func:`posbias_nb.experiments.task.prepare`:
   Liu et al.'s QA or key-value format, or the plain one; ``examples`` of them drawn by
   ``seed``) are split by example, never by prompt, into a tuning part and a test part
   (:func:`split`: a seeded permutation, recorded in the output).  Each part's prompts are built
   only from its own examples, and a QA part's distractors are never the other part's gold
   passages (``pool_exclude``).  The test part's prompts are not built before the choice is
   made (``tests/integration/test_fix.py`` plants a test example that raises when it is read).
2. **The choice** (:func:`choose`), on the tuning part only.  Every setting of each remedy's
   grid (:data:`GRID`; the prompt remedies' :func:`posbias_nb.experiments.placement.grid`) is
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
   (:data:`posbias_nb.experiments.placement.THEORY`) form a second family.
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
"""
from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

import numpy as np

from .. import cache, metrics, stats
from .._validate import positive_int
from ..measure import entry
from ..models.weights import file_sha256
from ..results import Result
from ..tasks import qa
from . import inference
from .design import Design
from . import placement
from . import study
from . import task as _task

__all__ = ["DESIGN", "GRID", "REMEDIES", "NETWORK_REMEDIES", "RULES", "DEFAULTS", "QUICK",
           "DEFAULT_RULE", "QUICK_DOCUMENTS", "MIN_TEST", "coinciding", "arm_name", "select_one",
           "verdict_words", "setting_text",
           "split", "fix_positions", "choose", "evaluate", "fix", "write_fix",
           "calibration_recall", "select_remedies", "pick", "slot_figure", "PROMPT_LABELS"]

_DEF = "fix-v1"  # bump when a definition below changes the numbers
_CAL_DEF = "fix-calibration-v1"  # the same for the attention calibration's entries
#: The remedies inside the network, each by its paper's own method (chapter *Fixing it at
#: inference time*).
NETWORK_REMEDIES = ("hidden-scaling", "ms-poe", "attention-calibration")
#: Every remedy searched, those inside the network first, then those in the prompt
#: (:mod:`posbias_nb.experiments.placement`, the third design).
REMEDIES = NETWORK_REMEDIES + placement.PROMPT_REMEDIES
#: The rules that choose a setting and judge it (:func:`pick`, :func:`select_one`).
#: ``select-one`` (the fifth design's, the default) carries the remedy with the largest tuning
#: gain to the test part alone; ``all-slots`` (the third design's) judges every remedy by what a
#: user sees when the answer can be anywhere, the mean change of log p over every gold slot,
#: Holm across them; ``middle`` is the first design's
#: (the middle-slot gain of the settings within the edge loss), kept to read its verdicts as
#: they were measured.
RULES = ("select-one", "all-slots", "middle")
#: The rule ``posbias fix`` uses by default (the fifth design, issue 53).  The tuning part
#: ranks the remedies and carries one to the test part (:func:`select_one`).
DEFAULT_RULE = "select-one"
#: The documents of ``--quick`` for a question-answering file.  An even count, where
#: LangChain's rule (the top document last) and Haystack's (the top document first) give
#: different prompts.
QUICK_DOCUMENTS = 6
#: The smallest test part ``posbias fix`` runs without ``--force``.  It is the fewest
#: questions whose one-sided t test at 5% detects, with 80% power, a gain of one standard
#: deviation of the per-question gain (:func:`posbias_nb.stats.units_needed`).
MIN_TEST = 8  # = stats.units_needed(1.0, 1.0), a literal so that importing fix loads no scipy.stats (tests/unit/studies/test_fix_rules.py checks it)
#: The attention calibration's readings (dummy, normaliser) searched by the fourth design (issue
#: 46): the paper's first, then ours, each choice alone and both together.
CAL_VARIANTS = (("paper", "per-head"), ("length-matched", "per-head"), ("paper", "shared"),
                ("length-matched", "shared"))
#: The remedies scored from the prompts alone (the first design's), cached together.
_PROMPT_ONLY = ("hidden-scaling", "ms-poe")
#: The grids searched on the tuning part.
#: Hidden scaling: the scales of Yu et al.'s configurations (the chapter's
#: :data:`~posbias_nb.experiments.inference.GRID`), the channel found by their search.  Ms-PoE:
#: the published ratio range (Zhang et al.'s code ships one, 1.2 to 1.8) and two of ours beside
#: it, one narrower and lower, one wider and higher.
GRID = {
    "hidden-scaling": tuple(dict(s) for s in inference.GRID["hidden-scaling"]),
    "ms-poe": ({"lo": 1.2, "hi": 1.8}, {"lo": 1.0, "hi": 1.5}, {"lo": 1.5, "hi": 2.5}),
    # the paper's t = 5e-5 and one and two decades above it (the inference chapter's grid), the
    # paper's reading first; then each of ours (CAL_VARIANTS, the fourth design) at each of them
    "attention-calibration": tuple(dict(s) for s in inference.GRID["attention-calibration"]) +
    tuple(dict(s, dummy=d, normaliser=n) for d, n in CAL_VARIANTS[1:]
          for s in inference.GRID["attention-calibration"]),
}
#: The settings of the paper's reading (its one dummy document, eq. 5 normalised per head): the
#: first of the calibration's grid, the only ones the first design's ``middle`` rule searches.
_CAL_PAPER = len(inference.GRID["attention-calibration"])
#: The defaults of ``posbias fix`` (and of :func:`fix`).
DEFAULTS = {"examples": 48, "documents": 10, "test_share": 2 / 3, "seed": 0,
            "edge_loss": 0.25, "cost_windows": 8, "cost_length": 512, "timing_prompts": 8,
            "channel_samples": 8, "channel_length": 1000}
#: The settings of ``--quick``.  The same grids and rules on 24 examples of 6 documents
#: (prompts about half as long; the book's run of the third design used 5, :data:`DESIGN`
#: ``["sizes"]``), a smaller channel search and cost (Yu et al.'s search skips the first 300
#: positions, so its sequences stay longer than that).
QUICK = dict(DEFAULTS, examples=24, documents=QUICK_DOCUMENTS, cost_windows=4, cost_length=256,
             timing_prompts=4, channel_samples=4, channel_length=512)


#: The book's run of ``posbias fix`` (chapter :ref:`ch-documents`),
#: fixed before its measurements (registry: ``designs.json``).
DESIGN = Design("fix", {
    "models": ["smollm2-135m", "gemma3-270m"],
    "data": "liu2023/nq-open-oracle.jsonl.gz",
    "call": {"quick": True, "seed": 0, "weights": "pretrained",
             "edge_loss": DEFAULTS["edge_loss"], "test_share": DEFAULTS["test_share"],
             "rule": "all-slots", "documents": 5},
    "sizes": dict(QUICK, documents=5),
    "remedies": list(REMEDIES),
    "grid": {r: [dict(s) for s in g] for r, g in GRID.items()},
    "channel_search": {"top": 10, "top_full_passes": 3, "stage3_scale": 0.0},
    # added in the second design (issue 36): Hsieh et al.'s calibration, its temperature
    "calibration": {
        "relevance": "eq. 4 per prompt: the last prompt row's attention to each document, "
                     "averaged over its tokens, every layer and head, minus the same for the "
                     "dummy document put in its place (one extra pass per document)",
        "dummy": [qa.DUMMY_DOCUMENT.title, qa.DUMMY_DOCUMENT.text],
        "layers": "the later half (Hsieh et al.'s last 16 of 32)",
        "cost": "latency and peak memory per prompt, the relevance's passes included; no "
                "next-token loss on offline text (no documents there: it cannot move)"},
    "rule": {"tuning": "the largest mean middle-slot log-p gain among the settings whose mean "
                       "edge-slot change is at least -edge_loss",
             "test": "mean middle-slot log-p gain per example > 0, Student t over examples, "
                     "Holm across the remedies at alpha",
             "remedy_file": "the remedy that holds with the largest middle gain; none if none "
                            "holds"},
    # the third design (issue 45): the prompt remedies join the family, and every remedy is
    # judged by what a user sees when the answer can be anywhere
    "prompt_remedies": {
        "grid": placement.grid("liu-qa"),
        "rankers": list(placement.rankers("liu-qa")),
        "qualities": {
            "curve": "the mean log p of the gold answer per gold slot on the tuning part, the "
                     "model as it is (every slot is a gold slot at the quick sizes)",
            "born": f"the layout's last row at alpha = {placement.BORN_ALPHA} at each tuning "
                    "prompt's length, summed over each slot's tokens, mean over the prompts",
            "measured": "the Jacobian profile on text windows at the tuning prompts' mean "
                        "length (probes {probes}, windows {windows}, length a multiple of "
                        "{multiple}), each window normalised, spans mapped in proportion"
                        .format(**placement.MEASURED_PRIOR)},
        "scoring": "teacher-forced log p of the first gold answer after the rewritten prompt, "
                   "paired with the model as it is by example and original gold slot; "
                   "identical prompts scored once",
        "accuracy": "best_subspan_em of a greedy generation to the first line (32 new tokens), "
                    "Wilson over examples per slot, for the chosen settings on the test part",
        "cost": "passes per prompt and the latency of one prompt at the central gold slot "
                "(ranking, placement and scoring against one scoring pass), interleaved",
        "theory": {**placement.THEORY,
                   "family": "its own Holm family at alpha, on the test part, each claim's x "
                             "the paired per-example difference of the all-slot change"}},
    # the fourth design (issue 46): the calibration's two open choices, before the premise is
    # blamed; each of ours alone and both, at each temperature, in the calibration's grid
    "calibration_variants": {
        "combinations": [list(c) for c in CAL_VARIANTS],
        "length_matched_dummy": "document k replaced by 'Document [k](Title: Dummy) ' and the "
                                "paper dummy's sentences repeated, cut after a whole number of "
                                "their tokens so that its token span equals document k's in "
                                "the prompt it sits in",
        "shared_normaliser": "eq. 5 divided by the last prompt row's attention to the document, "
                             "averaged over its tokens, every layer and head (eq. 4's Attn), "
                             "one factor per document for every head; the row's total on "
                             "the documents kept",
        "described": "on the tuning part, per dummy: recall@1 of the gold passage (clustered "
                     "over questions, against chance 1/K) and the top document's slot counts; "
                     "per combination and temperature: the mean change of log p at the middle "
                     "and edge slots and over all slots",
        "judged": "the twelve settings are the calibration's grid under the all-slot rule; the "
                  "chosen one goes to the test part in the one Holm family with the other "
                  "remedies; the middle rule (first design) searches the paper's three alone"},
    "rule_all_slots": {
        "tuning": "per remedy, the setting with the largest mean log-p change over all gold "
                  "slots (mean over slots, then over examples); a remedy whose best setting "
                  "does not gain (<= 0) is not judged",
        "test": "mean all-slot log-p change per example > 0, Student t over examples, Holm "
                "across every remedy judged, inside the network and in the prompt, at alpha; "
                "middle and edge changes reported beside",
        "remedy_file": "the remedy that holds with the largest all-slot gain; none if none "
                       "holds",
        "first_rule": "the first design's middle-slot rule is kept for the three remedies "
                      "inside the network and its verdicts shown as they were measured"},
    # the fifth design (issue 53), for posbias fix and not for the book's run above (which keeps
    # the third design's rule and its 5 documents, written out in "call")
    "rule_select_one": {
        "tuning": "per remedy the all-slot rule's setting; the remedy with the largest tuning "
                  "gain above 0 is carried to the test part, alone",
        "test": "its mean all-slot gain per example > 0, declared one-sided: Student t at "
                "0.05 (stats.one_sided_bounds), a sign-flip permutation test beside it; the "
                "other remedies' test-part changes with two-sided 95% t intervals, exploratory, "
                "no verdict; remedies that give the same prompt at the run's count are one arm",
        "power": "from the tuning part's SD of the carried remedy's per-question gain: the "
                 "smallest gain the test part detects with 80% power at its one-sided 0.05, "
                 "and the questions that detect 0.5 and 1.0 nats (stats.detectable_effect, "
                 "stats.units_needed)",
        "minimum": "a test part of MIN_TEST = stats.units_needed(1.0, 1.0) examples (a gain "
                   "of one SD of the per-question gain at 80% power); fewer is refused unless "
                   "--force",
        "quick_documents": 6,
        "remedy_file": "the carried remedy, when it holds"},
    "alpha": 0.05,
    "compare": "the inference chapter's task verdicts of hidden scaling and Ms-PoE on the same "
               "model (key-value prompts): the same word or not, and why",
})


def select_remedies(remedies=None) -> tuple:
    """The remedies a run searches, in :data:`REMEDIES`' order: all of them for None, else the
    given names (a comma-separated string or a sequence).

    >>> select_remedies("attention-calibration,hidden-scaling")
    ('hidden-scaling', 'attention-calibration')
    """
    if remedies is None:
        return tuple(REMEDIES)
    names = [r.strip() for r in remedies.split(",")] if isinstance(remedies, str) else \
        [str(r) for r in remedies]
    bad = [r for r in names if r not in REMEDIES]
    if bad or not names or len(set(names)) != len(names):
        raise ValueError(f"remedies must be distinct names among {', '.join(REMEDIES)}, got "
                         f"{remedies!r}")
    return tuple(r for r in REMEDIES if r in names)


def split(n: int, test_share: float = DEFAULTS["test_share"], seed: int = 0):
    """The tuning and the test part of ``n`` examples (0-based indices into the chosen
    examples, each part sorted): a permutation seeded by ``seed``, its first
    ``round(test_share * n)`` entries the test part.  Both parts need at least 2 examples.

    >>> split(6, 0.5, seed=0)
    ([2, 3, 4], [0, 1, 5])
    """
    n = positive_int("examples", n, minimum=4)
    if not 0 < float(test_share) < 1:
        raise ValueError(f"test_share must be in (0, 1), got {test_share!r}")
    k = int(round(float(test_share) * n))
    if k < 2 or n - k < 2:
        raise ValueError(f"a split of {n} examples at test share {test_share} leaves "
                         f"{n - k} to tune and {k} to test; each part needs 2 or more")
    perm = np.random.default_rng([int(seed), 0xF1C5]).permutation(n)
    return sorted(int(i) for i in perm[k:]), sorted(int(i) for i in perm[:k])


def fix_positions(k: int) -> list[int]:
    """The gold slots (0-based) of ``k`` documents or records: five evenly spaced, first and
    last included (all of them for ``k <= 5``).

    >>> fix_positions(10), fix_positions(20), fix_positions(4)
    ([0, 2, 4, 7, 9], [0, 5, 10, 14, 19], [0, 1, 2, 3])
    """
    k = positive_int("documents", k, minimum=2)
    if k <= 5:
        return list(range(k))
    return sorted({int(v) for v in np.round(np.linspace(0, k - 1, 5))})


def pick(all_gain, middle_gain, edge_change, rule: str, edge_loss: float) -> tuple:
    """The tuning rule (:data:`RULES`) on one remedy's settings: ``(chosen index or None,
    eligible flags, reason)``.  ``all-slots``: the largest mean all-slot gain, judged only where
    it is above 0; ``middle``: the largest middle-slot gain among the settings whose edge change
    is at least ``-edge_loss``.  Ties go to the earlier setting.

    >>> pick([-0.1, 0.3, 0.3], [0.5, 0.2, 0.4], [-1.0, 0.0, 0.1], "all-slots", 0.25)[0]
    1
    >>> pick([-0.1, 0.3, 0.3], [0.5, 0.2, 0.4], [-1.0, 0.0, 0.1], "middle", 0.25)[0]
    2
    >>> pick([-0.1, -0.2], [0.5, 0.2], [0.0, 0.0], "all-slots", 0.25)
    (None, [False, False], 'no setting raises the mean log p over all gold slots')
    """
    if rule == "all-slots":
        elig = [bool(g > 0) for g in all_gain]
        why = "no setting raises the mean log p over all gold slots"
        key = all_gain
    elif rule == "middle":
        elig = [bool(e >= -float(edge_loss)) for e in edge_change]
        why = f"no setting's mean edge change is at least -{float(edge_loss)} nats"
        key = middle_gain
    else:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    cands = [j for j in range(len(elig)) if elig[j]]
    j = max(cands, key=lambda i: (key[i], -i)) if cands else None
    return j, elig, None if j is not None else why


def _slots(n_pos: int) -> dict:
    r = metrics.regions(n_pos)
    mid = list(range(n_pos))[r.middle]
    return {"middle": mid, "edges": [0, n_pos - 1]}


def _records(model, weights, seed, part):
    """Prompt and answer ids of a prepared part, one per (example, slot), example-major."""
    m, tok, _ = study.load(model, weights, seed)
    from ..tasks.codec import Codec

    codec = Codec(tok, m.get_input_embeddings().num_embeddings)
    P, A, ex, sl = [], [], [], []
    for e, it in enumerate(part["items"]):
        a = study.answer_ids(codec, it["answers"][0])
        for j, t in enumerate(it["prompts"]):
            P.append(study.encode(codec, t)), A.append(a), ex.append(e), sl.append(j)
    return m, tok, codec, {"prompts": P, "answers": A, "example": np.array(ex),
                           "slot": np.array(sl)}


def _matrix(values, rec, n_ex, n_pos):
    M = np.full((n_ex, n_pos), np.nan)
    M[rec["example"], rec["slot"]] = values
    return M


def _check_context(info, rec, name):
    longest = max(len(p) + len(a) for p, a in zip(rec["prompts"], rec["answers"]))
    if info["max_length"] is not None and longest > info["max_length"]:
        raise ValueError(f"the {name} prompts are too long for {info['name']} (context "
                         f"{info['max_length']} tokens, the longest takes {longest}): fewer "
                         f"--documents")


def _settings_params(name, settings, channel=None):
    if name == "hidden-scaling":
        return [{"channel": int(channel), "scale": float(s["scale"])} for s in settings]
    if name == "attention-calibration":  # a variant names its dummy and normaliser
        return [dict({"temperature": float(s["temperature"])},
                     **{k: str(s[k]) for k in ("dummy", "normaliser") if k in s})
                for s in settings]
    return [{"lo": float(s["lo"]), "hi": float(s["hi"])} for s in settings]


def _documents(codec, part, rec, dummy: str = "paper") -> list:
    """For each record of ``part`` (:func:`_records`' order): the token spans of its documents
    and Hsieh et al.'s dummy prompts with ``dummy``
    (:func:`posbias_nb.experiments.study.prompt_documents`)."""
    texts = [t for it in part["items"] for t in it["prompts"]]
    if len(texts) != len(rec["prompts"]):
        raise ValueError(f"{len(texts)} prompt texts for {len(rec['prompts'])} records")
    out = [study.prompt_documents(codec, t, want, dummy)
           for t, want in zip(texts, rec["prompts"])]
    k = part.get("documents")
    bad = [len(sp) for sp, _ in out if k is not None and len(sp) != k]
    if bad:
        raise ValueError(f"a prompt of {k} documents was read as {bad[0]}: its text holds "
                         f"another document header or record")
    return out


def _dummies_of(settings) -> list:
    """The dummies that ``settings`` of the calibration read (the paper's where none is named),
    in :data:`posbias_nb.experiments.study.DUMMIES`' order."""
    want = {s.get("dummy", "paper") for s in settings}
    return [d for d in study.DUMMIES if d in want]


def _calibration_scores(m, codec, part, rec, settings):
    """Log p and greedy match of every record under each of ``settings`` of the attention
    calibration (``(len(settings), n)`` each), and the relevance of its documents ``(n, K)``
    (measured with the dummy of the first setting)."""
    ds = _dummies_of(settings)
    docs = {d: _documents(codec, part, rec, d) for d in ds}
    n = len(rec["prompts"])
    lp, ok = np.zeros((len(settings), n)), np.zeros((len(settings), n), dtype=bool)
    rel = []
    for i in range(n):
        lp[:, i], ok[:, i], cal = _calibration_record(m, rec, {d: docs[d][i] for d in ds}, i,
                                                      settings)
        rel.append(cal[settings[0].get("dummy", "paper")]["relevance"])
    return lp, ok, np.array(rel)


def _calibration_one(m, rec, docs_i, i, settings):
    """Record ``i`` alone under the paper's reading: its documents' relevance (eq. 4) and its
    log p and greedy match under each setting."""
    lp, ok, cal = _calibration_record(m, rec, {"paper": docs_i}, i, settings)
    return lp, ok, cal["paper"]["relevance"]


def _calibration_record(m, rec, docs, i, settings):
    """Record ``i`` alone: for each dummy of ``docs`` (``{dummy: (spans, dummy prompts)}``), its
    documents' calibrated attention (eq. 4: :func:`~posbias_nb.measure.positional.calibrated_attention`'s
    ``attention``, ``dummy`` and ``relevance``), from one recorded pass of the prompt; and its log
    p and greedy match under each setting (``(len(settings),)`` each), each read with its own
    dummy's relevance and, for the shared normaliser, its documents' mean attention."""
    from ..measure.prefix import Prefix

    pre = Prefix(m, rec["prompts"][i])
    cal = {d: study.calibrated_relevance(m, pre, docs[d], full=True)[1] for d in docs}
    lp, ok = np.zeros(len(settings)), np.zeros(len(settings), dtype=bool)
    groups: dict = {}
    for j, s in enumerate(settings):
        groups.setdefault((s.get("dummy", "paper"), s.get("normaliser", "per-head")),
                          []).append(j)
    for (d, norm), js in groups.items():
        kws = [{k: v for k, v in settings[j].items() if k != "dummy"} for j in js]
        if norm == "shared":
            kws = [dict(kw, attention=list(cal[d]["attention"])) for kw in kws]
        got = study.score_remedy(
            m, [rec["prompts"][i]], [rec["answers"][i]], "attention-calibration", kws,
            base=False, spans=[docs[d][0]], relevance=[cal[d]["relevance"]], prefixes=[pre])
        lp[js], ok[js] = got[0][:, 0], got[1][:, 0]
    return lp, ok, cal


def _cal_key(key, part, **extra):
    return dict(key, part=part, calibration={
        "definition": _CAL_DEF, "dummy": [qa.DUMMY_DOCUMENT.title, qa.DUMMY_DOCUMENT.text],
        "dummy_record": list(qa.DUMMY_RECORD), "layers": "later half"}, **extra)


def _candidates(m, codec, sizes, seed):
    """Stages 1 and 2 of Yu et al.'s channel search (chapter *Fixing it at inference time*):
    the mean hidden states of every layer on random printable ASCII, the monotone channels,
    the ``top`` smoothest (best first).  Empty when no channel is monotone."""
    from ..measure.positional import layer_means
    from ..metrics import positional_candidates
    from ..tasks.text import random_ascii_batch

    ids = random_ascii_batch(codec.tok, sizes["channel_length"], sizes["channel_samples"],
                             seed=seed, vocab_size=m.get_input_embeddings().num_embeddings)
    c = positional_candidates(layer_means(m, ids), top=_TOP)
    return [int(x) for x in c["candidates"]]


#: Stage 2 keeps the ``_TOP`` smoothest channels (Yu et al.'s and the chapter's 10); where a
#: prompt cannot be scored on one recorded pass (beyond a sliding window), stage 3 scores only
#: the ``_TOP_FULL`` smoothest, each setting a full pass (said in the output).
_TOP, _TOP_FULL = 10, 3


def _key(info, weights, seed, **extra):
    return entry.run_key(info, weights, 0, None, seed, text=False, definition=_DEF, **extra)


def _fits_prefix(m, rec) -> bool:
    from ..measure.prefix import smallest_window

    w = smallest_window(m)
    return w is None or max(len(p) + len(a) for p, a in zip(rec["prompts"], rec["answers"])) <= w


def choose(model, tune_part, sizes, edge_loss, seed=0, weights="pretrained", info=None,
           key=None, remedies=REMEDIES, rule: str = "all-slots") -> dict:
    """Step 2 of the module docstring on the prepared tuning part: ``{remedy: {"grid",
    "middle_gain", "edge_change" (mean per setting), "eligible", "chosen" (index or None),
    "setting", "params" (the chosen setting's remedy parameters), "reason"}, "channel": {...}}``.

    Hidden scaling: Yu et al.'s stage 3 picks the channel among the candidates of stages 1
    and 2 (the lowest mean per-token cross-entropy of the answers at their scale 0, on the
    tuning prompts at the middle slots); then every scale of the grid is scored with that
    channel and the edge rule and the middle gain pick the scale.  Cached.  ``remedies``: the
    ones searched (:func:`fix`'s ``remedies``); the others are not returned, and the
    calibration, left out, is not measured (hidden scaling and Ms-PoE share one entry).

    The prompt remedies (:mod:`posbias_nb.experiments.placement`) are scored on the same
    records, each setting of their grid (:func:`posbias_nb.experiments.placement.grid`);
    ``prompt`` holds their slot qualities and each ranker's top-1 rate.  ``rule``
    (:data:`RULES`, :func:`pick`) chooses each remedy's setting; every remedy also reports
    ``all_gain``, the mean change over all gold slots."""
    n_pos = len(tune_part["positions"])
    sl = _slots(n_pos)
    scales = [float(g["scale"]) for g in GRID["hidden-scaling"]]

    def compute():
        m, tok, codec, rec = _records(model, weights, seed, tune_part)
        _check_context(info, rec, "tuning")
        out = {"example": rec["example"], "slot": rec["slot"]}
        cand = _candidates(m, codec, sizes, seed)
        reuse = _fits_prefix(m, rec)
        if not reuse:
            cand = cand[:_TOP_FULL]
        out["candidates"], out["prefix_reuse"] = np.array(cand, dtype=np.int64), np.array(reuse)
        P, A = rec["prompts"], rec["answers"]
        mid = [i for i, q in enumerate(rec["slot"]) if int(q) in set(sl["middle"])]
        n = np.array([len(A[i]) for i in mid], dtype=float)
        losses = []
        if cand:  # Yu et al.'s stage 3: each candidate at their scale 0, the middle prompts
            lp, _ = study.score_remedy(m, [P[i] for i in mid], [A[i] for i in mid],
                                           "hidden-scaling",
                                           [{"channel": c, "scale": 0.0} for c in cand])
            losses = [float(np.mean(-v / n)) for v in lp]  # the model as it is first
        out["stage3_losses"] = np.array(losses, dtype=float)
        if cand:
            best = cand[int(np.argmin(losses[1:]))]
            hs = [{"channel": best, "scale": sc} for sc in scales]
            lp, _ = study.score_remedy(m, P, A, "hidden-scaling", hs)
            out["base#logprob"], out["hidden-scaling#logprob"] = lp[0], lp[1:]
        else:
            out["base#logprob"] = study.score_remedy(m, P, A, "ms-poe", [])[0][0]
        lp, _ = study.score_remedy(m, P, A, "ms-poe",
                                       _settings_params("ms-poe", GRID["ms-poe"]), base=False)
        out["ms-poe#logprob"] = lp
        return out

    def compute_base():  # the model as it is alone, where neither prompt-only remedy is searched
        m, tok, codec, rec = _records(model, weights, seed, tune_part)
        _check_context(info, rec, "tuning")
        lp = study.score_remedy(m, rec["prompts"], rec["answers"], "ms-poe", [])[0][0]
        return {"example": rec["example"], "slot": rec["slot"], "base#logprob": lp}

    prompt_only = any(r in _PROMPT_ONLY for r in remedies)
    res = cache.cached("fix-tune", dict(key, part="tune"), compute) if prompt_only else \
        cache.cached("fix-tune", dict(key, part="tune-base"), compute_base)

    cal_settings = _settings_params("attention-calibration",
                                    GRID["attention-calibration"][:_CAL_PAPER])
    var_settings = _settings_params("attention-calibration",
                                    GRID["attention-calibration"][_CAL_PAPER:])

    def compute_cal():
        m, tok, codec, rec = _records(model, weights, seed, tune_part)
        lp, _, rel = _calibration_scores(m, codec, tune_part, rec, cal_settings)
        return {"example": rec["example"], "slot": rec["slot"], "logprob": lp,
                "relevance": rel}

    loaded: dict = {}

    def cal_one(i: int) -> dict:  # record i alone (cache.Parts: make test samples records)
        if not loaded:
            m, tok, codec, rec = _records(model, weights, seed, tune_part)
            loaded.update(m=m, rec=rec, codec=codec, docs=_documents(codec, tune_part, rec))
        lp, _, r = _calibration_one(loaded["m"], loaded["rec"], loaded["docs"][i], i,
                                    cal_settings)
        return {"example": loaded["rec"]["example"][i], "slot": loaded["rec"]["slot"][i],
                "logprob": lp, "relevance": r}

    def cal_take(a, i: int) -> dict:
        return {"example": a["example"][i], "slot": a["slot"][i], "logprob": a["logprob"][:, i],
                "relevance": a["relevance"][i]}

    n_rec = sum(len(it["prompts"]) for it in tune_part["items"])
    cal = cache.cached("fix-tune", _cal_key(key, "tune-calibration", grid=[
        dict(s) for s in GRID["attention-calibration"][:_CAL_PAPER]]), compute_cal,
        parts=cache.Parts(n_rec, cal_one, cal_take)) \
        if "attention-calibration" in remedies else None

    def var_one(i: int) -> dict:  # ours (the fourth design): both dummies, the three variants
        if "vdocs" not in loaded:
            if not loaded:
                m, tok, codec, rec = _records(model, weights, seed, tune_part)
                loaded.update(m=m, rec=rec, codec=codec, docs=_documents(codec, tune_part, rec))
            loaded["vdocs"] = {"paper": loaded["docs"], "length-matched": _documents(
                loaded["codec"], tune_part, loaded["rec"], "length-matched")}
        r = loaded["rec"]
        lp, _, c = _calibration_record(loaded["m"], r, {d: v[i] for d, v in
                                                         loaded["vdocs"].items()}, i,
                                       var_settings)
        out = {"example": r["example"][i], "slot": r["slot"][i], "logprob": lp}
        for d in study.DUMMIES:
            for q in ("attention", "dummy", "relevance"):
                out[f"{q}#{d}"] = c[d][q]
        return out

    def var_take(a, i: int) -> dict:
        return {k: (v[:, i] if k == "logprob" else v[i]) for k, v in a.items()}

    def compute_var():
        parts = [var_one(i) for i in range(n_rec)]
        return {k: np.stack([p[k] for p in parts], axis=1 if k == "logprob" else 0)
                for k in parts[0]}

    var = cache.cached("fix-tune", _cal_key(key, "tune-calibration-variants", grid=[
        dict(s) for s in GRID["attention-calibration"][_CAL_PAPER:]], filler=qa.DUMMY_FILLER),
        compute_var, parts=cache.Parts(n_rec, var_one, var_take)) \
        if "attention-calibration" in remedies and rule == "all-slots" else None
    n_ex = len(tune_part["items"])
    rec = {"example": np.asarray(res["example"]), "slot": np.asarray(res["slot"])}
    if cal is not None and not (np.array_equal(np.asarray(cal["example"]), rec["example"]) and
                                np.array_equal(np.asarray(cal["slot"]), rec["slot"])):
        raise ValueError("the calibration's tuning records are not the other remedies'")
    base_lp = np.asarray(res["base#logprob"])
    cand = [int(c) for c in np.asarray(res["candidates"]).reshape(-1)] if prompt_only else []
    ch = {"candidates": cand, "prefix_reuse": bool(res["prefix_reuse"]) if prompt_only else
          None, "channel": None, "losses": [], "baseline_loss": None, "reason": None}
    scores = {}
    if not prompt_only:
        ch["reason"] = "hidden scaling was not searched"
    elif cand:
        losses = [float(v) for v in np.asarray(res["stage3_losses"])]
        ch.update(channel=cand[int(np.argmin(losses[1:]))], losses=losses[1:],
                  baseline_loss=losses[0])
        scores["hidden-scaling"] = np.asarray(res["hidden-scaling#logprob"])
    else:
        ch["reason"] = "Yu et al.'s first stage found no channel monotone in more than a " \
                       "quarter of the layers"
    if prompt_only:
        scores["ms-poe"] = np.asarray(res["ms-poe#logprob"])
    if var is not None and not (np.array_equal(np.asarray(var["example"]), rec["example"]) and
                                np.array_equal(np.asarray(var["slot"]), rec["slot"])):
        raise ValueError("the calibration variants' tuning records are not the other remedies'")
    if cal is not None:
        scores["attention-calibration"] = np.asarray(cal["logprob"]) if var is None else \
            np.concatenate([np.asarray(cal["logprob"]), np.asarray(var["logprob"])])
    out = {"channel": ch}
    base = _matrix(base_lp, rec, n_ex, n_pos)
    grids = {r: [dict(s) for s in GRID[r]] for r in NETWORK_REMEDIES}
    if var is None:  # the first design's rule: the paper's reading alone
        grids["attention-calibration"] = grids["attention-calibration"][:_CAL_PAPER]
    prompt = [r for r in remedies if r in placement.PROMPT_REMEDIES]
    if prompt:
        fmt = tune_part["format"]
        pl = placement.on_tuning(model, weights, seed, tune_part, fmt, prompt, base, key)
        if not (np.array_equal(pl["example"], rec["example"]) and
                np.array_equal(pl["slot"], rec["slot"])):
            raise ValueError("the prompt remedies' tuning records are not the other remedies'")
        for r in prompt:
            idx = [i for i, (n, _) in enumerate(pl["settings"]) if n == r]
            grids[r] = [dict(pl["settings"][i][1]) for i in idx]
            scores[r] = pl["logprob"][idx]
        out["prompt"] = {"qualities": pl["qualities"], "rankers": pl["rankers"],
                         "top1": placement.ranker_top1(pl["top1"], pl["example"],
                                                       pl["rankers"]),
                         "gold_slot": {f"{n}:{json.dumps(s, sort_keys=True)}":
                                       [int(v) for v in g] for (n, s), g in
                                       zip(pl["settings"], pl["gold_slot"])}}
    for name in remedies:
        if name not in scores:
            out[name] = {"grid": grids[name], "middle_gain": [], "edge_change": [],
                         "intervals": [], "all_gain": [], "eligible": [], "chosen": None,
                         "all_gain_by_example": [], "setting": None,
                         "params": None, "reason": ch["reason"]}
            continue
        mids, edges, alls, ivs, pers = [], [], [], [], []
        for j in range(len(grids[name])):
            d = _matrix(scores[name][j], rec, n_ex, n_pos) - base
            per = {"middle": d[:, sl["middle"]].mean(1), "edges": d[:, sl["edges"]].mean(1),
                   "all": d.mean(1)}
            mids.append(float(per["middle"].mean()))
            edges.append(float(per["edges"].mean()))
            alls.append(float(per["all"].mean()))
            pers.append([float(v) for v in per["all"]])
            # a description of the tuning part (t over its examples); the rule reads the means
            ivs.append({k: _iv(stats.mean_interval(v)) if n_ex > 1 else None
                        for k, v in per.items()})
        j, elig, why = pick(alls, mids, edges, rule, edge_loss)
        out[name] = {"grid": grids[name], "middle_gain": mids, "edge_change": edges,
                     "all_gain": alls, "intervals": ivs, "eligible": elig, "chosen": j,
                     "reason": why, "all_gain_by_example": pers,
                     "setting": None if j is None else dict(grids[name][j]),
                     "params": None if j is None else
                     _prompt_params(name, grids[name][j], out.get("prompt"))
                     if name in placement.PROMPT_REMEDIES else
                     _settings_params(name, [GRID[name][j]], ch["channel"])[0]}
    if cal is not None:
        out["attention-calibration"]["recall"] = calibration_recall(
            np.asarray(cal["relevance"]), rec["slot"], tune_part["positions"], rec["example"])
    if var is not None:  # each dummy's ranking (the normaliser does not change it)
        out["attention-calibration"]["recall_by_dummy"] = {
            d: calibration_recall(np.asarray(var[f"relevance#{d}"]), rec["slot"],
                                  tune_part["positions"], rec["example"])
            for d in study.DUMMIES}
        # the same computation in two entries, perhaps made on two machines: the recorded-value
        # guard's tolerance for float rounding, and the same top document on every prompt
        a, b = np.asarray(cal["relevance"]), np.asarray(var["relevance#paper"])
        out["attention-calibration"]["paper_relevance_agrees"] = bool(
            not cache.agree({"relevance": a}, {"relevance": b}) and
            np.array_equal(a.argmax(1), b.argmax(1)))
    return out


def _prompt_params(name, setting, prompt) -> dict:
    """A prompt remedy's file parameters: its setting, and for a quality order the slot quality
    it learnt (the curve, or the prior named by the setting)."""
    p = dict(setting)
    if name == "curve-order":
        p["slot_quality"] = list(prompt["qualities"]["curve"])
    elif name == "prior-order":
        p["slot_quality"] = list(prompt["qualities"][setting["prior"]])
    return p


def calibration_recall(relevance, slot, positions, example=None) -> dict:
    """A description that decides nothing: how often Hsieh et al.'s calibrated attention
    ranks the gold passage first among a prompt's documents (the premise of their eq. 5, which
    moves the attention towards the documents it ranks high).  ``relevance`` ``(n, K)``, the
    gold slot index of each prompt ``slot`` (into ``positions``, the 0-based gold documents),
    the question of each prompt ``example`` (default: each prompt its own).  Returns
    ``hits``, ``n``, the share with its interval over questions
    (:func:`posbias_nb.stats.unit_proportion_interval`: the prompts of one question are not
    independent), ``units``, ``chance`` (1/K), the share per gold slot and ``top``, how many
    prompts rank each document slot first (where the calibration sends the attention).

    >>> r = calibration_recall([[0.3, 0.1], [0.0, 0.2], [0.5, 0.1]], [0, 1, 1], [0, 1])
    >>> r["hits"], r["n"], r["chance"], r["by_slot"], r["top"]
    (2, 3, 0.5, [1.0, 0.5], [2, 1])
    """
    R = np.asarray(relevance, dtype=float)
    slot = np.asarray(slot, dtype=np.int64)
    pos = np.asarray(positions, dtype=np.int64)
    if R.ndim != 2 or R.shape[0] != slot.size or R.shape[0] < 1 or slot.min() < 0 or \
            slot.max() >= pos.size or pos.max() >= R.shape[1]:
        raise ValueError(f"relevance (n, K) with one gold slot per prompt, got shapes "
                         f"{R.shape}, {slot.shape} and positions {list(pos)}")
    hit = R.argmax(1) == pos[slot]
    ex = np.arange(hit.size) if example is None else np.asarray(example)
    if ex.shape != hit.shape:
        raise ValueError(f"relevance of {hit.size} prompts, but {ex.size} example labels")
    units = np.unique(ex)
    return {"hits": int(hit.sum()), "n": int(hit.size), "chance": 1.0 / R.shape[1],
            "units": int(units.size),
            "share": _iv(stats.unit_proportion_interval([hit[ex == u].mean() for u in units])),
            "by_slot": [float(hit[slot == j].mean()) for j in range(pos.size)],
            "top": np.bincount(R.argmax(1), minlength=R.shape[1]).tolist()}


def _peak_kb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Return freed heap pages and restart the high-water mark (Linux); False elsewhere."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except (OSError, AttributeError):
        return False


def _timed(m, p, a, name, kw):
    """Seconds and extra peak memory (MiB, or NaN where it cannot be read) of one full scoring
    pass of prompt ``p`` with answer ``a`` (:func:`~posbias_nb.measure.scoring.score_batch`),
    inside the remedy (from the prompt's last row) when ``name`` is given."""
    from ..models import remedy

    def ctx():
        if name is None:
            return contextlib.nullcontext()
        return remedy(m, name, **kw, **({} if name == "hidden-scaling-all" else
                                        {"start": len(p) - 1}))
    return _seconds_and_peak(m, p, a, ctx)


def _seconds_and_peak(m, p, a, ctx):
    """:func:`_timed`'s measurement: the context ``ctx()`` is made inside the timed span."""
    from ..measure.scoring import score_batch

    before = _peak_kb() if _reset_peak() else None
    t0 = time.perf_counter()
    with ctx():
        score_batch(m, [p], [a])
    dt = time.perf_counter() - t0
    after = _peak_kb()
    mem = float("nan") if before is None or after is None else (after - before) / 1024.0
    return dt, mem


def _timed_calibration(m, codec, part, rec, i, name, kw):
    """:func:`_timed` for the attention calibration: record ``i`` scored by one full pass, as
    it is (``name`` None) or calibrated, its relevance measured first (the recorded pass and
    one extra pass per document, from the prompt's text), all inside the timed span."""
    from ..models import remedy

    p, a = rec["prompts"][i], rec["answers"][i]
    text = [t for it in part["items"] for t in it["prompts"]][i]

    def ctx():
        if name is None:
            return contextlib.nullcontext()
        docs = study.prompt_documents(codec, text, p, kw.get("dummy", "paper"))
        _, c = study.calibrated_relevance(m, p, docs, full=True)
        extra = {"attention": list(c["attention"])} \
            if kw.get("normaliser", "per-head") == "shared" else {}
        return remedy(m, name, **{k: v for k, v in kw.items() if k != "dummy"}, **extra,
                      start=len(p) - 1, spans=docs[0], relevance=c["relevance"])
    return _seconds_and_peak(m, p, a, ctx)


def _cost(m, tok, name, kw, sizes, seed):
    from ..measure.positional import row_nll
    from ..models import remedy
    from ..tasks.text import text_batch

    L = int(sizes["cost_length"])
    ids = text_batch(tok, L, sizes["cost_windows"], seed=seed + 1,
                     vocab_size=m.get_input_embeddings().num_embeddings)
    row0 = L // 2
    base = row_nll(m, ids, row0)
    extra = {} if name == "hidden-scaling-all" else {"start": row0}
    with remedy(m, name, **kw, **extra):
        nll = row_nll(m, ids, row0)
    return base, nll


def evaluate(model, test_part, chosen, sizes, seed=0, weights="pretrained", info=None,
             key=None, remedies=REMEDIES, rule: str = "all-slots") -> dict:
    """Steps 3 and 4 of the module docstring on the prepared test part, for the remedies of
    ``chosen`` (:func:`choose`) that have a setting.  Cached, the timings included (they are
    measured once, with the scores they belong to).  Each remedy's claim is its ``rule``'s
    (:data:`RULES`): the mean all-slot change per example above 0, or the middle-slot gain.
    A prompt remedy is paired with the model as it is on its own entry's passes, its accuracy
    Liu et al.'s best_subspan_em of a greedy generation."""
    n_pos = len(test_part["positions"])
    sl = _slots(n_pos)
    names = [r for r in remedies if chosen[r]["chosen"] is not None]
    plain = {r: chosen[r]["params"] for r in names if r in _PROMPT_ONLY}
    prompt = [r for r in names if r in placement.PROMPT_REMEDIES]
    network = [r for r in names if r in NETWORK_REMEDIES]
    cal_name = "attention-calibration"
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")

    def compute():
        m, tok, codec, rec = _records(model, weights, seed, test_part)
        _check_context(info, rec, "test")
        out = {"example": rec["example"], "slot": rec["slot"]}
        # the model as it is, with the hidden-scaling setting on the same recorded passes
        first = "hidden-scaling" if "hidden-scaling" in names else "ms-poe"
        kws = [plain[first]] if first in names else []
        lp, ok = study.score_remedy(m, rec["prompts"], rec["answers"], first, kws)
        out["base#logprob"], out["base#correct"] = lp[0], ok[0]
        if kws:
            out[f"{first}#logprob"], out[f"{first}#correct"] = lp[1], ok[1]
        mid_rows = [i for i, s in enumerate(rec["slot"]) if int(s) in set(sl["middle"])]
        timing = mid_rows[:int(sizes["timing_prompts"])]
        for name in plain:
            if f"{name}#logprob" not in out:
                lp, ok = study.score_remedy(m, rec["prompts"], rec["answers"], name,
                                                [plain[name]], base=False)
                out[f"{name}#logprob"], out[f"{name}#correct"] = lp[0], ok[0]
            b_nll, r_nll = _cost(m, tok, name, plain[name], sizes, seed)
            out[f"{name}#nll_base"], out[f"{name}#nll"] = b_nll, r_nll
            T = np.zeros((len(timing), 2)), np.zeros((len(timing), 2))
            for q, i in enumerate(timing):  # interleaved, the order alternating
                order = (None, name) if q % 2 == 0 else (name, None)
                for who in order:
                    dt, mem = _timed(m, rec["prompts"][i], rec["answers"][i], who,
                                     plain[name])
                    c = 0 if who is None else 1
                    T[0][q, c], T[1][q, c] = dt, mem
            out[f"{name}#seconds"], out[f"{name}#peak_mib"] = T
        return out

    theory = placement.theory_settings(remedies) if rule == "all-slots" else []
    if prompt or theory:
        pset = [(r, dict(chosen[r]["setting"])) for r in prompt]
        pset += [t for t in theory if t not in pset]
        pt = placement.on_test(model, weights, seed, test_part, test_part["format"], pset,
                               chosen["prompt"]["qualities"], sizes, key)
    if network or not (prompt or theory):
        res = dict(cache.cached("fix-test", dict(key, part="test", chosen=plain), compute))
    else:  # the prompt remedies alone: the model as it is from their own entry
        res = {"example": pt["example"], "slot": pt["slot"], "base#logprob": pt["base_logprob"],
               "base#correct": pt["base_correct"]}
    if prompt or theory:
        if not (np.array_equal(np.asarray(pt["example"]), np.asarray(res["example"])) and
                np.array_equal(np.asarray(pt["slot"]), np.asarray(res["slot"]))):
            raise ValueError("the prompt remedies' test records are not the other remedies'")
        for r in prompt:
            i = pt["settings"].index((r, dict(chosen[r]["setting"])))
            res.update({f"{r}#logprob": pt["logprob"][i], f"{r}#correct": pt["correct"][i],
                        f"{r}#base_logprob": pt["base_logprob"],
                        f"{r}#base_correct": pt["base_correct"],
                        f"{r}#gold_slot": pt["gold_slot"][i],
                        f"{r}#seconds": pt["seconds"][:, i, :]})

    def compute_cal():
        m, tok, codec, rec = _records(model, weights, seed, test_part)
        kw = chosen[cal_name]["params"]
        lp, ok, rel = _calibration_scores(m, codec, test_part, rec, [kw])
        mid_rows = [i for i, s in enumerate(rec["slot"]) if int(s) in set(sl["middle"])]
        timing = mid_rows[:int(sizes["timing_prompts"])]
        T = np.zeros((len(timing), 2)), np.zeros((len(timing), 2))
        for q, i in enumerate(timing):  # interleaved, the order alternating
            for who in ((None, cal_name) if q % 2 == 0 else (cal_name, None)):
                dt, mem = _timed_calibration(m, codec, test_part, rec, i, who, kw)
                c = 0 if who is None else 1
                T[0][q, c], T[1][q, c] = dt, mem
        return {"example": rec["example"], "slot": rec["slot"], "logprob": lp[0],
                "correct": ok[0], "relevance": rel, "seconds": T[0], "peak_mib": T[1]}

    if cal_name in names:
        cal = cache.cached("fix-test", _cal_key(key, "test-calibration",
                                                chosen=chosen[cal_name]["params"]), compute_cal)
        if not (np.array_equal(np.asarray(cal["example"]), np.asarray(res["example"])) and
                np.array_equal(np.asarray(cal["slot"]), np.asarray(res["slot"]))):
            raise ValueError("the calibration's test records are not the other remedies'")
        res.update({f"{cal_name}#logprob": cal["logprob"], f"{cal_name}#correct": cal["correct"],
                    f"{cal_name}#seconds": cal["seconds"], f"{cal_name}#peak_mib":
                    cal["peak_mib"]})
    n_ex = len(test_part["items"])
    rec = {"example": np.asarray(res["example"]), "slot": np.asarray(res["slot"])}
    base = _matrix(np.asarray(res["base#logprob"]), rec, n_ex, n_pos)
    base_ok = _matrix(np.asarray(res["base#correct"], dtype=float), rec, n_ex, n_pos)
    out = {"base": {"logprob": [_iv(stats.mean_interval(base[:, j])) for j in range(n_pos)],
                    "accuracy": [_iv(stats.proportion_interval(int(base_ok[:, j].sum()), n_ex))
                                 for j in range(n_pos)]},
           "claims": {}, "n_examples": n_ex}
    for name in names:
        lp = _matrix(np.asarray(res[f"{name}#logprob"]), rec, n_ex, n_pos)
        ok = _matrix(np.asarray(res[f"{name}#correct"], dtype=float), rec, n_ex, n_pos)
        is_prompt = name in placement.PROMPT_REMEDIES
        b_lp, b_ok = (base, base_ok) if not is_prompt else (
            _matrix(np.asarray(res[f"{name}#base_logprob"]), rec, n_ex, n_pos),
            _matrix(np.asarray(res[f"{name}#base_correct"], dtype=float), rec, n_ex, n_pos))
        d = lp - b_lp
        mid = d[:, sl["middle"]].mean(1)
        every = d.mean(1)
        sec = np.asarray(res[f"{name}#seconds"])
        mem = np.asarray(res[f"{name}#peak_mib"]) if not is_prompt else None
        ratio = np.log(sec[:, 1] / sec[:, 0])
        if name == cal_name or is_prompt:  # nothing on text without documents can move
            nll, nll_base = None, None
        else:
            nll_base = np.asarray(res[f"{name}#nll_base"])
            nll = np.asarray(res[f"{name}#nll"]) - nll_base
        out[name] = {
            "logprob": [_iv(stats.mean_interval(lp[:, j])) for j in range(n_pos)],
            "logprob_change": [_iv(stats.mean_interval(d[:, j])) for j in range(n_pos)],
            "accuracy": [_iv(stats.proportion_interval(int(ok[:, j].sum()), n_ex))
                         for j in range(n_pos)],
            "middle_gain_per_example": [float(v) for v in mid],
            "middle_gain": _iv(stats.mean_interval(mid)),
            "all_gain_per_example": [float(v) for v in every],
            "all_gain": _iv(stats.mean_interval(every)),
            "edge_change": _iv(stats.mean_interval(d[:, sl["edges"]].mean(1))),
            "accuracy_change": [_iv(stats.paired_proportion_interval(ok[:, j], b_ok[:, j]))
                                for j in range(n_pos)],
            **({} if not is_prompt else {
                "base_logprob": [_iv(stats.mean_interval(b_lp[:, j])) for j in range(n_pos)],
                "base_accuracy": [_iv(stats.proportion_interval(int(b_ok[:, j].sum()), n_ex))
                                  for j in range(n_pos)],
                "accuracy_kind": "best_subspan_em of a greedy generation (Liu et al.)",
                "gold_slot": [int(v) + 1 for v in np.asarray(res[f"{name}#gold_slot"])]}),
            "cost": {"nll_change": None if nll is None else _iv(stats.mean_interval(nll)),
                     "nll_base": None if nll is None else _iv(stats.mean_interval(nll_base)),
                     "nll_reason": None if nll is not None else
                     "not measured: a prompt remedy leaves the model as it is, so its "
                     "next-token loss on text cannot move" if is_prompt else
                     "not measured: offline text has no documents, which the calibration "
                     "alone reweights, so its next-token loss cannot move",
                     "passes": _passes(name, chosen[name]["setting"], test_part["documents"]),
                     "latency_ratio": _iv(tuple(np.exp(v) for v in
                                                stats.mean_interval(ratio))),
                     "seconds_base": float(np.median(sec[:, 0])),
                     "seconds": float(np.median(sec[:, 1])),
                     "peak_mib_change": _iv(stats.mean_interval(mem[:, 1] - mem[:, 0]))
                     if mem is not None and np.all(np.isfinite(mem)) else None,
                     "windows": 0 if nll is None else int(len(nll)), "prompts": int(len(sec)),
                     "latency_includes": "the relevance's extra passes (one per document) and "
                                         "the scoring pass" if name == cal_name else
                                         "the ranking, the placement and the scoring pass"
                                         if is_prompt else "the scoring pass"}}
        out["claims"][name] = dict(x=every if rule == "all-slots" else mid, threshold=0.0,
                                   direction="greater")
    fam = stats.holm_family(out.pop("claims"), alpha=0.05) if names else {}
    if theory:  # the theory's comparisons, a family of their own (placement.THEORY)
        change = []
        for r, st in theory:
            i = pt["settings"].index((r, st))
            d = _matrix(np.asarray(pt["logprob"][i]), rec, n_ex, n_pos) - \
                _matrix(np.asarray(pt["base_logprob"]), rec, n_ex, n_pos)
            change.append(d.mean(1))
        out["theory"] = {"ranker": placement.THEORY["ranker"],
                         "margin": placement.THEORY["margin"],
                         "all_gain": {f"{r}:{placement.json_key(st)}":
                                      _iv(stats.mean_interval(c)) for (r, st), c in
                                      zip(theory, change)},
                         "claims": placement.theory_family(change, theory)}
    for name in names:
        v = fam[name]
        out[name]["verdict"] = v["verdict"]
        out[name]["adjusted"] = _iv(v["adjusted"]) if "adjusted" in v else None
        out[name]["p_holm"] = float(v["p_holm"]) if "p_holm" in v else None
        out[name]["level"] = float(v["level"]) if "level" in v else None
    return out


def coinciding(k: int) -> list[tuple]:
    """The prompt remedies that give the same prompt at ``k`` documents (at one ranker): LangChain's
    ``LongContextReorder`` and Haystack's ``LostInTheMiddleRanker`` at an odd count (the top
    document first in both), none at an even one.

    >>> coinciding(5), coinciding(6)
    ([('long-context-reorder', 'lost-in-the-middle-ranker')], [])
    """
    k = positive_int("documents", k, minimum=1)
    from ..tasks import reorder

    same = reorder.long_context_reorder(k) == reorder.lost_in_the_middle(k)
    return [("long-context-reorder", "lost-in-the-middle-ranker")] if same else []


def arm_name(name: str, k: int | None) -> str:
    """A remedy's name, or both names where two remedies coincide at ``k`` documents."""
    for pair in coinciding(k) if k else []:
        if name in pair:
            return " = ".join(pair)
    return name


def select_one(tuning: dict, test: dict, k: int | None, alpha: float = 0.05,
               power: float = 0.8) -> dict:
    r"""The fifth design's rule (issue 53): select on the tuning part, confirm on the test part.

    Among the remedies with a chosen setting (:func:`pick` under ``all-slots``: a setting whose
    mean all-slot gain on the tuning part is above 0), the one with the largest tuning gain is
    **carried** to the test part and tested alone: its claim "the mean all-slot gain in log p
    per test question is above 0" is declared one-sided, Student *t* at ``alpha``
    (:func:`posbias_nb.stats.one_sided_bounds`), with a sign-flip permutation test beside it
    (:func:`posbias_nb.stats.paired_test`).  The other remedies' test-part gains are reported
    with their two-sided 95% *t* intervals as exploratory, with no verdict.  Two remedies that
    give the same prompt at ``k`` documents (:func:`coinciding`) are one arm, named for both.

    The power (from the tuning part's spread of the carried remedy's per-question gain; the
    remedy with the largest tuning gain when none gains): the smallest gain the test part
    detects with probability ``power`` (:func:`posbias_nb.stats.detectable_effect`, the
    test's own one-sided level), and the questions that would detect 0.5 and 1.0 nats.

    Returns ``{"carried", "arm", "verdict", "interval", "two_sided", "p_perm", "power",
    "exploratory", "reason"}``.
    """
    names = [r for r in REMEDIES if r in tuning and isinstance(tuning[r], dict)
             and "all_gain" in tuning[r]]
    seen, arms = set(), []
    for r in names:
        a = arm_name(r, k) if r in placement.PROMPT_REMEDIES else r
        if a in seen:
            continue
        if " = " in a:  # one arm: its settings must be the same to give the same prompt
            other = [x for x in a.split(" = ") if x != r][0]
            if other in tuning and tuning[other].get("setting") != tuning[r].get("setting"):
                a = r
        seen.add(a)
        arms.append((a, r))

    def tuned(r):
        j = tuning[r]["chosen"]
        return None if j is None else float(tuning[r]["all_gain"][j])

    live = [(a, r) for a, r in arms if tuned(r) is not None and r in test]
    best_any = max((x for x in arms if tuning[x[1]]["all_gain"]),
                   key=lambda x: max(tuning[x[1]]["all_gain"]), default=None)
    carried = max(live, key=lambda x: tuned(x[1]), default=None)
    n_test = int(test.get("n_examples", 0))
    pw = None
    src = carried or best_any
    if src is not None and n_test >= 2:
        r = src[1]
        j = tuning[r]["chosen"]
        if j is None:
            j = int(np.argmax(tuning[r]["all_gain"]))
        per = np.asarray(tuning[r]["all_gain_by_example"][j], dtype=float) \
            if tuning[r].get("all_gain_by_example") else np.array([])
        sd = float(per.std(ddof=1)) if per.size >= 2 else float("nan")
        if np.isfinite(sd) and sd > 0:
            pw = {"from": src[0], "sd_tuning": sd, "n_tuning": int(per.size),
                  "n_test": n_test, "alpha": alpha, "power": power, "sided": "one-sided",
                  "detectable": stats.detectable_effect(sd, n_test, alpha, power),
                  "needed": {str(e): stats.units_needed(e, sd, alpha, power)
                             for e in (0.5, 1.0)}}
    out = {"carried": None if carried is None else carried[1],
           "arm": None if carried is None else carried[0], "power": pw,
           "verdict": None, "interval": None, "two_sided": None, "p_perm": None,
           "exploratory": {}, "alpha": alpha,
           "reason": None if carried else "no remedy raises the mean log p over all gold "
                                          "slots on the tuning part: none is carried"}
    if carried is not None:
        x = np.asarray(test[carried[1]]["all_gain_per_example"], dtype=float)
        iv = stats.one_sided_bounds(x, 1 - alpha)
        out.update(interval=_iv(iv), two_sided=_iv(stats.mean_interval(x)),
                   verdict=stats.decide(iv),
                   p_perm=float(stats.paired_test(x, np.zeros_like(x), "greater").pvalue),
                   tuning_gain=tuned(carried[1]), setting=tuning[carried[1]]["setting"])
    for a, r in arms:
        if carried is not None and a == carried[0] or r not in test:
            continue
        out["exploratory"][a] = {"all_gain": test[r]["all_gain"],
                                 "tuning_gain": tuned(r), "setting": tuning[r]["setting"]}
    return out


def verdict_words(verdict, power: dict | None) -> str:
    """The words for a carried remedy's verdict: "helps" only where it holds, "does not help"
    only where it fails; an inconclusive one reads as the size of what the test part could see.

    >>> verdict_words("inconclusive", {"detectable": 0.83, "needed": {"0.5": 60}})
    'not shown to help at this size: your test part can detect gains of at least 0.83 nats; about 60 questions would decide 0.5'
    """
    if verdict == "holds":
        return "helps on the test part"
    if verdict == "fails":
        return "does not help on the test part"
    if verdict is None:
        return "no remedy carried to the test part"
    if power is None:
        return "not shown to help at this size"
    return (f"not shown to help at this size: your test part can detect gains of at least "
            f"{power['detectable']:.2f} nats; about {power['needed']['0.5']} questions would "
            f"decide 0.5")


def _passes(name, setting, k) -> int | None:
    """Forward passes per prompt of a remedy with ``k`` documents, the scoring pass included:
    one for a fixed rule, the curve, the prior or the template; one per document more for the
    question likelihood (short passes, each document alone); the rounds of attention sorting
    (the last round's order is scored); one per document more for the calibration."""
    if name == "attention-calibration":
        return 1 + int(k)
    if name == "attention-sort":
        return int(setting["rounds"]) + 1
    if name in placement.PROMPT_REMEDIES:
        return 1 + (int(k) if (setting or {}).get("ranker") == "question-likelihood" else 0)
    return 1


def setting_text(setting) -> str:
    """A remedy's setting in words for a table: ``key = value`` pairs (floats by ``:g``), the
    slot quality left out (it is data, not a choice); ``"none"`` for no setting, ``"(one
    setting)"`` for an empty one.

    >>> setting_text({"ranker": "bm25", "scale": 0.5})
    'ranker = bm25, scale = 0.5'
    >>> setting_text(None), setting_text({})
    ('none', '(one setting)')
    """
    if setting is None:
        return "none"
    return ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}"
                     for k, v in setting.items() if k != "slot_quality") or "(one setting)"


def _iv(t) -> dict:
    e, lo, hi = (float(v) for v in t)
    return {"estimate": e, "low": lo, "high": hi}


def fix(model, data, documents: int | None = None, examples: int | None = None,
        seed: int = DEFAULTS["seed"], weights: str = "pretrained", quick: bool = False,
        edge_loss: float = DEFAULTS["edge_loss"], test_share: float = DEFAULTS["test_share"],
        progress: bool = False, remedies=None, rule: str = DEFAULT_RULE,
        force: bool = False) -> Result:
    """Choose and judge a remedy for ``model`` on the task file ``data`` (module docstring).

    Parameters
    ----------
    model : str or path
        A zoo name, a local model directory or a hub id (from the local hub cache).
    data : path
        A task file (:data:`posbias_nb.tasks.qa.FORMATS`).
    documents : int or None
        Documents per prompt of a QA file (default: :data:`DEFAULTS`, or
        :data:`QUICK_DOCUMENTS`, an even count, with ``quick``); a plain file keeps its own
        count; a key-value file uses all its records.
    examples : int or None
        How many examples (drawn by ``seed``; default as ``documents``), split into the two
        parts.
    edge_loss : float
        The largest mean loss of log p (nats) at the edge slots a chosen setting may cost on
        the tuning part.
    quick : bool
        :data:`QUICK` sizes (fewer, shorter prompts; a smaller channel search and cost).
    remedies : sequence of str or None
        The remedies searched and judged (default all of :data:`REMEDIES`); Holm's family is
        the remedies judged.  The calibration costs one extra pass per document and prompt,
        so leaving it out is the quick way to try the other two.  Hidden scaling and Ms-PoE
        are measured together, in one entry whose key is the first design's (so its recorded
        measurements serve): naming one of them measures both, and judges and returns only the
        one named.  The prompt remedies (:mod:`posbias_nb.experiments.placement`) need a
        question-answering file.
    rule : str
        :data:`RULES`: ``select-one`` (the default, :func:`select_one`) ranks the remedies on
        the tuning part and tests the best alone on the test part, one-sided, with the power
        of that test; ``all-slots`` (the third design's) judges every remedy with a tuning
        gain, Holm across them; ``middle`` is the first design's rule (middle-slot gain, the
        edge loss), for the remedies inside the network only.
    force : bool
        Run even when the test part has fewer than :data:`MIN_TEST` examples (its t test
        could not detect a gain of one standard deviation of the per-question gain).

    Returns
    -------
    Result
        ``split``, ``tuning`` (:func:`choose`), ``test`` (:func:`evaluate`), ``winner`` (the
        remedy file's remedy, or None) and ``meta``; the CSV columns are one row per remedy and
        gold slot.

    Raises
    ------
    ValueError
        Every refusal of :func:`posbias_nb.experiments.task.prepare`, a split that leaves fewer
        than 2 examples in a part, a test part below :data:`MIN_TEST` without ``force``,
        prompts beyond the model's context, a negative edge loss, an unknown or repeated
        remedy.
    """
    from .. import __version__

    sel = select_remedies(remedies)
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    # the fifth design selects among what the third design's rule measures and chooses
    measured = "all-slots" if rule == "select-one" else rule
    if rule == "middle" and set(sel) - set(NETWORK_REMEDIES):
        raise ValueError("the middle rule is the first design's, for the remedies inside the "
                         f"network ({', '.join(NETWORK_REMEDIES)}); the prompt remedies are "
                         "judged over all gold slots")
    sizes = dict(QUICK if quick else DEFAULTS)
    path = Path(data)
    E = sizes["examples"] if examples is None else positive_int("examples", examples,
                                                                minimum=4)
    if not np.isfinite(float(edge_loss)) or float(edge_loss) < 0:
        raise ValueError(f"edge_loss must be a non-negative number of nats, got {edge_loss!r}")
    fmt, exs = qa.read_task_file(path)
    if fmt == "liu-kv" and documents is not None:
        raise ValueError("--documents is for question-answering files; a key-value file uses "
                         "all its records")
    if fmt == "liu-kv" and set(sel) & set(placement.PROMPT_REMEDIES):
        raise ValueError(f"{path.name} is a key-value file; the prompt remedies "
                         f"({', '.join(r for r in sel if r in placement.PROMPT_REMEDIES)}) "
                         "place documents: name the remedies inside the network with "
                         "--remedies, or give a question-answering file")
    if fmt == "liu-kv":
        k = None
    elif documents is not None:
        k = positive_int("documents", documents, minimum=2)
    elif fmt == "plain":  # a user's own file keeps its count (prepare: the fewest a question)
        k = None
    else:
        k = QUICK_DOCUMENTS if quick else sizes["documents"]
    if k is not None:
        sizes["documents"] = k
    chosen = study.choose(len(exs), E, int(seed))
    if len(chosen) < 4:
        raise ValueError(f"{path.name} holds {len(exs)} examples; fix needs 4 or more")
    tune_i, test_i = split(len(chosen), test_share, seed)
    if len(test_i) < MIN_TEST and not force:
        d1 = stats.detectable_effect(1.0, len(test_i))
        raise ValueError(
            f"{path.name}: {len(chosen)} examples give a test part of {len(test_i)}, whose "
            f"t test detects (80% power) only gains of {d1:.1f} times the spread of the "
            f"per-question gain; fix needs a test part of at least {MIN_TEST} (about "
            f"{int(np.ceil(MIN_TEST / float(test_share)))} examples): give more, or --force")
    tune_idx, test_idx = [int(chosen[i]) for i in tune_i], [int(chosen[i]) for i in test_i]
    n_slots = k if k is not None else min(len(exs[i].records) for i in chosen)
    pos = fix_positions(n_slots)
    info = entry.checked(model, weights, 2, 1, seed)
    key = _key(info, weights, seed, data=file_sha256(path), format=fmt, documents=k,
               positions=pos, tune=tune_idx, test=test_idx, sizes=sizes,
               grid={r: [dict(s) for s in GRID[r]] for r in _PROMPT_ONLY},
               edge_loss=float(edge_loss))
    import sys

    from tqdm import tqdm

    bar = tqdm(total=2, disable=not progress, file=sys.stderr, leave=False, unit="stage")
    try:
        # the tuning part alone is read here; the test part's prompts are built after the choice
        bar.set_description("fix: tuning part")
        tune_part = _task.prepare(path, k, pos, None, None, seed, fmt, select=tune_idx,
                                  pool_exclude=test_idx)
        choice = choose(model, tune_part, sizes, edge_loss, seed, weights, info, key, sel,
                        measured)
        bar.update()
        bar.set_description("fix: test part")
        test_part = _task.prepare(path, k, pos, None, None, seed, fmt, select=test_idx,
                                  pool_exclude=tune_idx)
        judged = evaluate(model, test_part, choice, sizes, seed, weights, info, key, sel,
                          measured)
        bar.update()
    finally:
        bar.close()
    picked = None
    if rule == "select-one":
        picked = select_one(choice, judged, k if k is not None else len(pos))
        picked["words"] = verdict_words(picked["verdict"], picked["power"])
        winner = picked["carried"] if picked["verdict"] == "holds" else None
    else:
        holds = [r for r in REMEDIES if r in judged and judged[r]["verdict"] == "holds"]
        gain = "all_gain" if measured == "all-slots" else "middle_gain"
        winner = max(holds, key=lambda r: judged[r][gain]["estimate"]) if holds else None
    table = {c: [] for c in ("remedy", "gold_slot", "setting", "logprob", "logprob_low",
                             "logprob_high", "change", "change_low", "change_high")}
    for r in REMEDIES:
        if r not in judged:
            continue
        for j, p in enumerate(pos):
            iv, dv = judged[r]["logprob"][j], judged[r]["logprob_change"][j]
            for c, v in zip(table, (r, p + 1, json.dumps(choice[r]["setting"]), iv["estimate"],
                                    iv["low"], iv["high"], dv["estimate"], dv["low"],
                                    dv["high"])):
                table[c].append(v)
    meta = {"command": "fix", "model": info["name"], "model_argument": str(model),
            "fingerprint": info["fingerprint"], "weights": weights, "data": path.name,
            "data_sha256": file_sha256(path), "format": fmt, "documents": k,
            "gold_slots": [p + 1 for p in pos], "middle_slots":
            [pos[j] + 1 for j in _slots(len(pos))["middle"]],
            "seed": int(seed), "quick": bool(quick), "sizes": sizes,
            "edge_loss": float(edge_loss), "test_share": float(test_share),
            "dummy": f"{qa.DUMMY_DOCUMENT.title}: {qa.DUMMY_DOCUMENT.text}" if fmt != "liu-kv"
            else '"{}": "{}"'.format(*qa.DUMMY_RECORD),
            "definition": _DEF, "level": 0.95, "version": __version__, "remedies": list(sel),
            "scoring": "teacher-forced log p of the file's first gold answer; accuracy: its "
                       "greedy match token by token (not best_subspan_em of a free generation)",
            "rule_name": rule,
            "power": None if picked is None else picked["power"],
            "rule": "tuning: per remedy, the setting with the largest mean change of log p "
                    "over all gold slots; the remedy with the largest such gain (above 0) is "
                    "carried to the test part alone: its mean all-slot gain per example "
                    "greater than 0, one-sided Student t at 0.05 over examples, a sign-flip "
                    "permutation test beside it; the others' test-part changes are "
                    "exploratory" if rule == "select-one" else
                    "tuning: the largest mean middle-slot gain among the settings whose mean "
                    "edge-slot change is at least -edge_loss; test: the mean middle-slot gain "
                    "per example greater than 0, Student t over examples, Holm across the "
                    "remedies" if rule == "middle" else
                    "tuning: per remedy, the largest mean change of log p over all gold slots, "
                    "judged only where it is above 0; test: the mean all-slot change per "
                    "example greater than 0, Student t over examples, Holm across the "
                    "remedies judged",
            **entry.library_versions()}
    data_out = dict(table, split={"seed": int(seed), "examples": len(chosen),
                                  "tune_lines": [exs[i].line for i in tune_idx],
                                  "test_lines": [exs[i].line for i in test_idx],
                                  "tune": tune_idx, "test": test_idx},
                    tuning=choice, test=judged, winner=winner, selected=picked)
    return Result(data_out, meta=meta, columns=tuple(table))


def _figure(obj):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from .. import plots

    meta, test = obj["meta"], obj["test"]
    x = meta["gold_slots"]
    names = [r for r in REMEDIES if r in test]
    cols = min(max(len(names), 1), 3)
    rows_ = -(-max(len(names), 1) // cols)
    fig, axes = plots.figure(nrows=rows_, ncols=cols, width=7.5, height=3.0 * rows_,
                             squeeze=False, sharey=True, layout="constrained")
    for ax in axes.reshape(-1)[max(len(names), 1):]:
        ax.set_visible(False)
    axes = axes.reshape(1, -1)
    for ax, r in zip(axes[0], names or [None]):
        b = test["base"]["logprob"] if r is None else test[r].get("base_logprob",
                                                                   test["base"]["logprob"])
        ax.errorbar(x, [v["estimate"] for v in b],
                    yerr=_yerr(b), marker="o", capsize=3, color=plots.COLORS[0],
                    label="as it is")
        if r is not None:
            v = test[r]["logprob"]
            ax.errorbar([xx + 0.15 for xx in x], [t["estimate"] for t in v], yerr=_yerr(v),
                        marker="s", capsize=3, color=plots.COLORS[1], label=r)
        ax.set_xlabel("gold document (slot)")
        ax.set_ylabel("log p of the gold answer")
        ax.set_xticks(x)
        ax.legend(fontsize=8)
    return fig


#: Short labels of the prompt remedies (figures, tables).
PROMPT_LABELS = {"long-context-reorder": "LangChain's reorder",
                 "lost-in-the-middle-ranker": "Haystack's ranker",
                 "query-aware": "query-aware (Liu et al.)",
                 "curve-order": "curve order (ours)", "prior-order": "prior order (ours)",
                 "attention-sort": "attention sorting (P. and L.)"}


def slot_figure(results: dict):
    """Chapter :ref:`ch-documents`, section "Where the documents go": for each model
    (``{label: fix result}``, one column), the gold answer's log p (top) and its accuracy,
    Liu et al.'s best_subspan_em (bottom), by the gold passage's original slot on the test
    part, the model as it is and under each prompt remedy judged there (its chosen setting),
    with 95% intervals (t over examples; Wilson)."""
    from .. import plots

    fig, axes = plots.figure(ncols=len(results), nrows=2, width=7.5, height=5.6,
                             squeeze=False, sharex=True, layout="constrained")
    for c, (label, r) in enumerate(results.items()):
        test, x = r["test"], [p for p in r.meta["gold_slots"]]
        names = [n for n in placement.PROMPT_REMEDIES if n in test]
        base = test[names[0]] if names else None
        for row, what in enumerate(("logprob", "accuracy")):
            ax = axes[row][c]
            series = ([("as it is", base[f"base_{what}"])] if base else []) + \
                [(PROMPT_LABELS[n], test[n][what]) for n in names]
            for i, (lab, ivs) in enumerate(_merge_identical(series)):
                off = (i - (len(series) - 1) / 2) * 0.08
                ax.errorbar([v + off for v in x], [v["estimate"] for v in ivs], yerr=_yerr(ivs),
                            marker="os^vDP<>"[i % 8], capsize=2, ms=4,
                            color=plots.COLORS[i % len(plots.COLORS)], label=lab,
                            ls="-" if i == 0 else "--", lw=1.2 if i == 0 else 0.9)
            ax.set_xticks(x)
            if row == 0:
                ax.set_title(label)
                ax.set_ylabel("log p of the gold answer (nats)")
            else:
                ax.set_xlabel("slot of the gold passage before the remedy")
                ax.set_ylabel("accuracy (best_subspan_em)")
                ax.set_ylim(-0.05, 1.05)
            if not names:
                ax.text(0.5, 0.5, "no prompt remedy gained on the tuning part",
                        transform=ax.transAxes, ha="center", va="center", fontsize=9)
    handles, labels = {}, []
    for ax in axes.reshape(-1):
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside lower center",
                   ncols=min(2, len(handles)), fontsize=9)
    return fig


def _merge_identical(series):
    """``[(label, values)]`` with the series whose values are identical drawn once, under
    their labels joined by " = " (LangChain's and Haystack's rules at an odd count give one
    prompt, hence one series).

    >>> _merge_identical([("a", [1.0]), ("b", [2.0]), ("c", [1.0])])
    [('a = c', [1.0]), ('b', [2.0])]
    """
    out = []
    for lab, vals in series:
        for m in out:
            if m[1] == vals:
                m[0] = f"{m[0]} = {lab}"
                break
        else:
            out.append([lab, vals])
    return [tuple(m) for m in out]


def _yerr(ivs):
    e = np.array([v["estimate"] for v in ivs])
    return np.array([e - [v["low"] for v in ivs], [v["high"] for v in ivs] - e])


def _page(obj, png) -> str:
    import html

    from .pages import STYLE

    meta, t, c = obj["meta"], obj["test"], obj["tuning"]

    def f(v, d=3):
        return "—" if v is None or not np.isfinite(v) else f"{v:+.{d}f}"

    def ivs(iv, d=3):
        return "—" if iv is None else f"{f(iv['estimate'], d)} [{f(iv['low'], d)}, " \
                                      f"{f(iv['high'], d)}]"

    sel = obj.get("selected")
    carried = None if not sel else sel["carried"]
    rows, sents = [], []
    for r in [r for r in REMEDIES if r in c]:
        ch = c[r]
        grid = "; ".join(f"{json.dumps(s)}: all slots {f(a)}, middle {f(m)}, edges {f(e)}"
                         for s, a, m, e in zip(ch["grid"], ch.get("all_gain") or
                                               [float("nan")] * len(ch["grid"]),
                                               ch["middle_gain"], ch["edge_change"]))
        if r not in t:
            sents.append(f"<li><b>{r}</b>: not judged on the test part: "
                         f"{html.escape(str(ch['reason']))} (tuning grid: "
                         f"{html.escape(grid) or 'not scored'}).</li>")
            continue
        v = t[r]
        cost = v["cost"]
        nll = ivs(cost["nll_change"], 4) if cost["nll_change"] is not None else \
            html.escape(cost["nll_reason"])
        setting = {k: x for k, x in ch["setting"].items() if k != "slot_quality"}
        word = v["verdict"] if not sel else (f"carried: {sel['verdict']}" if r == carried
                                             else "exploratory")
        rows.append(f"<tr><td>{r}</td><td>{html.escape(json.dumps(setting))}</td>"
                    f"<td>{ivs(v.get('all_gain'))}</td>"
                    f"<td>{ivs(v['middle_gain'])}</td><td>{ivs(v['edge_change'])}</td>"
                    f"<td>{nll}</td>"
                    f"<td>{ivs(cost['latency_ratio'], 2).replace('+', '')}</td>"
                    f"<td>{ivs(cost['peak_mib_change'], 1)}</td><td>{word}</td></tr>")
        claim = "middle-slot gain" if meta.get("rule_name") == "middle" else \
            "change over all gold slots"
        est = v["middle_gain"] if meta.get("rule_name") == "middle" else v["all_gain"]
        if sel and r != carried:
            sents.append(f"<li><b>{html.escape(arm_name(r, meta.get('documents')))}</b> at "
                         f"{html.escape(json.dumps(setting))} (exploratory, no verdict): the "
                         f"mean {claim} of log p on the {t['n_examples']} test examples is "
                         f"{ivs(est)} (two-sided 95% t). Tuning grid: {html.escape(grid)}."
                         "</li>")
        elif sel:
            sents.append(f"<li><b>{html.escape(sel['arm'])}</b> at "
                         f"{html.escape(json.dumps(setting))}, carried from the tuning part "
                         f"(tuning gain {f(sel['tuning_gain'])}): the mean {claim} of log p on "
                         f"the {t['n_examples']} test examples is {f(sel['interval']['estimate'])}"
                         f", one-sided 95% lower bound {f(sel['interval']['low'])} (two-sided "
                         f"95% t {ivs(sel['two_sided'])}; sign-flip permutation p = "
                         f"{sel['p_perm']:.3g}): <b>{sel['verdict']}</b>. Tuning grid: "
                         f"{html.escape(grid)}.</li>")
        else:
            sents.append(f"<li><b>{r}</b> at {html.escape(json.dumps(setting))}: the mean "
                         f"{claim} of log p on the {t['n_examples']} test examples is "
                         f"{ivs(est)} (95% t; Holm level {v['level']}): "
                         f"<b>{v['verdict']}</b>. Tuning grid: {html.escape(grid)}.</li>")
    win = obj["winner"]
    call = ("models.remedy(model, \"remedy.json\", spans=..., relevance=..., start=...)</code> "
            "with each prompt's document spans and their relevance (measure.positional."
            "calibrated_attention), or <code>--remedy-file remedy.json</code> for posbias "
            "task, retrieval and report") if win == "attention-calibration" else \
        ("experiments.task.reorder_documents(\"remedy.json\", question, documents, model)"
         "</code> on a pipeline's own documents, or <code>--remedy-file remedy.json</code> for "
         "posbias task") if win in placement.PROMPT_REMEDIES else \
        "models.remedy(model, \"remedy.json\")</code>, or <code>--remedy-file remedy.json</code>"
    pw = (sel or {}).get("power")
    power = "" if not pw else (
        f"<p><b>What this test part can see.</b> From the tuning part's spread of "
        f"{html.escape(pw['from'])}'s per-question gain (SD {pw['sd_tuning']:.2f} nats over "
        f"{pw['n_tuning']} questions), the one-sided t test on the {pw['n_test']} test questions "
        f"detects a gain of {pw['detectable']:.2f} nats with 80% power; about "
        f"{pw['needed']['0.5']} test questions would detect 0.5 nats, "
        f"{pw['needed']['1.0']} would detect 1.0.</p>")
    if win:
        verdict = (f"<p><b>{win}</b> holds on the test part: <code>remedy.json</code> applies "
                   f"it (<code>{call}).</p>")
    elif sel:
        verdict = (f"<p><b>{html.escape(sel['arm'] or 'No remedy')}: "
                   f"{html.escape(sel['words'])}.</b> No remedy file is written.</p>")
    else:
        verdict = ("<p><b>No remedy holds on the test part</b> (an inconclusive verdict is "
                   "not evidence against a remedy: see each verdict below). No remedy file is "
                   "written.</p>")
    k_docs = meta.get("documents")
    if sel and k_docs and {"long-context-reorder", "lost-in-the-middle-ranker"} <= set(c):
        same = bool(coinciding(k_docs))
        verdict += (f"<p>LangChain's and Haystack's rules give the same prompt at an odd count of "
                    f"documents (the top one first in both) and different prompts at an even "
                    f"one; at this run's {k_docs} they "
                    + ("coincide and are one arm." if same else "differ.") + "</p>")
    verdict += power
    sp = obj["split"]
    hs_text = f"Yu et al.'s channel: {c['channel']['channel']}. " if "hidden-scaling" in c else ""
    cal_text = "" if "attention-calibration" not in c else (
        "Hsieh et al.'s calibration: the relevance of each prompt's documents measured on that "
        "prompt, each document replaced in turn by the dummy document "
        f"\"{html.escape(meta['dummy'])}\" (one extra pass per document, counted in its "
        "latency); the remedy file carries the temperature, and the caller gives each "
        "prompt's spans and relevance. ")
    top = (c.get("prompt") or {}).get("top1") or {}
    cal_text += "".join(
        f"The {html.escape(r)} ranker puts the gold passage first in {v['hits']} of "
        f"{v['n']} tuning prompts ({100 * v['share']['estimate']:.0f}%, 95% Wilson "
        f"{100 * v['share']['low']:.0f} to {100 * v['share']['high']:.0f}% over "
        f"{v['units']} questions). " for r, v in top.items())
    rc = c.get("attention-calibration", {}).get("recall")
    cal_text += "" if not rc else (
        f"Its calibrated attention ranks the gold passage first in {rc['hits']} of the "
        f"{rc['n']} tuning prompts ({100 * rc['share']['estimate']:.0f}%, 95% Wilson "
        f"{100 * rc['share']['low']:.0f} to {100 * rc['share']['high']:.0f}% over its "
        f"{rc['units']} questions; "
        f"chance {100 * rc['chance']:.0f}%): eq. 5 moves the attention towards the passages it "
        f"ranks high.")
    return f"""<!doctype html><html><head><meta charset="utf-8">
<title>posbias fix: {html.escape(meta['model'])}</title>
<style>{STYLE}</style>
</head><body>
<h1>posbias fix: {html.escape(meta['model'])}</h1>
{verdict}
<ul>{''.join(sents)}</ul>
<img alt="log p of the gold answer by gold slot, as it is and with each chosen remedy, on the
test part, with 95% t intervals over examples" src="{png}" style="max-width:100%">
<p>What to see: where the remedy's curve sits above the unpatched one at the middle slots
({', '.join(map(str, meta['middle_slots']))}) without falling at the edges.</p>
<h2>Cost</h2>
<table><tr><th>remedy</th><th>setting</th><th>all-slot change (nats)</th>
<th>middle gain</th><th>edge change</th>
<th>next-token loss change (nats)</th><th>latency ratio</th><th>peak memory change (MiB)</th>
<th>verdict</th></tr>{''.join(rows)}</table>
<h2>What was tuned on what</h2>
<p>{sp['examples']} examples of <code>{html.escape(meta['data'])}</code> (format
{meta['format']}), split by example with seed {sp['seed']}: {len(sp['tune'])} to tune (file
lines {', '.join(map(str, sp['tune_lines']))}), {len(sp['test'])} to test (file lines
{', '.join(map(str, sp['test_lines']))}). The test part was not read before the choice.
Rule: {html.escape(meta['rule'])}; edge loss {meta['edge_loss']} nats. Scoring:
{html.escape(meta['scoring'])}. {hs_text}{cal_text}</p>
<p>posbias_nb {html.escape(meta['version'])}, definition {meta['definition']}, model
fingerprint {html.escape(meta['fingerprint'])}.</p>
</body></html>
"""


def write_fix(result: Result, directory, model_obj=None) -> dict:
    """Write ``index.html``, ``fix.json`` and, when a remedy holds, ``remedy.json`` into
    ``directory``.  Returns the paths written."""
    from ..models import remedy_file
    from .pages import check_out_dir, png

    d = check_out_dir(directory)
    obj = result.to_json()
    obj = {**{k: v for k, v in obj.items()}, "meta": obj["meta"]}
    png_url = png(_figure(obj))
    paths = {}
    jp = d / "fix.json"
    jp.write_text(json.dumps(obj, indent=1, allow_nan=True) + "\n")
    paths["json"] = str(jp)
    hp = d / "index.html"
    hp.write_text(_page(obj, png_url), encoding="utf-8")
    paths["html"] = str(hp)
    rp = d / "remedy.json"
    if obj["winner"]:
        r = obj["winner"]
        if model_obj is None:
            model_obj = entry.loaded(obj["meta"]["model_argument"], weights=obj["meta"]["weights"],
                                     seed=obj["meta"]["seed"])[0]
        ev = {"test": obj["test"][r], "split": obj["split"], "data_sha256":
              obj["meta"]["data_sha256"], "rule": obj["meta"]["rule"]}
        remedy_file.write(rp, r, obj["tuning"][r]["params"], model_obj,
                          obj["meta"]["model_argument"], evidence=ev)
        paths["remedy"] = str(rp)
    elif rp.exists():
        os.remove(rp)  # a stale file from an earlier run would claim what this run refutes
    return paths
