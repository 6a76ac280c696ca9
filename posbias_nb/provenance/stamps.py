"""Verification stamps: what a run that re-measured a namespace under new code found, kept.

A namespace whose code changed since its entries were recorded is sampled in full by ``make
test`` (:func:`posbias_nb.provenance.plan.verification_plan`).  Where that sample agrees, the
run writes a **stamp** into ``recorded/STAMPS.json`` (a lock file the next commit carries): the
namespace, today's code digest, the digest of its recorded entries in the manifest, the entries
and parts it re-measured, the machine, the date and the commit.  The plan then treats the
namespace as verified under that code: it re-measures its cheapest entry, as for a namespace
whose code never changed.  A code change after the stamp moves the digest, the stamp no longer
vouches, and the namespace is sampled in full again -- unless today's code is the stamped code
less statements nothing it runs needs (a page's helper moved out to a module that computes
nothing): such a stamp still vouches (:func:`narrowed`), and the summary says so.

What a stamp cannot vouch for is refused, by :func:`problems` (``plan`` prints one line and
exits 2): a stamp whose manifest digest differs from the namespace's entries today (they were
re-recorded, or the stamp was copied from elsewhere), and a stamp whose commit is not an
ancestor of this checkout's HEAD (another branch's code).  ``make record`` drops the stamps of
the namespaces it re-records (:func:`drop`).
"""
from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Callable, Mapping

__all__ = ["FILE", "manifest_digest", "read", "write", "problems", "unverifiable", "vouching",
           "narrowed", "new_stamps", "drop", "is_ancestor"]

#: The stamps' file, beside ``MANIFEST.json`` in ``recorded/``.
FILE = "STAMPS.json"
ROOT = Path(__file__).resolve().parents[2]


def manifest_digest(manifest: Mapping, namespace: str) -> str:
    """SHA-256 of the namespace's recorded entries as the manifest lists them (key, commit,
    size, code digest): a re-recorded entry moves it."""
    ents = {k: [v.get("commit"), v.get("bytes"), v.get("code")]
            for k, v in manifest.get("entries", {}).items() if k.split("/")[0] == namespace}
    return hashlib.sha256(json.dumps(ents, sort_keys=True).encode()).hexdigest()


def read(recorded: Path) -> dict:
    """``{namespace: stamp}`` of ``recorded/STAMPS.json``; empty where there is none."""
    f = Path(recorded) / FILE
    if not f.exists():
        return {}
    got = json.loads(f.read_text())
    if not isinstance(got, dict) or not isinstance(got.get("stamps"), dict):
        raise ValueError(f"{f}: not a stamps file (no 'stamps' object)")
    return got["stamps"]


def write(recorded: Path, stamps: Mapping) -> None:
    """Write ``stamps`` (sorted, one namespace a block) to ``recorded/STAMPS.json``."""
    f = Path(recorded) / FILE
    body = {"what": "verification stamps: each namespace's sample re-measured under the code "
                    "digest named and agreeing with recorded/ (posbias_nb.provenance.stamps)",
            "stamps": dict(sorted(stamps.items()))}
    f.write_text(json.dumps(body, indent=1) + "\n")


def is_ancestor(commit: str, root: Path = ROOT) -> bool | None:
    """Whether ``commit`` is an ancestor of (or is) HEAD; None where this checkout cannot tell
    (no git, or a shallow clone that lacks the commit)."""
    try:
        r = subprocess.run(["git", "merge-base", "--is-ancestor", commit, "HEAD"], cwd=root,
                           capture_output=True, text=True)
    except OSError:
        return None
    if r.returncode in (0, 1):
        return r.returncode == 0
    if "not a git repository" in r.stderr:
        return None
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=root,
                             capture_output=True, text=True).stdout.strip() == "true"
    # an unknown commit: not in this history, unless the clone is shallow (it cannot tell)
    return None if shallow else False


