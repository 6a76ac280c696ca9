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
computed.  What makes a recorded entry trustworthy lives in :mod:`posbias_nb.provenance`: the
code that computed it (:mod:`~posbias_nb.provenance.code`), the sample ``make test`` measures
anew (:mod:`~posbias_nb.provenance.plan`, named in ``$POSBIAS_RECORDED_VERIFY_KEYS``), and the
comparison (:mod:`~posbias_nb.provenance.verify`).  This module has one hook for them
(:func:`_recorded_hook`, called by :func:`cached`): a sampled entry is computed anew, whole, by
a sample of its :class:`Parts` or against this CPU's reference, and must agree with its record.
The namespaces listed in ``$POSBIAS_RECORDED_VERIFY`` (comma-separated; none by default) are
computed whole and compared (:func:`store`); a difference raises
:class:`~posbias_nb.provenance.verify.RecordedMismatch`.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Hashable, Mapping, Sequence

import numpy as np

from .provenance import code as _code
from .provenance import machine as _machine
from .provenance import verify as _verify
# names the package's computing code and the chapters use from here (experiments.remedy.fix,
# experiments.born.scale, book/reproduce.md); their home is posbias_nb.provenance
from .provenance.code import NAMESPACE_CODE, code_digest  # noqa: F401
from .provenance.machine import cpu_model  # noqa: F401
from .provenance.plan import VERIFY_BUDGET, entry_setting, verification_plan  # noqa: F401
from .provenance.verify import VERIFY_PARTS, RecordedMismatch, agree  # noqa: F401
# the entry file's format lives in the provenance room, which reads and writes it too
from .provenance.entries import read_entry, write_entry  # noqa: F401

__all__ = ["cache_dir", "recorded_dir", "references_dir", "key", "cached", "load",
           "load_recorded", "load_reference", "store", "lock", "file_lock", "entry_path",
           "read_entry", "write_entry", "verify_keys", "Parts"]


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


def references_dir() -> Path | None:
    """The folder of CPU references (:mod:`posbias_nb.provenance.machine`), ``by-cpu`` beside
    the recorded entries' folder (``recorded/by-cpu`` for ``recorded/cache``), or None when
    nothing recorded is read."""
    d = recorded_dir()
    return None if d is None else d.parent / "by-cpu"


