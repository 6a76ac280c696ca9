import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.stats import wasserstein_distance

from posbias_nb import metrics


def test_wasserstein_matches_scipy_on_scaled_positions():
    rng = np.random.default_rng(0)
    for L in (2, 7, 50):
        p, q = rng.random(L), rng.random(L)
        pos = np.arange(L)
        ref = wasserstein_distance(pos, pos, p, q) / (L - 1)
        assert metrics.wasserstein(p, q) == pytest.approx(ref, abs=1e-12)


def test_peak_to_valley_and_mean_position():
    assert metrics.peak_to_valley([4, 1, 2]) == (4.0, 2)
    assert metrics.peak_to_valley([1, 0, 1])[0] == float("inf")
    assert metrics.mean_position([0, 0, 1]) == 1.0
    assert metrics.mean_position([1, 0, 0]) == 0.0


@pytest.mark.parametrize("bad", [[], [[1, 2]], [1, -1], [1, np.nan], [0, 0]])
def test_normalize_rejects(bad):
    with pytest.raises(ValueError):
        metrics.normalize(bad)


def test_length_mismatch():
    with pytest.raises(ValueError, match="differ in length"):
        metrics.spearman([1, 2], [1, 2, 3])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0.01, 100), min_size=2, max_size=40))
def test_wasserstein_properties(p):
    p = np.array(p)
    assert metrics.wasserstein(p, p) == pytest.approx(0.0, abs=1e-12)
    q = p[::-1]
    w = metrics.wasserstein(p, q)
    assert 0 <= w <= 1 + 1e-12
    assert w == pytest.approx(metrics.wasserstein(q, p), abs=1e-12)


# ---- bootstrap (issue 11, part 2) ------------------------------------------------------------

def test_bootstrap_covers_the_true_mean_about_95_percent():
    rng = np.random.default_rng(123)
    hits = 0
    for i in range(200):
        x = rng.normal(1.0, 2.0, size=40)
        _, lo, hi = metrics.bootstrap(np.mean, x, n_boot=400, seed=i)
        hits += lo <= 1.0 <= hi
    # percentile bootstrap at n=40: close to nominal (binomial sd at 200 draws is ~1.5%)
    assert 0.88 <= hits / 200 <= 0.99, hits


def test_bootstrap_interval_width_shrinks_like_root_n():
    rng = np.random.default_rng(0)
    w = [np.subtract(*metrics.bootstrap(np.mean, rng.normal(size=n), seed=1)[2:0:-1])
         for n in (50, 800)]
    assert 3 < w[0] / w[1] < 5.5  # sqrt(16) = 4


def test_bootstrap_resamples_jointly():
    # paired samples: y = 2 x exactly, so every joint resample keeps the ratio 2
    x = np.arange(1.0, 21.0)
    est, lo, hi = metrics.bootstrap(lambda a, b: np.sum(b) / np.sum(a), x, 2 * x, n_boot=200)
    assert est == lo == hi == 2.0
    # rows (windows) stay whole along axis 0
    P = np.stack([np.arange(5.0) + k for k in range(6)])
    est, lo, hi = metrics.bootstrap(lambda X: float(np.ptp(X[:, 1] - X[:, 0])), P, n_boot=200)
    assert est == lo == hi == 0.0


def test_bootstrap_is_deterministic_and_seed_dependent():
    x = np.random.default_rng(5).normal(size=30)
    a = metrics.bootstrap(np.median, x, seed=3)
    assert a == metrics.bootstrap(np.median, x, seed=3)
    assert a[1:] != metrics.bootstrap(np.median, x, seed=4)[1:]
    assert a[0] == float(np.median(x))


