"""Unit and property tests of posbias_nb.theory against exact rationals."""
from fractions import Fraction
import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from posbias_nb import theory


# ---------------------------------------------------------------- cesaro
def test_cesaro_float_and_exact_agree():
    M = theory.cesaro(5)
    Me = theory.cesaro(5, exact=True)
    assert np.allclose(M, np.array(Me.evalf(), dtype=float))
    assert Me[4, 2] == sp.Rational(1, 5) and Me[2, 4] == 0


def test_cesaro_eigenvalues_are_reciprocals():
    assert theory.cesaro(6, exact=True).eigenvals() == {sp.Rational(1, i): 1 for i in range(1, 7)}


@pytest.mark.parametrize("bad", [0, -3, 2.5, "4", True, None])
def test_cesaro_rejects_bad_length(bad):
    with pytest.raises(ValueError, match="L must be an integer"):
        theory.cesaro(bad)


# ---------------------------------------------------------------- influence, exact
@pytest.mark.parametrize("L,H", [(1, 3), (5, 1), (6, 3), (8, 4)])
def test_exact_matches_sympy_matrix_power(L, H):
    row = (theory.cesaro(L, exact=True) ** H).row(L - 1)
    got = theory.influence(L, H, exact=True)
    assert [sp.Rational(q.numerator, q.denominator) for q in got] == list(row)


@pytest.mark.parametrize("alpha", ["3/10", Fraction(1, 2), sp.Rational(2, 7), 0, 1, 0.25])
def test_exact_residual_matches_sympy(alpha):
    L, H = 6, 4
    a = sp.nsimplify(str(alpha)) if not isinstance(alpha, Fraction) else sp.Rational(alpha.numerator, alpha.denominator)
    N = (1 - a) * sp.eye(L) + a * theory.cesaro(L, exact=True)
    got = theory.influence(L, H, alpha=alpha, exact=True)
    assert [sp.Rational(q.numerator, q.denominator) for q in got] == list((N**H).row(L - 1))


def test_exact_known_values():
    # last entry of M^H is L^-H (the only chain that ends at L stays there)
    assert theory.influence(7, 3, exact=True)[-1] == Fraction(1, 343)
    # one layer is the uniform average
    assert theory.influence(4, 1, exact=True) == [Fraction(1, 4)] * 4
    # depth 0 is the identity row
    assert theory.influence(3, 0, exact=True) == [0, 0, 1]


def test_chain_sum_matches_recursion():
    for H in range(1, 5):
        assert [theory.chain_sum(6, j, H) for j in range(1, 7)] == theory.influence(6, H, exact=True)


def test_exact_mean_position_closed_form():
    # E[position] = 1 + (L-1)/2^H for the walk jumping uniformly at or before its position
    for L, H in [(9, 3), (20, 5)]:
        row = theory.influence(L, H, exact=True)
        assert sum(j * q for j, q in enumerate(row, 1)) == 1 + Fraction(L - 1, 2**H)


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize("kw,match", [
    (dict(L=0, depth=1), "L must be"),
    (dict(L=5, depth=-1), "depth must be"),
    (dict(L=5, depth=1.5), "depth must be"),
    (dict(L=5, depth=2, alpha=1.5), "alpha must lie in"),
    (dict(L=5, depth=2, alpha=-0.1), "alpha must lie in"),
    (dict(L=5, depth=2, alpha=float("nan")), "alpha"),
    (dict(L=5, depth=2, alpha="abc"), "alpha"),
])
@pytest.mark.parametrize("exact", [False, True])
def test_influence_rejects_bad_input(kw, match, exact):
    with pytest.raises(ValueError, match=match):
        theory.influence(exact=exact, **kw)


def test_density_rejects_x_outside_unit_interval():
    for bad in (0.0, -0.5, 1.5, np.nan):
        with pytest.raises(ValueError, match="x must lie in"):
            theory.density(bad, 3)
    with pytest.raises(ValueError, match="x must lie in"):
        theory.density(np.array([0.5, 2.0]), 3)


def test_recency_mass():
    assert theory.recency_mass(3, 0.5) == 0.125
    assert theory.recency_mass(0, 0.9) == 1.0
    with pytest.raises(ValueError):
        theory.recency_mass(3, 1.01)


