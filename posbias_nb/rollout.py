r"""Residual-aware attention rollout: the structural theory of position bias.

A transformer layer with a residual stream mixes each token with its attention output,
:math:`x \leftarrow (1-\lambda_t)\,x + \lambda_t\,A_t x`, where :math:`A_t` is a row-stochastic
attention kernel (row ``i`` says how much token ``i`` reads from each token ``j``) and
:math:`\lambda_t \in [0, 1]` is the attention share of layer ``t`` (Herasimchyk et al., 2026;
the rollout of Abnar and Zuidema, 2020, is the case :math:`\lambda_t = \tfrac12`).  Layer 1 acts
first on the input, so the whole stack is

.. math::
    P = R_T R_{T-1} \cdots R_1, \qquad R_t = (1-\lambda_t) I + \lambda_t A_t ,

and the *influence* of input position ``j`` on the last output is :math:`P_{Lj}`, the last row
of :math:`P`.  The attention-only rollout of Wu et al. (2025) is :math:`\lambda_t = 1`.
Chapters :ref:`ch-rollout` (:eq:`eq-rollout`), :ref:`ch-infinite-depth` and :ref:`ch-prediction`.

Conventions of ``rollout``
--------------------------
* Positions are 1-indexed in formulas and 0-indexed in arrays: ``row[j-1]`` is position ``j``.
* Layers are 1-indexed in formulas: ``lambdas[t-1]`` and ``kernels[t-1]`` belong to layer ``t``,
  and layer 1 is the one next to the input.
* :func:`rollout` never multiplies two matrices: it pulls the unit vector :math:`e_L^\top`
  through the stack from the output side, :math:`v \leftarrow v R_t` for
  :math:`t = T, T-1, \dots, 1`, which costs :math:`O(T L^2)` (and :math:`O(L^2)` memory for
  one shared kernel).  Only ``full=True`` and :func:`rollout_path`, which return whole matrices,
  pay :math:`O(T L^3)`.
* A kernel is accepted when it is a finite, square, nonnegative matrix (entries above
  ``-1e-12``) whose rows sum to 1 within ``1e-9``.

Everything here is pure numerics; nothing imports torch.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from ._validate import positive_int, unit_interval_float

__all__ = [
    "uniform_causal",
    "bidirectional",
    "sliding_window",
    "alibi_slopes",
    "alibi",
    "content",
    "positional_kernel",
    "matched_diag",
    "constant",
    "power_law",
    "check_lambdas",
    "rollout",
    "rollout_path",
    "deltas",
    "control",
    "Control",
    "published_schedules",
    "published_configs",
    "published_head_dims",
    "replay",
    "steps_law",
    "poisson_rollout",
    "keep_path",
    "collapse_bound",
    "content_diag",
]

_NEG_TOL = 1e-12  # entries in (-_NEG_TOL, 0) count as rounding noise
_ROW_TOL = 1e-9  # |row sum - 1| allowed


# ---------------------------------------------------------------------------------- kernels
def uniform_causal(L: int) -> np.ndarray:
    r"""Uniform causal attention: the Cesàro matrix :math:`A_{ij} = 1/i` for :math:`j \le i`.

    This is the attention of a causal layer whose logits are all equal (as at initialization);
    it is :func:`posbias_nb.theory.cesaro`, chapter :ref:`ch-cesaro`, :eq:`eq-cesaro`.

    Parameters
    ----------
    L : int
        Sequence length, ``L >= 1``.

    Returns
    -------
    numpy.ndarray
        ``(L, L)`` float64, lower triangular, row-stochastic.

    Raises
    ------
    ValueError
        If ``L`` is not an integer >= 1.

    Examples
    --------
    >>> uniform_causal(3)
    array([[1.        , 0.        , 0.        ],
           [0.5       , 0.5       , 0.        ],
           [0.33333333, 0.33333333, 0.33333333]])
    """
    from .theory import cesaro

    return cesaro(L)


def bidirectional(L: int) -> np.ndarray:
    r"""Uniform bidirectional attention: every token reads every token, :math:`A_{ij} = 1/L`.

    Chapter :ref:`ch-rollout` (the collapse, and force 1: the causal mask); chapter :ref:`ch-after`,
    :eq:`eq-bidir`.

    Parameters
    ----------
    L : int
        Sequence length, ``L >= 1``.

    Returns
    -------
    numpy.ndarray
        ``(L, L)`` float64, every entry ``1/L``.

    Raises
    ------
    ValueError
        If ``L`` is not an integer >= 1.

    Examples
    --------
    >>> bidirectional(2)
    array([[0.5, 0.5],
           [0.5, 0.5]])
    """
    L = positive_int("L", L)
    return np.full((L, L), 1.0 / L)


def sliding_window(L: int, w: int) -> np.ndarray:
    r"""Uniform causal attention over a window of the last ``w`` tokens (the token included).

    Row ``i`` is uniform on positions :math:`\max(1, i-w+1), \dots, i`.  ``w = 1`` is the
    identity, ``w >= L`` is :func:`uniform_causal`.  Chapter :ref:`ch-rollout` (the collapse without residuals).

    Parameters
    ----------
    L : int
        Sequence length, ``L >= 1``.
    w : int
        Window width, ``w >= 1``.

    Returns
    -------
    numpy.ndarray
        ``(L, L)`` float64, lower triangular and banded, row-stochastic.

    Raises
    ------
    ValueError
        If ``L`` or ``w`` is not an integer >= 1.

    Examples
    --------
    >>> sliding_window(4, 2)
    array([[1. , 0. , 0. , 0. ],
           [0.5, 0.5, 0. , 0. ],
           [0. , 0.5, 0.5, 0. ],
           [0. , 0. , 0.5, 0.5]])
    """
    L = positive_int("L", L)
    w = positive_int("w", w)
    i = np.arange(L)[:, None]
    j = np.arange(L)[None, :]
    mask = (j <= i) & (j > i - w)
    return mask / mask.sum(axis=1, keepdims=True)


def alibi_slopes(n_heads: int) -> np.ndarray:
    r"""The geometric ALiBi head slopes of Press et al. (2022).

    Chapter :ref:`ch-rollout`, force 3 (ALiBi slopes).

    For ``n`` a power of two the slopes are :math:`m_h = 2^{-8h/n}`, :math:`h = 1, \dots, n`.
    Otherwise, as in the ALiBi paper's reference code, the ``k`` slopes of the largest power of
    two ``k < n`` are followed by every other slope of the ``2k``-head sequence (the odd ``h``),
    ``n - k`` of them.

    Parameters
    ----------
    n_heads : int
        Number of heads, ``>= 1``.

    Returns
    -------
    numpy.ndarray
        ``(n_heads,)`` float64 slopes in (0, 1).

    Raises
    ------
    ValueError
        If ``n_heads`` is not an integer >= 1.

    Examples
    --------
    >>> alibi_slopes(4).tolist()
    [0.25, 0.0625, 0.015625, 0.00390625]
    >>> alibi_slopes(3).tolist()  # 2 slopes of the 2-head set, then 2^-2 from the 4-head set
    [0.0625, 0.00390625, 0.25]
    """
    n = positive_int("n_heads", n_heads)

    def power_of_two(k: int) -> list[float]:
        return [2.0 ** (-8.0 * h / k) for h in range(1, k + 1)]

    if n & (n - 1) == 0:
        return np.array(power_of_two(n))
    k = 1 << (n.bit_length() - 1)
    extra = power_of_two(2 * k)[0::2][: n - k]
    return np.array(power_of_two(k) + extra)


def alibi(L: int, n_heads: int = 8, scale: float = 1.0, slopes=None) -> np.ndarray:
    r"""Causal attention with ALiBi biases and no content: heads averaged.

    Head ``h`` has logits :math:`-s\,m_h (i - j)` for :math:`j \le i` (and :math:`-\infty`
    above the diagonal), with the slopes :math:`m_h` of :func:`alibi_slopes` and a common factor
    :math:`s` = ``scale``; each head is a row-wise softmax and the kernel is their mean.
    ``scale = 0`` gives :func:`uniform_causal`.  Chapter :ref:`ch-rollout`, force 3 (ALiBi slopes).

    Parameters
    ----------
    L : int
        Sequence length, ``L >= 1``.
    n_heads : int
        Number of heads, ``>= 1`` (any number: see :func:`alibi_slopes`).
    scale : float
        Nonnegative factor on every slope (1 is the published ALiBi).
    slopes : array_like or None
        Explicit per-head slopes (nonnegative, finite), replacing :func:`alibi_slopes`; then
        ``n_heads`` is ignored (MPT with ``alibi_bias_max != 8``, published configurations).

    Returns
    -------
    numpy.ndarray
        ``(L, L)`` float64, lower triangular, row-stochastic, decaying away from the diagonal.
        Weights below the smallest normal float64 (about ``2.2e-308``) are set to 0.

    Raises
    ------
    ValueError
        For ``L`` or ``n_heads`` not an integer >= 1, or ``scale`` negative or not finite.

    Examples
    --------
    >>> A = alibi(3, n_heads=1)  # one head, slope 2^-8
    >>> bool(np.allclose(A.sum(axis=1), 1)), bool(A[2, 2] > A[2, 1] > A[2, 0])
    (True, True)
    """
    L = positive_int("L", L)
    if slopes is None:
        slopes = alibi_slopes(n_heads)
    else:
        slopes = np.asarray(slopes, dtype=np.float64).ravel()
        if slopes.size < 1 or not np.all(np.isfinite(slopes)) or np.any(slopes < 0):
            raise ValueError(f"slopes must be nonnegative finite numbers, got {slopes.tolist()!r}")
    s = _finite_float("scale", scale)
    if s < 0:
        raise ValueError(f"scale must be >= 0, got {scale!r}")
    i = np.arange(L)[:, None]
    j = np.arange(L)[None, :]
    dist = (i - j).astype(np.float64)
    causal = j <= i
    A = np.zeros((L, L))
    for m in slopes:
        # logits -s m (i-j) <= 0 with the maximum 0 on the diagonal: exp cannot overflow
        w = np.where(causal, np.exp(-s * m * np.where(causal, dist, 0.0)), 0.0)
        A += w / w.sum(axis=1, keepdims=True)
    A /= slopes.size
    # flush subnormal weights (far tokens under steep heads) to zero: they carry no influence
    # above float64's normal range, and subnormal arithmetic is slow on common CPUs
    A[A < np.finfo(np.float64).tiny] = 0.0
    return A


def content(L: int, diag: float, base="causal", logit: bool = False) -> np.ndarray:
    r"""The content abstraction: a base kernel plus a self-attention (diagonal) term.

    Content-dependent attention is abstracted, as in the structural theory, by one number per
    layer: how much more (``diag > 0``) or less (``diag < 0``) a token attends to itself than to
    the other tokens it may see.  Chapter :ref:`ch-rollout`, force 4 (content).

    * ``logit=False`` (probability space): :math:`A = (1-d)\,B + d\,I`.  For the causal base,
      row ``i`` is the constant :math:`(1-d)/i` over the prefix plus :math:`d` on the diagonal.
      ``d`` must keep every entry nonnegative: :math:`d \le 1` (unless ``B`` is the identity) and
      :math:`(1-d) B_{ii} + d \ge 0`; for the causal base that is
      :math:`-1/(L-1) \le d \le 1`.
    * ``logit=True`` (the authors' parametrization): a bonus ``d`` on the diagonal *logit*,
      :math:`A_{ij} \propto B_{ij}\, e^{d\,[i=j]}`.  Any real ``d`` is allowed; :math:`d \to -\infty`
      removes self-attention wherever a row has another token to read.

    Parameters
    ----------
    L : int
        Sequence length, ``L >= 1``.
    diag : float
        The diagonal term ``d``.
    base : str or array_like
        The kernel ``B`` the content term is added to: ``"causal"`` (:func:`uniform_causal`),
        ``"bidirectional"`` (:func:`bidirectional`), or any ``(L, L)`` row-stochastic array.
    logit : bool
        Where ``d`` acts: on probabilities (False) or on logits (True).

    Returns
    -------
    numpy.ndarray
        ``(L, L)`` float64 row-stochastic kernel.

    Raises
    ------
    ValueError
        For ``L`` not an integer >= 1, a non-finite ``diag``, an unknown or invalid ``base``, or
        (probability space) a ``diag`` that makes an entry negative.

    Examples
    --------
    >>> content(3, 0.4)
    array([[1. , 0. , 0. ],
           [0.3, 0.7, 0. ],
           [0.2, 0.2, 0.6]])
    >>> content(3, -0.5)  # the smallest allowed for L = 3: no self-attention in the last row
    array([[1.  , 0.  , 0.  ],
           [0.75, 0.25, 0.  ],
           [0.5 , 0.5 , 0.  ]])
    """
    L = positive_int("L", L)
    d = _finite_float("diag", diag)
    if isinstance(base, str):
        if base == "causal":
            B = uniform_causal(L)
        elif base == "bidirectional":
            B = bidirectional(L)
        else:
            raise ValueError(f"base must be 'causal', 'bidirectional' or an (L, L) kernel, got {base!r}")
    else:
        B = _kernel(np.asarray(base, dtype=np.float64), "base")
        if B.shape != (L, L):
            raise ValueError(f"base must have shape ({L}, {L}), got {B.shape}")
    eye = np.eye(L)
    if logit:
        W = B * np.exp(d * eye) if d <= 0 else B * np.exp(d * eye - d)  # no overflow
        s = W.sum(axis=1)
        empty = s == 0  # a row that could only read itself, with e^d underflowed: keep it
        W[empty], s[empty] = B[empty], 1.0
        return W / s[:, None]
    A = (1.0 - d) * B + d * eye
    bad = A < -_NEG_TOL * max(1.0, abs(d))
    if np.any(bad):
        i, j = map(int, np.argwhere(bad)[0])
        raise ValueError(
            f"diag={diag!r} makes entry ({i + 1}, {j + 1}) negative ({A[i, j]:.3g}); "
            f"in probability space the content term must keep every entry >= 0"
        )
    return np.maximum(A, 0.0)


def positional_kernel(family: str, L: int, n_heads: int, *, alibi_on: bool | None = None,
                      head_dim: int | None = None, alibi_bias_max: float = 8) -> np.ndarray:
    r"""The content-free attention kernel of an architecture family: all query-key products equal
    (chapter :ref:`ch-prediction`, the ``"positional"`` prediction of
    :eq:`eq-pred-measured`).

    * ``"bloom"``: ALiBi with the standard slopes (:func:`alibi`).
    * ``"mpt"``: ALiBi with slopes :math:`2^{-b h / n}`, ``b = alibi_bias_max`` (8: the standard
      slopes); uniform causal if ``alibi_on`` is False.
    * ``"falcon"``: uniform causal unless ``alibi_on``; with ALiBi, transformers' Falcon multiplies
      the biased logits by :math:`1/\sqrt{d_h}`, so the bias is scaled by ``1/sqrt(head_dim)``
      (``head_dim`` required).
    * any other family (learned absolute or rotary positions): :func:`uniform_causal`.

    Raises
    ------
    ValueError
        Bad sizes, Falcon with ALiBi but no ``head_dim``, MPT with a non-standard
        ``alibi_bias_max`` and a head count that is not a power of two.

    Examples
    --------
    >>> bool(np.allclose(positional_kernel("gpt2", 4, 12), uniform_causal(4)))
    True
    """
    L = positive_int("L", L)
    n_heads = positive_int("n_heads", n_heads)
    if family == "bloom":
        return alibi(L, n_heads)
    if family == "mpt":
        if alibi_on is False:
            return uniform_causal(L)
        b = _finite_float("alibi_bias_max", alibi_bias_max)
        if b == 8:
            return alibi(L, n_heads)
        if n_heads & (n_heads - 1):
            raise ValueError(f"MPT ALiBi with alibi_bias_max={alibi_bias_max!r} needs a "
                             f"power-of-two head count, got {n_heads}")
        return alibi(L, slopes=2.0 ** (-b * np.arange(1, n_heads + 1) / n_heads))
    if family == "falcon":
        if not alibi_on:
            return uniform_causal(L)
        if head_dim is None:
            raise ValueError("the Falcon ALiBi kernel needs head_dim")
        return alibi(L, n_heads, scale=1.0 / math.sqrt(positive_int("head_dim", head_dim)))
    return uniform_causal(L)


def matched_diag(base, mean_diag: float) -> float:
    r"""The probability-space content term ``d`` for which :func:`content` on ``base`` has the
    mean diagonal ``mean_diag`` (the ``"content"`` prediction of chapter :ref:`ch-prediction`): :math:`d = (\bar a - \bar k)/(1 - \bar k)` with :math:`\bar k` the mean
    diagonal of ``base``, clipped to the range that keeps every entry nonnegative.

    Examples
    --------
    >>> round(matched_diag(uniform_causal(2), 0.75), 12)  # mean diagonal of the base: 0.75
    0.0
    """
    K = _kernel(np.asarray(base, dtype=np.float64), "base")
    m = _finite_float("mean_diag", mean_diag)
    kd = np.diag(K)
    k = float(kd.mean())
    if k >= 1.0:
        return 0.0
    d = (m - k) / (1.0 - k)
    with np.errstate(divide="ignore"):
        lo = np.max(np.where(kd < 1, -kd / (1 - kd), -np.inf))  # (1-d) K_ii + d >= 0
    return float(np.clip(d, lo, 1.0))


# ---------------------------------------------------------------------------------- schedules
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


# ---------------------------------------------------------------------------------- rollout
def _finite_float(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return x


def _kernel(A: np.ndarray, name: str) -> np.ndarray:
    """Check one kernel; return it as float64."""
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 1:
        raise ValueError(f"{name} must be a square (L, L) matrix, got shape {A.shape}")
    _check_stack(A[None], lambda t: name)
    return A


def _check_stack(stack: np.ndarray, name_of) -> None:
    """Validate a (T, L, L) stack in two vectorized passes; explain the first bad layer."""
    if stack.shape[0] == 0:
        return
    mins = stack.min(axis=(1, 2))  # NaN propagates
    sums = stack.sum(axis=2)  # an inf or NaN entry makes its row sum non-finite
    ok = (mins >= -_NEG_TOL) & np.all(np.abs(sums - 1.0) <= _ROW_TOL, axis=1)
    if np.all(ok):
        return
    t = int(np.argmin(ok))
    A, name = stack[t], name_of(t)
    if not np.all(np.isfinite(A)):
        i, j = map(int, np.argwhere(~np.isfinite(A))[0])
        raise ValueError(f"{name} has a non-finite entry at ({i + 1}, {j + 1}): {float(A[i, j])!r}")
    if np.any(A < -_NEG_TOL):
        i, j = map(int, np.argwhere(A < -_NEG_TOL)[0])
        raise ValueError(f"{name} has a negative entry at ({i + 1}, {j + 1}): {float(A[i, j])!r}")
    off = np.abs(sums[t] - 1.0) > _ROW_TOL
    i = int(np.argmax(off))
    raise ValueError(f"{name} is not row-stochastic: row {i + 1} sums to {float(sums[t, i])!r}")


def _prepare(kernels, lambdas):
    """Return (shared kernel or None, stack or None, lambdas) after validation."""
    if isinstance(kernels, np.ndarray) and kernels.ndim == 2:
        A = _kernel(kernels.astype(np.float64, copy=False), "kernel")
        if np.ndim(lambdas) == 0:
            raise ValueError(
                "with a single kernel, lambdas must be a sequence (one per layer), "
                f"got the scalar {lambdas!r}"
            )
        lam = check_lambdas(lambdas)
        return A, None, lam
    try:
        stack = np.asarray(kernels, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("kernels must be an (L, L) array or a sequence of (L, L) arrays "
                         "of one common size") from None
    if stack.ndim == 2:
        return _prepare(stack, lambdas)
    if stack.ndim != 3:
        raise ValueError(f"kernels must be (L, L) or (T, L, L), got shape {stack.shape}")
    T = stack.shape[0]
    if stack.shape[1] != stack.shape[2] or stack.shape[1] < 1:
        raise ValueError(f"kernel of layer 1 must be a square (L, L) matrix, got shape {stack.shape[1:]}")
    _check_stack(stack, lambda t: f"kernel of layer {t + 1}")
    if np.ndim(lambdas) == 0:
        lam = np.full(T, unit_interval_float("lambda", lambdas))
    else:
        lam = check_lambdas(lambdas, T)
    return None, stack, lam


def rollout(kernels, lambdas, full: bool = False) -> np.ndarray:
    r"""Residual-aware rollout: the last row of :math:`P = R_T \cdots R_1`,
    :math:`R_t = (1-\lambda_t) I + \lambda_t A_t`.

    Chapter :ref:`ch-rollout`, :eq:`eq-rollout-layer` and :eq:`eq-rollout`.

    Entry ``j-1`` is the influence of input position ``j`` on the last output.  Layer 1 acts
    first on the input, so the row is :math:`e_L^\top R_T \cdots R_1`, computed by vector–matrix
    products :math:`v \leftarrow (1-\lambda_t)\,v + \lambda_t\,v A_t` for
    :math:`t = T, \dots, 1`: :math:`O(T L^2)` time.  ``lambdas = 1`` everywhere is the
    attention-only rollout :math:`e_L^\top A_T \cdots A_1`; ``lambdas = 0`` gives
    :math:`e_L`.

    Parameters
    ----------
    kernels : array_like
        Either one ``(L, L)`` row-stochastic kernel used by every layer (then
        ``T = len(lambdas)``), or ``T`` kernels as a sequence or a ``(T, L, L)`` array, layer 1
        first.
    lambdas : array_like or float
        The schedule :math:`\lambda_1, \dots, \lambda_T` in [0, 1] (see :func:`constant`,
        :func:`power_law`).  A single number is accepted with a stack of kernels.
    full : bool
        If True return the whole ``(L, L)`` matrix :math:`P` instead (built as
        :math:`P \leftarrow R_t P`, ``t = 1..T``: :math:`O(T L^3)`).

    Returns
    -------
    numpy.ndarray
        ``(L,)`` float64 probability vector (or ``(L, L)`` row-stochastic ``P`` if ``full``).

    Raises
    ------
    ValueError
        For a kernel that is not square, not finite, has a negative entry or a row that does not
        sum to 1; for a :math:`\lambda_t` outside [0, 1]; for a schedule whose length differs from
        the number of kernels.

    Examples
    --------
    >>> rollout(uniform_causal(3), [1.0])  # one uniform layer: the average
    array([0.33333333, 0.33333333, 0.33333333])
    >>> rollout(uniform_causal(3), [0.5, 0.5])
    array([0.31944444, 0.23611111, 0.44444444])
    """
    A, stack, lam = _prepare(kernels, lambdas)
    L = A.shape[0] if A is not None else stack.shape[1]
    T = lam.size
    if full:
        P = np.eye(L)
        for t in range(T):
            K = A if A is not None else stack[t]
            P = (1.0 - lam[t]) * P + lam[t] * (K @ P)
        return P
    v = np.zeros(L)
    v[-1] = 1.0
    for t in range(T - 1, -1, -1):
        K = A if A is not None else stack[t]
        v = (1.0 - lam[t]) * v + lam[t] * (v @ K)
    return v


def rollout_path(kernels, lambdas, depths=None) -> np.ndarray:
    r"""The whole rollout matrix :math:`P^{(s)} = R_s \cdots R_1` after each depth ``s`` in
    ``depths``, from one forward pass over the layers.

    Chapter :ref:`ch-rollout`, :eq:`eq-rollout`, at every depth; chapter :ref:`ch-infinite-depth` watches it over
    thousands of layers.

    This is the tool for watching a deep stack evolve (the diagonal of :math:`P`, the first
    column): the schedule's first ``s`` values are the first ``s`` layers, so all depths share the
    same pass, :math:`P^{(s)} = R_s P^{(s-1)}`.  Cost :math:`O(T L^3)` for ``T = max(depths)``.
    For one last row, :func:`rollout` is ``L`` times cheaper.

    Parameters
    ----------
    kernels, lambdas :
        As in :func:`rollout`.
    depths : sequence of int, optional
        Depths ``0 <= s <= T`` to record (default: ``1..T``), in any order; ``0`` is the identity.

    Returns
    -------
    numpy.ndarray
        ``(len(depths), L, L)`` float64, in the order of ``depths``.

    Raises
    ------
    ValueError
        As :func:`rollout`, and for a depth outside ``0..T``.

    Examples
    --------
    >>> Ps = rollout_path(uniform_causal(3), [0.5, 0.5], depths=[1, 2])
    >>> bool(np.allclose(Ps[1], rollout(uniform_causal(3), [0.5, 0.5], full=True)))
    True
    """
    A, stack, lam = _prepare(kernels, lambdas)
    L = A.shape[0] if A is not None else stack.shape[1]
    T = lam.size
    if depths is None:
        depths = range(1, T + 1)
    ds = [positive_int("depth", s, minimum=0) for s in depths]
    for s in ds:
        if s > T:
            raise ValueError(f"depth must lie in 0..{T} (the schedule's length), got {s!r}")
    want: dict[int, list[int]] = {}
    for k, s in enumerate(ds):
        want.setdefault(s, []).append(k)
    out = np.empty((len(ds), L, L))
    P = np.eye(L)
    for k in want.get(0, []):
        out[k] = P
    top = max(ds, default=0)
    for t in range(top):
        K = A if A is not None else stack[t]
        P = (1.0 - lam[t]) * P + lam[t] * (K @ P)
        for k in want.get(t + 1, []):
            out[k] = P
    return out


# ---------------------------------------------------------------------------------- control
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

    Products are accumulated as sums of ``log1p``, so they round to 0 only when the true value
    is below the float64 range.

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
    >>> c = control(uniform_causal(4), [0.5, 0.5])
    >>> c.sum_lambda, c.prod_keep, c.sum_lambda_delta
    (1.0, 0.25, 0.75)
    """
    A, stack, lam = _prepare(kernels, lambdas)
    if A is not None:
        dl = np.full(lam.size, deltas(A)[0])
    else:
        dl = 1.0 - np.min(np.diagonal(stack, axis1=1, axis2=2), axis=1)
        dl = np.clip(dl, 0.0, 1.0)
    with np.errstate(divide="ignore"):
        log_keep = float(np.sum(np.log1p(-lam)))
        log_keep_d = float(np.sum(np.log1p(-lam * dl)))
    return Control(
        sum_lambda=float(np.sum(lam)),
        prod_keep=float(np.exp(log_keep)),
        sum_lambda_delta=float(np.sum(lam * dl)),
        prod_keep_delta=float(np.exp(log_keep_d)),
    )


# ---------------------------------------------------------------------------------- data
# Per-layer attention shares lambda_t = E[|Attn(Norm x)| / (|x| + |Attn(Norm x)|)] measured by
# Herasimchyk et al. (2026) on FineWeb-Edu text at L = 256, as published in the configuration
# files of their code (ml-uhh/position-bias, config/rollout/alibi/no_content/<model>.yaml),
# rounded here to 4 decimals.  Layer 1 first.  Heads: the model's number of attention heads.
_PUBLISHED = {
    "bloom": (112, [
        0.6445, 0.0926, 0.0730, 0.0360, 0.0182, 0.0158, 0.0235, 0.0158, 0.0172, 0.0237,
        0.0258, 0.0231, 0.0244, 0.0254, 0.0246, 0.0247, 0.0222, 0.0218, 0.0240, 0.0291,
        0.0364, 0.0545, 0.0574, 0.0541, 0.0500, 0.0477, 0.0485, 0.0457, 0.0494, 0.0478,
        0.0483, 0.0485, 0.0485, 0.0579, 0.0564, 0.0577, 0.0608, 0.0613, 0.0650, 0.0632,
        0.0656, 0.0641, 0.0671, 0.0698, 0.0654, 0.0635, 0.0645, 0.0665, 0.0621, 0.0596,
        0.0580, 0.0545, 0.0532, 0.0520, 0.0483, 0.0496, 0.0447, 0.0432, 0.0376, 0.0397,
        0.0323, 0.0303, 0.0327, 0.0379, 0.0453, 0.0510, 0.0674, 0.0829, 0.0797, 0.0550]),
    "bloom-7b1": (32, [
        0.2384, 0.1916, 0.2424, 0.1608, 0.1202, 0.1134, 0.1187, 0.1012, 0.0948, 0.0907,
        0.0921, 0.0930, 0.0882, 0.0976, 0.0941, 0.0925, 0.1002, 0.1023, 0.1059, 0.0983,
        0.1023, 0.1020, 0.0980, 0.1066, 0.1152, 0.1202, 0.1324, 0.1759, 0.1320, 0.1004]),
    "falcon-rw-7b": (64, [
        0.9719, 0.0995, 0.0861, 0.0946, 0.1077, 0.1135, 0.1235, 0.1296, 0.1370, 0.1309,
        0.1377, 0.1443, 0.1534, 0.1592, 0.1581, 0.1457, 0.1534, 0.1504, 0.1445, 0.1311,
        0.1319, 0.1326, 0.1186, 0.1140, 0.1115, 0.0879, 0.1145, 0.0699, 0.0770, 0.0858,
        0.0671, 0.0638, 0.0601, 0.0631, 0.1082, 0.1853]),
    "mpt-7b": (32, [
        0.5442, 0.3421, 0.3537, 0.2288, 0.2540, 0.2587, 0.2717, 0.2116, 0.2188, 0.1821,
        0.1649, 0.1470, 0.1204, 0.1043, 0.0935, 0.0851, 0.0775, 0.0586, 0.0564, 0.0466,
        0.0400, 0.0361, 0.0316, 0.0319, 0.0285, 0.0259, 0.0229, 0.0243, 0.0296, 0.0372,
        0.0443, 0.0556]),
    "mpt-30b": (64, [
        0.7147, 0.1220, 0.1836, 0.2123, 0.1078, 0.1275, 0.1460, 0.1122, 0.2384, 0.1545,
        0.0959, 0.1490, 0.2044, 0.2512, 0.2392, 0.2530, 0.2274, 0.1725, 0.1326, 0.0948,
        0.0599, 0.0464, 0.0341, 0.0273, 0.0246, 0.0194, 0.0168, 0.0166, 0.0138, 0.0125,
        0.0123, 0.0118, 0.0103, 0.0089, 0.0081, 0.0082, 0.0074, 0.0067, 0.0072, 0.0069,
        0.0066, 0.0073, 0.0085, 0.0456, 0.4043, 0.3316, 0.2002, 0.0114]),
}


def published_schedules() -> dict[str, tuple[int, np.ndarray]]:
    r"""Measured :math:`\lambda_t` schedules of five ALiBi models (Herasimchyk et al., 2026).

    Chapter :ref:`ch-infinite-depth` (where trained models sit).

    Returns
    -------
    dict
        ``{model: (n_heads, lambdas)}`` for ``bloom``, ``bloom-7b1``, ``falcon-rw-7b``,
        ``mpt-7b`` and ``mpt-30b``; ``lambdas`` is a float64 array, layer 1 first.

    Examples
    --------
    >>> s = published_schedules()
    >>> sorted(s), s["mpt-7b"][0], s["mpt-7b"][1].size
    (['bloom', 'bloom-7b1', 'falcon-rw-7b', 'mpt-30b', 'mpt-7b'], 32, 32)
    """
    return {k: (h, np.array(v, dtype=np.float64)) for k, (h, v) in _PUBLISHED.items()}


# ------------------------------------------------- replay of the authors' published configurations
_CONFIGS_FILE = "ml-uhh-rollout-configs.json"


def _load_published() -> dict:
    import json
    from pathlib import Path

    with open(Path(__file__).with_name("data") / _CONFIGS_FILE, encoding="utf-8") as f:
        return json.load(f)


def published_configs() -> dict[str, dict]:
    r"""The structural theory's published rollout configurations (Herasimchyk et al., 2026).

    Chapter :ref:`ch-replay`.  Read from the package data file
    ``posbias_nb/data/ml-uhh-rollout-configs.json`` (source: ml-uhh/position-bias, commit
    a514e09, ``config/rollout/alibi/**.yaml``).  Keys are ``<variant>/<dataset>/<model>``
    (``no_content/<model>`` has no dataset); each value is one entry as the authors store it:
    ``sequence_length``, ``num_layers``, ``num_heads``, ``alibi_slopes`` (list of per-head lists,
    one for all layers or one per layer), ``softmax_temperature``, ``diagonal_scores`` and
    ``base_scores`` (per layer and head, or one number), ``lambda_schedule`` (``"custom"`` with
    ``lambdas``, or ``"constant"`` with ``lambda_const``) and ``mask``.  The all_content scores,
    stored in shortest float32 form, are returned as the exact float32 values of the source.

    Returns
    -------
    dict
        A fresh copy on every call.

    Examples
    --------
    >>> c = published_configs()
    >>> c["no_content/mpt-7b"]["num_layers"], len(c["no_content/mpt-7b"]["lambdas"])
    (32, 32)
    """
    out = {}
    for key, entry in _load_published()["configs"].items():
        e = dict(entry)
        if key.startswith("all_content/"):
            for f in ("diagonal_scores", "base_scores"):
                e[f] = np.asarray(e[f], dtype=np.float32).astype(np.float64).tolist()
        out[key] = e
    return out


def published_head_dims() -> dict[str, int]:
    r"""Head dimension :math:`d_h` of each model of :func:`published_configs` (hidden size over
    heads, from the released model configurations): what :func:`replay` needs with
    ``faithful=False`` to put the raw content scores on the logit scale.

    Chapter :ref:`ch-replay`.

    Examples
    --------
    >>> published_head_dims()["falcon-rw-7b"]
    64
    """
    return {k: int(v) for k, v in _load_published()["head_dim"].items()}


def _entry_int(entry, key, minimum=1):
    if key not in entry:
        raise ValueError(f"entry lacks {key!r}")
    return positive_int(key, entry[key], minimum=minimum)


def _entry_table(entry, key, n_layers, n_heads):
    """A per-layer, per-head table stored as a list of lists: 1 or n_layers rows, rows of equal
    length 1..n_heads (the authors' broadcasting rules are applied by the caller)."""
    if key not in entry:
        raise ValueError(f"entry lacks {key!r}")
    try:
        rows = [np.asarray(r, dtype=np.float64).ravel() for r in entry[key]]
    except (TypeError, ValueError):
        raise ValueError(f"{key} must be a list of lists of numbers, got {entry[key]!r:.80}") from None
    if len(rows) not in (1, n_layers):
        raise ValueError(f"{key} must have 1 or num_layers={n_layers} rows, got {len(rows)}")
    widths = {r.size for r in rows}
    if len(widths) != 1 or not 1 <= widths.pop() <= n_heads:
        raise ValueError(f"{key} rows must have one common length in 1..num_heads={n_heads}, "
                         f"got {sorted(r.size for r in rows)!r:.80}")
    if not all(np.all(np.isfinite(r)) for r in rows):
        raise ValueError(f"{key} must be finite, got {entry[key]!r:.80}")
    return rows


def _entry_lambdas(entry, T):
    kind = entry.get("lambda_schedule", "custom")
    if kind == "custom":
        lam = np.asarray(entry.get("lambdas"), dtype=np.float64).ravel()
        if lam.size != T or not np.all(np.isfinite(lam)):
            raise ValueError(f"lambdas must be {T} finite numbers, got {entry.get('lambdas')!r:.80}")
    elif kind == "constant":
        lam = np.full(T, _finite_float("lambda_const", entry.get("lambda_const")))
    elif kind == "power_decay":
        lam0 = _finite_float("lambda_0", entry.get("lambda_0"))
        beta = _finite_float("beta", entry.get("beta"))
        lam = lam0 / (np.arange(T, dtype=float) + 1.0) ** beta
    else:
        raise ValueError(f"lambda_schedule must be custom, constant or power_decay, got {kind!r}")
    return np.clip(lam, 0.0, 1.0)  # as the authors' make_lambda_schedule


def _masked_softmax(scores, mask):
    """Row softmax over the mask (last axis), as the authors' compute_row_softmax: stable,
    all-masked rows left at 0.  ``exp(-inf) = 0`` replaces their boolean indexing, with the same
    values."""
    masked = np.where(mask, scores, -np.inf)
    shifted = masked - np.max(masked, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        exps = np.where(np.isfinite(shifted), np.exp(shifted), 0.0)
    denom = np.sum(exps, axis=-1, keepdims=True)
    return np.divide(exps, denom, out=np.zeros_like(exps), where=denom > 0)


def replay(entry: dict, faithful: bool = True, head_dim: int | None = None) -> np.ndarray:
    r"""Predicted influence profile of one published rollout configuration.

    Chapter :ref:`ch-replay`, :eq:`eq-replay`.  Builds, for each layer ``t``, the head-averaged
    ALiBi-plus-content kernel :math:`A_t` (head ``h``: row softmax over :math:`j \le i` of
    :math:`c^{(t,h)}_{ij} - m_h (i-j)`, content :math:`c_{ij} = b + d\,[i=j]`), the residual
    step :math:`R_t = (1-\lambda_t) I + \lambda_t A_t`, the product
    :math:`P = R_T \cdots R_1`, and returns the last row of ``P`` normalised to sum 1.

    ``faithful=True`` repeats the authors' code (ml-uhh/position-bias, ``src/rollout/``)
    operation for operation, including two departures from their paper:

    * a content table with fewer heads than the model (one number for a layer, as in the
      ``mean_content`` configurations) fills only the first heads' priors; the other heads get
      content 0 (``content_prior.py``: ``content_priors[head_idx] = ...`` with
      ``head_idx = min(i, provided_heads - 1)``);
    * content scores are used as stored, raw :math:`q \cdot k` logits, while the ALiBi bias is
      on the logit scale :math:`q \cdot k / \sqrt{d_h}` (``attention.py``: ``scores =
      content_scores + alibi``, divided only by ``softmax_temperature``).

    ``faithful=False`` corrects both: the last given head's score fills every remaining head,
    and content scores are divided by :math:`\sqrt{d_h}`.

    Parameters
    ----------
    entry : dict
        One configuration as stored (see :func:`published_configs`); ``mask`` must be
        ``"causal"`` and ``head_weights``, if present, one nonnegative list per slope row.
    faithful : bool
        Reproduce the authors' computation (True) or apply the corrections (False).
    head_dim : int or None
        :math:`d_h`, needed when ``faithful=False`` and some content score is nonzero
        (:func:`published_head_dims`); otherwise ignored.

    Returns
    -------
    numpy.ndarray
        ``(sequence_length,)`` float64, sums to 1; entry ``j-1`` is input position ``j``.

    Raises
    ------
    ValueError
        For a malformed entry (missing or inconsistent fields, a mask other than causal, a
        temperature that is not positive), or ``faithful=False`` with nonzero content and no
        ``head_dim``.

    Examples
    --------
    >>> e = dict(sequence_length=3, num_layers=1, num_heads=1, alibi_slopes=[[0.0]],
    ...          diagonal_scores=[[0.0]], base_scores=[[0.0]], lambda_schedule="constant",
    ...          lambda_const=1.0, mask="causal")
    >>> replay(e).round(6).tolist()  # uniform causal attention: the Cesàro row
    [0.333333, 0.333333, 0.333333]
    """
    if not isinstance(entry, dict):
        raise ValueError(f"entry must be a dict, got {type(entry).__name__}")
    L = _entry_int(entry, "sequence_length")
    T = _entry_int(entry, "num_layers")
    nh = _entry_int(entry, "num_heads")
    if entry.get("mask", "causal") != "causal":
        raise ValueError(f"mask must be 'causal', got {entry.get('mask')!r}")
    temp = _finite_float("softmax_temperature", entry.get("softmax_temperature", 1.0))
    if temp <= 0:
        raise ValueError(f"softmax_temperature must be > 0, got {temp!r}")
    slopes = _entry_table(entry, "alibi_slopes", T, nh)
    if slopes[0].size not in (1, nh):
        raise ValueError(f"alibi_slopes rows must have 1 or num_heads={nh} entries, got {slopes[0].size}")
    diag = _entry_table(entry, "diagonal_scores", T, nh)
    base = _entry_table(entry, "base_scores", T, nh)
    if len(diag) != len(base) or diag[0].size != base[0].size:
        raise ValueError("diagonal_scores and base_scores must have the same shape")
    lam = _entry_lambdas(entry, T)
    hw = entry.get("head_weights")
    if hw is not None:
        hw = _entry_table(entry, "head_weights", len(slopes), nh)
        if len(hw) != len(slopes) or any(r.size != slopes[0].size or np.any(r < 0) or r.sum() <= 0
                                         for r in hw):
            raise ValueError("head_weights must match alibi_slopes and be nonnegative, not all 0")
    scale = 1.0
    if not faithful:
        if any(np.any(d != 0) for d in diag) or any(np.any(b != 0) for b in base):
            if head_dim is None:
                raise ValueError("faithful=False needs head_dim for nonzero content scores")
            scale = 1.0 / math.sqrt(positive_int("head_dim", head_dim))

    i = np.arange(L)[:, None]
    j = np.arange(L)[None, :]
    mask = j <= i
    dist = (i - j).astype(float)
    eye = np.eye(L)
    alibi_unit = np.where(mask, -dist, 0.0)  # -(i-j) below the diagonal, 0 on it
    memo: dict = {}

    def layer_kernel(s_row, content, w):
        key = (s_row.tobytes(), tuple(content), w.tobytes())
        if key not in memo:
            m = np.array([s_row[min(h, s_row.size - 1)] for h in range(nh)])[:, None, None]
            d = np.array([c[0] for c in content])[:, None, None]
            b = np.array([c[1] for c in content])[:, None, None]
            # the authors' order: (base + d I) + alibi, alibi = -m (i-j), 0 on the diagonal,
            # -1e30 above it; then / temperature; then the masked row softmax per head
            alibi_scores = np.where(mask, m * alibi_unit, -1e30)
            K = _masked_softmax((np.broadcast_to(b, (nh, L, L)) + d * eye + alibi_scores) / temp,
                                mask)
            A = np.zeros((L, L))
            for h in range(nh):
                A += w[min(h, w.size - 1)] * K[h]
            memo[key] = A
        return memo[key]

    P = np.eye(L)
    for t in range(T):
        d_row, b_row = diag[min(t, len(diag) - 1)], base[min(t, len(base) - 1)]
        provided = d_row.size
        content = [(0.0, 0.0)] * nh
        for h in range(nh):
            src = min(h, provided - 1)
            dst = src if faithful else h  # the authors write head src's prior into slot src
            content[dst] = (float(d_row[src]) * scale, float(b_row[src]) * scale)
        if hw is None:
            w = np.ones(nh) / nh
        else:
            w = hw[min(t, len(hw) - 1)]
            w = w / w.sum()
        A = layer_kernel(slopes[min(t, len(slopes) - 1)], content, w)
        R = (1.0 - lam[t]) * eye + lam[t] * A
        P = R @ P
    row = P[-1].copy()
    s = row.sum()
    if s > 0:
        row /= s
    return row


# ------------------------------------------------------------- one kernel, many layers; deep stacks
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
    >>> keep_path(uniform_causal(2), [0.5, 0.5]).tolist()  # delta = 1/2
    [0.75, 0.5625]
    """
    A, stack, lam = _prepare(kernels, lambdas)
    dl = deltas(A if A is not None else stack)
    with np.errstate(divide="ignore"):
        return np.exp(np.cumsum(np.log1p(-lam * dl)))


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


def content_diag(L: int, self_weight: float, logit: bool = False) -> float:
    r"""The content term ``d`` for which ``content(L, d, logit=logit)`` (causal base) gives the
    last token the self-attention weight :math:`A_{LL}` = ``self_weight``.

    Chapter :ref:`ch-rollout`, force 4, which puts the two parametrizations of :func:`content` on
    one axis.  Probability space: :math:`A_{LL} = (1-d)/L + d`, so
    :math:`d = (L a - 1)/(L - 1)`; logit space: :math:`A_{LL} = e^d/(L - 1 + e^d)`, so
    :math:`d = \ln\big(a (L-1)/(1-a)\big)`.  Without content :math:`A_{LL} = 1/L` and ``d = 0``.

    Raises
    ------
    ValueError
        For ``L < 2``, or ``self_weight`` outside [0, 1] (probability space) or (0, 1) (logits).

    Examples
    --------
    >>> content_diag(4, 0.25), content_diag(4, 0.25, logit=True)
    (0.0, 0.0)
    >>> float(content(4, content_diag(4, 0.5, logit=True), logit=True)[-1, -1])
    0.5
    """
    L = positive_int("L", L, minimum=2)
    a = _finite_float("self_weight", self_weight)
    if logit:
        if not 0.0 < a < 1.0:
            raise ValueError(f"self_weight must lie in (0, 1) for a logit term, got {self_weight!r}")
        return float(np.log(a * (L - 1) / (1 - a)))
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"self_weight must lie in [0, 1], got {self_weight!r}")
    return float((L * a - 1) / (L - 1))
