"""Helpers for the chapters: gluing numbers into the prose."""
from __future__ import annotations

import numbers

import numpy as np

__all__ = ["glue"]


def glue(name: str, value, display: bool = False):
    """Glue ``value`` under ``name`` for ``{glue:text}`` roles in the prose.

    NumPy scalars are turned into plain Python numbers first: their NumPy 2 repr
    (``np.float64(0.5)``) cannot be formatted by ``{glue:text}`name:.2f```.
    Non-finite numbers are refused: a NaN in the prose is a bug upstream.
    """
    from myst_nb import glue as _glue

    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if not np.isfinite(float(value)):
            raise ValueError(f"glue {name!r}: non-finite value {value!r}")
    return _glue(name, value, display=display)
