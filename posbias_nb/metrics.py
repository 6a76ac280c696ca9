"""Comparing and summarising influence profiles.

A *profile* is a 1-D array of nonnegative weights over positions 1..L.  The comparison
functions follow the structural theory's protocol: both profiles normalized to sum 1, Spearman
rank correlation, and Wasserstein-1 between the two laws on positions scaled to [0, 1].
Chapters :ref:`ch-init`, :ref:`ch-after`, :ref:`ch-rollout` and :ref:`ch-prediction`.
"""
from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["normalize", "spearman", "wasserstein", "peak_to_valley", "mean_position", "fit_alpha",
           "bootstrap", "attention_share", "auc", "log_pearson", "robust_peak_to_valley", "spike_factors",
           "window_intervals", "profile_summary", "agreement_vs_floor",
           "prediction_scores"]


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


def spearman(p, q) -> float:
    """Spearman rank correlation between two profiles of the same length.

    Chapters :ref:`ch-init` (theory against measurement) and :ref:`ch-prediction` (rollout
    against gradient).

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


def bootstrap(statistic, *samples, n_boot: int = 2000, level: float = 0.95, seed: int = 0):
    r"""Percentile bootstrap interval of ``statistic(*samples)``.

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
    from ._validate import positive_int

    if not samples:
        raise ValueError("bootstrap needs at least one sample")
    arrs = [np.asarray(s) for s in samples]
    n = arrs[0].shape[0] if arrs[0].ndim else 0
    for a in arrs:
        if a.ndim == 0 or a.shape[0] != n:
            raise ValueError("samples must share their length along axis 0, got "
                             f"{[x.shape[0] if x.ndim else None for x in arrs]}")
    if n < 2:
        raise ValueError(f"bootstrap needs at least 2 units along axis 0, got {n}")
    n_boot = positive_int("n_boot", n_boot, minimum=100)
    seed = positive_int("seed", seed, minimum=0)
    try:
        level = float(level)
    except (TypeError, ValueError):
        raise ValueError(f"level must be a number in (0, 1), got {level!r}") from None
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    estimate = float(statistic(*arrs))
    rng = np.random.default_rng([seed, 0xB007])
    reps = np.empty(n_boot)
    for b in range(n_boot):
        idx = rng.integers(0, n, size=n)
        with np.errstate(all="ignore"):
            reps[b] = float(statistic(*(a[idx] for a in arrs)))
    ok = reps[np.isfinite(reps)]
    if ok.size < n_boot / 2:
        raise ValueError(f"only {ok.size} of {n_boot} bootstrap replicates are finite")
    lo, hi = np.quantile(ok, [(1 - level) / 2, (1 + level) / 2])
    return estimate, float(lo), float(hi)


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


def window_intervals(per_window, reference=None, *, ends: float = 0.02, n_boot: int = 2000,
                     level: float = 0.95, seed: int = 0) -> dict:
    r"""Bootstrap intervals over text windows for the statistics the verdicts rest on.

    Chapters :ref:`ch-init` and :ref:`ch-after`.  ``per_window`` is an (n, L) array, one
    measured profile per window of text; every statistic is computed on the **mean** profile of
    a resample of windows (:func:`bootstrap`, windows resampled with replacement).  Returns a
    dict of ``(estimate, low, high)`` tuples:

    - ``ptv``: :func:`robust_peak_to_valley` with ``ends``;
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
    kw = dict(n_boot=n_boot, level=level, seed=seed)
    out = {"ptv": bootstrap(lambda X: robust_peak_to_valley(X.mean(0), ends)[0], P, **kw)}
    if reference is not None:
        ref = _profile("reference", reference)
        if ref.size != P.shape[1]:
            raise ValueError(f"reference has {ref.size} positions, the windows {P.shape[1]}")
        out["spearman"] = bootstrap(lambda X: spearman(X.mean(0), ref), P, **kw)
        out["log_pearson"] = bootstrap(lambda X: log_pearson(X.mean(0), ref), P, **kw)
    return out


def profile_summary(per_window, depth: int | None = None, *, ends: float = 0.02,
                    n_boot: int = 2000, seed: int = 0) -> dict:
    r"""The numbers the chapters report about a measured influence profile, with intervals.

    Chapters :ref:`ch-init` and :ref:`ch-after` (one summary for both).  ``per_window`` is an
    (n, L) array of profiles, one per text window (n >= 2).  The mean profile ``p`` (normalized
    to sum 1) gives:

    - ``ptv`` and ``jmin``: :func:`robust_peak_to_valley` (``ends``) with its bootstrap interval
      over windows (``ptv_ci``, a tuple ``(estimate, low, high)``), and ``ptv_max`` the plain
      largest-over-smallest ratio (decided by two single positions; for reference only);
    - ``first_mid`` and ``last_mid``: the first and last entry over the median of the middle half
      (positions L/4 .. 3L/4); ``head_mid``: the mean of the first 8 over the same median;
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
    mid = np.median(p[L // 4: 3 * L // 4])
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
        tmid = np.median(t[L // 4: 3 * L // 4])
        out.update(H=depth, alpha=a, alpha_last=fit_alpha(p, depth, criterion="last"), t=t,
                   ptv_t=robust_peak_to_valley(t, ends)[0],
                   jmin_t=robust_peak_to_valley(t, ends)[1],
                   rms_log=float(np.sqrt(np.mean((np.log(p) - np.log(t)) ** 2))),
                   first_mid_t=t[0] / tmid, last_mid_t=t[-1] / tmid)
    iv = window_intervals(P, t, ends=ends, n_boot=n_boot, seed=seed)
    out["ptv_ci"] = iv["ptv"]
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
      above probe noise).

    Each value is an ``(estimate, low, high)`` tuple of :func:`bootstrap`.

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
    }
    return {k: bootstrap(s, A, F, O, **kw) for k, s in stats_.items()}


def prediction_scores(per_window, predictions: dict, pairs=(), *, n_boot: int = 1000,
                      seed: int = 0) -> dict:
    r"""Spearman and :math:`W_1` of each prediction against a measured profile, with bootstrap
    intervals over the measured windows, and paired differences between predictions.

    Chapter *Prediction vs measurement*.  ``per_window`` is (n, L), the measured influence per
    window; ``predictions`` maps a name to a fixed profile of length L (held fixed: only the
    measurement is resampled).  Returns ``{("rho", m): ci, ("w1", m): ci}`` for every prediction
    ``m`` and, for every ``(a, b)`` in ``pairs``, ``("dw1", a, b)``: :math:`W_1(a) - W_1(b)` and
    ``("drho", a, b)``: :math:`\rho(b) - \rho(a)` (both > 0 when ``b`` is the better
    prediction).  Each ``ci`` is an ``(estimate, low, high)`` tuple of :func:`bootstrap`.

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
    kw = dict(n_boot=n_boot, seed=seed)
    out = {}
    for m, q in preds.items():
        out["rho", m] = bootstrap(lambda X, q=q: spearman(q, X.mean(0)), P, **kw)
        out["w1", m] = bootstrap(lambda X, q=q: wasserstein(q, X.mean(0)), P, **kw)
    for a, b in pairs:
        if a not in preds or b not in preds:
            raise ValueError(f"unknown prediction in pair {(a, b)!r}")
        qa, qb = preds[a], preds[b]
        out["dw1", a, b] = bootstrap(
            lambda X: wasserstein(qa, X.mean(0)) - wasserstein(qb, X.mean(0)), P, **kw)
        out["drho", a, b] = bootstrap(
            lambda X: spearman(qb, X.mean(0)) - spearman(qa, X.mean(0)), P, **kw)
    return out


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
