r"""The full-causal theory of uniform attention at initialization (*Lost in the Middle at Birth*).

At initialization the attention logits are (nearly) equal, so a causal attention layer averages
uniformly over the prefix: it is the Cesàro matrix :math:`M_{ij} = 1/i` for :math:`j \le i`
(1-indexed).  A residual connection mixes it with the identity,
:math:`N = (1-\alpha) I + \alpha M`, and a stack of ``depth`` layers is :math:`N^H`.  The last row
of :math:`N^H` is the influence of each input position on the last output.  Chapters
:ref:`ch-cesaro` (:math:`\alpha = 1`) and :ref:`ch-residual` (:math:`\alpha < 1`).

Everything here is pure numerics; nothing imports torch.

Conventions of ``theory``
-------------------------
* Positions are 1-indexed in formulas and 0-indexed in arrays: ``row[j-1]`` is position ``j``.
* ``influence`` never forms a matrix power: one step of the row recursion
  :math:`v \leftarrow (1-\alpha) v + \alpha\, v M` is a suffix sum,
  :math:`(vM)_j = \sum_{i \ge j} v_i / i`, so a row costs :math:`O(L \cdot H)`.
* The float path works in log space, so entries far below the float64 range (the "dead zone"
  at large depth) are either returned exactly as ``log_influence`` or rounded to 0 by ``exp``,
  never produced by an underflowing intermediate.
"""
from __future__ import annotations

from fractions import Fraction
from itertools import combinations_with_replacement

import numpy as np
from scipy.special import gammainc, gammaln, logsumexp

from .._validate import exact_fraction, positive_int, unit_interval_float

__all__ = [
    "cesaro",
    "influence",
    "log_influence",
    "shape_map",
    "density",
    "recency_mass",
    "continuum_row",
    "chain_sum",
    "binomial_weights",
    "log_density",
    "dead_zone_asymptotic",
    "influence_ratios",
    "log_column_sums",
    "log_column_l2",
    "column_l2",
    "arm_ratio",
    "arm_ratio_approx",
    "converges_to",
    "bidirectional_influence",
    "continuum_tv",
    "density_series",
    "first_depth",
    "bidirectional_alpha",
]


def cesaro(L: int, exact: bool = False):
    r"""The :math:`L \times L` Cesàro matrix :math:`M_{ij} = 1/i` for :math:`j \le i`, else 0.

    Chapter :ref:`ch-cesaro`, :eq:`eq-cesaro` (and :func:`posbias_nb.rollout.uniform_causal`).

    Parameters
    ----------
    L : int
        Sequence length, ``L >= 1``.
    exact : bool
        If True return a ``sympy.Matrix`` of ``Rational`` entries, else a float64 array.

    Raises
    ------
    ValueError
        If ``L`` is not an integer >= 1.

    Examples
    --------
    >>> cesaro(3)
    array([[1.        , 0.        , 0.        ],
           [0.5       , 0.5       , 0.        ],
           [0.33333333, 0.33333333, 0.33333333]])
    """
    L = positive_int("L", L)
    if exact:
        import sympy as sp

        return sp.Matrix(L, L, lambda i, j: sp.Rational(1, i + 1) if j <= i else 0)
    i = np.arange(1, L + 1, dtype=np.float64)
    return np.tril(np.ones((L, L))) / i[:, None]


def _log_alpha_terms(alpha: float) -> tuple[float, float]:
    with np.errstate(divide="ignore"):
        return float(np.log1p(-alpha)), float(np.log(alpha))


def _log_rows(L: int, max_depth: int, a: float):
    """Yield the log last rows of N^H for H = 0, 1, ..., max_depth (one recursion pass)."""
    start = np.full(L, -np.inf)
    start[-1] = 0.0
    return _log_recursion(start, max_depth, a)


def log_influence(L: int, depth: int, alpha=1.0) -> np.ndarray:
    r"""Natural log of the last row of :math:`((1-\alpha)I + \alpha M)^{H}`, in :math:`O(L H)`.

    Chapter :ref:`ch-cesaro`, :eq:`eq-chain` (``alpha = 1``), and chapter :ref:`ch-residual`,
    :eq:`eq-binomial`, in log space.

    Entries that are exactly zero come back as ``-inf`` (only possible for ``alpha`` = 0 or for
    ``depth`` = 0).  Use this instead of :func:`influence` when the dead zone falls below the
    float64 range (``depth`` in the hundreds).

    Raises
    ------
    ValueError
        For ``L < 1``, ``depth < 0`` (or not an integer), ``alpha`` outside [0, 1].

    Examples
    --------
    >>> round(float(log_influence(10, 2)[-1]), 12)  # (M^2)_{LL} = L^-2, log = -2 ln 10
    -4.605170185988
    """
    L = positive_int("L", L)
    depth = positive_int("depth", depth, minimum=0)
    a = unit_interval_float("alpha", alpha)
    for v in _log_rows(L, depth, a):
        pass
    return v


