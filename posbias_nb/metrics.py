"""Comparing and summarising influence profiles.

A *profile* is a 1-D array of nonnegative weights over positions 1..L.  The comparison
functions follow the structural theory's protocol: both profiles normalized to sum 1, Spearman
rank correlation, and Wasserstein-1 between the two laws on positions scaled to [0, 1].
Chapters :ref:`ch-init`, :ref:`ch-after`, :ref:`ch-rollout` and :ref:`ch-prediction`.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["Regions", "regions", "middle_share", "middle_over_last", "normalize", "spearman", "wasserstein",
           "fit_layout_alpha",
           "monotone_channels", "cubic_monotone", "savgol_roughness",
           "positional_candidates", "attention_sharpness", "fit_theory",
           "peak_to_valley", "mean_position", "fit_alpha", "bootstrap", "attention_share", "auc",
           "log_pearson", "robust_peak_to_valley", "single_arms", "spike_factors", "window_intervals",
           "profile_summary", "probe_intervals", "agreement_vs_floor", "prediction_scores", "self_spike",
           "paired_ptv_ratio", "decades", "is_mark", "spike_census"]


def _profile(name: str, p) -> np.ndarray:
    a = np.asarray(p, dtype=np.float64)
    if a.ndim != 1 or a.size < 1:
        raise ValueError(f"{name} must be a non-empty 1-D profile, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} has a non-finite value: {a[~np.isfinite(a)][0]!r}")
    if np.any(a < 0):
        raise ValueError(f"{name} has a negative value: {a[a < 0][0]!r}")
    return a


# --------------------------------------------------------------------------------------------
# The regions of a context: one definition for every chapter and experiment


class Regions(NamedTuple):
    """The three pre-declared regions of a context of ``L`` positions, as slices of a length-``L``
    array (0-indexed): ``first``, ``middle`` and ``last``.  See :func:`regions`."""

    first: slice
    middle: slice
    last: slice

    def indices(self, name: str) -> np.ndarray:
        """The 0-indexed positions of region ``name`` (``"first"``, ``"middle"`` or ``"last"``)."""
        s = getattr(self, name) if name in self._fields else None
        if s is None:
            raise ValueError(f"region must be one of {', '.join(self._fields)}, got {name!r}")
        return np.arange(s.start, s.stop)


def regions(L: int, ends: int = 1) -> Regions:
    r"""The first, middle and last region of a context of ``L`` positions — the one definition
    the book uses wherever it speaks of "the middle".

    Chapters :ref:`ch-init`, :ref:`ch-after` (the ratios *first / middle* and *last / middle* of
    :func:`profile_summary`) and, through the experiments, the retrieval and remedies chapters.

    With :math:`a = \lfloor L/4 + 1/2 \rfloor` (``L/4`` rounded half up):

    - ``first`` is the first ``ends`` positions, ``[0, ends)``;
    - ``last`` is the last ``ends`` positions, ``[L - ends, L)``;
    - ``middle`` is the **central half**, ``[a, L - a)``: :math:`L - 2a` positions, symmetric
      about the centre, :math:`L/2` of them when 4 divides :math:`L` (one more or one fewer
      otherwise).

    Why this definition.  The middle is declared before any data is seen, from ``L`` alone, so it
    can never be "the worst position found".  Half of the context is wide enough that a median or
    a sum over it averages many positions of a measured profile (hundreds at ``L = 512``), yet it
    stays clear of both arms of the U: at every length the quarter at each end is left out.  It
    is the same rule for a profile of 16k positions as for seven gold-answer slots of a retrieval
    prompt (``regions(7)``: first = slot 0, last = slot 6, middle = the three central slots
    2, 3, 4).  For ``L`` divisible by 4 it is exactly ``p[L // 4: 3 * L // 4]``, the middle the
    chapters used before.

    Parameters
    ----------
    L : int
        Number of positions, at least 3 (a middle needs a position that is neither first nor
        last).
    ends : int
        Positions in each of ``first`` and ``last`` (default 1: the first and the last token).
        At most ``a``, so that the three regions never overlap.

    Returns
    -------
    Regions
        A named tuple of three slices; ``Regions.indices(name)`` gives the positions as an array.

    Raises
    ------
    ValueError
        For ``L < 3`` or a non-integer ``L``, or ``ends`` outside ``1..a``.

    Examples
    --------
    >>> r = regions(8)
    >>> r.first, r.middle, r.last
    (slice(0, 1, None), slice(2, 6, None), slice(7, 8, None))
    >>> regions(7).indices("middle").tolist()
    [2, 3, 4]
    >>> regions(1024, ends=20).last
    slice(1004, 1024, None)
    """
    from ._validate import positive_int

    L = positive_int("L", L, minimum=3)
    a = (L + 2) // 4  # floor(L/4 + 1/2)
    ends = positive_int("ends", ends)
    if ends > a:
        raise ValueError(f"ends must be at most {a} for L = {L} (the quarter left out at each "
                         f"end of the middle), got {ends}")
    return Regions(slice(0, ends), slice(a, L - a), slice(L - ends, L))


def middle_share(profile) -> float:
    r"""The share of a profile's total in the middle region, :math:`\sum_{j \in \text{middle}}
    p_j / \sum_j p_j`, with the middle of :func:`regions` (the central half).

    Chapters :ref:`ch-remedies` and :ref:`ch-replay` (how much influence reaches mid-context).
    A flat profile gives about 1/2; a U gives less.

    Raises
    ------
    ValueError
        For a profile with fewer than 3 positions, a negative or non-finite entry, or a sum of 0.

    Examples
    --------
    >>> middle_share([1, 1, 1, 1, 1, 1, 1, 1])
    0.5
    >>> middle_share([4, 1, 0, 0, 0, 0, 1, 4])
    0.0
    """
    p = normalize(profile)
    return float(p[regions(p.size).middle].sum())


def middle_over_last(log_weights) -> float:
    r"""The median weight of the middle region (:func:`regions`, the central half) over the
    weight of the last position, for weights given by their natural logarithms (rows of
    :math:`N^H` or its gradient readings, whose entries underflow as numbers).

    Chapter :ref:`ch-residual` (where a loss's gradient weight sits: the middle against the
    last token).  Scale-free: adding a constant to every log weight leaves it unchanged.

    Raises
    ------
    ValueError
        Fewer than 3 positions, or a log weight that is NaN or :math:`+\infty`.

    Examples
    --------
    >>> round(middle_over_last([0.0, -1.0, -2.0, -2.0, -1.0, 0.0]), 6)  # e^-2 over e^0
    0.135335
    """
    w = np.asarray(log_weights, dtype=float)
    if w.ndim != 1 or w.size < 3:
        raise ValueError(f"middle_over_last needs a 1-D row of at least 3 log weights, got shape "
                         f"{w.shape}")
    if np.isnan(w).any() or np.isposinf(w).any():
        raise ValueError("middle_over_last: log weights must not be NaN or +inf, got "
                         f"{w[np.isnan(w) | np.isposinf(w)][:3]}")
    w = np.exp(w - w.max())
    return float(np.median(w[regions(w.size).middle]) / w[-1])


def normalize(p) -> np.ndarray:
    """Return the profile divided by its sum.

    Chapters :ref:`ch-init`, :ref:`ch-after` and :ref:`ch-prediction`: every comparison of two
    profiles reads them as laws on positions.

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


def spearman(x, y) -> float:
    """Spearman rank correlation between two arrays of the same shape.

    Chapters :ref:`ch-init` (theory against measurement), :ref:`ch-prediction` (rollout against
    gradient) and :ref:`ch-retrieval` (prior against outcome, per example).  The one Spearman of
    the package:

    - any finite real values (profiles, accuracies, scores centred per position, so negative
      entries are fine); arrays of any dimension are flattened, element ``i`` of ``x`` paired
      with element ``i`` of ``y``;
    - ties get their average rank (``scipy.stats.spearmanr``);
    - a **constant** input (every value tied) has no rank correlation: the result is NaN, with no
      warning (:func:`bootstrap` drops such replicates);
    - a NaN or infinite value is an error, not a result: it raises.

    Raises
    ------
    ValueError
        Shapes that differ, fewer than 2 values, or a non-finite value.

    Examples
    --------
    >>> spearman([1, 2, 3], [10, 20, 40])
    1.0
    >>> spearman([[1, 2], [3, 4]], [[-1, -2], [-3, -4]])
    -1.0
    >>> spearman([1, 1, 1], [1, 2, 3])
    nan
    """
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"x and y differ in length/shape: {a.shape} vs {b.shape}")
    a, b = a.ravel(), b.ravel()
    if a.size < 2:
        raise ValueError(f"Spearman needs at least 2 values, got {a.size}")
    for name, v in (("x", a), ("y", b)):
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{name} has a non-finite value: {v[~np.isfinite(v)][0]!r}")
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    from scipy.stats import spearmanr  # imported when used: scipy.stats costs start-up time

    return float(spearmanr(a, b).statistic)


def wasserstein(p, q) -> float:
    """Wasserstein-1 distance between two profiles seen as laws on positions scaled to [0, 1].

    Both are normalized to sum 1 first; the result lies in [0, 1].  Chapter
    :ref:`ch-prediction` (the structural theory's W1/(L-1)).

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

    Returns ``(inf, position)`` when the minimum is 0.  Chapter :ref:`ch-after`; a single-window
    verdict uses :func:`robust_peak_to_valley` instead.

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

    Chapter :ref:`ch-rollout` (the drift of each of the four forces) and chapter
    :ref:`ch-prediction`.

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

    Chapter :ref:`ch-init`: the measured profile against the row of :eq:`eq-binomial`
    (chapter :ref:`ch-residual`).

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


def fit_layout_alpha(profile, layout, mask=None) -> float:
    r"""The :math:`\alpha` of ``theory.layout_influence(layout, L, alpha)`` closest to a measured
    profile: least squares between the logs, both normalized over ``mask`` (default every
    position), as :func:`fit_alpha` does for :math:`N^H`.  Chapter :ref:`ch-layouts`; the
    report's layout row.  Use ``mask`` for the positions a layout reaches (its row is exactly 0
    beyond a sliding stack's reach).

    Raises
    ------
    ValueError
        A profile that is not strictly positive on the mask, a bad layout.

    Examples
    --------
    >>> from posbias_nb import theory
    >>> round(fit_layout_alpha(theory.layout_influence("sliding:8,full", 64, 0.3),
    ...                        "sliding:8,full"), 4)
    0.3
    """
    from scipy.optimize import minimize_scalar

    from . import theory

    p = np.asarray(profile, dtype=np.float64)
    L = p.size
    mask = np.ones(L, bool) if mask is None else np.asarray(mask, bool)
    if mask.shape != p.shape or not mask.any():
        raise ValueError("fit_layout_alpha needs a mask of the profile's length with a position")
    if np.any(~np.isfinite(p[mask])) or np.any(p[mask] <= 0):
        raise ValueError("fit_layout_alpha needs a strictly positive profile on the mask")
    lay = theory.parse_layout(layout) if isinstance(layout, str) else layout
    lp = np.log(p[mask] / p[mask].sum())

    def loss(a):
        t = theory.log_layout_influence(lay, L, a)[mask]
        return float(np.sum((lp - (t - np.logaddexp.reduce(t))) ** 2))

    return float(minimize_scalar(loss, bounds=(1e-4, 1 - 1e-4), method="bounded",
                                 options={"xatol": 1e-7}).x)


def fit_theory(profile, depths) -> dict:
    r"""The theory row :math:`t(H, \alpha)` = ``theory.influence(L, H, alpha)`` closest to a
    measured profile, with both :math:`H` (among ``depths``) and :math:`\alpha` fitted.

    For each candidate depth, :math:`\alpha` is :func:`fit_alpha` (``criterion="log"``); the
    depth kept is the one with the smallest root-mean-square log error
    :math:`\sqrt{\mathrm{mean}_j (\ln \hat p_j - \ln t_j)^2}` (both normalized; the
    ``rms_log`` of :func:`profile_summary`).  Chapters :ref:`ch-init` and :ref:`ch-after`: the
    report's overlay of the theory on a model's measured profile.

    Returns
    -------
    dict
        ``H`` (int), ``alpha`` (float), ``rms_log`` (float) and ``row`` (the fitted theory row,
        normalized, length L).

    Raises
    ------
    ValueError
        For a bad or non-positive profile, no depths, or a depth < 1.

    Examples
    --------
    >>> from posbias_nb import theory
    >>> f = fit_theory(theory.influence(64, 6, 0.4), depths=range(1, 11))
    >>> f["H"], round(f["alpha"], 3), f["rms_log"] < 1e-6
    (6, 0.4, True)
    """
    from . import theory
    from ._validate import positive_int

    p = normalize(profile)
    ds = [positive_int("depth", d) for d in depths]
    if not ds:
        raise ValueError("fit_theory needs at least one candidate depth")
    if np.any(p <= 0):
        raise ValueError("fit_theory needs a strictly positive profile")
    best = None
    for d in ds:
        a = fit_alpha(p, d)
        t = normalize(theory.influence(p.size, d, a))
        if np.any(t <= 0):
            continue
        rms = float(np.sqrt(np.mean((np.log(p) - np.log(t)) ** 2)))
        if best is None or rms < best["rms_log"]:
            best = {"H": int(d), "alpha": float(a), "rms_log": rms, "row": t}
    if best is None:
        raise ValueError("no candidate depth gives a positive theory row")
    return best


def bootstrap(statistic, *samples, n_boot: int = 2000, level: float = 0.95, seed: int = 0):
    r"""Percentile bootstrap interval of ``statistic(*samples)``: an alias of
    :func:`posbias_nb.stats.bootstrap` with ``method="percentile"``, kept for the callers that
    predate :mod:`posbias_nb.stats`.  At a handful of units it under-covers (about 84% at 5
    units for a nominal 95%, :mod:`posbias_nb.stats`); new code uses the stats module's BCa or
    t intervals.

    Every measured verdict of chapters :ref:`ch-init`, :ref:`ch-after` and :ref:`ch-prediction`.

    The samples are resampled **jointly along axis 0** (one index draw per replicate, applied to
    every sample), so paired data (the same text window measured two ways) stay paired: axis 0
    is the unit of independent replication (windows of text, examples, seeds).  ``estimate`` is
    the statistic on the full sample; ``low`` and ``high`` are the ``(1-level)/2`` and
    ``(1+level)/2`` quantiles of the ``n_boot`` replicates (replicates whose statistic is not
    finite, e.g. a correlation of a constant resample, are dropped; fewer than half finite
    raises).  The same ``seed`` gives the same interval, bit for bit.

    Parameters
    ----------
    statistic : callable
        ``statistic(*resampled) -> float``.
    *samples : array_like
        One or more arrays with the same length ``n >= 2`` along axis 0.
    n_boot : int
        Number of bootstrap replicates (>= 100).
    level : float
        Confidence level in (0, 1).
    seed : int
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    (estimate, low, high) : tuple of float

    Raises
    ------
    ValueError
        No samples, samples of different lengths or fewer than 2 units, a bad ``n_boot``,
        ``level`` or ``seed``, or too few finite replicates.

    Examples
    --------
    >>> est, lo, hi = bootstrap(np.mean, np.arange(10.0), seed=1)
    >>> est, lo < est < hi
    (4.5, True)
    """
    from . import stats

    return stats.bootstrap(statistic, *samples, n_boot=n_boot, level=level, seed=seed,
                           method="percentile")


def attention_share(x_norm, a_norm):
    r"""The structural theory's attention share of one layer, per token:
    :math:`\lambda = \lVert \mathrm{Attn}(x) \rVert / (\lVert x \rVert + \lVert \mathrm{Attn}(x)
    \rVert)` (chapter :ref:`ch-prediction`, :eq:`eq-pred-measured`).

    ``x_norm`` and ``a_norm`` are the Euclidean norms, token by token, of the residual stream
    entering the layer and of what the attention block adds to it (same shape, nonnegative).
    A token where both norms are 0 gets 0.  Average the result over tokens and sequences to get
    the layer's :math:`\lambda_t` (the authors' estimator).

    Raises
    ------
    ValueError
        For shapes that differ, or a negative or non-finite norm.

    Examples
    --------
    >>> attention_share([3.0, 1.0, 0.0], [1.0, 1.0, 0.0]).tolist()
    [0.25, 0.5, 0.0]
    """
    x = np.asarray(x_norm, dtype=np.float64)
    a = np.asarray(a_norm, dtype=np.float64)
    if x.shape != a.shape:
        raise ValueError(f"x_norm and a_norm differ in shape: {x.shape} vs {a.shape}")
    for name, v in (("x_norm", x), ("a_norm", a)):
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{name} has a non-finite value: {v[~np.isfinite(v)].flat[0]!r}")
        if np.any(v < 0):
            raise ValueError(f"{name} has a negative value: {v[v < 0].flat[0]!r}")
    den = x + a
    return np.divide(a, den, out=np.zeros_like(den), where=den > 0)


# --------------------------------------------------------------------------------------------
# Verdict helpers (chapters *The U at birth*, *After training*, *Prediction vs measurement*)


def log_pearson(p, q) -> float:
    r"""Pearson correlation between the logarithms of two strictly positive profiles.

    Chapters :ref:`ch-init` and :ref:`ch-after`: the agreement of two profiles that span
    decades, position by position, on the scale the figures use.

    Raises
    ------
    ValueError
        For profiles of different lengths, fewer than 2 positions, or a nonpositive entry.

    Examples
    --------
    >>> round(log_pearson([1, 10, 100], [2, 20, 200]), 12)
    1.0
    """
    a, b = _pair(p, q)
    if a.size < 2:
        raise ValueError(f"log_pearson needs at least 2 positions, got {a.size}")
    if np.any(a <= 0) or np.any(b <= 0):
        raise ValueError("log_pearson needs strictly positive profiles")
    return float(np.corrcoef(np.log(a), np.log(b))[0, 1])


def robust_peak_to_valley(p, ends: float = 0.02) -> tuple[float, int]:
    r"""Peak-to-valley ratio that no single position decides, and where the valley is.

    Chapters :ref:`ch-init` and :ref:`ch-after`.  With :math:`k = \max(1, \lfloor
    \text{ends}\cdot L \rceil)` positions: the **peak** is the mean of the mean of the first
    :math:`k` entries and the mean of the last :math:`k` entries; the **valley** is the minimum of
    the running mean of the profile over :math:`k` consecutive positions.  The ratio is
    peak / valley; the position returned is the (1-indexed) centre of the lowest window, rounded
    down.  The plain :func:`peak_to_valley` is the largest over the smallest single entry.

    Raises
    ------
    ValueError
        For a bad profile, ``ends`` outside (0, 0.5], or a valley of 0.

    Examples
    --------
    >>> robust_peak_to_valley([8, 4, 1, 1, 1, 1, 1, 1, 2, 4], ends=0.2)
    (4.5, 3)
    """
    a = _profile("profile", p)
    ends = float(ends)
    if not 0.0 < ends <= 0.5:
        raise ValueError(f"ends must lie in (0, 0.5], got {ends!r}")
    k = max(1, int(round(ends * a.size)))
    peak = 0.5 * (a[:k].mean() + a[-k:].mean())
    run = np.convolve(a, np.ones(k) / k, mode="valid")
    j = int(np.argmin(run))
    if run[j] <= 0:
        raise ValueError("the smoothed profile reaches 0: the ratio is infinite")
    return float(peak / run[j]), j + (k - 1) // 2 + 1


def spike_factors(p, half_width: int = 16) -> np.ndarray:
    r"""Each position's excess over its neighbours: :math:`p_j / \mathrm{median}(p_{j-w}, \dots,
    p_{j-1}, p_{j+1}, \dots, p_{j+w})`.

    Chapter :ref:`ch-after` (which tokens carry the spikes).  The median is taken over the
    neighbours **only** (the position itself is left out) and the window is cut at the ends of
    the profile, not padded, so the first and the last position are judged against the
    :math:`w` positions on their one side like any other: a spike on the first token is found.

    Raises
    ------
    ValueError
        For a bad profile, fewer than 2 positions, ``half_width < 1``, or a neighbourhood
        whose median is 0.

    Examples
    --------
    >>> spike_factors([9, 1, 1, 1, 1], half_width=2).tolist()
    [9.0, 1.0, 1.0, 1.0, 1.0]
    """
    from ._validate import positive_int

    a = _profile("profile", p)
    w = positive_int("half_width", half_width)
    if a.size < 2:
        raise ValueError(f"spike_factors needs at least 2 positions, got {a.size}")
    pad = np.concatenate([np.full(w, np.nan), a, np.full(w, np.nan)])
    win = np.lib.stride_tricks.sliding_window_view(pad, 2 * w + 1).copy()
    win[:, w] = np.nan  # the position itself is not its own neighbour
    med = np.nanmedian(win, axis=1)
    if np.any(med <= 0):
        raise ValueError("a neighbourhood has median 0: spike factors are undefined")
    return a / med


def _interval(statistic, *samples, n_boot: int = 2000, level: float = 0.95, seed: int = 0,
              agreement=None):
    """The interval of this module's window statistics.

    Ratios, arms and paired differences of profiles (``agreement=None``): BCa with the
    small-sample expansion (:func:`posbias_nb.stats.bootstrap`), because the percentile
    bootstrap covers only about 84--88% at the 5--8 windows the chapters use.

    The agreement of a *mean* profile with a fixed reference (``agreement`` the transform:
    ``"fisher"`` for a correlation, ``"log"`` for a distance): the delete-one jackknife *t*
    interval (:func:`posbias_nb.stats.jackknife_interval`).  Such an estimand depends on how
    many windows are averaged (more windows, less noise, closer agreement); a bootstrap
    resample repeats windows, averages less noise and so agrees less, nearly every replicate
    falls below the estimate, and the percentile interval excluded its own estimate on five of
    the book's pages (BCa's bias correction collapses onto the replicates' top instead).
    ``n_boot`` and ``seed`` do not apply to it.

    A gap or a ratio between agreements of mean profiles whose noise differs
    (:func:`agreement_vs_floor`: ``"difference-jackknife"``, ``"log"``): the jackknife too, for
    the same reason (BCa excluded the floor gap's estimate on RoPE on/off).

    A difference of two agreements of the same mean profile (``agreement="difference"``): the
    percentile bootstrap, whose law :func:`posbias_nb.stats.bootstrap_atom` reads for the
    differences that no resample moves (chapter :ref:`ch-prediction`); the noise that biases
    each agreement is common to both and cancels.  :func:`posbias_nb.stats.bootstrap` refuses
    it should it exclude its estimate.
    """
    from .stats import bootstrap as _stats_bootstrap, jackknife_interval

    if agreement is None or agreement == "difference":
        return _stats_bootstrap(statistic, *samples, n_boot=n_boot, level=level, seed=seed,
                                method="bca" if agreement is None else "percentile")
    transform = {"fisher": "fisher", "log": "log", "difference-jackknife": None}[agreement]
    return jackknife_interval(statistic, *samples, level=level, transform=transform)


def single_arms(p) -> dict:
    r"""The seed paper's single-position reading of a U: each end over the single smallest entry.

    Chapters :ref:`ch-init` and :ref:`ch-after`.  Returns ``max_min`` (:func:`peak_to_valley`,
    the largest over the smallest entry, what the seed reports), ``first_min`` (the first entry
    over the smallest) and ``last_min`` (the last entry over the smallest).  Unlike
    :func:`robust_peak_to_valley` these are decided by single positions: a one-token spike counts
    in full, and so does a single low entry.

    Raises
    ------
    ValueError
        For a bad profile or a smallest entry of 0.

    Examples
    --------
    >>> single_arms([8, 4, 1, 2, 4])
    {'max_min': 8.0, 'first_min': 8.0, 'last_min': 4.0}
    """
    a = _profile("profile", p)
    lo = a.min()
    if lo <= 0:
        raise ValueError("the profile reaches 0: the single-position arms are infinite")
    return {"max_min": float(a.max() / lo), "first_min": float(a[0] / lo),
            "last_min": float(a[-1] / lo)}


def window_intervals(per_window, reference=None, *, ends: float = 0.02, n_boot: int = 2000,
                     level: float = 0.95, seed: int = 0) -> dict:
    r"""Bootstrap intervals over text windows for the statistics the verdicts rest on.

    Chapters :ref:`ch-init` and :ref:`ch-after`.  ``per_window`` is an (n, L) array, one
    measured profile per window of text; every statistic is computed on the **mean** profile of
    a resample of windows (:func:`posbias_nb.stats.bootstrap`, BCa with the small-sample
    expansion, windows resampled with replacement).  Returns a dict of ``(estimate, low, high)``
    tuples:

    - ``ptv``: :func:`robust_peak_to_valley` with ``ends``;
    - ``max_min``, ``first_min``, ``last_min``: the single-position arms of :func:`single_arms`;
    - ``first_mid`` and ``last_mid``: the first and the last entry over the median of the middle
      region of :func:`regions`;
    - with a ``reference`` profile (length L, e.g. the theory's row with its :math:`\alpha`
      fitted once on all windows and held fixed): ``spearman`` and ``log_pearson`` between the
      mean profile and the reference.

    Raises
    ------
    ValueError
        Fewer than 2 windows, a reference of the wrong length, or a bad profile.
    """
    P = np.asarray(per_window, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] < 2:
        raise ValueError(f"per_window must be (n >= 2, L), got shape {P.shape}")
    return _unit_intervals(P, lambda X: X.mean(0), reference, ends=ends, n_boot=n_boot,
                           level=level, seed=seed)


def _unit_intervals(P, profile_of, reference, *, ends, n_boot, level, seed) -> dict:
    """The statistics of :func:`window_intervals` on ``profile_of(resample of the rows of P)``."""
    kw = dict(n_boot=n_boot, level=level, seed=seed)
    out = {"ptv": _interval(lambda X: robust_peak_to_valley(profile_of(X), ends)[0], P, **kw)}
    for k in ("max_min", "first_min", "last_min"):
        out[k] = _interval(lambda X, k=k: single_arms(profile_of(X))[k], P, **kw)
    middle = regions(P.shape[1]).middle

    def end_over_middle(X, i):
        p = profile_of(X)
        return p[i] / np.median(p[middle])

    out["first_mid"] = _interval(lambda X: end_over_middle(X, 0), P, **kw)
    out["last_mid"] = _interval(lambda X: end_over_middle(X, -1), P, **kw)
    if reference is not None:
        ref = _profile("reference", reference)
        if ref.size != P.shape[1]:
            raise ValueError(f"reference has {ref.size} positions, the profile {P.shape[1]}")
        out["spearman"] = _interval(lambda X: spearman(profile_of(X), ref), P,
                                    agreement="fisher", **kw)
        out["log_pearson"] = _interval(lambda X: log_pearson(profile_of(X), ref), P,
                                       agreement="fisher", **kw)
    return out


def probe_intervals(samples, reference=None, *, ends: float = 0.02, n_boot: int = 2000,
                    level: float = 0.95, seed: int = 0) -> dict:
    r"""Intervals over the probes of **one** window, for the statistics of
    :func:`window_intervals`.

    The reproduce page (its long-context view), and any profile of a single window, e.g.
    ``posbias profile --format json`` (whose ``probe_samples`` this takes).  ``samples`` is the
    (K, L) array of squared norms :math:`\lVert z_k^\top J_j \rVert^2` of K Hutchinson probes
    (``influence_profile(...)["probe_samples"][b]``); a resample of probes gives the profile
    :math:`\sqrt{\text{mean}_k}` (:func:`posbias_nb.measure.jacobian.hutchinson`), and the
    probes are resampled jointly over positions (one probe serves every position, so the errors
    of neighbouring positions are correlated).  BCa with the small-sample expansion over the K
    probes, as :func:`window_intervals` over windows.

    These intervals cover the **probe error given the window**: how far the estimate may sit
    from the exact profile of the same text.  They say nothing of how another text would read;
    that is what :func:`window_intervals` over several windows is for.

    Raises
    ------
    ValueError
        Fewer than 2 probes, a negative sample, a reference of the wrong length.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> J = np.array([9.0, 1.0, 1.0, 1.0, 4.0])            # exact squared norms
    >>> S = J * rng.chisquare(4, size=(8, 5)) / 4         # 8 noisy probes of them
    >>> r = probe_intervals(S, n_boot=400)
    >>> r["first_mid"][1] < 3 < r["first_mid"][2]        # the exact ratio is 3
    True
    """
    S = np.asarray(samples, dtype=np.float64)
    if S.ndim != 2 or S.shape[0] < 2:
        raise ValueError(f"samples must be (K >= 2 probes, L), got shape {S.shape}")
    if not np.all(np.isfinite(S)) or (S < 0).any():
        raise ValueError("samples are squared norms: finite and >= 0")
    return _unit_intervals(S, lambda X: np.sqrt(X.mean(0)), reference, ends=ends,
                           n_boot=n_boot, level=level, seed=seed)


def profile_summary(per_window, depth: int | None = None, *, ends: float = 0.02,
                    n_boot: int = 2000, seed: int = 0) -> dict:
    r"""The numbers the chapters report about a measured influence profile, with intervals.

    Chapters :ref:`ch-init` and :ref:`ch-after` (one summary for both).  ``per_window`` is an
    (n, L) array of profiles, one per text window (n >= 2).  The mean profile ``p`` (normalized
    to sum 1) gives:

    - ``ptv`` and ``jmin``: :func:`robust_peak_to_valley` (``ends``) with its bootstrap interval
      over windows (``ptv_ci``, a tuple ``(estimate, low, high)``), and ``ptv_max`` the plain
      largest-over-smallest ratio (decided by two single positions);
    - the seed's single-position reading with intervals (:func:`single_arms`): ``max_min_ci``,
      ``first_min_ci`` and ``last_min_ci``; ``first_mid_ci`` and ``last_mid_ci``.  The robust ratio averages the first and last
      ``ends`` of the positions (10 positions at L = 512), so it dilutes a one-token spike about
      tenfold and its window grows with L; these arms do not;
    - ``first_mid`` and ``last_mid``: the first and last entry over the median of the middle
      region of :func:`regions` (the central half); ``head_mid``: the mean of the first 8 over
      the same median;
      ``late_early``: median of the last quarter (last token excluded) over that of the second;
    - ``rho_seq``: the median Spearman correlation between pairs of single windows.

    With ``depth`` (the number of layers) also the theory's row ``t`` =
    ``theory.influence(L, depth, alpha)`` with ``alpha`` fitted once on ``p`` (:func:`fit_alpha`,
    held fixed in the bootstrap), ``alpha_last`` (the last-share fit), ``rms_log`` and the
    intervals ``rho_ci`` (Spearman) and ``log_pearson_ci`` between the mean profile and ``t``.

    Raises
    ------
    ValueError
        Fewer than 2 windows or 8 positions, or a bad profile.
    """
    from itertools import combinations

    from . import theory

    P = np.asarray(per_window, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] < 2 or P.shape[1] < 8:
        raise ValueError(f"per_window must be (n >= 2, L >= 8), got shape {P.shape}")
    n, L = P.shape
    p = normalize(P.mean(0))
    middle = regions(L).middle
    mid = np.median(p[middle])
    ptv, jmin = robust_peak_to_valley(p, ends)
    pairs = list(combinations(range(n), 2))[:28]
    out = dict(p=p, L=L, n_windows=n, ptv=ptv, jmin=jmin, ptv_max=peak_to_valley(p)[0],
               first_mid=p[0] / mid, last_mid=p[-1] / mid, head_mid=np.mean(p[:8]) / mid,
               late_early=np.median(p[3 * L // 4: L - 1]) / np.median(p[L // 4: L // 2]),
               rho_seq=float(np.median([spearman(P[i], P[j]) for i, j in pairs])))
    t = None
    if depth is not None:
        a = fit_alpha(p, depth)
        t = theory.influence(L, depth, a)
        tmid = np.median(t[middle])
        out.update(H=depth, alpha=a, alpha_last=fit_alpha(p, depth, criterion="last"), t=t,
                   ptv_t=robust_peak_to_valley(t, ends)[0],
                   jmin_t=robust_peak_to_valley(t, ends)[1],
                   rms_log=float(np.sqrt(np.mean((np.log(p) - np.log(t)) ** 2))),
                   first_mid_t=t[0] / tmid, last_mid_t=t[-1] / tmid)
    iv = window_intervals(P, t, ends=ends, n_boot=n_boot, seed=seed)
    out["ptv_ci"] = iv["ptv"]
    for k in ("max_min", "first_min", "last_min", "first_mid", "last_mid"):
        out[f"{k}_ci"] = iv[k]
    if t is not None:
        out["rho_ci"], out["log_pearson_ci"] = iv["spearman"], iv["log_pearson"]
        out["rho"] = iv["spearman"][0]
    return out


def agreement_vs_floor(same, fresh, other, *, n_boot: int = 2000, seed: int = 0) -> dict:
    r"""How well a changed model agrees with the original, against the agreement of the original
    with itself re-measured with fresh probes (the noise floor), paired over windows.

    Chapter :ref:`ch-init` (RoPE on against RoPE off).  ``same``, ``fresh`` and ``other`` are
    (n, L) arrays of per-window profiles on the **same windows of text**: ``same`` and ``fresh``
    the original model measured with two independent probe sets, ``other`` the changed model
    (measured with the probes of ``same``, so that it and ``fresh`` share none).  The statistics
    are computed on the mean profiles of a resample of windows, all three resampled jointly:

    - ``pearson`` and ``spearman``: :func:`log_pearson` and :func:`spearman` of ``other`` against
      ``fresh``; ``floor_pearson`` and ``floor_spearman``: the same for ``same`` against
      ``fresh``;
    - ``gap_pearson`` and ``gap_spearman``: floor minus agreement (> 0: the change is visible
      above probe noise).  The gap is the statistic to decide on: both terms carry the same probe
      noise, which cancels in the difference, while each correlation alone depends on how many
      windows were averaged (more windows, less noise, higher correlation);
    - ``ratio_pearson`` and ``ratio_spearman``: agreement over floor, the agreement corrected
      for the probe noise (a disattenuated correlation: 1 when the change cannot be told from
      re-measuring the original).

    Each value is an ``(estimate, low, high)`` tuple of the delete-one jackknife
    (:func:`posbias_nb.stats.jackknife_interval`): on Fisher's scale for the correlations, on
    the log scale for the ratios, plain for the gaps (see :func:`_interval`: these estimands
    depend on the number of windows, and a bootstrap resample, which repeats windows, leans
    away from them; BCa excluded the gap's own estimate).

    Raises
    ------
    ValueError
        Arrays of different shapes, fewer than 2 windows, or a nonpositive profile.
    """
    A, F, O = (np.asarray(x, dtype=np.float64) for x in (same, fresh, other))
    if not (A.shape == F.shape == O.shape) or A.ndim != 2 or A.shape[0] < 2:
        raise ValueError(f"same, fresh and other must share a shape (n >= 2, L), got "
                         f"{A.shape}, {F.shape}, {O.shape}")
    kw = dict(n_boot=n_boot, seed=seed)
    stats_ = {
        "pearson": lambda a, f, o: log_pearson(o.mean(0), f.mean(0)),
        "spearman": lambda a, f, o: spearman(o.mean(0), f.mean(0)),
        "floor_pearson": lambda a, f, o: log_pearson(a.mean(0), f.mean(0)),
        "floor_spearman": lambda a, f, o: spearman(a.mean(0), f.mean(0)),
        "gap_pearson": lambda a, f, o: (log_pearson(a.mean(0), f.mean(0))
                                        - log_pearson(o.mean(0), f.mean(0))),
        "gap_spearman": lambda a, f, o: (spearman(a.mean(0), f.mean(0))
                                         - spearman(o.mean(0), f.mean(0))),
        "ratio_pearson": lambda a, f, o: (log_pearson(o.mean(0), f.mean(0))
                                          / log_pearson(a.mean(0), f.mean(0))),
        "ratio_spearman": lambda a, f, o: (spearman(o.mean(0), f.mean(0))
                                           / spearman(a.mean(0), f.mean(0))),
    }
    how = {"gap": "difference-jackknife", "ratio": "log"}
    return {k: _interval(s, A, F, O, agreement=how.get(k.split("_")[0], "fisher"), **kw)
            for k, s in stats_.items()}


def w1_difference_exact(qa, qb, per_window) -> bool:
    r"""Whether :math:`W_1(a, \bar X) - W_1(b, \bar X)` is the same number for every mean
    profile :math:`\bar X` of the windows (every bootstrap resample included), so that its
    interval has width 0 by construction, not by chance.

    Chapter *Prediction vs measurement*.  :math:`W_1` on positions is
    :math:`\sum_t \lvert F_a(t) - F_X(t)\rvert / (L - 1)` with :math:`F` the CDFs.  Where
    :math:`F_X(t)` lies on one side of both :math:`F_a(t)` and :math:`F_b(t)`, the term
    :math:`\lvert F_a - F_X\rvert - \lvert F_b - F_X\rvert` is :math:`\pm(F_b - F_a)`, free
    of :math:`X`.  The CDF of a normalized mean of windows is a convex combination of the
    windows' CDFs, so when at every :math:`t` all windows lie on one side (the same for all of
    them), so does every resampled mean, and the difference equals
    :math:`\sum_t s_t (F_b - F_a)/(L - 1)` exactly: a constant, not an estimate.

    Examples
    --------
    >>> a, b = [0.5, 0.5, 0.0], [0.4, 0.6, 0.0]      # F_a = .5, 1, 1;  F_b = .4, 1, 1
    >>> w1_difference_exact(a, b, [[0.9, 0.1, 0.0], [0.8, 0.2, 0.0]])  # F_X = .9 / .8 > both
    True
    >>> w1_difference_exact(a, b, [[0.9, 0.1, 0.0], [0.45, 0.55, 0.0]])  # .45: between them
    False
    """
    P = np.asarray(per_window, dtype=np.float64)
    Fa = np.cumsum(normalize(_profile("prediction a", qa)))[:-1]
    Fb = np.cumsum(normalize(_profile("prediction b", qb)))[:-1]
    FX = np.cumsum(P / P.sum(1, keepdims=True), axis=1)[:, :-1]
    hi, lo = np.maximum(Fa, Fb), np.minimum(Fa, Fb)
    above = np.all(FX >= hi, axis=0)
    below = np.all(FX <= lo, axis=0)
    return bool(np.all(above | below))


def prediction_scores(per_window, predictions: dict, pairs=(), *, n_boot: int = 1000,
                      seed: int = 0) -> dict:
    r"""Spearman and :math:`W_1` of each prediction against a measured profile, with bootstrap
    intervals over the measured windows, and paired differences between predictions.

    Chapter *Prediction vs measurement*.  ``per_window`` is (n, L), the measured influence per
    window; ``predictions`` maps a name to a fixed profile of length L (held fixed: only the
    measurement is resampled).  Returns ``{("rho", m): ci, ("w1", m): ci}`` for every prediction
    ``m`` and, for every ``(a, b)`` in ``pairs``, ``("dw1", a, b)``: :math:`W_1(a) - W_1(b)` and
    ``("drho", a, b)``: :math:`\rho(b) - \rho(a)` (both > 0 when ``b`` is the better
    prediction); ``("dw1_atom", a, b)`` and ``("drho_atom", a, b)``: the share of resamples
    that leave that difference at its estimate (:func:`posbias_nb.stats.bootstrap_atom`), and
    ``("dw1_exact", a, b)``, ``("drho_exact", a, b)``: whether that share is 1, so that the
    interval is the exact value, width 0 by construction of the statistic (for :math:`W_1` when
    every resampled mean's CDF lies on one side of both predictions' CDFs,
    :func:`w1_difference_exact` being a sufficient condition read off the windows; for
    :math:`\rho` when every resampled mean ranks the positions alike).  Each ``ci`` is an
    ``(estimate, low, high)`` tuple: the jackknife for ``rho`` and ``w1``, the percentile
    bootstrap for the differences (see :func:`_interval`).

    Raises
    ------
    ValueError
        Fewer than 2 windows, a prediction of the wrong length, or an unknown name in ``pairs``.
    """
    P = np.asarray(per_window, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] < 2:
        raise ValueError(f"per_window must be (n >= 2, L), got shape {P.shape}")
    preds = {m: _profile(f"prediction {m!r}", q) for m, q in predictions.items()}
    for m, q in preds.items():
        if q.size != P.shape[1]:
            raise ValueError(f"prediction {m!r} has {q.size} positions, the windows {P.shape[1]}")
    from .stats import bootstrap_atom

    kw = dict(n_boot=n_boot, seed=seed)
    out = {}
    for m, q in preds.items():
        out["rho", m] = _interval(lambda X, q=q: spearman(q, X.mean(0)), P, agreement="fisher",
                                  **kw)
        out["w1", m] = _interval(lambda X, q=q: wasserstein(q, X.mean(0)), P, agreement="log",
                                 **kw)
    for a, b in pairs:
        if a not in preds or b not in preds:
            raise ValueError(f"unknown prediction in pair {(a, b)!r}")
        qa, qb = preds[a], preds[b]
        dw1 = lambda X: wasserstein(qa, X.mean(0)) - wasserstein(qb, X.mean(0))  # noqa: E731
        drho = lambda X: spearman(qb, X.mean(0)) - spearman(qa, X.mean(0))  # noqa: E731
        for stat, f in (("dw1", dw1), ("drho", drho)):
            out[stat, a, b] = _interval(f, P, agreement="difference", **kw)
            out[f"{stat}_atom", a, b] = bootstrap_atom(f, P, **kw)
            out[f"{stat}_exact", a, b] = out[f"{stat}_atom", a, b] == 1.0
    return out


# --------------------------------------------------------------------------------------------
# Chapter *After training*: spikes, the paired gain, and which tokens carry the spikes


def self_spike(profile, index: int) -> float:
    r"""How far one position stands above the rest: :math:`p_i / \mathrm{median}_{j \ne i} p_j`.

    Chapter :ref:`ch-after` (:eq:`eq-bidir`): the output position's own spike in a bidirectional
    encoder, measured (on the mean profile over windows) and predicted (on
    ``theory.bidirectional_influence``).  Scale-free: the profile need not be normalized.

    Raises
    ------
    ValueError
        For a bad profile, fewer than 2 positions, ``index`` outside the profile, or a median of
        the others equal to 0.

    Examples
    --------
    >>> self_spike([1, 1, 9, 1], 2)
    9.0
    >>> self_spike([1, 2, 3, 4], -1)
    2.0
    """
    a = _profile("profile", profile)
    if a.size < 2:
        raise ValueError(f"self_spike needs at least 2 positions, got {a.size}")
    i = int(index)
    if not -a.size <= i < a.size:
        raise ValueError(f"index {index} outside a profile of {a.size} positions")
    med = np.median(np.delete(a, i))
    if med <= 0:
        raise ValueError("the other positions have median 0: the spike is infinite")
    return float(a[i] / med)


def paired_ptv_ratio(per_window_a, per_window_b, *, ends: float = 0.02, n_boot: int = 2000,
                     seed: int = 0, reading: str = "robust") -> tuple[float, float, float]:
    r"""How many times deeper the U of ``a`` is than that of ``b``, paired over windows:
    :math:`\mathrm{ptv}(\bar a) / \mathrm{ptv}(\bar b)` with :func:`robust_peak_to_valley` on the
    mean profiles, and its :func:`posbias_nb.stats.bootstrap` interval (BCa, windows resampled
    jointly).

    Chapter :ref:`ch-after`: a pretrained model against its random-init twin reading the same
    token ids, the scale-free test of "deepened tenfold".  ``reading="single"`` takes the seed's
    largest-over-smallest single position (``max_min`` of :func:`single_arms`) instead of the
    robust ratio.

    Returns
    -------
    (estimate, low, high) : tuple of float

    Raises
    ------
    ValueError
        Arrays of different shapes, not (n >= 2, L), or a bad profile.

    Examples
    --------
    >>> U = np.array([[8.0, 2, 1, 1, 2, 8], [9.0, 2, 1, 1, 2, 9]])
    >>> paired_ptv_ratio(U, U, ends=0.1, n_boot=100)
    (1.0, 1.0, 1.0)
    """
    A = np.asarray(per_window_a, dtype=np.float64)
    B = np.asarray(per_window_b, dtype=np.float64)
    if A.shape != B.shape or A.ndim != 2 or A.shape[0] < 2:
        raise ValueError(f"per_window_a and per_window_b must share a shape (n >= 2, L), got "
                         f"{A.shape} and {B.shape}")

    from ._validate import choice

    choice("reading", reading, ("robust", "single"))

    def ptv(X):
        if reading == "single":
            return single_arms(X.mean(0))["max_min"]
        return robust_peak_to_valley(X.mean(0), ends)[0]

    def ratio(X, Y):
        return ptv(X) / ptv(Y)

    return _interval(ratio, A, B, n_boot=n_boot, seed=seed)


def decades(ci, candidates=(1, 2, 3)) -> list[int]:
    r"""The powers of ten :math:`k` a ratio's interval is compatible with, reading "about
    :math:`10^k`" as :math:`|\log_{10} r - k| \le 1/2` for some :math:`r` in the interval.

    Chapter :ref:`ch-after` (the seed paper's "about :math:`10^2`", "about :math:`10^3`").
    ``ci`` is ``(estimate, low, high)`` (only ``low`` and ``high`` are read) or ``(low, high)``.

    Raises
    ------
    ValueError
        For a nonpositive or non-finite bound, or ``low > high``.

    Examples
    --------
    >>> decades((150.0, 60.0, 250.0))
    [2]
    >>> decades((40.0, 20.0, 3500.0))
    [1, 2, 3]
    >>> decades((5.0, 4.0, 6.0), candidates=(2, 3))
    []
    """
    lo, hi = (float(v) for v in tuple(ci)[-2:])
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo <= 0 or lo > hi:
        raise ValueError(f"need 0 < low <= high, finite, got {lo!r}, {hi!r}")
    llo, lhi = np.log10(lo), np.log10(hi)
    return [int(k) for k in candidates if llo <= k + 0.5 and lhi >= k - 0.5]


def is_mark(token: str) -> bool:
    """Whether a decoded token is punctuation, whitespace or a newline only (no letter, digit
    or other symbol).

    Chapter :ref:`ch-after`: are the spikes of a trained profile on punctuation (an
    attention-sink picture) or on words?  ASCII punctuation (``string.punctuation``) counts; the
    empty string (a token that decodes to nothing) counts as a mark.

    Examples
    --------
    >>> [is_mark(t) for t in (" ", "\\n", ").", " the", "x.", "42", "")]
    [True, True, True, False, False, False, True]
    """
    import string

    s = str(token).strip()
    return all(c in string.punctuation for c in s)


def spike_census(profile, ids, words, top: int = 10, half_width: int = 16) -> dict:
    r"""Which tokens carry the largest spikes of one window's profile.

    Chapter :ref:`ch-after` (*Which tokens carry the spikes*).  The spike factor of each position
    is :func:`spike_factors` (``half_width``); the last position, the output itself, is left out.
    The ``top`` positions with the largest factor are compared with the whole window:

    - ``top``: their 0-indexed positions, largest first; ``f_top``: the median of their factors;
      ``f_first``: the first position's factor; ``first_top``: 1.0 if position 0 is among them;
    - ``mark_top`` and ``mark_base``: the share of :func:`is_mark` tokens among the spikes and
      among all positions (the output left out);
    - ``rep_top`` and ``rep_base``: the same for tokens whose id occurs more than once in the
      window.

    Parameters
    ----------
    profile : array_like, shape (L,)
        One window's influence profile.
    ids : array_like of int, shape (L,)
        The token ids of the window.
    words : sequence of str, length L
        The decoded tokens.

    Raises
    ------
    ValueError
        Lengths that differ, ``top`` outside ``1..L-1``, or as :func:`spike_factors`.

    Examples
    --------
    >>> c = spike_census([1, 1, 9, 1, 1, 1, 1, 5], [5, 6, 7, 6, 8, 9, 10, 11],
    ...                  [" a", " b", ".", " b", " c", " d", " e", " f"], top=1, half_width=2)
    >>> c["top"].tolist(), c["mark_top"], c["rep_top"]
    ([2], 1.0, 0.0)
    """
    from ._validate import positive_int

    a = _profile("profile", profile)
    ids = np.asarray(ids).ravel()
    words = [str(w) for w in words]
    if not (a.size == ids.size == len(words)):
        raise ValueError(f"profile, ids and words differ in length: {a.size}, {ids.size}, "
                         f"{len(words)}")
    top = positive_int("top", top)
    if top > a.size - 1:
        raise ValueError(f"top must be at most {a.size - 1} (the output left out), got {top}")
    f = spike_factors(a, half_width)[:-1]
    best = np.argsort(f, kind="stable")[::-1][:top]
    mark = np.array([is_mark(w) for w in words[:-1]])
    _, inv, counts = np.unique(ids, return_inverse=True, return_counts=True)
    repeated = (counts[inv] > 1)[:-1]
    return dict(top=best, first_top=float(0 in best), f_first=float(f[0]),
                f_top=float(np.median(f[best])), mark_top=float(mark[best].mean()),
                mark_base=float(mark.mean()), rep_top=float(repeated[best].mean()),
                rep_base=float(repeated.mean()))


def auc(score_, label) -> float:
    """Area under the ROC curve of ``score_`` for the binary ``label`` (Mann–Whitney, ties
    count one half); NaN when only one class is present (chapter :ref:`ch-retrieval`, does the
    gold value's influence predict a correct answer).

    Examples
    --------
    >>> auc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1])
    1.0
    """
    from scipy.stats import rankdata

    s, y = np.asarray(score_, dtype=float), np.asarray(label, dtype=bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        return float("nan")
    r = rankdata(s)
    return float((r[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def monotone_channels(values) -> np.ndarray:
    r"""Spearman correlation of each channel with position: ``values`` is ``(L, d)`` (position
    by channel), the result ``(d,)``; a constant channel gives NaN.  The criterion of Yu et al.
    (2024) for the positional hidden dimension (chapter :ref:`ch-inference`,
    :func:`posbias_nb.measure.positional.positional_channel`).

    Examples
    --------
    >>> monotone_channels([[0, 5, 1], [1, 4, 1], [2, 6, 1]]).round(2).tolist()
    [1.0, 0.5, nan]
    """
    from scipy.stats import rankdata

    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] < 2:
        raise ValueError(f"values must be (positions >= 2, channels), got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError("values has a non-finite entry")
    r = rankdata(v, axis=0)
    r = r - r.mean(axis=0)
    p = np.arange(v.shape[0], dtype=np.float64)
    p = p - p.mean()
    sd = np.sqrt((r ** 2).sum(axis=0) * (p ** 2).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (r * p[:, None]).sum(axis=0) / sd
    return np.where(sd > 0, out, np.nan)


def _minmax(x):
    lo, hi = x.min(axis=0), x.max(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (x - lo) / np.where(hi > lo, hi - lo, np.nan)


def cubic_monotone(series, skip: int = 300) -> np.ndarray:
    r"""Yu et al.'s monotonicity test of each channel (their ``fit_and_monotic``): the series
    from position ``skip`` on, min-max normalised, gets a least-squares cubic; the channel is
    **increasing** (1) if every first difference of the fitted curve on the integer grid is
    ``>= 0``, **decreasing** (2) if every one is ``<= 0``, else 0.  ``series`` is
    ``(positions, channels)``; a constant channel gives 0.  Chapter :ref:`ch-inference`.

    Examples
    --------
    >>> x = np.arange(40.0)
    >>> cubic_monotone(np.stack([x, -x ** 2, np.sin(x / 3)], 1), skip=0).tolist()
    [1, 2, 0]
    """
    v = np.asarray(series, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] - int(skip) < 5:
        raise ValueError(f"series must be (positions > skip + 4, channels), got shape {v.shape} "
                         f"with skip={skip!r}")
    y = _minmax(v[int(skip):])
    ok = np.all(np.isfinite(y), axis=0)
    x = np.arange(y.shape[0], dtype=np.float64)
    coef = np.polyfit(x, np.where(ok, y, 0.0), 3)  # (4, channels)
    fit = np.vander(x, 4) @ coef
    d = np.diff(fit, axis=0)
    out = np.where(np.all(d >= 0, axis=0), 1, np.where(np.all(d <= 0, axis=0), 2, 0))
    return np.where(ok, out, 0).astype(int)


def savgol_roughness(series, skip: int = 200) -> np.ndarray:
    r"""Yu et al.'s smoothness score of each channel (their ``get_smoothness``; smaller is
    smoother): from position ``skip`` on, min-max normalised, a Savitzky-Golay filter (window
    10, order 3), then the sum of squared second differences.  ``series``: ``(positions,
    channels)``; a constant channel gives ``inf``.

    Examples
    --------
    >>> x = np.arange(60.0)
    >>> r = savgol_roughness(np.stack([x, np.sin(x)], 1), skip=0)
    >>> bool(100 * r[0] < r[1])  # the line is far smoother than the sine
    True
    """
    from scipy.signal import savgol_filter

    v = np.asarray(series, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] - int(skip) < 12:
        raise ValueError(f"series must be (positions > skip + 11, channels), got shape "
                         f"{v.shape} with skip={skip!r}")
    y = _minmax(v[int(skip):])
    ok = np.all(np.isfinite(y), axis=0)
    y = savgol_filter(np.where(ok, y, 0.0), window_length=10, polyorder=3, axis=0)
    r = np.square(np.diff(y, n=2, axis=0)).sum(axis=0)
    return np.where(ok, r, np.inf)


def positional_candidates(hidden, top: int = 10, mono_skip: int = 300,
                          smooth_skip: int = 200) -> dict:
    r"""Stages 1 and 2 of Yu et al.'s channel search (their ``search_by_statistic``) on the
    mean hidden states ``hidden`` of every layer, ``(entries, positions, channels)`` (the
    ``output_hidden_states`` of a model averaged over sequences, embeddings first).

    * An odd number of entries drops the first (the embeddings); of the ``T`` left, the layers
      ``2 .. T - 2`` are tested.
    * Each channel's monotone layers (:func:`cubic_monotone`, from ``mono_skip``) in its
      dominant direction (increasing if strictly more layers increase than decrease); the
      channel passes if they are more than ``T // 4``.
    * The passing channels are ranked by their smallest :func:`savgol_roughness` (from
      ``smooth_skip``) over their monotone layers; the ``top`` smoothest are the candidates.

    Returns ``{"candidates" (best first), "passed", "roughness" (of the candidates),
    "monotone_layers" (count per channel), "direction" (1 up, 2 down)}``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> h = rng.normal(size=(9, 400, 6))
    >>> h[:, :, 4] += np.linspace(0, 30, 400)  # one channel grows with position in every layer
    >>> positional_candidates(h, mono_skip=100, smooth_skip=50)["candidates"].tolist()
    [4]
    """
    h = np.asarray(hidden, dtype=np.float64)
    if h.ndim != 3:
        raise ValueError(f"hidden must be (entries, positions, channels), got shape {h.shape}")
    if h.shape[0] % 2 == 1:
        h = h[1:]
    T = h.shape[0]
    layers = list(range(2, T - 1))
    if not layers:
        raise ValueError(f"{T} layers leave none between 2 and T - 2 to test")
    kinds = np.stack([cubic_monotone(h[i], mono_skip) for i in layers])  # (layers, channels)
    inc, dec = (kinds == 1).sum(0), (kinds == 2).sum(0)
    direction = np.where(inc > dec, 1, 2)
    count = np.where(inc > dec, inc, dec)
    passed = np.flatnonzero(count > T // 4)
    rough = np.full(h.shape[2], np.inf)
    if passed.size:
        per = np.stack([savgol_roughness(h[i][:, passed], smooth_skip) for i in layers])
        mine = kinds[:, passed] == direction[passed][None]
        rough[passed] = np.where(mine, per, np.inf).min(axis=0)
    order = passed[np.argsort(rough[passed], kind="stable")][:int(top)]
    return {"candidates": order, "passed": passed, "roughness": rough[order],
            "monotone_layers": count, "direction": direction}


def attention_sharpness(rows) -> np.ndarray:
    r"""How sharply each head attends: minus the mean entropy (nats) of its attention rows.
    ``rows`` is ``(..., heads, R, L)`` probabilities (zeros allowed); the result drops the last
    two axes.  Ms-PoE orders heads by it (:func:`posbias_nb.models.remedies.ms_poe_ratios`).

    Examples
    --------
    >>> attention_sharpness([[[[1.0, 0.0]]], [[[0.5, 0.5]]]]).round(3).tolist()
    [[-0.0], [-0.693]]
    """
    p = np.asarray(rows, dtype=np.float64)
    if p.ndim < 3 or np.any(p < 0) or not np.all(np.isfinite(p)):
        raise ValueError(f"rows must be non-negative probabilities (..., heads, R, L), got shape "
                         f"{p.shape}")
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=-1)
    return -ent.mean(axis=-1)
