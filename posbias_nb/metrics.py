"""Comparing and summarising influence profiles.

A *profile* is a 1-D array of nonnegative weights over positions 1..L.  The comparison
functions follow the structural theory's protocol: both profiles normalized to sum 1, Spearman
rank correlation, and Wasserstein-1 between the two laws on positions scaled to [0, 1].
"""
from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["normalize", "spearman", "wasserstein", "peak_to_valley", "mean_position", "fit_alpha"]


def _profile(name: str, p) -> np.ndarray:
    a = np.asarray(p, dtype=np.float64)
    if a.ndim != 1 or a.size < 1:
        raise ValueError(f"{name} must be a non-empty 1-D profile, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} has a non-finite value: {a[~np.isfinite(a)][0]!r}")
    if np.any(a < 0):
        raise ValueError(f"{name} has a negative value: {a[a < 0][0]!r}")
    return a


def normalize(p) -> np.ndarray:
    """Return the profile divided by its sum.

    Raises
    ------
    ValueError
        If the profile is not 1-D, has a negative or non-finite value, or sums to 0.

    Examples
    --------
    >>> normalize([1, 3]).tolist()
    [0.25, 0.75]
    """
    a = _profile("profile", p)
    s = a.sum()
    if s <= 0:
        raise ValueError("profile sums to 0; cannot normalize")
    return a / s


def _pair(p, q):
    a, b = _profile("p", p), _profile("q", q)
    if a.shape != b.shape:
        raise ValueError(f"profiles differ in length: {a.size} vs {b.size}")
    return a, b


def spearman(p, q) -> float:
    """Spearman rank correlation between two profiles of the same length.

    Examples
    --------
    >>> spearman([1, 2, 3], [10, 20, 40])
    1.0
    """
    a, b = _pair(p, q)
    if a.size < 2:
        raise ValueError(f"Spearman needs at least 2 positions, got {a.size}")
    return float(stats.spearmanr(a, b).statistic)


def wasserstein(p, q) -> float:
    """Wasserstein-1 distance between two profiles seen as laws on positions scaled to [0, 1].

    Both are normalized to sum 1 first; the result lies in [0, 1].

    Examples
    --------
    >>> wasserstein([1, 0, 0], [0, 0, 1])
    1.0
    """
    a, b = _pair(p, q)
    a, b = normalize(a), normalize(b)
    if a.size == 1:
        return 0.0
    # W1 on a line = integral of |F_a - F_b|; positions 0, 1/(L-1), ..., 1
    return float(np.sum(np.abs(np.cumsum(a - b))[:-1]) / (a.size - 1))


def peak_to_valley(p) -> tuple[float, int]:
    """Ratio of the largest to the smallest entry, and the 1-indexed position of the minimum.

    Returns ``(inf, position)`` when the minimum is 0.

    Examples
    --------
    >>> peak_to_valley([4, 1, 2])
    (4.0, 2)
    """
    a = _profile("profile", p)
    j = int(np.argmin(a))
    lo = a[j]
    ratio = float(a.max() / lo) if lo > 0 else float("inf")
    return ratio, j + 1


def mean_position(p) -> float:
    """Mean of the normalized profile's position on [0, 1] (0 = first token, 1 = last).

    Examples
    --------
    >>> mean_position([1, 0, 1])
    0.5
    """
    a = normalize(p)
    if a.size == 1:
        return 1.0
    x = np.arange(a.size) / (a.size - 1)
    return float(np.dot(a, x))


def fit_alpha(profile, depth: int, criterion: str = "log") -> float:
    r"""The attention share :math:`\alpha` of ``theory.influence(L, depth, alpha)`` that best
    matches a measured profile (both normalized to sum 1).

    ``criterion="log"``: least squares between the logs,
    :math:`\min_\alpha \sum_j (\ln \hat p_j - \ln t_j(\alpha))^2` (bounded scalar search on
    (1e-4, 1 - 1e-4)); every position weighs the same, whatever its magnitude.
    ``criterion="last"``: match the last token's share, :math:`t_L(\alpha) = \hat p_L` (a root in
    :math:`\alpha`; the theory's last share falls monotonically from 1 at :math:`\alpha = 0`).

    Raises
    ------
    ValueError
        For a bad profile or criterion, or a last share the theory cannot reach.
    """
    from scipy.optimize import brentq, minimize_scalar

    from . import theory
    from ._validate import positive_int

    p = normalize(profile)
    depth = positive_int("depth", depth)
    L = p.size
    if L < 2:
        raise ValueError("fit_alpha needs at least 2 positions")
    lo, hi = 1e-4, 1 - 1e-4
    if criterion == "log":
        if np.any(p <= 0):
            raise ValueError("criterion='log' needs a strictly positive profile")
        lp = np.log(p)

        def loss(a):
            t = theory.log_influence(L, depth, a)
            t = t - np.logaddexp.reduce(t)
            return float(np.sum((lp - t) ** 2))

        return float(minimize_scalar(loss, bounds=(lo, hi), method="bounded",
                                     options={"xatol": 1e-7}).x)
    if criterion == "last":
        def gap(a):
            return float(theory.influence(L, depth, a)[-1] - p[-1])

        if gap(lo) * gap(hi) > 0:
            raise ValueError(f"the theory's last share cannot equal {p[-1]:.3g} at depth {depth}")
        return float(brentq(gap, lo, hi, xtol=1e-10))
    raise ValueError(f"criterion must be 'log' or 'last', got {criterion!r}")