def shape_map(L: int, max_depth: int, alphas) -> dict:
    r"""Shape of the influence row over a grid of depths ``1..max_depth`` and mixings ``alphas``.

    Chapter :ref:`ch-residual` (the maps over depth and mixing), from the rows of
    :eq:`eq-binomial`.  One recursion pass per ``alpha`` gives every depth.  Ratios are returned as base-10 logs,
    computed from the log rows, so they never overflow.

    Returns
    -------
    dict
        Arrays of shape ``(len(alphas), max_depth)``: ``log10_peak_to_valley`` (log10 of
        max/min over positions), ``log10_u_depth`` (log10 of min(first, last)/min: how far
        *both* arms of the U rise above the valley; 0 means no U) and ``argmin`` (1-indexed
        position of the minimum); plus ``depths`` (1..max_depth) and ``alphas``.

    Raises
    ------
    ValueError
        For ``L < 2``, ``max_depth < 1`` or any alpha outside (0, 1].
    """
    L = positive_int("L", L, minimum=2)
    max_depth = positive_int("max_depth", max_depth)
    alphas = [unit_interval_float("alpha", a) for a in np.atleast_1d(alphas)]
    for a in alphas:
        if a == 0.0:
            raise ValueError("alpha must be > 0 for a shape map (alpha = 0 is the identity), got 0")
    shape = (len(alphas), max_depth)
    ptv, ud, amin = np.empty(shape), np.empty(shape), np.empty(shape, dtype=int)
    ln10 = np.log(10.0)
    for ia, a in enumerate(alphas):
        for h, v in enumerate(_log_rows(L, max_depth, a)):
            if h == 0:
                continue
            j = int(np.argmin(v))
            ptv[ia, h - 1] = (v.max() - v[j]) / ln10
            ud[ia, h - 1] = (min(v[0], v[-1]) - v[j]) / ln10
            amin[ia, h - 1] = j + 1
    return {"depths": np.arange(1, max_depth + 1), "alphas": np.array(alphas),
            "log10_peak_to_valley": ptv, "log10_u_depth": ud, "argmin": amin}


def influence(L: int, depth: int, alpha=1.0, exact: bool = False):
    r"""Last row of :math:`N^H`, :math:`N = (1-\alpha) I + \alpha M`: the influence of each input.

    Chapter :ref:`ch-cesaro`, :eq:`eq-chain` (``alpha = 1``: the last row of :math:`M^H`), and
    chapter :ref:`ch-residual`, :eq:`eq-binomial` (``alpha < 1``).

    Parameters
    ----------
    L : int
        Sequence length, ``L >= 1``.
    depth : int
        Number of layers ``H >= 0`` (``0`` gives the last unit vector).
    alpha : float, Fraction, sympy Rational or str
        Attention share of each layer, in [0, 1]; ``alpha = 1`` is attention without residual.
        With ``exact=True`` a float is read through its decimal repr (``0.3`` is 3/10) and a
        string such as ``"3/10"`` is accepted.
    exact : bool
        True: a list of :class:`fractions.Fraction`, computed in exact rational arithmetic.
        False: a float64 array, computed in log space (no intermediate underflow).

    Returns
    -------
    numpy.ndarray or list of Fraction
        Length ``L``; entry ``j-1`` is the weight of input position ``j``.  Sums to 1.

    Raises
    ------
    ValueError
        For ``L < 1``, ``depth < 0``, or ``alpha`` outside [0, 1].

    Examples
    --------
    >>> influence(3, 1, exact=True)
    [Fraction(1, 3), Fraction(1, 3), Fraction(1, 3)]
    >>> influence(4, 2, alpha="1/2", exact=True)[-1]
    Fraction(25, 64)
    """
    if not exact:
        return np.exp(log_influence(L, depth, alpha))
    L = positive_int("L", L)
    depth = positive_int("depth", depth, minimum=0)
    a = exact_fraction("alpha", alpha)
    keep = 1 - a
    v = [Fraction(0)] * L
    v[-1] = Fraction(1)
    for _ in range(depth):
        acc = Fraction(0)
        new = [Fraction(0)] * L
        for i in range(L - 1, -1, -1):  # suffix sums of v_i / i
            acc += v[i] / (i + 1)
            new[i] = keep * v[i] + a * acc
        v = new
    return v


def recency_mass(depth: int, alpha) -> float:
    r"""Mass of the Dirac spike at the last token in the continuum limit: :math:`(1-\alpha)^H`.

    Chapter :ref:`ch-residual`, the Dirac term of :eq:`eq-residual-density`.

    Raises
    ------
    ValueError
        For ``depth < 0`` or ``alpha`` outside [0, 1].

    Examples
    --------
    >>> recency_mass(3, 0.5)
    0.125
    """
    depth = positive_int("depth", depth, minimum=0)
    a = unit_interval_float("alpha", alpha)
    return float((1.0 - a) ** depth)