# ---------------------------------------------------------------- float path
def test_float_matches_exact_residual():
    L, H, a = 40, 7, "2/5"
    ex = np.array([float(q) for q in theory.influence(L, H, alpha=a, exact=True)])
    fl = theory.influence(L, H, alpha=0.4)
    np.testing.assert_allclose(fl, ex, rtol=1e-12, atol=0)


def test_log_influence_beyond_float_range():
    # H = 200, alpha = 1: the last entry is L^-H = 10^-600, far below float64
    L, H = 1000, 200
    lv = theory.log_influence(L, H)
    assert lv[-1] == pytest.approx(-H * math.log(L), rel=1e-12)
    assert np.all(np.isfinite(lv))
    assert theory.influence(L, H)[-1] == 0.0  # rounds correctly to zero in float64


def test_stable_at_large_depth_and_length():
    row = theory.influence(10**5, 200, alpha=0.5)
    assert np.all(np.isfinite(row)) and np.all(row >= 0)
    assert row.sum() == pytest.approx(1.0, abs=1e-9)
    # the last entry is dominated by the recency spike (1-a)^H plus the k=1 term H a (1-a)^(H-1)/L
    approx_last = 0.5**200 * (1 + 200 / 1e5)
    assert row[-1] == pytest.approx(approx_last, rel=1e-3)


# ---------------------------------------------------------------- continuum
def test_density_closed_form_pure_attention():
    x = np.array([0.01, 0.3, 0.9, 1.0])
    for H in (1, 2, 5):
        expect = np.log(1 / x) ** (H - 1) / math.factorial(H - 1)
        np.testing.assert_allclose(theory.density(x, H), expect, rtol=1e-12)


def test_density_integrates_with_dirac_to_one():
    from scipy.integrate import quad
    for H, a in [(1, 0.3), (4, 0.5), (12, 0.9), (30, 0.2)]:
        smooth = quad(lambda x: theory.density(x, H, a), 0, 1, limit=200)[0]
        assert smooth + theory.recency_mass(H, a) == pytest.approx(1.0, abs=1e-7)


def test_density_large_depth_no_overflow():
    v = theory.density(np.array([1e-300, 1e-5, 0.5]), 400, 0.7)
    assert np.all(np.isfinite(v)) and np.all(v >= 0)


def test_continuum_row_sums_to_one_and_has_spike():
    r = theory.continuum_row(100, 5, 0.4)
    assert r.sum() == pytest.approx(1.0, abs=1e-12)
    assert r[-1] >= 0.6**5


# ---------------------------------------------------------------- properties
lengths = st.integers(min_value=1, max_value=60)
depths = st.integers(min_value=0, max_value=12)
alphas = st.fractions(min_value=0, max_value=1, max_denominator=20)


@settings(max_examples=60, deadline=None)
@given(L=lengths, H=depths, a=alphas)
def test_exact_row_is_a_probability_vector(L, H, a):
    row = theory.influence(L, H, alpha=a, exact=True)
    assert len(row) == L
    assert sum(row) == 1
    assert all(q >= 0 for q in row)


