"""The float64 twins of training (issue 63, item 3): a check of the training step that does not
depend on the CPU's float rounding.  A twin recorded under today's code agrees when computed
again, under this CPU's kernels and under other kernels (torch's and MKL's dispatch forced to
another instruction set, in a process of its own), and a changed training step fails by name."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from posbias_nb import cache
from posbias_nb.experiments.remedy import lab as T
from posbias_nb.provenance import machine, plan, verify

#: a twin small enough for a unit test: every code path of the weighted remedy on edge-biased
#: answers, 6 steps
TINY = dict(task="kv", layers=2, width=32, length=32, steps=6, seed=0, answer_positions="edges",
            remedy="weighted", batch=8, checkpoints=2)
#: another CPU's kernels, as bench/bench_twin_rounding.py emulates it
OTHER_KERNELS = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}


def _deviation(a, b):
    return max(float(np.max(np.abs(np.asarray(a[n], float) - np.asarray(b[n], float))))
               / (float(np.max(np.abs(np.asarray(a[n], float)))) or 1.0) for n in a)


@pytest.fixture
def recorded_twin(tmp_path, monkeypatch):
    """The tiny twin recorded under today's code, and make test's plan naming it."""
    rec = tmp_path / "rec"
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(rec))
    monkeypatch.delenv("POSBIAS_CACHE_LOG", raising=False)
    T.train_twin(**TINY)
    (entry,) = (rec / "train-twin").glob("*.npz")
    monkeypatch.setenv("POSBIAS_RECORDED_DIR", str(rec))
    keys = tmp_path / "keys.txt"
    keys.write_text(f"train-twin/{entry.stem}\n")
    monkeypatch.setenv("POSBIAS_RECORDED_VERIFY_KEYS", str(keys))
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "live"))
    return entry


def test_a_twin_holds_its_arrays_in_float64_and_shares_the_training_loop():
    tw = T.train_twin(**TINY, cache=False)
    assert set(tw) == set(T.TWIN_KEYS)
    assert tw["train_loss"].shape == (TINY["steps"],) and tw["train_loss"].dtype == np.float64
    assert tw["loss"].dtype == np.float64 and np.all(np.isfinite(tw["influence"]))
    # float64 throughout: no step of transformers' Llama falls back to float32 inside the twin,
    # and outside it transformers' own code runs again
    import torch
    from transformers.models.llama import modeling_llama as ml

    forward = ml.LlamaRMSNorm.forward
    x = torch.randn(2, 4, TINY["width"], dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    exact = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
    with T.measurements._float64_throughout():
        m = T.measurements._in_float64(T.measurements._run_params(**TINY), "cpu")
        assert all(t.dtype == torch.float64 for t in m.parameters())
        assert m.model.rotary_emb.inv_freq.dtype == torch.float64
        with torch.no_grad():
            err64 = float((m.model.norm(x) - exact).abs().max())
    assert ml.LlamaRMSNorm.forward is forward
    with torch.no_grad():   # transformers' own: via float32
        err32 = float((m.model.norm(x) - exact).abs().max())
    assert err64 < 1e-14 < 1e-9 < err32, (err64, err32)
    with pytest.raises(ValueError, match="remedy"):
        T.train_twin(**{**TINY, "remedy": "nonsense"}, cache=False)


def test_the_recorded_twin_agrees_and_a_changed_training_step_fails(recorded_twin, monkeypatch):
    T.train_twin(**TINY)  # today's code: it agrees
    for change in ("weight", "clip"):
        monkeypatch.setenv("POSBIAS_CACHE_DIR", str(recorded_twin.parents[2] / f"live-{change}"))
        with monkeypatch.context() as m:
            if change == "weight":
                # where the training step reads it (the measurements module)
                m.setattr(T.measurements, "MIDDLE_WEIGHT", T.MIDDLE_WEIGHT * (1 + 1e-3))
            else:
                import torch
                clip = torch.nn.utils.clip_grad_norm_
                m.setattr(torch.nn.utils, "clip_grad_norm_", lambda ps, c: clip(ps, 0.999 * c))
            with pytest.raises(verify.RecordedMismatch, match="'train-twin'"):
                T.train_twin(**TINY)


@pytest.mark.slow  # trains the twin under other kernels, in a subprocess
@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64",
                    reason="torch's and MKL's x86 dispatch")
def test_the_twin_agrees_under_another_cpus_kernels(recorded_twin, tmp_path):
    """The same verification in a process whose torch and MKL kernels are another CPU's (no
    vector unit): it passes, and the kernels really moved the twin (else the test is empty)."""
    out = tmp_path / "other.npz"
    code = ("import json, sys, numpy as np\n"
            "from posbias_nb.experiments.remedy import lab as T\n"
            f"kw = json.loads({json.dumps(json.dumps(TINY))})\n"
            "T.train_twin(**kw)\n"   # verified against the recorded twin: raises on a mismatch
            "np.savez(sys.argv[1], **T.train_twin(**kw, cache=False))\n")
    env = {**os.environ, **OTHER_KERNELS}
    r = subprocess.run([sys.executable, "-c", code, str(out)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    other = dict(np.load(out))
    here = T.train_twin(**TINY, cache=False)
    d = _deviation(here, other)
    assert d <= verify.rtol_for("train-twin"), d
    if d == 0:  # said, not hidden: the check above held, but here it proved nothing
        pytest.skip("these kernels round the tiny twin alike on this CPU")


def test_the_twins_tolerance_is_derived_from_its_measured_rounding():
    """The tolerance is 100 x the largest deviation other kernels gave the twin, rounded up to a
    power of ten; every deliberate change that the recording CPU's float32 check catches moved
    the twin by at least 10 x the tolerance; a float32 run under the same kernels moved by more
    than that check's own tolerance (why training needs a twin)."""
    tr = verify.twin_rounding()
    assert tr["twin_steps"] == T.TWIN_STEPS and tr["config"]["steps"] == T.CHAPTER["steps"]
    # the twin runs the most steps at which it catches what the float32 check catches
    assert T.TWIN_STEPS == max(int(s) for s, v in tr["by_steps"].items() if v["holds"])
    largest = max(v["twin by steps"][str(T.TWIN_STEPS)] for v in tr["variants"].values())
    assert largest == tr["largest_rounding"] > 0
    tol = 10.0 ** math.ceil(math.log10(100 * largest))
    assert verify.rtol_for("train-twin") == tol == tr["tolerance"]
    caught32 = [c for c, v in tr["float32_check"].items() if v["caught"]]
    assert caught32 and tr["holds"]
    assert all(tr["changes"][c] >= tr["margin"] * tol and tr["caught"][c] for c in caught32)
    assert max(v["float32"]["deviation"] for v in tr["variants"].values()) > verify.RTOL
    assert max(v["float32"]["answers flipped"] for v in tr["variants"].values()) > 0
    # the counterexample: the smallest caught change's deviation fails agree at this tolerance,
    # the largest rounding passes
    smallest = min(tr["changes"][c] for c in caught32)
    a = {"x": np.array([1.0, 2.0])}
    assert verify.agree(a, {"x": np.array([1.0, 2.0 + 2.0 * smallest])}, tol)
    assert not verify.agree(a, {"x": a["x"] * (1 + largest)}, tol)
    assert verify.rtol_for("profile") == verify.RTOL


def test_a_cpu_without_its_training_reference_names_the_twins_instead(monkeypatch):
    """Training recorded on another CPU, no reference here: the plan does not re-measure it
    and says that the float64 twins are re-measured in its place."""
    man = {"entries": {"train/k": {"compute_seconds": 2.0, "code": "x", "commit": "c",
                                   "machine": {"cpu": "Other CPU"}},
                       "train-twin/t": {"compute_seconds": 1.0, "code": "y", "commit": "c",
                                        "machine": {"cpu": "Other CPU"}}}}
    p = plan.verification_plan(man, {"train": "x", "train-twin": "y"}, 100, cpu="This CPU")
    assert "train/k" not in p["keys"] and "train-twin/t" in p["keys"]
    assert "float64 twins (train-twin)" in p["namespaces"]["train"]["skipped"]
    assert machine.TWINS == {"train": "train-twin"}
