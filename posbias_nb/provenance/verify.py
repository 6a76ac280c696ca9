"""Verification of recorded entries: a re-measurement agrees with its record (:func:`agree`),
whole, by a sample of its parts (:func:`by_parts`), or against this CPU's reference
(:func:`against_reference`).

:func:`posbias_nb.cache.cached` calls :func:`by_parts` and :func:`against_reference` from its
one hook for recorded entries, and :func:`agree` where a verified namespace is computed whole
(:func:`posbias_nb.cache.store`); a disagreement raises :class:`RecordedMismatch`, naming the
namespace, the key and the command that re-records.
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
import time
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from . import code
from .machine import machine_id

__all__ = ["RecordedMismatch", "MACHINE_FIELDS", "RTOL", "NAMESPACE_RTOL", "rtol_for",
           "rounding_tolerance", "twin_rounding", "agree", "VERIFY_PARTS", "part_sample", "one_part",
           "PART_FIELDS", "part_kinds", "by_parts", "against_reference"]


class RecordedMismatch(RuntimeError):
    """A measurement computed anew disagrees with its recorded entry."""


#: Fields that measure the machine, not the computation (wall seconds, peak memory): a recorded
#: entry and its re-measurement must both have them, but their values are not compared.  An
#: array name or JSON key counts when its last component (after ``#``, ``/`` or ``.``) is one.
MACHINE_FIELDS = ("seconds", "peak_mib", "peak_kb", "wall", "wall_s", "latency_s")


#: The tolerance of :func:`agree` where a namespace declares none: the same code on another
#: machine rounds differently, a changed computation moves numbers by far more.
RTOL = 1e-3


def rounding_tolerance(rounding: float, headroom: float = 100.0) -> float:
    """A tolerance derived from measured rounding, not guessed: ``headroom`` times the largest
    deviation another CPU's kernels gave a computation, rounded up to a power of ten (the rule
    behind the float64 twins' tolerance and the dense ranking's,
    ``bench/bench_twin_rounding.py`` and ``bench/bench_rank_rounding.py``).

    >>> rounding_tolerance(5.8e-7)
    0.0001
    """
    import math

    if not (math.isfinite(rounding) and rounding >= 0):
        raise ValueError(f"a rounding deviation must be a finite number >= 0, got {rounding!r}")
    return 10.0 ** math.ceil(math.log10(max(rounding, 1e-300) * headroom))


@functools.lru_cache(maxsize=1)
def twin_rounding() -> dict:
    """The measurement behind the float64 twins' tolerance (``bench/bench_twin_rounding.py``,
    stored in ``posbias_nb/data/twin_rounding.json``): the twin's deviation under other CPUs'
    kernels, the tolerance derived from it, and the deviation of deliberate changes of the
    training step."""
    path = Path(__file__).resolve().parents[1] / "data" / "twin_rounding.json"
    return json.loads(path.read_text())


#: Namespaces compared at a tolerance of their own (:func:`rtol_for`): the float64 twins of
#: training (:data:`posbias_nb.provenance.machine.TWINS`), at 100 times the largest deviation
#: another CPU's kernels gave them, rounded up to a power of ten (:func:`twin_rounding`); the
#: value is read when first needed.
NAMESPACE_RTOL: dict[str, Callable[[], float]] = {
    "train-twin": lambda: float(twin_rounding()["tolerance"])}


def rtol_for(namespace: str) -> float:
    """The tolerance :func:`agree` compares ``namespace``'s entries at."""
    got = NAMESPACE_RTOL.get(namespace)
    return RTOL if got is None else got()


def _machine_field(name: str) -> bool:
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


def _json(a: np.ndarray):
    try:
        v = json.loads(str(a[()]))
    except (ValueError, TypeError):
        return None
    return v if isinstance(v, (dict, list)) else None


def agree(recorded: Mapping[str, np.ndarray], fresh: Mapping[str, np.ndarray],
          rtol: float = RTOL) -> list[str]:
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


#: The parts a re-measurement of a recorded entry with :class:`posbias_nb.cache.Parts` computes
#: at least: the first and one chosen by the code digest (:func:`part_sample`), more where the
#: entry declares what distinguishes its parts.
VERIFY_PARTS = 2


#: Arrays of a part (its slice of the recorded entry, ``Parts.take``) whose value, a scalar,
#: sets the part apart: ``slot``, the gold position a prompt or record was measured at (a
#: task's prompts, the calibration's records; the closed-book and oracle prompts are slots -1
#: and -2).  What the record cannot tell (a gold answer of several tokens) the entry declares
#: (:attr:`posbias_nb.cache.Parts.kinds`).
PART_FIELDS = ("slot",)


def part_kinds(rec: Mapping[str, np.ndarray], parts) -> list[dict] | None:
    """What sets each part of the recorded entry ``rec`` apart, for :func:`part_sample`: the
    :data:`PART_FIELDS` its slice of the record holds, with what ``parts.kinds()`` declares;
    None where neither says anything (every part alike)."""
    declared = parts.kinds() if getattr(parts, "kinds", None) is not None else None
    out = []
    for i in range(parts.count):
        got = {}
        for n, v in parts.take(rec, i).items():
            if n in PART_FIELDS and np.asarray(v).shape == ():
                got[n] = _hashable(np.asarray(v))
        out.append({**got, **(dict(declared[i]) if declared is not None else {})})
    return out if any(out) else None


def _hashable(v):
    return v.item() if hasattr(v, "item") and getattr(v, "shape", None) == () else v


