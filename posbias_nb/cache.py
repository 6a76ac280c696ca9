"""On-disk, content-addressed cache of expensive measurements.

A result is a dict of numpy arrays (plus JSON-able metadata).  Its key is the SHA-256 of the
canonical JSON of ``(namespace, params, package version)``.  Writes are atomic (a temporary file
in the same folder, then ``os.replace``); every file carries the SHA-256 of its payload, checked
on read, so a truncated or corrupted entry is recomputed, never returned.

The folder is ``$POSBIAS_CACHE_DIR`` if set, else ``~/.cache/posbias_nb``.  Set
``POSBIAS_CACHE_DIR=off`` to disable caching.  Chapter :ref:`ch-reproduce` tells readers how to
move or clear it.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

__all__ = ["cache_dir", "key", "cached", "load", "store"]


def cache_dir() -> Path | None:
    """The cache folder, or None when caching is off."""
    d = os.environ.get("POSBIAS_CACHE_DIR", "")
    if d.lower() == "off":
        return None
    return Path(d) if d else Path.home() / ".cache" / "posbias_nb"


def key(namespace: str, params: Mapping) -> str:
    """Content address of a computation: hash of namespace, parameters and package version."""
    from . import __version__

    blob = json.dumps(
        {"ns": namespace, "params": params, "version": __version__},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _path(namespace: str, k: str) -> Path | None:
    d = cache_dir()
    return None if d is None else d / namespace / f"{k}.npz"


def store(namespace: str, params: Mapping, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` under the key of ``(namespace, params)``, atomically."""
    path = _path(namespace, key(namespace, params))
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    payload = buf.getvalue()
    digest = hashlib.sha256(payload).digest()
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(digest)
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(namespace: str, params: Mapping) -> dict[str, np.ndarray] | None:
    """Read a stored result, or None if absent or if its checksum does not match."""
    path = _path(namespace, key(namespace, params))
    if path is None or not path.exists():
        return None
    raw = path.read_bytes()
    digest, payload = raw[:32], raw[32:]
    if len(raw) < 32 or hashlib.sha256(payload).digest() != digest:
        path.unlink(missing_ok=True)
        return None
    with np.load(io.BytesIO(payload), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def cached(
    namespace: str, params: Mapping, compute: Callable[[], Mapping[str, np.ndarray]]
) -> dict[str, np.ndarray]:
    """Return the stored result for ``(namespace, params)``, computing and storing it if absent."""
    hit = load(namespace, params)
    if hit is not None:
        return hit
    out = {k: np.asarray(v) for k, v in compute().items()}
    store(namespace, params, out)
    return out
