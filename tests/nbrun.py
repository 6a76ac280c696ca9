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
* ``--profile DIR``: every kernel runs ``bench/sampler.py`` (from an IPython startup file):
  where its seconds go, its model loads, forward and backward passes, in
  ``DIR/NAME.samples.json``, and every cache event in ``DIR/cache.jsonl``;
  ``bench/profile_chapters.py --from-kernels DIR`` tables them.
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


_STARTUP = """
import os as __o, sys as __s
if __o.environ.get("POSBIAS_PROFILE_DIR"):
    __s.path.insert(0, {bench!r})
    import sampler as __posbias_sampler
    __posbias_dump = __posbias_sampler.install(__o.path.join(
        __o.environ["POSBIAS_PROFILE_DIR"], __o.environ["POSBIAS_CACHE_TAG"] + ".samples.json"))
    get_ipython().events.register("post_run_cell", lambda *a: __posbias_dump())
"""


def _profile_kernels(folder: Path) -> None:
    """Every kernel started from here samples itself into ``folder`` (an IPython startup file
    in a private IPYTHONDIR; the worker processes inherit the environment)."""
    shutil.rmtree(folder, ignore_errors=True)
    startup = folder / ".ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-posbias-sampler.py").write_text(_STARTUP.format(bench=str(ROOT / "bench")))
    os.environ.update(IPYTHONDIR=str(folder / ".ipython"), POSBIAS_PROFILE_DIR=str(folder),
                      POSBIAS_CACHE_LOG=str(folder / "cache.jsonl"))


def cache_summary(log) -> str:
    """One paragraph from a cache log (``POSBIAS_CACHE_LOG``): how many measurements were
    computed (and their seconds, by namespace), read from the live cache, read from the recorded
    ones, and verified against them.  Empty without a log."""
    if not log or not Path(log).exists():
        return ""
    from collections import Counter, defaultdict

    n, secs = Counter(), defaultdict(float)
    for line in Path(log).read_text().splitlines():
        e = json.loads(line)
        n[e["event"]] += 1
        if e["event"] == "computed":
            secs[e["ns"]] += e["seconds"]
    top = ", ".join(f"{ns} {sec:.0f} s" for ns, sec in
                    sorted(secs.items(), key=lambda x: -x[1])[:8])
    return (f"measurements: {n['computed']} computed ({sum(secs.values()):.0f} s"
            + (f": {top}" if top else "") + f"), {n['hit']} read from the cache, "
            f"{n['recorded']} read from recorded/, {n['verified']} verified against it, "
            f"{n['mismatch']} disagreeing")


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
    ap.add_argument("--profile", default=None, help="sample every kernel into this folder")
    a = ap.parse_args(argv)
    if a.workers < 1 or a.threads < 1:
        ap.error(f"--workers and --threads must be at least 1, got {a.workers}, {a.threads}")

    saved = {k: os.environ.get(k) for k in ("IPYTHONDIR", "POSBIAS_PROFILE_DIR",
                                              "POSBIAS_CACHE_LOG")}
    try:
        if a.profile:
            _profile_kernels(Path(a.profile).resolve())
        return _run_all(a, chapters_of(a, ap))
    finally:  # the environment as it was (the runner may be called from a test)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def chapters_of(a, ap):
    chapters = [str(Path(c).resolve()) for c in a.chapters]
    last = [str(Path(c).resolve()) for c in a.last]
    missing = [c for c in chapters + last if not Path(c).exists()]
    if missing:
        ap.error(f"no such chapter: {missing[0]}")
    return chapters, last


def _run_all(a, chapter_lists) -> int:
    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    chapters, last = chapter_lists
    shutil.rmtree(a.jupyter_cache, ignore_errors=True)
    cache = get_cache(a.jupyter_cache)
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
    summary = cache_summary(os.environ.get("POSBIAS_CACHE_LOG"))
    if summary:
        print(summary, flush=True)
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
