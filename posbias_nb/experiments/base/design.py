r"""Designs locked before their data: one frozen object per study, its hash in a registry.

Every study that decides verdicts declares its design (examples, grids, windows, probes,
thresholds, the families of comparisons) as one :class:`Design`.  Its :attr:`~Design.hash` is
the SHA-256 of its canonical JSON.  The registry, ``posbias_nb/data/designs.json``, holds for
each study the list of its designs, each with the date and the reason of the change; a change
of design is committed, with its entry, before the measurement it governs.  :func:`check`
raises when a study's design is not the registry's latest entry, so a design that moves
without a dated reason fails the tests (``tests/unit/studies/test_design.py``) and every chapter that
reads it.  The chapters print the hash and the history (:func:`history_markdown`), so "fixed
before the data" can be checked from the record: the registry's dates and the git log of this
file against those of the measurements.

Entries recorded after the fact (before this lock existed) carry ``"hash": null`` and say so.

The lock covers the analysis too.  A study names, in :data:`VERDICT_CODE`, the functions and
constants that turn its measurements into verdicts (intervals, p-values, Holm's steps, the
decision rule, its definition tag); :func:`code_hash` hashes their source (parsed, with
docstrings and comments dropped, so that only the code counts), and the registry's latest
entry carries it as ``"code"``: :func:`check` refuses a study whose verdict code changed without
a dated entry, as it refuses a moved design.  Each study's chapter writes a digest of its
verdicts (:func:`write_digest`: the design and code hashes, the verdict words and the estimates
to 3 significant digits) to ``bench/results/digests/``, committed with the chapter, so git
shows every registry entry before the first digest it governs; ``make test`` checks that the
committed digest was made under the current design and code (``tests/check_digests.py``).
"""
from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType

import numpy as np

from ...provenance.code import normalised_code

__all__ = ["Design", "freeze", "registry", "check", "history", "history_markdown",
           "REGISTRY", "VERDICT_CODE", "code_hash", "digest", "verdict_rows", "write_digest",
           "DIGESTS", "RULE_KEYS", "rule_needs", "decide_rule", "rule_effect"]

#: The registry file inside the package.
REGISTRY = "designs.json"


def freeze(value):
    """A deep, read-only copy of ``value``: dicts become read-only mappings, lists and tuples
    tuples.  Only JSON-like values (str, int, finite float, bool, None) are accepted."""
    if isinstance(value, dict):
        for k in value:
            if not isinstance(k, str):
                raise ValueError(f"design keys must be strings, got {k!r}")
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, MappingProxyType):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"design values must be finite, got {value!r}")
        return value
    raise ValueError(f"design values must be JSON-like, got {type(value).__name__}: {value!r}")