def binomial_weights(depth: int, alpha) -> np.ndarray:
    r"""Weights :math:`\binom{H}{k}\alpha^k(1-\alpha)^{H-k}`, k = 0..H, of the powers
    :math:`M^k` in :math:`N^H` (computed in log space).

    Chapter :ref:`ch-residual`, :eq:`eq-binomial`.

    Raises
    ------
    ValueError
        For ``depth < 0`` or ``alpha`` outside [0, 1].
    """
    depth = positive_int("depth", depth, minimum=0)
    a = unit_interval_float("alpha", alpha)
    k = np.arange(depth + 1)
    if a == 0.0:
        return (k == 0).astype(float)
    if a == 1.0:
        return (k == depth).astype(float)
    logc = gammaln(depth + 1) - gammaln(k + 1) - gammaln(depth - k + 1)
    return np.exp(logc + k * np.log(a) + (depth - k) * np.log1p(-a))


def _unit_positions(x) -> tuple[np.ndarray, bool]:
    """``x`` as a 1-D float64 array of relative positions in (0, 1], and whether it was a scalar."""
    xa = np.asarray(x, dtype=np.float64)
    bad = ~((xa > 0) & (xa <= 1))
    if np.any(bad):
        raise ValueError(f"x must lie in (0, 1], got {xa[bad].ravel()[0]!r}")
    return np.atleast_1d(xa), xa.ndim == 0


def density(x, depth: int, alpha=1.0):
    r"""Smooth part of the continuum influence density at relative position ``x`` in (0, 1].

    Chapter :ref:`ch-cesaro`, :eq:`eq-density` (``alpha = 1``), and chapter :ref:`ch-residual`,
    :eq:`eq-residual-density`:

    .. math::
        \rho(x) = \sum_{k=1}^{H} \binom{H}{k} \alpha^k (1-\alpha)^{H-k}
                  \frac{(\ln 1/x)^{k-1}}{(k-1)!}

    For ``alpha = 1`` this is :math:`(\ln 1/x)^{H-1}/(H-1)!`, the law of a product of ``H``
    uniforms.  The rest of the mass, :func:`recency_mass`, sits as a Dirac at ``x = 1``.
    Evaluated with a log-sum-exp, so large depths do not overflow.

    Parameters
    ----------
    x : float or array_like
        Relative positions in (0, 1].
    depth, alpha :
        As in :func:`influence`.

    Returns
    -------
    float or numpy.ndarray (same shape as ``x``)

    Raises
    ------
    ValueError
        For any ``x`` outside (0, 1], ``depth < 0`` or ``alpha`` outside [0, 1].

    Examples
    --------
    >>> float(density(0.5, 1))
    1.0
    """
    depth = positive_int("depth", depth, minimum=0)
    a = unit_interval_float("alpha", alpha)
    xa, scalar = _unit_positions(x)
    if depth == 0 or a == 0.0:
        out = np.zeros_like(xa)
        return float(out[0]) if scalar else out
    t = -np.log(xa)  # ln 1/x >= 0
    k = np.arange(1, depth + 1)
    w = binomial_weights(depth, a)[1:]
    with np.errstate(divide="ignore"):
        logw = np.log(w)
        logt = np.log(t)
    # (k-1) * log t, with 0 * log 0 = 0 for k = 1
    km1 = (k - 1)[:, None]
    with np.errstate(invalid="ignore"):
        pow_term = np.where(km1 == 0, 0.0, km1 * logt[None, :])
    terms = logw[:, None] + pow_term - gammaln(k)[:, None]
    m = np.max(terms, axis=0)
    finite = np.isfinite(m)
    out = np.zeros_like(xa)
    out[finite] = np.exp(m[finite] + np.log(np.sum(np.exp(terms[:, finite] - m[finite]), axis=0)))
    return float(out[0]) if scalar else out


def continuum_row(L: int, depth: int, alpha=1.0) -> np.ndarray:
    r"""The continuum law binned onto ``L`` positions: mass of ``((j-1)/L, j/L]`` for each j,
    plus the Dirac :math:`(1-\alpha)^H` on the last position.

    Chapter :ref:`ch-cesaro`, :eq:`eq-density` binned onto positions (and chapter
    :ref:`ch-residual`, :eq:`eq-residual-density`).

    The smooth part of :math:`M^k` is the law of :math:`X = U_1 \cdots U_k` (uniforms), so
    :math:`-\ln X \sim \mathrm{Gamma}(k, 1)` and
    :math:`P(X \le x) = Q(k, \ln 1/x)` (regularized upper incomplete gamma).  This is the exact
    counterpart of :func:`influence` as ``L`` goes to infinity, and sums to 1 for every ``L``.

    Raises
    ------
    ValueError
        For ``L < 1``, ``depth < 0`` or ``alpha`` outside [0, 1].
    """
    L = positive_int("L", L)
    depth = positive_int("depth", depth, minimum=0)
    a = unit_interval_float("alpha", alpha)
    w = binomial_weights(depth, a)
    edges = np.arange(0, L + 1, dtype=np.float64) / L
    with np.errstate(divide="ignore"):
        t = -np.log(edges)  # inf at x = 0, 0 at x = 1
    row = np.zeros(L)
    row[-1] += w[0]
    for k in range(1, depth + 1):
        if w[k] == 0.0:
            continue
        # CDF of X at the edges: P(X <= x) = Q(k, t) = 1 - P(k, t); bin mass = P(k, t_lo) - P(k, t_hi)
        p = gammainc(k, t)  # P(k, inf) = 1, P(k, 0) = 0
        row += w[k] * (p[:-1] - p[1:])
    return row


