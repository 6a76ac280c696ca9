"""Inference-time remedies (models.remedies, measure.positional, experiments.remedy.inference): exact restoration, each remedy changes what it should and nothing else, checks
against independent references, bad parameters, determinism (the --remedy flags of the command:
tests/integration/test_inference_cli.py)."""
import numpy as np
import pytest
import torch

from posbias_nb import measure, metrics, models
from posbias_nb.measure import positional
from posbias_nb.models.remedies import (REMEDIES, later_layers, ms_poe_layers, remedy,
                                        row_probabilities, yu_layers)

TINY = ("smollm2-tiny", "gemma3-tiny", "qwen2-tiny")


@pytest.fixture(scope="module")
def tiny():
    out = {}
    for name in TINY:
        m, _, _ = models.load(name, weights="random", seed=0)
        out[name] = m
    return out


def _shape(m):
    a = models.decoder_layers(m)[0].self_attn
    H = a.q_proj.out_features // a.head_dim
    return len(models.decoder_layers(m)), H, a.k_proj.out_features // a.head_dim


def _params(m, name, L=24):
    T, H, hk = _shape(m)
    if name in ("hidden-scaling", "hidden-scaling-all"):
        return {"channel": 3, "scale": -1.0}
    if name == "ms-poe":
        return {}
    if name == "attention-calibration":
        return {"spans": [(1, 5), (5, 9), (9, 14)], "relevance": [0.02, 0.0, -0.01],
                "temperature": 0.01, "start": 16}
    rng = np.random.default_rng(0)
    return {"prior": rng.random((len(later_layers(T)), H, 6, L)) + 0.01, "row0": L - 6,
            "tau": 1.0}


IDS = torch.randint(0, 200, (2, 24), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("name", REMEDIES)
@pytest.mark.parametrize("model", TINY)
def test_remedy_changes_logits_and_restores_exactly(tiny, model, name):
    m = tiny[model]
    with torch.no_grad():
        before = m(IDS).logits.clone()
        impl = m.config._attn_implementation
        with remedy(m, name, **_params(m, name)):
            inside = m(IDS).logits.clone()
            inside2 = m(IDS).logits.clone()
        after = m(IDS).logits
    assert torch.equal(after, before)  # bit-identical after the block
    assert m.config._attn_implementation == impl
    assert not (inside - before).abs().max() < 1e-4  # it changes the logits
    assert torch.equal(inside, inside2)  # deterministic
    for mod in m.modules():
        assert not hasattr(mod, "_posbias_remedy") and not hasattr(mod, "_posbias_base")
        assert not mod._forward_pre_hooks


def test_restores_after_an_error_inside_the_block(tiny):
    m = tiny["smollm2-tiny"]
    before = m(IDS).logits.detach().clone()
    with pytest.raises(RuntimeError, match="boom"):
        with remedy(m, "ms-poe"):
            raise RuntimeError("boom")
    assert torch.equal(m(IDS).logits.detach(), before)


@pytest.mark.parametrize("model", TINY)
def test_calibration_leaves_rows_before_start_untouched(tiny, model):
    m = tiny[model]
    p = _params(m, "prior-calibration")
    with torch.no_grad():
        before = m(IDS).logits
        with remedy(m, "prior-calibration", **p):
            inside = m(IDS).logits
    r0 = p["row0"]
    assert torch.equal(inside[:, :r0], before[:, :r0])
    assert (inside[:, r0:] - before[:, r0:]).abs().max() > 1e-4


def test_calibration_with_zero_temperature_is_the_model(tiny):
    m = tiny["gemma3-tiny"]  # sliding-window layers: the wrapper keeps the model's own mask
    p = dict(_params(m, "prior-calibration"), tau=0.0)
    with torch.no_grad():
        before = m(IDS).logits
        with remedy(m, "prior-calibration", **p):
            inside = m(IDS).logits
    torch.testing.assert_close(inside, before, rtol=0, atol=1e-5)


def test_row_probabilities_calibrated_by_their_own_prior_are_uniform():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 4, 10, 8, generator=g), torch.randn(1, 2, 10, 8, generator=g)
    p = row_probabilities(q, k, 3)
    assert torch.allclose(p.sum(-1), torch.ones(1, 4, 7))
    assert torch.all(p[..., 0, 5:] == 0)  # row 3 sees keys 0..3 only
    logw = torch.log(p[0].clamp_min(1e-30))
    cal = row_probabilities(q, k, 3, logw=logw.where(p[0] > 0, torch.zeros(())), tau=1.0)
    for r in range(7):
        torch.testing.assert_close(cal[0, :, r, :r + 4], torch.full((4, r + 4), 1 / (r + 4)))
    # a wrong prior does not flatten the rows: the check can fail
    cal_wrong = row_probabilities(q, k, 3, logw=torch.zeros_like(logw), tau=1.0)
    assert not torch.allclose(cal_wrong[0, :, 6, :10], torch.full((4, 10), 0.1), atol=1e-3)


