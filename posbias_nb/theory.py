r"""Exact theory of uniform causal attention at initialization (*Lost in the Middle at Birth*).

At initialization the attention logits are (nearly) equal, so a causal attention layer averages
uniformly over the prefix: it is the Cesàro matrix :math:`M_{ij} = 1/i` for :math:`j \le i`
(1-indexed).  A residual connection mixes it with the identity,
:math:`N = (1-\alpha) I + \alpha M`, and a stack of ``depth`` layers is :math:`N^H`.  The last row
of :math:`N^H` is the influence of each input position on the last output.

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
from scipy.special import gammainc, gammaln

from ._validate import exact_fraction, positive_int, unit_interval_float

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
]


def cesaro(L: int, exact: bool = False):
    r"""The :math:`L \times L` Cesàro matrix :math:`M_{ij} = 1/i` for :math:`j \le i`, else 0.

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
    log_keep, log_a = _log_alpha_terms(a)
    log_i = np.log(np.arange(1, L + 1, dtype=np.float64))
    v = np.full(L, -np.inf)
    v[-1] = 0.0
    yield v
    for _ in range(max_depth):
        if a == 0.0:
            yield v
            continue
        # suffix sum of v_i / i, in log space: logaddexp accumulated from the right
        s = np.logaddexp.accumulate((v - log_i)[::-1])[::-1]
        v = s if a == 1.0 else np.logaddexp(log_keep + v, log_a + s)
        yield v


def log_influence(L: int, depth: int, alpha=1.0) -> np.ndarray:
    r"""Natural log of the last row of :math:`((1-\alpha)I + \alpha M)^{H}`, in :math:`O(L H)`.

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

    One recursion pass per ``alpha`` gives every depth.  Ratios are returned as base-10 logs,
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


def density(x, depth: int, alpha=1.0):
    r"""Smooth part of the continuum influence density at relative position ``x`` in (0, 1].

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
    xa = np.asarray(x, dtype=np.float64)
    bad = ~((xa > 0) & (xa <= 1))
    if np.any(bad):
        raise ValueError(f"x must lie in (0, 1], got {xa[bad].ravel()[0]!r}")
    scalar = xa.ndim == 0
    xa = np.atleast_1d(xa)
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
