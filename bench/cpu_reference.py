"""Make this machine's CPU reference of a recorded entry whose computation amplifies float rounding.

    python bench/cpu_reference.py [--recorded recorded] [--key NAMESPACE/KEY]   (make cpu-reference)

Training amplifies float rounding (:data:`posbias_nb.cache.ROUNDING_AMPLIFIED`): on a CPU other
than the one that recorded an entry, the same code gives other numbers, so ``make test`` there
cannot tell a change of the code from the machine by comparing with the record.  A *CPU
reference* is the recorded entry computed again on this machine by **the code that recorded
it**: the entry's recording commit checked out in a git worktree, its code digest there checked
against the one recorded with the entry (:func:`posbias_nb.cache.code_digest` of that commit's
files), run in a fresh process with an empty cache and nothing recorded read.  ``make test``
on this machine then re-measures the entry with today's code and compares it with the reference
(:func:`posbias_nb.cache.agree`), while the chapter still gets the recorded numbers.

Default: in each such namespace, the entry that ``make test`` would re-measure (the cheapest
it reads, :func:`posbias_nb.cache.verification_plan`), unless it was recorded on this CPU or
has a reference here already.  Writes ``recorded/by-cpu/<machine>/<namespace>/<key>.npz`` and
its provenance in ``recorded/by-cpu/REFERENCES.json``: the commit, the code digest, the date,
the machine, the seconds, and how far the reference lies from the record (why it is needed).
A reference made by any other code is refused.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import itertools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _train_arguments():
    """Every ``train_run`` call the chapters make: the chapter's configuration with each arm
    (residual scales among them), seed and depth of its design."""
    from posbias_nb.experiments import remedies as r

    d = r.DESIGN.spec
    for arm, seed, layers in itertools.product(r.ARMS, range(max(d["seeds"], 10)),
                                               d["depths"]):
        yield dict(r.CHAPTER, **r.ARMS[arm], seed=seed, layers=layers)


def _train_key(kw) -> str:
    from posbias_nb import cache
    from posbias_nb.experiments import remedies as r

    return cache.key("train", r._run_params(**kw))


#: For each namespace of ROUNDING_AMPLIFIED: the calls that may have made an entry, the key a
#: call gives (today's code: a key ``make test`` reads is today's key), and the statement that
#: computes it in the recording commit's code (``kw``: the call's keyword arguments).
FINDERS = {
    "train": (_train_arguments, _train_key,
              "from posbias_nb.experiments.remedies import train_run; train_run(**kw)"),
}


def find_arguments(ns: str, k: str) -> dict:
    """The keyword arguments whose cache key is ``k`` in namespace ``ns``."""
    if ns not in FINDERS:
        raise ValueError(f"no CPU reference can be made for namespace {ns!r}: known "
                         f"{sorted(FINDERS)}")
    args, keyof, _ = FINDERS[ns]
    for kw in args():
        if keyof(kw) == k:
            return kw
    raise ValueError(f"no call of the chapters gives key {k} in {ns!r}")


def make(recorded: Path, ns: str, k: str, entry: dict) -> dict:
    from posbias_nb import cache

    kw = find_arguments(ns, k)
    commit, code = entry.get("commit"), entry.get("code")
    if not commit or not code:
        raise ValueError(f"{ns}/{k} has no recorded commit and code digest to reproduce")
    machine = cache.machine_id()
    rec_path = recorded / "cache" / ns / f"{k}.npz"
    rec = cache._read(rec_path) if rec_path.is_file() else None
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
            # the digest as the recording commit's own cache module computes it; a commit older
            # than the digest was given its digest afterwards from its files (record_measurements
            # --backfill-code), by today's rule
            there = subprocess.run(
                [sys.executable, "-c", "import sys; from posbias_nb import cache; "
                 "f = getattr(cache, 'code_digest', None); "
                 "print(f(sys.argv[1]) if f else 'none')", ns], cwd=wt, env=env, check=True,
                capture_output=True, text=True).stdout.split()[-1]
            if there == "none":
                there = cache.code_digest(ns, {
                    str(f.relative_to(wt / "posbias_nb")): f.read_text()
                    for f in (wt / "posbias_nb").rglob("*.py")})
            if there != code:
                raise ValueError(f"{ns}/{k}: the code of commit {commit[:12]} digests to "
                                 f"{there[:12]}, not the recorded {code[:12]}: refused")
            prog = ("import json, sys, time, posbias_nb\n"
                    f"assert posbias_nb.__file__.startswith({str(wt)!r}), posbias_nb.__file__\n"
                    "kw = json.loads(sys.argv[1]); t = time.perf_counter()\n"
                    f"{FINDERS[ns][2]}\n"
                    "import torch; print(torch.get_num_threads(), time.perf_counter() - t)\n")
            out = subprocess.run([sys.executable, "-c", prog, json.dumps(kw)], cwd=wt, env=env,
                                 check=True, capture_output=True, text=True)
            threads, seconds = int(out.stdout.split()[-2]), float(out.stdout.split()[-1])
            made = Path(tmp) / "cache" / ns / f"{k}.npz"
            if not made.exists():
                raise ValueError(f"{ns}/{k}: commit {commit[:12]} stored no entry of that key "
                                 "(its key function differs)")
            arrays = cache._read(made)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(wt)],
                           check=False)
    rel = Path(cache.machine_slug(machine)) / ns / f"{k}.npz"
    cache.write_file(recorded / "by-cpu" / rel, arrays)
    import torch

    return dict(file=str(rel), commit=commit, code=code,
                recorded=_dt.date.today().isoformat(), compute_seconds=round(seconds, 2),
                machine=dict(cpu=cache.cpu_model(), capability=machine.split(" / ")[-1],
                             cpus=os.cpu_count(), threads=threads,
                             python=platform.python_version(), torch=torch.__version__),
                vs_record=cache.agree(rec, arrays)[:3])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recorded", default=str(ROOT / "recorded"))
    ap.add_argument("--key", action="append", default=None,
                    help="NAMESPACE/KEY (default: the entry make test would re-measure)")
    a = ap.parse_args(argv)
    from posbias_nb import cache

    recorded = Path(a.recorded)
    manifest = json.loads((recorded / "MANIFEST.json").read_text())
    entries = manifest["entries"]
    index = cache.reference_index(recorded / "by-cpu")
    machine = cache.machine_id()
    if a.key:
        keys = a.key
    else:
        digests = {ns: cache.code_digest(ns) for ns in cache.NAMESPACE_CODE}
        plan = cache.verification_plan({"entries": {
            k: v for k, v in entries.items() if k.split("/")[0] in cache.ROUNDING_AMPLIFIED}},
            digests, budget=0)  # no CPU given: the cheapest entry of each
        # unless recorded on this CPU or holding a reference here that still stands (a stale
        # one, made for an earlier recording, is made anew)
        keys = [k for k in plan["keys"]
                if cache.recorded_machine(entries[k]) != machine
                and cache.reference_holds(entries[k], index["entries"].get(k, {}).get(machine),
                                          machine) is not None]
    if not keys:
        print(f"cpu_reference: nothing to make on {machine}")
        return 0
    try:
        for k in keys:
            if k not in entries:
                raise ValueError(f"{k} is not a recorded entry")
            ns, key = k.split("/")
            if ns not in cache.ROUNDING_AMPLIFIED:
                raise ValueError(f"{ns!r} does not amplify rounding: its recorded entries are "
                                 "compared on any CPU")
            if cache.recorded_machine(entries[k]) == machine:
                raise ValueError(f"{k} was recorded on this machine: compared with the record")
            t0 = time.perf_counter()
            prov = make(recorded, ns, key, entries[k])
            index["entries"].setdefault(k, {})[machine] = prov
            (recorded / "by-cpu" / "REFERENCES.json").write_text(
                json.dumps(index, indent=1, sort_keys=True) + "\n")
            print(f"cpu_reference: {k[:40]} on {machine}: made by {prov['commit'][:12]} in "
                  f"{prov['compute_seconds']:.1f} s ({time.perf_counter() - t0:.0f} s in all); "
                  f"against the record: {'; '.join(prov['vs_record'] or []) or 'agrees'}")
    except (ValueError, subprocess.CalledProcessError) as e:
        err = getattr(e, "stderr", None)
        print(f"cpu_reference: {e}" + (f"\n{err[-2000:]}" if err else ""), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