@pytest.mark.parametrize("model", ["smollm2-tiny", "qwen2-tiny"])
def test_ms_poe_with_one_ratio_equals_compressed_positions(tiny, model):
    """Independent reference: every head compressed by r in every layer is the model run at
    positions t / r."""
    m = tiny[model]
    T, H, hk = _shape(m)
    L = IDS.shape[1]
    every = list(range(T))
    with torch.no_grad():
        ref = m(IDS, position_ids=(torch.arange(L, dtype=torch.float32) / 1.5)[None]).logits
        with remedy(m, "ms-poe", ratios=np.full(H, 1.5), layers=every):
            got = m(IDS).logits
        plain = m(IDS).logits
        with remedy(m, "ms-poe", ratios=np.ones(H), layers=every):
            one = m(IDS).logits
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)
    assert (got - plain).abs().max() > 1e-3
    torch.testing.assert_close(one, plain, rtol=0, atol=1e-6)  # ratio 1: angle 0


def test_default_layers():
    assert yu_layers(32) == list(range(10, 26)) and ms_poe_layers(32) == list(range(2, 32))
    assert later_layers(8) == [4, 5, 6, 7] and yu_layers(2) == [1]


def test_hidden_scaling_all_touches_queries_and_keys_only(tiny):
    m = tiny["smollm2-tiny"]
    a = models.decoder_layers(m)[0].self_attn

    def observe(seen):  # registered after the remedy's hooks, so it sees what they pass on
        return [getattr(a, n).register_forward_pre_hook(
            lambda mod, args, n=n: seen.__setitem__(n, args[0].detach().clone()))
            for n in ("q_proj", "k_proj", "v_proj")]

    base, seen = {}, {}
    with torch.no_grad():
        hooks = observe(base)
        m(IDS)
        for h in hooks:
            h.remove()
        with remedy(m, "hidden-scaling-all", channel=5, scale=0.0, layers=[0]):
            hooks = observe(seen)
            m(IDS)
            for h in hooks:
                h.remove()
    assert torch.equal(seen["v_proj"], base["v_proj"])  # values untouched
    for n in ("q_proj", "k_proj"):
        assert torch.all(seen[n][..., 5] == 0) and not torch.all(base[n][..., 5] == 0)
        keep = [c for c in range(base[n].shape[-1]) if c != 5]
        assert torch.equal(seen[n][..., keep], base[n][..., keep])


