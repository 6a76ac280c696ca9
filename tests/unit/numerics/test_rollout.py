"""Unit and property tests of posbias_nb.rollout against explicit matrix products."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from posbias_nb import rollout, theory


def random_kernels(rng, T, L, causal=False, power=1.0):
    K = rng.random((T, L, L)) ** power + 1e-3
    if causal:
        K = np.tril(K)
    return K / K.sum(axis=2, keepdims=True)


def direct_product(kernels, lambdas):
    """P = R_T ... R_1 by explicit matrix products, layer 1 first."""
    L = kernels[0].shape[0]
    P = np.eye(L)
    for A, lam in zip(kernels, lambdas):
        P = ((1 - lam) * np.eye(L) + lam * A) @ P
    return P


# ---------------------------------------------------------------- against the direct product
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("L,T", [(1, 3), (2, 1), (5, 4), (17, 9), (40, 25)])
def test_matches_direct_product_random_kernels(L, T, causal):
    rng = np.random.default_rng(L * 100 + T)
    K = random_kernels(rng, T, L, causal)
    lam = rng.random(T)
    P = direct_product(K, lam)
    np.testing.assert_allclose(rollout.rollout(K, lam), P[-1], rtol=0, atol=1e-14)
    np.testing.assert_allclose(rollout.rollout(K, lam, full=True), P, rtol=0, atol=1e-14)
    # a list of arrays is the same as the 3-D array
    np.testing.assert_allclose(rollout.rollout(list(K), lam), P[-1], rtol=0, atol=1e-14)


def test_order_of_layers_matters_and_layer_one_is_next_to_the_input():
    # two different kernels: R_2 R_1 differs from R_1 R_2
    L = 4
    A1, A2 = rollout.uniform_causal(L), rollout.sliding_window(L, 2)
    lam = [0.7, 0.4]
    P = direct_product([A1, A2], lam)  # R_2 R_1
    Q = direct_product([A2, A1], lam[::-1])  # R_1 R_2
    assert not np.allclose(P[-1], Q[-1])
    np.testing.assert_allclose(rollout.rollout([A1, A2], lam), P[-1], atol=1e-15)


def test_shared_kernel_equals_repeated_stack():
    rng = np.random.default_rng(3)
    A = random_kernels(rng, 1, 12)[0]
    lam = rollout.power_law(20, 0.9, 0.5)
    stack = np.repeat(A[None], 20, axis=0)
    np.testing.assert_allclose(rollout.rollout(A, lam), rollout.rollout(stack, lam), atol=1e-15)


def test_scalar_lambda_with_stack():
    rng = np.random.default_rng(4)
    K = random_kernels(rng, 5, 6)
    np.testing.assert_allclose(rollout.rollout(K, 0.3), rollout.rollout(K, np.full(5, 0.3)))


def test_rollout_path_matches_full_at_each_depth():
    rng = np.random.default_rng(5)
    K = random_kernels(rng, 8, 7, causal=True)
    lam = rng.random(8)
    Ps = rollout.rollout_path(K, lam, depths=[8, 0, 3, 3])
    np.testing.assert_allclose(Ps[0], direct_product(K, lam), atol=1e-14)
    np.testing.assert_allclose(Ps[1], np.eye(7))
    np.testing.assert_allclose(Ps[2], direct_product(K[:3], lam[:3]), atol=1e-14)
    np.testing.assert_allclose(Ps[3], Ps[2])
    assert rollout.rollout_path(K, lam).shape == (8, 7, 7)
    with pytest.raises(ValueError, match="depth must lie in 0..8"):
        rollout.rollout_path(K, lam, depths=[9])


# ---------------------------------------------------------------- against theory (Cesàro)
@pytest.mark.parametrize("L,T,alpha", [(1, 4, 0.5), (8, 0, 0.3), (30, 7, 0.25), (64, 12, 1.0),
                                       (100, 40, 0.6), (50, 5, 0.0)])
def test_cesaro_constant_lambda_equals_theory_influence(L, T, alpha):
    got = rollout.rollout(rollout.uniform_causal(L), rollout.constant(T, alpha))
    np.testing.assert_allclose(got, theory.influence(L, T, alpha), rtol=1e-11, atol=1e-300)


def test_uniform_causal_is_cesaro():
    np.testing.assert_array_equal(rollout.uniform_causal(9), theory.cesaro(9))


# ---------------------------------------------------------------- kernels
@pytest.mark.parametrize("make", [
    lambda L: rollout.uniform_causal(L),
    lambda L: rollout.bidirectional(L),
    lambda L: rollout.sliding_window(L, 3),
    lambda L: rollout.alibi(L, 8),
    lambda L: rollout.alibi(L, 12, scale=2.5),
    lambda L: rollout.content(L, 0.4),
    lambda L: rollout.content(L, -1.0 / max(L - 1, 1)),
    lambda L: rollout.content(L, -5.0, logit=True),
    lambda L: rollout.content(L, 3.0, base="bidirectional", logit=True),
])
@pytest.mark.parametrize("L", [1, 2, 7, 33])
def test_kernels_are_row_stochastic(make, L):
    A = make(L)
    assert A.shape == (L, L) and A.dtype == np.float64
    assert np.all(A >= 0)
    np.testing.assert_allclose(A.sum(axis=1), 1.0, atol=1e-13)


def test_sliding_window_edges():
    np.testing.assert_array_equal(rollout.sliding_window(5, 1), np.eye(5))
    np.testing.assert_allclose(rollout.sliding_window(5, 5), rollout.uniform_causal(5))
    np.testing.assert_allclose(rollout.sliding_window(5, 99), rollout.uniform_causal(5))


def test_alibi_slopes_follow_the_paper():
    np.testing.assert_allclose(rollout.alibi_slopes(8), 2.0 ** -np.arange(1, 9))
    np.testing.assert_allclose(rollout.alibi_slopes(16), 2.0 ** (-0.5 * np.arange(1, 17)))
    # not a power of two: 8 slopes of the 8-head set, then the odd ones of the 16-head set
    s12 = rollout.alibi_slopes(12)
    np.testing.assert_allclose(s12[:8], rollout.alibi_slopes(8))
    np.testing.assert_allclose(s12[8:], rollout.alibi_slopes(16)[0::2][:4])
    assert len(set(s12.tolist())) == 12


def test_alibi_matches_per_head_softmax():
    L, n = 10, 4
    i, j = np.meshgrid(np.arange(L), np.arange(L), indexing="ij")
    ref = np.zeros((L, L))
    for m in rollout.alibi_slopes(n):
        logits = np.where(j <= i, -m * (i - j), -np.inf)
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        ref += e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(rollout.alibi(L, n), ref / n, atol=1e-15)
    np.testing.assert_allclose(rollout.alibi(L, n, scale=0.0), rollout.uniform_causal(L))


def test_content_probability_space_is_a_residual():
    L = 20
    for d in (0.3, 0.9, -1 / (L - 1)):
        A = rollout.content(L, d)
        np.testing.assert_allclose(A, (1 - d) * rollout.uniform_causal(L) + d * np.eye(L), atol=1e-15)
        lam = rollout.constant(6, 0.5)
        np.testing.assert_allclose(rollout.rollout(A, lam),
                                   rollout.rollout(rollout.uniform_causal(L), lam * (1 - d)),
                                   atol=1e-14)


def test_content_logit_space():
    L = 6
    A = rollout.content(L, np.log(3.0), logit=True)
    # row i: weight 3 on itself, 1 on each of the i-1 others
    for i in range(1, L + 1):
        assert A[i - 1, i - 1] == pytest.approx(3 / (i + 2))
        if i > 1:
            assert A[i - 1, 0] == pytest.approx(1 / (i + 2))
    strict = rollout.content(L, -800.0, logit=True)  # e^d underflows: strict past
    np.testing.assert_allclose(strict[0], np.eye(L)[0])
    np.testing.assert_allclose(np.diag(strict)[1:], 0.0, atol=1e-300)
    big = rollout.content(L, 800.0, logit=True)  # no overflow
    np.testing.assert_allclose(big, np.eye(L), atol=1e-300)


@pytest.mark.parametrize("d", [-0.2, 1.01])
def test_content_rejects_negative_entries(d):
    with pytest.raises(ValueError, match="negative"):
        rollout.content(10, d)


def test_content_bad_base():
    with pytest.raises(ValueError, match="base must be"):
        rollout.content(4, 0.1, base="sideways")
    with pytest.raises(ValueError, match="shape"):
        rollout.content(4, 0.1, base=rollout.uniform_causal(3))
    with pytest.raises(ValueError, match="row-stochastic"):
        rollout.content(3, 0.1, base=np.ones((3, 3)))


# ---------------------------------------------------------------- schedules and control
def test_power_law_indexing():
    lam = rollout.power_law(4, 0.8, 2.0)
    np.testing.assert_allclose(lam, 0.8 / np.array([2, 3, 4, 5]) ** 2.0)
    np.testing.assert_allclose(rollout.power_law(3, 0.4, 0.0), [0.4] * 3)
    assert rollout.power_law(0, 1.0, 1.0).shape == (0,)


def test_control_quantities():
    lam = np.array([0.5, 0.25, 0.0, 1.0])
    A = rollout.uniform_causal(4)  # delta = 1 - 1/4
    c = rollout.control(A, lam)
    assert c.sum_lambda == pytest.approx(1.75)
    assert c.prod_keep == 0.0
    assert c.sum_lambda_delta == pytest.approx(1.75 * 0.75)
    assert c.prod_keep_delta == pytest.approx((1 - 0.375) * (1 - 0.1875) * 1 * 0.25)
    # per-layer deltas with a stack
    K = np.stack([np.eye(3), rollout.bidirectional(3)])
    np.testing.assert_allclose(rollout.deltas(K), [0.0, 2 / 3])
    c2 = rollout.control(K, [0.9, 0.3])
    assert c2.sum_lambda_delta == pytest.approx(0.2)


def test_control_products_do_not_underflow_early():
    c = rollout.control(rollout.uniform_causal(8), rollout.constant(3000, 0.3))
    assert c.prod_keep == 0.0  # 0.7^3000 is below float64: rounds to zero, no warning
    c = rollout.control(rollout.uniform_causal(8), rollout.power_law(10**5, 1.0, 2.0))
    assert c.prod_keep == pytest.approx(0.5, rel=1e-4)  # prod (1 - 1/(t+1)^2) -> 1/2


def test_diagonal_bound_holds():
    rng = np.random.default_rng(7)
    K = random_kernels(rng, 30, 9, power=3.0)
    lam = rng.random(30) * 0.6
    P = rollout.rollout(K, lam, full=True)
    assert np.diag(P).min() >= rollout.control(K, lam).prod_keep_delta * (1 - 1e-12)


def small_diagonal_kernel(L, d):
    """Causal kernel: token 1 reads itself, every other token keeps d of itself, rest uniform."""
    K = np.zeros((L, L))
    K[0, 0] = 1.0
    for i in range(1, L):
        K[i, :i] = (1.0 - d) / i
        K[i, i] = d
    return K


@pytest.mark.parametrize("T", [1, 3])
def test_diagonal_bound_is_accurate_when_a_token_keeps_almost_nothing(T):
    # lambda = 1 and a diagonal of 1e-8: the bound prod(1 - lam delta) is attained (every
    # P_ii = d^T for i >= 2).  Formed as 1 - lam (1 - d) it loses ~8 digits to cancellation and
    # can exceed the true diagonal (relative 1e-9 here); the code must keep it a lower bound.
    d = 1e-8
    K = small_diagonal_kernel(12, d)
    lam = np.ones(T)
    P = rollout.rollout(K, lam, full=True)
    exact = d ** T
    np.testing.assert_allclose(np.diag(P)[1:], exact, rtol=1e-14)
    assert rollout.control(K, lam).prod_keep_delta == pytest.approx(exact, rel=1e-14)
    assert rollout.keep_path(K, lam)[-1] == pytest.approx(exact, rel=1e-14)
    # the counterexample is real: the cancelling formula misses by far more than that
    naive = np.exp(T * np.log1p(-1.0 * (1.0 - d)))
    assert abs(naive / exact - 1) > 1e-10


def test_published_schedules():
    s = rollout.published_schedules()
    sums = {k: v[1].sum() for k, v in s.items()}
    assert 3.6 < min(sums.values()) and max(sums.values()) < 5.35
    for heads, lam in s.values():
        assert np.all((lam > 0) & (lam < 1))
        rollout.check_lambdas(lam)


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize("kernels,lambdas,match", [
    (np.ones((3, 4)) / 4, [0.5], "square"),
    (np.ones((2, 3, 4)) / 4, [0.5, 0.5], "square"),
    (np.ones(4), [0.5], r"\(L, L\) or \(T, L, L\)"),
    (np.full((3, 3), 0.5), [0.5], "row 1 sums to 1.5"),
    (np.array([[1.0, 0.0], [1.5, -0.5]]), [0.5], r"negative entry at \(2, 2\)"),
    (np.array([[1.0, 0.0], [np.nan, 0.5]]), [0.5], "non-finite"),
    (np.eye(3), [0.5, 1.2], r"lambda_2 = 1\.2"),
    (np.eye(3), [-0.1], "lambda_1"),
    (np.eye(3), [np.nan], "lambda_1"),
    (np.eye(3), [[0.5]], "1-D"),
    (np.eye(3), 0.5, "must be a sequence"),
    (np.stack([np.eye(3)] * 2), [0.5, 0.5, 0.5], "length 3 but there are 2 kernels"),
    (np.stack([np.eye(3)] * 2), 1.5, "lambda must lie in"),
    ([np.eye(2), np.eye(3)], [0.5, 0.5], "one common size"),
    (np.stack([np.eye(2), np.full((2, 2), 0.7)]), [0.5, 0.5], "layer 2"),
])
def test_rollout_rejects_bad_input(kernels, lambdas, match):
    with pytest.raises(ValueError, match=match):
        rollout.rollout(kernels, lambdas)


@pytest.mark.parametrize("call,match", [
    (lambda: rollout.uniform_causal(0), "L must be"),
    (lambda: rollout.sliding_window(5, 0), "w must be"),
    (lambda: rollout.alibi(5, 0), "n_heads must be"),
    (lambda: rollout.alibi(5, 8, scale=-1), "scale must be >= 0"),
    (lambda: rollout.alibi(5, 8, scale=np.inf), "scale must be finite"),
    (lambda: rollout.content(5, np.nan), "diag must be finite"),
    (lambda: rollout.constant(3, 1.5), "lam must lie in"),
    (lambda: rollout.constant(-1, 0.5), "T must be"),
    (lambda: rollout.power_law(3, 0.5, -1), "beta must be >= 0"),
    (lambda: rollout.power_law(3, 2.0, 1), "lam0 must lie in"),
    (lambda: rollout.check_lambdas([0.1, 0.2], T=3), "length 2 but there are 3"),
    (lambda: rollout.check_lambdas(["a"]), "lambdas must be"),
])
def test_constructors_reject_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---------------------------------------------------------------- properties
@st.composite
def stacks(draw, max_L=12, max_T=10, causal=None):
    L = draw(st.integers(1, max_L))
    T = draw(st.integers(0, max_T))
    raw = draw(hnp.arrays(np.float64, (T, L, L), elements=st.floats(0.0, 1.0)))
    raw = raw + 1e-6  # keep every row's sum positive
    if causal if causal is not None else draw(st.booleans()):
        raw = np.tril(raw)
    K = raw / raw.sum(axis=2, keepdims=True)
    lam = draw(hnp.arrays(np.float64, (T,), elements=st.floats(0.0, 1.0)))
    return L, K, lam


@settings(deadline=None)  # the number of examples comes from the profile (tests/conftest.py)
@given(stacks())
def test_property_row_is_a_probability_vector_and_matches_direct(data):
    L, K, lam = data
    v = rollout.rollout(K, lam) if len(lam) else rollout.rollout(np.eye(L), lam)
    assert v.shape == (L,)
    assert np.all(v >= 0)
    assert v.sum() == pytest.approx(1.0, abs=1e-12)
    if len(lam):
        np.testing.assert_allclose(v, direct_product(K, lam)[-1], rtol=0, atol=1e-12)
        P = rollout.rollout(K, lam, full=True)
        assert np.all(P >= 0)
        np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)


@settings(deadline=None)  # the number of examples comes from the profile (tests/conftest.py)
@given(stacks(max_T=8))
def test_property_lambda_zero_is_identity(data):
    L, K, lam = data
    if len(lam) == 0:
        return
    np.testing.assert_array_equal(rollout.rollout(K, np.zeros(len(lam))), np.eye(L)[-1])
    np.testing.assert_array_equal(rollout.rollout(K, np.zeros(len(lam)), full=True), np.eye(L))


@settings(deadline=None)  # the number of examples comes from the profile (tests/conftest.py)
@given(stacks(max_T=8))
def test_property_lambda_one_is_attention_only_product(data):
    L, K, lam = data
    if len(lam) == 0:
        return
    prod = np.eye(L)
    for A in K:
        prod = A @ prod  # A_T ... A_1
    np.testing.assert_allclose(rollout.rollout(K, np.ones(len(lam))), prod[-1], rtol=0, atol=1e-12)


@settings(deadline=None)  # the number of examples comes from the profile (tests/conftest.py)
@given(stacks(max_T=8, causal=True))
def test_property_causal_diagonal_is_product_of_diagonals(data):
    L, K, lam = data
    if len(lam) == 0:
        return
    P = rollout.rollout(K, lam, full=True)
    # (1 - lam) + lam * d: a sum of two non-negative terms, no cancellation when d is tiny
    # (the old reference 1 - lam * (1 - d) lost digits there; issue 17, part 0)
    d = np.diagonal(K, axis1=1, axis2=2)
    diag = np.prod((1 - lam[:, None]) + lam[:, None] * d, axis=0)
    np.testing.assert_allclose(np.diag(P), diag, rtol=1e-10, atol=1e-300)
    assert np.diag(P).min() >= rollout.control(K, lam).prod_keep_delta * (1 - 1e-10) - 1e-300


@settings(deadline=None)  # the number of examples comes from the profile (tests/conftest.py)
@given(L=st.integers(1, 40), T=st.integers(0, 25), a=st.floats(0.0, 1.0))
def test_property_cesaro_equivalence(L, T, a):
    got = rollout.rollout(rollout.uniform_causal(L), rollout.constant(T, a))
    np.testing.assert_allclose(got, theory.influence(L, T, a), rtol=1e-9, atol=1e-14)


# ------------------------------------------- steps_law, poisson_rollout, keep_path, collapse_bound
def test_steps_law_is_the_mixture_of_cesaro_powers():
    # eq-rollout-poisson-binomial: one shared kernel, the rollout is sum_k Pr(K = k) e_L M^k
    lams = rollout.power_law(12, 0.9, 0.7)
    pk = rollout.steps_law(lams)
    assert pk.shape == (13,) and abs(pk.sum() - 1) < 1e-14
    assert abs(pk[0] - rollout.control(rollout.uniform_causal(5), lams).prod_keep) < 1e-15
    mix = sum(pk[k] * theory.influence(30, k) for k in range(13))
    np.testing.assert_allclose(rollout.rollout(rollout.uniform_causal(30), lams), mix, atol=1e-14)
    with pytest.raises(ValueError):
        rollout.steps_law([0.5, 1.5])


def test_poisson_rollout_is_the_small_share_limit():
    M = rollout.uniform_causal(16)
    rows = rollout.poisson_rollout(M, [0.0, 2.0])
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=1e-12)
    assert rows[0, -1] == 1.0
    # many layers of small shares with the same total: close to the Poisson row ...
    many = rollout.rollout(M, rollout.constant(2000, 2.0 / 2000))
    assert np.abs(many - rows[1]).max() < 1e-3
    # ... and a few large shares with the same total are not (a counterexample)
    few = rollout.rollout(M, rollout.constant(2, 1.0))
    assert np.abs(few - rows[1]).max() > 0.05
    with pytest.raises(ValueError):
        rollout.poisson_rollout(M, [-1.0])


def test_keep_path_bounds_the_diagonal_at_every_depth():
    rng = np.random.default_rng(3)
    K = random_kernels(rng, 30, 6, power=4)
    lam = rng.random(30) * 0.5
    path = rollout.keep_path(K, lam)
    P = rollout.rollout_path(K, lam, np.arange(1, 31))
    diag_min = np.diagonal(P, axis1=1, axis2=2).min(axis=1)
    assert np.all(diag_min >= path * (1 - 1e-12))
    assert path[-1] == pytest.approx(rollout.control(K, lam).prod_keep_delta, rel=1e-12)
    assert np.all(np.diff(path) <= 0)


def test_collapse_bound_holds_and_rejects_non_causal_kernels():
    lam = rollout.power_law(300, 1.0, 0.5)
    for K in (rollout.uniform_causal(12), rollout.alibi(12, 4)):
        b = rollout.collapse_bound(K, lam)
        assert 0 < b <= rollout.rollout(K, lam)[0] + 1e-12
    with pytest.raises(ValueError, match="causal"):
        rollout.collapse_bound(rollout.bidirectional(12), lam)


@pytest.mark.parametrize("L", [2, 7, 64])
@pytest.mark.parametrize("a", [0.02, 0.3, 0.9])
def test_content_diag_hits_the_requested_self_weight(L, a):
    for logit in (False, True):
        d = rollout.content_diag(L, a, logit=logit)
        assert rollout.content(L, d, logit=logit)[-1, -1] == pytest.approx(a, rel=1e-12)
    assert rollout.content_diag(L, 1 / L) == pytest.approx(0.0, abs=1e-15)
    with pytest.raises(ValueError):
        rollout.content_diag(L, 1.0, logit=True)
