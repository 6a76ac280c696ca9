"""Carry ``recorded/``'s code digests over to a new digest rule, checking each one::

    python -m posbias_nb.provenance migrate-digests [--recorded recorded]

A code digest identifies the code that made an entry (``MANIFEST.json``), the code a stamp
vouches for (``STAMPS.json``) and the code that made a CPU reference (``by-cpu/REFERENCES.json``).
When the rule that computes digests changes (:data:`posbias_nb.provenance.code.DIGEST_RULE`),
every stored digest is of the old rule, and none would ever match today's code again: every
namespace would read as changed and be sampled in full.  This command replaces each stored digest
by the new rule's digest **of the same code**, and only where it can show that the code is the
same: files whose old-rule digest equals the stored one (the manifest's ``digest_rule``, one of
:data:`posbias_nb.provenance.code.RULES`; a manifest that names none has the module digests of
:func:`posbias_nb.provenance.code.file_digest`): the files of the commit stored beside it (``git show``), else of a commit that
changed ``recorded/`` (a stamp is committed with the code it vouches for), else today's.  A
digest no such files match stays as it was: its namespace reads as changed (sampled in full) and a
stamp that cannot be carried over is dropped, each said by name.  The stamps' manifest digests
are recomputed for the carried-over manifest (only where they matched the manifest before), and
a CPU reference made by an entry's code follows that entry.

The manifest then says which rule its digests follow (``digest_rule``); ``plan`` refuses a
manifest of another rule with one line (exit 2) naming this command.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Mapping

from . import code, stamps

__all__ = ["carry", "main"]

ROOT = Path(__file__).resolve().parents[2]


def carry(manifest: dict, stamp_map: dict, references: dict,
          files_at: Callable[[str], Mapping[str, str] | None],
          today: Mapping[str, str] | None = None,
          old: Callable = code.file_digest, new: Callable = code.code_digest,
          also: tuple[str, ...] = ()) -> dict:
    """Carry the digests of ``manifest`` (its ``entries``), ``stamp_map`` (``{ns: stamp}``) and
    ``references`` (``REFERENCES.json``'s ``entries``) from the rule ``old`` to ``new``, in
    place; ``files_at(commit)``: that commit's package files (None where it cannot be read),
    ``today``: today's (None: read them); ``also``: more commits whose files may be the code
    (those that committed ``recorded/``: a stamp is committed with the code it vouches for).
    Returns what it did: ``{"entries": n carried,
    "kept": [keys whose digest no files matched], "stamps": [...], "dropped": {ns: why},
    "references": n}``."""
    memo: dict[str, Mapping[str, str] | None] = {}
    today_rel = dict(today) if today is not None else code.source_files()

    def files(commit):
        if commit not in memo:
            memo[commit] = files_at(commit) if commit else None
        return memo[commit]

    digest_memo: dict[tuple[str, str, str], str] = {}

    def translate(ns: str, digest: str | None, commit: str | None) -> str | None:
        """The new rule's digest of the code whose old-rule digest is ``digest``, or None; each
        set of files digested from the roots it may have been digested from
        (:func:`posbias_nb.provenance.code.candidate_roots`: a root module may have been
        renamed since)."""
        if not digest or ns not in code.NAMESPACE_CODE:
            return None
        tries = [(commit or "", lambda: files(commit))] + \
            [(c, lambda c=c: files(c)) for c in also if c != commit] + \
            [("today", lambda: today_rel)]
        for label, get in tries:
            fs = get()
            if fs is None:
                continue
            for roots in code.candidate_roots(ns, fs):
                k = (ns, label, roots, "old")
                if k not in digest_memo:
                    digest_memo[k] = old(ns, fs, roots)
                if digest_memo[k] == digest:
                    k = (ns, label, roots, "new")
                    if k not in digest_memo:
                        digest_memo[k] = new(ns, fs, roots)
                    return digest_memo[k]
        return None

    before = {ns: stamps.manifest_digest(manifest, ns)
              for ns in {k.split("/")[0] for k in manifest.get("entries", {})}}
    carried, kept, was = 0, [], {}
    for k, v in manifest.get("entries", {}).items():
        ns = k.split("/")[0]
        got = translate(ns, v.get("code"), v.get("commit"))
        if got is None:
            kept.append(k)
            continue
        was[k] = v["code"]
        v["code"] = got
        carried += 1
    refs = 0
    for k, by_cpu in references.items():
        e = manifest.get("entries", {}).get(k)
        for ref in by_cpu.values():
            if e is not None and k in was and ref.get("code") == was[k] \
                    and ref.get("commit") == e.get("commit"):
                ref["code"] = e["code"]
                refs += 1
    dropped, done = {}, []
    for ns in sorted(stamp_map):
        s = stamp_map[ns]
        got = translate(ns, s.get("code"), s.get("commit"))
        if got is None:
            dropped[ns] = (f"no files of commit {str(s.get('commit'))[:12]} or of today digest "
                           f"to its code {str(s.get('code'))[:12]} by the old rule")
        elif s.get("manifest") != before.get(ns):
            dropped[ns] = "its manifest digest was not that of the namespace's entries"
        else:
            s["code"] = got
            s["manifest"] = stamps.manifest_digest(manifest, ns)
            done.append(ns)
    for ns in dropped:
        del stamp_map[ns]
    manifest["digest_rule"] = code.DIGEST_RULE
    return {"entries": carried, "kept": kept, "stamps": done, "dropped": dropped,
            "references": refs}


def main(argv=None, prog: str | None = None) -> int:
    """The command the module docstring shows."""
    from .record import files_at_or_none

    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--recorded", default=str(ROOT / "recorded"))
    a = ap.parse_args(argv)
    rec = Path(a.recorded)
    man_f, ref_f = rec / "MANIFEST.json", rec / "by-cpu" / "REFERENCES.json"
    if not man_f.is_file():
        print(f"migrate-digests: no {man_f}", file=sys.stderr)
        return 2
    manifest = json.loads(man_f.read_text())
    if manifest.get("digest_rule") == code.DIGEST_RULE:
        print(f"migrate-digests: {man_f} already follows {code.DIGEST_RULE}")
        return 0
    st = stamps.read(rec)
    refs = json.loads(ref_f.read_text()) if ref_f.is_file() else {"entries": {}}

    import subprocess

    log = subprocess.run(["git", "log", "--format=%H", "-n", "40", "--", "recorded/STAMPS.json",
                          "recorded/MANIFEST.json"], cwd=ROOT, capture_output=True, text=True)
    also = tuple(log.stdout.split()) if log.returncode == 0 else ()
    was = manifest.get("digest_rule")
    if was is not None and was not in code.RULES:
        print(f"migrate-digests: {man_f} follows {was!r}, a rule this code cannot compute "
              f"(it knows {', '.join(code.RULES)})", file=sys.stderr)
        return 2
    old = code.file_digest if was is None else \
        (lambda ns, fs, roots: code.code_digest(ns, fs, roots, rule=was))
    got = carry(manifest, st, refs["entries"], files_at_or_none, also=also, old=old)
    man_f.write_text(json.dumps(manifest, indent=1) + "\n")
    stamps.write(rec, st)
    if ref_f.is_file():
        ref_f.write_text(json.dumps(refs, indent=1, sort_keys=True) + "\n")
    print(f"migrate-digests: {got['entries']} entries, {len(got['stamps'])} stamps and "
          f"{got['references']} CPU references carried over to {code.DIGEST_RULE}; "
          f"{len(got['kept'])} entries kept their old digest (no files matched it)"
          + "".join(f"\n  dropped the stamp of {ns}: {why}" for ns, why in got["dropped"].items()))
    return 0
