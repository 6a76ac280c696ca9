"""Influence profiles: exact against autograd's Jacobian, Hutchinson within its stated error,
determinism, text batches, the cache."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from posbias_nb import measure, metrics, models  # noqa: E402


@pytest.fixture(scope="module", params=["gpt2-tiny", "qwen2-tiny"])
def tiny(request):
    m, tok, info = models.load(request.param, seed=3)
    return m


@pytest.fixture(scope="module")
def ids():
    return measure.text_batch(None, 20, 2, seed=1, vocab_size=300)


def _jacobian_norms(model, ids_row):
    x = model.get_input_embeddings()(torch.as_tensor(ids_row)[None])

    def f(e):
        return model.base_model(inputs_embeds=e).last_hidden_state[0, -1]

    J = torch.autograd.functional.jacobian(f, x)  # (d, 1, L, d)
    return J.double().pow(2).sum((0, 1, 3)).sqrt().numpy()


def test_exact_matches_autograd_jacobian(tiny, ids):
    ex = measure.influence_profile(tiny, ids, method="exact", chunk=7)
    for b in range(ids.shape[0]):
        ref = _jacobian_norms(tiny, ids[b])
        np.testing.assert_allclose(ex["per_sequence"][b], ref, rtol=1e-5)
    np.testing.assert_allclose(ex["influence"], ex["per_sequence"].mean(0))
    assert np.all(ex["stderr"] == 0)
    sd = ex["per_sequence"].std(0, ddof=1) / np.sqrt(2)
    np.testing.assert_allclose(ex["batch_stderr"], sd)


def test_chunk_changes_only_rounding(tiny, ids):
    a = measure.influence_profile(tiny, ids, method="exact", chunk=1)
    b = measure.influence_profile(tiny, ids, method="exact", chunk=32)
    np.testing.assert_allclose(a["influence"], b["influence"], rtol=1e-6)
    p1 = measure.influence_profile(tiny, ids, probes=6, chunk=1, seed=4)
    p2 = measure.influence_profile(tiny, ids, probes=6, chunk=4, seed=4)
    np.testing.assert_allclose(p1["influence"], p2["influence"], rtol=1e-6)


def test_hutchinson_within_its_stated_error(tiny, ids):
    ex = measure.influence_profile(tiny, ids, method="exact")["influence"]
    zs = []
    for seed in range(12):
        est = measure.influence_profile(tiny, ids, method="probes", probes=16, seed=seed)
        z = (est["influence"] - ex) / est["stderr"]
        assert np.all(np.abs(z) < 5), (seed, np.abs(z).max())
        zs.append(z)
    zs = np.array(zs)  # (seeds, L): the z-scores of one position across seeds are ~ N(0, 1)
    sd = zs.std(axis=0)
    assert 0.4 < np.median(sd) < 1.8, np.median(sd)
    assert abs(np.mean(zs)) < 1.0


def test_more_probes_smaller_error(tiny, ids):
    e4 = measure.influence_profile(tiny, ids, probes=4, seed=0)
    e64 = measure.influence_profile(tiny, ids, probes=64, seed=0)
    ratio = np.median(e4["stderr"] / e64["stderr"])
    assert 2.0 < ratio < 8.0  # ~ sqrt(16) = 4


def test_gaussian_probes_are_unbiased_too(tiny, ids):
    ex = measure.influence_profile(tiny, ids, method="exact")["influence"]
    est = measure.influence_profile(tiny, ids, probes=32, probe_dist="gaussian", seed=1)
    assert np.all(np.abs(est["influence"] - ex) < 5 * est["stderr"])


def test_same_seed_identical(tiny, ids):
    a = measure.influence_profile(tiny, ids, probes=4, seed=11)
    b = measure.influence_profile(tiny, ids, probes=4, seed=11)
    c = measure.influence_profile(tiny, ids, probes=4, seed=12)
    for k in a:
        assert np.array_equal(a[k], b[k]), k
    assert not np.array_equal(a["influence"], c["influence"])


def test_argmax_prob_target(tiny, ids):
    res = measure.influence_profile(tiny, ids[:1], target="argmax_prob")
    x = tiny.get_input_embeddings()(torch.as_tensor(ids[:1])).detach().requires_grad_(True)
    logits = tiny(inputs_embeds=x).logits[0, -1]
    p = torch.softmax(logits, -1)
    p[p.argmax()].backward()
    ref = x.grad[0].double().pow(2).sum(-1).sqrt().numpy()
    np.testing.assert_allclose(res["influence"], ref, rtol=1e-5)
    assert np.all(res["stderr"] == 0)


@pytest.mark.parametrize("kw,needle", [
    (dict(target="logits"), "target"),
    (dict(method="lanczos"), "method"),
    (dict(probes=1), "probes"),
    (dict(chunk=0), "chunk"),
    (dict(probe_dist="cauchy"), "probe_dist"),
    (dict(seed=-2), "seed"),
])
def test_influence_profile_rejects_bad_arguments(tiny, ids, kw, needle):
    with pytest.raises(ValueError, match=needle):
        measure.influence_profile(tiny, ids, **kw)


def test_influence_profile_rejects_bad_ids(tiny):
    with pytest.raises(ValueError, match="L >= 2"):
        measure.influence_profile(tiny, np.array([[3]]))
    with pytest.raises(ValueError, match="token ids"):
        measure.influence_profile(tiny, np.array([[3, 300]]))


def test_text_batch():
    a = measure.text_batch(None, 64, 3, seed=0)
    b = measure.text_batch(None, 64, 3, seed=0)
    c = measure.text_batch(None, 64, 3, seed=1)
    assert a.shape == (3, 64) and a.dtype == np.int64
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a.max() < 256
    text = bytes(a[0].astype(np.uint8)).decode("utf-8", errors="replace")
    assert sum(ch.isalpha() for ch in text) > 20  # it is text
    assert measure.text_batch(None, 8, 2, vocab_size=100).max() < 100
    r = measure.text_batch(None, 10, 2, source="random", vocab_size=50257)
    assert r.shape == (2, 10) and r.max() < 50257
    long = measure.text_batch(None, 10**7, 1)  # longer than the corpus: circular
    assert long.shape == (1, 10**7)
    assert len(measure.stdlib_corpus()) > 100_000
    assert len(measure.corpus_digest()) == 16


@pytest.mark.parametrize("kw,needle", [
    (dict(length=0, batch=1), "length"),
    (dict(length=4, batch=0), "batch"),
    (dict(length=4, batch=1, source="web"), "source"),
    (dict(length=4, batch=1, source="random"), "vocab_size"),
])
def test_text_batch_rejects_bad_input(kw, needle):
    with pytest.raises(ValueError, match=needle):
        measure.text_batch(None, **kw)


def test_profile_goes_through_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path))
    a = measure.profile("qwen2-tiny", length=12, probes=4, batch=2, seed=1, progress=False)
    assert set(a) >= {"influence", "stderr", "batch_stderr", "input_ids"}
    assert a["input_ids"].shape == (2, 12)
    assert len(list(tmp_path.rglob("*.npz"))) == 1

    def boom(*args, **kw):
        raise AssertionError("cache miss: the model was loaded again")

    monkeypatch.setattr(models, "load", boom)
    b = measure.profile("qwen2-tiny", length=12, probes=4, batch=2, seed=1, progress=False)
    for k in a:
        assert np.array_equal(a[k], b[k])
    monkeypatch.undo()
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path))
    off = measure.profile("qwen2-tiny", length=12, probes=4, batch=2, seed=1, rope=False,
                          progress=False)
    assert not np.array_equal(off["influence"], a["influence"])
    assert len(list(tmp_path.rglob("*.npz"))) == 2


def test_profile_deterministic_without_cache(monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")
    a = measure.profile("gpt2-tiny", length=10, probes=3, seed=4, progress=False)
    b = measure.profile("gpt2-tiny", length=10, probes=3, seed=4, progress=False)
    assert np.array_equal(a["influence"], b["influence"])
    ex = measure.profile("gpt2-tiny", length=10, method="exact", seed=4, progress=False)
    assert np.all(np.abs(a["influence"] - ex["influence"]) < 5 * a["stderr"])


@pytest.mark.parametrize("kw,needle", [
    (dict(model="gpt3", length=8), "unknown model"),
    (dict(model="gpt2", length=1), "length"),
    (dict(model="gpt2", length=1025), "beyond the context of gpt2"),
    (dict(model="gpt2", length=8, rope=False), "no rotary"),
    (dict(model="gpt2", length=8, weights="pretrained"), "not installed"),
    (dict(model="gpt2", length=8, probes=1), "probes"),
    (dict(model="gpt2", length=8, batch=0), "batch"),
    (dict(model="gpt2", length=8, target="loss"), "target"),
    (dict(model="gpt2", length=8, source="web"), "source"),
])
def test_profile_rejects_bad_arguments(kw, needle, monkeypatch):
    monkeypatch.setattr(models, "load", lambda *a, **k: pytest.fail("validation must come first"))
    with pytest.raises(ValueError, match=needle):
        measure.profile(**kw)


@pytest.mark.parametrize("name", ["gpt2-tiny", "qwen2-tiny"])
def test_attention_logits_match_eager_probabilities(name):
    m, _, _ = models.load(name, seed=1, attn="eager")  # output_attentions below needs eager
    ids = measure.text_batch(None, 12, 2, vocab_size=300)
    lg = measure.attention_logits(m, ids)
    assert lg.shape == (2, 2, 4, 12)
    assert m.config._attn_implementation == "eager"  # restored
    with torch.no_grad():
        att = m(torch.as_tensor(ids), output_attentions=True).attentions
    for layer in range(2):
        p = torch.softmax(torch.as_tensor(lg[:, layer]), -1).numpy()
        np.testing.assert_allclose(p, att[layer][:, :, -1].numpy(), rtol=1e-5, atol=1e-7)


def test_fit_alpha_recovers_the_theory():
    from posbias_nb import theory

    for a in (0.1, 0.4, 0.8):
        row = theory.influence(200, 6, a)
        assert metrics.fit_alpha(row * 3.0, 6) == pytest.approx(a, abs=1e-4)
        assert metrics.fit_alpha(row, 6, criterion="last") == pytest.approx(a, abs=1e-6)
    with pytest.raises(ValueError, match="criterion"):
        metrics.fit_alpha(row, 6, criterion="l2")
    with pytest.raises(ValueError, match="positive"):
        metrics.fit_alpha([0.0, 1.0], 2)


def test_corpus_independent_of_imports_and_frozen_modules():
    import subprocess
    import sys

    code = ("import torch, inspect; from posbias_nb import measure; "
            "print(measure.corpus_digest())")
    r = subprocess.run([sys.executable, "-X", "frozen_modules=off", "-c", code],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == measure.corpus_digest()


def test_a_profiled_model_is_loaded_once_for_what_follows(monkeypatch):
    """Issue 33: profile() loads through the memo, with the defaults spelled out, so the
    layouts study (profile, then the layout check) and the retrieval runs (profile, then
    prompts) load a model once; a different seed is a different model."""
    from posbias_nb import models
    from posbias_nb.measure import cached, entry

    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")
    calls = []
    real = models.load
    monkeypatch.setattr(models, "load", lambda *a, **k: calls.append(a) or real(*a, **k))
    entry.forget()
    cached.profile("gpt2-tiny", "random", length=16, probes=2, batch=1, seed=0, progress=False)
    m1 = entry.profile_model("gpt2-tiny", "random", 0)[0]
    m2 = entry.loaded("gpt2-tiny", "random", 0)[0]
    assert len(calls) == 1 and m1 is m2
    entry.loaded("gpt2-tiny", "random", 1)
    assert len(calls) == 2
    entry.forget()
