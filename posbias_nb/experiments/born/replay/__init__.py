r"""Cached replays of the structural theory's published rollout configurations.

Chapter :ref:`ch-replay` (``book/replay.md``), :eq:`eq-replay`.  The numerics live in
:mod:`posbias_nb.rollout` (:func:`posbias_nb.rollout.replay`, the entries of
:func:`posbias_nb.rollout.published_configs`); this module runs them through the on-disk cache
(:mod:`posbias_nb.cache`), so that re-executing the chapter costs seconds, and holds the interval
of the measured :math:`\sum_t \lambda_t` over text windows (:func:`sum_lambda`).

Nothing here imports torch.

The module is a package of modules with one job each: :mod:`.measurements` (the cached
replays) and :mod:`.statistics` (the sum of the shares over windows).  Its names are read from
here as before.
"""
from __future__ import annotations

# the verdict code's dotted names (design.VERDICT_CODE), the chapter and other studies read these here
from .measurements import entry_digest, replayed  # noqa: F401
from .statistics import sum_lambda  # noqa: F401

__all__ = ["replayed", "entry_digest", "sum_lambda"]
