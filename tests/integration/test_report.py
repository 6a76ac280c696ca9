"""`posbias report` (issue 21): the span view, the theory fit, hub ids from a fake offline hub
cache, one-line errors before any work, and the page's numbers against report.json."""
from __future__ import annotations

import base64
import io
import functools
import json
import re

import numpy as np
import pytest

from posbias_nb import metrics, theory
from posbias_nb.measure import span_profile

# --------------------------------------------------------------------------------------------
# span_profile and fit_theory: pure numerics


def test_span_profile_sums_and_shares():
    p = np.array([1.0, 1.0, 2.0, 4.0, 2.0])
    assert span_profile(p, [(0, 2), (2, 4)], normalize=False).tolist() == [2.0, 6.0]
    assert span_profile(p, [(0, 2), (2, 4)]).tolist() == [0.2, 0.6]  # gaps belong to no unit
    assert span_profile(p, [(3, 5), (0, 1)]).tolist() == [0.6, 0.1]  # in the order given
    # summing is not averaging: a long unit of small tokens can outweigh a short heavy one
    q = np.array([5.0, 1, 1, 1, 1, 1, 1])
    per_token = [q[0:1].mean(), q[1:7].mean()]
    shares = span_profile(q, [(0, 1), (1, 7)])
    assert per_token[0] > per_token[1] and shares[0] < shares[1]


@pytest.mark.parametrize("spans, match", [
    ([], "empty"), ([(0, 6)], "not a range"), ([(2, 2)], "not a range"), ([(-1, 2)], "not a range"),
    ([(0, 3), (2, 4)], "overlap"), ([(0.5, 2)], "not a range"), (["ab"], "not a range|pairs"),
    ([(0,)], "pairs"),
])
def test_span_profile_rejects_bad_spans(spans, match):
    with pytest.raises(ValueError, match=match):
        span_profile([1.0, 1, 1, 1, 1], spans)


def test_span_profile_rejects_bad_profiles():
    for bad in ([1.0, -1.0], [[1.0, 2.0]], [np.nan, 1.0]):
        with pytest.raises(ValueError, match="profile"):
            span_profile(bad, [(0, 1)])
    with pytest.raises(ValueError, match="sums to 0"):
        span_profile([0.0, 0.0], [(0, 1)])


def test_fit_theory_recovers_depth_and_alpha_and_not_a_wrong_depth():
    row = theory.influence(96, 5, 0.35)
    f = metrics.fit_theory(row, range(1, 13))
    assert f["H"] == 5 and abs(f["alpha"] - 0.35) < 1e-4 and f["rms_log"] < 1e-6
    # counterexample: with the true depth excluded the fit is worse, and says so
    g = metrics.fit_theory(row, [2, 3])
    assert g["H"] in (2, 3) and g["rms_log"] > 1e-3
    with pytest.raises(ValueError):
        metrics.fit_theory(row, [])
    with pytest.raises(ValueError):
        metrics.fit_theory(np.r_[0.0, row[1:]], [5])


# --------------------------------------------------------------------------------------------
# Models: tiny zoo twins, a fake hub cache

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from posbias_nb import cli, models  # noqa: E402
from posbias_nb.experiments import report as R  # noqa: E402

TINY = dict(model="gpt2-tiny", weights="random", length=256, quick=True)


