import numpy as np

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
