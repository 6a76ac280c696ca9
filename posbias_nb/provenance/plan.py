"""Which recorded measurements ``make test`` measures anew, and what came of it.

The command (``bench/verify_plan.py plan|summary`` is the same)::

    # before the chapters run: choose the sample, write it for posbias_nb.cache
    python -m posbias_nb.provenance plan --recorded recorded --out _build/verify-plan.json \\
        --keys _build/verify-keys.txt [--budget SECONDS]
    # after them: one line per namespace; fails on a disagreement or a sample nobody asked for
    python -m posbias_nb.provenance summary --plan _build/verify-plan.json \\
        --log _build/cache-events.jsonl

**The rule** (:func:`verification_plan`, fixed before any run it decides): in every namespace of
``recorded/MANIFEST.json``, the cheapest entry that ``make test``'s chapters read (its cost,
:func:`entry_cost`: what its last re-measurement took, or in a namespace verified under today's
code what one of its parts took, else its recorded ``compute_seconds``; an entry whose cost was never measured counts as unknown and is taken only
where the namespace has no measured one), and, in the namespaces whose code digest
(:func:`posbias_nb.provenance.code.code_digest`) differs from the one recorded with the entry,
an entry of every value of every field of the entries' settings (:func:`entry_setting`: the
ranker, remedy, model a key names), then further entries in order of cost while the sample's
recorded seconds beyond each namespace's cheapest entry stay within the budget (``--budget``,
seconds of recorded compute on CI's 2 cores; the settings' entries, whole namespaces, the
cheapest coverage first, count against it before the others).  A changed namespace whose sample agreed in an earlier run is
*stamped* (``recorded/STAMPS.json``, :mod:`posbias_nb.provenance.stamps`, written by
``summary --stamps recorded``): under the stamp's code it counts as verified and only its
cheapest entry is re-measured.  In a namespace whose
computation amplifies float rounding
(:data:`~posbias_nb.provenance.machine.ROUNDING_AMPLIFIED`: training), only entries recorded on
this machine's CPU are candidates: on another CPU the same code gives other numbers, so the run
says that it re-measured none there, and why, unless this machine holds a CPU reference of an
entry (``recorded/by-cpu``, made here by the recording's code: ``make cpu-reference``), which it
then re-measures against that reference.

:mod:`posbias_nb.cache` computes the chosen entries anew where a chapter asks for them
(``$POSBIAS_RECORDED_VERIFY_KEYS``) and compares them with the recorded values
(:mod:`posbias_nb.provenance.verify`); a disagreement fails the chapter that asked, naming the
namespace, the key and ``make record-new REMEASURE=<namespace>``.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Mapping

from . import code, machine, stamps as _stamps
from .machine import ROUNDING_AMPLIFIED, TWINS, recorded_machine

__all__ = ["VERIFY_BUDGET", "COVER_BUDGETS", "edit_cost", "entry_setting", "entry_cost", "GPU_MEASURED", "GPU_PROVENANCE", "GPU_MACHINE", "GPU_TWIN_BUDGET",
           "gpu_provenance_problems", "verification_plan", "verification_summary", "main"]

#: The default budget of :func:`verification_plan`: seconds of recorded compute (on CI's two
#: cores) that ``make test`` may spend re-measuring recorded entries beyond each namespace's
#: cheapest one (``make test VERIFY_BUDGET=...`` changes it for one run).
VERIFY_BUDGET = 600.0

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

ROOT = Path(__file__).resolve().parents[2]

_HEX = frozenset("0123456789abcdef")


def _choice(v) -> bool:
    """A parameter value that names a choice (a model, ranker, remedy, prior, layer kind, part):
    a boolean, or a short string that is neither a path nor a hash."""
    if isinstance(v, bool):
        return True
    return isinstance(v, str) and 0 < len(v) <= 48 and "/" not in v \
        and not (len(v) >= 16 and set(v) <= _HEX)


def entry_setting(params: Mapping) -> dict[str, str]:
    """The **setting** of a cache entry: the parameters of its key that name a choice taking a
    code path of its own (:func:`_choice`: booleans and short names; a nested mapping's one
    level down, as ``outer.inner``), each as a string.  Sizes, seeds and thresholds run the same
    code with other numbers and are left out.  :mod:`posbias_nb.cache` logs it with every event
    and ``make record`` writes it into the manifest, so that a changed namespace's sample holds
    an entry of every value of every field (:func:`verification_plan`)."""
    out = {}
    for k, v in params.items():
        if isinstance(v, Mapping):
            for k2, v2 in v.items():
                if _choice(v2):
                    out[f"{k}.{k2}"] = _architecture(str(v2))
        elif _choice(v):
            out[str(k)] = _architecture(str(v))
    return dict(sorted(out.items()))


def _architecture(v: str) -> str:
    """``name@width`` (a model at a reduced width) is its architecture's setting: the width is
    a size, the architecture the code path."""
    name, at, width = v.rpartition("@")
    return name if at and width.isdigit() else v


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
                      cpu: str | None = None, references: set[str] | frozenset = frozenset(),
                      stamps: Mapping[str, Mapping] | None = None) -> dict:
    """The sample of recorded entries that ``make test`` measures anew (:func:`main`'s ``plan``
    writes it for ``$POSBIAS_RECORDED_VERIFY_KEYS``).

    The rule, fixed before any run it decides: in every namespace, the cheapest entry that
    ``make test`` reads (its cost, :func:`entry_cost`: what its last re-measurement took, or in
    a namespace verified under today's code what one of its parts took, else its
    recorded ``compute_seconds``; an entry whose cost was never measured
    is taken only where the namespace has no measured one); in the namespaces whose code digest
    differs from the one recorded with an entry and that no stamp verified under today's code
    (``stamps``, :mod:`posbias_nb.provenance.stamps`), an entry of every value of every field
    of the entries' settings (:func:`entry_setting`, as the manifest records them; one at a time,
    the entry that adds the most values not yet held, the cheaper first among equals; a
    namespace's whole coverage or none of it, the cheapest coverage first, its namespace marked
    ``uncovered`` where it does not fit), then further entries in order of cost, while the
    recorded seconds beyond each namespace's cheapest entry (always taken, not counted) stay
    within ``budget``.  (Before issue 63 the cheapest entries counted against the budget, which
    the by-parts entries' whole recorded seconds alone exceeded: no run took any further entry.)

    Returns the sample: ``{"keys": [...], "one_part": [...], "namespaces": {ns: {...}}}``;
    ``one_part``: the keys of namespaces verified under today's code (unchanged since recording,
    or stamped), whose entries made of parts are re-measured by one part
    (:func:`~posbias_nb.provenance.verify.one_part`: their code paths were reached when they
    were recorded or stamped; one part checks the machine and the data).  ``main`` writes them
    to the keys file as ``namespace/key:1``.

    ``manifest`` is ``recorded/MANIFEST.json``; ``digests`` the code digest of each namespace
    today. An entry is a candidate if ``make test`` reads it (``read`` true, or absent in an
    older manifest). Each namespace's line says how many entries it holds, whether its code
    changed since they were recorded (any entry's ``code`` differs from today's digest; an entry
    without a recorded digest counts as changed), which entries were chosen and their recorded
    seconds.

    ``cpu`` (this machine's, :func:`~posbias_nb.provenance.machine.machine_id`): in the
    namespaces of :data:`~posbias_nb.provenance.machine.ROUNDING_AMPLIFIED`, only entries
    recorded on that CPU are candidates; where there is none, the namespace's line says why
    nothing was re-measured (``skipped``).  ``references``: the ``namespace/key`` entries that
    hold a CPU reference for this machine (``recorded/by-cpu``), candidates too (compared with
    the reference, not the record).  ``stamps``: ``{namespace: stamp}`` of
    ``recorded/STAMPS.json``; a stamp whose code digest is today's makes its namespace verified
    (``vouched``): only its cheapest entry is re-measured."""
    vouch = _stamps.vouching(stamps or {}, digests)
    if budget < 0:
        raise ValueError(f"budget must be >= 0 seconds, got {budget!r}")
    by_ns: dict[str, list] = defaultdict(list)
    for k, v in sorted(manifest.get("entries", {}).items()):
        ns, key = k.split("/")
        by_ns[ns].append((key, v))
    unknown = sorted(set(by_ns) - set(digests))
    if unknown:
        raise ValueError(f"recorded namespaces {unknown} declare no code "
                         "(posbias_nb.provenance.code.NAMESPACE_CODE)")
    out, extra, twins, covers = {}, [], {}, {}
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
                           f"(make cpu-reference)"
                           + (f"; its float64 twins ({TWINS[ns]}) run the same training "
                              f"step and are re-measured here instead, at the tolerance "
                              f"measured for them" if ns in TWINS else ""))
            cands = here
        changed = any(v.get("code") != digests[ns] for _, v in items)
        stale = changed and ns not in vouch
        # a namespace verified under today's code checks an entry of parts by one part
        known = sorted((entry_cost(v, not stale), key) for key, v in cands
                       if (entry_cost(v, not stale) or 0) > 0)
        if known:
            first = [known[0]]
        elif cands:
            first = [(None, cands[0][0])]
        else:
            first = []
        if stale:
            covers[ns] = _cover_settings(cands, [k for _, k in first])
        out[ns] = dict(entries=len(items), candidates=len(cands), changed=changed,
                       chosen=[key for _, key in first],
                       seconds=sum(s for s, _ in first if s is not None),
                       unknown_cost=bool(first) and first[0][0] is None,
                       settings=_setting_values(cands),
                       **({"vouched": _stamp_line(vouch[ns])} if changed and ns in vouch else {}),
                       **({"skipped": skipped} if skipped else {}))
        if stale:
            held = {k for _, k in first + covers[ns]}
            extra += [(s, ns, key) for s, key in known[1:] if key not in held]
    # the budget is for what goes beyond each namespace's cheapest entry (VERIFY_BUDGET): those
    # are always taken and do not count against it
    spent = 0.0
    # every setting of a changed namespace: whole namespaces, the cheapest coverage first,
    # where it fits the budget (a namespace only partly covered could not be stamped)
    for cost, ns in sorted((sum(s or 0.0 for s, _ in c), ns) for ns, c in covers.items()):
        if spent + cost > budget and covers[ns]:
            out[ns]["uncovered"] = len(covers[ns])
            out[ns]["cover_seconds"] = round(cost, 1)
            extra += [(s, ns, k) for s, k in covers[ns] if s]
            continue
        spent += cost
        out[ns]["chosen"] += [k for _, k in covers[ns]]
        out[ns]["seconds"] += cost
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
        if key in out[ns]["chosen"]:
            continue
        if spent + s > budget:
            break
        spent += s
        out[ns]["chosen"].append(key)
        out[ns]["seconds"] += s
    keys = [f"{ns}/{key}" for ns in sorted(out) for key in out[ns]["chosen"]]
    # a namespace verified under today's code (unchanged, or stamped) re-measures an entry made
    # of parts by one part (:func:`~posbias_nb.provenance.verify.one_part`; an entry that is not
    # made of parts is re-measured whole)
    one = [f"{ns}/{key}" for ns in sorted(out) for key in out[ns]["chosen"]
           if not out[ns]["changed"] or "vouched" in out[ns]]
    return dict(keys=keys, one_part=one, budget=budget, beyond_cheapest=round(spent, 1),
                seconds=round(sum(v["seconds"] for v in out.values()), 1), namespaces=out)


#: The budgets :func:`edit_cost` tries, in order, for the one that covers every setting.
COVER_BUDGETS = (600.0, 1000.0, 2000.0, 4000.0, 8000.0, 16000.0, 32000.0, 64000.0)


def unknown_modules(modules) -> str | None:
    """Why ``modules`` cannot be costed by :func:`edit_cost` (none given, or one that is not a
    module of the package, dotted and relative to it), or None."""
    known = set(code.package_files())
    bad = [m for m in modules if m.split(":")[0] not in known]
    if bad or not modules:
        return (f"not a module of posbias_nb: {', '.join(bad) or '(none given)'} "
                "(dotted and relative to the package, e.g. experiments.remedy.inference, or "
                "MODULE:NAME for one function, class or constant of it)")
    return None


def _moves(ns: str, target: str) -> bool:
    """Whether an edit of ``target`` (``module``, or ``module:name``: the statements binding
    ``name``) moves the code digest of ``ns``."""
    if ":" in target:
        mod, name = target.split(":", 1)
        if mod in code.NOT_COMPUTING:
            return False
        return code.reaches(ns, mod, name)
    return target in code.code_modules(ns)


def edit_cost(manifest: dict, digests: dict[str, str], modules, budget: float = VERIFY_BUDGET,
              cpu: str | None = None, references: set[str] | frozenset = frozenset(),
              stamps: Mapping[str, Mapping] | None = None) -> dict:
    """What an edit of ``modules`` (dotted, relative to the package, e.g.
    ``"experiments.remedy.inference"``, or ``"experiments.remedy.fix.tune:tune_settings"`` for the statements that bind one
    name) would cost ``make test`` before its stamps are earned: the namespaces whose code it
    moves (:func:`posbias_nb.provenance.code.code_modules`,
    :func:`posbias_nb.provenance.code.reaches`), and the
    sample :func:`verification_plan` would then choose for them, at ``budget`` and at the first
    of :data:`COVER_BUDGETS` that leaves none of them uncovered (a namespace whose sample
    misses a setting cannot be stamped, so every run samples it again).

    Returns ``{"moved": [...], "budget": {"budget", "seconds", "uncovered", "namespaces":
    {ns: {"seconds", "chosen", "entries", "uncovered"|"skipped"}}}, "cover": {...} or None}``,
    seconds of recorded compute (CI's 2 cores).  The digests of the moved namespaces are
    replaced by a value no code has, so no stamp vouches for them.

    Raises
    ------
    ValueError
        A module that is not in the package, or a name it does not bind.
    """
    why = unknown_modules(modules)
    if why:
        raise ValueError(why)
    moved = [ns for ns in code.NAMESPACE_CODE if any(_moves(ns, m) for m in modules)]
    fake = {ns: ("edited:" + d if ns in moved else d) for ns, d in digests.items()}

    def at(b):
        p = verification_plan(manifest, fake, b, cpu=cpu, references=references, stamps=stamps)
        rows = {}
        for ns in moved:
            v = p["namespaces"].get(ns)
            if v is None:  # nothing recorded under it
                continue
            rows[ns] = ({"skipped": v["skipped"]} if v.get("skipped") else
                        {"seconds": round(float(v["seconds"]), 1), "chosen": len(v["chosen"]),
                         "entries": v["entries"], "uncovered": v.get("uncovered") or 0})
        unc = sorted(ns for ns, r in rows.items() if r.get("uncovered"))
        return {"budget": b, "seconds": round(sum(r.get("seconds", 0.0) for r in rows.values()), 1),
                "uncovered": unc, "namespaces": rows}

    first = at(float(budget))
    cover = first if not first["uncovered"] else next(
        (c for c in (at(b) for b in COVER_BUDGETS if b > budget) if not c["uncovered"]), None)
    return {"moved": moved, "budget": first, "cover": cover}


def entry_cost(entry: Mapping, one_part: bool = False) -> float | None:
    """What re-measuring a recorded entry costs, in seconds on CI's two cores: with
    ``one_part`` (its namespace verified under today's code, so an entry made of parts is
    checked by one part), what one of its parts took (``part_seconds``) where a run measured
    it; else what its last re-measurement took (``verify_seconds``, written by ``make record``
    from a run's cache events: for an entry made of parts, the parts its sample computed, a
    fraction of the whole), else what recording it took (``compute_seconds``); None where none
    was measured."""
    if one_part and entry.get("part_seconds"):
        return float(entry["part_seconds"])
    got = entry.get("verify_seconds")
    return float(got) if got else entry.get("compute_seconds")


def _values(v: Mapping) -> set[tuple[str, str]]:
    return {(f, str(x)) for f, x in (v.get("setting") or {}).items()}


def _setting_values(cands) -> int:
    """How many (field, value) pairs the candidates' settings hold."""
    return len(set().union(set(), *(_values(v) for _, v in cands)))


def _cover_settings(cands, chosen: list[str]) -> list[tuple[float | None, str]]:
    """Entries (seconds, key) added to ``chosen`` until every (field, value) of the candidates'
    settings is held by one: each time the entry with the most values not yet held, the
    cheaper first among equals (an entry of unknown cost last)."""
    vals = {key: _values(v) for key, v in cands}
    # a cost never measured counts as the namespace's dearest measured one (never as free)
    dearest = max((entry_cost(v) or 0.0 for _, v in cands), default=0.0)
    costs = {key: entry_cost(v) or dearest or None for key, v in cands}
    missing = set().union(set(), *vals.values()) - set().union(set(), *(vals[k] for k in chosen
                                                                         if k in vals))
    out = []
    while missing:
        best = min((k for k in vals if k not in chosen and vals[k] & missing),
                   key=lambda k: (-len(vals[k] & missing),
                                  costs[k] if costs[k] else float("inf"), k))
        out.append((costs[best] or None, best))
        chosen = chosen + [best]
        missing -= vals[best]
    return out


def _stamp_line(s: Mapping) -> str:
    return (f"verified under today's code by the stamp of {s.get('date')} ({s.get('machine')}, "
            f"commit {str(s.get('commit'))[:12]}: {len(s.get('entries', {}))} entries "
            f"re-measured)"
            + (f"; today's code is that code ({str(s['narrowed']['from'])[:12]}) less "
               "statements nothing it runs needs" if s.get("narrowed") else ""))


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
            + (("changed since recording; " + p["vouched"]) if p.get("vouched")
               else "changed since recording" + (", and its sample agrees"
                                                 if got and not c['mismatch'] else "")
               if p["changed"] else "unchanged")
            + (f"; {p['uncovered']} entries that would reach every setting beyond the budget "
               f"({p.get('cover_seconds', '?')} s as recorded), so not stamped (a later run, "
               f"with the budget its stamps free, reaches them; so does make notebooks "
               f"VERIFY_BUDGET=SECONDS with the sum of such namespaces' seconds)"
               if p.get("uncovered") else "")
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


def read_events(path) -> list[dict]:
    """The cache events of a run (``$POSBIAS_CACHE_LOG``, one JSON object a line); none where
    the file is absent."""
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


def this_machines_references(recorded: Path, manifest: Mapping, here: str
                             ) -> tuple[set[str], list[str]]:
    """The entries that hold a CPU reference for the machine ``here`` that stands
    (:func:`~posbias_nb.provenance.machine.reference_holds`, the check the run applies too, and
    its file is there), and a line for each stale one."""
    refs, stale = set(), []
    by_cpu = Path(recorded) / "by-cpu"
    for k, v in machine.reference_index(by_cpu)["entries"].items():
        if here not in v:
            continue
        why = machine.reference_holds(manifest["entries"].get(k), v[here], here)
        if why is None and not (by_cpu / v[here].get("file", "")).is_file():
            why = "its file is missing"
        if why is None:
            refs.add(k)
        elif why != "recorded on this CPU":
            stale.append(f"{k[:40]}: {why} (make cpu-reference makes it anew)")
    return refs, stale


def _today(recorded: Path):
    """What a plan reads: the manifest of ``recorded``, today's code digest of every namespace,
    this machine by its full id (CPU name, generation, instruction set: an entry recorded under
    a CPU name alone does not count as recorded here, machine.recorded_machine), and this
    machine's CPU references with the stale ones."""
    manifest = json.loads((recorded / "MANIFEST.json").read_text())
    if manifest.get("digest_rule") != code.DIGEST_RULE:
        raise ValueError(f"{recorded / 'MANIFEST.json'}: its code digests follow "
                         f"{manifest.get('digest_rule') or 'an older rule'}, not "
                         f"{code.DIGEST_RULE}: run python -m posbias_nb.provenance "
                         "migrate-digests")
    digests = {ns: code.code_digest(ns) for ns in code.NAMESPACE_CODE}
    cpu = machine.machine_id()
    refs, stale = this_machines_references(recorded, manifest, cpu)
    return manifest, digests, cpu, refs, stale


def cost_lines(c: Mapping) -> str:
    """:func:`edit_cost`'s result as the ``cost`` command prints it."""
    b, cov = c["budget"], c["cover"]
    out = [f"moves {len(c['moved'])} namespaces: {', '.join(c['moved']) or 'none'}"]
    out.append(f"at a budget of {b['budget']:.0f} s: {b['seconds']:.0f} s of recorded compute "
               f"re-measured; left uncovered, so not stamped: {', '.join(b['uncovered']) or 'none'}")
    for ns, r in b["namespaces"].items():
        out.append(f"  {ns:22s} " + (f"not re-measured here: {r['skipped']}" if "skipped" in r
                                     else f"{r['seconds']:8.0f} s  {r['chosen']} of "
                                          f"{r['entries']} entries"))
    out.append("every setting covered at a budget of "
               f"{cov['budget']:.0f} s: {cov['seconds']:.0f} s of recorded compute"
               if cov else f"not every setting is covered even at {COVER_BUDGETS[-1]:.0f} s")
    return "\n".join(out)


def main(argv=None, prog: str | None = None) -> int:
    """``plan`` (choose the sample before the chapters run) or ``summary`` (after them), as the
    module docstring shows; the exit status is 2 on a plan that cannot be made, 1 on a summary
    with a problem."""
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a1 = sub.add_parser("plan")
    a1.add_argument("--recorded", default=str(ROOT / "recorded"))
    a1.add_argument("--out", required=True)
    a1.add_argument("--keys", required=True)
    a1.add_argument("--budget", type=float, default=None,
                    help="seconds of recorded compute (default: "
                         "posbias_nb.provenance.plan.VERIFY_BUDGET)")
    a3 = sub.add_parser("cost", help="what an edit of these modules would cost make test "
                                     "before its stamps are earned")
    a3.add_argument("modules", nargs="+", metavar="MODULE",
                    help="dotted, relative to the package, e.g. experiments.remedy.inference, "
                         "or MODULE:NAME (one function, class or constant of it)")
    a3.add_argument("--recorded", default=str(ROOT / "recorded"))
    a3.add_argument("--budget", type=float, default=None)
    a2 = sub.add_parser("summary")
    a2.add_argument("--plan", required=True)
    a2.add_argument("--log", required=True)
    a2.add_argument("--stamps", default=None, metavar="RECORDED",
                    help="write the stamps this run earned into RECORDED/STAMPS.json "
                         "(posbias_nb.provenance.stamps)")
    a = ap.parse_args(argv)
    if a.cmd == "cost":
        why = unknown_modules(a.modules)
        if why:  # before the digests of every namespace, which take seconds
            print(f"cost: {why}", file=sys.stderr)
            return 2
        try:
            manifest, digests, cpu, refs, _ = _today(Path(a.recorded))
            c = edit_cost(manifest, digests, a.modules, VERIFY_BUDGET if a.budget is None
                          else a.budget, cpu=cpu, references=refs,
                          stamps=_stamps.read(Path(a.recorded)))
        except ValueError as e:
            print(f"cost: {e}", file=sys.stderr)
            return 2
        print(cost_lines(c))
        return 0
    if a.cmd == "plan":
        try:
            manifest, digests, cpu, refs, stale = _today(Path(a.recorded))
            st = _stamps.read(Path(a.recorded))
            bad = _stamps.problems(st, manifest)
            if bad:
                raise ValueError(bad[0])
            blind = _stamps.unverifiable(st)
            if blind:
                print(f"recorded/: stamps of {', '.join(blind)} not honoured: this checkout "
                      "cannot place their commits (no git history, or a shallow clone)")
                st = {k: v for k, v in st.items() if k not in blind}
            from .record import files_at_or_none

            st = {**st, **_stamps.narrowed(st, digests, files_at_or_none)}
            p = verification_plan(manifest, digests, VERIFY_BUDGET if a.budget is None
                                  else a.budget, cpu=cpu, references=refs, stamps=st)
        except ValueError as e:
            print(f"verify_plan: {e}", file=sys.stderr)
            return 2
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(p, indent=1) + "\n")
        one = set(p["one_part"])
        Path(a.keys).write_text("".join(k + (":1" if k in one else "") + "\n"
                                        for k in p["keys"]))
        changed = [ns for ns, v in p["namespaces"].items() if v["changed"]]
        known = sum(v["seconds"] for v in p["namespaces"].values())
        print(f"recorded/: re-measuring {len(p['keys'])} entries of "
              f"{len(p['namespaces'])} namespaces ({known:.0f} s as recorded, plus "
              f"{sum(v['unknown_cost'] for v in p['namespaces'].values())} of unknown cost); "
              f"code changed since recording: {', '.join(changed) or 'none'}")
        for x in stale:
            print(f"recorded/: CPU reference of {x}")
        for ns, v in p["namespaces"].items():
            if v.get("skipped"):
                print(f"recorded/: {ns} not re-measured: {v['skipped']}")
        return 0
    the_plan, events = json.loads(Path(a.plan).read_text()), read_events(a.log)
    lines, problems = verification_summary(the_plan, events)
    print("recorded/ namespaces (this run):")
    print("\n".join("  " + x for x in lines))
    for x in problems:
        print("FAILED " + x, file=sys.stderr)
    if a.stamps:
        import time

        from .record import head_commit

        manifest = json.loads((Path(a.stamps) / "MANIFEST.json").read_text())
        digests = {ns: code.code_digest(ns) for ns in code.NAMESPACE_CODE}
        new = _stamps.new_stamps(the_plan, events, manifest, digests, machine.machine_id(),
                                 time.strftime("%Y-%m-%d"), head_commit())
        if new:
            _stamps.write(Path(a.stamps), {**_stamps.read(Path(a.stamps)), **new})
            print(f"recorded/{_stamps.FILE}: stamped {', '.join(sorted(new))} (verified under "
                  "today's code: commit it with the change)")
    return 1 if problems else 0