def key(namespace: str, params: Mapping) -> str:
    """Content address of a computation: hash of namespace, parameters and package version."""
    from . import __version__

    blob = json.dumps(
        {"ns": namespace, "params": params, "version": __version__},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _log(event: str, namespace: str, k: str, seconds: float = 0.0, **extra) -> None:
    """One JSON line per cache event, only where ``$POSBIAS_CACHE_LOG`` names a file; a
    ``computed`` event carries the digest of its namespace's code at that moment (``code``)."""
    out = os.environ.get("POSBIAS_CACHE_LOG")
    if not out:
        return
    if event == "computed" and namespace in _code.NAMESPACE_CODE:
        # the code that computed it, as it was then: make record writes it into the manifest
        extra.setdefault("code", _code.code_digest(namespace))
    line = json.dumps({"event": event, "ns": namespace, "key": k[:16],
                       "seconds": round(seconds, 3), "tag": os.environ.get("POSBIAS_CACHE_TAG", ""),
                       **extra})
    with open(out, "a") as f:
        f.write(line + "\n")


def entry_path(namespace: str, k: str) -> Path | None:
    """The file of entry ``k`` of ``namespace`` in the cache folder, or None when caching is off."""
    d = cache_dir()
    return None if d is None else d / namespace / f"{k}.npz"


def store(namespace: str, params: Mapping, arrays: Mapping[str, np.ndarray],
          seconds: float | None = None,
          compare: Callable[[Mapping, Mapping], list] | None = None) -> dict[str, np.ndarray]:
    """Write ``arrays`` under the key of ``(namespace, params)``, atomically.  Where a recorded
    entry of the same key exists (a verified namespace, computed anew), the two must agree
    (:func:`~posbias_nb.provenance.verify.agree`), or
    :class:`~posbias_nb.provenance.verify.RecordedMismatch` is raised and nothing is written.

    ``seconds``: what computing ``arrays`` took, for a caller that computes outside
    :func:`cached` (several entries from one loaded model): logged as the entry's ``computed``
    event, so that ``make record`` writes its cost into ``recorded/MANIFEST.json``.

    ``compare``: the entry's own comparison, ``compare(recorded, fresh)`` -> the differences (an
    empty list when they agree), in place of :func:`~posbias_nb.provenance.verify.agree`: for an
    entry whose computation is right in more than one value (a ranking of near-tied scores,
    :func:`posbias_nb.tasks.corpus.ranking_agrees`).  Where it is given and agrees, the
    *recorded* entry is written and returned: the fresh value is one of the values the
    computation allows, the record the one the book prints.  Returns what was written."""
    k = key(namespace, params)
    if seconds is not None:
        _log("computed", namespace, k, float(seconds), setting=entry_setting(params))
    arrays = {n: np.asarray(v) for n, v in arrays.items()}
    rec = load_recorded(namespace, params)
    if rec is not None:
        diff = _verify.agree(rec, arrays, _verify.rtol_for(namespace)) if compare is None \
            else list(compare(rec, arrays))
        _log("mismatch" if diff else "verified", namespace, k, setting=entry_setting(params))
        if diff:
            raise RecordedMismatch(
                f"recorded namespace {namespace!r}, key {k}: computed now, it disagrees with its "
                f"recorded value: {'; '.join(diff[:3])}. The code that computes it changed; if "
                f"the change is meant, re-record the namespace: make record-new "
                f"REMEASURE={namespace}")
        if compare is not None:
            arrays = dict(rec)
    _write(namespace, k, arrays)
    return arrays


def _write(namespace: str, k: str, arrays: Mapping[str, np.ndarray]) -> None:
    path = entry_path(namespace, k)
    if path is not None:
        write_entry(path, arrays)


def load(namespace: str, params: Mapping) -> dict[str, np.ndarray] | None:
    """Read a stored result, or None if absent or if its checksum does not match."""
    k = key(namespace, params)
    path = entry_path(namespace, k)
    out = None if path is None or not path.exists() else read_entry(path)
    if out is None and path is not None and path.exists():
        path.unlink(missing_ok=True)  # corrupt: recomputed
    if out is not None:
        _log("hit", namespace, k, setting=entry_setting(params))
        return out
    if namespace not in _verified() and f"{namespace}/{k}" not in verify_keys():
        out = load_recorded(namespace, params)
        if out is not None:
            _log("recorded", namespace, k, setting=entry_setting(params))
            return out
    _log("miss", namespace, k)
    return None


def load_recorded(namespace: str, params: Mapping) -> dict[str, np.ndarray] | None:
    """The recorded entry of ``(namespace, params)`` (``$POSBIAS_RECORDED_DIR``), or None.
    A recorded file whose checksum does not match raises: the recorded folder is read-only and
    committed, so a bad file there is an error to see, not an entry to drop."""
    d = recorded_dir()
    if d is None or namespace in _ignored():
        return None
    return _read_committed(d / namespace / f"{key(namespace, params)}.npz", "recorded entry")


def load_reference(namespace: str, k: str, machine: str | None = None) -> dict | None:
    """This machine's (or ``machine``'s) CPU reference of recorded entry ``namespace/k``, or
    None; a reference file whose checksum does not match raises, as a recorded one does."""
    d = references_dir()
    if d is None:
        return None
    return _read_committed(_machine.reference_file(d, namespace, k, machine), "CPU reference")


def _read_committed(path: Path, what: str) -> dict[str, np.ndarray] | None:
    """The arrays of a committed, read-only entry file (recorded or a CPU reference), or None if
    absent; a corrupt one raises (an error to see, not an entry to drop)."""
    if not path.exists():
        return None
    out = read_entry(path)
    if out is None:
        raise RecordedMismatch(f"{what} {path} is corrupt (its checksum does not match)")
    return out


def _names(var: str) -> set[str]:
    return {n.strip() for n in os.environ.get(var, "").split(",") if n.strip()}


def _verified() -> set[str]:
    """Namespaces computed anew in full and compared with their recorded entries."""
    return _names("POSBIAS_RECORDED_VERIFY")


def _ignored() -> set[str]:
    """Namespaces whose recorded entries are neither read nor compared (``make record-new
    REMEASURE=...`` measures them anew to replace them)."""
    return _names("POSBIAS_RECORDED_IGNORE")


_VERIFY_KEYS: dict[str, frozenset[str]] = {}


def verify_keys() -> frozenset[str]:
    """The entries (``namespace/key`` lines of the file ``$POSBIAS_RECORDED_VERIFY_KEYS``)
    computed anew and compared with their recorded values: the sample that
    :func:`posbias_nb.provenance.plan.verification_plan` chose for this run."""
    f = os.environ.get("POSBIAS_RECORDED_VERIFY_KEYS", "")
    if not f:
        return frozenset()
    if f not in _VERIFY_KEYS:
        lines = Path(f).read_text().split()
        bad = [x for x in lines if x.count("/") != 1 or x.count(":") > 1
               or (":" in x and not x.endswith(":1"))]
        if bad:
            raise ValueError(f"{f}: lines must read namespace/key or namespace/key:1, got "
                             f"{bad[0]!r}")
        _VERIFY_KEYS[f] = frozenset(x.split(":")[0] for x in lines)
        _VERIFY_KEYS[f + ":1"] = frozenset(x[:-2] for x in lines if x.endswith(":1"))
    return _VERIFY_KEYS[f]


def verify_one_part() -> frozenset[str]:
    """The entries of :func:`verify_keys` whose line ends ``:1``: made of parts, in a namespace
    verified under today's code, re-measured by one part
    (:func:`~posbias_nb.provenance.verify.one_part`)."""
    verify_keys()
    return _VERIFY_KEYS.get(os.environ.get("POSBIAS_RECORDED_VERIFY_KEYS", "") + ":1",
                            frozenset())


@contextmanager
def file_lock(path: Path):
    """A context manager that holds an exclusive ``flock`` on the file ``path`` (created, with
    its folder, where absent) across processes, released when the block ends."""
    import fcntl

    path = Path(path)
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
    return file_lock(d / ".locks" / f"{safe}.lock")


@dataclass(frozen=True)
class Parts:
    """A measurement made of independent parts (one prompt each, each with its own seed), so
    that a re-measurement of its recorded entry can sample parts instead of computing it whole.

    ``count`` parts; ``compute(i)`` computes part ``i`` alone, as the whole computation does
    (the whole computation must call the same function for each part, so the code exists once);
    ``take(arrays, i)`` is part ``i`` of a whole entry, in the arrays ``compute(i)`` returns.

    ``kinds()`` (optional): what distinguishes the parts beyond what their slice of the record
    says (its ``slot``), one mapping a part from a feature to its value (a task's prompts:
    whether a gold answer takes several tokens), so that the sample reaches every code path the
    entry depends on: it holds a part of every value of every feature
    (:func:`~posbias_nb.provenance.verify.part_kinds`,
    :func:`~posbias_nb.provenance.verify.part_sample`)."""
    count: int
    compute: Callable[[int], Mapping[str, np.ndarray]]
    take: Callable[[Mapping[str, np.ndarray], int], Mapping[str, np.ndarray]]
    kinds: Callable[[], Sequence[Mapping[str, Hashable]]] | None = None


def _recorded_hook(namespace: str, k: str, params: Mapping, compute: Callable,
                   parts: Parts | None) -> dict[str, np.ndarray] | None:
    """The one hook for recorded entries: where ``namespace/k`` is one of the sample ``make
    test`` re-measures (:func:`verify_keys`) and is recorded, check it
    (:mod:`posbias_nb.provenance.verify`) and return the recorded entry, or None where the whole
    must be computed (and compared by :func:`store`).  A namespace that amplifies float
    rounding, recorded on another CPU, is computed against this machine's reference where one
    stands (:func:`~posbias_nb.provenance.machine.valid_reference`); an entry of :class:`Parts`
    by a sample of its parts (:func:`~posbias_nb.provenance.verify.part_sample`)."""
    if f"{namespace}/{k}" not in verify_keys():
        return None
    if namespace in _machine.ROUNDING_AMPLIFIED:
        rec = load_recorded(namespace, params)
        ref = load_reference(namespace, k) \
            if _machine.valid_reference(recorded_dir(), namespace, k) else None
        if rec is not None and ref is not None:
            _verify.against_reference(namespace, k, ref, compute, _log)
            return rec
    if parts is not None:
        rec = load_recorded(namespace, params)
        if rec is not None:
            _verify.by_parts(namespace, k, rec, parts, _log,
                             one=f"{namespace}/{k}" in verify_one_part())
            return rec
    return None


def cached(
    namespace: str, params: Mapping, compute: Callable[[], Mapping[str, np.ndarray]],
    parts: Parts | None = None,
    compare: Callable[[Mapping, Mapping], list] | None = None,
) -> dict[str, np.ndarray]:
    """Return the stored result for ``(namespace, params)``, computing and storing it if absent
    (a recorded entry, see the module docstring, counts as present unless its namespace is
    verified, and a verified one must agree with what is computed now).

    ``parts`` (:class:`Parts`): where the entry is one of the sample ``make test`` re-measures
    (``$POSBIAS_RECORDED_VERIFY_KEYS``) and is recorded, only a sample of its parts is computed
    anew (:func:`~posbias_nb.provenance.verify.part_sample`: the first, one the code digest
    chooses, and one of every kind its ``kinds`` declares) and compared with theirs in the
    recorded entry, which is then returned; everywhere else the whole is computed.

    ``compare``: the entry's own comparison with its record where it is computed whole (see
    :func:`store`, which then keeps the recorded value).

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
        rec = _recorded_hook(namespace, k, params, compute, parts)
        if rec is not None:
            _write(namespace, k, rec)
            return dict(rec)
        t0 = time.perf_counter()
        out = {n: np.asarray(v) for n, v in compute().items()}
        _log("computed", namespace, k, time.perf_counter() - t0,
             setting=entry_setting(params))
        out = store(namespace, params, out, compare=compare)
    return out
