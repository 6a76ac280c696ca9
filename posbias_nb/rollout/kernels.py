r"""Attention kernels :math:`A_t`: row-stochastic ``(L, L)`` matrices, content-free or with one
content number.

Chapter :ref:`ch-rollout` (the four forces: the causal mask, the residual, ALiBi slopes, content)
and chapter :ref:`ch-prediction` (the positional and content predictions of
:eq:`eq-pred-measured`).  Row ``i`` says how much token ``i`` reads from each token ``j``;
positions are 1-indexed in formulas and 0-indexed in arrays.
"""
from __future__ import annotations

import math

import numpy as np

from .._validate import positive_int
from ..theory import cesaro
from ._checks import _NEG_TOL, _finite_float, _kernel

__all__ = [
    "uniform_causal",
    "bidirectional",
    "sliding_window",
    "alibi_slopes",
    "alibi",
    "content",
    "positional_kernel",
    "matched_diag",
    "content_diag",
    "layout_kernels",
]


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


def layout_kernels(base, layout) -> np.ndarray:
    r"""One kernel per layer of ``layout``: ``base`` (an ``(L, L)`` causal kernel, uniform or
    ALiBi) restricted in each layer to that layer's keys (:class:`posbias_nb.theory.Layer`:
    full, sliding window, chunk) and renormalized row by row, ``(H, L, L)``.

    Chapter :ref:`ch-layouts`: the structural rollout of a layout.  With the uniform causal base
    and a constant :math:`\lambda`, :func:`~posbias_nb.rollout.rollout` of these kernels is
    :func:`posbias_nb.theory.layout_influence` (tested).  A layer's sink is not carried: the
    rollout's kernels are row-stochastic, so the mass a sink absorbs is left out (the theory row
    keeps it).

    Raises
    ------
    ValueError
        A base that is not a square causal kernel, a bad layout.
    """
    from .. import theory

    K = _kernel(np.asarray(base, dtype=np.float64), "base")
    L = K.shape[0]
    lay = theory.parse_layout(layout) if isinstance(layout, str) else layout
    out = np.empty((lay.depth, L, L))
    for t, layer in enumerate(lay.layers):
        mask = np.asarray(theory.layer_matrix(theory.Layer(layer.kind, layer.size), L)) > 0
        k = np.where(mask, K, 0.0)
        out[t] = k / k.sum(1, keepdims=True)
    return out
