"""Machine identity and CPU references: which machine an entry was measured on, and the
references that let another CPU check an entry whose computation amplifies float rounding.

A :data:`ROUNDING_AMPLIFIED` namespace can be re-measured only on the CPU that recorded it; a
*CPU reference* is one of its recorded entries computed again on another machine by the very
code that recorded it (``python -m posbias_nb.provenance cpu-reference``, ``make
cpu-reference``: :mod:`posbias_nb.provenance.reference` runs that commit in a git worktree), so
that ``make test`` there compares today's code with it.  The references live beside the
recorded entries, ``recorded/by-cpu`` for ``recorded/cache``
(:func:`posbias_nb.cache.references_dir`): ``<machine slug>/<namespace>/<key>.npz`` and
``REFERENCES.json`` (``{"entries": {"ns/key": {machine_id: provenance}}}``).
"""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Mapping

__all__ = ["ROUNDING_AMPLIFIED", "TWINS", "cpu_model", "machine_id", "machine_slug", "recorded_machine",
           "reference_index", "reference_holds", "reference_file", "valid_reference",
           "prune_references"]

#: Namespaces whose computation amplifies float rounding: measured on another CPU (other
#: kernels, other rounding), the same code gives other numbers, so only a re-measurement on the
#: CPU that recorded an entry can tell a change of the code from the machine.  On any other CPU,
#: :func:`posbias_nb.provenance.plan.verification_plan` re-measures none of their entries and
#: says so.  Found on an Intel Xeon: the cheapest ``train`` entry, recorded on an AMD EPYC by the
#: same training code, came back with held-out answers flipped (an accuracy 0.0625 apart,
#: kernels 0.038 apart).
ROUNDING_AMPLIFIED = {
    "train": "training amplifies float rounding over its optimizer steps",
}

#: For a :data:`ROUNDING_AMPLIFIED` namespace, the namespace of its float64 twins: the same
#: training loop in float64 over fewer steps, whose deviation under another CPU's kernels is
#: measured (``bench/bench_twin_rounding.py``) and bounded by its own tolerance
#: (:data:`posbias_nb.provenance.verify.NAMESPACE_RTOL`), so every CPU re-measures it: a
#: changed training step fails there even where the float32 entries cannot be compared.
TWINS = {"train": "train-twin"}


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


def machine_slug(machine: str) -> str:
    """A folder name for :func:`machine_id`'s string."""
    return re.sub(r"[^A-Za-z0-9]+", "-", machine).strip("-")


def recorded_machine(entry: Mapping | None) -> str | None:
    """The machine a recorded entry names: its full :func:`machine_id` where it records one
    (``machine["id"]``), else only its CPU's name (entries recorded before the id was kept).
    A name alone does not identify a machine as far as float rounding goes: two generations of
    "AMD EPYC" trained the same ``train`` entry to numbers 0.007 apart, so a name-only entry
    never counts as recorded on a machine that passes its full id."""
    m = (entry or {}).get("machine") or {}
    return m.get("id") or m.get("cpu")


def reference_index(folder: Path | None) -> dict:
    """``REFERENCES.json`` of the references' ``folder`` (``recorded/by-cpu``):
    ``{"entries": {...}}``, empty where there is none."""
    f = None if folder is None else Path(folder) / "REFERENCES.json"
    if f is None or not f.exists():
        return {"entries": {}}
    return json.loads(f.read_text())


def reference_holds(entry: Mapping | None, ref: Mapping | None, cpu: str) -> str | None:
    """Why the CPU reference ``ref`` (this machine's item of ``REFERENCES.json``) cannot stand
    for the recorded entry ``entry`` (its item of ``MANIFEST.json``) on a machine whose CPU is
    ``cpu``, or None where it can: the entry must exist and have been recorded on another CPU
    (on its own CPU an entry is compared with itself), and the reference must have been made by
    the entry's commit and code (after a re-recording, an older reference is stale).  The one
    check the plan (:func:`posbias_nb.provenance.plan.verification_plan`) and the run
    (:func:`valid_reference`, read by :func:`posbias_nb.cache.cached`) both apply."""
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


def reference_file(folder: Path, namespace: str, k: str, machine: str | None = None) -> Path:
    """Where this machine's (or ``machine``'s) reference of ``namespace/k`` lives under the
    references' ``folder``."""
    return Path(folder) / machine_slug(machine or machine_id()) / namespace / f"{k}.npz"


@functools.lru_cache(maxsize=4)
def _json_file(path: str, mtime: float) -> dict:
    return json.loads(Path(path).read_text())


def valid_reference(recorded: Path | None, namespace: str, k: str) -> bool:
    """Whether this machine holds a reference of ``namespace/k`` that :func:`reference_holds`
    accepts against ``MANIFEST.json`` beside the ``recorded`` folder (``recorded/cache``; its
    references in ``recorded/by-cpu``)."""
    if recorded is None:
        return False
    man = Path(recorded).parent / "MANIFEST.json"
    idx = Path(recorded).parent / "by-cpu" / "REFERENCES.json"
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
