"""Attention at a finite logit scale (chapter ch-born-scales): the logit's std against a Monte
Carlo of the initialiser, the softmax row's limits against its Monte Carlo, and the random
rollout's mean against the seed theory's row."""
import math

import numpy as np
import pytest

from posbias_nb import theory
from posbias_nb.theory import finite_g as F


# ---------------------------------------------------------------- the namespace
def test_public_names_are_in_theory_and_collide_with_nothing():
    others = set(theory.causal.__all__) | set(theory.layouts.__all__)
    assert not set(F.__all__) & others
    assert set(F.__all__) <= set(theory.__all__)
    for name in F.__all__:
        assert getattr(theory, name) is getattr(F, name)


# ---------------------------------------------------------------- logit_scale
def _mc_logit_std(sq, sk, d, dh, scale, qk_norm, reps=40, n=64, seed=0):
    """Std of scale * q.k over fresh W_q, W_k and unit-RMS inputs (the initialiser, in numpy)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(reps):
        wq, wk = rng.normal(0, sq, (dh, d)), rng.normal(0, sk, (dh, d))
        x = rng.standard_normal((n, d))
        x /= np.sqrt((x ** 2).mean(axis=1, keepdims=True))  # RMSNorm, unit gain
        q, k = x @ wq.T, x @ wk.T
        if qk_norm:
            q /= np.sqrt((q ** 2).mean(axis=1, keepdims=True))
            k /= np.sqrt((k ** 2).mean(axis=1, keepdims=True))
        out.append((scale * q @ k.T).ravel())
    return float(np.concatenate(out).std())


@pytest.mark.parametrize("sq, sk, scale, qk_norm", [
    (0.02, 0.02, None, False), (0.05, 0.03, 0.1, False),
    (0.02, 0.02, None, True), (0.3, 0.01, 0.0625, True)])
def test_logit_scale_matches_a_monte_carlo_of_the_initialiser(sq, sk, scale, qk_norm):
    d, dh = 256, 32
    g = theory.logit_scale(sq, sk, d, dh, scale=scale, qk_norm=qk_norm)
    mc = _mc_logit_std(sq, sk, d, dh, dh ** -0.5 if scale is None else scale, qk_norm)
    assert mc == pytest.approx(g, rel=0.03)


def test_logit_scale_closed_forms():
    # the standard scale: sigma^2 d whatever the head width
    for dh in (16, 64, 128):
        assert theory.logit_scale(0.02, 0.02, 2048, dh) == pytest.approx(0.02 ** 2 * 2048)
    # QK-norm: sqrt(d_h) * scale whatever sigma; Gemma-3's scale 1/sqrt(256) with d_h = 256: 1
    assert theory.logit_scale(0.5, 1e-3, 10, 256, scale=256 ** -0.5, qk_norm=True) == 1.0
    assert theory.logit_scale(0.0, 0.02, 10, 64, qk_norm=True) == 0.0
    assert theory.logit_scale(0.0, 0.02, 10, 64) == 0.0


@pytest.mark.parametrize("kwargs", [
    dict(sigma_q=-0.1), dict(sigma_k=float("nan")), dict(sigma_q=float("inf")),
    dict(sigma_q="a"), dict(sigma_k=True), dict(d=0), dict(d=2.5), dict(d_h=0),
    dict(d_h="8"), dict(scale=0), dict(scale=-1.0), dict(scale=float("inf")),
    dict(qk_norm="yes")])
def test_logit_scale_rejects_bad_input(kwargs):
    args = dict(sigma_q=0.02, sigma_k=0.02, d=64, d_h=16)
    args.update(kwargs)
    bad = next(iter(kwargs.values()))
    with pytest.raises(ValueError, match=next(iter(kwargs))) as e:
        theory.logit_scale(args.pop("sigma_q"), args.pop("sigma_k"), args.pop("d"),
                           args.pop("d_h"), **args)
    assert repr(bad) in str(e.value)


# ---------------------------------------------------------------- one softmax row
def test_the_limits_are_the_closed_forms():
    for g in (0.0, 0.3, 1.0, 2.5):
        assert theory.participation_limit(g) == math.exp(-g * g)
        assert theory.kl_limit(g) == g * g / 2


@pytest.mark.parametrize("g", [0.25, 0.5, 0.8])
def test_softmax_monte_carlo_converges_to_the_limits(g):
    """At n = 4096 the means lie within 4 standard errors of the limits (their O(1/n) bias,
    about e^{4g^2}/n, is below one standard error for these g)."""
    r = theory.softmax_uniformity(g, 4096, draws=400, seed=1)
    assert abs(r["participation"] - theory.participation_limit(g)) < 4 * r["participation_se"]
    assert abs(r["kl"] - theory.kl_limit(g)) < 4 * r["kl_se"]
    assert r["participation_limit"] == theory.participation_limit(g)
    assert r["kl_limit"] == theory.kl_limit(g)


def test_softmax_error_shrinks_with_n():
    """At g = 1 the finite-n bias dominates at small n and has mostly gone at n = 4096."""
    err = [abs(theory.softmax_uniformity(1.0, n, draws=300, seed=2)["participation"]
               - math.exp(-1.0)) for n in (32, 4096)]
    assert err[1] < err[0] / 4


@pytest.mark.parametrize("n", [1, 7, 512])
def test_softmax_at_g_zero_is_exactly_uniform(n):
    r = theory.softmax_uniformity(0.0, n, draws=3, seed=5)
    assert (r["participation"], r["participation_se"], r["kl"], r["kl_se"]) == (1.0, 0.0, 0.0, 0.0)


def test_softmax_one_key_is_uniform_at_any_g():
    r = theory.softmax_uniformity(3.0, 1, draws=5)
    assert r["participation"] == 1.0 and r["kl"] == 0.0


def test_softmax_uniformity_is_monotone_in_g():
    """Common random numbers: for each draw n_eff falls and KL rises with g (the Renyi-2 and
    Shannon entropies of a Gibbs family fall with the inverse temperature), so the means do."""
    rs = [theory.softmax_uniformity(g, 256, draws=50, seed=3) for g in (0.0, 0.2, 0.5, 1.0, 2.0)]
    part, kl = [r["participation"] for r in rs], [r["kl"] for r in rs]
    assert all(a > b for a, b in zip(part, part[1:]))
    assert all(a < b for a, b in zip(kl, kl[1:]))


def test_softmax_uniformity_is_reproducible_bit_for_bit():
    a = theory.softmax_uniformity(0.7, 300, draws=20, seed=11)
    assert a == theory.softmax_uniformity(0.7, 300, draws=20, seed=11)
    assert a != theory.softmax_uniformity(0.7, 300, draws=20, seed=12)


@pytest.mark.parametrize("kwargs", [
    dict(g=-0.5), dict(g=float("nan")), dict(g=float("inf")), dict(g=None), dict(n=0),
    dict(n=3.0), dict(draws=1), dict(draws=0), dict(seed=-1), dict(seed=1.5)])
def test_softmax_uniformity_rejects_bad_input(kwargs):
    args = dict(g=0.5, n=16, draws=4, seed=0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=next(iter(kwargs))) as e:
        theory.softmax_uniformity(**args)
    assert repr(next(iter(kwargs.values()))) in str(e.value)


@pytest.mark.parametrize("f", [theory.participation_limit, theory.kl_limit])
@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "x", None, True])
def test_limits_reject_bad_g(f, bad):
    with pytest.raises(ValueError, match=r"g must be finite and >= 0, got " + repr(bad)):
        f(bad)


# ---------------------------------------------------------------- random_rollout
def _dense_rollout_one(L, logits_per_layer, alphas):
    """Oracle: the last row of R_H ... R_1 by dense matrices, given each layer's logits."""
    P = np.eye(L)
    mask = np.tril(np.ones((L, L), dtype=bool))
    for s, a in zip(logits_per_layer, alphas):  # input layer first: P <- R_t P
        s = np.where(mask, s, -np.inf)
        A = np.exp(s - s.max(axis=1, keepdims=True))
        A /= A.sum(axis=1, keepdims=True)
        P = ((1 - a) * np.eye(L) + a * A) @ P
    return P[-1]


