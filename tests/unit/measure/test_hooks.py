"""Measured attention kernels and attention shares (posbias_nb.capture) on test-size twins."""
from __future__ import annotations

import argparse
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from posbias_nb import measure, metrics, models, rollout  # noqa: E402,F401

TINY = ["gpt2-tiny", "qwen2-tiny", "bloom-tiny", "falcon-rw-tiny", "mpt-tiny"]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "cache"))


def _ids(m, L=12, B=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, m.get_input_embeddings().num_embeddings, size=(B, L))


@pytest.mark.parametrize("name", TINY)
def test_kernels_stochastic_causal_and_lambda_in_unit_interval(name):
    m, _, _ = models.load(name, "random", seed=1, attn="eager")
    res = measure.capture_model(m, _ids(m))
    A, lam = res["A"], res["lam"]
    T = models.describe(name)["n_layers"]
    assert A.shape == (T, 12, 12) and lam.shape == (T,)
    assert np.allclose(A.sum(axis=2), 1.0, atol=1e-12)
    assert np.all(A >= 0)
    assert np.all(np.triu(A, 1) == 0)
    assert np.all(res["upper_mass"] < 1e-6)
    assert np.all((lam > 0) & (lam < 1))
    assert res["lam_pos"].shape == (T, 12)
    # per window: the unit of an interval over windows; each window's lambda is that of the
    # window captured alone, and their mean over windows is lambda
    ids = _ids(m)
    assert res["lam_win"].shape == (T, 3)
    assert np.allclose(res["lam_win"].mean(axis=1), lam, rtol=1e-12, atol=0)
    for b in range(3):
        alone = measure.capture_model(m, ids[b:b + 1])
        assert np.allclose(res["lam_win"][:, b], alone["lam"], rtol=1e-5, atol=1e-7)
    assert np.ptp(res["lam_win"], axis=1).max() > 0  # windows differ


def test_alibi_zoo_entries_have_real_sizes():
    sizes = {n: (models.describe(n)["n_layers"], models.describe(n)["hidden_size"])
             for n in models.ALIBI_MODELS}
    assert sizes == {"bloom-560m": (24, 1024), "falcon-rw-1b": (24, 2048), "mpt-1b": (24, 2048)}
    assert models.build_config("bloom-560m").vocab_size == 250880
    cfg = models.build_config("falcon-rw-1b")
    assert cfg.alibi and not cfg.parallel_attn and not cfg.multi_query and cfg.bias
    assert not cfg.new_decoder_architecture and cfg.vocab_size == 50304
    mpt = models.build_config("mpt-1b")
    assert mpt.attn_config.alibi and mpt.n_heads == 16 and mpt.vocab_size == 50368


