"""The entry file: one measurement on disk, as the cache writes it and ``recorded/`` keeps it.

An entry file is the SHA-256 of its payload, then the payload (``numpy.savez`` of its arrays),
written atomically (a temporary file in the same folder, fsynced, then renamed).  The cache
(:mod:`posbias_nb.cache`) stores and reads every measurement through these two functions;
the room's own readers and writers (:mod:`~posbias_nb.provenance.reference`: a CPU reference
into ``recorded/by-cpu``) use them without importing the cache.
"""
from __future__ import annotations

import hashlib
import io
import os
import tempfile
from pathlib import Path
from typing import Mapping

import numpy as np

__all__ = ["write_entry", "read_entry"]


def write_entry(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` to the entry file ``path`` as the cache does: atomically, the SHA-256 of
    the payload first (:func:`read_entry` checks it)."""
    path = Path(path)
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


def read_entry(path: Path) -> dict[str, np.ndarray] | None:
    """The arrays of an entry file, or None if its checksum does not match."""
    raw = Path(path).read_bytes()
    digest, payload = raw[:32], raw[32:]
    if len(raw) < 32 or hashlib.sha256(payload).digest() != digest:
        return None
    with np.load(io.BytesIO(payload), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}