def _plain(value):
    if isinstance(value, MappingProxyType):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class Design:
    """The frozen design of one study: ``study`` (its name in the registry) and ``spec`` (a
    JSON-like dict, frozen deeply).  ``design.spec["test"]`` reads it; nothing writes it."""

    study: str
    spec: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self):
        if not isinstance(self.study, str) or not self.study:
            raise ValueError(f"study must be a non-empty string, got {self.study!r}")
        object.__setattr__(self, "spec", freeze(dict(self.spec)))

    def __getitem__(self, key):
        return self.spec[key]

    def to_json(self) -> str:
        """Canonical JSON: sorted keys, no spaces (what is hashed)."""
        return json.dumps(_plain(self.spec), sort_keys=True, separators=(",", ":"))

    @property
    def hash(self) -> str:
        """SHA-256 of :meth:`to_json`, hex."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    def as_dict(self) -> dict:
        """A plain (mutable) copy of the spec."""
        return _plain(self.spec)


_COMMON = ("posbias_nb.stats.decide", "posbias_nb.stats.decide_all",
           "posbias_nb.stats.holm_family", "posbias_nb.stats.interval_pvalue",
           "posbias_nb.stats.mean_interval", "posbias_nb.stats.units_interval",
           "posbias_nb.stats.two_way_mean_interval")
#: The code that applies a declared rule (:func:`decide_rule`), in the verdict code of every
#: study that declares its rules in its design.
_RULES = ("posbias_nb.experiments.base.design.RULE_KEYS", "posbias_nb.experiments.base.design.given_name",
          "posbias_nb.experiments.base.design.rule_needs", "posbias_nb.experiments.base.design.resolved_given",
          "posbias_nb.experiments.base.design.decide_rule",
          "posbias_nb.experiments.base.design.rule_effect")
#: Per study, what decides its verdicts: dotted names of functions, classes or constants.
VERDICT_CODE = {
    "claims": _COMMON + _RULES + ("posbias_nb.experiments.base.claims.rule",
                                  "posbias_nb.experiments.base.claims.decide",
                                  "posbias_nb.experiments.base.claims.effect"),
    "inference": _COMMON + ("posbias_nb.experiments.remedy.inference.decisions",
                            "posbias_nb.experiments.remedy.inference.control_moved"),
    "layouts": _COMMON + _RULES + ("posbias_nb.experiments.born.born_layouts.decisions",
                          "posbias_nb.experiments.born.born_layouts.claim_rule",
                          "posbias_nb.experiments.born.born_layouts.decide",
                          "posbias_nb.experiments.born.born_layouts.effect",
                          "posbias_nb.experiments.born.born_layouts.ablation_sides",
                          "posbias_nb.experiments.born.born_layouts.agreements",
                          "posbias_nb.experiments.born.born_layouts.agreement_of",
                          "posbias_nb.experiments.born.born_layouts.init_seeds",
                          "posbias_nb.experiments.born.born_layouts.rows",
                          "posbias_nb.experiments.born.born_layouts.middle_shares",
                          "posbias_nb.experiments.born.born_layouts.DEFINITION",
                          "posbias_nb.models.attention_layout.model_layout",
                          "posbias_nb.metrics.fit_layout_alpha", "posbias_nb.metrics.log_pearson",
                          "posbias_nb.metrics.spearman", "posbias_nb.metrics.middle_share"),
    "remedies": _COMMON + _RULES + ("posbias_nb.experiments.remedy.lab.claim_rule",
                           "posbias_nb.experiments.remedy.lab.decide",
                           "posbias_nb.experiments.remedy.lab.effect",
                           "posbias_nb.experiments.remedy.lab.verdict_rows",
                           "posbias_nb.experiments.remedy.lab.REMEDY_NAMES",
                           "posbias_nb.experiments.remedy.lab.units",
                           "posbias_nb.experiments.remedy.lab.contrast",
                           "posbias_nb.experiments.remedy.lab.middle_vs_edges",
                           "posbias_nb.experiments.remedy.lab.arm_difference"),
    "report": _COMMON + ("posbias_nb.experiments.report.claims.decide_claims",
                         "posbias_nb.experiments.report.statistics.two_way",
                         "posbias_nb.experiments.report.statistics.window_stats",
                         "posbias_nb.experiments.report.statistics.safe_ratio",
                         "posbias_nb.experiments.report.words.unformed_reason",
                         "posbias_nb.experiments.report.config.DEFINITION",
                         "posbias_nb.stats.two_way_mean_interval"),
    "fix": _COMMON + ("posbias_nb.experiments.remedy.fix.split",
                      "posbias_nb.experiments.remedy.fix.fix_positions",
                      "posbias_nb.experiments.remedy.fix.slot_groups",
                      "posbias_nb.experiments.remedy.fix.tune_settings",
                      "posbias_nb.experiments.remedy.fix.evaluate",
                      "posbias_nb.experiments.remedy.fix.fix",
                      "posbias_nb.experiments.remedy.fix.DEFINITION",
                      "posbias_nb.experiments.remedy.fix.CAL_DEFINITION",
                      "posbias_nb.experiments.remedy.fix.PROMPT_ONLY",
                      "posbias_nb.experiments.remedy.fix.pick",
                      "posbias_nb.experiments.remedy.fix.select_one",
                      "posbias_nb.experiments.remedy.fix.verdict_words",
                      "posbias_nb.experiments.remedy.fix.coinciding",
                      "posbias_nb.experiments.remedy.fix.arm_name",
                      "posbias_nb.experiments.remedy.fix.MIN_TEST",
                      "posbias_nb.experiments.remedy.fix.QUICK_DOCUMENTS",
                      "posbias_nb.experiments.remedy.fix.DEFAULT_RULE",
                      "posbias_nb.stats.one_sided_bounds",
                      "posbias_nb.stats.detectable_effect",
                      "posbias_nb.stats.units_needed", "posbias_nb.stats.t_power_d",
                      "posbias_nb.stats.paired_test",
                      "posbias_nb.experiments.remedy.fix.prompt_params",
                      "posbias_nb.experiments.prompt.placement.grid",
                      "posbias_nb.experiments.prompt.placement.rankers",
                      "posbias_nb.experiments.prompt.placement.slot_qualities",
                      "posbias_nb.experiments.prompt.placement.slot_curve",
                      "posbias_nb.experiments.prompt.placement.born_prior",
                      "posbias_nb.experiments.prompt.placement.measured_prior",
                      "posbias_nb.experiments.prompt.placement.BORN_ALPHA",
                      "posbias_nb.experiments.prompt.placement.MEASURED_PRIOR",
                      "posbias_nb.experiments.prompt.placement.ranker_top1",
                      "posbias_nb.stats.paired_proportion_interval",
                      "posbias_nb.stats.proportion_interval"),
    "fix-fast": _COMMON + ("posbias_nb.experiments.remedy.fix_fast.landing_gains",
                           "posbias_nb.experiments.remedy.fix_fast.landing_slots",
                           "posbias_nb.experiments.remedy.fix_fast.quality_orders",
                           "posbias_nb.experiments.remedy.fix_fast.tune_settings",
                           "posbias_nb.experiments.remedy.fix_fast.judge_test_part",
                           "posbias_nb.experiments.remedy.fix_fast.judged_claims",
                           "posbias_nb.experiments.remedy.fix_fast.fix",
                           "posbias_nb.experiments.remedy.fix_fast.RANKED",
                           "posbias_nb.experiments.remedy.fix_fast.DEFINITION",
                           "posbias_nb.experiments.remedy.fix_fast.as_interval",
                           "posbias_nb.experiments.remedy.fix_fast.gold_slot_groups",
                           "posbias_nb.experiments.remedy.fix_fast.by_slot",
                           "posbias_nb.experiments.remedy.fix_fast.remedy_params",
                           "posbias_nb.experiments.remedy.fix.split",
                           "posbias_nb.experiments.remedy.fix.fix_positions",
                           "posbias_nb.experiments.remedy.fix.pick",
                           "posbias_nb.experiments.remedy.fix.select_one",
                           "posbias_nb.experiments.remedy.fix.verdict_words",
                           "posbias_nb.experiments.remedy.fix.MIN_TEST",
                           "posbias_nb.experiments.prompt.placement.grid",
                           "posbias_nb.experiments.prompt.placement.rankers",
                           "posbias_nb.experiments.prompt.placement.rank",
                           "posbias_nb.experiments.prompt.placement.place",
                           "posbias_nb.experiments.prompt.placement.slot_qualities",
                           "posbias_nb.stats.one_sided_bounds",
                           "posbias_nb.stats.detectable_effect",
                           "posbias_nb.stats.units_needed", "posbias_nb.stats.t_power_d",
                           "posbias_nb.stats.paired_test",
                           "posbias_nb.stats.paired_proportion_interval",
                           "posbias_nb.stats.proportion_interval"),
    "realqa": _COMMON + ("posbias_nb.experiments.prompt.realqa.decisions",
                         "posbias_nb.experiments.prompt.realqa.first_middle_last",
                         "posbias_nb.experiments.prompt.realqa.matrices",
                         "posbias_nb.experiments.prompt.realqa.link",
                         "posbias_nb.experiments.prompt.realqa.prior",
                         "posbias_nb.experiments.prompt.realqa.jacobian_prior",
                         "posbias_nb.experiments.prompt.realqa.prepared",
                         "posbias_nb.experiments.prompt.realqa.link_family",
                         "posbias_nb.experiments.prompt.realqa.JACOBIAN_DEFINITION",
                         "posbias_nb.experiments.prompt.realqa.gold_spans",
                         "posbias_nb.experiments.prompt.realqa.power_rule",
                         "posbias_nb.experiments.prompt.realqa.power_n",
                         "posbias_nb.stats.holm_intervals",
                         "posbias_nb.experiments.prompt.retrieval.link_stats",
                         "posbias_nb.tasks.qa.best_subspan_em",
                         "posbias_nb.tasks.qa.classify_output",
                         "posbias_nb.experiments.prompt.user_task.DEFINITION"),
    "scale": _COMMON + ("posbias_nb.experiments.born.scale.decisions",
                        "posbias_nb.experiments.born.scale.window_stats",
                        "posbias_nb.experiments.born.scale.row",
                        "posbias_nb.experiments.born.scale.ladder",
                        "posbias_nb.experiments.born.scale.STATS",
                        "posbias_nb.experiments.born.scale.DEFINITION",
                        "posbias_nb.models.attention_layout.model_layout",
                        "posbias_nb.models.configs.width_overrides",
                        "posbias_nb.metrics.fit_layout_alpha", "posbias_nb.metrics.spearman",
                        "posbias_nb.metrics.regions"),
    "born-scales": _COMMON + ("posbias_nb.experiments.born.born_scales.decisions",
                              "posbias_nb.experiments.born.born_scales.part_claims",
                              "posbias_nb.experiments.born.born_scales.detectable",
                              "posbias_nb.experiments.born.born_scales.window_stats",
                              "posbias_nb.experiments.born.born_scales.cell",
                              "posbias_nb.experiments.born.born_scales.cell_stats",
                              "posbias_nb.experiments.born.born_scales.cell_std",
                              "posbias_nb.experiments.born.born_scales.factorial_cells",
                              "posbias_nb.experiments.born.born_scales.full_std",
                              "posbias_nb.experiments.born.born_scales.matched_std",
                              "posbias_nb.experiments.born.born_scales.prediction_cell",
                              "posbias_nb.experiments.born.born_scales.STATS",
                              "posbias_nb.experiments.born.born_scales.DEFINITION",
                              "posbias_nb.experiments.born.scale.window_stats",
                              "posbias_nb.experiments.born.scale.row",
                              "posbias_nb.models.init_scales.weight_groups",
                              "posbias_nb.models.init_scales.apply_stds",
                              "posbias_nb.models.configs.width_overrides",
                              "posbias_nb.stats.detectable_effect",
                              "posbias_nb.stats.t_power_d",
                              "posbias_nb.metrics.fit_layout_alpha", "posbias_nb.metrics.spearman",
                              "posbias_nb.metrics.regions"),
    "pipeline": _COMMON + ("posbias_nb.experiments.remedy.pipeline.decisions",
                           "posbias_nb.experiments.remedy.pipeline.gains",
                           "posbias_nb.experiments.remedy.pipeline.mcnemar_p",
                           "posbias_nb.experiments.remedy.pipeline.ARMS",
                           "posbias_nb.experiments.remedy.pipeline.SHUFFLES",
                           "posbias_nb.experiments.remedy.pipeline.GENERATED",
                           "posbias_nb.experiments.remedy.pipeline.questions",
                           "posbias_nb.experiments.remedy.pipeline.used_examples",
                           "posbias_nb.experiments.remedy.pipeline.placement_orders",
                           "posbias_nb.experiments.remedy.pipeline.DEFINITION",
                           "posbias_nb.experiments.remedy.pipeline.recall",
                           "posbias_nb.experiments.remedy.confirm.qualities",
                           "posbias_nb.tasks.corpus.oracle_corpus",
                           "posbias_nb.tasks.corpus.BM25Index",
                           "posbias_nb.tasks.corpus.top_k",
                           "posbias_nb.tasks.corpus.gold_ranks",
                           "posbias_nb.measure.dense.embed",
                           "posbias_nb.tasks.reorder.long_context_reorder",
                           "posbias_nb.tasks.reorder.quality_order",
                           "posbias_nb.stats.one_sided_bounds",
                           "posbias_nb.stats.detectable_effect",
                           "posbias_nb.stats.units_needed", "posbias_nb.stats.t_power_d",
                           "posbias_nb.stats.paired_test",
                           "posbias_nb.stats.proportion_interval",
                           "posbias_nb.stats.paired_proportion_interval",
                           "posbias_nb.tasks.qa.best_subspan_em"),
    "confirm": _COMMON + ("posbias_nb.experiments.remedy.confirm.decisions",
                          "posbias_nb.experiments.remedy.confirm.gains",
                          "posbias_nb.experiments.remedy.confirm.ARMS",
                          "posbias_nb.experiments.remedy.confirm.MARGIN",
                          "posbias_nb.experiments.remedy.confirm.questions",
                          "posbias_nb.experiments.remedy.confirm.used_examples",
                          "posbias_nb.experiments.remedy.confirm.placement_orders",
                          "posbias_nb.experiments.remedy.confirm.ceiling_order",
                          "posbias_nb.experiments.remedy.confirm.GENERATED",
                          "posbias_nb.experiments.remedy.confirm.DEFINITION",
                          "posbias_nb.experiments.remedy.confirm.qualities",
                          "posbias_nb.experiments.prompt.placement.place",
                          "posbias_nb.experiments.prompt.placement.rank",
                          "posbias_nb.experiments.prompt.placement.slot_qualities",
                          "posbias_nb.stats.one_sided_bounds",
                          "posbias_nb.stats.detectable_effect",
                          "posbias_nb.stats.units_needed", "posbias_nb.stats.t_power_d",
                          "posbias_nb.stats.paired_test",
                          "posbias_nb.stats.proportion_interval",
                          "posbias_nb.stats.unit_proportion_interval",
                          "posbias_nb.tasks.qa.best_subspan_em"),
    "retrieval": _COMMON + ("posbias_nb.experiments.prompt.retrieval.region_pairs",
                            "posbias_nb.experiments.prompt.retrieval.contrast_family",
                            "posbias_nb.experiments.prompt.retrieval.paired_contrast",
                            "posbias_nb.experiments.prompt.retrieval.ratio_interval",
                            "posbias_nb.experiments.prompt.retrieval.link_stats",
                            "posbias_nb.stats.paired_proportion_interval",
                            "posbias_nb.stats.paired_test"),
}


def _resolve(name: str):
    mod, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(mod), attr)


def code_hash(study: str, names=None) -> str:
    """SHA-256 of the verdict code of ``study`` (:data:`VERDICT_CODE`, or ``names``): each
    name with what counts of it (:func:`posbias_nb.provenance.code.normalised_code`, the one
    code hasher, which also digests the cache's namespaces), in order.  A docstring or comment
    does not move it; a changed line of code does."""
    names = VERDICT_CODE[study] if names is None else names
    h = hashlib.sha256()
    for n in names:
        h.update(n.encode() + b"\0" + normalised_code(_resolve(n)).encode() + b"\0")
    return h.hexdigest()


def registry(path=None) -> dict:
    """The registry: ``{study: [{"hash", "date", "reason"}, ...]}``, oldest first."""
    if path is None:
        text = (resources.files("posbias_nb") / "data" / REGISTRY).read_text(encoding="utf-8")
    else:
        with open(path) as f:
            text = f.read()
    reg = json.loads(text)
    if not isinstance(reg, dict):
        raise ValueError("the design registry must be an object of studies")
    for study, entries in reg.items():
        if not isinstance(entries, list) or not entries:
            raise ValueError(f"registry: study {study!r} has no entries")
        for e in entries:
            if not {"hash", "date", "reason"} <= set(e):
                raise ValueError(f"registry: an entry of {study!r} lacks hash, date or reason")
    return reg


def history(study: str, path=None) -> list:
    """The registry's entries of ``study``, oldest first (ValueError if it has none)."""
    reg = registry(path)
    if study not in reg:
        raise ValueError(f"study {study!r} is not in the design registry")
    return list(reg[study])


def check(design: Design, path=None) -> dict:
    """The registry's latest entry for ``design.study``; ValueError unless its hash is
    ``design.hash`` (the design changed without a dated entry, or the entry was not updated)."""
    entries = history(design.study, path)
    last = entries[-1]
    if last["hash"] != design.hash:
        raise ValueError(
            f"the design of study {design.study!r} has hash {design.hash[:12]}, but the "
            f"registry's latest entry ({last['date']}) records "
            f"{str(last['hash'])[:12]}: add an entry with the date and the reason of the change "
            f"to posbias_nb/data/{REGISTRY}, and commit it before measuring")
    if design.study in VERDICT_CODE:
        code = code_hash(design.study)
        if last.get("code") != code:
            raise ValueError(
                f"the code that decides the verdicts of study {design.study!r} has hash "
                f"{code[:12]}, but the registry's latest entry ({last['date']}) records "
                f"{str(last.get('code'))[:12]}: add an entry with the date and the reason of "
                f"the change to posbias_nb/data/{REGISTRY}, and commit it before measuring")
    return last


def history_markdown(design: Design, path=None) -> str:
    """The study's design history as a Markdown table (date, design hash, verdict-code hash,
    reason), its current hashes checked first (:func:`check`)."""
    check(design, path)
    rows = ["| date | design hash | verdict code | change |", "|---|---|---|---|"]
    for e in history(design.study, path):
        h = f"`{e['hash'][:12]}`" if e["hash"] else "(not recorded)"
        c = f"`{e['code'][:12]}`" if e.get("code") else "(not recorded)"
        rows.append(f"| {e['date']} | {h} | {c} | {_reason_markdown(e['reason'])} |")
    return "\n".join(rows)


#: What a registry reason writes as code: a command option (``--quick``), a dotted name
#: (``stats.decide``, ``realqa.jacobian_prior``) or a name with an underscore
#: (``best_subspan_em``), each set as a code span so that a page's smart quotes do not turn
#: ``--`` into a dash and Markdown does not read ``_`` as emphasis.
_CODE_TOKEN = re.compile(r"(?<![\w`/.-])(--[a-z][\w-]*|[A-Za-z_]\w+(?:\.[A-Za-z_]\w+)+(?:\(\))?"
                         r"|[A-Za-z]\w*_\w+)")


def _reason_markdown(reason: str) -> str:
    """A registry reason as the text of one Markdown table cell: code-like tokens as code spans
    (:data:`_CODE_TOKEN`), a ``|`` escaped, line breaks as spaces.

    >>> _reason_markdown("stats.decide and best_subspan_em at --quick; |rho| > 0.5")
    '`stats.decide` and `best_subspan_em` at `--quick`; \\\\|rho\\\\| > 0.5'
    """
    parts = re.split(r"(`[^`]*`)", str(reason).replace("\n", " "))
    out = [p if p.startswith("`") and p.endswith("`") and len(p) > 1
           else _CODE_TOKEN.sub(r"`\1`", p) for p in parts]
    return "".join(out).replace("|", "\\|")


# --------------------------------------------------------------------------------------------
# Declared verdict rules: a claim's threshold, band and direction live in a design, not a chapter

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


#: Where the chapters write their digests (``$POSBIAS_DIGEST_DIR`` overrides).
DIGESTS = "bench/results/digests"


def _sig(x: float) -> float:
    return float(f"{float(x):.3g}") if math.isfinite(float(x)) else None


def digest(design: Design, verdicts: dict) -> dict:
    """The digest of a study's verdicts: ``verdicts`` maps a claim's key to ``(word,
    estimate)`` (estimate a number or None); the result holds the study, the design and code
    hashes, and each claim's word and estimate to 3 significant digits."""
    return {"study": design.study, "design": design.hash, "code": code_hash(design.study),
            "verdicts": {str(k): {"verdict": str(w),
                                  "estimate": None if e is None else _sig(e)}
                         for k, (w, e) in sorted(verdicts.items())}}


def verdict_rows(rows) -> dict:
    """``{key: (word, estimate)}`` of a chapter's verdict-table rows (what
    :func:`posbias_nb.notebook.verdict_table` renders): the row's decision word (or its verdict
    where it has none) and its first ``values`` entry, the effect's estimate, or None."""
    from ... import notebook

    out = {}
    for r in rows:
        word = notebook.decision(r)[0] or r["verdict"]
        vals = r.get("values") or {}
        est = next(iter(vals.values()), None) if vals else None
        if est is None and r.get("effect") and r["effect"].get("testable", True):
            est = r["effect"]["interval"][0]
        out[r["key"]] = (word, est)
    return out


#: The studies that cache no measurement of their own, and why (every other study's module is a
#: code root of the namespaces it caches under, ``posbias_nb.provenance.code.NAMESPACE_CODE``;
#: ``tests/package/test_study_contract.py`` checks both).
NO_NAMESPACE = MappingProxyType({
    "claims": "a table of rules that other studies' chapters apply to their own measurements; "
              "it measures nothing"})


#: The studies that write no digest, and why (``make test`` and the unit suite skip them, and
#: fail on any other study without one).
NO_DIGEST = MappingProxyType({
    "claims": "a table of rules read by seven chapters, each of which prints its own verdicts; "
              "no one chapter runs the whole table",
    "fix-fast": "a user's command (posbias fix --fast), run by no chapter: its verdicts are the "
                "user's data's; bench/bench_fix.py times it against its floor"})


def digest_mismatch(study: str, made: dict, now: tuple) -> str | None:
    """None when the digest ``made`` (its ``"design"`` and ``"code"`` hashes) was made under
    ``now`` (``(design hash, verdict-code hash)``), else the sentence that says what differs.
    The one comparison of ``tests/check_digests.py`` (a digest just written against the
    committed one) and of the unit suite (the committed one against today's hashes).

    >>> digest_mismatch("fix", {"design": "a" * 64, "code": "b" * 64}, ("a" * 64, "b" * 64))
    >>> digest_mismatch("fix", {"design": "a" * 64, "code": "b" * 64}, ("a" * 64, "c" * 64))[:44]
    'fix: digest made under design aaaaaaaaaaaa /'
    """
    if (made["design"], made["code"]) == tuple(now):
        return None
    return (f"{study}: digest made under design {made['design'][:12]} / code "
            f"{made['code'][:12]}, against {now[0][:12]} / {now[1][:12]}: commit the registry "
            f"entry, re-run its chapter and commit its digest")


def write_digest(design: Design, verdicts: dict, folder=None):
    """Write :func:`digest` to ``folder`` (default ``$POSBIAS_DIGEST_DIR`` or the repository's
    ``bench/results/digests``, found beside the package) as ``{study}.json``; returns the path,
    or None where no such folder exists (an installed package, no repository)."""
    from pathlib import Path

    check(design)
    if folder is None:
        folder = os.environ.get("POSBIAS_DIGEST_DIR")
    if folder is None:
        root = Path(__file__).resolve().parents[3]
        if not (root / "bench" / "results").is_dir():
            return None
        folder = root / DIGESTS
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{design.study}.json"
    path.write_text(json.dumps(digest(design, verdicts), indent=1, sort_keys=True) + "\n")
    return path
