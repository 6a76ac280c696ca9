import numpy as np
import pytest

from posbias_nb import cache


def test_roundtrip_and_checksum(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path))
    calls = []

    def compute():
        calls.append(1)
        return {"a": np.arange(5.0)}

    out1 = cache.cached("t", {"x": 1}, compute)
    out2 = cache.cached("t", {"x": 1}, compute)
    assert len(calls) == 1
    np.testing.assert_array_equal(out1["a"], out2["a"])
    cache.cached("t", {"x": 2}, compute)
    assert len(calls) == 2
    # corrupt the stored file: it must be recomputed, not returned
    f = next((tmp_path / "t").glob("*.npz"))
    raw = bytearray(f.read_bytes())
    raw[-5] ^= 0xFF
    f.write_bytes(bytes(raw))
    assert cache.load("t", {"x": 1}) is None or cache.load("t", {"x": 2}) is None
    cache.cached("t", {"x": 1}, compute)
    cache.cached("t", {"x": 2}, compute)
    assert len(calls) == 3
    assert not list((tmp_path / "t").glob("*.tmp"))


def test_off(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")
    calls = []
    cache.cached("t", {}, lambda: calls.append(1) or {"a": np.zeros(1)})
    cache.cached("t", {}, lambda: calls.append(1) or {"a": np.zeros(1)})
    assert len(calls) == 2


def _slow_compute_in_process(folder, log, ready, inside=None):
    import os
    import time

    os.environ["POSBIAS_CACHE_DIR"] = folder

    def compute():
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        if inside is not None:  # the counterexample: both must be inside before either stores
            inside.wait(timeout=60)
        time.sleep(0.2)
        return {"a": np.arange(3.0) + os.getpid()}

    ready.wait()
    return cache.cached("t-lock", {"x": 1}, compute)["a"].tolist()


def test_two_processes_compute_one_key_once(tmp_path):
    """Two chapters executed at once that need one measurement: the second waits for the first's
    result instead of computing it again (cache.cached locks its key)."""
    import multiprocessing as mp

    log = tmp_path / "computed.txt"
    ctx = mp.get_context("spawn")
    with ctx.Manager() as mgr:
        ready = mgr.Event()
        with ctx.Pool(2) as pool:
            res = [pool.apply_async(_slow_compute_in_process, (str(tmp_path), str(log), ready))
                   for _ in range(2)]
            ready.set()
            a, b = (r.get(timeout=60) for r in res)
    assert len(log.read_text().split()) == 1  # computed once
    assert a == b                               # and both read the same result


def test_without_the_lock_both_compute(tmp_path, monkeypatch):
    """The counterexample: with the lock switched off, the same race computes twice (so the test
    above can fail)."""
    import multiprocessing as mp
    from contextlib import nullcontext

    monkeypatch.setattr(cache, "lock", lambda name: nullcontext())
    log = tmp_path / "computed.txt"
    ctx = mp.get_context("fork")  # the patched module is inherited
    with ctx.Manager() as mgr:
        ready, inside = mgr.Event(), mgr.Barrier(2)
        with ctx.Pool(2) as pool:
            res = [pool.apply_async(_slow_compute_in_process,
                                    (str(tmp_path), str(log), ready, inside))
                   for _ in range(2)]
            ready.set()
            for r in res:
                r.get(timeout=60)
    assert len(log.read_text().split()) == 2  # deterministic: both met inside compute


def test_cache_log(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path))
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("POSBIAS_CACHE_LOG", str(log))
    monkeypatch.setenv("POSBIAS_CACHE_TAG", "ch")
    cache.cached("t", {"x": 1}, lambda: {"a": np.zeros(1)})
    cache.cached("t", {"x": 1}, lambda: {"a": np.zeros(1)})
    import json

    ev = [json.loads(x)["event"] for x in log.read_text().splitlines()]
    assert ev == ["miss", "miss", "computed", "hit"]  # miss, miss again under the lock, hit
    assert all(json.loads(x)["tag"] == "ch" for x in log.read_text().splitlines())


