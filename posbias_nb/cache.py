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
computed.  The namespaces listed in ``$POSBIAS_RECORDED_VERIFY`` (comma-separated; none by
default since every run samples every namespace, below) are computed anyway and compared with the recorded entry (:func:`agree`); a difference raises
:class:`RecordedMismatch`, so a change of the code that moves a recorded number without changing
its key fails the run instead of showing stale numbers.

**The code is part of an entry's identity.**  Each namespace declares the modules that compute it
(:data:`NAMESPACE_CODE`); :func:`code_digest` hashes their source and that of every module of the
package they import (at any depth, inside functions too, package ``__init__`` files included),
normalised by the ``ast`` module so that comments, docstrings and formatting do not count.  The
modules that only present or store results (:data:`NOT_COMPUTING`) stay out.  ``make record``
writes the digest beside every recorded entry; ``make test`` re-measures a sample of every
namespace (``$POSBIAS_RECORDED_VERIFY_KEYS`` names a file of ``namespace/key`` lines, chosen by
``bench/verify_plan.py``), more where the digest changed.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import io
import json
import os
import tempfile
import time
from collections import Counter, defaultdict
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

__all__ = ["cache_dir", "recorded_dir", "key", "cached", "load", "load_recorded", "store", "lock",
           "agree", "RecordedMismatch", "NAMESPACE_CODE", "NOT_COMPUTING", "code_modules",
           "code_digest", "normalised_source", "verification_plan", "verification_summary", "Parts",
           "VERIFY_PARTS", "part_sample", "ROUNDING_AMPLIFIED", "GPU_MEASURED",
           "GPU_PROVENANCE", "GPU_MACHINE", "GPU_TWIN_BUDGET", "gpu_provenance_problems", "cpu_model", "machine_id",
           "references_dir", "reference_index", "load_reference", "write_file",
           "reference_holds", "recorded_machine", "prune_references"]

#: The modules of ``posbias_nb`` (dotted, relative to the package) that compute each cached
#: namespace: the module that calls the cache, whose imports :func:`code_modules` follows.
#: ``tests/test_cache.py`` checks that every namespace the package caches under is declared and
#: that its calling module is among its roots.
NAMESPACE_CODE: dict[str, tuple[str, ...]] = {
    "capture-influence": ("measure.cached",),
    "capture-win": ("measure.cached",),
    "profile": ("measure.cached",),
    "profile-shared": ("measure.cached",),
    "init-logits": ("measure.logits",),
    "fix-test": ("experiments.fix", "experiments.placement"),
    "fix-tune": ("experiments.fix", "experiments.placement"),
    "inference-channel": ("experiments.inference",),
    "inference-channel-cli": ("experiments.inference",),
    "inference-cost": ("experiments.inference",),
    "inference-diagnostic": ("experiments.inference",),
    "inference-prior": ("experiments.inference",),
    "inference-prior-fit": ("experiments.inference",),
    "inference-retrieval": ("experiments.inference",),
    "inference-task": ("experiments.inference",),
    "layouts-ablation": ("experiments.layouts",),
    "layouts-layout": ("experiments.layouts",),
    "realqa-jacobian": ("experiments.realqa",),
    "replay": ("experiments.replay",),
    "report": ("experiments.report",),
    "report-remedy": ("experiments.report",),
    "report-spans": ("experiments.report",),
    "retrieval": ("experiments.retrieval",),
    "retrieval-link": ("experiments.retrieval",),
    "scale-gpu": ("experiments.scale",),
    "scale-layout": ("experiments.scale",),
    "confirm": ("experiments.confirm",),
    "task": ("experiments.task",),
    "train": ("experiments.remedies",),
    "train-init": ("experiments.remedies",),
}

#: Modules that present, store or register results and compute none of them: a change there
#: moves no recorded number, so it does not count as a change of any namespace's code.
NOT_COMPUTING = frozenset({"cache", "plots", "notebook", "cli", "__main__", "experiments.design",
                           "rollout.explorer"})