def part_sample(namespace: str, k: str, count: int, kinds=None) -> list[int]:
    """The parts of entry ``k`` that a re-measurement computes: the first, and one chosen by the
    SHA-256 of the namespace's code digest and the key, so the same code samples the same parts
    (bit-for-bit reruns) and a change of the code samples another.

    ``kinds`` (:func:`part_kinds`): one mapping a part, what sets its code path apart, e.g. for
    a task's prompts ``{"slot": 3, "several tokens": True}`` (its gold slot, or closed-book or
    oracle; whether a gold answer takes more than one token).  The rule: the sample then
    holds, for **every value of every feature**, at least one part that has it (a change that
    only touches answers of several tokens, or one slot, meets a part it touches): after the
    two above, parts are added one at a time, each the one that has the most values not yet
    covered, ties broken by the same digest, so the sample stays small (not every combination
    of values) and the same code samples the same parts."""
    if count < 1:
        raise ValueError(f"an entry of {count} parts cannot be sampled")
    if count == 1:
        return [0]
    seed = f"{code.code_digest(namespace)}/{k}"
    h = int(hashlib.sha256(seed.encode()).hexdigest(), 16)
    chosen = [0, 1 + h % (count - 1)][:VERIFY_PARTS]
    if kinds is None:
        return chosen
    values = [{(str(f), _hashable(v)) for f, v in dict(kind).items()} for kind in kinds]
    if len(values) != count:
        raise ValueError(f"{len(values)} kinds declared for an entry of {count} parts")
    missing = set().union(*values) - set().union(*(values[i] for i in chosen))
    order = sorted(range(count), key=lambda i: hashlib.sha256(f"{seed}/{i}".encode()).digest())
    while missing:
        best = max((i for i in order if i not in chosen), key=lambda i: len(values[i] & missing))
        chosen.append(best)
        missing -= values[best]
    return chosen


def _asarrays(m: Mapping) -> dict[str, np.ndarray]:
    return {n: np.asarray(v) for n, v in m.items()}


def one_part(namespace: str, k: str, count: int) -> list[int]:
    """The sample of an entry of ``count`` parts in a namespace verified under today's code
    (its code unchanged since recording, or stamped:
    :func:`posbias_nb.provenance.plan.verification_plan` marks its keys ``:1``): one part, chosen by the SHA-256 of the code digest
    and the key.  Its code paths were all reached when it was recorded or stamped; what is left
    to check is the machine and the data, which one part does."""
    if count < 1:
        raise ValueError(f"an entry of {count} parts cannot be sampled")
    h = int(hashlib.sha256(f"{code.code_digest(namespace)}/{k}/one".encode()).hexdigest(), 16)
    return [h % count]


def by_parts(namespace: str, k: str, rec: Mapping[str, np.ndarray], parts, log: Callable,
             one: bool = False) -> None:
    """Compute the sampled parts (:func:`part_sample`, one of every kind :func:`part_kinds`
    finds; with ``one``, :func:`one_part`) of the recorded entry ``rec`` anew (``parts``: a
    :class:`posbias_nb.cache.Parts`) and compare each with its part of the record;
    ``log(event, namespace, key, seconds, **extra)`` writes the cache events (one
    ``computed-part`` a part, then ``verified`` or ``mismatch``).  :class:`RecordedMismatch`
    names the part on a disagreement."""
    chosen = one_part(namespace, k, parts.count) if one else \
        part_sample(namespace, k, parts.count, part_kinds(rec, parts))
    diff: list[str] = []
    for i in chosen:
        t0 = time.perf_counter()
        fresh = _asarrays(parts.compute(i))
        log("computed-part", namespace, k, time.perf_counter() - t0, part=i, parts=parts.count)
        diff = agree(_asarrays(parts.take(rec, i)), fresh, rtol_for(namespace))
        if diff:
            break
    log("mismatch" if diff else "verified", namespace, k, parts=parts.count, sampled=len(chosen))
    if diff:
        raise RecordedMismatch(
            f"recorded namespace {namespace!r}, key {k}, part {i} of {parts.count}: computed "
            f"now, it disagrees with its recorded value: {'; '.join(diff[:3])}. The code that "
            f"computes it changed; if the change is meant, re-record the namespace: make "
            f"record-new REMEASURE={namespace}")


def against_reference(namespace: str, k: str, ref: Mapping[str, np.ndarray], compute: Callable,
                      log: Callable) -> None:
    """Compute a recorded entry of a :data:`~posbias_nb.provenance.machine.ROUNDING_AMPLIFIED`
    namespace anew on a CPU other than the recording one and compare it with this machine's
    reference ``ref`` (made here by the code that recorded the entry); ``log`` as in
    :func:`by_parts`.  Where they agree, the caller returns the recorded entry (the book prints
    the recorded numbers on every machine)."""
    t0 = time.perf_counter()
    fresh = _asarrays(compute())
    log("computed", namespace, k, time.perf_counter() - t0)
    diff = agree(ref, fresh, rtol_for(namespace))
    log("mismatch" if diff else "verified", namespace, k, reference=machine_id())
    if diff:
        raise RecordedMismatch(
            f"recorded namespace {namespace!r}, key {k}: computed now on {machine_id()}, it "
            f"disagrees with this CPU's reference (made here by the code that recorded the "
            f"entry; 'recorded' below is the reference): {'; '.join(diff[:3])}. The code that "
            f"computes it changed; if the change is meant, re-record the namespace on the CPU "
            f"that recorded it (make record-new REMEASURE={namespace}), then make cpu-reference "
            f"here")