def chain_sum(L: int, j: int, depth: int) -> Fraction:
    r"""Exact :math:`(M^H)_{L j}` by brute-force enumeration of the nested chain sum
    (chapter :ref:`ch-cesaro`, :eq:`eq-chain`)

    .. math::
        (M^H)_{Lj} = \sum_{L \ge i_1 \ge \cdots \ge i_{H-1} \ge j}
                     \frac{1}{L\, i_1 \cdots i_{H-1}},

    one term per path of a walk that jumps from ``i`` to a uniform position in ``1..i``.
    Exponential cost: for checking the formula on small sizes only.

    Raises
    ------
    ValueError
        For ``L < 1``, ``depth < 1`` or ``j`` outside ``1..L``.
    """
    L = positive_int("L", L)
    depth = positive_int("depth", depth, minimum=1)
    j = positive_int("j", j)
    if j > L:
        raise ValueError(f"j must lie in 1..L={L}, got {j!r}")
    total = Fraction(0)
    for chain in combinations_with_replacement(range(j, L + 1), depth - 1):
        prod = L
        for i in chain:
            prod *= i
        total += Fraction(1, prod)
    return total


# ------------------------------------------------------- the dead zone with residuals (alpha < 1)
def log_density(x, depth: int, alpha=1.0):
    r"""Natural log of :func:`density`, :math:`\ln \rho_{H,\alpha}(x)`, without underflow.

    Chapter :ref:`ch-residual`, :eq:`eq-residual-density`.  Needed at depths where the
    density itself is below the float64 range (pure attention at ``H`` in the hundreds:
    :math:`(\ln 2)^{199}/199! \approx 10^{-407}`).  ``-inf`` where the density is exactly 0
    (``depth = 0``, ``alpha = 0``, or ``x = 1`` with ``alpha = 1`` and ``depth >= 2``).

    Raises
    ------
    ValueError
        As :func:`density`.

    Examples
    --------
    >>> import math
    >>> bool(abs(log_density(0.5, 200, 1.0) - (199 * math.log(math.log(2)) - math.lgamma(200))) < 1e-9)
    True
    """
    depth = positive_int("depth", depth, minimum=0)
    a = unit_interval_float("alpha", alpha)
    xa, scalar = _unit_positions(x)
    out = np.full(xa.shape, -np.inf)
    if depth > 0 and a > 0.0:
        t = -np.log(xa)
        k = np.arange(1, depth + 1)
        if a == 1.0:
            logw = np.where(k == depth, 0.0, -np.inf)
        else:
            logw = (gammaln(depth + 1) - gammaln(k + 1) - gammaln(depth - k + 1)
                    + k * np.log(a) + (depth - k) * np.log1p(-a))
        with np.errstate(divide="ignore", invalid="ignore"):
            km1 = (k - 1)[:, None]
            pow_term = np.where(km1 == 0, 0.0, km1 * np.log(t)[None, :])
        terms = logw[:, None] + pow_term - gammaln(k)[:, None]
        m = np.max(terms, axis=0)
        fin = np.isfinite(m)
        out[fin] = m[fin] + np.log(np.sum(np.exp(terms[:, fin] - m[fin]), axis=0))
    return float(out[0]) if scalar else out