_PKG = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=1024)
def normalised_source(source: str) -> str:
    """The source of a module as ``ast`` sees it, docstrings removed: comments, blank lines,
    formatting and docstrings leave it unchanged; any change of what runs changes it."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=True, include_attributes=False)


def _package_files(files: Mapping[str, str] | None) -> dict[str, str]:
    """``{dotted module: source}`` of the package: today's files, or ``files`` (``{path relative
    to the package: source}``, e.g. read from an earlier commit)."""
    if files is None:
        files = {str(p.relative_to(_PKG)): p.read_text() for p in _PKG.rglob("*.py")}
    out = {}
    for rel, src in files.items():
        parts = rel[:-3].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = src
    return out


@functools.lru_cache(maxsize=1024)
def _parsed(src: str) -> ast.Module:
    return ast.parse(src)


def _imports(mod: str, src: str, known: set[str]) -> set[str]:
    """The package modules that ``mod`` imports (relative or absolute, at any depth of its code)."""
    is_pkg = False  # a package's own ``from . import x`` resolves against itself
    out = set()
    pkg_parts = mod.split(".") if mod else []

    def resolve(base: list[str], name: str | None) -> None:
        dotted = ".".join(base + ([name] if name else []))
        if name and dotted in known:
            out.add(dotted)
        elif ".".join(base) in known:
            out.add(".".join(base))

    tree = _parsed(src)
    is_pkg = mod == "" or any(k.startswith(mod + ".") for k in known)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                here = pkg_parts if is_pkg else pkg_parts[:-1]
                base = here[:len(here) - (node.level - 1)] if node.level > 1 else here
                base = base + (node.module.split(".") if node.module else [])
            elif node.module and (node.module == "posbias_nb"
                                  or node.module.startswith("posbias_nb.")):
                base = node.module.split(".")[1:]
            else:
                continue
            for a in node.names:
                resolve(base, a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("posbias_nb."):
                    resolve(a.name.split(".")[1:], None)
    return out


def code_modules(namespace: str, files: Mapping[str, str] | None = None) -> list[str]:
    """The modules whose code computes ``namespace``: its declared roots and every package module
    they import, with the ``__init__`` of every package on the way (its own source, not what it
    imports for others), less :data:`NOT_COMPUTING`
    (dotted, relative to the package; ``""`` is the package's own ``__init__``)."""
    if namespace not in NAMESPACE_CODE:
        raise ValueError(f"namespace {namespace!r} declares no code (cache.NAMESPACE_CODE)")
    srcs = _package_files(files)
    known = set(srcs)
    seen: set[str] = set()
    todo = [m for m in NAMESPACE_CODE[namespace] if m in known]
    while todo:
        m = todo.pop()
        if m in seen or m in NOT_COMPUTING:
            continue
        seen.add(m)
        todo += sorted(_imports(m, srcs[m], known))
    # the __init__ of each package on the way runs too: its own code counts, not what it imports
    # for others (a package that imports all its modules would otherwise tie every one of them
    # to every namespace under it)
    for m in list(seen):
        parts = m.split(".") if m else []
        seen |= {".".join(parts[:i]) for i in range(len(parts))
                 if ".".join(parts[:i]) in known and ".".join(parts[:i]) not in NOT_COMPUTING}
    return sorted(seen)


def code_digest(namespace: str, files: Mapping[str, str] | None = None) -> str:
    """SHA-256 (hex) of the normalised source (:func:`normalised_source`) of
    :func:`code_modules` of ``namespace``: today's, or of ``files`` (an earlier commit's). A
    declared root missing from the files counts as part of the code (its absence changes the
    digest)."""
    srcs = _package_files(files)
    h = hashlib.sha256()
    for m in NAMESPACE_CODE.get(namespace, ()):
        if m not in srcs:
            h.update(f"missing {m}\n".encode())
    for m in code_modules(namespace, files):
        h.update(f"{m}\n".encode())
        h.update(normalised_source(srcs[m]).encode())
    return h.hexdigest()


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


#: Fields that measure the machine, not the computation (wall seconds, peak memory): a recorded
#: entry and its re-measurement must both have them, but their values are not compared.  An
#: array name or JSON key counts when its last component (after ``#``, ``/`` or ``.``) is one.
MACHINE_FIELDS = ("seconds", "peak_mib", "peak_kb", "wall", "wall_s", "latency_s")


def _machine_field(name: str) -> bool:
    import re

    return re.split(r"[#/.]", str(name))[-1] in MACHINE_FIELDS


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _agree_json(a, b, where: str, rtol: float, out: list) -> None:
    """Parsed JSON compared as :func:`agree` compares arrays: a list of numbers as one array
    (within ``rtol`` of its largest recorded magnitude: an interval's bound near zero, the
    difference of two larger numbers, keeps their rounding, not its own), a lone number within
    ``rtol`` of the larger of the two, everything else equal, :data:`MACHINE_FIELDS` present
    but not compared."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            out.append(f"{where}: keys {sorted(set(a) ^ set(b))} in only one of the two")
        for k in sorted(set(a) & set(b), key=str):
            if not _machine_field(k):
                _agree_json(a[k], b[k], f"{where}/{k}", rtol, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{where}: {len(a)} items recorded, {len(b)} now")
        elif a and all(_number(x) for x in a) and all(_number(y) for y in b):
            # a list of numbers is an array: within rtol of its largest recorded magnitude
            x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
            ok = ~np.isnan(x)
            if not np.array_equal(ok, ~np.isnan(y)):
                out.append(f"{where}: NaNs in different places")
            elif ok.any():
                d = np.where(ok, np.abs(x - np.where(ok, y, 0.0)), 0.0)
                i, scale = int(np.argmax(d)), float(np.max(np.abs(x[ok])))
                if d[i] > rtol * scale:
                    out.append(f"{where}[{i}]: {a[i]!r} recorded, {b[i]!r} now (more than "
                               f"{rtol:g} of the list's largest magnitude {scale:.3g})")
        else:
            for i, (x, y) in enumerate(zip(a, b)):
                _agree_json(x, y, f"{where}[{i}]", rtol, out)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) \
            and not isinstance(a, bool) and not isinstance(b, bool):
        fa, fb = float(a), float(b)
        if np.isnan(fa) or np.isnan(fb):
            if not (np.isnan(fa) and np.isnan(fb)):
                out.append(f"{where}: NaN in only one of the two")
        elif abs(fa - fb) > rtol * max(abs(fa), abs(fb)):
            out.append(f"{where}: {fa!r} recorded, {fb!r} now")
    elif a != b:
        out.append(f"{where}: {str(a)[:60]!r} recorded, {str(b)[:60]!r} now")


def agree(recorded: Mapping[str, np.ndarray], fresh: Mapping[str, np.ndarray],
          rtol: float = 1e-3) -> list[str]:
    """The differences between a recorded entry and the same computation made again: an empty
    list when they agree.  Same array names, shapes and dtypes kinds; integers, booleans and
    strings equal; floats within ``rtol`` of the largest magnitude of the recorded array (the
    same code on another machine rounds differently, a changed computation moves numbers by far
    more).  NaNs must sit in the same places.  A string array holding one JSON document is
    compared field by field by the same rules (a list of numbers as one array, a lone number
    within ``rtol`` of itself).
    :data:`MACHINE_FIELDS` (seconds, peak memory) must be present in both but are not compared:
    they measure the machine, not the computation."""
    out = []
    if set(recorded) != set(fresh):
        return [f"arrays {sorted(set(recorded) ^ set(fresh))} in only one of the two"]
    for n in sorted(recorded):
        a, b = np.asarray(recorded[n]), np.asarray(fresh[n])
        if _machine_field(n):
            if a.shape != b.shape:
                out.append(f"{n}: shape {a.shape} recorded, {b.shape} now")
            continue
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
        elif a.shape == () and a.dtype.kind in "UO" and _json(a) is not None \
                and _json(b) is not None:
            diffs: list[str] = []
            _agree_json(_json(a), _json(b), n, rtol, diffs)
            out += diffs[:5] + ([f"{n}: and {len(diffs) - 5} more"] if len(diffs) > 5 else [])
        elif not np.array_equal(a, b):
            out.append(f"{n}: {int(np.sum(a != b)) if a.shape == b.shape else 'all'} entries "
                       f"differ")
    return out


def _json(a: np.ndarray):
    try:
        v = json.loads(str(a[()]))
    except (ValueError, TypeError):
        return None
    return v if isinstance(v, (dict, list)) else None


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
    if event == "computed" and namespace in NAMESPACE_CODE:
        # the code that computed it, as it was then: make record writes it into the manifest
        extra.setdefault("code", code_digest(namespace))
    line = json.dumps({"event": event, "ns": namespace, "key": k[:16],
                       "seconds": round(seconds, 3), "tag": os.environ.get("POSBIAS_CACHE_TAG", ""),
                       **extra})
    with open(out, "a") as f:
        f.write(line + "\n")


def _path(namespace: str, k: str) -> Path | None:
    d = cache_dir()
    return None if d is None else d / namespace / f"{k}.npz"


def store(namespace: str, params: Mapping, arrays: Mapping[str, np.ndarray],
          seconds: float | None = None) -> None:
    """Write ``arrays`` under the key of ``(namespace, params)``, atomically.  Where a recorded
    entry of the same key exists (a verified namespace, computed anew), the two must agree
    (:func:`agree`), or :class:`RecordedMismatch` is raised and nothing is written.

    ``seconds``: what computing ``arrays`` took, for a caller that computes outside
    :func:`cached` (several entries from one loaded model): logged as the entry's ``computed``
    event, so that ``make record`` writes its cost into ``recorded/MANIFEST.json``."""
    k = key(namespace, params)
    if seconds is not None:
        _log("computed", namespace, k, float(seconds))
    rec = load_recorded(namespace, params)
    if rec is not None:
        diff = agree(rec, {n: np.asarray(v) for n, v in arrays.items()})
        _log("mismatch" if diff else "verified", namespace, k)
        if diff:
            raise RecordedMismatch(
                f"recorded namespace {namespace!r}, key {k}: computed now, it disagrees with its "
                f"recorded value: {'; '.join(diff[:3])}. The code that computes it changed; if "
                f"the change is meant, re-record the namespace: make record-new "
                f"REMEASURE={namespace}")
    _write(namespace, k, arrays)


def _write(namespace: str, k: str, arrays: Mapping[str, np.ndarray]) -> None:
    path = _path(namespace, k)
    if path is None:
        return
    write_file(path, arrays)


def write_file(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` to the entry file ``path`` as the cache does: atomically, the SHA-256 of
    the payload first (:func:`_read` checks it)."""
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
    if namespace not in _verified() and f"{namespace}/{k}" not in _verify_keys():
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
    if d is None or namespace in _ignored():
        return None
    return _read_committed(d / namespace / f"{key(namespace, params)}.npz", "recorded entry")


def _read_committed(path: Path, what: str) -> dict[str, np.ndarray] | None:
    """The arrays of a committed, read-only entry file (recorded or a CPU reference), or None if
    absent; a corrupt one raises (an error to see, not an entry to drop)."""
    if not path.exists():
        return None
    out = _read(path)
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


def _verify_keys() -> frozenset[str]:
    """The entries (``namespace/key`` lines of the file ``$POSBIAS_RECORDED_VERIFY_KEYS``)
    computed anew and compared with their recorded values: the sample that
    ``bench/verify_plan.py`` chose for this run."""
    f = os.environ.get("POSBIAS_RECORDED_VERIFY_KEYS", "")
    if not f:
        return frozenset()
    if f not in _VERIFY_KEYS:
        lines = Path(f).read_text().split()
        bad = [x for x in lines if x.count("/") != 1]
        if bad:
            raise ValueError(f"{f}: lines must read namespace/key, got {bad[0]!r}")
        _VERIFY_KEYS[f] = frozenset(lines)
    return _VERIFY_KEYS[f]


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


@dataclass(frozen=True)
class Parts:
    """A measurement made of independent parts (one prompt each, each with its own seed), so
    that a re-measurement of its recorded entry can sample parts instead of computing it whole.

    ``count`` parts; ``compute(i)`` computes part ``i`` alone, as the whole computation does
    (the whole computation must call the same function for each part, so the code exists once);
    ``take(arrays, i)`` is part ``i`` of a whole entry, in the arrays ``compute(i)`` returns."""
    count: int
    compute: Callable[[int], Mapping[str, np.ndarray]]
    take: Callable[[Mapping[str, np.ndarray], int], Mapping[str, np.ndarray]]


#: How many parts of a recorded entry with :class:`Parts` a re-measurement computes.
VERIFY_PARTS = 2


def part_sample(namespace: str, k: str, count: int) -> list[int]:
    """The parts of entry ``k`` that a re-measurement computes: the first, and one chosen by the
    SHA-256 of the namespace's code digest and the key, so the same code samples the same parts
    (bit-for-bit reruns) and a change of the code samples another."""
    if count < 1:
        raise ValueError(f"an entry of {count} parts cannot be sampled")
    if count == 1:
        return [0]
    h = int(hashlib.sha256(f"{code_digest(namespace)}/{k}".encode()).hexdigest(), 16)
    return [0, 1 + h % (count - 1)][:VERIFY_PARTS]


def _verify_parts(namespace: str, k: str, rec: Mapping[str, np.ndarray], parts: Parts) -> None:
    """Compute the sampled parts of a recorded entry anew and compare each with its part of
    the recorded arrays; :class:`RecordedMismatch` names the part on a disagreement."""
    chosen = part_sample(namespace, k, parts.count)
    diff: list[str] = []
    for i in chosen:
        t0 = time.perf_counter()
        fresh = {n: np.asarray(v) for n, v in parts.compute(i).items()}
        _log("computed-part", namespace, k, time.perf_counter() - t0, part=i, parts=parts.count)
        diff = agree({n: np.asarray(v) for n, v in parts.take(rec, i).items()}, fresh)
        if diff:
            break
    _log("mismatch" if diff else "verified", namespace, k, parts=parts.count,
         sampled=len(chosen))
    if diff:
        raise RecordedMismatch(
            f"recorded namespace {namespace!r}, key {k}, part {i} of {parts.count}: computed "
            f"now, it disagrees with its recorded value: {'; '.join(diff[:3])}. The code that "
            f"computes it changed; if the change is meant, re-record the namespace: make "
            f"record-new REMEASURE={namespace}")


def cached(
    namespace: str, params: Mapping, compute: Callable[[], Mapping[str, np.ndarray]],
    parts: Parts | None = None,
) -> dict[str, np.ndarray]:
    """Return the stored result for ``(namespace, params)``, computing and storing it if absent
    (a recorded entry, see the module docstring, counts as present unless its namespace is
    verified, and a verified one must agree with what is computed now).

    ``parts`` (:class:`Parts`): where the entry is one of the sample ``make test`` re-measures
    (``$POSBIAS_RECORDED_VERIFY_KEYS``) and is recorded, only :data:`VERIFY_PARTS` of its parts
    are computed anew (:func:`part_sample`) and compared with theirs in the recorded entry,
    which is then returned; everywhere else the whole is computed.

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
        if namespace in ROUNDING_AMPLIFIED and f"{namespace}/{k}" in _verify_keys():
            rec = load_recorded(namespace, params)
            ref = load_reference(namespace, k) if _valid_reference(namespace, k) else None
            if rec is not None and ref is not None:
                return _verify_reference(namespace, k, rec, ref, compute)
        if parts is not None and f"{namespace}/{k}" in _verify_keys():
            rec = load_recorded(namespace, params)
            if rec is not None:
                _verify_parts(namespace, k, rec, parts)
                _write(namespace, k, rec)
                return rec
        t0 = time.perf_counter()
        out = {n: np.asarray(v) for n, v in compute().items()}
        _log("computed", namespace, k, time.perf_counter() - t0)
        store(namespace, params, out)
    return out


def _verify_reference(namespace: str, k: str, rec: Mapping[str, np.ndarray],
                      ref: Mapping[str, np.ndarray], compute: Callable) -> dict[str, np.ndarray]:
    """Compute a recorded entry of a :data:`ROUNDING_AMPLIFIED` namespace anew on a CPU other
    than the recording one and compare it with this machine's reference (made here by the code
    that recorded the entry, ``bench/cpu_reference.py``); where they agree, the recorded entry
    is what the chapter gets (the book prints the recorded numbers on every machine)."""
    t0 = time.perf_counter()
    fresh = {n: np.asarray(v) for n, v in compute().items()}
    _log("computed", namespace, k, time.perf_counter() - t0)
    diff = agree(ref, fresh)
    _log("mismatch" if diff else "verified", namespace, k, reference=machine_id())
    if diff:
        raise RecordedMismatch(
            f"recorded namespace {namespace!r}, key {k}: computed now on {machine_id()}, it "
            f"disagrees with this CPU's reference (made here by the code that recorded the "
            f"entry; 'recorded' below is the reference): {'; '.join(diff[:3])}. The code that "
            f"computes it changed; if the change is meant, re-record the namespace on the CPU "
            f"that recorded it (make record-new REMEASURE={namespace}), then make cpu-reference "
            f"here")
    _write(namespace, k, rec)
    return dict(rec)


#: The default budget of :func:`verification_plan`: seconds of recorded compute (on CI's two
#: cores) that ``make test`` may spend re-measuring recorded entries beyond each namespace's
#: cheapest one (``make test VERIFY_BUDGET=...`` changes it for one run).
VERIFY_BUDGET = 600.0


#: Namespaces whose computation amplifies float rounding: measured on another CPU (other
#: kernels, other rounding), the same code gives other numbers, so only a re-measurement on the
#: CPU that recorded an entry can tell a change of the code from the machine.  On any other CPU,
#: :func:`verification_plan` re-measures none of their entries and says so.  Found on an Intel
#: Xeon: the cheapest ``train`` entry, recorded on an AMD EPYC by the same training code, came
#: back with held-out answers flipped (an accuracy 0.0625 apart, kernels 0.038 apart).
ROUNDING_AMPLIFIED = {
    "train": "training amplifies float rounding over its optimizer steps",
}


def cpu_model() -> str:
    """This machine's CPU as ``/proc/cpuinfo`` names it (the ``machine`` of a recorded entry)."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cpu_generation() -> str:
    """``family/model/stepping`` of ``/proc/cpuinfo`` (a generic name such as a VM's "Intel(R)
    Xeon(R) Processor" hides the generation, whose kernels round differently), or ``"?"``."""
    got = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            k, _, v = line.partition(":")
            k = k.strip()
            if k in ("cpu family", "model", "stepping") and k not in got:
                got[k] = v.strip()
            if not line.strip() and got:
                break
    except OSError:
        pass
    return "/".join(got.get(k, "?") for k in ("cpu family", "model", "stepping"))