@settings(max_examples=60, deadline=None)
@given(L=lengths, H=depths, a=alphas)
def test_exact_equals_float(L, H, a):
    ex = np.array([float(q) for q in theory.influence(L, H, alpha=a, exact=True)])
    fl = theory.influence(L, H, alpha=float(a))
    np.testing.assert_allclose(fl, ex, rtol=1e-12, atol=1e-300)
    assert fl.sum() == pytest.approx(1.0, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(H=st.integers(1, 4), a=st.floats(0.05, 1.0))
def test_continuum_law_approached_as_L_grows(H, a):
    tv = [0.5 * np.abs(theory.influence(L, H, a) - theory.continuum_row(L, H, a)).sum()
          for L in (100, 1000, 10000)]
    assert tv[2] < tv[1] < tv[0] or tv[2] < 1e-12
    assert tv[2] < 0.01


@settings(max_examples=40, deadline=None)
@given(H=st.integers(1, 60), a=st.floats(0.0, 1.0), x=st.floats(1e-6, 1.0))
def test_density_nonnegative_and_finite(H, a, x):
    v = theory.density(x, H, a)
    assert np.isfinite(v) and v >= 0


# ---------------------------------------------------------------- the dead zone with residuals
def test_log_density_matches_density_and_survives_underflow():
    xs = np.array([1e-3, 0.25, 0.5, 0.9])
    for H, a in [(1, 0.3), (7, 0.5), (40, 0.9), (12, 1.0)]:
        np.testing.assert_allclose(np.exp(theory.log_density(xs, H, a)), theory.density(xs, H, a),
                                   rtol=1e-12)
    lg = theory.log_density(0.5, 300, 1.0)  # far below the float64 range
    assert np.isfinite(lg) and lg == pytest.approx(299 * math.log(math.log(2)) - math.lgamma(300))


@pytest.mark.parametrize("alpha", [0.2, 0.5, 0.9])
def test_dead_zone_ratio_tends_to_one_minus_alpha(alpha):
    Hs = np.arange(2, 402)
    lg = np.array([theory.log_density(0.5, int(H), alpha) for H in Hs])
    r = np.exp(np.diff(lg))
    assert theory.converges_to(r, 1 - alpha, 0.15)
    # geometric, not factorial: the ratio stays above 1 - alpha (the e^{2 sqrt(Hbt)} factor)
    assert np.all(r[50:] > 1 - alpha)
    # the leading-order asymptotic gets closer as H grows
    err = np.abs(theory.dead_zone_asymptotic(0.5, Hs, alpha, log=True) - lg)
    assert err[-1] < err[48] < err[8]


def test_dead_zone_is_factorial_only_without_residual():
    Hs = np.arange(2, 202)
    lg = np.array([theory.log_density(0.5, int(H), 1.0) for H in Hs])
    r = np.exp(np.diff(lg))
    np.testing.assert_allclose(r, np.log(2) / Hs[:-1], rtol=1e-10)  # t/(H-1) -> 0
    np.testing.assert_allclose(theory.dead_zone_asymptotic(0.5, Hs, 1.0, log=True), lg, rtol=1e-12)


def test_converges_to_rejects_counterexamples():
    H = np.arange(2, 202)
    assert theory.converges_to(0.5 * (1 + 1 / np.sqrt(H)), 0.5, 0.1)
    assert not theory.converges_to(np.log(2) / (H - 1), 0.5, 0.1)  # factorial decay: ratios -> 0
    assert not theory.converges_to(0.3 + 0 * H, 0.5, 0.1)  # geometric at the wrong rate
    assert not theory.converges_to(0.5 + 0.01 * (-1.0) ** H * H / 200, 0.5, 0.1)  # oscillates
    with pytest.raises(ValueError, match="limit"):
        theory.converges_to([1.0, 0.5], 0.0, 0.1)
    with pytest.raises(ValueError, match="seq"):
        theory.converges_to([1.0, np.nan], 0.5, 0.1)


def test_influence_ratios_against_log_influence():
    r = theory.influence_ratios(64, 20, 30, 0.4)
    l10, l11 = theory.log_influence(64, 10, 0.4), theory.log_influence(64, 11, 0.4)
    assert r[9] == pytest.approx(np.exp(l11[19] - l10[19]), rel=1e-12)
    # finite L: the slowest mode at position j has eigenvalue 1 - a + a/j
    r = theory.influence_ratios(8, 4, 400, 0.5)
    assert r[-1] == pytest.approx(1 - 0.5 + 0.5 / 4, rel=1e-6)
    with pytest.raises(ValueError, match="position"):
        theory.influence_ratios(8, 9, 10, 0.5)
    with pytest.raises(ValueError, match="alpha"):
        theory.influence_ratios(8, 4, 10, 0.0)


def test_column_sums_exact_and_last_token_gets_least():
    L, H = 7, 3
    N = (1 - sp.Rational(1, 3)) * sp.eye(L) + sp.Rational(1, 3) * theory.cesaro(L, exact=True)
    exact = [float(v) for v in (sp.ones(1, L) * N**H)]
    np.testing.assert_allclose(np.exp(theory.log_column_sums(L, H, "1/3")), exact, rtol=1e-12)
    for a in (0.1, 0.5, 1.0):
        c = theory.log_column_sums(512, 24, a)
        assert np.all(np.diff(c) <= 1e-12) and int(np.argmin(c)) == 511


@pytest.mark.parametrize("alpha", ["1", "1/2", "3/10", "0"])
@pytest.mark.parametrize("H", [0, 1, 2, 4])
def test_column_l2_exact_against_explicit_matrix_power(alpha, H):
    # brute force: form N^H with SymPy and take the l2 norm of every column
    L = 6
    a = sp.Rational(alpha)
    N = (1 - a) * sp.eye(L) + a * theory.cesaro(L, exact=True)
    P = N**H
    brute = [sp.sqrt(sum(P[i, j] ** 2 for i in range(L))) for j in range(L)]
    exact = theory.column_l2(L, H, alpha, exact=True)
    assert all(sp.simplify(e - b) == 0 for e, b in zip(exact, brute))
    assert theory.column_l2(L, H, alpha, exact=True, positions=[5, 2]) == [exact[4], exact[1]]
    np.testing.assert_allclose(theory.column_l2(L, H, alpha), [float(b) for b in brute],
                               rtol=1e-12)


@pytest.mark.parametrize("alpha", [0.05, 0.5, 1.0])
def test_log_column_l2_against_numpy_matrix_power(alpha):
    L, H = 40, 7
    P = np.linalg.matrix_power((1 - alpha) * np.eye(L) + alpha * theory.cesaro(L), H)
    brute = np.sqrt((P**2).sum(0))
    np.testing.assert_allclose(np.exp(theory.log_column_l2(L, H, alpha)), brute, rtol=1e-11)
    # the other reading adds the same entries linearly: l1 / sqrt(L - j + 1) <= l2 <= l1
    col_sum = np.exp(theory.log_column_sums(L, H, alpha))
    assert np.all(brute <= col_sum * (1 + 1e-12))
    assert np.all(brute * np.sqrt(np.arange(L, 0, -1)) >= col_sum * (1 - 1e-12))
    # the last column has one entry, (1 - a + a/L)^H
    assert np.exp(theory.log_column_l2(L, H, alpha, positions=L)[0]) == pytest.approx(
        (1 - alpha + alpha / L) ** H, rel=1e-12)


def test_log_column_l2_far_below_float_range():
    # alpha = 1, H = 120: the last column is L^-H = 1e-360, below float64; its log is exact
    lg = theory.log_column_l2(1000, 120, 1.0, positions=[1000, 500])
    assert lg[0] == pytest.approx(-120 * np.log(1000), rel=1e-12)
    assert np.isfinite(lg[1])


@pytest.mark.parametrize("kwargs, match", [
    (dict(L=0, depth=2), "L must be"), (dict(L=4, depth=-1), "depth must be"),
    (dict(L=4, depth=2.5), "depth must be"), (dict(L=4, depth=2, alpha=1.5), "alpha must"),
    (dict(L=4, depth=2, positions=5), "positions must"),
    (dict(L=4, depth=2, positions=[0, 1]), "positions must"),
    (dict(L=4, depth=2, positions=[]), "positions must"),
    (dict(L=4, depth=2, positions=[1.5]), "positions must")])
@pytest.mark.parametrize("fn", ["log_column_l2", "column_l2", "column_l2_exact"])
def test_column_l2_rejects_bad_input(kwargs, match, fn):
    f = {"log_column_l2": theory.log_column_l2, "column_l2": theory.column_l2,
         "column_l2_exact": lambda **k: theory.column_l2(exact=True, **k)}[fn]
    with pytest.raises(ValueError, match=match):
        f(**kwargs)


@pytest.mark.parametrize("L", [2, 3, 8, 64, 1024, 4096])
@pytest.mark.parametrize("H", [1, 2, 5, 16, 32, 64])
@pytest.mark.parametrize("alpha", [0.05, 0.3, 0.5, 0.9, 0.99, 1.0])
def test_arm_ratio_exact_and_approximation_over_grid(L, H, alpha):
    lg = theory.log_influence(L, H, alpha)
    assert theory.arm_ratio(L, H, alpha) == pytest.approx(np.exp(lg[-1] - lg[-2]), rel=1e-9)
    # the bound of the chapter: 0 <= approx - exact <= (H-1)/(H(L-1)) < 1/(L-1)
    exact, approx = theory.arm_ratio(L, H, alpha), theory.arm_ratio_approx(L, H, alpha)
    assert -1e-9 * approx <= approx - exact <= (H - 1) / (H * (L - 1)) + 1e-9 * approx


def test_arm_ratio_old_bound_is_off_by_the_1_over_H_term():
    old = 1 + 0.1 * 1024 / (0.9 * 32)
    exact = theory.arm_ratio(1024, 32, 0.9)
    assert old / exact - 1 > 0.25
    assert abs(theory.arm_ratio_approx(1024, 32, 0.9) / exact - 1) < 1e-3
    with pytest.raises(ValueError, match="alpha"):
        theory.arm_ratio(8, 2, 0.0)


def test_continuum_tv_falls_with_length_and_grows_with_depth():
    # chapter cesaro: the finite rows approach eq-density only once L >> e^H
    assert theory.continuum_tv(50, 1) < 1e-12
    tv = [theory.continuum_tv(L, 4) for L in (100, 1000, 10000)]
    assert tv[0] > tv[1] > tv[2]
    assert theory.continuum_tv(10**5, 2) < theory.continuum_tv(10**5, 8)
    with pytest.raises(ValueError):
        theory.continuum_tv(0, 2)


def test_docstrings_name_their_chapter_and_existing_labels():
    """One hop both ways (issue 12): every public function of the exact theory and the rollout
    names its chapter, and every chapter or equation label a docstring cites exists in the book."""
    import inspect
    import re
    from pathlib import Path

    from posbias_nb import rollout

    book = Path(__file__).resolve().parents[3] / "book"
    text = "\n".join(p.read_text() for p in book.glob("*.md"))
    chapters = set(re.findall(r"^\((ch-[\w-]+)\)=", text, flags=re.M))
    equations = set(re.findall(r":label:\s*(eq-[\w-]+)", text))
    for mod in (theory, rollout):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if not callable(obj):
                continue
            doc = inspect.getdoc(obj) or ""
            assert ":ref:`ch-" in doc, f"{mod.__name__}.{name} names no chapter"
            for ch in re.findall(r":ref:`(ch-[\w-]+)`", doc):
                assert ch in chapters, f"{mod.__name__}.{name} cites missing chapter {ch}"
            for eq in re.findall(r":eq:`(eq-[\w-]+)`", doc):
                assert eq in equations, f"{mod.__name__}.{name} cites missing equation {eq}"


# ---------------------------------------------------------------- helpers of the chapters
def test_density_series_matches_the_numeric_density():
    t, a = sp.symbols("t alpha")
    for h in (1, 3, 6):
        expr = theory.density_series(h, t, a)
        for x, al in ((0.5, 0.3), (0.1, 0.9)):
            val = float(expr.subs({t: math.log(1 / x), a: al}))
            assert val == pytest.approx(float(theory.density(x, h, al)), rel=1e-10)
    # the counterexample: depth 0 has no smooth part (all mass in the Dirac spike)
    with pytest.raises(ValueError, match="depth"):
        theory.density_series(0, t, a)


def test_first_depth():
    d = np.arange(1, 6)
    assert theory.first_depth(d, [0.1, 1.0, 2.5, 1.5, 3.0], 2) == 3     # first crossing counts
    assert theory.first_depth(d, [0.1, 1.0, 1.5, 1.9, 1.99], 2) is None  # never reaches it
    assert theory.first_depth(d, [2, 0, 0, 0, 0], 2) == 1
    with pytest.raises(ValueError, match="differ in length"):
        theory.first_depth(d, [1, 2], 2)
    with pytest.raises(ValueError, match="NaN"):
        theory.first_depth(d, [1, np.nan, 2, 3, 4], 2)


def test_bidirectional_alpha_inverts_the_closed_form():
    for L, H, a in ((512, 6, 0.1), (16, 2, 0.9), (100, 12, 0.0), (100, 12, 1.0)):
        s = theory.bidirectional_influence(L, H, a)[-1]
        assert theory.bidirectional_alpha(L, H, s) == pytest.approx(a, abs=1e-12)
    # the counterexample: a share below the flat 1/L no alpha can give
    with pytest.raises(ValueError, match="output_share"):
        theory.bidirectional_alpha(100, 6, 0.005)
    with pytest.raises(ValueError, match="output_share"):
        theory.bidirectional_alpha(100, 6, 1.5)