@pytest.mark.parametrize("name,params,match", [
    ("nope", {}, "remedy must be one of"),
    ("hidden-scaling", {"scale": 0.5}, "needs channel"),
    ("hidden-scaling", {"channel": 10 ** 6, "scale": 0.5}, "channel must be"),
    ("hidden-scaling", {"channel": 1, "scale": float("nan")}, "scale must be"),
    ("hidden-scaling", {"channel": 1, "scale": 0.5, "layers": [99]}, "layers must be"),
    ("hidden-scaling", {"channel": 1, "scale": 0.5, "tau": 1}, "takes"),
    ("hidden-scaling", {"channel": 1, "scale": 0.5, "start": -1}, "start must be"),
    ("hidden-scaling", {"channel": 1, "scale": 0.5, "context": [1]}, "context must be"),
    ("hidden-scaling-all", {"channel": 1, "scale": 0.5, "start": 3}, "takes"),
    ("ms-poe", {"ratios": [0.5, 1.0, 1.0, 1.0]}, "ratios must be"),
    ("ms-poe", {"ratios": [1.2, 1.3, 1.4]}, "ratios must be"),
    ("ms-poe", {"lo": 0.5}, "lo must be"),
    ("ms-poe", {"assign": "sorted"}, "assign must be"),
    ("attention-calibration", {"relevance": [0.0], "temperature": 1.0}, "needs spans"),
    ("attention-calibration", {"spans": [(3, 2)], "relevance": [0.0], "temperature": 1.0},
     "spans must be"),
    ("attention-calibration", {"spans": [(1, 3)], "relevance": [0.0, 1.0], "temperature": 1.0},
     "relevance has"),
    ("attention-calibration", {"spans": [(1, 3)], "relevance": [0.0], "temperature": 0.0},
     "temperature must be"),
    ("attention-calibration", {"spans": [(1, 3), (2, 4)], "relevance": [0.0, 0.0],
                               "temperature": 1.0}, "overlap"),
    ("prior-calibration", {"row0": 1, "tau": 1}, "needs prior"),
    ("prior-calibration", {"prior": np.ones((1, 4, 2, 8)), "row0": 6, "tau": -1}, "tau must"),
    ("prior-calibration", {"prior": np.ones((1, 4, 2, 7)), "row0": 6, "tau": 1}, "prior must"),
    ("prior-calibration", {"prior": np.ones((2, 4, 2, 8)), "row0": 6, "tau": 1}, "prior must"),
])
def test_bad_parameters(tiny, name, params, match):
    m = tiny["smollm2-tiny"]
    with pytest.raises(ValueError, match=match):
        with remedy(m, name, **params):
            pass
    assert not any(mod._forward_pre_hooks for mod in m.modules())


def test_ms_poe_needs_rope():
    m, _, _ = models.load("gpt2-tiny", weights="random", seed=0)
    with pytest.raises(ValueError):
        with remedy(m, "ms-poe"):
            pass


def test_calibration_outside_the_measured_rows_is_an_error(tiny):
    m = tiny["smollm2-tiny"]
    p = _params(m, "prior-calibration", L=16)  # prior measured for 16 tokens, input has 24
    with pytest.raises(ValueError, match="prior covers"):
        with remedy(m, "prior-calibration", **p), torch.no_grad():
            m(IDS)


def test_calibration_spans_must_end_before_the_calibrated_rows(tiny):
    m = tiny["smollm2-tiny"]
    with pytest.raises(ValueError, match="end before start"):
        with remedy(m, "attention-calibration", spans=[(1, 20)], relevance=[0.0],
                    temperature=1.0, start=10), torch.no_grad():
            m(IDS)


def test_monotone_channels_finds_the_planted_channel():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(50, 16))
    v[:, 7] = np.linspace(0, 1, 50) + 0.01 * rng.normal(size=50)
    rho = metrics.monotone_channels(v)
    assert int(np.nanargmax(np.abs(rho))) == 7 and rho[7] > 0.99
    v[:, 7] = rng.normal(size=50)  # counterexample: no channel tracks position
    assert np.nanmax(np.abs(metrics.monotone_channels(v))) < 0.6


def test_positional_channel_and_rows_on_a_tiny_model(tiny):
    m = tiny["gemma3-tiny"]  # 6 layers: Yu et al.'s stages need layers 2 .. T - 2
    V = m.get_input_embeddings().num_embeddings
    from posbias_nb.tasks.text import random_ascii_batch
    search = random_ascii_batch(None, 400, 2, seed=0, vocab_size=V)
    g = np.random.default_rng(0)
    P = [g.integers(0, V, 12).tolist() for _ in range(3)]
    A = [g.integers(0, V, 3).tolist() for _ in range(3)]
    ch = positional.positional_channel(m, search, P, A, top=4)
    assert 1 <= len(ch["candidates"]) <= 4 and ch["channel"] in ch["candidates"].tolist()
    assert ch["channel"] == int(ch["candidates"][np.nanargmin(ch["losses"])])
    assert ch["values"].shape == (400,) and np.isfinite(ch["baseline_loss"])
    with pytest.raises(ValueError, match="leave none"):
        positional.positional_channel(tiny["smollm2-tiny"], search)  # 2 layers
    m = tiny["smollm2-tiny"]
    ids = measure.text_batch(None, 32, 3, seed=0, vocab_size=m.get_input_embeddings().num_embeddings)
    rows = positional.attention_rows(m, ids, 28)
    T, H, _ = _shape(m)
    assert rows.shape == (T, H, 4, 32)
    np.testing.assert_allclose(rows.sum(-1), 1.0, atol=1e-6)
    # the tap reads the probabilities the model uses: against output_attentions (eager)
    m.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            att = m(torch.as_tensor(ids), output_attentions=True).attentions
    finally:
        m.set_attn_implementation("sdpa")
    ref = torch.stack([a[:, :, 28:].double().mean(0) for a in att]).numpy()
    np.testing.assert_allclose(rows, ref, atol=1e-5)
    nll = positional.row_nll(m, ids, 20)
    assert nll.shape == (3,) and np.all(nll > 0)
    with pytest.raises(ValueError):
        positional.attention_rows(m, ids, 40)