def machine_id() -> str:
    """This machine as far as float rounding goes: the CPU (:func:`cpu_model`), its generation
    (family/model/stepping) and the instruction set torch's CPU kernels use
    (``torch.backends.cpu.get_cpu_capability``), e.g. ``"Intel(R) Xeon(R) Processor (6/143/8)
    / AVX512"``: a CPU reference holds for this machine only."""
    try:
        import torch

        cap = torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001 - no torch, or an old one: the CPU alone
        cap = "unknown"
    return f"{cpu_model()} ({_cpu_generation()}) / {cap}"


def references_dir() -> Path | None:
    """The folder of CPU references, ``by-cpu`` beside the recorded entries' folder (``recorded/
    by-cpu`` for ``recorded/cache``), or None when nothing recorded is read.

    A :data:`ROUNDING_AMPLIFIED` namespace can be re-measured only on the CPU that recorded it;
    a *CPU reference* is one of its recorded entries computed again on another machine by the
    very code that recorded it (``bench/cpu_reference.py`` runs that commit in a git worktree),
    so that ``make test`` there compares today's code with it: ``<machine slug>/<namespace>/
    <key>.npz`` and ``REFERENCES.json`` (``{"entries": {"ns/key": {machine_id: provenance}}}``)."""
    d = recorded_dir()
    return None if d is None else d.parent / "by-cpu"


