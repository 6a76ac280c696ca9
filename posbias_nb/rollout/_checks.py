"""Validation shared by the rollout modules: kernels, stacks of kernels, finite numbers.

A kernel is accepted when it is a finite, square, nonnegative matrix (entries above
``-_NEG_TOL``) whose rows sum to 1 within ``_ROW_TOL`` (the conventions of
:mod:`posbias_nb.rollout`).  Private: the public functions call these and name the bad value.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

_NEG_TOL = 1e-12  # entries in (-_NEG_TOL, 0) count as rounding noise
_ROW_TOL = 1e-9  # |row sum - 1| allowed


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
