"""The remedies lab (posbias_nb.experiments.remedy.lab, posbias_nb.tasks.synthetic): tasks, determinism, a tiny run, bad input."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest

from posbias_nb import results
from posbias_nb.experiments.remedy import lab as train
from posbias_nb.tasks import synthetic

TINY = dict(task="kv", layers=2, width=32, length=32, steps=3, checkpoints=2, batch=4,
            cache=False)


@pytest.mark.parametrize("task", synthetic.TASKS)
def test_answer_is_where_asked(task):
    rng = np.random.default_rng(0)
    L = 48
    pos = np.array([1, 7, 20, 33, L - 3])
    ids, tgt = synthetic.make_batch(task, pos, L, rng, distractors=3)
    assert ids.shape == (5, L) and tgt.shape == (5,)
    assert np.all(ids[:, 0] == synthetic.BOS)
    assert np.all(np.isin(tgt, synthetic.VALUES))
    for b, p in enumerate(pos):
        if task == "needle":
            assert ids[b, p] == tgt[b] and ids[b, -1] == synthetic.MARKER
            # the needle's token occurs nowhere else; exactly 3 look-alikes elsewhere
            assert np.sum(np.isin(ids[b], synthetic.VALUES)) == 1
            assert np.sum(np.isin(ids[b], synthetic.DISTRACT)) == 3
        else:
            k = np.flatnonzero(synthetic.KEYS == ids[b, -1])[0]
            assert ids[b, p] == synthetic.PAIRS[k * synthetic.N_VALUES + (tgt[b] - synthetic.VALUES[0])]
            pairs = ids[b][np.isin(ids[b], synthetic.PAIRS)]
            assert pairs.size == 4
            keys = (pairs - synthetic.PAIRS[0]) // synthetic.N_VALUES
            assert len(set(keys.tolist())) == 4 and np.sum(keys == k) == 1


def test_placements():
    rng = np.random.default_rng(1)
    L = 64
    for placement in synthetic.PLACEMENTS:
        p = synthetic.sample_positions(rng, 4000, L, placement)
        assert p.min() >= 1 and p.max() <= L - 3
    w = round(synthetic.EDGE_FRAC * (L - 3))
    start = synthetic.sample_positions(rng, 4000, L, "start")
    assert np.mean(start <= w) > 0.8
    edges = synthetic.sample_positions(rng, 4000, L, "edges")
    assert np.mean((edges <= w) | (edges > L - 3 - w)) > 0.8
    assert 0.3 < np.mean(synthetic.sample_positions(rng, 4000, L, "uniform") <= (L - 3) / 2) < 0.7


def test_tiny_run_and_determinism():
    a = train.train_run(**TINY, seed=3)
    b = train.train_run(**TINY, seed=3)
    c = train.train_run(**TINY, seed=4)
    P = a["position"].size
    assert P >= 4 and a["accuracy"].shape == (P,) and a["influence"].shape == (32,)
    assert a["lambda"].shape == (2,) and a["curve"].shape[1] == P
    assert a["curve_steps"][0] == 0 and a["curve_steps"][-1] == 3
    for k in ("accuracy", "loss", "influence", "lambda", "curve", "grad_init_value"):
        assert np.array_equal(a[k], b[k]), k
    assert not np.array_equal(a["grad_init_value"], c["grad_init_value"])
    assert a["meta"]["task"] == "kv"
    js = json.loads(json.dumps(a.to_json()))
    assert {"position", "accuracy", "influence", "lambda", "curve", "meta"} <= set(js)
    assert js["meta"]["seed"] == 3 and len(js["curve"][0]) == P
    buf = io.StringIO()
    results.write(a, "csv", buf)
    csv = buf.getvalue()
    assert csv.splitlines()[0] == "position,accuracy,loss,steps_to_half,grad_init"
    assert len(csv.splitlines()) == P + 1


def test_remedies_and_scale_run():
    for remedy in ("weighted", "oversample", "curriculum"):
        r = train.train_run(**{**TINY, "steps": 2}, answer_positions="edges", remedy=remedy)
        assert np.all(np.isfinite(r["loss"]))
    small = train.train_run(**{**TINY, "steps": 1}, residual_scale=4.0)
    big = train.train_run(**{**TINY, "steps": 1}, residual_scale=0.25)
    assert np.all(small["lambda_init"] < big["lambda_init"])


@pytest.mark.parametrize("kw, bad", [
    (dict(task="copy"), "copy"), (dict(layers=1), "1"), (dict(layers=9), "9"),
    (dict(width=48 + 1), "49"), (dict(width=256), "256"), (dict(length=16), "16"),
    (dict(length=300), "300"), (dict(steps=0), "0"), (dict(seed=-1), "-1"),
    (dict(answer_positions="middle"), "middle"), (dict(remedy="magic"), "magic"),
    (dict(residual_scale=0.0), "0.0"), (dict(residual_scale=-2), "-2"),
    (dict(residual_scale=float("nan")), "nan"), (dict(device="tpu"), "tpu"),
])
def test_bad_input(kw, bad):
    with pytest.raises(ValueError, match=bad):
        train.train_run(**{**TINY, **kw})


def test_cuda_absent():
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    with pytest.raises(ValueError, match="cuda"):
        train.train_run(**{**TINY, "device": "cuda"})


def test_steps_to_threshold():
    curve = np.array([[0.0, 0.0, 0.0], [0.6, 0.2, 0.0], [0.9, 0.7, 0.1]])
    s = train.steps_to_threshold(curve, [0, 10, 20], 0.5)
    assert s.tolist() == [10.0, 20.0, 30.0]  # the last one is censored one interval past the end
    with pytest.raises(ValueError):
        train.steps_to_threshold(curve, [0, 10], 0.5)


def test_one_middle():
    """The remedies' middle (task design) and the measured middle are metrics.regions."""
    from posbias_nb import metrics

    assert not hasattr(train, "middle_mass")  # one definition: metrics.middle_share
    for L in (32, 48, 64, 128):
        a, b = synthetic.middle_range(L)
        mid = metrics.regions(L - 3).indices("middle") + 1
        assert (a, b) == (mid[0], mid[-1])
    pos = synthetic.eval_positions(64)
    mid, edge = train.middle_and_edges(pos)
    assert mid.tolist() == metrics.regions(pos.size).indices("middle").tolist()
    assert edge.tolist() == [0, pos.size - 1]
    # the remedies act on every measured middle position
    a, b = synthetic.middle_range(64)
    assert np.all((pos[mid] >= a) & (pos[mid] <= b))
    with pytest.raises(ValueError):
        train.middle_and_edges([1, 2])