def machine_slug(machine: str) -> str:
    """A folder name for :func:`machine_id`'s string."""
    import re

    return re.sub(r"[^A-Za-z0-9]+", "-", machine).strip("-")


def reference_index(folder: Path | None = None) -> dict:
    """``REFERENCES.json`` of :func:`references_dir` (or ``folder``): ``{"entries": {...}}``."""
    d = references_dir() if folder is None else Path(folder)
    f = None if d is None else d / "REFERENCES.json"
    if f is None or not f.exists():
        return {"entries": {}}
    return json.loads(f.read_text())


def recorded_machine(entry: Mapping | None) -> str | None:
    """The machine a recorded entry names: its full :func:`machine_id` where it records one
    (``machine["id"]``), else only its CPU's name (entries recorded before the id was kept).
    A name alone does not identify a machine as far as float rounding goes: two generations of
    "AMD EPYC" trained the same ``train`` entry to numbers 0.007 apart, so a name-only entry
    never counts as recorded on a machine that passes its full id."""
    m = (entry or {}).get("machine") or {}
    return m.get("id") or m.get("cpu")


def reference_holds(entry: Mapping | None, ref: Mapping | None, cpu: str) -> str | None:
    """Why the CPU reference ``ref`` (this machine's item of ``REFERENCES.json``) cannot stand
    for the recorded entry ``entry`` (its item of ``MANIFEST.json``) on a machine whose CPU is
    ``cpu``, or None where it can: the entry must exist and have been recorded on another CPU
    (on its own CPU an entry is compared with itself), and the reference must have been made by
    the entry's commit and code (after a re-recording, an older reference is stale).  The one
    check the plan (:func:`verification_plan`) and the run (:func:`cached`) both apply."""
    if entry is None:
        return "no such recorded entry"
    if ref is None:
        return "no reference for this machine"
    if recorded_machine(entry) == cpu:
        return "recorded on this CPU"
    for f in ("commit", "code"):
        if ref.get(f) != entry.get(f):
            return (f"stale: made for {f} {str(ref.get(f))[:12]}, the entry's is "
                    f"{str(entry.get(f))[:12]}")
    return None


