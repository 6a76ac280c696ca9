r"""Deep stacks: the control quantities, the law of the number of attention steps, its Poisson
limit, and the bounds that decide between collapse and a surviving diagonal.

Chapter :ref:`ch-infinite-depth` (:eq:`eq-diag-bound`, :eq:`eq-collapse-bound`) and chapter
:ref:`ch-rollout` (:eq:`eq-rollout-poisson-binomial`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validate import positive_int
from ._checks import _NEG_TOL, _check_stack, _kernel
from .core import _prepare
from .schedules import check_lambdas

__all__ = [
    "Control",
    "deltas",
    "control",
    "steps_law",
    "poisson_rollout",
    "keep_path",
    "collapse_bound",
]


@dataclass(frozen=True)
class Control:
    r"""The quantities that decide what an infinitely deep stack does.

    Chapter :ref:`ch-infinite-depth`, :eq:`eq-diag-bound`; :math:`\prod_t (1-\lambda_t)` is also
    :math:`\Pr(K = 0)` of :eq:`eq-rollout-poisson-binomial` (chapter :ref:`ch-rollout`).

    Attributes
    ----------
    sum_lambda : float
        :math:`\sum_t \lambda_t`; collapse onto the first token needs it to diverge.
    prod_keep : float
        :math:`\prod_t (1-\lambda_t)`, the residual-only path; positive iff
        :math:`\sum_t \lambda_t < \infty` (when every :math:`\lambda_t < 1`).
    sum_lambda_delta : float
        :math:`\sum_t \lambda_t \delta_t` with :math:`\delta_t = 1 - \min_i (A_t)_{ii}`.
    prod_keep_delta : float
        :math:`\prod_t (1-\lambda_t\delta_t)`, a lower bound on every diagonal entry
        :math:`P_{ii}` (for any nonnegative kernels).
    """

    sum_lambda: float
    prod_keep: float
    sum_lambda_delta: float
    prod_keep_delta: float


def deltas(kernels) -> np.ndarray:
    r""":math:`\delta_t = 1 - \min_i (A_t)_{ii}`, the largest share a token gives to others.

    Chapter :ref:`ch-infinite-depth`, the :math:`\delta_t` of :eq:`eq-diag-bound`.

    Parameters
    ----------
    kernels : array_like
        One ``(L, L)`` kernel or a stack ``(T, L, L)``.

    Returns
    -------
    numpy.ndarray
        ``(T,)`` float64 in [0, 1] (``(1,)`` for one kernel).

    Raises
    ------
    ValueError
        For kernels that are not row-stochastic (as in :func:`rollout`).

    Examples
    --------
    >>> from posbias_nb.rollout import uniform_causal
    >>> deltas(uniform_causal(4)).tolist()
    [0.75]
    """
    k = np.asarray(kernels, dtype=np.float64)
    if k.ndim == 2:
        k = k[None]
    if k.ndim != 3:
        raise ValueError(f"kernels must be (L, L) or (T, L, L), got shape {k.shape}")
    if k.shape[1] != k.shape[2] or k.shape[1] < 1:
        raise ValueError(f"kernels must be square (L, L) matrices, got shape {k.shape[1:]}")
    _check_stack(k, lambda t: f"kernel of layer {t + 1}")
    d = 1.0 - np.min(np.diagonal(k, axis1=1, axis2=2), axis=1)
    return np.clip(d, 0.0, 1.0)


def control(kernels, lambdas) -> Control:
    r"""The control quantities :math:`\sum\lambda_t`, :math:`\prod(1-\lambda_t)`,
    :math:`\sum \lambda_t\delta_t` and :math:`\prod(1-\lambda_t\delta_t)` of a stack.

    Chapter :ref:`ch-infinite-depth`, :eq:`eq-diag-bound`.

    Products are accumulated as sums of logarithms, so they round to 0 only when the true value
    is below the float64 range; each factor :math:`1-\lambda_t\delta_t` is formed as
    :math:`(1-\lambda_t) + \lambda_t \min_i (A_t)_{ii}` where it is small (no cancellation
    when :math:`\lambda_t\delta_t` is close to 1), so the bound keeps its relative accuracy
    even when a token keeps almost nothing of itself.

    Parameters
    ----------
    kernels, lambdas :
        As in :func:`rollout`.

    Returns
    -------
    Control

    Raises
    ------
    ValueError
        As :func:`rollout`.

    Examples
    --------
    >>> from posbias_nb.rollout import uniform_causal
    >>> c = control(uniform_causal(4), [0.5, 0.5])
    >>> c.sum_lambda, c.prod_keep, c.sum_lambda_delta
    (1.0, 0.25, 0.75)
    """
    A, stack, lam = _prepare(kernels, lambdas)
    dmin = _min_diag(A, stack)
    with np.errstate(divide="ignore"):
        log_keep = float(np.sum(np.log1p(-lam)))
    return Control(
        sum_lambda=float(np.sum(lam)),
        prod_keep=float(np.exp(log_keep)),
        sum_lambda_delta=float(np.sum(lam * (1.0 - dmin))),
        prod_keep_delta=float(np.exp(np.sum(_log_keep(lam, dmin)))),
    )


def _min_diag(A, stack) -> np.ndarray:
    r""":math:`\min_i (A_t)_{ii}` in [0, 1] per layer (``(1,)`` for one shared kernel), from the
    output of :func:`_prepare` (already validated)."""
    k = A[None] if A is not None else stack
    return np.clip(np.min(np.diagonal(k, axis1=1, axis2=2), axis=1), 0.0, 1.0)


def _log_keep(lam: np.ndarray, dmin: np.ndarray) -> np.ndarray:
    r""":math:`\log(1 - \lambda_t \delta_t)` per layer, :math:`\delta_t = 1 - d_t`, accurate
    for every :math:`\lambda_t, d_t \in [0, 1]`.

    ``log1p(-step)`` where the step :math:`\lambda_t\delta_t` is below 1/2; above, the factor
    itself, :math:`(1-\lambda_t) + \lambda_t d_t`, a sum of two nonnegative terms: the
    subtraction :math:`1 - \lambda_t\delta_t` would cancel there and lose up to all digits of
    a small diagonal :math:`d_t` (relative error :math:`\varepsilon / d_t`).  Either way the
    absolute error of each logarithm is a few ulps, so the product ``exp(sum)`` keeps a relative
    error of a few ulps per layer (times :math:`|\log|` of the product, through ``exp``).
    """
    step = lam * (1.0 - dmin)
    with np.errstate(divide="ignore"):
        return np.where(step < 0.5, np.log1p(-step), np.log((1.0 - lam) + lam * dmin))


def steps_law(lambdas) -> np.ndarray:
    r"""Law of the number of attention steps :math:`K = \sum_t B_t`,
    :math:`B_t \sim \mathrm{Bernoulli}(\lambda_t)` independent (a Poisson-binomial law).

    Chapter :ref:`ch-rollout`, :eq:`eq-rollout-poisson-binomial`: with one kernel :math:`M` shared
    by every layer, :math:`e_L^\top P = \sum_k \Pr(K = k)\, e_L^\top M^k`.  ``Pr(K = 0)`` is the
    recency spike :math:`\prod_t (1-\lambda_t)`.

    Parameters
    ----------
    lambdas : array_like
        One attention share per layer (validated by :func:`check_lambdas`).

    Returns
    -------
    numpy.ndarray
        ``(T + 1,)`` float64, :math:`\Pr(K = k)` for ``k = 0..T``.

    Raises
    ------
    ValueError
        As :func:`check_lambdas`.

    Examples
    --------
    >>> steps_law([0.5, 0.5]).tolist()
    [0.25, 0.5, 0.25]
    """
    lam = check_lambdas(lambdas)
    pk = np.array([1.0])
    for l_t in lam:  # convolve the Bernoulli(lambda_t) laws, layer by layer
        pk = np.convolve(pk, [1.0 - l_t, l_t])
    return pk


def poisson_rollout(kernel, totals, k_max: int | None = None) -> np.ndarray:
    r"""The Poisson limit of :eq:`eq-rollout-poisson-binomial`: for each total share
    :math:`s`, the row :math:`\sum_k e^{-s} s^k / k!\; e_L^\top A^k`.

    Chapter :ref:`ch-infinite-depth` (the map): when every share is small, the number of attention
    steps :math:`K` is close to Poisson with mean :math:`s = \sum_t \lambda_t`, so with one
    shared kernel the rollout depends on the schedule through :math:`s` alone.

    Parameters
    ----------
    kernel : array_like
        One ``(L, L)`` row-stochastic kernel :math:`A`.
    totals : array_like
        Total shares :math:`s \ge 0`.
    k_max : int, optional
        Number of powers ``k = 0..k_max-1`` summed; default
        :math:`\lceil s_{\max} + 12\sqrt{s_{\max}} + 30 \rceil`, beyond which the Poisson tail is
        far below float64 rounding.

    Returns
    -------
    numpy.ndarray
        ``(len(totals), L)`` float64; each row sums to 1 up to the truncated tail.

    Raises
    ------
    ValueError
        For an invalid kernel, a negative or non-finite total, or ``k_max < 1``.

    Examples
    --------
    >>> from posbias_nb.rollout import uniform_causal
    >>> poisson_rollout(uniform_causal(2), [0.0, 1.0]).round(6).tolist()  # last: e^(-s/2)
    [[0.0, 1.0], [0.393469, 0.606531]]
    """
    from scipy.stats import poisson

    A = _kernel(np.asarray(kernel, dtype=np.float64), "kernel")
    s = np.atleast_1d(np.asarray(totals, dtype=np.float64))
    if s.ndim != 1 or not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ValueError(f"totals must be finite and >= 0, got {totals!r}")
    if k_max is None:
        top = float(s.max(initial=0.0))
        k_max = int(math.ceil(top + 12.0 * math.sqrt(top) + 30.0))
    k_max = positive_int("k_max", k_max)
    rows = np.empty((k_max, A.shape[0]))
    v = np.zeros(A.shape[0])
    v[-1] = 1.0
    for k in range(k_max):  # e_L A^k, one vector-matrix product each
        rows[k] = v
        v = v @ A
    weights = poisson.pmf(np.arange(k_max)[None, :], s[:, None])
    return weights @ rows


def keep_path(kernels, lambdas) -> np.ndarray:
    r"""The lower bound of :eq:`eq-diag-bound` after every depth:
    :math:`\prod_{t \le s} (1 - \lambda_t \delta_t)` for ``s = 1..T``.

    Chapter :ref:`ch-infinite-depth`: every diagonal entry of :math:`P^{(s)} = R_s \cdots R_1`
    is at least this, for any nonnegative kernels; :class:`Control` holds the value at ``s = T``.

    Parameters
    ----------
    kernels, lambdas :
        As in :func:`rollout`.

    Returns
    -------
    numpy.ndarray
        ``(T,)`` float64, nonincreasing.

    Raises
    ------
    ValueError
        As :func:`rollout`.

    Examples
    --------
    >>> from posbias_nb.rollout import uniform_causal
    >>> keep_path(uniform_causal(2), [0.5, 0.5]).tolist()  # delta = 1/2
    [0.75, 0.5625]
    """
    A, stack, lam = _prepare(kernels, lambdas)
    return np.exp(np.cumsum(_log_keep(lam, _min_diag(A, stack))))


def collapse_bound(kernels, lambdas) -> float:
    r"""The lower bound of :eq:`eq-collapse-bound` on the first token's share of the last output:
    :math:`1 - \prod_t (1 - \varepsilon_t \lambda_t)`, :math:`\varepsilon_t = \min_i (A_t)_{i1}`.

    Chapter :ref:`ch-infinite-depth`, step 3: under a causal mask the first token is absorbing,
    and from anywhere else the walker jumps to it in layer ``t`` with probability at least
    :math:`\varepsilon_t \lambda_t`.

    Parameters
    ----------
    kernels, lambdas :
        As in :func:`rollout`; the kernels must be causal (lower triangular).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        As :func:`rollout`, or a kernel with weight above the diagonal (the bound needs the first
        token to read only itself).

    Examples
    --------
    >>> from posbias_nb.rollout import bidirectional, uniform_causal
    >>> collapse_bound(uniform_causal(2), [1.0])  # epsilon = 1/2
    0.5
    >>> try:
    ...     collapse_bound(bidirectional(2), [1.0])
    ... except ValueError as e:
    ...     print("refused:", str(e).split(":")[0])
    refused: collapse_bound needs causal kernels
    """
    A, stack, lam = _prepare(kernels, lambdas)
    stack = A[None] if A is not None else stack
    for t, K in enumerate(stack):
        above = float(np.triu(K, 1).max(initial=0.0))
        if above > _NEG_TOL:
            raise ValueError(f"collapse_bound needs causal kernels: layer {t + 1} has weight "
                             f"{above:g} above the diagonal")
    eps = stack[:, :, 0].min(axis=1)  # (1,) for a shared kernel, else (T,)
    return float(1.0 - np.exp(np.sum(np.log1p(-eps * lam))))