def test_bootstrap_drops_nonfinite_replicates_and_refuses_mostly_nonfinite():
    x = np.array([0.0, 0.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="finite"):
        metrics.bootstrap(lambda a: 1.0 / a.sum() if a.sum() > 2 else np.nan, x, n_boot=200)


@pytest.mark.parametrize("args, kw, match", [
    ((), {}, "at least one sample"),
    ((np.arange(3.0), np.arange(4.0)), {}, "share their length"),
    ((np.arange(1.0),), {}, "at least 2 units"),
    ((np.arange(5.0),), {"n_boot": 10}, "n_boot"),
    ((np.arange(5.0),), {"level": 1.5}, "level"),
    ((np.arange(5.0),), {"level": "x"}, "level"),
    ((np.arange(5.0),), {"seed": -1}, "seed"),
])
def test_bootstrap_errors(args, kw, match):
    with pytest.raises(ValueError, match=match):
        metrics.bootstrap(np.mean, *args, **kw)


# ---- checks that can fail (issue 11, part 3) -------------------------------------------------

def test_log_pearson():
    p = np.exp(np.linspace(0, 5, 50))
    assert metrics.log_pearson(p, p**2) == pytest.approx(1.0)
    assert metrics.log_pearson(p, 1 / p) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="positive"):
        metrics.log_pearson([1.0, 0.0], [1.0, 2.0])


def test_robust_peak_to_valley_ignores_a_single_position():
    u = np.ones(100)
    u[:2] = u[-2:] = 10.0
    r, j = metrics.robust_peak_to_valley(u, ends=0.02)
    assert r == pytest.approx(10.0) and 3 <= j <= 98
    # one huge entry moves the plain ratio by 100x but the robust one by at most (1 + 1000/2/2)
    v = u.copy()
    v[-1] = 1000.0
    assert metrics.peak_to_valley(v)[0] == 1000.0
    assert metrics.robust_peak_to_valley(v, ends=0.02)[0] < metrics.peak_to_valley(v)[0] / 3
    # one near-zero entry does not make the valley: the running mean does
    w = u.copy()
    w[50] = 1e-6
    assert metrics.peak_to_valley(w)[0] > 1e6
    assert metrics.robust_peak_to_valley(w, ends=0.02)[0] < 25
    # a flat profile has ratio 1
    assert metrics.robust_peak_to_valley(np.ones(64))[0] == pytest.approx(1.0)
    for bad in (0.0, 0.6):
        with pytest.raises(ValueError, match="ends"):
            metrics.robust_peak_to_valley(u, ends=bad)


def test_spike_factors_find_a_spike_on_the_first_token():
    # the counterexample to the old detector (median filter padded with mode="nearest", whose
    # factor at position 0 is exactly 1): a spike on the first token must be reported
    p = np.ones(200)
    p[0] = 50.0
    p[120] = 20.0
    f = metrics.spike_factors(p, half_width=16)
    assert f[0] == pytest.approx(50.0) and f[120] == pytest.approx(20.0)
    assert np.argsort(f)[::-1][:2].tolist() == [0, 120]
    # the old detector really does miss it (the counterexample rejects it)
    from scipy.ndimage import median_filter
    lp = np.log(p)
    old = np.exp(lp - median_filter(lp, size=33, mode="nearest"))
    assert old[0] == 1.0
    # and the last position is judged like any other
    q = np.ones(50)
    q[-1] = 7.0
    assert metrics.spike_factors(q, half_width=4)[-1] == pytest.approx(7.0)
    with pytest.raises(ValueError, match="half_width"):
        metrics.spike_factors(p, half_width=0)
    with pytest.raises(ValueError, match="median 0"):
        metrics.spike_factors(np.zeros(10))


