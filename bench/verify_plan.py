"""Which recorded measurements ``make test`` measures anew, and what came of it.

    # before the chapters run: choose the sample, write it for posbias_nb.cache
    python bench/verify_plan.py plan --recorded recorded --out _build/verify-plan.json \
        --keys _build/verify-keys.txt [--budget SECONDS]
    # after them: one line per namespace; fails on a disagreement or a sample nobody asked for
    python bench/verify_plan.py summary --plan _build/verify-plan.json --log _build/cache-events.jsonl

**The rule** (:func:`posbias_nb.cache.verification_plan`, fixed before any run it decides): in every namespace of
``recorded/MANIFEST.json``, the cheapest entry that ``make test``'s chapters read (its recorded
``compute_seconds``; an entry whose cost was never measured counts as unknown and is taken only
where the namespace has no measured one), and, in the namespaces whose code digest
(:func:`posbias_nb.cache.code_digest`) differs from the one recorded with the entry, further
entries in order of cost while the sample's recorded seconds in all stay within the budget
(``--budget``, seconds of recorded compute on CI's 2 cores; the cheapest entries count against
it first and are taken even where they alone exceed it).  In a namespace whose computation
amplifies float rounding (:data:`posbias_nb.cache.ROUNDING_AMPLIFIED`: training), only entries
recorded on this machine's CPU are candidates: on another CPU the same code gives other numbers,
so the run says that it re-measured none there, and why, unless this machine holds a CPU
reference of an entry (``recorded/by-cpu``, made here by the recording's code:
``bench/cpu_reference.py``), which it then re-measures against that reference.

``posbias_nb.cache`` computes the chosen entries anew where a chapter asks for them
(``$POSBIAS_RECORDED_VERIFY_KEYS``) and compares them with the recorded values
(:func:`posbias_nb.cache.agree`); a disagreement fails the chapter that asked, naming the
namespace, the key and ``make record-new REMEASURE=<namespace>``.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _events(path) -> list[dict]:
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a1 = sub.add_parser("plan")
    a1.add_argument("--recorded", default=str(ROOT / "recorded"))
    a1.add_argument("--out", required=True)
    a1.add_argument("--keys", required=True)
    a1.add_argument("--budget", type=float, default=None,
                    help="seconds of recorded compute (default: posbias_nb.cache.VERIFY_BUDGET)")
    a2 = sub.add_parser("summary")
    a2.add_argument("--plan", required=True)
    a2.add_argument("--log", required=True)
    a = ap.parse_args(argv)
    from posbias_nb import cache

    if a.cmd == "plan":
        manifest = json.loads((Path(a.recorded) / "MANIFEST.json").read_text())
        digests = {ns: cache.code_digest(ns) for ns in cache.NAMESPACE_CODE}
        # this machine by its full id (CPU name, generation, instruction set): an entry recorded
        # under a CPU name alone does not count as recorded here (cache.recorded_machine)
        machine = cpu = cache.machine_id()
        # a reference holds while the entry is the one it was made for (cache.reference_holds,
        # the check the run applies too) and its file is there
        refs, stale = set(), []
        by_cpu = Path(a.recorded) / "by-cpu"
        for k, v in cache.reference_index(by_cpu)["entries"].items():
            if machine not in v:
                continue
            why = cache.reference_holds(manifest["entries"].get(k), v[machine], cpu)
            if why is None and not (by_cpu / v[machine].get("file", "")).is_file():
                why = "its file is missing"
            if why is None:
                refs.add(k)
            elif why != "recorded on this CPU":
                stale.append(f"{k[:40]}: {why} (make cpu-reference makes it anew)")
        try:
            p = cache.verification_plan(
                manifest, digests, cache.VERIFY_BUDGET if a.budget is None else a.budget,
                cpu=cpu, references=refs)
        except ValueError as e:
            print(f"verify_plan: {e}", file=sys.stderr)
            return 2
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(p, indent=1) + "\n")
        Path(a.keys).write_text("".join(k + "\n" for k in p["keys"]))
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
    lines, problems = cache.verification_summary(json.loads(Path(a.plan).read_text()), _events(a.log))
    print("recorded/ namespaces (this run):")
    print("\n".join("  " + x for x in lines))
    for x in problems:
        print("FAILED " + x, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
