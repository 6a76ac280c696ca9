r"""The residual-aware rollout: the last row (or the whole) of :math:`P = R_T \cdots R_1`,
:math:`R_t = (1-\lambda_t) I + \lambda_t A_t`.

Chapter :ref:`ch-rollout`, :eq:`eq-rollout-layer` and :eq:`eq-rollout`.  :func:`rollout` pulls
:math:`e_L^\top` through the stack from the output side, :math:`O(T L^2)`; only ``full=True`` and
:func:`rollout_path` multiply matrices, :math:`O(T L^3)`.
"""
from __future__ import annotations

import numpy as np

from .._validate import positive_int, unit_interval_float
from ._checks import _check_stack, _kernel
from .schedules import check_lambdas

__all__ = ["rollout", "rollout_path", "log_layout_rollout", "layout_rollout"]


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
    >>> from posbias_nb.rollout import uniform_causal
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
    >>> from posbias_nb.rollout import uniform_causal
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


def log_layout_rollout(layout, L: int, lambdas, slope: float = 0.0) -> np.ndarray:
    r"""Natural log of the content-free rollout row of a layout, in :math:`O(L)` a layer:
    the last row of :math:`R_T \cdots R_1`, :math:`R_t = (1-\lambda_t) I + \lambda_t A_t`, with
    :math:`A_t` the single-slope ALiBi kernel restricted to layer :math:`t`'s keys,
    :math:`(A_t)_{ij} = e^{-m(i-j)} / (Z_i + e^{s})` for :math:`j \in S_i` (a sink of logit
    :math:`s` where the layer has one).

    Chapter :ref:`ch-layouts` (and the explorer page, which runs the same algorithm in
    JavaScript).  With ``slope = 0`` and a constant :math:`\lambda` this is
    :func:`posbias_nb.theory.log_layout_influence`; with ``slope > 0`` and full layers it is
    :func:`rollout` of the one-head :func:`~posbias_nb.rollout.alibi` kernel (tested against the
    dense product).  The ALiBi weights enter as :math:`e^{-m(i-j)} = e^{-mi} e^{mj}`, so each
    layer is one pass of block-wise log-sums, as for the uniform kernel.

    Raises
    ------
    ValueError
        A bad layout, ``L < 1``, a lambda outside [0, 1] or a schedule of the wrong length,
        a negative or non-finite slope.
    """
    from ..theory.causal import _log_alpha_terms
    from ..theory.layouts import _as_layout, _layer_alphas, _log_apply

    lay = _as_layout(layout)
    L = positive_int("L", L)
    lams = _layer_alphas(lambdas, lay.depth)
    m = float(slope)
    if not np.isfinite(m) or m < 0:
        raise ValueError(f"slope must be a finite number >= 0, got {slope!r}")
    v = np.full(L, -np.inf)
    v[-1] = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        for layer, a in zip(reversed(lay.layers), reversed(lams)):
            if a == 0.0:
                continue
            keep, mix = _log_alpha_terms(a)
            Kv = _log_apply(v, layer, m)
            v = Kv + mix if a == 1.0 else np.logaddexp(v + keep, Kv + mix)
    return v


def layout_rollout(layout, L: int, lambdas, slope: float = 0.0) -> np.ndarray:
    r"""The content-free rollout row of a layout with a single ALiBi slope, as probabilities:
    ``exp`` of :func:`log_layout_rollout` (chapter :ref:`ch-layouts`)."""
    return np.exp(log_layout_rollout(layout, L, lambdas, slope))
