"""Execute the book's chapters once, two at a time, into the cache the book build reads.

    python tests/nbrun.py --workers 2 --times _build/chapter-times.json book/intro.md ...

What ``make notebooks`` runs.  Every chapter is read the way the book build reads it (myst-nb's
MyST reader), executed by jupyter-cache's executor (the one the build would use) in a fresh
kernel in ``book/``, and its executed notebook is stored in the build's jupyter-cache
(``_build/.jupyter_cache``, emptied first, so the build never sees an earlier run's outputs).
``jupyter-book build`` then executes nothing (``execute_notebooks: cache`` in ``_config.yml``):
each chapter runs once per ``make test``.

* A cell that raises, or one that runs past ``--timeout`` seconds, fails its chapter: the runner
  prints the chapter, the cell and its traceback, runs the other chapters, and exits 1.
* ``--workers N`` chapters run at once, each kernel with ``--threads`` torch/BLAS threads (the
  environment variables ``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS``).  Longest first, from the
  last recorded times; the pages that gather from the other chapters (``--last``, the verdict
  overview) run after all of them.  Two chapters that need the same measurement compute it
  once (``posbias_nb.cache`` locks each key).
* ``--times FILE``: each chapter's execution time (its kernel's start to its last cell), the
  wall time of the whole run, the workers and whether the measurement cache was cold.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _md_config():
    import yaml
    from myst_parser.config.main import MdParserConfig

    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    ext = cfg.get("parse", {}).get("myst_enable_extensions", [])
    return MdParserConfig(enable_extensions=set(ext))


def read_chapter(path: Path):
    """The notebook of a MyST chapter, as the book build reads it (its cache key depends on it)."""
    from myst_nb.core.read import read_myst_markdown_notebook

    return read_myst_markdown_notebook(path.read_text(), config=_md_config(), add_source_map=True,
                                       path=str(path))


def _execute(path: str, timeout: int, threads: int) -> dict:
    """One chapter in a fresh kernel (runs in a worker process)."""
    import nbformat
    from jupyter_cache.executors.utils import single_nb_execution

    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(threads)
    os.environ["POSBIAS_CACHE_TAG"] = Path(path).stem
    nb = read_chapter(Path(path))
    t0 = time.perf_counter()
    res = single_nb_execution(nb, cwd=str(Path(path).parent), timeout=timeout,
                              allow_errors=False, meta_override=True)
    seconds = time.perf_counter() - t0
    return {"path": path, "seconds": seconds, "error": None if res.err is None else
            f"{type(res.err).__name__}: {res.exc_string}", "nb": nbformat.writes(nb)}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _order(paths, previous: dict) -> list:
    """Longest first by the last recorded times (unknown chapters first: they may be long)."""
    return sorted(paths, key=lambda p: -previous.get(Path(p).stem, float("inf")))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("chapters", nargs="+")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--last", action="append", default=[],
                    help="a chapter that runs after all the others (repeatable)")
    ap.add_argument("--jupyter-cache", default=str(ROOT / "_build" / ".jupyter_cache"))
    ap.add_argument("--times", default=None)
    ap.add_argument("--previous", default=str(ROOT / "bench" / "results" / "chapter-times.json"))
    a = ap.parse_args(argv)
    if a.workers < 1 or a.threads < 1:
        ap.error(f"--workers and --threads must be at least 1, got {a.workers}, {a.threads}")

    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    shutil.rmtree(a.jupyter_cache, ignore_errors=True)
    cache = get_cache(a.jupyter_cache)
    chapters = [str(Path(c).resolve()) for c in a.chapters]
    last = [str(Path(c).resolve()) for c in a.last]
    missing = [c for c in chapters + last if not Path(c).exists()]
    if missing:
        ap.error(f"no such chapter: {missing[0]}")
    from myst_nb.core.read import is_myst_markdown_notebook

    plain = [c for c in chapters if not is_myst_markdown_notebook(Path(c).read_text())]
    if plain:  # pages without code (the API page, the references): nothing to execute
        print("not notebooks, nothing to execute: " + ", ".join(Path(c).stem for c in plain))
    chapters = [c for c in chapters if c not in plain]
    prev = {}
    if Path(a.previous).exists():
        prev = json.loads(Path(a.previous).read_text()).get("seconds", {})
    first = _order([c for c in chapters if c not in last], prev)

    times, failed = {}, []
    t0 = time.perf_counter()

    def done(r):
        name = Path(r["path"]).stem
        times[name] = round(r["seconds"], 1)
        if r["error"]:
            failed.append(name)
            print(f"\nFAILED {name} ({r['seconds']:.0f} s)\n{r['error']}", file=sys.stderr,
                  flush=True)
            return
        nb = nbformat.reads(r["nb"], as_version=4)
        cache.cache_notebook_bundle(CacheBundleIn(nb, r["path"],
                                                  data={"execution_seconds": r["seconds"]}),
                                    check_validity=False, overwrite=True)
        print(f"passed {name} in {r['seconds']:.0f} s", flush=True)

    with ProcessPoolExecutor(max_workers=a.workers) as pool:
        for stage in (first, last):
            pending = {pool.submit(_execute, p, a.timeout, a.threads) for p in stage}
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    done(f.result())
    wall = time.perf_counter() - t0
    print(f"chapters executed in {wall:.0f} s ({a.workers} workers, {a.threads} thread(s) each): "
          f"{len(times) - len(failed)} ran clean, {len(failed)} raised", flush=True)
    if a.times:
        data = {"machine": {"cpus": os.cpu_count(), "cpu": _cpu_model(),
                            "python": platform.python_version(), "gpu": False},
                "cache": os.environ.get("POSBIAS_CACHE_STATE", "unknown"),
                "date": time.strftime("%Y-%m-%d"), "workers": a.workers, "threads": a.threads,
                "wall": round(wall, 1), "seconds": dict(sorted(times.items())),
                "failed": sorted(failed)}
        Path(a.times).parent.mkdir(parents=True, exist_ok=True)
        Path(a.times).write_text(json.dumps(data, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
