"""The book's Sphinx extension (``_ext/posbias_sphinx.py``): the API reference's summaries of
module constants (issue 64: a design's whole ``mappingproxy(...)`` was printed, 229 times on one
page)."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import MappingProxyType

import pytest

pytest.importorskip("sphinx")
_spec = importlib.util.spec_from_file_location(
    "posbias_sphinx", Path(__file__).resolve().parents[2] / "_ext" / "posbias_sphinx.py")
posbias_sphinx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(posbias_sphinx)
short_value = posbias_sphinx.short_value


def test_a_long_mapping_is_summarised_by_its_size_and_first_keys():
    design = MappingProxyType({"test_share": 2 / 3, "examples": list(range(64)),
                               "thresholds": {"a": 0.5}, "families": ("bm25", "curve")})
    got = short_value(design)
    assert got.startswith("a mapping of 4 entries: 'test_share'") and got.endswith("…")
    assert "mappingproxy" not in got and "0.6666666666666666" not in got
    assert len(got) <= posbias_sphinx.VALUE_LIMIT + 10
    # the counterexample: autodoc's own rendering is the repr, which the summary replaces
    assert "mappingproxy(" in repr(design) and len(repr(design)) > 3 * len(got)


def test_short_values_stay_as_they_are_and_floats_are_rounded():
    assert short_value(0.001) == "0.001"
    assert short_value(2 / 3) == "0.6667"
    assert short_value(("first", "middle", "last")) == "('first', 'middle', 'last')"
    assert short_value(True) == "True" and short_value(None) == "None"
    assert short_value(MappingProxyType({"a": 1})) == "a mapping of 1 entries: 'a'"


def test_long_collections_strings_and_objects():
    got = short_value(tuple(f"name{i}" for i in range(40)))
    assert got.startswith("a tuple of 40 items: 'name0', 'name1'") and got.endswith(", …")
    assert short_value("x" * 200) == f"{'x' * 30!r}… (200 characters)"
    assert short_value(object()) == "an object"
    assert short_value(frozenset({"kv"})) == "frozenset({'kv'})"