def test_window_intervals():
    rng = np.random.default_rng(0)
    L = 64
    base = 1.0 / (1.0 + np.minimum(np.arange(L), L - 1 - np.arange(L)))
    P = base * np.exp(0.1 * rng.normal(size=(10, L)))
    out = metrics.window_intervals(P, reference=base, n_boot=300)
    for k in ("ptv", "spearman", "log_pearson"):
        est, lo, hi = out[k]
        assert lo < est < hi, (k, out[k])  # the jackknife for the correlations: no lean
    assert out["log_pearson"][1] > 0.9
    # a reference that is the mirror image in the middle is rejected by the interval
    anti = 1.0 / base
    assert metrics.window_intervals(P, reference=anti, n_boot=300)["spearman"][2] < 0
    with pytest.raises(ValueError, match="n >= 2"):
        metrics.window_intervals(P[:1])
    with pytest.raises(ValueError, match="positions"):
        metrics.window_intervals(P, reference=base[:-1])


def test_agreement_vs_floor_sees_a_real_change_and_not_a_null_one():
    rng = np.random.default_rng(1)
    L, n = 80, 10
    base = 1.0 / (1.0 + np.minimum(np.arange(L), L - 1 - np.arange(L)))
    noisy = lambda prof: prof * np.exp(0.15 * rng.normal(size=(n, L)))  # noqa: E731
    same, fresh = noisy(base), noisy(base)
    null = metrics.agreement_vs_floor(same, fresh, noisy(base), n_boot=300)
    assert null["gap_pearson"][1] < 0 < null["gap_pearson"][2]
    changed = base * np.exp(np.sin(np.arange(L) / 5.0))  # a different shape
    real = metrics.agreement_vs_floor(same, fresh, noisy(changed), n_boot=300)
    assert real["gap_pearson"][1] > 0 and real["gap_spearman"][1] > 0
    with pytest.raises(ValueError, match="share a shape"):
        metrics.agreement_vs_floor(same, fresh[:, :-1], same)


def test_profile_summary_on_the_theory_row():
    from posbias_nb import theory
    t = theory.influence(128, 12, 0.1)
    P = t * np.exp(0.05 * np.random.default_rng(2).normal(size=(6, 128)))
    s = metrics.profile_summary(P, depth=12, n_boot=200)
    assert abs(s["alpha"] - 0.1) < 0.01 and s["rho_ci"][1] > 0.8
    assert s["ptv_ci"][1] <= s["ptv"] * 1.05 and s["first_mid"] > 5
    with pytest.raises(ValueError, match="n >= 2"):
        metrics.profile_summary(P[:1])


def test_bidirectional_closed_form_matches_the_rollout():
    from posbias_nb import rollout, theory
    L, H, a = 40, 6, 0.2
    row = rollout.rollout(rollout.bidirectional(L), rollout.constant(H, a))
    assert np.allclose(row, theory.bidirectional_influence(L, H, a))
    with pytest.raises(ValueError, match="alpha"):
        theory.bidirectional_influence(L, H, 1.5)


def test_prediction_scores_rank_a_good_and_a_bad_prediction():
    rng = np.random.default_rng(3)
    L = 60
    truth = np.exp(-np.arange(L) / 10.0) + np.exp((np.arange(L) - L) / 5.0)
    P = truth * np.exp(0.1 * rng.normal(size=(8, L)))
    out = metrics.prediction_scores(P, {"good": truth, "bad": truth[::-1]},
                                    pairs=[("bad", "good")], n_boot=200)
    assert out["dw1", "bad", "good"][1] > 0 and out["drho", "bad", "good"][1] > 0
    assert out["rho", "good"][1] > 0.5
    # the counterexample: a prediction identical to the other gives a difference of exactly 0
    same = metrics.prediction_scores(P, {"a": truth, "b": truth}, pairs=[("a", "b")], n_boot=200)
    assert same["dw1", "a", "b"] == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="unknown prediction"):
        metrics.prediction_scores(P, {"a": truth}, pairs=[("a", "z")], n_boot=200)
    with pytest.raises(ValueError, match="positions"):
        metrics.prediction_scores(P, {"a": truth[:-1]})


# ---- one definition of the regions of a context ----------------------------------------------

