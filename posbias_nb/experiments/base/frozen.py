"""Frozen design values: JSON-like values made read-only (a mapping proxy, tuples), and back.

:func:`freeze` is what :class:`posbias_nb.experiments.base.design.Design` holds; the verdict
rules (:mod:`posbias_nb.experiments.base.rules`) read a frozen rule's values back as plain ones.
"""
from __future__ import annotations

import math
from types import MappingProxyType

__all__ = ["freeze"]


def freeze(value):
    """A deep, read-only copy of ``value``: dicts become read-only mappings, lists and tuples
    tuples.  Only JSON-like values (str, int, finite float, bool, None) are accepted."""
    if isinstance(value, dict):
        for k in value:
            if not isinstance(k, str):
                raise ValueError(f"design keys must be strings, got {k!r}")
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, MappingProxyType):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"design values must be finite, got {value!r}")
        return value
    raise ValueError(f"design values must be JSON-like, got {type(value).__name__}: {value!r}")


def _plain(value):
    if isinstance(value, MappingProxyType):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value