# recorded measurements ($POSBIAS_RECORDED_DIR) ------------------------------------------------

def _record(tmp_path, monkeypatch, arrays, ns="t-rec", params=None):
    """An entry written by a 'cold run' into its own folder, then that folder made the recorded
    one and a fresh, empty cache folder the live one."""
    params = {"x": 1} if params is None else params
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "cold"))
    cache.store(ns, params, arrays)
    monkeypatch.setenv("POSBIAS_RECORDED_DIR", str(tmp_path / "cold"))
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "live"))
    return ns, params


def test_recorded_entry_is_read_not_computed(tmp_path, monkeypatch):
    ns, params = _record(tmp_path, monkeypatch, {"a": np.arange(3.0)})
    monkeypatch.setenv("POSBIAS_CACHE_LOG", str(tmp_path / "log.jsonl"))
    calls = []
    out = cache.cached(ns, params, lambda: calls.append(1) or {"a": np.zeros(3)})
    assert calls == [] and out["a"].tolist() == [0.0, 1.0, 2.0]
    assert '"event": "recorded"' in (tmp_path / "log.jsonl").read_text()
    # another key of the same namespace is computed as usual
    cache.cached(ns, {"x": 2}, lambda: calls.append(1) or {"a": np.zeros(3)})
    assert calls == [1]


def test_recorded_off_with_the_cache(tmp_path, monkeypatch):
    ns, params = _record(tmp_path, monkeypatch, {"a": np.arange(3.0)})
    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")
    calls = []
    cache.cached(ns, params, lambda: calls.append(1) or {"a": np.zeros(3)})
    assert calls == [1]


def test_verified_namespace_is_computed_and_must_agree(tmp_path, monkeypatch):
    ns, params = _record(tmp_path, monkeypatch, {"a": np.array([1.0, 2.0]), "n": np.array(3)})
    monkeypatch.setenv("POSBIAS_RECORDED_VERIFY", f"other,{ns}")
    calls = []
    # the same numbers up to rounding: computed, compared, stored
    out = cache.cached(ns, params, lambda: calls.append(1) or {"a": np.array([1.0, 2.0 + 1e-9]),
                                                                "n": np.array(3)})
    assert calls == [1] and out["a"][1] == 2.0 + 1e-9
    assert cache.load(ns, params)["a"][1] == 2.0 + 1e-9  # now in the live cache


@pytest.mark.parametrize("fresh, words", [
    ({"a": np.array([1.0, 2.1]), "n": np.array(3)}, "differs by"),    # a moved number
    ({"a": np.array([1.0, 2.0]), "n": np.array(4)}, "entries differ"),  # a moved count
    ({"a": np.array([1.0, 2.0, 3.0]), "n": np.array(3)}, "shape"),
    ({"a": np.array([1.0, np.nan]), "n": np.array(3)}, "NaNs"),
    ({"a": np.array([1.0, 2.0])}, "only one"),
])
def test_verified_namespace_refuses_a_changed_computation(tmp_path, monkeypatch, fresh, words):
    ns, params = _record(tmp_path, monkeypatch, {"a": np.array([1.0, 2.0]), "n": np.array(3)})
    monkeypatch.setenv("POSBIAS_RECORDED_VERIFY", ns)
    with pytest.raises(cache.RecordedMismatch, match=words):
        cache.cached(ns, params, lambda: fresh)
    assert cache.load(ns, params) is None  # nothing written: the recorded value is not replaced


def test_corrupt_recorded_entry_raises(tmp_path, monkeypatch):
    ns, params = _record(tmp_path, monkeypatch, {"a": np.arange(3.0)})
    (f,) = (tmp_path / "cold" / ns).glob("*.npz")
    f.write_bytes(f.read_bytes()[:-3] + b"xyz")
    with pytest.raises(cache.RecordedMismatch, match="corrupt"):
        cache.cached(ns, params, lambda: {"a": np.zeros(3)})
