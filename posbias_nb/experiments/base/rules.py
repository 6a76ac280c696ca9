"""Declared verdict rules: a claim's threshold, band and direction live in a design, not a chapter.

A study declares its rules inside its design (:class:`posbias_nb.experiments.base.design.Design`,
locked with it); :func:`decide_rule` applies one to an interval (through
:func:`posbias_nb.stats.decide`) and :func:`rule_effect` says how far the interval lies from the
rule's threshold.  These functions are in the verdict code of every study that declares rules
(:data:`posbias_nb.experiments.base.design.VERDICT_CODE`, by their names in ``design``, which
re-exports them).
"""
from __future__ import annotations

from types import MappingProxyType

import numpy as np

from .frozen import _plain

__all__ = ["RULE_KEYS", "given_name", "rule_needs", "resolved_given", "decide_rule", "rule_effect"]


#: The keys of a declared rule (a mapping inside a study's design):
#:
#: ``direction``
#:     ``"greater"``, ``"less"`` or ``"within"`` (as :func:`posbias_nb.stats.decide`), or a
#:     direction the data sets, named in the rule: ``{"sign_of": NAME}`` ("greater" when the
#:     value ``NAME`` the chapter supplies is above 0, else "less") or
#:     ``{"opposite_sign_of": NAME}`` (the reverse).
#: ``threshold``
#:     a number (required for "greater" and "less"), or ``{"given": NAME}``: a threshold the
#:     data sets (e.g. the seed's 1/(H-1)!), supplied by the chapter as ``NAME=value``.
#: ``band``
#:     ``[lo, hi]`` (required for, and only for, "within").
#: ``scale``
#:     optional, ``"log10"``: the claim is about the decimal logarithm of the interval.
#: ``exact``, ``testable``
#:     optional booleans, as :func:`posbias_nb.stats.decide` (defaults False and True).
#: ``says``
#:     optional: the rule in words (hashed with the rest, so its reading is locked too).
RULE_KEYS = ("direction", "threshold", "band", "scale", "exact", "testable", "says")


def given_name(value, kinds):
    if isinstance(value, (dict, MappingProxyType)):
        if len(value) != 1 or next(iter(value)) not in kinds \
                or not isinstance(next(iter(value.values())), str):
            raise ValueError(f"a rule's data-set value must be one of {{{', '.join(kinds)}: NAME}}, "
                             f"got {_plain(value)!r}")
        return next(iter(value.items()))
    return None


def rule_needs(rule) -> tuple:
    """The names of the values the chapter must supply to decide ``rule`` (its ``{"given":
    NAME}`` threshold and ``{"sign_of": NAME}`` direction), sorted; ValueError on a rule with
    unknown keys or a malformed entry."""
    if not isinstance(rule, (dict, MappingProxyType)):
        raise ValueError(f"a rule must be a mapping, got {rule!r}")
    unknown = sorted(set(rule) - set(RULE_KEYS))
    if unknown:
        raise ValueError(f"a rule has unknown keys {unknown}; allowed: {RULE_KEYS}")
    needs = set()
    for key, kinds in (("threshold", ("given",)), ("direction", ("sign_of", "opposite_sign_of"))):
        g = given_name(rule.get(key), kinds)
        if g is not None:
            needs.add(g[1])
    return tuple(sorted(needs))


def resolved_given(rule, given: dict) -> dict:
    """``rule`` with its data-set entries filled from ``given``: the keyword arguments of
    :func:`posbias_nb.stats.decide` and the scale."""
    needs = rule_needs(rule)
    missing = sorted(set(needs) - set(given))
    extra = sorted(set(given) - set(needs))
    if missing or extra:
        raise ValueError(f"the rule needs the value(s) {list(needs)} from the chapter; "
                         + (f"missing {missing}" if missing else f"unexpected {extra}"))
    direction = rule.get("direction", "greater")
    g = given_name(direction, ("sign_of", "opposite_sign_of"))
    if g is not None:
        up = given[g[1]] > 0
        direction = ("greater" if up else "less") if g[0] == "sign_of" else \
            ("less" if up else "greater")
    out = dict(direction=direction)
    if direction in ("greater", "less"):
        if "threshold" not in rule:
            raise ValueError(f"a rule with direction {direction!r} needs a threshold")
        t = rule["threshold"]
        g = given_name(t, ("given",))
        out["threshold"] = given[g[1]] if g is not None else t
    if "band" in rule:
        out["band"] = tuple(rule["band"])
    for k in ("exact", "testable"):
        if k in rule:
            out[k] = rule[k]
    scale = rule.get("scale")
    if scale not in (None, "log10"):
        raise ValueError(f"a rule's scale must be 'log10' or absent, got {scale!r}")
    return out, scale


def decide_rule(rule, interval, **given) -> str:
    """The verdict word of ``interval`` under a declared ``rule`` (:data:`RULE_KEYS`), by
    :func:`posbias_nb.stats.decide`; ``given`` supplies exactly the values the rule names
    (:func:`rule_needs`).  The chapters' claims (:mod:`posbias_nb.experiments.base.claims`) and the
    studies' verdicts (e.g. :func:`posbias_nb.experiments.remedy.lab.decide`) go through it.

    Raises
    ------
    ValueError
        A malformed rule, a value the rule needs and was not given, one it does not name, or
        what :func:`posbias_nb.stats.decide` refuses.

    >>> decide_rule({"direction": "less", "threshold": 1.0}, (0.5, 0.4, 0.6))
    'holds'
    >>> decide_rule({"direction": {"sign_of": "pred"}, "threshold": 0.0}, (0.1, 0.05, 0.2),
    ...             pred=-1.0)
    'fails'
    """
    from ... import stats

    args, scale = resolved_given(rule, given)
    if scale == "log10":
        interval = tuple(np.log10(interval))
    return stats.decide(interval, **args)


def rule_effect(rule, interval, **given) -> dict:
    """The ``effect`` of a verdict row (:func:`posbias_nb.notebook.verdict_table`) decided by
    ``rule``: the interval (on the rule's scale) with the rule's threshold or band, direction,
    and ``exact``/``testable`` where the rule sets them; the verdict table re-decides it."""
    args, scale = resolved_given(rule, given)
    if scale == "log10":
        interval = tuple(np.log10(interval))
    out = dict(interval=interval)
    if "threshold" in args:
        out["threshold"] = args["threshold"]
    out["direction"] = args["direction"]
    if "band" in args:
        out["band"] = args["band"]
    out.update({k: args[k] for k in ("exact", "testable") if k in args})
    return out
