"""The README's figures are measured ones: its minutes for ``make book`` and ``make test`` are
those of the last fresh-clone ``make test`` (``bench/results/make-test-stages.json``, which
``bench/stages.py`` writes), so a new measurement that changes them fails here until the README
says so."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def readme_minutes(text: str) -> dict[str, int]:
    """The minutes the README's first paragraph after the two commands states, by command."""
    m = re.search(r"`make book` takes about (\d+) minutes and `make test` about (\d+)", text)
    if not m:
        raise ValueError("the README states no minutes for make book and make test")
    return {"book": int(m.group(1)), "test": int(m.group(2))}


def stage_minutes(stages: dict) -> dict[str, int]:
    """``make book`` (set-up, chapters, build) and ``make test`` (every stage) in whole minutes."""
    s = {x["stage"]: float(x["seconds"]) for x in stages["stages"]}
    return {"book": round((s["pip"] + s["chapters"] + s["build"]) / 60),
            "test": round(float(stages["total_seconds"]) / 60)}


def test_the_readme_states_the_measured_minutes():
    text = (ROOT / "README.md").read_text()
    stages = json.loads((ROOT / "bench" / "results" / "make-test-stages.json").read_text())
    assert readme_minutes(text) == stage_minutes(stages)
    cpu = stages["cpu"].split(" / ")
    assert all(c.replace("-", "") in text.replace("-", "") for c in cpu), cpu
    assert re.search(rf"about {stage_minutes(stages)['test']}\s+minutes on two cores", text)


def test_the_minutes_check_refuses_a_stale_readme():
    stages = {"stages": [{"stage": "pip", "seconds": 120.0}, {"stage": "chapters",
                                                             "seconds": 900.0},
                         {"stage": "build", "seconds": 60.0}], "total_seconds": 1500.0}
    assert stage_minutes(stages) == {"book": 18, "test": 25}
    stale = "`make book` takes about 20 minutes and `make test` about 26 (...)"
    assert readme_minutes(stale) != stage_minutes(stages)


def avx2_minutes(text: str) -> int:
    """The minutes the README states for ``make test`` on the AVX2 machine."""
    m = re.search(r"On the AVX2 EPYC that CI also gets, `make test` takes about (\d+)\s+minutes",
                  text)
    if not m:
        raise ValueError("the README states no minutes for make test on the AVX2 EPYC")
    return int(m.group(1))


def test_the_readme_states_the_avx2_minutes_of_its_file():
    """The AVX2 sentence is the AVX2 file's total, and both files it names are fresh-clone runs
    on an AVX2 CPU that passed every stage, each saying at which commit."""
    text = (ROOT / "README.md").read_text()
    res = ROOT / "bench" / "results"
    after = json.loads((res / "make-test-stages-avx2.json").read_text())
    assert avx2_minutes(text) == stage_minutes(after)["test"]
    for name in ("make-test-stages-avx2.json", "make-test-stages-avx2-before.json"):
        assert name in text
        d = json.loads((res / name).read_text())
        assert d["cpu"].endswith("/ AVX2") and d.get("commit"), name
        assert all(s["rc"] == 0 for s in d["stages"]), name


def test_the_avx2_check_refuses_a_stale_sentence():
    stale = "On the AVX2 EPYC that CI also gets, `make test` takes about 28 minutes: ..."
    run = {"stages": [{"stage": "pip", "seconds": 90.0}, {"stage": "chapters", "seconds": 800.0},
                      {"stage": "build", "seconds": 50.0}], "total_seconds": 1497.7}
    assert avx2_minutes(stale) != stage_minutes(run)["test"] == 25
    with pytest.raises(ValueError):
        avx2_minutes("no AVX2 sentence")