def dead_zone_asymptotic(x, depth, alpha, log: bool = False):
    r"""Leading-order behaviour of the continuum density at a fixed interior ``x`` as ``H`` grows.

    Chapter :ref:`ch-residual`, :eq:`eq-deadzone-asymptotic`.  With
    :math:`t = \ln(1/x)`, :math:`b = \alpha/(1-\alpha)` and :math:`n = H - 1`:

    .. math::
        \rho_{H,\alpha}(x) \sim \alpha (1-\alpha)^{n}\,
        \frac{e^{-bt/2}}{2\sqrt{\pi}}\, (bt)^{-3/4}\, n^{1/4}\, e^{2\sqrt{n b t}}
        \qquad (0 < \alpha < 1),

    Perron's asymptotic of the Laguerre form
    :math:`\rho = \alpha(1-\alpha)^{H-1} L^{(1)}_{H-1}(-bt)`: geometric decay
    :math:`(1-\alpha)^H` times the sub-exponential factor :math:`e^{2\sqrt{Hbt}}`.  For
    :math:`\alpha = 1` it returns the exact :math:`t^{H-1}/(H-1)!`.

    Parameters
    ----------
    x : float or array_like
        Relative positions in (0, 1).
    depth : int or array_like of int
        Depths ``H >= 2`` (``H >= 1`` for ``alpha = 1``).
    alpha : float
        In (0, 1].
    log : bool
        Return the natural log (no underflow) instead of the value.

    Raises
    ------
    ValueError
        For ``x`` outside (0, 1), a depth below the minimum, or ``alpha`` outside (0, 1].

    Examples
    --------
    >>> r = float(dead_zone_asymptotic(0.5, 400, 0.5) / density(0.5, 400, 0.5))
    >>> abs(r - 1) < 0.05  # leading order: the relative error falls like 1/sqrt(H)
    True
    """
    a = unit_interval_float("alpha", alpha)
    if a == 0.0:
        raise ValueError("alpha must be > 0 (alpha = 0 has no smooth part), got 0")
    xa = np.asarray(x, dtype=np.float64)
    bad = ~((xa > 0) & (xa < 1))
    if np.any(bad):
        raise ValueError(f"x must lie in (0, 1), got {xa[bad].ravel()[0]!r}")
    H = np.asarray(depth)
    if not np.issubdtype(H.dtype, np.integer) or np.any(H < (1 if a == 1.0 else 2)):
        raise ValueError(f"depth must be integers >= {1 if a == 1.0 else 2}, got {depth!r}")
    t = -np.log(xa)
    n = (H - 1).astype(np.float64)
    if a == 1.0:
        out = n * np.log(t) - gammaln(n + 1)
    else:
        b = a / (1 - a)
        out = (np.log(a) + n * np.log1p(-a) - b * t / 2 - np.log(2 * np.sqrt(np.pi))
               - 0.75 * np.log(b * t) + 0.25 * np.log(n) + 2 * np.sqrt(n * b * t))
    return out if log else np.exp(out)


def _log_recursion(log_v: np.ndarray, max_depth: int, a: float):
    """Yield log(v N^h) for h = 0..max_depth, N = (1-a) I + a M, from a log start vector."""
    log_keep, log_a = _log_alpha_terms(a)
    log_i = np.log(np.arange(1, log_v.size + 1, dtype=np.float64))
    v = log_v.copy()
    yield v
    for _ in range(max_depth):
        if a == 0.0:
            yield v
            continue
        s = np.logaddexp.accumulate((v - log_i)[::-1])[::-1]
        v = s if a == 1.0 else np.logaddexp(log_keep + v, log_a + s)
        yield v


def influence_ratios(L: int, position: int, max_depth: int, alpha) -> np.ndarray:
    r"""Successive ratios :math:`(N^{H+1})_{L j} / (N^H)_{L j}` at one position, ``H = 1..max_depth-1``.

    Chapter :ref:`ch-residual`, :eq:`eq-deadzone-ratio`: the finite-``L`` counterpart of
    :math:`\rho_{H+1}(x)/\rho_H(x)`, computed from the log rows (one recursion pass), so depths
    in the hundreds do not underflow.

    Parameters
    ----------
    L : int
        Sequence length ``>= 2``.
    position : int
        1-indexed position ``j`` in ``1..L``.
    max_depth : int
        Largest depth, ``>= 2``.
    alpha : float
        In (0, 1].

    Returns
    -------
    numpy.ndarray
        ``(max_depth - 1,)``: entry ``H-1`` is the ratio from depth ``H`` to ``H+1``.

    Raises
    ------
    ValueError
        For bad ``L``, ``position``, ``max_depth`` or ``alpha`` (0 excluded).
    """
    L = positive_int("L", L, minimum=2)
    j = positive_int("position", position)
    if j > L:
        raise ValueError(f"position must lie in 1..L={L}, got {position!r}")
    max_depth = positive_int("max_depth", max_depth, minimum=2)
    a = unit_interval_float("alpha", alpha)
    if a == 0.0:
        raise ValueError("alpha must be > 0 (alpha = 0 is the identity), got 0")
    start = np.full(L, -np.inf)
    start[-1] = 0.0
    logs = np.array([v[j - 1] for v in _log_recursion(start, max_depth, a)])
    return np.exp(np.diff(logs[1:]))


def log_column_sums(L: int, depth: int, alpha=1.0) -> np.ndarray:
    r"""Natural log of the column sums :math:`\mathbf 1^\top N^H` (the next-token-loss gradient).

    Chapter :ref:`ch-residual`, :eq:`eq-column-sums`.  With a loss on *every* output
    (next-token prediction), input ``j`` receives :math:`\sum_i (N^H)_{ij}` times a gradient of
    unit size per output.  One step is :math:`c \leftarrow (1-\alpha)c + \alpha\, cM`, the
    same suffix-sum recursion as :func:`log_influence` started from the all-ones vector.

    Raises
    ------
    ValueError
        For ``L < 1``, ``depth < 0`` or ``alpha`` outside [0, 1].

    Examples
    --------
    >>> np.exp(log_column_sums(3, 1)).round(4).tolist()  # 1 + 1/2 + 1/3, 1/2 + 1/3, 1/3
    [1.8333, 0.8333, 0.3333]
    """
    L = positive_int("L", L)
    depth = positive_int("depth", depth, minimum=0)
    a = unit_interval_float("alpha", alpha)
    for v in _log_recursion(np.zeros(L), depth, a):
        pass
    return v