def test_contrast_and_intervals_over_seeds():
    from posbias_nb import stats

    pos = np.arange(1, 9)
    rng = np.random.default_rng(0)
    lag = np.ones((10, 8)) * 0.9 + 0.02 * rng.standard_normal((10, 8))
    lag[:, 2:6] -= 0.1  # the middle lags by 0.1 in every seed
    c = train.contrast(lag, pos)
    assert c.shape == (10,) and np.allclose(c.mean(), -0.1, atol=0.02)
    est, lo, hi = train.middle_vs_edges(lag, pos)
    assert (est, lo, hi) == stats.mean_interval(c)
    assert stats.decide((est, lo, hi), 0, "less") == "holds"
    # counterexample: no lag, only seed noise -> the interval straddles 0, never "holds"
    flat = 0.9 + 0.05 * rng.standard_normal((10, 8))
    assert stats.decide(train.middle_vs_edges(flat, pos), 0, "less") == "inconclusive"
    # counterexample: the middle leads -> "fails"
    assert stats.decide(train.middle_vs_edges(1.8 - lag, pos), 0, "less") == "fails"
    r = train.middle_vs_edges(lag, pos, ratio=True)
    assert r[1] < r[0] < r[2] < 1
    with pytest.raises(ValueError):
        train.contrast(lag[:, :5], pos)