def test_lambda_and_kernel_by_hand_gpt2():
    """Recompute A_t and lambda_t of a tiny GPT-2 from its weights and hidden states."""
    m, _, _ = models.load("gpt2-tiny", "random", seed=3, attn="eager")
    ids = torch.as_tensor(_ids(m, L=10, B=2, seed=5))
    res = measure.capture_model(m, ids.numpy())
    with torch.no_grad():
        out = m.transformer(input_ids=ids, output_hidden_states=True, output_attentions=True)
        for t, block in enumerate(m.transformer.h):
            x = out.hidden_states[t]  # the residual stream entering block t
            P = out.attentions[t]  # (B, H, L, L)
            qkv = block.attn.c_attn(block.ln_1(x))
            v = qkv.split(m.config.n_embd, dim=2)[2]
            B, L, d = v.shape
            H = m.config.n_head
            v = v.view(B, L, H, d // H).transpose(1, 2)
            a = block.attn.c_proj((P @ v).transpose(1, 2).reshape(B, L, d))
            r = a.norm(dim=-1) / (x.norm(dim=-1) + a.norm(dim=-1))
            assert res["lam"][t] == pytest.approx(float(r.double().mean()), rel=1e-5)
            assert np.allclose(res["A"][t], P.double().mean(dim=(0, 1)).numpy(), atol=1e-6)


@pytest.mark.parametrize("mode", measure.MODES)
def test_predictions_are_probability_vectors(mode):
    c = measure.capture("bloom-tiny", "random", length=16, batch=2, seed=0)
    p = measure.predict(c, mode)
    assert p.shape == (16,) and np.all(p >= 0) and p.sum() == pytest.approx(1.0, abs=1e-12)


def test_attention_only_and_residual_match_rollout():

    c = measure.capture("gpt2-tiny", "random", length=12, batch=2, seed=0)
    assert np.allclose(measure.predict(c, "attention"), rollout.rollout(c["A"], 1.0))
    assert np.allclose(measure.predict(c, "residual"), rollout.rollout(c["A"], c["lam"]))


def test_positional_kernels():

    assert np.allclose(measure.config_kernel("gpt2", 5, 4), rollout.uniform_causal(5))
    assert np.allclose(measure.config_kernel("bloom", 5, 4), rollout.alibi(5, 4))
    cfg = models.build_config("falcon-rw-1b")  # head size 64: logits (bias included) / 8
    assert np.allclose(measure.config_kernel("falcon", 5, 32, cfg),
                       rollout.alibi(5, 32, scale=1 / 8))
    assert np.allclose(measure.config_kernel("mpt", 5, 16, models.build_config("mpt-1b")),
                       rollout.alibi(5, 16))


def test_content_mode_matches_mean_diagonal():
    c = measure.capture("qwen2-tiny", "random", length=12, batch=2, seed=0)
    K = measure.config_kernel("qwen2", 12, 4)
    for t in range(c["A"].shape[0]):
        target = float(np.diagonal(c["A"][t]).mean())
        d = rollout.matched_diag(K, target)

        Kt = rollout.content(12, d, base=K)
        assert np.diagonal(Kt).mean() == pytest.approx(target, abs=1e-12)


def test_determinism_and_cache(monkeypatch):
    a = measure.capture("mpt-tiny", "random", length=10, batch=2, seed=4)
    # a warm call must not load a model
    monkeypatch.setattr(models, "load", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    b = measure.capture("mpt-tiny", "random", length=10, batch=2, seed=4)
    assert np.array_equal(a["A"], b["A"]) and np.array_equal(a["lam"], b["lam"])


def test_determinism_without_cache(monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")
    a = measure.capture("falcon-rw-tiny", "random", length=10, batch=2, seed=2)
    b = measure.capture("falcon-rw-tiny", "random", length=10, batch=2, seed=2)
    c = measure.capture("falcon-rw-tiny", "random", length=10, batch=2, seed=3)
    assert np.array_equal(a["A"], b["A"]) and np.array_equal(a["lam"], b["lam"])
    assert not np.array_equal(a["lam"], c["lam"])


def test_measured_influence_same_sequences():
    c = measure.capture("gpt2-tiny", "random", length=12, batch=2, seed=0)
    i = measure.measured_influence("gpt2-tiny", "random", length=12, batch=2, seed=0)
    assert np.array_equal(c["input_ids"], i["input_ids"])
    assert i["influence"].shape == (12,) and np.all(i["influence"] > 0)
    assert -1 <= metrics.spearman(measure.predict(c, "residual"), i["influence"]) <= 1


def test_sdpa_model_is_refused():
    m, _, _ = models.load("gpt2-tiny", "random", attn="sdpa")
    with pytest.raises(ValueError, match="eager"):
        measure.capture_model(m, _ids(m))


# ------------------------------------------------------------------------------ command line
def _parser():
    from posbias_nb import cli

    return cli.build_parser()


def _run(argv):
    import io

    from posbias_nb import results

    args = _parser().parse_args(argv)
    buf = io.StringIO()
    results.write(args.func(args), args.format, buf)
    return buf.getvalue()


def test_cli_csv_and_json():
    import json

    txt = _run(["rollout", "--model", "bloom-tiny", "--length", "8", "--batch", "2"])
    lines = txt.strip().splitlines()
    assert lines[0] == "position,influence" and len(lines) == 9
    assert sum(float(r.split(",")[1]) for r in lines[1:]) == pytest.approx(1.0)
    obj = json.loads(_run(["rollout", "--model", "bloom-tiny", "--length", "8", "--batch", "2",
                           "--format", "json", "--mode", "attention"]))
    assert obj["position"] == list(range(1, 9)) and len(obj["lambda"]) == 2
    assert all(0 < v < 1 for v in obj["lambda"])
    lam = _run(["rollout", "--model", "bloom-tiny", "--length", "8", "--batch", "2",
                "--lambdas"]).strip().splitlines()
    assert lam[0] == "layer,lambda" and len(lam) == 3


@pytest.mark.parametrize("argv, msg", [
    (["--model", "nope", "--length", "8"], "unknown model"),
    (["--model", "bloom-tiny", "--length", "1"], "length"),
    (["--model", "bloom-tiny", "--length", "100000"], "beyond the context"),
    (["--model", "bloom-tiny", "--length", "8", "--weights", "pretrained"], "not installed"),
    (["--model", "bloom-tiny", "--length", "8", "--batch", "0"], "batch"),
])
def test_cli_errors_are_one_line(argv, msg):
    args = _parser().parse_args(["rollout", *argv])
    with pytest.raises(ValueError) as e:
        args.func(args)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_cli_bad_mode_is_usage_error():
    from posbias_nb import cli

    with pytest.raises(cli.UsageError):
        _parser().parse_args(["rollout", "--model", "bloom-tiny", "--length", "8",
                              "--mode", "bogus"])


@pytest.mark.parametrize("name, qkv", [("bloom-tiny", "self_attention.query_key_value"),
                                       ("falcon-rw-tiny", "self_attention.query_key_value"),
                                       ("mpt-tiny", "attn.Wqkv")])
def test_positional_kernel_is_the_models_content_free_attention(name, qkv):
    """With queries and keys zeroed, the model's own attention is its positional kernel."""
    m, _, info = models.load(name, "random", seed=0, attn="eager")
    for layer in models.decoder_layers(m):
        mod = layer.get_submodule(qkv)
        mod.weight.zero_()
        if getattr(mod, "bias", None) is not None:
            mod.bias.zero_()
    res = measure.capture_model(m, _ids(m, L=12, B=1))
    K = measure.config_kernel(info["family"], 12, info["n_heads"], m.config)
    for t in range(res["A"].shape[0]):  # Falcon rounds its ALiBi bias to bfloat16
        assert np.allclose(res["A"][t], K, atol=5e-3), (name, t)


def test_predict_needs_architecture_for_positional_modes():
    c = {"A": np.stack([np.eye(3)]), "lam": np.array([0.5])}
    assert np.allclose(measure.predict(c, "residual"), [0, 0, 1])
    with pytest.raises(ValueError, match="architecture"):
        measure.predict(c, "positional")
    with pytest.raises(ValueError, match="mode"):
        measure.predict(c, "bogus")


def test_falcon_eager_alibi_fix_matches_sdpa():
    ids = torch.as_tensor(np.random.default_rng(1).integers(0, 300, size=(2, 14)))
    out = {}
    for attn in ("sdpa", "eager"):
        m, _, _ = models.load("falcon-rw-tiny", "random", seed=5, attn=attn)
        with torch.no_grad():
            out[attn] = m.base_model(input_ids=ids).last_hidden_state
    # models.load installs the fix on eager Falcon; idempotent when called again
    assert models.fix_falcon_eager_alibi(m)
    assert torch.allclose(out["eager"], out["sdpa"], atol=1e-5)
    for layer in models.decoder_layers(m):  # remove the fix: the raw eager path applies ALiBi twice
        layer.self_attention._posbias_alibi_fix.remove()
        layer.self_attention._posbias_alibi_fix = None
    with torch.no_grad():
        raw = m.base_model(input_ids=ids).last_hidden_state
    assert not torch.allclose(raw, out["sdpa"], atol=1e-5)  # the unpatched eager path differs


def test_attention_logits_keep_the_sliding_window_mask():
    """Gemma 3's sliding-window layers stay masked while the logits are captured: the last
    (full-attention) layer's captured logits give the probabilities eager attention reports."""
    import numpy as np
    import torch

    from posbias_nb import models
    from posbias_nb.measure import attention_logits

    m, _, _ = models.load("gemma3-tiny", weights="random", seed=0)
    assert m.config.sliding_window < 40
    ids = torch.randint(0, 200, (1, 40), generator=torch.Generator().manual_seed(0))
    lg = attention_logits(m, ids.numpy())  # (B, layers, heads, L)
    m.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            att = m(ids, output_attentions=True).attentions
    finally:
        m.set_attn_implementation("sdpa")
    ref = att[-1][0, :, -1].double().numpy()
    got = torch.softmax(torch.as_tensor(lg[0, -1]).double(), -1).numpy()
    np.testing.assert_allclose(got, ref, atol=1e-5)