def _column_args(L, depth, positions):
    """Checked ``L``, ``depth`` and the 0-indexed columns for 1-indexed ``positions``."""
    L = positive_int("L", L)
    depth = positive_int("depth", depth, minimum=0)
    if positions is None:
        return L, depth, np.arange(L)
    try:
        pos = [positive_int("positions", j) for j in np.atleast_1d(positions).tolist()]
    except TypeError:
        raise ValueError(f"positions must be integers in 1..L={L}, got {positions!r}") from None
    if not pos or any(j > L for j in pos):
        raise ValueError(f"positions must be integers in 1..L={L}, got {positions!r}")
    return L, depth, np.asarray(pos) - 1


def log_column_l2(L: int, depth: int, alpha=1.0, positions=None) -> np.ndarray:
    r"""Natural log of the column :math:`\ell_2` norms :math:`\sqrt{\sum_i (N^H)_{ij}^2}`.

    Chapter :ref:`ch-residual`, :eq:`eq-column-l2`: the next-token-loss gradient when the
    per-output gradients are *independent* (equal size, random directions), so that they add in
    quadrature; :func:`log_column_sums` is the reading where they are identical and add linearly.
    Column ``j`` of :math:`N^H` is :math:`N^H e_j`; one step
    :math:`v \leftarrow (1-\alpha) v + \alpha M v` is a prefix sum,
    :math:`(Mv)_i = \frac1i \sum_{k \le i} v_k`, computed in log space (no intermediate
    underflow), so ``k`` columns cost :math:`O(L H k)`.  :func:`column_l2` with ``exact=True``
    gives the same norms in exact arithmetic.

    Parameters
    ----------
    L, depth, alpha
        As :func:`influence`.
    positions : int or sequence of int, optional
        1-indexed columns to compute (default: all ``L``).

    Returns
    -------
    numpy.ndarray
        One log norm per requested column, in the order given.

    Raises
    ------
    ValueError
        For ``L < 1``, ``depth < 0``, ``alpha`` outside [0, 1], or a position outside ``1..L``.

    Examples
    --------
    >>> np.exp(log_column_l2(2, 1)).round(4).tolist()  # M = [[1, 0], [1/2, 1/2]]
    [1.118, 0.5]
    >>> round(float(np.exp(log_column_l2(8, 3, 0.5, positions=8)[0])), 6)  # (1 - a + a/L)^H
    0.177979
    """
    L, depth, cols = _column_args(L, depth, positions)
    a = unit_interval_float("alpha", alpha)
    log_keep, log_a = _log_alpha_terms(a)
    log_i = np.log(np.arange(1, L + 1, dtype=np.float64))[:, None]
    X = np.full((L, cols.size), -np.inf)
    X[cols, np.arange(cols.size)] = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(depth if a > 0.0 else 0):
            s = np.logaddexp.accumulate(X, axis=0) - log_i
            X = s if a == 1.0 else np.logaddexp(log_keep + X, log_a + s)
    return 0.5 * logsumexp(2.0 * X, axis=0)


def column_l2(L: int, depth: int, alpha=1.0, exact: bool = False, positions=None):
    r"""The column :math:`\ell_2` norms :math:`\sqrt{\sum_i (N^H)_{ij}^2}`, float or exact.

    Chapter :ref:`ch-residual`, :eq:`eq-column-l2` (see :func:`log_column_l2` for the reading).

    With ``exact=False`` a float64 array, ``exp`` of :func:`log_column_l2` (a norm below the
    float64 range rounds to 0; use the log form at large depth).  With ``exact=True`` the same
    prefix-sum recursion in exact rational arithmetic (``alpha`` as in :func:`influence`), and
    each norm the SymPy number ``sqrt(q)`` of the exact rational sum of squares ``q``; meant for
    small ``L`` (:math:`O(L^2 H)` rational operations for all columns).

    Raises
    ------
    ValueError
        As :func:`log_column_l2`.

    Examples
    --------
    >>> column_l2(2, 1, exact=True)  # columns (1, 1/2) and (0, 1/2)
    [sqrt(5)/2, 1/2]
    >>> column_l2(3, 2, alpha="1/2", exact=True, positions=[3])  # (1 - 1/2 + 1/6)^2
    [4/9]
    """
    if not exact:
        return np.exp(log_column_l2(L, depth, alpha, positions))
    import sympy as sp

    L, depth, cols = _column_args(L, depth, positions)
    a = exact_fraction("alpha", alpha)
    keep = 1 - a
    out = []
    for c in cols.tolist():
        v = [Fraction(0)] * L
        v[c] = Fraction(1)
        for _ in range(depth):
            acc, new = Fraction(0), [Fraction(0)] * L
            for i in range(L):  # prefix sums of v_k, divided by i
                acc += v[i]
                new[i] = keep * v[i] + a * acc / (i + 1)
            v = new
        q = sum(x * x for x in v)
        out.append(sp.sqrt(sp.Rational(q.numerator, q.denominator)))
    return out