def test_arm_difference_is_paired_by_seed():
    from posbias_nb import stats

    pos = np.arange(1, 9)
    rng = np.random.default_rng(1)
    seed_effect = rng.uniform(0.2, 0.9, (10, 1))        # seeds differ a lot ...
    b = np.repeat(seed_effect, 8, 1)
    b[:, 2:6] -= 0.1
    a = b.copy()
    a[:, 2:6] += 0.03                                   # ... the remedy lifts the middle a little
    gap = train.arm_difference(a, b, pos, "gap")
    assert gap[0] == pytest.approx(0.03) and stats.decide(gap, 0, "greater") == "holds"
    assert train.arm_difference(a, b, pos, "edges")[0] == pytest.approx(0.0)
    # unpaired (shuffled seeds) the same data cannot resolve it: pairing matters
    shuffled = train.arm_difference(a[::-1], b, pos, "middle")
    assert stats.decide(shuffled, 0, "greater") == "inconclusive"
    with pytest.raises(ValueError):
        train.arm_difference(a, b[:5], pos)
    with pytest.raises(ValueError):
        train.arm_difference(a, b, pos, "ends")


def test_predicted_ratio():
    pos = synthetic.eval_positions(64)
    assert train.predicted_ratio([1.0], pos, 64) == pytest.approx(1.0)   # uniform: flat
    r2 = train.predicted_ratio([0.3, 0.3], pos, 64)
    r8 = train.predicted_ratio([0.3] * 8, pos, 64)
    assert 0 < r8 < r2 < 1  # the rollout's middle falls behind the ends with depth


def test_at_init_matches_train_run_and_depth_sweep():
    kw = dict(layers=2, width=32, length=32)
    r = train.train_run(**TINY, seed=2)
    i = train.at_init(**kw, seed=2, cache=False)
    for k in ("lambda_init", "influence_init", "grad_init_value", "grad_init_profile"):
        assert np.array_equal(r[k], i[k]), k
    assert "influence_init" not in train.at_init(**kw, seed=2, influence=False, cache=False)
    with pytest.raises(ValueError, match="9"):
        train.at_init(9, 32, 32, 0, cache=False)
    d = train.gradient_by_depth((2, 3), seeds=(0, 1), width=32, length=32)
    assert set(d) == {2, 3}
    for H, v in d.items():
        assert v["measured"].shape == (2,) and v["lam"].shape == (2, H)
        assert np.all(v["measured"] > 0) and np.all((v["predicted"] > 0) & (v["predicted"] < 1))
        assert v["measured_ci"][1] <= v["measured_ci"][0] <= v["measured_ci"][2]
    assert d[3]["factorial"] == 0.5
    with pytest.raises(ValueError):
        train.gradient_by_depth((2,), seeds=(0,), width=32, length=32)


def test_lever_at_init():
    lev = train.lever_at_init((0.5, 2.0), seeds=(0, 1), layers=2, width=32, length=32)
    assert np.all(lev[0.5]["lam"] > lev[2.0]["lam"])
    for v in lev.values():
        assert np.all((v["measured"] > 0) & (v["measured"] < 1)) and v["predicted"].shape == (2,)


def test_cached_run_is_identical(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path))
    kw = {**TINY, "steps": 2, "cache": True}
    a = train.train_run(**kw, seed=5)
    assert any(tmp_path.rglob("*"))
    b = train.train_run(**kw, seed=5)
    for k in ("accuracy", "influence", "lambda", "curve"):
        assert np.array_equal(a[k], b[k]), k
    assert b["meta"] == a["meta"]


@pytest.mark.slow  # trains the arms twice
def test_run_arms_workers_match_serial(tmp_path, monkeypatch):
    """Runs trained in worker processes are the serial runs, bit for bit (through the cache)."""
    cfg = dict(layers=2, width=32, length=32, steps=2, checkpoints=2, batch=4)
    serial = {a: [train.train_run(**{**train.CHAPTER, **cfg}, **train.ARMS[a], seed=s,
                                  cache=False) for s in (0, 1)] for a in ("uniform", "edges")}
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path))
    par = train.run_arms(("uniform", "edges"), seeds=(0, 1), workers=2, **cfg)
    for a in serial:
        for r, q in zip(serial[a], par[a]):
            for k in ("accuracy", "curve_correct", "influence", "grad_init_value"):
                assert np.array_equal(r[k], q[k]), (a, k)
    with pytest.raises(ValueError, match="arm"):
        train.run_arms(("nope",))
