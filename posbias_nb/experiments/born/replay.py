r"""Cached replays of the structural theory's published rollout configurations.

Chapter :ref:`ch-replay` (``book/replay.md``), :eq:`eq-replay`.  The numerics live in
:mod:`posbias_nb.rollout` (:func:`posbias_nb.rollout.replay`, the entries of
:func:`posbias_nb.rollout.published_configs`); this module runs them through the on-disk cache
(:mod:`posbias_nb.cache`), so that re-executing the chapter costs seconds, and holds the summary
the chapter reads the profiles by (:func:`mid_mass`), and the interval of the measured
:math:`\sum_t \lambda_t` over text windows (:func:`sum_lambda`).

Nothing here imports torch.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np

from ... import cache, metrics, rollout, stats
from ...results import Result

__all__ = ["replayed", "entry_digest", "sum_lambda"]

_NAMESPACE = "replay"


def entry_digest(entry: dict) -> str:
    """SHA-256 of one configuration's content (its canonical JSON: sorted keys, ``repr`` floats).

    Part of the cache key of :func:`replayed`, so an edited entry is never served an old replay.

    Examples
    --------
    >>> entry_digest({"b": 1, "a": [0.5]}) == entry_digest({"a": [0.5], "b": 1})
    True
    """
    return hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()


def replayed(key: str, faithful: bool = True, head_dim: int | None = None) -> Result:
    r"""The predicted influence profile of one published configuration, through the cache.

    Chapter :ref:`ch-replay`, :eq:`eq-replay`: :func:`posbias_nb.rollout.replay` of the entry
    ``key`` of :func:`posbias_nb.rollout.published_configs`, stored in the cache namespace
    ``"replay"`` under the key, the entry's content (:func:`entry_digest`), ``faithful`` and
    ``head_dim`` (and, through :func:`posbias_nb.cache.key`, the package version).  The second
    call with the same arguments reads the stored profile, bit for bit the first one.

    Parameters
    ----------
    key : str
        A key of :func:`posbias_nb.rollout.published_configs`, e.g.
        ``"all_content/fineweb-edu/mpt-7b"``.
    faithful : bool
        The authors' computation (True) or the two corrections (False); see
        :func:`posbias_nb.rollout.replay`.
    head_dim : int or None
        :math:`d_h` for ``faithful=False`` (:func:`posbias_nb.rollout.published_head_dims`;
        ``1`` applies the head broadcast alone).

    Returns
    -------
    posbias_nb.results.Result
        ``position`` (1..L) and ``influence`` (float64, sums to 1), the CSV columns; ``meta``
        holds the key, the reading, ``head_dim``, the length and the entry's SHA-256.

    Raises
    ------
    ValueError
        For an unknown ``key``, or as :func:`posbias_nb.rollout.replay`.
    """
    configs = rollout.published_configs()
    if key not in configs:
        raise ValueError(f"unknown published configuration {key!r}; known: {sorted(configs)}")
    entry = configs[key]
    faithful = bool(faithful)
    params = dict(key=key, entry=entry_digest(entry), faithful=faithful, head_dim=head_dim)
    p = cache.cached(_NAMESPACE, params,
                     lambda: {"p": rollout.replay(entry, faithful, head_dim)})["p"]
    meta = dict(key=key, faithful=faithful, head_dim=head_dim,
                sequence_length=int(entry["sequence_length"]), entry_sha256=params["entry"])
    return Result({"position": np.arange(1, p.size + 1), "influence": p}, meta=meta,
                  columns=("position", "influence"))




def sum_lambda(cap: dict, level: float = 0.95) -> tuple:
    r"""The sum over layers of the measured attention shares, :math:`\sum_t \lambda_t`, with a
    Student *t* interval over the **text windows** (:func:`posbias_nb.stats.mean_interval`):
    ``(estimate, low, high)``.

    ``cap`` is a :func:`posbias_nb.measure.capture` result; its ``lam_win`` (T, B) holds each
    layer's share per window.  The sum over layers of the per-layer means over windows equals
    the mean over windows of the per-window sums, so the estimate is ``cap["lam"].sum()`` (up to
    float rounding) and the windows -- independent draws of text, the unit of replication --
    are what the interval is over (not positions, which share their window).  Chapter
    :ref:`ch-replay`, two readings of the attention share.

    Raises
    ------
    ValueError
        ``cap`` without a ``lam_win`` of shape (layers, windows >= 2).

    Examples
    --------
    >>> cap = {"lam_win": np.array([[0.1, 0.2, 0.3], [0.2, 0.2, 0.2]])}
    >>> [round(v, 3) for v in sum_lambda(cap)]
    [0.4, 0.152, 0.648]
    """
    if not isinstance(cap, dict) or "lam_win" not in cap:
        raise ValueError("sum_lambda needs a capture result with 'lam_win' (per-window lambda); "
                         f"got keys {sorted(cap) if isinstance(cap, dict) else type(cap).__name__}")
    w = np.asarray(cap["lam_win"], dtype=float)
    if w.ndim != 2 or w.shape[1] < 2:
        raise ValueError(f"lam_win must be (layers, windows >= 2), got shape {w.shape}")
    return tuple(float(v) for v in stats.mean_interval(w.sum(axis=0), level=level))
