"""The remedies lab (posbias_nb.experiments.remedies, posbias_nb.tasks.synthetic): tasks, determinism, a tiny run, bad input."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest

from posbias_nb import results
from posbias_nb.experiments import remedies as train
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


def test_steps_to_threshold_and_middle_mass():
    curve = np.array([[0.0, 0.0, 0.0], [0.6, 0.2, 0.0], [0.9, 0.7, 0.1]])
    s = train.steps_to_threshold(curve, [0, 10, 20], 0.5)
    assert s.tolist() == [10.0, 20.0, 30.0]  # the last one is censored one interval past the end
    assert train.middle_mass(np.ones(9)) == pytest.approx(1 / 3)
    assert train.middle_mass([1, 0, 0, 0, 0, 1.0]) == 0.0
    with pytest.raises(ValueError):
        train.steps_to_threshold(curve, [0, 10], 0.5)
    with pytest.raises(ValueError):
        train.middle_mass([1.0, -np.inf, 1.0])


def test_cached_run_is_identical(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path))
    kw = {**TINY, "steps": 2, "cache": True}
    a = train.train_run(**kw, seed=5)
    assert any(tmp_path.rglob("*"))
    b = train.train_run(**kw, seed=5)
    for k in ("accuracy", "influence", "lambda", "curve"):
        assert np.array_equal(a[k], b[k]), k
    assert b["meta"] == a["meta"]
