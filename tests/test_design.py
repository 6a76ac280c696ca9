"""The design lock: every study's frozen design is the registry's latest entry, and a design
that changes without a dated entry is refused."""
import json
from types import MappingProxyType

import pytest

from posbias_nb.experiments import design
from posbias_nb.experiments.design import Design, check, history, registry

STUDIES = {}


def _studies():
    from posbias_nb.experiments import inference, layouts, remedies, report, retrieval
    return {"inference": inference.DESIGN, "retrieval": retrieval.DESIGN,
            "remedies": remedies.DESIGN, "report": report.DESIGN, "layouts": layouts.DESIGN}


@pytest.mark.parametrize("study", ["inference", "retrieval", "remedies", "report", "layouts"])
def test_every_design_is_the_registrys_latest(study):
    d = _studies()[study]
    assert d.study == study
    last = check(d)
    assert last["hash"] == d.hash and len(d.hash) == 64
    dates = [e["date"] for e in history(study)]
    assert dates == sorted(dates)
    assert all(len(e["reason"]) > 40 for e in history(study))  # a reason, not a word


def test_every_registered_study_has_its_design():
    assert set(registry()) == set(_studies())


def test_a_changed_design_without_an_entry_fails(tmp_path):
    d = _studies()["inference"]
    spec = d.as_dict()
    spec["test"] = spec["test"][2:]  # two test examples fewer
    moved = Design("inference", spec)
    assert moved.hash != d.hash
    with pytest.raises(ValueError, match="add an entry"):
        check(moved)
    # with its dated entry it passes
    reg = registry()
    reg["inference"].append({"hash": moved.hash, "date": "2026-12-02", "reason": "a test"})
    p = tmp_path / "designs.json"
    p.write_text(json.dumps(reg))
    assert check(moved, p)["date"] == "2026-12-02"
    with pytest.raises(ValueError):
        check(d, p)  # and the old design is no longer the latest


def test_the_design_is_frozen_and_hashed_canonically():
    a = Design("x", {"b": [1, 2], "a": {"c": 0.5}})
    b = Design("x", {"a": {"c": 0.5}, "b": (1, 2)})
    assert a.hash == b.hash  # key order and list/tuple do not matter
    assert isinstance(a.spec, MappingProxyType)
    with pytest.raises(TypeError):
        a.spec["b"] = 3
    with pytest.raises(TypeError):
        a.spec["a"]["c"] = 1.0
    assert Design("x", {"b": [2, 1], "a": {"c": 0.5}}).hash != a.hash  # order of a list does
    for bad in ({"a": float("nan")}, {"a": object()}, {1: 2}):
        with pytest.raises(ValueError):
            Design("x", bad)


def test_history_markdown_lists_every_entry():
    d = _studies()["inference"]
    md = design.history_markdown(d)
    assert md.count("\n") == len(history("inference")) + 1
    assert d.hash[:12] in md and "(not recorded)" in md
