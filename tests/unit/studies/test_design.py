"""The design lock: every study's frozen design is the registry's latest entry, and a design
that changes without a dated entry is refused."""
import json
from types import MappingProxyType

import pytest

from posbias_nb.experiments.base import design
from posbias_nb.experiments.base import digests as dg
from posbias_nb.experiments.base.history import history_markdown
from posbias_nb.experiments.base.design import Design, check, history, registry

STUDIES = {}


def _studies():
    from posbias_nb.experiments.born import born_layouts, born_scales
    from posbias_nb.experiments.base import claims
    from posbias_nb.experiments.remedy import confirm, fix
    from posbias_nb.experiments import report
    from posbias_nb.experiments.born import scale
    from posbias_nb.experiments.prompt import realqa, retrieval
    from posbias_nb.experiments.remedy import fix_fast, inference, lab as training, pipeline
    return {"claims": claims.DESIGN,
            "inference": inference.DESIGN, "retrieval": retrieval.DESIGN,
            "remedies": training.DESIGN, "report": report.DESIGN, "layouts": born_layouts.DESIGN,
            "realqa": realqa.DESIGN, "fix": fix.DESIGN, "scale": scale.DESIGN,
            "confirm": confirm.DESIGN, "born-scales": born_scales.DESIGN,
            "pipeline": pipeline.DESIGN, "fix-fast": fix_fast.DESIGN}


@pytest.mark.parametrize("study", ["inference", "retrieval", "remedies", "report", "layouts",
                                   "realqa", "fix", "scale", "confirm", "claims",
                                   "born-scales", "pipeline", "fix-fast"])
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
    reg["inference"].append({"hash": moved.hash, "date": "2026-12-02", "reason": "a test",
                             "code": design.code_hash("inference")})
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
    md = history_markdown(d)
    assert md.count("\n") == len(history("inference")) + 1
    assert d.hash[:12] in md and "(not recorded)" in md


# --------------------------------------------------------------------------------------------
# The lock covers the verdict code (issue 34, item 12)

def _f(x):
    """A docstring."""
    return x + 1  # a comment


def _f_doc(x):
    """Another docstring, and other comments: the same code."""
    # here
    return x + 1


def _f_moved(x):
    """A docstring."""
    return x + 2


def test_code_hash_moves_with_the_code_not_its_docstrings():
    # the text that is hashed (the one code hasher, shared with the cache's namespaces): equal
    # for docstring and comment changes, not for a code change
    from posbias_nb.provenance.code import normalised_code, normalised_source

    assert normalised_code(_f).replace("_f", "") == normalised_code(_f_doc).replace(
        "_f_doc", "")
    assert normalised_code(_f).replace("_f", "") != normalised_code(_f_moved).replace(
        "_f_moved", "")
    # a function's text is its source by the rule that digests a namespace's modules
    import inspect

    assert normalised_code(_f) == normalised_source(inspect.getsource(_f))
    assert normalised_code(design.VERDICT_CODE) == repr(design.VERDICT_CODE)  # a constant


@pytest.mark.parametrize("study", ["inference", "retrieval", "remedies", "report", "layouts",
                                   "realqa", "fix", "scale", "confirm", "claims",
                                   "born-scales", "pipeline", "fix-fast"])
def test_every_study_registers_its_verdict_code(study):
    last = check(_studies()[study])
    assert last["code"] == design.code_hash(study)


def test_a_changed_verdict_code_without_an_entry_fails(tmp_path, monkeypatch):
    d = _studies()["report"]
    reg = registry()
    reg["report"][-1] = dict(reg["report"][-1], code="0" * 64)  # recorded under other code
    p = tmp_path / "designs.json"
    p.write_text(json.dumps(reg))
    with pytest.raises(ValueError, match="code that decides the verdicts"):
        check(d, p)
    # and a study whose verdict code names a moved function fails against the real registry
    monkeypatch.setitem(design.VERDICT_CODE, "report",
                        design.VERDICT_CODE["report"] + ("posbias_nb.stats.count_decide",))
    with pytest.raises(ValueError, match="code that decides the verdicts"):
        check(d)


def test_digest_of_verdict_rows(tmp_path):
    d = _studies()["layouts"]
    rows = [dict(key="a", claim="c", paper="p", measured="m", verdict="holds; fine",
                 values={"est": 0.123456}),
            dict(key="b", claim="c", paper="p", measured="m", verdict="not testable")]
    v = dg.verdict_rows(rows)
    assert v == {"a": ("holds", 0.123456), "b": ("not testable", None)}
    path = dg.write_digest(d, v, tmp_path)
    got = json.loads(path.read_text())
    assert got["design"] == d.hash and got["code"] == design.code_hash("layouts")
    assert got["verdicts"]["a"] == {"verdict": "holds", "estimate": 0.123}



def _stale(study, path):
    """None when the digest at ``path`` was made under today's design and verdict code of
    ``study``, else what differs (:func:`posbias_nb.experiments.base.digests.digest_mismatch`)."""
    return dg.digest_mismatch(study, json.loads(path.read_text()),
                                  (_studies()[study].hash, design.code_hash(study)))


@pytest.mark.parametrize("study", sorted(design.VERDICT_CODE))
def test_committed_digest_is_made_under_todays_design_and_code(study):
    """What ``tests/check_digests.py`` checks after every chapter ran, read here from the
    working tree: a study whose design or verdict code changed without its chapter's new digest
    fails in the unit suite, not at the end of ``make test`` (stop 58's CI found it there)."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / dg.DIGESTS / f"{study}.json"
    if study in dg.NO_DIGEST:
        assert not path.exists(), f"{study} has a digest: take it out of digests.NO_DIGEST"
        return
    assert path.exists(), f"{study}: no digest committed (re-run its chapter, or say in " \
                          "digests.NO_DIGEST why it has none)"
    assert _stale(study, path) is None, _stale(study, path)



def test_digest_check_fails_on_a_stale_digest(tmp_path):
    """The check above can fail: a digest written under another design hash is stale, the
    same digest under today's is not."""
    d = _studies()["fix"]
    path = dg.write_digest(d, {"a": ("holds", 1.0)}, tmp_path)
    assert _stale("fix", path) is None
    got = json.loads(path.read_text())
    got["design"] = "0" * 64
    path.write_text(json.dumps(got))
    assert "re-run its chapter" in _stale("fix", path)
