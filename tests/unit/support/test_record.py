"""posbias_nb.provenance.record (make record, bench/record_measurements.py): recorded/ from a cold
run, and merged after a run that read it (new entries added, entries no chapter read removed,
verified ones left as measured)."""
import json

import numpy as np
import pytest

from posbias_nb import cache
from posbias_nb.provenance import code
from posbias_nb.provenance import record as rec


def _times(path, state, failed=(), chapters=None):
    """A chapter-times.json: of a run of every chapter of the book, or of ``chapters`` only."""
    names = sorted(rec.book_chapters()) if chapters is None else list(chapters)
    path.write_text(json.dumps({"cache": state, "failed": list(failed), "machine": {"cpus": 2},
                                "workers": 2, "threads": 1, "wall": 10.0,
                                "seconds": {n: 1.0 for n in names}}))
    return path


def test_cold_record_then_merge(tmp_path, monkeypatch):
    live, out, log = tmp_path / "live", tmp_path / "recorded", tmp_path / "log.jsonl"
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(live))
    monkeypatch.setenv("POSBIAS_CACHE_LOG", str(log))
    for x in (1, 2):
        cache.cached("ns-a", {"x": x}, lambda: {"a": np.arange(3.0)})
    cache.cached("ns-v", {"x": 1}, lambda: {"a": np.ones(2)})
    (live / "weights").mkdir()
    (live / "weights" / "big.npz").write_bytes(b"not a measurement")
    # a warm run is refused; a cold one is recorded
    with pytest.raises(SystemExit):
        rec.main(["--cache", str(live), "--times", str(_times(tmp_path / "t.json", "warm")),
                  "--out", str(out)])
    assert rec.main(["--cache", str(live), "--log", str(log), "--out", str(out),
                     "--times", str(_times(tmp_path / "t.json", "cold")), "--commit", "c1"]) == 0
    man = json.loads((out / "MANIFEST.json").read_text())
    assert man["namespaces"]["ns-a"]["entries"] == 2 and "weights" not in man["namespaces"]
    assert all(v["commit"] == "c1" for v in man["entries"].values())
    # a run that reads recorded/: x=1 read, x=2 no longer asked for, x=3 new, ns-v verified
    log.unlink()
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "live2"))
    monkeypatch.setenv("POSBIAS_RECORDED_DIR", str(out / "cache"))
    monkeypatch.setenv("POSBIAS_RECORDED_VERIFY", "ns-v")
    calls = []
    cache.cached("ns-a", {"x": 1}, lambda: calls.append(1) or {"a": np.zeros(3)})
    cache.cached("ns-a", {"x": 3}, lambda: {"a": np.full(3, 3.0)})
    cache.cached("ns-v", {"x": 1}, lambda: {"a": np.ones(2)})
    assert calls == []  # read from recorded/
    before_v = {k: v for k, v in man["entries"].items() if k.startswith("ns-v/")}
    # a run of some chapters (make notebooks NB_PAGES=...) cannot tell what the book reads: it
    # adds what it measured, removes nothing and keeps the read flags of the others
    import shutil

    scratch = tmp_path / "scratch"
    shutil.copytree(out, scratch)
    assert rec.main(["--merge", "--cache", str(tmp_path / "live2"), "--log", str(log), "--out",
                     str(scratch), "--commit", "c2",
                     "--times", str(_times(tmp_path / "t1.json", "recorded", (),
                                           ["retrieval_inference"]))]) == 0
    part = json.loads((scratch / "MANIFEST.json").read_text())
    assert set(man["entries"]) < set(part["entries"])  # nothing removed, x=3 added
    assert all(part["entries"][k]["read"] == v.get("read", part["entries"][k]["read"])
               for k, v in man["entries"].items())
    with pytest.raises(SystemExit):  # a run with a failed chapter removes nothing
        rec.main(["--merge", "--cache", str(tmp_path / "live2"), "--log", str(log), "--out",
                  str(out), "--times", str(_times(tmp_path / "t2.json", "recorded", ["x"]))])
    assert rec.main(["--merge", "--cache", str(tmp_path / "live2"), "--log", str(log),
                     "--out", str(out), "--commit", "c2",
                     "--times", str(_times(tmp_path / "t2.json", "recorded"))]) == 0
    man = json.loads((out / "MANIFEST.json").read_text())
    keys = {k.split("/")[0] + "/" + k.split("/")[1][:16]: v for k, v in man["entries"].items()}
    k1, k2, k3 = (f"ns-a/{cache.key('ns-a', {'x': x})[:16]}" for x in (1, 2, 3))
    assert k1 in keys and keys[k1]["commit"] == "c1"   # read: kept as measured
    assert k2 not in keys                              # no chapter asked for it: removed
    assert k3 in keys and keys[k3]["commit"] == "c2"   # measured in this run: added
    assert {k: v for k, v in man["entries"].items() if k.startswith("ns-v/")} == before_v
    assert len(list((out / "cache" / "ns-a").glob("*.npz"))) == 2
    assert [r["kind"] for r in man["runs"]] == ["cold", "merge"]
    # a run that started with a live cache adds what it measured and removes nothing: entries it
    # did not read may be the inputs of what its live cache answered
    log.unlink()
    cache.cached("ns-a", {"x": 4}, lambda: {"a": np.full(3, 4.0)})
    n_before = len(man["entries"])
    assert rec.main(["--merge", "--cache", str(tmp_path / "live2"), "--log", str(log),
                     "--out", str(out), "--commit", "c3",
                     "--times", str(_times(tmp_path / "t3.json", "warm"))]) == 0
    man = json.loads((out / "MANIFEST.json").read_text())
    assert len(man["entries"]) == n_before + 1 and k1 in {
        k.split("/")[0] + "/" + k.split("/")[1][:16] for k in man["entries"]}


def test_an_entry_carries_the_code_that_computed_it(tmp_path, monkeypatch):
    """The digest comes from the computation's own event, not from the tree at recording time:
    code edited between the run and the recording does not pass as the code that measured."""
    live, out, log = tmp_path / "live", tmp_path / "recorded", tmp_path / "log.jsonl"
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(live))
    monkeypatch.setenv("POSBIAS_CACHE_LOG", str(log))
    monkeypatch.setitem(code.NAMESPACE_CODE, "ns-c", ("cache",))
    monkeypatch.setattr(code, "code_digest", lambda ns, files=None: "then")
    cache.cached("ns-c", {"x": 1}, lambda: {"a": np.arange(3.0)})
    assert json.loads(log.read_text().splitlines()[-1])["code"] == "then"
    monkeypatch.setattr(code, "code_digest", lambda ns, files=None: "now")  # code edited since
    assert rec.main(["--cache", str(live), "--log", str(log), "--out", str(out),
                     "--times", str(_times(tmp_path / "t.json", "cold")), "--commit", "c1"]) == 0
    man = json.loads((out / "MANIFEST.json").read_text())
    assert [v["code"] for v in man["entries"].values()] == ["then"]
