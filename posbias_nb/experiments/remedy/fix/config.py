"""The configuration of ``posbias fix``: its design (locked before its data), the remedies and
their grids, the choice rules, the sizes of a full and a quick run, the definition versions
of its cache entries.
"""
from __future__ import annotations

from .... import remedy_table
from ....tasks import qa
from ...prompt import placement
from ...base.prompts import FIX_DEFAULTS as DEFAULTS
from ...base.prompts import FIX_QUICK as QUICK
from ...base.prompts import QUICK_DOCUMENTS
from ...base.design import Design

__all__ = ["NETWORK_REMEDIES", "REMEDIES", "RULES", "DEFAULT_RULE", "QUICK_DOCUMENTS", "MIN_TEST", "CAL_VARIANTS", "GRID", "DEFAULTS", "QUICK", "DESIGN", "select_remedies"]


DEFINITION = "fix-v1"  # bump when a definition below changes the numbers


CAL_DEFINITION = "fix-calibration-v1"  # the same for the attention calibration's entries


#: The remedies inside the network, each by its paper's own method (chapter *Fixing it at
#: inference time*): the remedy table's papers' methods that a remedy file can carry.
NETWORK_REMEDIES = tuple(n for n, r in remedy_table.TABLE.items() if r["kind"] == "network"
                         and not r["ours"] and r["file"] is not None)


#: Every remedy searched, those inside the network first, then those in the prompt
#: (:mod:`posbias_nb.experiments.prompt.placement`, the third design).
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


#: The smallest test part ``posbias fix`` runs without ``--force``.  It is the fewest
#: questions whose one-sided t test at 5% detects, with 80% power, a gain of one standard
#: deviation of the per-question gain (:func:`posbias_nb.stats.units_needed`).
MIN_TEST = 8  # = stats.units_needed(1.0, 1.0), a literal so that importing fix loads no scipy.stats (tests/unit/studies/test_fix_rules.py checks it)


#: The attention calibration's readings (dummy, normaliser) searched by the fourth design (issue
#: 46): the paper's first, then ours, each choice alone and both together.
CAL_VARIANTS = (("paper", "per-head"), ("length-matched", "per-head"), ("paper", "shared"),
                ("length-matched", "shared"))


#: The remedies scored from the prompts alone (the first design's), cached together.
PROMPT_ONLY = ("hidden-scaling", "ms-poe")


#: The grids searched on the tuning part: each remedy's own (the remedy table's ``grid``; hidden
#: scaling: the scales of Yu et al.'s configurations, the channel found by their search), then
#: what ``posbias fix`` searches beyond it: Ms-PoE's published ratio range (Zhang et al.'s code
#: ships one, 1.2 to 1.8) and two of ours beside it, one narrower and lower, one wider and
#: higher; the calibration's paper's reading at the paper's t = 5e-5 and one and two decades
#: above it, then each of ours (CAL_VARIANTS, the fourth design) at each of them.
GRID = {n: tuple(dict(s) for s in remedy_table.TABLE[n]["grid"]) + {
    "ms-poe": ({"lo": 1.0, "hi": 1.5}, {"lo": 1.5, "hi": 2.5}),
    "attention-calibration": tuple(
        dict(s, dummy=d, normaliser=v) for d, v in CAL_VARIANTS[1:]
        for s in remedy_table.TABLE["attention-calibration"]["grid"])}.get(n, ())
    for n in NETWORK_REMEDIES}


#: The settings of the paper's reading (its one dummy document, eq. 5 normalised per head): the
#: first of the calibration's grid, the only ones the first design's ``middle`` rule searches.
_CAL_PAPER = len(remedy_table.TABLE["attention-calibration"]["grid"])


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
