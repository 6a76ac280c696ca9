r"""The chapters' verdict rules, declared and locked: one table, keyed by chapter and claim.

A chapter whose claims belong to no study of its own (the theory chapters, the measurements at
initialization and after training, the retrieval chapter's link to the prior) decides each
claim with :func:`decide` (``claims.decide("measure_init", "u_ptv", interval)``), never with a
threshold of its own: the threshold or band, the direction, and whether the value is exact or
testable at all are the rule :data:`DESIGN` declares for that claim
(:data:`~posbias_nb.experiments.base.design.RULE_KEYS`).  The table is a :class:`~posbias_nb.experiments.base.design.Design`
("claims" in the registry, ``posbias_nb/data/designs.json``), so a threshold that moves without
a dated entry fails the tests and every chapter that reads it, and the code that applies it
(:func:`decide`, :func:`~posbias_nb.experiments.base.design.decide_rule`, ``stats.decide``) is hashed
with it (:data:`~posbias_nb.experiments.base.design.VERDICT_CODE`).  A threshold the data set (the
seed's :math:`1/(H-1)!`) or a direction that follows a prediction's sign is declared as such
(``{"given": NAME}``, ``{"sign_of": NAME}``), and the chapter supplies that value by name.

Studies with a design of their own keep their rules there (``remedies.DESIGN["rules"]``,
``layouts.DESIGN["rules"]``), applied by the same
:func:`~posbias_nb.experiments.base.design.decide_rule`.  ``tests/unit/studies/test_claims.py`` fails on a chapter that calls ``stats.decide`` itself.
"""
from __future__ import annotations

from . import design as _design
from .design import Design

__all__ = ["DESIGN", "rule", "decide", "effect"]


def _gt(t, says):
    return {"direction": "greater", "threshold": t, "says": says}


def _lt(t, says):
    return {"direction": "less", "threshold": t, "says": says}


_ROPE = "the paired gap (floor minus RoPE on/off, Pearson of the logs)"

#: The declared rules, by chapter and claim.  Each value is the one the chapter typed before
#: (moved under the lock on 2026-12-05, unchanged).
DESIGN = Design("claims", {
    "after_training": {
        "init": {"direction": "within", "band": [1.5, 2.5], "scale": "log10",
                 "says": "a peak-to-valley ratio of about 10^2: its decimal logarithm within "
                         "half a decade of 2"},
        "deepen": _gt(10.0, "deepened tenfold: the paired gain pretrained / random above 10"),
        "kept": _gt(1.0, "the U is kept: each end above the middle's median"),
    },
    "cesaro": {
        "last_pointwise": {"direction": "within", "band": [-0.01, 0.01], "exact": True,
                           "says": "the exact error at x = 1 tends to 0 (limit within 0.01)"},
        "last_bin": {"direction": "within", "band": [-0.01, 0.01], "exact": True,
                     "says": "the last bin's relative error (exact / continuum - 1) tends to 0"},
    },
    "infinite_depth": {
        "infinite": _gt(0.99, "a divergent schedule collapses: the exact first-token share "
                              "above 0.99"),
        "totals": {"direction": "within", "band": [3.5, 5.4],
                   "says": "the five models' total shares (mean, smallest, largest) inside the "
                           "paper's 3.6 to 5.3, rounded out"},
        "control": _lt(0.05, "one Poisson curve in the total share: every exact deviation "
                             "below 0.05"),
    },
    "measure_init": {
        "u_ptv": _gt(10.0, "a U: the robust peak-to-valley ratio above 10"),
        "u_arm": _gt(5.0, "a U: each single end at least 5 times the lowest single position"),
        "fit": _gt(0.9, "the row of N^H describes the U: every rank and log correlation above "
                        "0.9"),
        "rope_trace": _gt(0.0, f"RoPE leaves a trace the probes can see: {_ROPE} above 0"),
        "rope_same": {"direction": "within", "band": [-0.01, 0.01],
                      "says": f"identical with and without RoPE: {_ROPE} within 0.01 of 0, the "
                              "seed's correlation 0.99 read as agreement with the floor"},
    },
    "retrieval": {
        "born_first": _gt(1.0, "born with a U: the first token carries more influence than "
                               "the median token of the middle (ratio above 1)"),
        "born_last": _gt(1.0, "born with a U: the last token carries more influence than the "
                              "median token of the middle (ratio above 1)"),
        "born_slope": _gt(1.0, "a primacy slope over the pairs: the first slot over the last "
                               "above 1"),
        "curve": _gt(0.0, "the prior's curve follows the accuracy's: correlation above 0"),
        "within": _gt(0.0, "position and example removed, influence and log p correlate "
                           "above 0"),
        "readout_first": _gt(1.0, "the readout draws more from the first slot than the "
                                  "middle, per token (ratio above 1)"),
    },
    "rollout": {
        "collapse": _gt(0.99, "without residuals: the smallest exact first-token share at "
                              "128 layers above 0.99"),
        "mask": {**_lt(0.0, "the causal mask moves influence to the start: exact drift of "
                            "the mean position below 0"), "exact": True},
        "residual": {**_gt(0.0, "residual connections move it to the end: exact drift above "
                                "0"), "exact": True},
        "alibi": {**_gt(0.0, "ALiBi slopes move it to the end: exact drift above 0"),
                  "exact": True},
    },
})


def rule(chapter: str, claim: str) -> dict:
    """The declared rule of ``claim`` in ``chapter`` (a plain copy), the registry checked
    first (:func:`posbias_nb.experiments.base.design.check`).

    Raises
    ------
    ValueError
        A chapter or claim the table does not declare (named, with those it does), or a
        design or verdict code that moved without its registry entry.
    """
    _design.check(DESIGN)
    if chapter not in DESIGN.spec:
        raise ValueError(f"no claims declared for chapter {chapter!r}; declared: "
                         f"{', '.join(sorted(DESIGN.spec))}")
    rules = DESIGN.spec[chapter]
    if claim not in rules:
        raise ValueError(f"chapter {chapter!r} declares no claim {claim!r}; declared: "
                         f"{', '.join(sorted(rules))}")
    return DESIGN.as_dict()[chapter][claim]


def decide(chapter: str, claim: str, interval, **given) -> str:
    """The verdict word of ``interval`` (``(estimate, low, high)``, or the value of an exact
    claim) under the declared rule of ``claim`` in ``chapter``
    (:func:`posbias_nb.experiments.base.design.decide_rule`); ``given`` supplies the values a
    data-set rule names.  ValueError as :func:`rule` and for a value the rule does not name.

    >>> decide("after_training", "deepen", (12.0, 9.0, 15.0))
    'inconclusive'
    """
    return _design.decide_rule(rule(chapter, claim), interval, **given)


def effect(chapter: str, claim: str, interval, **given) -> dict:
    """The ``effect`` of the verdict row that :func:`decide` grades (its interval with the
    declared threshold or band and direction;
    :func:`posbias_nb.experiments.base.design.rule_effect`), for :func:`posbias_nb.notebook.verdict_table`."""
    return _design.rule_effect(rule(chapter, claim), interval, **given)