@pytest.mark.parametrize("L, first, middle, last", [
    (3, [0], [1], [2]),
    (7, [0], [2, 3, 4], [6]),            # retrieval slots: the three central ones
    (8, [0], [2, 3, 4, 5], [7]),
    (10, [0], [3, 4, 5, 6], [9]),
])
def test_regions_small_contexts(L, first, middle, last):
    r = metrics.regions(L)
    assert r.indices("first").tolist() == first
    assert r.indices("middle").tolist() == middle
    assert r.indices("last").tolist() == last
    assert np.arange(L)[r.middle].tolist() == middle


@settings(max_examples=200, deadline=None)
@given(st.integers(3, 20000))
def test_regions_central_half_symmetric_and_disjoint(L):
    r = metrics.regions(L)
    mid = r.indices("middle")
    assert mid.size >= 1 and abs(mid.size - L / 2) <= 1          # about half of the context
    assert mid[0] + mid[-1] == L - 1                                # symmetric about the centre
    assert r.first.stop <= mid[0] and mid[-1] < r.last.start        # never overlaps the ends
    if L % 4 == 0:                                                  # the chapters' old middle
        assert (mid[0], mid[-1] + 1) == (L // 4, 3 * L // 4)


def test_regions_ends_and_refusals():
    r = metrics.regions(1024, ends=20)
    assert (r.first, r.last) == (slice(0, 20), slice(1004, 1024))
    for bad in (2, 1, 0, -5, 7.0, "7", True):
        with pytest.raises(ValueError, match="L must be"):
            metrics.regions(bad)
    with pytest.raises(ValueError, match="ends must be at most 2"):
        metrics.regions(7, ends=3)                     # would overlap the middle
    with pytest.raises(ValueError, match="ends"):
        metrics.regions(100, ends=0)
    with pytest.raises(ValueError, match="region must be"):
        metrics.regions(10).indices("centre")


def test_middle_share():
    assert metrics.middle_share(np.ones(8)) == 0.5
    assert metrics.middle_share(np.ones(7)) == pytest.approx(3 / 7)
    # a U puts less than half in the middle; the counterexample, an inverted U, puts more
    x = np.arange(64)
    u = 1.0 + (x - 31.5) ** 2
    assert metrics.middle_share(u) < 0.2
    assert metrics.middle_share(u.max() + 1 - u) > 0.6
    assert metrics.middle_share(u) == pytest.approx(u[16:48].sum() / u.sum())
    # scale-free
    assert metrics.middle_share(3 * u) == pytest.approx(metrics.middle_share(u))
    for bad in ([1, 1], [1, -1, 1], [0, 0, 0], [1, np.nan, 1]):
        with pytest.raises(ValueError):
            metrics.middle_share(bad)


# ---- the one Spearman ------------------------------------------------------------------------

def test_spearman_policy():
    # ties: average ranks, as scipy
    from scipy.stats import spearmanr
    x, y = [1, 2, 2, 3, 5], [2, 1, 4, 4, 9]
    assert metrics.spearman(x, y) == pytest.approx(spearmanr(x, y).statistic)
    # signed values are fine (scores centred per position)
    assert metrics.spearman([-1.0, 0.0, 2.0], [-5.0, 1.0, 3.0]) == 1.0
    # 2-D arrays are flattened element by element (prompts x positions)
    A = np.arange(6.0).reshape(2, 3)
    assert metrics.spearman(A, -A) == -1.0
    # a constant input has no rank correlation: NaN, and no warning
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(metrics.spearman([1, 1, 1], [1, 2, 3]))
        assert np.isnan(metrics.spearman([1, 2, 3], [4, 4, 4]))
    # NaN is an error, not a result
    with pytest.raises(ValueError, match="non-finite"):
        metrics.spearman([1, np.nan, 3], [1, 2, 3])
    with pytest.raises(ValueError, match="at least 2"):
        metrics.spearman([1], [1])
    with pytest.raises(ValueError, match="differ"):
        metrics.spearman(A, A.ravel())


# ---- chapter *After training*: spikes, paired gain, decades, token census ----------------------

def test_self_spike():
    assert metrics.self_spike([1, 1, 9, 1], 2) == 9.0
    assert metrics.self_spike([1, 1, 9, 1], -2) == 9.0
    # the counterexample: a flat profile has no spike anywhere
    assert metrics.self_spike(np.ones(10), 3) == 1.0
    # the theory's row: the spike is the same at every output position (no mask)
    from posbias_nb import theory
    s_last = metrics.self_spike(theory.bidirectional_influence(64, 6, 0.2), -1)
    s_mid = metrics.self_spike(theory.bidirectional_influence(64, 6, 0.2, output=30), 30)
    assert s_last == pytest.approx(s_mid) and s_last > 10
    with pytest.raises(ValueError, match="outside"):
        metrics.self_spike([1, 2, 3], 3)
    with pytest.raises(ValueError, match="median 0"):
        metrics.self_spike([0, 0, 5, 0], 2)


def test_paired_ptv_ratio_sees_a_deeper_u_and_not_a_copy():
    rng = np.random.default_rng(4)
    L, n = 100, 8
    x = np.arange(L)
    u = 1.0 / (1.0 + np.minimum(x, L - 1 - x))
    noisy = lambda p: p * np.exp(0.05 * rng.normal(size=(n, L)))  # noqa: E731
    base = noisy(u)
    deeper = metrics.paired_ptv_ratio(noisy(u ** 2), base, n_boot=300)
    assert deeper[1] > 5                                   # the interval excludes 1
    # the counterexample: the same windows give exactly 1, no deepening
    assert metrics.paired_ptv_ratio(base, base, n_boot=300) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="share a shape"):
        metrics.paired_ptv_ratio(base, base[:, :-1])


