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

**Recorded measurements.**  ``$POSBIAS_RECORDED_DIR``, if set, names a read-only folder of
entries in the same layout, recorded by an earlier cold run (``make record``; its
``MANIFEST.json`` says when, on which commit and machine, and what each entry cost).  A key
absent from the cache folder is read from there (the cache event ``recorded``) instead of being
computed.  The namespaces listed in ``$POSBIAS_RECORDED_VERIFY`` (comma-separated) are computed
anyway and compared with the recorded entry (:func:`agree`); a difference raises
:class:`RecordedMismatch`, so a change of the code that moves a recorded number without changing
its key fails the run instead of showing stale numbers.
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

__all__ = ["cache_dir", "recorded_dir", "key", "cached", "load", "load_recorded", "store", "lock",
           "agree", "RecordedMismatch"]


def cache_dir() -> Path | None:
    """The cache folder, or None when caching is off."""
    d = os.environ.get("POSBIAS_CACHE_DIR", "")
    if d.lower() == "off":
        return None
    return Path(d) if d else Path.home() / ".cache" / "posbias_nb"


def recorded_dir() -> Path | None:
    """The folder of recorded measurements (``$POSBIAS_RECORDED_DIR``), or None: unset, empty,
    or the cache off."""
    d = os.environ.get("POSBIAS_RECORDED_DIR", "")
    if not d or cache_dir() is None:
        return None
    return Path(d)


class RecordedMismatch(RuntimeError):
    """A measurement computed anew disagrees with its recorded entry."""


def agree(recorded: Mapping[str, np.ndarray], fresh: Mapping[str, np.ndarray],
          rtol: float = 1e-3) -> list[str]:
    """The differences between a recorded entry and the same computation made again: an empty
    list when they agree.  Same array names, shapes and dtypes kinds; integers, booleans and
    strings equal; floats within ``rtol`` of the largest magnitude of the recorded array (the
    same code on another machine rounds differently, a changed computation moves numbers by far
    more).  NaNs must sit in the same places."""
    out = []
    if set(recorded) != set(fresh):
        return [f"arrays {sorted(set(recorded) ^ set(fresh))} in only one of the two"]
    for n in sorted(recorded):
        a, b = np.asarray(recorded[n]), np.asarray(fresh[n])
        if a.shape != b.shape:
            out.append(f"{n}: shape {a.shape} recorded, {b.shape} now")
        elif a.dtype.kind in "fc" or b.dtype.kind in "fc":
            a, b = a.astype(complex if "c" in a.dtype.kind + b.dtype.kind else float), \
                b.astype(complex if "c" in a.dtype.kind + b.dtype.kind else float)
            if not np.array_equal(np.isnan(a), np.isnan(b)):
                out.append(f"{n}: NaNs in different places")
                continue
            ok = ~np.isnan(a)
            scale = float(np.max(np.abs(a[ok]))) if ok.any() else 0.0
            err = float(np.max(np.abs(a[ok] - b[ok]))) if ok.any() else 0.0
            if err > rtol * scale:
                out.append(f"{n}: differs by {err:.3g}, more than {rtol:g} of its largest "
                           f"magnitude {scale:.3g}")
        elif not np.array_equal(a, b):
            out.append(f"{n}: {int(np.sum(a != b)) if a.shape == b.shape else 'all'} entries "
                       f"differ")
    return out


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
    """Write ``arrays`` under the key of ``(namespace, params)``, atomically.  Where a recorded
    entry of the same key exists (a verified namespace, computed anew), the two must agree
    (:func:`agree`), or :class:`RecordedMismatch` is raised and nothing is written."""
    k = key(namespace, params)
    rec = load_recorded(namespace, params)
    if rec is not None:
        diff = agree(rec, {n: np.asarray(v) for n, v in arrays.items()})
        _log("mismatch" if diff else "verified", namespace, k)
        if diff:
            raise RecordedMismatch(
                f"{namespace} entry {k[:16]} computed now disagrees with its recorded value: "
                f"{'; '.join(diff[:3])}. The code that computes it changed but its key did not: "
                f"bump its definition version, or record anew (make record)")
    path = _path(namespace, k)
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


def _read(path: Path) -> dict[str, np.ndarray] | None:
    """The arrays of an entry file, or None if its checksum does not match."""
    raw = path.read_bytes()
    digest, payload = raw[:32], raw[32:]
    if len(raw) < 32 or hashlib.sha256(payload).digest() != digest:
        return None
    with np.load(io.BytesIO(payload), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def load(namespace: str, params: Mapping) -> dict[str, np.ndarray] | None:
    """Read a stored result, or None if absent or if its checksum does not match."""
    k = key(namespace, params)
    path = _path(namespace, k)
    out = None if path is None or not path.exists() else _read(path)
    if out is None and path is not None and path.exists():
        path.unlink(missing_ok=True)  # corrupt: recomputed
    if out is not None:
        _log("hit", namespace, k)
        return out
    if namespace not in _verified():
        out = load_recorded(namespace, params)
        if out is not None:
            _log("recorded", namespace, k)
            return out
    _log("miss", namespace, k)
    return None


def load_recorded(namespace: str, params: Mapping) -> dict[str, np.ndarray] | None:
    """The recorded entry of ``(namespace, params)`` (``$POSBIAS_RECORDED_DIR``), or None.
    A recorded file whose checksum does not match raises: the recorded folder is read-only and
    committed, so a bad file there is an error to see, not an entry to drop."""
    d = recorded_dir()
    if d is None:
        return None
    path = d / namespace / f"{key(namespace, params)}.npz"
    if not path.exists():
        return None
    out = _read(path)
    if out is None:
        raise RecordedMismatch(f"recorded entry {path} is corrupt (its checksum does not match)")
    return out


def _verified() -> set[str]:
    return {n.strip() for n in os.environ.get("POSBIAS_RECORDED_VERIFY", "").split(",")
            if n.strip()}


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
    """Return the stored result for ``(namespace, params)``, computing and storing it if absent
    (a recorded entry, see the module docstring, counts as present unless its namespace is
    verified, and a verified one must agree with what is computed now).

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
