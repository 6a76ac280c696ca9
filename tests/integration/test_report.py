"""`posbias report` (issue 21) run on tiny models: hub ids from a fake offline hub cache, one-line
errors before any work, reports beyond a sliding window's reach, and the page's numbers against
report.json.  The span view, the theory fit and the ratios on made-up numbers are in
tests/unit/studies/test_report_rules.py."""
from __future__ import annotations

import base64
import io
import functools
import json
import re

import numpy as np
import pytest

# --------------------------------------------------------------------------------------------
# Models: tiny zoo twins, a fake hub cache

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from posbias_nb import cli, models  # noqa: E402
from posbias_nb.experiments import report as R  # noqa: E402
from posbias_nb.experiments.report import measurements as RM, words as RW  # noqa: E402

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
        assert shown == RW.fmt(v), key
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
    sec = RM.structural(str(d), "random", 16, R.SETTINGS["quick"], 0, None)
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
    from posbias_nb.experiments.remedy import lab as training

    monkeypatch.setattr(training, "train_run", functools.wraps(training.train_run)(
        lambda *a, **k: pytest.fail("trained first")))
    assert cli.main(["train", "--steps", "1", "--out", "/proc/x.json"]) == 2
    assert "--out '/proc/x.json' is not writable" in capsys.readouterr().err


def test_structural_section_beyond_its_maximum_measures_at_the_cap(monkeypatch):
    monkeypatch.setattr(RM, "STRUCTURAL_MAX", 32)  # what the measurements read
    s = dict(R.SETTINGS["quick"], n_boot=100)
    sec = RM.structural("gpt2-tiny", "random", 64, s, 0, None)  # W is re-measured at 32
    assert sec["available"] and sec["length"] == 32
    assert len(sec["prediction"]["residual"]) == 32 and len(sec["lambda"]) == 2
    assert sec["spearman"]["residual"]["low"] <= sec["spearman"]["residual"]["high"]


def test_heatmap_reuses_the_main_run_at_its_length_exactly():
    """The heatmap cell at the report's own length is the main run cut to the heatmap's
    examples: equal to a run with that many examples (examples are seeded one by one)."""
    from posbias_nb.experiments.prompt import retrieval as RR

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