def test_decades():
    assert metrics.decades((100.0, 50.0, 250.0)) == [2]
    assert metrics.decades((50.0, 60.0)) == [2]                    # (low, high) works too
    assert metrics.decades((1e3, 400.0, 2e3)) == [3]
    # the counterexample: a ratio of 10^2 is not "about 10^3"
    assert 3 not in metrics.decades((100.0, 80.0, 300.0))
    with pytest.raises(ValueError):
        metrics.decades((1.0, 0.0, 2.0))
    with pytest.raises(ValueError):
        metrics.decades((1.0, 3.0, 2.0))


def test_is_mark():
    for t in (" ", "\n", "\n\n", ").", " ,", "", "  ->"):
        assert metrics.is_mark(t), repr(t)
    # counterexamples: a word, a word with punctuation, a digit, a non-ASCII letter
    for t in (" the", "x.", "42", "é", "_init_"):
        assert not metrics.is_mark(t), repr(t)


def test_spike_census_finds_spikes_on_words_and_on_marks():
    L = 40
    ids = np.arange(100, 100 + L)
    ids[[5, 20]] = 7                                     # one token id that repeats
    words = [f" w{i}" for i in range(L)]
    words[10] = ","
    p = np.ones(L)
    p[[5, 20]] = 10.0                                    # spikes on words (repeated ids)
    p[-1] = 50.0                                         # the output: left out
    c = metrics.spike_census(p, ids, words, top=2, half_width=4)
    assert sorted(c["top"].tolist()) == [5, 20] and c["mark_top"] == 0.0
    assert c["rep_top"] == 1.0 and c["rep_base"] == pytest.approx(2 / (L - 1))
    assert c["mark_base"] == pytest.approx(1 / (L - 1)) and c["first_top"] == 0.0
    assert c["f_top"] == pytest.approx(10.0)
    # the counterexample: the spike on the punctuation mark and on the first token is seen
    q = np.ones(L)
    q[[0, 10]] = 10.0
    c = metrics.spike_census(q, ids, words, top=2, half_width=4)
    assert c["mark_top"] == 0.5 and c["first_top"] == 1.0 and c["f_first"] == 10.0
    with pytest.raises(ValueError, match="differ in length"):
        metrics.spike_census(p, ids[:-1], words)
    with pytest.raises(ValueError, match="top"):
        metrics.spike_census(p, ids, words, top=L)