def test_per_sequence_starts_batched_equal_one_by_one(tiny):
    """Prompts of different lengths, right-padded in one batch, each with its own first
    recomputed row, score as they do alone."""
    from posbias_nb.measure.scoring import score, score_batch

    g = np.random.default_rng(3)
    for model, name, p in (("smollm2-tiny", "hidden-scaling", {"channel": 3, "scale": -1.0}),
                           ("qwen2-tiny", "ms-poe", {})):
        m = tiny[model]
        P = [g.integers(0, 200, n).tolist() for n in (18, 15, 20, 16)]
        A = [g.integers(0, 200, a).tolist() for a in (3, 5, 2, 4)]

        def within(rows):
            return remedy(m, name, start=[len(P[q]) - 1 for q in rows], **p)
        lp, _ = score_batch(m, P, A, within=within)
        plain, _ = score_batch(m, P, A)
        for i in range(4):
            with remedy(m, name, start=len(P[i]) - 1, **p):
                one, _ = score(m, P[i], A[i])
            assert abs(lp[i] - one) < 1e-4
        assert np.all(np.abs(plain - lp) > 1e-7)  # the remedy did act


def test_random_ascii_batch_is_yu_et_als_corpus():
    from posbias_nb.tasks.text import ASCII_ALPHABET, random_ascii_batch
    a = random_ascii_batch(None, 50, 3, seed=1, vocab_size=256)
    assert a.shape == (3, 50) and np.array_equal(a, random_ascii_batch(None, 50, 3, seed=1,
                                                                          vocab_size=256))
    assert set(bytes(a.ravel().tolist()).decode()) <= set(ASCII_ALPHABET)  # no whitespace
    assert " " not in ASCII_ALPHABET and len(ASCII_ALPHABET) == 94
    assert not np.array_equal(a, random_ascii_batch(None, 50, 3, seed=2, vocab_size=256))
    with pytest.raises(ValueError):
        random_ascii_batch(None, 50, 3)


def test_verdict_effect_reads_the_claims_rule():
    from posbias_nb import stats
    from posbias_nb.experiments.remedy.inference import verdict_effect

    above = {"claim": {"direction": "greater", "threshold": 0.0}, "adjusted": (0.3, 0.1, 0.5),
             "testable": True}
    e = verdict_effect(above)
    assert e == dict(interval=(0.3, 0.1, 0.5), direction="greater", testable=True,
                     threshold=0.0, scale=1.0)
    assert stats.decide(e["interval"], e["threshold"], e["direction"]) == "holds"
    band = {"claim": {"direction": "within", "band": [-0.1, 0.1]},
            "adjusted": (0.0, -0.05, 0.2), "testable": True}
    assert verdict_effect(band)["band"] == (-0.1, 0.1)
    flat = dict(above, testable=False)
    assert verdict_effect(flat)["interval"] == (0.0, 0.0, 0.0)  # untestable: no interval


def test_setting_text():
    from posbias_nb.experiments.remedy.fix import setting_text

    assert setting_text({"ranker": "bm25", "tau": 0.25, "slot_quality": [1, 2]}) == \
        "ranker = bm25, tau = 0.25"
    assert setting_text(None) == "none" and setting_text({}) == "(one setting)"
