"""The digests of a study's verdicts: what a chapter writes to ``bench/results/digests/`` (the
design and verdict-code hashes, each claim's word and estimate to 3 significant digits), the
comparison ``make test`` makes against the committed one, and the studies that write none.
"""
from __future__ import annotations

import json
import math
import os
from types import MappingProxyType

from .design import Design, check, code_hash

__all__ = ["DIGESTS", "digest", "verdict_rows", "NO_DIGEST", "digest_mismatch",
           "write_digest"]


#: Where the chapters write their digests (``$POSBIAS_DIGEST_DIR`` overrides).
DIGESTS = "bench/results/digests"


def _sig(x: float) -> float:
    return float(f"{float(x):.3g}") if math.isfinite(float(x)) else None


def digest(design: Design, verdicts: dict) -> dict:
    """The digest of a study's verdicts: ``verdicts`` maps a claim's key to ``(word,
    estimate)`` (estimate a number or None); the result holds the study, the design and code
    hashes, and each claim's word and estimate to 3 significant digits."""
    return {"study": design.study, "design": design.hash, "code": code_hash(design.study),
            "verdicts": {str(k): {"verdict": str(w),
                                  "estimate": None if e is None else _sig(e)}
                         for k, (w, e) in sorted(verdicts.items())}}


def verdict_rows(rows) -> dict:
    """``{key: (word, estimate)}`` of a chapter's verdict-table rows (what
    :func:`posbias_nb.notebook.verdict_table` renders): the row's decision word (or its verdict
    where it has none) and its first ``values`` entry, the effect's estimate, or None."""
    from ... import notebook

    out = {}
    for r in rows:
        word = notebook.decision(r)[0] or r["verdict"]
        vals = r.get("values") or {}
        est = next(iter(vals.values()), None) if vals else None
        if est is None and r.get("effect") and r["effect"].get("testable", True):
            est = r["effect"]["interval"][0]
        out[r["key"]] = (word, est)
    return out


#: The studies that write no digest, and why (``make test`` and the unit suite skip them, and
#: fail on any other study without one).
NO_DIGEST = MappingProxyType({
    "claims": "a table of rules read by seven chapters, each of which prints its own verdicts; "
              "no one chapter runs the whole table",
    "fix-fast": "a user's command (posbias fix --fast), run by no chapter: its verdicts are the "
                "user's data's; bench/bench_fix.py times it against its floor"})


def digest_mismatch(study: str, made: dict, now: tuple) -> str | None:
    """None when the digest ``made`` (its ``"design"`` and ``"code"`` hashes) was made under
    ``now`` (``(design hash, verdict-code hash)``), else the sentence that says what differs.
    The one comparison of ``tests/check_digests.py`` (a digest just written against the
    committed one) and of the unit suite (the committed one against today's hashes).

    >>> digest_mismatch("fix", {"design": "a" * 64, "code": "b" * 64}, ("a" * 64, "b" * 64))
    >>> digest_mismatch("fix", {"design": "a" * 64, "code": "b" * 64}, ("a" * 64, "c" * 64))[:44]
    'fix: digest made under design aaaaaaaaaaaa /'
    """
    if (made["design"], made["code"]) == tuple(now):
        return None
    return (f"{study}: digest made under design {made['design'][:12]} / code "
            f"{made['code'][:12]}, against {now[0][:12]} / {now[1][:12]}: commit the registry "
            f"entry, re-run its chapter and commit its digest")


def write_digest(design: Design, verdicts: dict, folder=None):
    """Write :func:`digest` to ``folder`` (default ``$POSBIAS_DIGEST_DIR`` or the repository's
    ``bench/results/digests``, found beside the package) as ``{study}.json``; returns the path,
    or None where no such folder exists (an installed package, no repository)."""
    from pathlib import Path

    check(design)
    if folder is None:
        folder = os.environ.get("POSBIAS_DIGEST_DIR")
    if folder is None:
        root = Path(__file__).resolve().parents[3]
        if not (root / "bench" / "results").is_dir():
            return None
        folder = root / DIGESTS
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{design.study}.json"
    path.write_text(json.dumps(digest(design, verdicts), indent=1, sort_keys=True) + "\n")
    return path