def test_single_arms_are_decided_by_single_positions():
    # a one-token spike at the end counts in full here, and only a twentieth in the robust ratio
    p = np.ones(100)
    p[-1] = 50.0
    p[0] = 8.0
    arms = metrics.single_arms(p)
    assert arms == {"max_min": 50.0, "first_min": 8.0, "last_min": 50.0}
    # the robust ratio averages the 2 end positions: (mean(8, 1) + mean(1, 50)) / 2 over 1
    assert metrics.robust_peak_to_valley(p, 0.02)[0] == 15.0
    with pytest.raises(ValueError, match="reaches 0"):
        metrics.single_arms([1.0, 0.0, 2.0])
    with pytest.raises(ValueError):
        metrics.single_arms([1.0, -1.0])


def test_window_intervals_carry_the_single_arms_with_bca():
    rng = np.random.default_rng(0)
    P = np.exp(rng.normal(0, 0.2, (8, 50))) * np.r_[20.0, np.ones(48), 40.0]
    iv = metrics.window_intervals(P)
    from posbias_nb import stats
    for k in ("max_min", "first_min", "last_min"):
        est, lo, hi = iv[k]
        assert lo < est < hi
        assert iv[k] == stats.bootstrap(lambda X, k=k: metrics.single_arms(X.mean(0))[k], P)
    assert iv["last_min"] != stats.bootstrap(
        lambda X: metrics.single_arms(X.mean(0))["last_min"], P, method="percentile")


def test_agreement_vs_floor_gap_and_ratio():
    rng = np.random.default_rng(1)
    base = np.exp(-np.linspace(0, 3, 40))
    same, fresh = (base * np.exp(rng.normal(0, 0.05, (8, 40))) for _ in range(2))
    changed = base * np.linspace(1, 3, 40) * np.exp(rng.normal(0, 0.05, (8, 40)))
    r = metrics.agreement_vs_floor(same, fresh, changed, n_boot=400)
    # a real change: the gap lies above 0 and the disattenuated ratio below 1
    assert r["gap_pearson"][1] > 0 and r["ratio_pearson"][2] < 1
    assert r["ratio_pearson"][0] == pytest.approx(r["pearson"][0] / r["floor_pearson"][0])
    # no change (the other model is the original with its own probes): the gap contains 0
    other = base * np.exp(rng.normal(0, 0.05, (8, 40)))
    r0 = metrics.agreement_vs_floor(same, fresh, other, n_boot=400)
    assert r0["gap_pearson"][1] < 0 < r0["gap_pearson"][2]


def test_paired_ptv_ratio_single_reading_follows_one_spike():
    # a one-token spike at the end deepens the single-position reading tenfold, the robust one
    # (ends averaged over 2% = 2 of 100 positions) far less
    rng = np.random.default_rng(5)
    L, n = 100, 8
    base = np.exp(0.02 * rng.normal(size=(n, L))) * np.r_[5.0, np.ones(L - 2), 5.0]
    spiked = base.copy()
    spiked[:, -1] *= 10
    single = metrics.paired_ptv_ratio(spiked, base, n_boot=300, reading="single")
    robust = metrics.paired_ptv_ratio(spiked, base, n_boot=300)
    assert single[0] == pytest.approx(10, rel=0.05) and single[1] > 5
    assert robust[2] < 6
    with pytest.raises(ValueError, match="reading"):
        metrics.paired_ptv_ratio(base, base, reading="max")