@functools.lru_cache(maxsize=4)
def _json_file(path: str, mtime: float) -> dict:
    return json.loads(Path(path).read_text())


def _valid_reference(namespace: str, k: str) -> bool:
    """Whether this machine holds a reference of ``namespace/k`` that :func:`reference_holds`
    accepts against ``MANIFEST.json`` beside the recorded folder."""
    d, rec = references_dir(), recorded_dir()
    if d is None or rec is None:
        return False
    man = rec.parent / "MANIFEST.json"
    idx = d / "REFERENCES.json"
    if not man.exists() or not idx.exists():
        return False
    entry = _json_file(str(man), man.stat().st_mtime).get("entries", {}).get(f"{namespace}/{k}")
    ref = (_json_file(str(idx), idx.stat().st_mtime).get("entries", {})
           .get(f"{namespace}/{k}", {}).get(machine_id()))
    return reference_holds(entry, ref, machine_id()) is None


def prune_references(root: Path, manifest: Mapping) -> list[str]:
    """Drop the CPU references under ``root/by-cpu`` that no longer stand for an entry of
    ``manifest`` (:func:`reference_holds`, the CPU test left out: a reference is never made on
    the recording CPU): their files and their items of ``REFERENCES.json``.  Returns what was
    dropped (``make record`` and ``make record-new`` call it after writing the manifest)."""
    d = Path(root) / "by-cpu"
    idx = reference_index(d)
    dropped = []
    for k, by in list(idx["entries"].items()):
        for machine, ref in list(by.items()):
            why = reference_holds(manifest.get("entries", {}).get(k), ref, cpu="")
            if why is not None:
                if ref.get("file"):
                    (d / ref["file"]).unlink(missing_ok=True)
                del by[machine]
                dropped.append(f"{k} on {machine}: {why}")
        if not by:
            del idx["entries"][k]
    if dropped:
        (d / "REFERENCES.json").write_text(json.dumps(idx, indent=1, sort_keys=True) + "\n")
    return dropped