def _opt_tiny(path):
    """A tiny OPT (its layers under decoder.layers) saved with save_pretrained."""
    from transformers import OPTConfig, OPTForCausalLM

    cfg = OPTConfig(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    ffn_dim=64, max_position_embeddings=256, word_embed_proj_dim=32,
                    bos_token_id=0, eos_token_id=0, pad_token_id=1)
    torch.manual_seed(123)
    OPTForCausalLM(cfg).save_pretrained(str(path))
    return path


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    """A hub cache with ``tiny-org/opt-tiny`` in it (models--tiny-org--opt-tiny/snapshots/<hash>,
    refs/main), HF_HUB_CACHE pointing at it, offline."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--tiny-org--opt-tiny"
    _opt_tiny(repo / "snapshots" / commit)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return {"id": "tiny-org/opt-tiny", "snapshot": repo / "snapshots" / commit}


def test_hub_id_resolves_from_the_offline_cache(fake_hub):
    from transformers import OPTForCausalLM

    assert models.resolve(fake_hub["id"]) == fake_hub["snapshot"].resolve()
    m, _, info = models.load(fake_hub["id"], weights="pretrained")
    ref = OPTForCausalLM.from_pretrained(str(fake_hub["snapshot"]))
    for (k, a), (_, b) in zip(m.state_dict().items(), ref.state_dict().items()):
        assert torch.equal(a, b), k
    assert info["family"] == "opt"


def test_hub_id_not_cached_offline_is_one_line_naming_id_and_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError) as e:
        models.resolve("nobody/no-such-model")
    msg = str(e.value)
    assert "\n" not in msg and "'nobody/no-such-model'" in msg and "HF_HUB_OFFLINE" in msg


def _page_numbers(html_text):
    return re.findall(r'data-key="([^"]+)" data-value="([^"]+)">([^<]*)<', html_text)


def _lookup(obj, dotted):
    for part in dotted.split("."):
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj


def _check_report_dir(d):
    page = (d / "index.html").read_text()
    obj = json.loads((d / "report.json").read_text())
    # self-contained: no script, no external resource
    assert "<script" not in page.lower()
    assert not re.search(r'(src|href)="(?!data:)', page)
    imgs = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(imgs) >= 2
    import matplotlib.image as mpimg

    for b in imgs:  # every figure decodes
        a = mpimg.imread(io.BytesIO(base64.b64decode(b, validate=True)), format="png")
        assert a.ndim == 3 and a.shape[0] > 50 and a.shape[1] > 50
    nums = _page_numbers(page)
    assert len(nums) >= 12
    for key, value, shown in nums:  # the page's numbers are report.json's
        v = _lookup(obj, key)
        assert float(value) == float(v) or (np.isnan(float(value)) and np.isnan(float(v))), key
        assert shown == R._fmt(v), key
    return obj, page


@pytest.mark.slow
def test_report_end_to_end_on_a_tiny_zoo_model(tmp_path, capsys):
    out1, out2 = tmp_path / "r1", tmp_path / "r2"
    args = ["report", "--model", "gpt2-tiny", "--weights", "random", "--length", "256",
            "--quick", "--quiet"]
    assert cli.main(args + ["--out", str(out1)]) == 0
    obj, page = _check_report_dir(out1)
    meta = obj["meta"]
    assert meta["model"] == "gpt2-tiny" and meta["length"] == 256 and meta["quick"] is True
    assert meta["layout"] == "2*full"  # checked by behaviour: every layer attends to the prefix
    assert meta["fingerprint"] and meta["versions"]["torch"] and meta["sizes"]["windows"] >= 8
    bt = obj["born_trained"]
    assert "trained" not in bt and bt["windows"] >= 8
    h = bt["born"]["headline"]
    for k in ("ptv", "primacy", "recency", "valley"):
        assert h[k]["low"] <= h[k]["estimate"] <= h[k]["high"]
    assert 0 < h["valley"]["estimate"] < 1
    assert obj["structural"]["available"] and len(obj["structural"]["lambda"]) == 2
    assert obj["task"]["available"], obj["task"]
    assert len(obj["task"]["accuracy"]) == obj["task"]["positions"]
    for lo, a, hi in zip(obj["task"]["accuracy_low"], obj["task"]["accuracy"],
                         obj["task"]["accuracy_high"]):
        assert lo <= a <= hi and hi > lo  # Wilson: never zero width
    sp = obj["task"]["spans"]
    assert len(sp["shares"]) == obj["task"]["positions"]
    assert all(0 < sum(s) < 1 for s in sp["shares"])  # instruction and question: no pair
    # the summary carries the verdicts of the claims, word for word
    from posbias_nb import stats

    for c in obj["claims"]:
        assert c["verdict"] in ("holds", "fails", "inconclusive", "not testable")
        assert f"{c['claim']}: {c['verdict']}" in obj["summary"]
        iv = c["interval"]
        if c["verdict"] != "not testable":  # the shown interval is the one the verdict read
            assert stats.decide((iv["estimate"], iv["low"], iv["high"]),
                                c["threshold"]) == c["verdict"]
    # a second run that only changes --out is served from the cache, with the same numbers:
    # it loads no model (no timing here: speed targets live in bench/)
    from posbias_nb import models
    from posbias_nb.models import loading

    def no_load(*a, **k):
        raise AssertionError("the second run loaded a model: not served from the cache")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(models, "load", no_load)
        mp.setattr(loading, "load", no_load)
        assert cli.main(args + ["--out", str(out2)]) == 0
    assert (out2 / "report.json").read_text() == (out1 / "report.json").read_text()


@pytest.mark.slow
def test_report_by_hub_id_from_the_fake_cache(fake_hub, tmp_path):
    """Pretrained weights read by hub id; the twins built from the same config; OPT's blocks
    (its layers under decoder.layers, its MLP input flattened) are described by behaviour, so
    the structural section runs."""
    out = tmp_path / "hub-report"
    assert cli.main(["report", "--model", fake_hub["id"], "--length", "256", "--quick",
                     "--quiet", "--out", str(out)]) == 0
    obj, page = _check_report_dir(out)
    assert obj["meta"]["hub_id"] == fake_hub["id"] and obj["meta"]["weights"] == "pretrained"
    bt = obj["born_trained"]
    assert bt["paired_ids"] is True  # the twin read the same token ids
    assert set(bt["change"]) == {"ptv", "valley", "primacy", "recency"}
    st = obj["structural"]
    assert st["available"] is True and all(0 < v < 1 for v in st["lambda"])
    assert obj["task"]["available"], obj["task"]
    assert 'id="structural-unavailable"' not in page and bt["born"]["twins"] == 3
    # a real pretrained-vs-twin difference: different weights, different profiles
    assert bt["trained"]["curve"]["mean"] != bt["born"]["curve"]["mean"]


def _saved(model_type, path):
    """A tiny model of the architecture matrix (tests/archs.py) saved with save_pretrained."""
    from tests import archs

    archs.build(model_type).save_pretrained(str(path))
    return path


def test_structural_section_names_the_refused_architecture(tmp_path):
    d = _saved("gptj", tmp_path / "gptj")
    sec = R._structural(str(d), "random", 16, R.SETTINGS["quick"], 0, None)
    assert sec["available"] is False and "in parallel" in sec["reason"]
    assert "\n" not in sec["reason"]


@pytest.mark.parametrize("model_type,match", [("bert", "not causal"),
                                              ("mamba", "not an attention model")])
def test_encoders_and_ssms_are_refused_in_one_line(model_type, match, tmp_path, capsys):
    d = _saved(model_type, tmp_path / model_type)
    capsys.readouterr()  # save_pretrained's own progress bar
    for cmd in (["report", "--quick", "--quiet", "--out", str(tmp_path / "r" / "deep")],
                ["profile", "--length", "16", "--quiet"], ["rollout", "--length", "16"]):
        assert cli.main([cmd[0], "--model", str(d), "--weights", "random"] + cmd[1:]) == 2, cmd
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and match in err, err
    assert not (tmp_path / "r").exists()  # the failed report left nothing behind


# --------------------------------------------------------------------------------------------
# Bad input: one line on stderr, exit 2, before any computation


@pytest.fixture
def no_work(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("computation started before the input was checked")

    # wraps: the command reads its defaults from the function's signature
    monkeypatch.setattr(R, "report", functools.wraps(R.report)(boom))


@pytest.mark.parametrize("extra, match", [
    (["--model", "nobody/no-such-model"], "HF_HUB_OFFLINE"),
    (["--model", "gpt2-tiny", "--length", "300"], "beyond the context"),
    (["--model", "gpt2-tiny", "--out", "/proc/posbias-report"], "--out"),
    (["--model", "gpt2-tiny", "--length", "8"], "at least 16"),
])
def test_bad_input_exits_2_with_one_line(extra, match, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = ["report", "--quick", "--quiet", "--weights", "random", "--out",
            str(tmp_path / "out")] + extra
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("posbias: error:") and match in err, err


def test_directory_without_config_exits_2(tmp_path, capsys):
    (tmp_path / "empty-model").mkdir()
    assert cli.main(["report", "--model", str(tmp_path / "empty-model"), "--quick",
                     "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "without config.json" in err


def test_unwritable_out_is_refused_before_any_work(no_work, tmp_path, capsys):
    f = tmp_path / "a-file"
    f.write_text("x")
    for out in ("/proc/posbias-report", str(f)):
        assert cli.main(["report", "--model", "gpt2-tiny", "--quick", "--out", out]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--out" in err, err


def test_out_is_created_with_its_parents_and_removed_after_a_failure(tmp_path, capsys,
                                                                     monkeypatch):
    def fails(*a, **k):
        raise ValueError("a failure inside the run")
    monkeypatch.setattr(R, "report", functools.wraps(R.report)(fails))
    out = tmp_path / "new" / "deeper" / "report"
    assert cli.main(["report", "--model", "gpt2-tiny", "--quick", "--out", str(out)]) == 2
    assert "a failure inside the run" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()  # nothing left that was not there before
    keep = tmp_path / "kept"
    keep.mkdir()
    assert cli.main(["report", "--model", "gpt2-tiny", "--quick", "--out", str(keep)]) == 2
    assert keep.is_dir()  # a folder that was there stays


def test_train_refuses_an_unwritable_out_before_training(monkeypatch, capsys):
    from posbias_nb.experiments import training

    monkeypatch.setattr(training, "train_run", functools.wraps(training.train_run)(
        lambda *a, **k: pytest.fail("trained first")))
    assert cli.main(["train", "--steps", "1", "--out", "/proc/x.json"]) == 2
    assert "--out '/proc/x.json' is not writable" in capsys.readouterr().err


def test_structural_section_beyond_its_maximum_measures_at_the_cap(monkeypatch):
    monkeypatch.setattr(R, "STRUCTURAL_MAX", 32)
    s = dict(R.SETTINGS["quick"], n_boot=100)
    sec = R._structural("gpt2-tiny", "random", 64, s, 0, None)  # W is re-measured at 32
    assert sec["available"] and sec["length"] == 32
    assert len(sec["prediction"]["residual"]) == 32 and len(sec["lambda"]) == 2
    assert sec["spearman"]["residual"]["low"] <= sec["spearman"]["residual"]["high"]


def test_window_statistics_read_the_declared_regions():
    L = 100
    p = np.ones(L)
    p[0], p[-1] = 4.0, 8.0
    p[60:70] = 0.5  # the valley
    ws = R._window_stats(np.vstack([p / p.sum()] * 3))
    assert np.allclose(ws["primacy"], 4.0) and np.allclose(ws["recency"], 8.0)
    assert np.all((ws["valley"] >= 0.6) & (ws["valley"] <= 0.7))
    # a flat window has no arms: the counterexample the claims must not call a U
    flat = R._window_stats(np.full((3, L), 1.0 / L))
    assert np.allclose(flat["primacy"], 1.0) and np.allclose(flat["recency"], 1.0)


def test_heatmap_reuses_the_main_run_at_its_length_exactly():
    """The heatmap cell at the report's own length is the main run cut to the heatmap's
    examples: equal to a run with that many examples (examples are seeded one by one)."""
    from posbias_nb.experiments import retrieval as RR

    kw = dict(task="kv", positions=3, length=200, seed=0, weights="random")
    big = RR.retrieval_run("gpt2-tiny", examples=4, **kw)
    small = RR.retrieval_run("gpt2-tiny", examples=2, **kw)
    M = RR.outcome_matrices(big)
    assert np.allclose(np.nanmean(M["logprob"][:2], 0), small["logprob"], rtol=0, atol=1e-9)
    assert np.allclose(np.nanmean(M["accuracy"][:2], 0), small["accuracy"])


@pytest.mark.slow
def test_same_seed_same_numbers_without_the_cache(monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")
    kw = dict(weights="random", length=64, quick=True)
    a = R.report("qwen2-tiny", seed=0, **kw).to_json()
    b = R.report("qwen2-tiny", seed=0, **kw).to_json()
    c = R.report("qwen2-tiny", seed=1, **kw).to_json()
    assert json.dumps(a) == json.dumps(b)
    assert a["born_trained"] != c["born_trained"]
    assert a["task"]["available"] is False and "too small" in a["task"]["reason"]
    assert "did not run" in a["summary"]


@pytest.mark.slow
def test_report_on_a_sliding_only_model_beyond_its_reach_finishes(tmp_path):
    """Gemma-3 with every layer sliding (window 4, 2 layers: reach 6 tokens) at L = 64: the
    influence beyond the reach is exactly 0, which no power of the Cesaro matrix gives; the
    report says so and finishes."""
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model("gemma3_text", vocab_size=300, hidden_size=32, num_hidden_layers=2,
                               num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                               intermediate_size=64, max_position_embeddings=256, pad_token_id=0,
                               sliding_window=4, layer_types=["sliding_attention"] * 2)
    torch.manual_seed(0)
    d = tmp_path / "gemma3-sliding"
    AutoModelForCausalLM.from_config(cfg).save_pretrained(str(d))
    out = tmp_path / "rep"
    assert cli.main(["report", "--model", str(d), "--weights", "random", "--length", "64",
                     "--quick", "--quiet", "--out", str(out)]) == 0
    obj, page = _check_report_dir(out)
    th = obj["born_trained"]["born"]["theory"]
    assert th["available"] is False and th["zeros"] > 0 and "sliding" in th["reason"]
    assert "not made" in page
    # the layout's own row is drawn instead: zero beyond the reach, fitted on the rest
    assert obj["meta"]["layout"] == "2*sliding:4"
    lt = obj["born_trained"]["born"]["layout_theory"]
    assert lt["available"] and lt["reachable"] == 7 and lt["layout"] == "2*sliding:4"
    row = np.asarray(lt["row"])
    assert np.all(row[:-7] == 0) and np.all(row[-7:] > 0)
    assert "Layout theory row (born)" in page and "2*sliding:4" in page


def test_a_checkpoint_without_its_lm_head_is_warned_in_one_line(tmp_path, capsys):
    """transformers initialises a missing LM head at random and says nothing on our stderr:
    the command says it, once, in one line, and the report records it."""
    from transformers import LlamaConfig, LlamaModel

    from posbias_nb.models import weights

    cfg = LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False,
                      max_position_embeddings=256, pad_token_id=0)
    torch.manual_seed(0)
    d = tmp_path / "headless"
    LlamaModel(cfg).save_pretrained(str(d))
    capsys.readouterr()
    weights.LOAD_WARNINGS.pop(str(d), None)
    assert cli.main(["profile", "--model", str(d), "--weights", "pretrained", "--length", "16",
                     "--probes", "2", "--quiet", "--out", str(tmp_path / "p.csv")]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    warn = [ln for ln in err if "LM head" in ln]
    assert len(warn) == 1 and "initialised them at random" in warn[0], err
    assert weights.LOAD_WARNINGS[str(d)] == warn[0]


# --------------------------------------------------------------------------------------------
# Ratios that cannot be formed (issue 34): 0 / m, m / 0 and 0 / 0, each with its own reason


def test_ratio_forms_zero_infinity_and_no_ratio_without_a_warning():
    import warnings

    from posbias_nb.experiments import report as rep

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy RuntimeWarning would fail here
        assert rep._ratio(2.0, 4.0) == 0.5
        assert rep._ratio(0.0, 4.0) == 0.0
        assert rep._ratio(1.0, 0.0) == float("inf")
        assert np.isnan(rep._ratio(0.0, 0.0))


def test_unformed_reason_counts_each_kind_and_passes_positive_ratios():
    from posbias_nb.experiments import report as rep

    assert rep.unformed_reason("primacy", [1.5, 2.0, 0.3]) is None
    why = rep.unformed_reason("primacy", [0.0, 0.0, 2.0, np.inf, np.nan])
    assert why.startswith("first / middle cannot be formed")
    assert "exactly 0 in 2 of 5" in why and "infinite" in why and "0 / 0" in why
    # 0 / 0 is not called infinite
    only_nan = rep.unformed_reason("recency", [np.nan, np.nan])
    assert "0 / 0" in only_nan and "infinite" not in only_nan
    # the headline refuses an interval and carries the reason, never raising
    iv = rep._finite_iv(rep._ret.ratio_interval, [0.0, 1.0, 2.0], "primacy")
    assert np.isnan(iv["estimate"]) and "cannot be formed" in iv["reason"]
    iv = rep._two_way(np.array([[0.0, 1.0], [1.0, 2.0]]), True, "primacy")
    assert np.isnan(iv["estimate"]) and "cannot be formed" in iv["reason"]
    ok = rep._two_way(np.array([[1.0, 2.0], [1.5, 2.5]]), True, "primacy")
    assert np.isfinite(ok["estimate"]) and "reason" not in ok


def test_change_of_a_ratio_not_formed_names_which_side():
    from posbias_nb.experiments import report as rep

    a = {"primacy": np.array([0.0, 0.0])}
    b = {"primacy": np.array([2.0, 3.0])}
    c = rep._change(a, [b], "primacy")
    assert np.isnan(c["estimate"]) and c["reason"].startswith("the trained first / middle")
    c = rep._change(b, [a], "primacy")
    assert c["reason"].startswith("the born first / middle")


@pytest.mark.slow
@pytest.mark.parametrize("model_type, window, length", [
    ("gemma3_text", 64, 128),  # every layer sliding: the first token out of reach
    ("mistral", 16, 40),       # reach 31: positions 1..9 out of reach
])
def test_report_where_the_first_tokens_are_out_of_reach_finishes_and_says_why(
        model_type, window, length, tmp_path):
    """The report on trained-style weights (a checkpoint) whose first positions lie beyond the
    sliding windows' reach: it finishes (exit 0), says which ratios it could not form and why,
    and no numpy warning reaches stderr."""
    import os
    import subprocess
    import sys

    from transformers import AutoModelForCausalLM

    from tests import archs

    cfg = archs.config(model_type)
    cfg.sliding_window = window
    if model_type == "gemma3_text":
        cfg.layer_types = ["sliding_attention"] * cfg.num_hidden_layers
    torch.manual_seed(0)
    d = tmp_path / model_type
    AutoModelForCausalLM.from_config(cfg).save_pretrained(str(d))
    out = tmp_path / "rep"
    env = dict(os.environ, HF_HUB_OFFLINE="1", POSBIAS_CACHE_DIR="off")
    r = subprocess.run([sys.executable, "-m", "posbias_nb", "report", "--model", str(d),
                        "--length", str(length), "--quick", "--quiet", "--out", str(out)],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    assert "RuntimeWarning" not in r.stderr, r.stderr  # no numpy warning reaches the user
    obj = json.loads((out / "report.json").read_text())
    prim = {c["key"]: c for c in obj["claims"]}["born_primacy"]
    assert prim["verdict"] == "not testable"
    assert "first / middle cannot be formed" in prim["reason"]
    assert "infinite" not in prim["reason"] or "middle's median is exactly 0" in prim["reason"]
    page = (out / "index.html").read_text()
    assert "no interval" in page and "cannot be formed" in page
    # the task's reason uses the user's --length and names the shortest that fits
    if not obj["task"]["available"]:
        assert f"--length {length} " in obj["task"]["reason"]
        assert "needs --length" in obj["task"]["reason"]


def _claim(key, verdict):
    return {"key": key, "claim": key, "verdict": verdict}


@pytest.mark.parametrize("claims, says, never", [
    # the task loses the middle: the advice says so
    ([_claim("trained_primacy", "holds"), _claim("task_first", "holds"),
      _claim("task_last", "fails")], "loses the middle", "not tested"),
    # the profile favours the ends but the task was not testable: never "the middle is lost"
    ([_claim("trained_primacy", "holds"), _claim("trained_recency", "holds"),
      _claim("task_first", "not testable"), _claim("task_last", "not testable")],
     "was not tested here", "loses the middle"),
    # tested, and the middle not lost
    ([_claim("trained_recency", "holds"), _claim("task_first", "fails"),
      _claim("task_last", "inconclusive")], "did not show the middle lost", "loses the middle"),
    ([_claim("trained_primacy", "fails")], "Nothing above shows the middle lost",
     "loses the middle"),
])
def test_the_summary_says_the_middle_is_lost_only_where_a_task_claim_holds(claims, says, never):
    from posbias_nb.experiments.report import _fix_advice

    text = _fix_advice(claims, "smollm2-135m")
    assert says in text and never not in text


@pytest.mark.parametrize("model", ["smollm2-135m", "/tmp/my model", "org/name"])
def test_the_summarys_command_parses_with_the_cli_parser(model):
    """The command the summary prints is one a reader can paste: ASCII hyphens, quoted where
    the shell needs it, and accepted by the CLI's own parser."""
    import re
    import shlex

    from posbias_nb import cli
    from posbias_nb.experiments.report import _fix_advice

    text = _fix_advice([_claim("task_first", "holds")], model)
    cmd = re.search(r"`(posbias [^`]+)`", text).group(1)
    assert "\u2013" not in cmd and "\u2014" not in cmd
    args = cli.build_parser().parse_args(shlex.split(cmd)[1:])
    assert args.model == model
    # the check rejects a counterexample: an en-dash where the hyphens were
    with pytest.raises(cli.UsageError):
        cli.build_parser().parse_args(shlex.split(cmd.replace("--model", "\u2013model"))[1:])