@pytest.mark.parametrize("shared", [0.0, 0.3])
def test_random_rollout_is_the_dense_product_of_its_layers(shared):
    """One draw rebuilt from its own random numbers: the same generator, the layers drawn top
    first (the triangle packed row by row, then xi), multiplied densely."""
    L, depth, g, alphas = 9, 3, 1.3, [0.2, 0.7, 1.0]
    row = theory.random_rollout(L, depth, g, alphas, draws=1, seed=4, shared=shared)[0]
    rng = np.random.default_rng(np.random.SeedSequence(4).spawn(1)[0])
    tri = np.tril_indices(L)
    layers = []
    for _ in range(depth):
        eta = np.zeros((L, L))
        eta[tri] = rng.standard_normal(L * (L + 1) // 2)
        xi = rng.standard_normal(L)
        layers.append(g * (math.sqrt(1 - shared) * eta + math.sqrt(shared) * xi[None, :]))
    layers = layers[::-1]  # drawn top layer first; the oracle wants the input layer first
    assert np.allclose(row, _dense_rollout_one(L, layers, alphas), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("shared", [0.0, 0.5])
def test_random_rollout_mean_is_the_seed_theory(shared):
    """E[A_t] = M and independent layers: the mean row is influence(L, depth, alpha) exactly;
    every position's mean lies within 5 standard errors of it."""
    L, depth, alpha, draws = 64, 4, 0.7, 2000
    rows = theory.random_rollout(L, depth, 1.0, alpha, draws=draws, seed=7, shared=shared)
    ref = theory.influence(L, depth, alpha)
    se = rows.std(axis=0, ddof=1) / math.sqrt(draws)
    assert np.all(se > 0)
    z = (rows.mean(axis=0) - ref) / se
    assert np.max(np.abs(z)) < 5, np.max(np.abs(z))
    assert np.allclose(rows.sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize("alpha", [1.0, 0.4, [0.1, 0.9, 0.5, 1.0, 0.0]])
def test_random_rollout_at_g_zero_is_the_seed_theory(alpha):
    rows = theory.random_rollout(40, 5, 0.0, alpha, draws=3, seed=1, shared=0.4)
    ref = theory.layout_influence("5*full", 40, alpha) if isinstance(alpha, list) \
        else theory.influence(40, 5, alpha)
    assert np.max(np.abs(rows - ref)) < 1e-12


def test_random_rollout_per_layer_alpha_is_a_scalar_alpha_when_constant():
    a = theory.random_rollout(30, 4, 0.9, 0.6, draws=2, seed=3)
    assert np.array_equal(a, theory.random_rollout(30, 4, 0.9, [0.6] * 4, draws=2, seed=3))


def test_random_rollout_depth_zero_and_alpha_zero_are_the_last_unit_vector():
    e = np.zeros(12)
    e[-1] = 1.0
    assert np.array_equal(theory.random_rollout(12, 0, 1.0, draws=2), np.stack([e, e]))
    assert np.array_equal(theory.random_rollout(12, 3, 1.0, 0.0, draws=2), np.stack([e, e]))


def test_random_rollout_scatter_grows_with_g():
    """Coefficient of variation across draws at a middle position: larger at g = 1.6 than at
    g = 0.3 (common random numbers, fixed seed)."""
    L, mid = 64, 32

    def cv(g):
        col = theory.random_rollout(L, 4, g, 0.7, draws=300, seed=9)[:, mid - 1]
        return col.std(ddof=1) / col.mean()

    assert cv(1.6) > 2 * cv(0.3) > 0


def test_random_rollout_is_reproducible_and_draws_are_prefix_stable():
    a = theory.random_rollout(50, 3, 1.2, 0.5, draws=5, seed=3, shared=0.2)
    assert np.array_equal(a, theory.random_rollout(50, 3, 1.2, 0.5, draws=5, seed=3, shared=0.2))
    assert np.array_equal(a[:2], theory.random_rollout(50, 3, 1.2, 0.5, draws=2, seed=3,
                                                        shared=0.2))
    assert not np.array_equal(a, theory.random_rollout(50, 3, 1.2, 0.5, draws=5, seed=4,
                                                       shared=0.2))


def test_random_rollout_batches_and_the_row_shift_agree(monkeypatch):
    """Batches of draws (a smaller work array) and the per-row softmax shift (forced) give the
    same rows as one batch with one shift per draw."""
    a = theory.random_rollout(40, 3, 2.0, 0.5, draws=6, seed=2, shared=0.3)
    monkeypatch.setattr(F, "_BATCH_ENTRIES", 40 * 41)  # one draw a batch
    monkeypatch.setattr(F, "_SHIFT", 0.0)  # always shift row by row
    b = theory.random_rollout(40, 3, 2.0, 0.5, draws=6, seed=2, shared=0.3)
    assert np.allclose(a, b, rtol=1e-12, atol=1e-300)


def test_random_rollout_survives_huge_logits():
    rows = theory.random_rollout(100, 3, 500.0, 0.5, draws=2, seed=0)
    assert np.all(np.isfinite(rows)) and np.allclose(rows.sum(axis=1), 1.0)


@pytest.mark.parametrize("kwargs, name", [
    (dict(L=0), "L"), (dict(L=2.0), "L"), (dict(depth=-1), "depth"), (dict(g=-0.1), "g"),
    (dict(g=float("nan")), "g"), (dict(alpha=1.5), "alpha"), (dict(alpha=-0.1), "alpha"),
    (dict(alpha=[0.5, 0.5]), "alpha"), (dict(alpha=[0.5, 2.0, 0.5]), "alpha"),
    (dict(draws=0), "draws"), (dict(seed=-3), "seed"), (dict(shared=1.2), "shared"),
    (dict(shared=float("nan")), "shared")])
def test_random_rollout_rejects_bad_input(kwargs, name):
    args = dict(L=8, depth=3, g=1.0, alpha=0.5, draws=2, seed=0, shared=0.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        theory.random_rollout(args.pop("L"), args.pop("depth"), args.pop("g"), args.pop("alpha"),
                              **args)