def load_reference(namespace: str, k: str, machine: str | None = None) -> dict | None:
    """This machine's (or ``machine``'s) CPU reference of recorded entry ``namespace/k``, or
    None; a reference file whose checksum does not match raises, as a recorded one does."""
    d = references_dir()
    if d is None:
        return None
    return _read_committed(d / machine_slug(machine or machine_id()) / namespace / f"{k}.npz",
                           "CPU reference")


#: Namespaces measured on a GPU, which a CPU cannot afford to measure again: ``make test`` checks
#: each entry's provenance (:data:`GPU_PROVENANCE`) and re-measures its reduced-width CPU twin
#: (the entry's ``twin``, a ``namespace/key`` of a recorded CPU entry) instead.  Chapter
#: :ref:`ch-scale`.
GPU_MEASURED = {"scale-gpu": "measured at full width on a GPU (bench/gpu_born.py), which a CPU "
                             "cannot afford"}
#: What every recorded GPU entry must say: its provenance, and the machine's.
GPU_PROVENANCE = ("recorded", "commit", "compute_seconds", "code", "peak_bytes", "twin")
GPU_MACHINE = ("gpu", "device", "torch", "transformers", "cuda")
#: Seconds of recorded compute of the GPU entries' twins that ``make test`` re-measures beyond
#: the cheapest twin (always taken).
GPU_TWIN_BUDGET = 60.0


