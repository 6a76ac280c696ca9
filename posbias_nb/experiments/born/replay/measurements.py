"""The replays of the structural theory's published rollout configurations, through the cache
(namespace ``replay``): an entry's digest and the cached replay."""
from __future__ import annotations

import hashlib
import json
import numpy as np
from .... import cache, rollout
from ....results import Result

__all__ = ["replayed", "entry_digest"]


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
