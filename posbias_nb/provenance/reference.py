"""Make this machine's CPU reference of a recorded entry whose computation amplifies float rounding
(``make cpu-reference``; ``bench/cpu_reference.py`` takes the same arguments)::

    python -m posbias_nb.provenance cpu-reference [--recorded recorded] [--key NAMESPACE/KEY]

Training amplifies float rounding (:data:`~posbias_nb.provenance.machine.ROUNDING_AMPLIFIED`):
on a CPU other than the one that recorded an entry, the same code gives other numbers, so
``make test`` there cannot tell a change of the code from the machine by comparing with the
record.  A *CPU reference* is the recorded entry computed again on this machine by **the code
that recorded it**: the entry's recording commit checked out in a git worktree, its code digest
there checked against the one recorded with the entry
(:func:`~posbias_nb.provenance.code.code_digest` of that commit's files, by today's rule), run in a fresh process
with an empty cache and nothing recorded read.  ``make test`` on this machine then re-measures
the entry with today's code and compares it with the reference
(:func:`~posbias_nb.provenance.verify.against_reference`), while the chapter still gets the
recorded numbers.

Default: in each such namespace, the entry that ``make test`` would re-measure (the cheapest
it reads, :func:`~posbias_nb.provenance.plan.verification_plan`), unless it was recorded on this
CPU or has a reference here already.  Writes ``recorded/by-cpu/<machine>/<namespace>/<key>.npz``
and its provenance in ``recorded/by-cpu/REFERENCES.json``: the commit, the code digest, the
date, the machine, the seconds, and how far the reference lies from the record (why it is
needed).  A reference made by any other code is refused.

Which calls may have made an entry of a namespace is the studies' knowledge, not this room's:
the command passes it in (``finders``, :data:`posbias_nb.provenance_cli.FINDERS`).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable, Mapping

from . import code, entries, machine, plan, verify

__all__ = ["Finder", "find_arguments", "make", "main"]

ROOT = Path(__file__).resolve().parents[2]

#: For a namespace: the calls that may have made an entry (keyword arguments), the key a call
#: gives (today's code: a key ``make test`` reads is today's key), and the statement that
#: computes it in the recording commit's code (``kw``: the call's keyword arguments).
Finder = tuple[Callable[[], Iterable[dict]], Callable[[dict], str], str]

def find_arguments(finders: Mapping[str, Finder], ns: str, k: str) -> dict:
    """The keyword arguments whose cache key is ``k`` in namespace ``ns``."""
    if ns not in finders:
        raise ValueError(f"no CPU reference can be made for namespace {ns!r}: known "
                         f"{sorted(finders)}")
    args, keyof, _ = finders[ns]
    for kw in args():
        if keyof(kw) == k:
            return kw
    raise ValueError(f"no call of the chapters gives key {k} in {ns!r}")


def make(recorded: Path, ns: str, k: str, entry: dict, finders: Mapping[str, Finder]) -> dict:
    """This machine's reference of ``ns/k`` (its ``MANIFEST.json`` item ``entry``), made by the
    entry's recording commit in a git worktree; returns its provenance for
    ``REFERENCES.json``."""
    kw = find_arguments(finders, ns, k)
    commit, digest = entry.get("commit"), entry.get("code")
    if not commit or not digest:
        raise ValueError(f"{ns}/{k} has no recorded commit and code digest to reproduce")
    here = machine.machine_id()
    rec_path = recorded / "cache" / ns / f"{k}.npz"
    rec = entries.read_entry(rec_path) if rec_path.is_file() else None
    if rec is None:
        raise ValueError(f"{rec_path} is missing or corrupt: nothing to make a reference of")
    with tempfile.TemporaryDirectory() as tmp:
        wt = Path(tmp) / "tree"
        got = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach",
                              str(wt), commit], capture_output=True, text=True)
        if got.returncode != 0:
            raise ValueError(f"git worktree add {commit[:12]} failed (a shallow clone lacks the "
                             f"recording commit: git fetch --unshallow): {got.stderr.strip()}")
        try:
            env = {x: v for x, v in os.environ.items() if not x.startswith("POSBIAS_")}
            env.update(POSBIAS_CACHE_DIR=str(Path(tmp) / "cache"), HF_HUB_OFFLINE="1",
                       PYTHONPATH=str(wt))
            # the worktree's code digested by today's rule (the one the manifest's digests
            # follow), from the roots that commit declares (or had: code.candidate_roots)
            files = {str(f.relative_to(wt / "posbias_nb")): f.read_text()
                     for f in (wt / "posbias_nb").rglob("*.py")}
            there = [code.code_digest(ns, files, r) for r in code.candidate_roots(ns, files)]
            if digest not in there:
                raise ValueError(f"{ns}/{k}: the code of commit {commit[:12]} digests to "
                                 f"{', '.join(t[:12] for t in there) or 'nothing'}, not the "
                                 f"recorded {digest[:12]}: refused")
            prog = ("import json, sys, time, posbias_nb\n"
                    f"assert posbias_nb.__file__.startswith({str(wt)!r}), posbias_nb.__file__\n"
                    "kw = json.loads(sys.argv[1]); t = time.perf_counter()\n"
                    f"{finders[ns][2]}\n"
                    "import torch; print(torch.get_num_threads(), time.perf_counter() - t)\n")
            out = subprocess.run([sys.executable, "-c", prog, json.dumps(kw)], cwd=wt, env=env,
                                 check=True, capture_output=True, text=True)
            threads, seconds = int(out.stdout.split()[-2]), float(out.stdout.split()[-1])
            made = Path(tmp) / "cache" / ns / f"{k}.npz"
            if not made.exists():
                raise ValueError(f"{ns}/{k}: commit {commit[:12]} stored no entry of that key "
                                 "(its key function differs)")
            arrays = entries.read_entry(made)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(wt)],
                           check=False)
    rel = Path(machine.machine_slug(here)) / ns / f"{k}.npz"
    entries.write_entry(recorded / "by-cpu" / rel, arrays)
    import torch

    return dict(file=str(rel), commit=commit, code=digest,
                recorded=_dt.date.today().isoformat(), compute_seconds=round(seconds, 2),
                machine=dict(cpu=machine.cpu_model(), capability=here.split(" / ")[-1],
                             cpus=os.cpu_count(), threads=threads,
                             python=platform.python_version(), torch=torch.__version__),
                vs_record=verify.agree(rec, arrays)[:3])


def main(argv=None, finders: Mapping[str, Finder] | None = None, prog: str | None = None) -> int:
    """The command the module docstring shows; exit status 2 on an entry it cannot make."""
    finders = {} if finders is None else finders
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--recorded", default=str(ROOT / "recorded"))
    ap.add_argument("--key", action="append", default=None,
                    help="NAMESPACE/KEY (default: the entry make test would re-measure)")
    a = ap.parse_args(argv)
    recorded = Path(a.recorded)
    manifest = json.loads((recorded / "MANIFEST.json").read_text())
    entries = manifest["entries"]
    index = machine.reference_index(recorded / "by-cpu")
    here = machine.machine_id()
    if a.key:
        keys = a.key
    else:
        digests = {ns: code.code_digest(ns) for ns in code.NAMESPACE_CODE}
        the_plan = plan.verification_plan({"entries": {
            k: v for k, v in entries.items() if k.split("/")[0] in machine.ROUNDING_AMPLIFIED}},
            digests, budget=0)  # no CPU given: the cheapest entry of each
        # unless recorded on this CPU or holding a reference here that still stands (a stale
        # one, made for an earlier recording, is made anew)
        keys = [k for k in the_plan["keys"]
                if machine.recorded_machine(entries[k]) != here
                and machine.reference_holds(entries[k], index["entries"].get(k, {}).get(here),
                                            here) is not None]
    if not keys:
        print(f"cpu_reference: nothing to make on {here}")
        return 0
    try:
        for k in keys:
            if k not in entries:
                raise ValueError(f"{k} is not a recorded entry")
            ns, key = k.split("/")
            if ns not in machine.ROUNDING_AMPLIFIED:
                raise ValueError(f"{ns!r} does not amplify rounding: its recorded entries are "
                                 "compared on any CPU")
            if machine.recorded_machine(entries[k]) == here:
                raise ValueError(f"{k} was recorded on this machine: compared with the record")
            t0 = time.perf_counter()
            prov = make(recorded, ns, key, entries[k], finders)
            index["entries"].setdefault(k, {})[here] = prov
            (recorded / "by-cpu" / "REFERENCES.json").write_text(
                json.dumps(index, indent=1, sort_keys=True) + "\n")
            print(f"cpu_reference: {k[:40]} on {here}: made by {prov['commit'][:12]} in "
                  f"{prov['compute_seconds']:.1f} s ({time.perf_counter() - t0:.0f} s in all); "
                  f"against the record: {'; '.join(prov['vs_record'] or []) or 'agrees'}")
    except (ValueError, subprocess.CalledProcessError) as e:
        err = getattr(e, "stderr", None)
        print(f"cpu_reference: {e}" + (f"\n{err[-2000:]}" if err else ""), file=sys.stderr)
        return 2
    return 0
