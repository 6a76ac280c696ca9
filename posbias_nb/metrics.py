"""Comparing and summarising influence profiles.

A *profile* is a 1-D array of nonnegative weights over positions 1..L.  The comparison
functions follow the structural theory's protocol: both profiles normalized to sum 1, Spearman
rank correlation, and Wasserstein-1 between the two laws on positions scaled to [0, 1].
"""
from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["normalize", "spearman", "wasserstein", "peak_to_valley", "mean_position"]


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
