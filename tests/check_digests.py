"""After the chapters ran (``make notebooks``): every study's digest, just written by its chapter
to ``bench/results/digests/``, was made under the design and verdict code that the committed
digest records, so the committed record is current (``posbias_nb.experiments.base.design``).

A study whose design or verdict code changed needs its new registry entry *and* its new digest
committed; until the digest is, this check fails and says which.  A study with no committed
digest yet (its first run) is reported, not failed; a study of ``digests.NO_DIGEST`` writes
none.  Exit 0 when all agree (or
outside a git checkout, where there is no committed record to compare), 1 otherwise.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def committed(rel: str):
    r = subprocess.run(["git", "-C", str(ROOT), "show", f"HEAD:{rel}"], capture_output=True,
                       text=True)
    return json.loads(r.stdout) if r.returncode == 0 else None


def main() -> int:
    from posbias_nb.experiments.base import design
    from posbias_nb.experiments.base import digests as dg

    inside = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--git-dir"],
                            capture_output=True).returncode == 0
    if not inside:
        print("check_digests: not a git checkout, nothing committed to compare")
        return 0
    bad = []
    for study in design.VERDICT_CODE:
        if study in dg.NO_DIGEST:
            continue
        rel = f"{dg.DIGESTS}/{study}.json"
        now = ROOT / rel
        if not now.exists():
            bad.append(f"{study}: its chapter wrote no digest ({rel})")
            continue
        new, old = json.loads(now.read_text()), committed(rel)
        if old is None:  # its first run: reported, not failed (commit it with the chapter)
            print(f"check_digests: {study}: {rel} is new, not committed yet: commit it",
                  file=sys.stderr)
        elif dg.digest_mismatch(study, old, (new["design"], new["code"])):
            bad.append("the committed " + dg.digest_mismatch(
                study, old, (new["design"], new["code"])) + " (this run's)")
    for b in bad:
        print("check_digests:", b, file=sys.stderr)
    if not bad:
        print(f"check_digests: {len(design.VERDICT_CODE) - len(dg.NO_DIGEST)} digests made "
              "under their committed "
              "design and verdict code")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
