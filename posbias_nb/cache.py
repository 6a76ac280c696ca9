"""On-disk, content-addressed cache of expensive measurements.

A result is a dict of numpy arrays (plus JSON-able metadata).  Its key is the SHA-256 of the
canonical JSON of ``(namespace, params, package version)``.  Writes are atomic (a temporary file
in the same folder, then ``os.replace``); every file carries the SHA-256 of its payload, checked
on read, so a truncated or corrupted entry is recomputed, never returned.

The folder is ``$POSBIAS_CACHE_DIR`` if set, else ``~/.cache/posbias_nb``.  Set
``POSBIAS_CACHE_DIR=off`` to disable caching.  With ``$POSBIAS_CACHE_LOG`` set to a file, every
read and write appends one JSON line (namespace, key, hit or miss, seconds, ``$POSBIAS_CACHE_TAG``):
``bench/profile_chapters.py`` counts from it which measurement ran twice.  Chapter :ref:`ch-reproduce` tells readers how to
move or clear it.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

__all__ = ["cache_dir", "key", "cached", "load", "store", "lock"]


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


def _log(event: str, namespace: str, k: str, seconds: float = 0.0) -> None:
    """One JSON line per cache event, only where ``$POSBIAS_CACHE_LOG`` names a file."""
    out = os.environ.get("POSBIAS_CACHE_LOG")
    if not out:
        return
    line = json.dumps({"event": event, "ns": namespace, "key": k[:16],
                       "seconds": round(seconds, 3), "tag": os.environ.get("POSBIAS_CACHE_TAG", "")})
    with open(out, "a") as f:
        f.write(line + "\n")


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
    k = key(namespace, params)
    path = _path(namespace, k)
    if path is None or not path.exists():
        _log("miss", namespace, k)
        return None
    raw = path.read_bytes()
    digest, payload = raw[:32], raw[32:]
    if len(raw) < 32 or hashlib.sha256(payload).digest() != digest:
        path.unlink(missing_ok=True)
        _log("miss", namespace, k)
        return None
    _log("hit", namespace, k)
    with np.load(io.BytesIO(payload), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


@contextmanager
def _flock(path: Path):
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)  # released when the file is closed
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def lock(name: str):
    """A context manager that holds an exclusive lock named ``name`` across processes (an
    ``flock`` on a file in the cache folder's ``.locks``; nothing when the cache is off).

    Two chapters executed at once that need the same measurement compute it once: the second
    waits for the first and then reads its result (:func:`cached`).  Locks nest as the
    computations do (a computation never needs its own result), so they cannot deadlock.
    """
    d = cache_dir()
    if d is None:
        return nullcontext()
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return _flock(d / ".locks" / f"{safe}.lock")


def cached(
    namespace: str, params: Mapping, compute: Callable[[], Mapping[str, np.ndarray]]
) -> dict[str, np.ndarray]:
    """Return the stored result for ``(namespace, params)``, computing and storing it if absent.

    The computation holds :func:`lock` on its key, so a second process asking for the same
    result meanwhile waits and reads it instead of computing it again."""
    hit = load(namespace, params)
    if hit is not None:
        return hit
    k = key(namespace, params)
    with lock(f"{namespace}-{k}"):
        hit = load(namespace, params)  # computed by another process while this one waited
        if hit is not None:
            return hit
        t0 = time.perf_counter()
        out = {n: np.asarray(v) for n, v in compute().items()}
        _log("computed", namespace, k, time.perf_counter() - t0)
        store(namespace, params, out)
    return out
