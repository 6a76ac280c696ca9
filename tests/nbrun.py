"""What the chapters' runner (``book/conftest.py``, nbval under pytest) shares with the tests
and the benchmarks: a MyST chapter read as the book build reads it (myst-nb's reader, so its
jupyter-cache key is the build's), the one-paragraph summary of a run's cache events, the CPU's
name for the times file, and the kernel profiler behind ``make notebooks NB_PROFILE=DIR``
(every kernel runs ``bench/sampler.py`` from an IPython startup file: where its seconds go, its
model loads, forward and backward passes, in ``DIR/NAME.samples.json``, and every cache event in
``DIR/cache.jsonl``; ``bench/profile_chapters.py --from-kernels DIR`` tables them).

It was the runner itself until nbval took over (issue 44): jupyter-cache's executor in a
process pool, which aborted the whole run with a traceback when a kernel died.
"""
from __future__ import annotations

import json
import os
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


_STARTUP = """
import os as __o
if __o.environ.get("POSBIAS_PROFILE_DIR"):
    import importlib.util as __u
    __spec = __u.spec_from_file_location("posbias_sampler", {sampler!r})
    __posbias_sampler = __u.module_from_spec(__spec)
    __spec.loader.exec_module(__posbias_sampler)
    __posbias_dump = __posbias_sampler.install(__o.path.join(
        __o.environ["POSBIAS_PROFILE_DIR"], __o.environ["POSBIAS_CACHE_TAG"] + ".samples.json"))
    get_ipython().events.register("post_run_cell", lambda *a: __posbias_dump())
"""


def _profile_kernels(folder: Path) -> None:
    """Every kernel started from here samples itself into ``folder`` (an IPython startup file
    in a private IPYTHONDIR; the worker processes inherit the environment).  What the folder
    holds already stays (the verdict overview runs in a second pytest run, after the others)."""
    startup = folder / ".ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-posbias-sampler.py").write_text(
        _STARTUP.format(sampler=str(ROOT / "bench" / "sampler.py")))
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