def gpu_provenance_problems(name: str, entry: Mapping) -> list[str]:
    """What a recorded GPU entry ``name`` (``namespace/key``) lacks of :data:`GPU_PROVENANCE`
    and :data:`GPU_MACHINE` (a GPU machine: ``gpu`` true), each as a line; empty when whole."""
    out = [f"{name}: no {k}" for k in GPU_PROVENANCE if entry.get(k) in (None, "")]
    m = entry.get("machine") or {}
    out += [f"{name}: machine without {k}" for k in GPU_MACHINE if m.get(k) in (None, "")]
    if m.get("gpu") is not True:
        out.append(f"{name}: its machine is not marked as a GPU")
    return out


def verification_plan(manifest: dict, digests: dict[str, str], budget: float = VERIFY_BUDGET,
                      cpu: str | None = None, references: set[str] | frozenset = frozenset()
                      ) -> dict:
    """The sample of recorded entries that ``make test`` measures anew (``bench/verify_plan.py``
    writes it for ``$POSBIAS_RECORDED_VERIFY_KEYS``).

    The rule, fixed before any run it decides: in every namespace, the cheapest entry that
    ``make test`` reads (its recorded ``compute_seconds``; an entry whose cost was never measured
    is taken only where the namespace has no measured one); in the namespaces whose code digest
    differs from the one recorded with an entry, further entries in order of cost while the
    sample's recorded seconds in all stay within ``budget`` (the cheapest entries count first
    and are taken even where they alone exceed it).

    Returns the sample: ``{"keys": [...], "namespaces": {ns: {...}}}``.

    ``manifest`` is ``recorded/MANIFEST.json``; ``digests`` the code digest of each namespace
    today. An entry is a candidate if ``make test`` reads it (``read`` true, or absent in an
    older manifest). Each namespace's line says how many entries it holds, whether its code
    changed since they were recorded (any entry's ``code`` differs from today's digest; an entry
    without a recorded digest counts as changed), which entries were chosen and their recorded
    seconds.

    ``cpu`` (this machine's, :func:`cpu_model`): in the namespaces of
    :data:`ROUNDING_AMPLIFIED`, only entries recorded on that CPU are candidates; where there is
    none, the namespace's line says why nothing was re-measured (``skipped``).  ``references``:
    the ``namespace/key`` entries that hold a CPU reference for this machine
    (:func:`references_dir`), candidates too (compared with the reference, not the record)."""
    if budget < 0:
        raise ValueError(f"budget must be >= 0 seconds, got {budget!r}")
    by_ns: dict[str, list] = defaultdict(list)
    for k, v in sorted(manifest.get("entries", {}).items()):
        ns, key = k.split("/")
        by_ns[ns].append((key, v))
    unknown = sorted(set(by_ns) - set(digests))
    if unknown:
        raise ValueError(f"recorded namespaces {unknown} declare no code "
                         "(posbias_nb.cache.NAMESPACE_CODE)")
    out, extra, twins = {}, [], {}
    entries = manifest.get("entries", {})
    for ns, items in sorted(by_ns.items()):
        if ns in GPU_MEASURED:
            bad = [p for key, v in items for p in gpu_provenance_problems(f"{ns}/{key}", v)]
            if bad:
                raise ValueError(f"recorded GPU entries without their provenance: "
                                 f"{'; '.join(bad[:5])}")
            stale = any(v.get("code") != digests[ns] for _, v in items)
            devices = sorted({f"{v['machine']['device']}, torch {v['machine']['torch']}, "
                              f"CUDA {v['machine']['cuda']}" for _, v in items})
            commits = sorted({v["commit"][:12] for _, v in items})
            for key, v in items:
                t = str(v["twin"])
                if t in entries and entries[t].get("read", True):
                    twins[t] = entries[t].get("compute_seconds") or 0.0
            out[ns] = dict(entries=len(items), candidates=0, changed=stale, chosen=[],
                           seconds=0.0, unknown_cost=False, gpu=True,
                           skipped=(f"{GPU_MEASURED[ns]}: recorded on {'; '.join(devices)}, "
                                    f"provenance checked; "
                                    + (f"the code changed since the GPU run (commit "
                                       f"{', '.join(commits)}): its numbers are that code's"
                                       if stale else "the code is the GPU run's")
                                    + "; its reduced-width CPU twins are re-measured instead"))
            continue
        cands = [(key, v) for key, v in items if v.get("read", True)]
        skipped = None
        if cpu is not None and ns in ROUNDING_AMPLIFIED:
            here = [(key, v) for key, v in cands if recorded_machine(v) == cpu
                    or f"{ns}/{key}" in references]
            if cands and not here:
                cpus = sorted({str((v.get("machine") or {}).get("cpu")) for _, v in cands})
                skipped = (f"recorded on {', '.join(cpus)}, this is {cpu}: "
                           f"{ROUNDING_AMPLIFIED[ns]}, so only that CPU can compare, or this "
                           f"one against a reference made here by the recording's code "
                           f"(make cpu-reference)")
            cands = here
        changed = any(v.get("code") != digests[ns] for _, v in items)
        known = sorted((v["compute_seconds"], key) for key, v in cands
                       if (v.get("compute_seconds") or 0) > 0)
        if known:
            first = [known[0]]
        elif cands:
            first = [(None, cands[0][0])]
        else:
            first = []
        out[ns] = dict(entries=len(items), candidates=len(cands), changed=changed,
                       chosen=[key for _, key in first],
                       seconds=sum(s for s, _ in first if s is not None),
                       unknown_cost=bool(first) and first[0][0] is None,
                       **({"skipped": skipped} if skipped else {}))
        if changed:
            extra += [(s, ns, key) for s, key in known[1:]]
    spent = sum(v["seconds"] for v in out.values())
    # the GPU entries' twins: the cheapest always, more within GPU_TWIN_BUDGET
    twin_spent = 0.0
    for i, (sec, t) in enumerate(sorted((s, t) for t, s in twins.items())):
        if i and twin_spent + sec > GPU_TWIN_BUDGET:
            break
        ns, key = t.split("/")
        if ns not in out or key in out[ns]["chosen"]:
            continue
        twin_spent += sec
        out[ns]["chosen"].append(key)
        out[ns]["seconds"] += sec
        out[ns].setdefault("twins", []).append(key)
        spent += sec
        extra = [x for x in extra if (x[1], x[2]) != (ns, key)]
    for s, ns, key in sorted(extra):
        if spent + s > budget:
            break
        spent += s
        out[ns]["chosen"].append(key)
        out[ns]["seconds"] += s
    keys = [f"{ns}/{key}" for ns in sorted(out) for key in out[ns]["chosen"]]
    return dict(keys=keys, budget=budget, seconds=round(spent, 1), namespaces=out)