def _arm_args(L, depth, alpha):
    L = positive_int("L", L, minimum=2)
    depth = positive_int("depth", depth)
    a = unit_interval_float("alpha", alpha)
    if a == 0.0:
        raise ValueError("alpha must be > 0 (alpha = 0 leaves the position before last at 0), got 0")
    return L, depth, a


def arm_ratio(L: int, depth: int, alpha) -> float:
    r"""Exact ratio of the last entry of the row of :math:`N^H` to the one before it.

    Chapter :ref:`ch-residual`, :eq:`eq-arm-ratio`.  ``N`` is lower triangular, so the
    bottom-right :math:`2 \times 2` block of :math:`N^H` is the power of that block of ``N``;
    with :math:`\mu_i = 1-\alpha+\alpha/i`:

    .. math::
        \frac{(N^H)_{LL}}{(N^H)_{L,L-1}}
          = \frac{1}{(L-1)\,\big((\mu_{L-1}/\mu_L)^H - 1\big)} .

    Raises
    ------
    ValueError
        For ``L < 2``, ``depth < 1`` or ``alpha`` outside (0, 1].

    Examples
    --------
    >>> round(arm_ratio(4, 2, 0.5), 10)  # influence(4, 2, "1/2", exact=True): (25/64)/(31/192)
    2.4193548387
    """
    L, H, a = _arm_args(L, depth, alpha)
    mu_L = 1 - a + a / L
    eps = a / (L * (L - 1) * mu_L)  # mu_{L-1}/mu_L - 1
    return float(1.0 / ((L - 1) * np.expm1(H * np.log1p(eps))))


def arm_ratio_approx(L: int, depth: int, alpha) -> float:
    r"""Leading terms of :func:`arm_ratio`: :math:`(1-\alpha)L/(\alpha H) + 1/H`.

    Chapter :ref:`ch-residual`, :eq:`eq-arm-ratio`.  It never undershoots the exact
    ratio and overshoots it by at most :math:`(H-1)/(H(L-1)) < 1/(L-1)`, for every
    ``L >= 2``, ``H >= 1`` and ``alpha`` in (0, 1].

    Raises
    ------
    ValueError
        As :func:`arm_ratio`.

    Examples
    --------
    >>> arm_ratio_approx(1024, 32, 0.5)
    32.03125
    """
    L, H, a = _arm_args(L, depth, alpha)
    return (1 - a) * L / (a * H) + 1 / H


def converges_to(seq, limit: float, rtol: float) -> bool:
    r"""Whether a sequence settles at ``limit``: its last value is within ``rtol * |limit|``
    of it, and over the second half its distance to ``limit`` never grows.

    Chapter :ref:`ch-residual`, :eq:`eq-deadzone-ratio`: the check that the successive
    ratios of the dead zone tend to :math:`1-\alpha` (geometric decay) and not to 0 (factorial
    decay).  ``limit`` must be nonzero: "tends to 0" is the alternative it must reject.

    Raises
    ------
    ValueError
        For fewer than 2 values, a non-finite value, ``limit == 0`` or ``rtol <= 0``.

    Examples
    --------
    >>> converges_to([0.7, 0.6, 0.55, 0.52], 0.5, 0.05)
    True
    >>> converges_to([0.7, 0.5, 0.3, 0.1], 0.5, 0.05)   # passes through, does not settle
    False
    """
    s = np.asarray(seq, dtype=np.float64).ravel()
    if s.size < 2 or not np.all(np.isfinite(s)):
        raise ValueError(f"seq must hold at least 2 finite values, got {s.tolist()!r}")
    if not np.isfinite(limit) or limit == 0:
        raise ValueError(f"limit must be finite and nonzero, got {limit!r}")
    if not rtol > 0:
        raise ValueError(f"rtol must be > 0, got {rtol!r}")
    dist = np.abs(s - limit)
    tail = dist[s.size // 2:]
    return bool(dist[-1] <= rtol * abs(limit) and np.all(np.diff(tail) <= 1e-15))


def bidirectional_influence(L: int, depth: int, alpha, output: int = -1) -> np.ndarray:
    r"""Row ``output`` of :math:`N^H` for uniform attention **without** a causal mask,
    :math:`N = (1-\alpha) I + \alpha U`, :math:`U = \tfrac1L \mathbf 1 \mathbf 1^\top`.

    Chapter :ref:`ch-after`, :eq:`eq-bidir`: since :math:`U^2 = U`,
    :math:`N^H = (1-\alpha)^H I + (1 - (1-\alpha)^H) U`, so every position gets
    :math:`(1 - (1-\alpha)^H)/L` and the output position :math:`(1-\alpha)^H` on top.

    Raises
    ------
    ValueError
        For ``L < 1``, ``depth < 0``, ``alpha`` outside [0, 1] or ``output`` outside the row.

    Examples
    --------
    >>> bidirectional_influence(4, 1, 0.5).tolist()
    [0.125, 0.125, 0.125, 0.625]
    """
    from .._validate import positive_int

    L = positive_int("L", L)
    depth = positive_int("depth", depth, minimum=0)
    a = float(alpha)
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}")
    if not -L <= int(output) < L:
        raise ValueError(f"output {output} outside a row of {L} positions")
    keep = (1.0 - a) ** depth
    row = np.full(L, (1.0 - keep) / L)
    row[int(output)] += keep
    return row


