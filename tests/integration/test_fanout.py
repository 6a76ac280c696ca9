"""The record fanned out over Dask distributed (issue 63, item 5): units run on a two-worker
``LocalCluster`` write entries byte-identical to a serial run's, under the same keys and cache
events; an entry two units need is computed once; a scheduler that does not answer is one line
and exit 2, with nothing run."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from posbias_nb.experiments.remedy import lab as T
from posbias_nb.provenance import fanout

#: the remedies lab's model at init, measured (namespace train-init): small, and cached
TINY = dict(layers=2, width=32, length=32)
AT_INIT = "posbias_nb.experiments.remedy.lab:at_init"
#: three entries, one of them asked for by two units
UNITS = [fanout.Unit("a", AT_INIT, dict(TINY, seed=0)),
         fanout.Unit("b", AT_INIT, dict(TINY, seed=1)),
         fanout.Unit("c", AT_INIT, dict(TINY, seed=1, residual_scale=2.0)),
         fanout.Unit("a-again", AT_INIT, dict(TINY, seed=0), after=("c",))]


def _files(d):
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*.npz"))}


def _computed(log):
    return sorted((e["ns"], e["key"]) for e in map(json.loads, log.read_text().splitlines())
                  if e["event"] == "computed")


def test_a_two_worker_local_cluster_writes_what_a_serial_run_writes(tmp_path, monkeypatch):
    # serial: every unit in this process, one after the other
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "serial"))
    monkeypatch.setenv("POSBIAS_CACHE_LOG", str(tmp_path / "serial.jsonl"))
    for u in UNITS:
        T.at_init(**u.kwargs)
    serial = _files(tmp_path / "serial")
    assert len(serial) == 3
    # the same units on Dask: the cache folder and log travel with each task
    env = {"POSBIAS_CACHE_DIR": str(tmp_path / "dask"),
           "POSBIAS_CACHE_LOG": str(tmp_path / "dask.jsonl")}
    got = fanout.run(UNITS, workers=2, env=env)
    assert set(got) == {u.name for u in UNITS}
    assert len({r["worker"] for r in got.values()}) == 2   # both workers took units
    assert _files(tmp_path / "dask") == serial              # same keys, same bytes
    # each entry computed once, the shared one included (the second unit read it)
    assert _computed(tmp_path / "dask.jsonl") == _computed(tmp_path / "serial.jsonl")
    assert len(_computed(tmp_path / "dask.jsonl")) == 3


def test_units_are_checked_before_anything_runs():
    with pytest.raises(ValueError, match="module:function"):
        fanout.Unit("x", "no_colon")
    with pytest.raises(ValueError, match="repeat"):
        fanout.run([UNITS[0], UNITS[0]])
    with pytest.raises(ValueError, match="not given"):
        fanout.run([UNITS[3]])


def test_a_scheduler_that_does_not_answer_is_one_line_and_exit_2(tmp_path, monkeypatch):
    monkeypatch.setattr(fanout, "CONNECT_TIMEOUT", 1)
    with pytest.raises(ValueError, match="tcp://127.0.0.1:9"):
        fanout.client("tcp://127.0.0.1:9")
    times = tmp_path / "b" / "chapter-times.json"
    with pytest.raises(ValueError, match="connect timeout must be"):
        fanout.client("tcp://127.0.0.1:9", timeout=0)
    r = subprocess.run([sys.executable, "-m", "posbias_nb.provenance", "fanout", "--scheduler",
                        "tcp://127.0.0.1:9", "--connect-timeout", "1", "--times", str(times),
                        "book/cesaro.md"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "tcp://127.0.0.1:9" in lines[0] and "Traceback" not in r.stderr
    assert not times.exists()   # nothing run, nothing recorded