def verification_summary(the_plan: dict, events: list[dict]) -> tuple[list[str], list[str]]:
    """One line per namespace (entries read from recorded/, re-measured, agreeing, whether its
    code changed since recording) and the problems: a disagreement, or a chosen entry that no
    chapter asked for (so its namespace went unchecked)."""
    n = defaultdict(Counter)
    seen = defaultdict(set)
    by_parts = defaultdict(list)
    by_ref = defaultdict(set)
    for e in events:
        n[e["ns"]][e["event"]] += 1
        if e["event"] in ("verified", "mismatch") and e.get("reference"):
            by_ref[e["ns"]].add(e["reference"])
        if e["event"] in ("verified", "mismatch"):
            seen[e["ns"]].add(e["key"])
            if "parts" in e:
                by_parts[e["ns"]].append(f"{e.get('sampled', '?')} of {e['parts']}")
    lines, problems = [], []
    for ns, p in sorted(the_plan["namespaces"].items()):
        c = n[ns]
        got = c["verified"] + c["mismatch"]
        sampled = f" (by parts: {', '.join(by_parts[ns])})" if by_parts[ns] else ""
        if by_ref[ns]:
            sampled += (f" (against the CPU reference of {', '.join(sorted(by_ref[ns]))}, made "
                        "by the recording's code)")
        lines.append(
            f"{ns:22s} {p['entries']:3d} recorded, {c['recorded']:3d} read, {got:2d} re-measured"
            f"{sampled}, {c['verified']:2d} agreeing; code "
            + ("changed since recording" + (", and its sample agrees" if got and not c['mismatch']
                                            else "") if p["changed"] else "unchanged")
            + (f"; not re-measured: {p['skipped']}" if p.get("skipped") else ""))
        if c["mismatch"]:
            problems.append(f"{ns}: {c['mismatch']} re-measured entries disagree with recorded/ "
                            f"{'(or this CPU reference) ' if by_ref[ns] else ''}"
                            f"(the chapter's error names the key): make record-new "
                            f"REMEASURE={ns}")
        missing = [k for k in p["chosen"] if k[:16] not in seen[ns]]
        if missing:
            problems.append(f"{ns}: chosen entries {[k[:16] for k in missing]} were asked for by "
                            "no chapter, so it went unchecked; a run that reads recorded/ in "
                            "full (make record-new) drops entries no chapter reads")
    return lines, problems