def continuum_tv(L: int, depth: int, alpha=1.0) -> float:
    r"""Total-variation distance between the exact row :func:`influence` and the continuum law
    binned onto the same positions (:func:`continuum_row`):
    :math:`\tfrac12 \sum_j |\mathrm{row}_j - \mathrm{bin}_j|`, in [0, 1].

    Chapter :ref:`ch-cesaro`: how fast the finite rows approach :eq:`eq-density` (small only once
    :math:`L \gg e^H`).

    Raises
    ------
    ValueError
        For ``L < 1``, ``depth < 0`` or ``alpha`` outside [0, 1].

    Examples
    --------
    >>> continuum_tv(100, 1) < 1e-12  # one uniform layer is exactly the uniform law
    True
    >>> round(continuum_tv(100, 8), 3) > round(continuum_tv(100, 2), 3)
    True
    """
    return float(0.5 * np.abs(influence(L, depth, alpha) - continuum_row(L, depth, alpha)).sum())


def density_series(depth: int, t, alpha):
    r"""The smooth part :math:`\rho_{H,\alpha}` of :eq:`eq-residual-density` as a SymPy
    expression in :math:`t = \ln 1/x`:
    :math:`\sum_{k=1}^{H} \binom{H}{k} \alpha^k (1-\alpha)^{H-k} t^{k-1}/(k-1)!`.

    Chapter :ref:`ch-residual`: the derivation checks it against the Laguerre closed form, its
    mass and its monotonicity.  ``t`` and ``alpha`` may be SymPy symbols or numbers; the
    numeric twin is :func:`density`.

    Raises
    ------
    ValueError
        For ``depth < 1``.

    Examples
    --------
    >>> import sympy as sp
    >>> t, a = sp.symbols("t alpha")
    >>> sp.expand(density_series(2, t, a) - (2 * a * (1 - a) + a**2 * t))
    0
    """
    import sympy as sp

    depth = positive_int("depth", depth)
    return sum(sp.binomial(depth, k) * alpha**k * (1 - alpha) ** (depth - k) * t ** (k - 1)
               / sp.factorial(k - 1) for k in range(1, depth + 1))


def first_depth(depths, values, level: float):
    r"""The first depth at which ``values`` reaches ``level`` (``values[i] >= level``), or None
    if it never does.

    Chapter :ref:`ch-residual` (how deep a stack must be for a peak-to-valley ratio or a U depth
    of :math:`10^2` or :math:`10^3`, read from a row of :func:`shape_map`).  ``depths`` and
    ``values`` are aligned 1-D arrays; the first hit in array order is returned, so a value that
    crosses the level and falls back still counts from its first crossing.

    Raises
    ------
    ValueError
        For arrays of different lengths or a NaN in ``values``.

    Examples
    --------
    >>> first_depth([1, 2, 3, 4], [0.5, 1.9, 2.0, 2.5], 2)
    3
    >>> first_depth([1, 2, 3], [0.5, 1.0, 1.5], 2) is None
    True
    """
    d = np.asarray(depths).ravel()
    v = np.asarray(values, dtype=np.float64).ravel()
    if d.shape != v.shape:
        raise ValueError(f"depths and values differ in length: {d.size} vs {v.size}")
    if np.any(np.isnan(v)):
        raise ValueError("values has a NaN")
    hit = np.flatnonzero(v >= level)
    return int(d[hit[0]]) if hit.size else None


def bidirectional_alpha(L: int, depth: int, output_share: float) -> float:
    r"""The attention share :math:`\alpha` at which the output position of
    :func:`bidirectional_influence` holds ``output_share`` of the (normalized) row: :eq:`eq-bidir`
    solved for :math:`\alpha`,
    :math:`\alpha = 1 - \big((s - 1/L)/(1 - 1/L)\big)^{1/H}`.

    Chapter :ref:`ch-after`: :math:`\alpha` fitted on the spike at one output position, then used
    to predict the spike at another.

    Raises
    ------
    ValueError
        For ``L < 2``, ``depth < 1``, or a share outside :math:`[1/L, 1]` (the row cannot reach it).

    Examples
    --------
    >>> row = bidirectional_influence(64, 6, 0.25)
    >>> round(bidirectional_alpha(64, 6, row[-1]), 12)
    0.25
    """
    L = positive_int("L", L, minimum=2)
    depth = positive_int("depth", depth)
    s = float(output_share)
    if not (np.isfinite(s) and 1.0 / L <= s <= 1.0):
        raise ValueError(f"output_share must lie in [1/L, 1] = [{1.0 / L:.3g}, 1], got {output_share!r}")
    return float(1.0 - ((s - 1.0 / L) / (1.0 - 1.0 / L)) ** (1.0 / depth))
