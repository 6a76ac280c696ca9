"""Start-up of a cached ``posbias profile`` (issue 20): the time from launch to output when the
result is already in the cache, and which heavy libraries that path imports.

The first run fills a fresh cache; the next ``REPEATS`` runs are hits, timed as separate
processes (what a user sees).  Results go to ``bench/results/startup.json``.  Target: a hit under
1.5 s on two cores, importing neither torch nor transformers.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPEATS = 5
ARGS = ["profile", "--model", "gpt2-tiny", "--length", "64", "--probes", "2", "--quiet"]
PROBE = ("import sys, runpy; sys.argv = ['posbias'] + {args!r}; "
         "from posbias_nb import cli; rc = cli.main(sys.argv[1:]); "
         "print([m for m in ('torch', 'transformers', 'scipy.stats') if m in sys.modules], "
         "file=sys.stderr)")


def main() -> dict:
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, POSBIAS_CACHE_DIR=d, HF_HUB_OFFLINE="1")
        cmd = [sys.executable, "-m", "posbias_nb", *ARGS]
        t = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        cold = time.perf_counter() - t
        hits = []
        for _ in range(REPEATS):
            t = time.perf_counter()
            subprocess.run(cmd, env=env, check=True, capture_output=True)
            hits.append(time.perf_counter() - t)
        r = subprocess.run([sys.executable, "-c", PROBE.format(args=ARGS)], env=env, check=True,
                           capture_output=True, text=True)
        imported = r.stderr.strip().splitlines()[-1]
    out = {"command": "posbias " + " ".join(ARGS), "first_run_s": round(cold, 3),
           "cache_hit_s": sorted(round(h, 3) for h in hits),
           "cache_hit_median_s": round(sorted(hits)[len(hits) // 2], 3),
           "heavy_modules_imported_on_a_hit": imported, "target_s": 1.5,
           "cpus": os.cpu_count(), "load_average_1min": round(os.getloadavg()[0], 2)}
    dest = Path(__file__).with_name("results") / "startup.json"
    dest.parent.mkdir(exist_ok=True)
    dest.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
