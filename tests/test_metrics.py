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