def _hutchinson_samples(J, K, rng):
    """Squared norms ||z_k^T J_j||^2 of K Rademacher probes z_k (one probe for every j)."""
    Z = rng.choice([-1.0, 1.0], size=(K, J.shape[1]))
    return np.einsum("kd,jde->kje", Z, J).__pow__(2).sum(-1)


def test_probe_intervals_cover_the_exact_profile_of_the_window():
    rng = np.random.default_rng(3)
    L, d = 40, 6
    scale = 1.0 / (1.0 + np.minimum(np.arange(L), L - 1 - np.arange(L)))
    J = rng.normal(size=(L, d, d)) * scale[:, None, None]  # one window's exact Jacobians
    exact = np.sqrt((J**2).sum((1, 2)))
    mid = metrics.regions(L).middle
    truth = {"first_mid": exact[0] / np.median(exact[mid]),
             "ptv": metrics.robust_peak_to_valley(exact)[0]}
    hits = {k: 0 for k in truth}
    reps = 60
    for r in range(reps):
        iv = metrics.probe_intervals(_hutchinson_samples(J, 8, rng), n_boot=400, seed=r)
        for k, t in truth.items():
            hits[k] += iv[k][1] <= t <= iv[k][2]
    # nominal 95%; at K = 8 probes the expanded BCa is somewhat narrow (stats.bootstrap)
    assert all(h / reps >= 0.8 for h in hits.values()), hits


def test_probe_intervals_resample_probes_jointly_and_reject_bad_input():
    rng = np.random.default_rng(0)
    S = rng.chisquare(3, size=(8, 30))
    iv = metrics.probe_intervals(S, n_boot=300)
    from posbias_nb import stats
    # the statistic is the Hutchinson profile sqrt(mean over probes) of a resample of probes
    assert iv["first_mid"] == stats.bootstrap(
        lambda X: np.sqrt(X.mean(0))[0] / np.median(np.sqrt(X.mean(0))[metrics.regions(30).middle]),
        S, n_boot=300)
    # identical probes: no probe error, an interval of zero width at the exact value
    same = np.tile(S[0], (8, 1))
    est, lo, hi = metrics.probe_intervals(same, n_boot=300)["ptv"]
    assert lo == est == hi == pytest.approx(metrics.robust_peak_to_valley(np.sqrt(S[0]))[0])
    with pytest.raises(ValueError, match="K >= 2"):
        metrics.probe_intervals(S[:1])
    with pytest.raises(ValueError, match=">= 0"):
        metrics.probe_intervals(-S)
    with pytest.raises(ValueError, match="positions"):
        metrics.probe_intervals(S, reference=np.ones(29))


def test_w1_difference_exact_detects_a_constant_difference_and_rejects_a_crossing():
    """Issue 34, item 13: when the windows' CDFs lie on one side of both predictions' CDFs at
    every position, W1(a) - W1(b) is one number for every resample (the bootstrap interval
    has width 0 by construction); the detection says so, and says no where a window's CDF
    passes between the two."""
    from posbias_nb import metrics

    rng = np.random.default_rng(0)
    L = 12
    qa = np.r_[np.ones(6), np.zeros(6)] + 1e-3     # mass early
    qb = np.r_[np.ones(9), np.zeros(3)] + 1e-3     # a little later
    late = rng.uniform(0.5, 1.0, (6, L)) * np.linspace(0.1, 3.0, L)  # mass late: F_X below both
    late[:, :3] *= 1e-3
    sc = metrics.prediction_scores(late, {"a": qa, "b": qb}, pairs=[("a", "b")], n_boot=200)
    est, lo, hi = sc["dw1", "a", "b"]
    assert sc["dw1_exact", "a", "b"] and abs(hi - lo) < 1e-12
    # the exact value: sum of s_t (F_b - F_a) / (L - 1), here s_t = -1 everywhere (F_X below)
    Fa = np.cumsum(qa / qa.sum())[:-1]
    Fb = np.cumsum(qb / qb.sum())[:-1]
    assert abs(est - float(np.sum(Fa - Fb)) / (L - 1)) < 1e-12
    # the counterexample: one window sits between the two CDFs, and the interval has width
    between = (qa / qa.sum() + qb / qb.sum()) / 2 * late.sum(1).mean() * 4  # a heavy window
    mixed = np.vstack([late[:3], between, between * 0.9])
    sc2 = metrics.prediction_scores(mixed, {"a": qa, "b": qb}, pairs=[("a", "b")], n_boot=200)
    assert not sc2["dw1_exact", "a", "b"]
    assert sc2["dw1", "a", "b"][2] - sc2["dw1", "a", "b"][1] > 1e-6


