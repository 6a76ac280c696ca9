r"""Designs locked before their data: one frozen object per study, its hash in a registry.

Every study that decides verdicts declares its design (examples, grids, windows, probes,
thresholds, the families of comparisons) as one :class:`Design`.  Its :attr:`~Design.hash` is
the SHA-256 of its canonical JSON.  The registry, ``posbias_nb/data/designs.json``, holds for
each study the list of its designs, each with the date and the reason of the change; a change
of design is committed, with its entry, before the measurement it governs.  :func:`check`
raises when a study's design is not the registry's latest entry, so a design that moves
without a dated reason fails the tests (``tests/unit/studies/test_design.py``) and every chapter that
reads it.  The chapters print the hash and the history
(:func:`~posbias_nb.experiments.base.history.history_markdown`), so "fixed before the data" can be
checked from the record: the registry's dates and the git log of this file against those of the
measurements.

Entries recorded after the fact (before this lock existed) carry ``"hash": null`` and say so.

The lock covers the analysis too.  A study names, in :data:`VERDICT_CODE`, the functions and
constants that turn its measurements into verdicts (intervals, p-values, Holm's steps, the
decision rule, its definition tag); :func:`code_hash` hashes their source (parsed, with
docstrings and comments dropped, so that only the code counts), and the registry's latest
entry carries it as ``"code"``: :func:`check` refuses a study whose verdict code changed without
a dated entry, as it refuses a moved design.  Each study's chapter writes a digest of its
verdicts (:func:`~posbias_nb.experiments.base.digests.write_digest`: the design and code hashes,
the verdict words and the estimates to 3 significant digits) to ``bench/results/digests/``,
committed with the chapter, so git
shows every registry entry before the first digest it governs; ``make test`` checks that the
committed digest was made under the current design and code (``tests/check_digests.py``).
"""
from __future__ import annotations

import hashlib
import importlib
import json
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType

from ...provenance.code import normalised_code
from .frozen import _plain, freeze

__all__ = ["Design", "freeze", "registry", "check", "history", "REGISTRY", "VERDICT_CODE",
           "code_hash", "NO_NAMESPACE", "RULE_KEYS", "rule_needs", "decide_rule", "rule_effect"]

#: The registry file inside the package.
REGISTRY = "designs.json"






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


#: The studies that cache no measurement of their own, and why (every other study's module is a
#: code root of the namespaces it caches under, ``posbias_nb.provenance.code.NAMESPACE_CODE``;
#: ``tests/package/test_study_contract.py`` checks both).
NO_NAMESPACE = MappingProxyType({
    "claims": "a table of rules that other studies' chapters apply to their own measurements; "
              "it measures nothing"})


# The verdict rules live in a module of their own (one job each, issue 65); they are read here
# too, by the dotted names of VERDICT_CODE and by the studies.  The verdict digests
# (:mod:`.digests`) and the history in words (:mod:`.history`) read this module; nothing here
# reads them.
from .rules import (RULE_KEYS, decide_rule, given_name, resolved_given,  # noqa: E402,F401
                    rule_effect, rule_needs)