def problems(stamps: Mapping, manifest: Mapping,
             ancestor: Callable[[str], bool | None] = is_ancestor) -> list[str]:
    """One line per stamp that cannot vouch: its namespace not recorded, its manifest digest
    not that of the namespace's entries, or its commit not in this checkout's history."""
    out = []
    spaces = {k.split("/")[0] for k in manifest.get("entries", {})}
    for ns, s in sorted(stamps.items()):
        if ns not in spaces:
            out.append(f"stamp of {ns!r}: no such namespace in recorded/MANIFEST.json")
            continue
        if s.get("manifest") != manifest_digest(manifest, ns):
            out.append(f"stamp of {ns!r} ({s.get('date')}): its manifest digest "
                       f"{str(s.get('manifest'))[:12]} is not that of the namespace's recorded "
                       f"entries ({manifest_digest(manifest, ns)[:12]}); delete it from "
                       f"recorded/{FILE} and run make test again")
            continue
        anc = ancestor(str(s.get("commit", "")))
        if anc is False:
            out.append(f"stamp of {ns!r} ({s.get('date')}): commit {str(s.get('commit'))[:12]} "
                       f"is not in this checkout's history (another branch's code); delete it "
                       f"from recorded/{FILE} and run make test again")
    return out


def unverifiable(stamps: Mapping, ancestor: Callable[[str], bool | None] = is_ancestor
                 ) -> list[str]:
    """The namespaces whose stamp's commit this checkout cannot place (no git, a shallow
    clone): such a stamp vouches for nothing here (the plan drops it and says so), and the
    namespace is sampled as changed."""
    return sorted(ns for ns, s in stamps.items() if ancestor(str(s.get("commit", ""))) is None)


def vouching(stamps: Mapping, digests: Mapping[str, str]) -> dict[str, dict]:
    """The stamps made under today's code of their namespace (``digests``: today's code
    digest of each namespace): the namespaces they verify."""
    return {ns: dict(s) for ns, s in stamps.items() if digests.get(ns) == s.get("code")}


def narrowed(stamps: Mapping, digests: Mapping[str, str],
             files_at: Callable[[str], Mapping[str, str] | None]) -> dict[str, dict]:
    """The stamps that vouch for today's code although its digest is not theirs: today's code is
    the stamped code less statements nothing it runs needs
    (:func:`posbias_nb.provenance.code.narrows`; the stamped code read from the stamp's commit,
    ``files_at``, and checked to digest to the stamp's).  ``{namespace: the stamp, its code today's digest, "narrowed": {"from":
    the stamped digest}}``; the plan takes them as it takes any vouching stamp."""
    from . import code

    out = {}
    for ns, s in stamps.items():
        if ns not in digests or digests[ns] == s.get("code") or ns not in code.NAMESPACE_CODE:
            continue
        then = files_at(str(s.get("commit", "")))
        if then is None:
            continue
        for roots in code.candidate_roots(ns, then):
            if code.code_digest(ns, then, roots) == s.get("code") \
                    and code.narrows(ns, then, roots_then=roots):
                out[ns] = {**s, "code": digests[ns], "narrowed": {"from": s.get("code")}}
                break
    return out


def new_stamps(the_plan: Mapping, events: list[dict], manifest: Mapping,
               digests: Mapping[str, str], machine: str, date: str, commit: str) -> dict:
    """The stamps a run earns: every namespace whose code changed since recording, that no
    stamp vouched for, whose sample reached every setting (none ``uncovered``: the budget
    held them all), whose whole sample was re-measured (every chosen entry asked for by a
    chapter) and agreed (no mismatch)."""
    seen: dict[str, dict] = {}
    bad = set()
    for e in events:
        if e["event"] == "mismatch":
            bad.add(e["ns"])
        if e["event"] == "verified":
            d = seen.setdefault(e["ns"], {})
            d[e["key"]] = (f"{e['sampled']} of {e['parts']} parts" if "parts" in e
                           else "whole" if not e.get("reference")
                           else f"against the CPU reference of {e['reference']}")
    out = {}
    for ns, p in the_plan["namespaces"].items():
        if not p.get("changed") or p.get("vouched") or ns in bad or not p["chosen"] \
                or p.get("uncovered"):
            continue
        got = seen.get(ns, {})
        if any(k[:16] not in got for k in p["chosen"]):
            continue
        out[ns] = {"code": digests[ns], "manifest": manifest_digest(manifest, ns),
                   "entries": {k[:16]: got[k[:16]] for k in p["chosen"]},
                   "machine": machine, "date": date, "commit": commit}
    return out


def drop(recorded: Path, namespaces) -> list[str]:
    """Remove the stamps of ``namespaces`` (re-recorded: their entries are today's code's);
    the namespaces whose stamp went."""
    stamps = read(recorded)
    gone = sorted(set(stamps) & set(namespaces))
    if gone:
        write(recorded, {k: v for k, v in stamps.items() if k not in gone})
    return gone
