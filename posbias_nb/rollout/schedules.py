r"""Schedules of attention shares :math:`\lambda_t`, layer 1 first.

Chapter :ref:`ch-rollout`: the shares :math:`\lambda_t` of :eq:`eq-rollout-layer`; chapter
:ref:`ch-infinite-depth`: the power law whose exponent decides what an infinitely deep stack does.
"""
from __future__ import annotations

import numpy as np

from .._validate import positive_int, unit_interval_float
from ._checks import _finite_float

__all__ = ["constant", "power_law", "check_lambdas"]


def constant(T: int, lam) -> np.ndarray:
    r"""The constant schedule :math:`\lambda_t = \lambda`, ``t = 1..T``.

    Chapter :ref:`ch-rollout`: the shares :math:`\lambda_t` of :eq:`eq-rollout-layer`.

    Parameters
    ----------
    T : int
        Number of layers, ``T >= 0``.
    lam : float
        Attention share in [0, 1].

    Returns
    -------
    numpy.ndarray
        ``(T,)`` float64.

    Raises
    ------
    ValueError
        For ``T < 0`` or ``lam`` outside [0, 1].

    Examples
    --------
    >>> constant(3, 0.25).tolist()
    [0.25, 0.25, 0.25]
    """
    T = positive_int("T", T, minimum=0)
    return np.full(T, unit_interval_float("lam", lam))


def power_law(T: int, lam0, beta) -> np.ndarray:
    r"""The decaying schedule :math:`\lambda_t = \lambda_0 / (t+1)^{\beta}` for ``t = 1..T``.

    Layers are counted from 1, so the first layer has :math:`\lambda_1 = \lambda_0 / 2^\beta`
    (with ``lam0 <= 1`` every :math:`\lambda_t < 1` when ``beta > 0``).  The series
    :math:`\sum_t \lambda_t` converges for ``beta > 1`` and diverges for ``beta <= 1``:
    the two sides of the dichotomy of chapter :ref:`ch-infinite-depth` (:eq:`eq-diag-bound`,
    :eq:`eq-collapse-bound`).

    Parameters
    ----------
    T : int
        Number of layers, ``T >= 0``.
    lam0 : float
        Scale in [0, 1].
    beta : float
        Decay exponent, ``>= 0`` (``0`` is the constant schedule ``lam0``).

    Returns
    -------
    numpy.ndarray
        ``(T,)`` float64, nonincreasing.

    Raises
    ------
    ValueError
        For ``T < 0``, ``lam0`` outside [0, 1], or ``beta`` negative or not finite.

    Examples
    --------
    >>> power_law(3, 1.0, 1.0).tolist()
    [0.5, 0.3333333333333333, 0.25]
    """
    T = positive_int("T", T, minimum=0)
    lam0 = unit_interval_float("lam0", lam0)
    b = _finite_float("beta", beta)
    if b < 0:
        raise ValueError(f"beta must be >= 0, got {beta!r}")
    t = np.arange(1, T + 1, dtype=np.float64)
    return lam0 / (t + 1.0) ** b


def check_lambdas(lambdas, T: int | None = None) -> np.ndarray:
    r"""Validate a given schedule: a 1-D array of finite values in [0, 1] (of length ``T``).

    Chapter :ref:`ch-rollout`: the shares :math:`\lambda_t` of :eq:`eq-rollout-layer`.

    Parameters
    ----------
    lambdas : array_like
        One attention share per layer, layer 1 first.
    T : int, optional
        Required length.

    Returns
    -------
    numpy.ndarray
        ``(T,)`` float64 copy.

    Raises
    ------
    ValueError
        If ``lambdas`` is not 1-D, has a value outside [0, 1] (or NaN), or has the wrong length.

    Examples
    --------
    >>> check_lambdas([0.5, 0.1]).tolist()
    [0.5, 0.1]
    """
    try:
        lam = np.array(lambdas, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"lambdas must be numbers in [0, 1], got {lambdas!r}") from None
    if lam.ndim != 1:
        raise ValueError(f"lambdas must be a 1-D sequence, got shape {lam.shape}")
    bad = ~((lam >= 0.0) & (lam <= 1.0))
    if np.any(bad):
        t = int(np.argmax(bad))
        raise ValueError(f"lambdas must lie in [0, 1], got lambda_{t + 1} = {float(lam[t])!r}")
    if T is not None and lam.size != T:
        raise ValueError(f"lambdas has length {lam.size} but there are {T} kernels")
    return lam