def test_prediction_scores_exact_where_only_the_resampled_means_stay_on_one_side():
    """Issue 34, item 13, the case the window-wise test misses (Gemma-3-270M, L = 128): single
    light windows pass between the two CDFs, but one heavy window dominates every resampled mean,
    so no resample moves the difference; and a rank difference no resample moves."""
    from posbias_nb import metrics

    L = 12
    qa = np.r_[np.ones(6), np.zeros(6)] + 1e-3
    qb = np.r_[np.ones(9), np.zeros(3)] + 1e-3
    heavy = np.linspace(0.1, 3.0, L) ** 2 * 1e6                # mass late: F below both
    light = (qa / qa.sum() + qb / qb.sum()) / 2                # between the two CDFs
    P = np.vstack([heavy * (1 + 0.01 * i) for i in range(6)] + [light, light * 1.1])
    assert not metrics.w1_difference_exact(qa, qb, P)          # the sufficient condition fails
    sc = metrics.prediction_scores(P, {"a": qa, "b": qb}, pairs=[("a", "b")], n_boot=200)
    e, lo, hi = sc["dw1", "a", "b"]
    assert sc["dw1_exact", "a", "b"] and hi - lo < 1e-12      # yet no resample moves it
    assert sc["dw1_atom", "a", "b"] == 1.0
    # every window rises, so every resampled mean ranks the positions alike: rho is constant
    assert sc["drho_exact", "a", "b"]
    e, lo, hi = sc["drho", "a", "b"]
    assert hi - lo < 1e-12
    # the counterexample: windows that rank the positions differently move the difference
    rng = np.random.default_rng(5)
    qc, qd = np.linspace(2.0, 1.0, L), np.linspace(1.0, 2.0, L) ** 2  # falling, rising
    noisy = rng.uniform(0.5, 1.5, (8, L))                      # flat: CDFs between the two
    sc3 = metrics.prediction_scores(noisy, {"a": qc, "b": qd}, pairs=[("a", "b")], n_boot=200)
    assert not sc3["drho_exact", "a", "b"] and not sc3["dw1_exact", "a", "b"]
    assert sc3["drho_atom", "a", "b"] < 0.5
    assert sc3["drho", "a", "b"][2] - sc3["drho", "a", "b"][1] > 1e-6


def test_middle_over_last_reads_log_weights():
    """Chapter *Residuals*: the median of the middle region over the last position."""
    rng = np.random.default_rng(3)
    w = rng.uniform(0.1, 2.0, 40)
    mid = metrics.regions(40).middle
    direct = np.median(w[mid]) / w[-1]
    assert metrics.middle_over_last(np.log(w)) == pytest.approx(direct, rel=1e-12)
    assert metrics.middle_over_last(np.log(w) - 800.0) == pytest.approx(direct, rel=1e-12)
    row = np.zeros(8)
    row[-1] = np.log(4.0)  # a recency spike four times the flat middle
    assert metrics.middle_over_last(row) == pytest.approx(0.25, rel=1e-12)
    for bad in ([0.0, 1.0], [[0.0, 1.0, 2.0]], [0.0, np.nan, 1.0], [0.0, np.inf, 1.0]):
        with pytest.raises(ValueError, match="middle_over_last"):
            metrics.middle_over_last(bad)

