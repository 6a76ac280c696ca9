"""nbval executes the chapters (``make notebooks``): each MyST chapter, read as the book build
reads it, is a notebook whose code cells nbval runs in a fresh kernel, one chapter per worker.

    OMP_NUM_THREADS=1 pytest book/ --nbval-lax -n 2 --dist loadfile -p no:cacheprovider \\
        --nbval-cell-timeout 3600 --chapter-times _build/chapter-times.json \\
        --deselect book/verdicts.md
    pytest book/verdicts.md --nbval-lax ...   # the verdict overview, after the others

Only with ``--nbval`` or ``--nbval-lax`` does this file collect anything.  What it adds to
nbval (0.11):

* **The MyST reader.**  nbval collects ``.ipynb`` files only; a chapter here is read by myst-nb's
  reader (:func:`nbrun.read_chapter`, what ``jupyter-book build`` reads), so its cells and its
  jupyter-cache key are the build's.
* **Outputs into the build's cache.**  When a chapter has run clean, its notebook with every
  cell's outputs and execution count goes into the jupyter-cache (``--jupyter-cache``, default
  ``_build/.jupyter_cache``, which ``make notebooks`` empties first): the build then executes
  nothing, and each chapter runs once per ``make test``.
* **nbval's known faults, avoided.**  Cells are sent with ``store_history=True``, as nbclient
  sends them (nbval sends ``False``, so a trailing ``;`` would no longer hide a return value:
  nbval #194).  A kernel that dies fails its cell at once instead of waiting out the cell
  timeout, and its chapter alone.  After a cell fails, the chapter's later cells are skipped
  instead of run against a broken state.
* **Order.**  Longest chapter first, by the last recorded times
  (``bench/results/chapter-times.json``), so two workers finish together; ``--dist loadfile``
  keeps a chapter's cells on one worker and kernel.
* **The run's record.**  ``--chapter-times FILE``: each chapter's seconds (kernel start to last
  cell), the wall time, the workers and threads, and the chapters that failed, in the format
  ``bench/results/chapter-times.json`` keeps (a second run, the verdict overview, adds to the
  same file).  The cache events of the run (``$POSBIAS_CACHE_LOG``) are summarised at the end.
* ``$NB_PROFILE_DIR``: every kernel samples itself there (``bench/sampler.py``, as
  ``tests/nbrun.py --profile`` does).
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from queue import Empty

import pytest

# the reader, the cache summary, the kernel profiler; the repository root is on the path by
# pytest's own configuration (pyproject.toml: pythonpath)
from tests import nbrun

ROOT = Path(__file__).resolve().parents[1]


def pytest_addoption(parser):
    g = parser.getgroup("posbias chapters")
    g.addoption("--chapter-times", default=None,
                help="write each chapter's seconds here (added to, when the file is there)")
    g.addoption("--jupyter-cache", default=str(ROOT / "_build" / ".jupyter_cache"),
                help="the jupyter-cache the book build reads")
    g.addoption("--chapter-previous", default=str(ROOT / "bench" / "results" /
                                                   "chapter-times.json"),
                help="the recorded times that order the chapters, longest first")


def _active(config) -> bool:
    o = config.option
    return bool(getattr(o, "nbval", False) or getattr(o, "nbval_lax", False))


_ON = {"controller": True}


def pytest_configure(config):
    _ON["controller"] = not hasattr(config, "workerinput")
    if _active(config) and os.environ.get("NB_PROFILE_DIR") and \
            not hasattr(config, "workerinput"):
        nbrun._profile_kernels(Path(os.environ["NB_PROFILE_DIR"]).resolve())
    config._chapter_t0 = time.perf_counter()


def pytest_collect_file(file_path, parent):
    if file_path.suffix != ".md" or not _active(parent.config):
        return None
    from myst_nb.core.read import is_myst_markdown_notebook

    if not is_myst_markdown_notebook(file_path.read_text()):
        return Page.from_parent(parent, path=file_path)  # no code: nothing to execute
    return Chapter.from_parent(parent, path=file_path)


class Page(pytest.File):
    """A page of the book without code (the API page, the references): nothing to run."""

    def collect(self):
        return []


def pytest_collection_modifyitems(session, config, items):
    """Chapters longest first (unknown ones first: they may be long), cells in order."""
    if not _active(config):
        return
    prev = {}
    p = Path(config.option.chapter_previous)
    if p.exists():
        prev = json.loads(p.read_text()).get("seconds", {})
    first = {}
    for i, it in enumerate(items):
        first.setdefault(it.path, i)
    items.sort(key=lambda it: (-prev.get(it.path.stem, float("inf")), first[it.path]))


def _nbval():
    from nbval.plugin import IPyNbCell, IPyNbFile

    return IPyNbCell, IPyNbFile


_Cell, _File = _nbval()


class DeadKernel(RuntimeError):
    """The chapter's kernel died while a cell ran."""


class Chapter(_File):
    """A MyST chapter executed by nbval, its outputs kept for the book build."""

    failed = False
    count = None

    def collect(self):
        from collections import defaultdict as dd

        self.nb = nbrun.read_chapter(Path(self.path))
        n = 0
        for cell in self.nb.cells:
            if cell.cell_type != "code":
                continue
            options = dd(bool)
            options["check"] = False  # --nbval-lax: run, do not compare outputs
            yield ChapterCell.from_parent(self, name=f"Cell {n}", cell_num=n, cell=cell,
                                          options=options)
            n += 1

    def setup(self):
        os.environ["POSBIAS_CACHE_TAG"] = self.path.stem
        self.t0 = time.perf_counter()
        super().setup()
        k = self.kernel

        def execute(source, allow_stdin=None):  # as nbclient sends a cell (nbval #194)
            return k.kc.execute(source, store_history=True, allow_stdin=allow_stdin,
                                stop_on_error=False)

        def await_reply(msg_id, timeout=None):
            """nbval's wait for the cell's reply, which checks every 2 s that the kernel is
            alive (nbval's own waits out the whole cell timeout on a dead kernel)."""
            end = None if timeout is None else time.monotonic() + float(timeout)
            while True:
                if not k.is_alive():
                    raise DeadKernel(f"the kernel of {self.path.name} died")
                try:
                    msg = k.get_message(stream="shell", timeout=2)
                except Empty:
                    if end is not None and time.monotonic() > end:
                        raise
                    continue
                if msg["parent_header"].get("msg_id") == msg_id:
                    if msg["content"]["status"] == "aborted":
                        raise RuntimeError("Kernel aborted execution request")
                    self.count = msg["content"].get("execution_count")
                    return

        k.execute_cell_input = execute
        k.await_reply = await_reply

    def teardown(self):
        super().teardown()
        seconds = time.perf_counter() - getattr(self, "t0", time.perf_counter())
        self.config._chapter_seconds = getattr(self.config, "_chapter_seconds", {})
        self.config._chapter_seconds[self.path.stem] = (round(seconds, 1), self.failed)
        if self.failed:
            return
        import nbformat
        from jupyter_cache import get_cache
        from jupyter_cache.base import CacheBundleIn

        from posbias_nb import cache as pcache

        with pcache.file_lock(Path(self.config.option.jupyter_cache).parent /
                              ".jupyter_cache.lock"):
            jc = get_cache(self.config.option.jupyter_cache)
            nb = nbformat.from_dict(self.nb)
            jc.cache_notebook_bundle(CacheBundleIn(nb, str(self.path),
                                                   data={"execution_seconds": seconds}),
                                     check_validity=False, overwrite=True)


class ChapterCell(_Cell):
    def setup(self):
        if self.parent.failed:
            pytest.skip("an earlier cell of this chapter failed")
        super().setup()

    def runtest(self):
        try:
            super().runtest()
        except BaseException:
            self.parent.failed = True
            raise
        finally:
            outs = getattr(self, "test_outputs", None) or []
            self.cell.outputs = [_output(o) for o in outs]
            self.cell.execution_count = self.parent.count


def _output(o) -> dict:
    """An nbval output as nbformat writes it."""
    import nbformat

    t = o["output_type"]
    if t == "stream":
        return nbformat.v4.new_output("stream", name=o["name"], text=o["text"])
    if t == "error":
        return nbformat.v4.new_output("error", ename=o["ename"], evalue=o["evalue"],
                                      traceback=o["traceback"])
    if t == "execute_result":
        return nbformat.v4.new_output("execute_result", data=o["data"],
                                      metadata=o.get("metadata", {}),
                                      execution_count=o.get("execution_count"))
    return nbformat.v4.new_output("display_data", data=o["data"],
                                  metadata=o.get("metadata", {}))


def pytest_runtest_logreport(report):
    """A failing cell is named at once, with the last line of its error (a recorded
    measurement's disagreement names its namespace, key and the command that re-records),
    instead of only in the summary after every chapter has run."""
    if report.when != "call" or not report.failed or not _ON["controller"] or \
            not report.nodeid.split("::")[0].endswith(".md"):
        return
    text = str(report.longrepr)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    hit = [ln for ln in lines if "RecordedMismatch" in ln or "disagrees" in ln]
    why = (hit or lines or ["(no message)"])[-1]
    import re

    why = re.sub(r"\x1b\[[0-9;]*m", "", why)
    sys.stderr.write(f"\nFAILED {report.nodeid}: {why[:600]}\n")
    sys.stderr.flush()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist: gather each worker's chapter seconds on the controller."""
    got = getattr(node, "workeroutput", {}).get("chapter_seconds")
    if got:
        cfg = node.config
        cfg._chapter_seconds = getattr(cfg, "_chapter_seconds", {})
        cfg._chapter_seconds.update({k: tuple(v) for k, v in json.loads(got).items()})


def pytest_sessionfinish(session, exitstatus):
    cfg = session.config
    if not _active(cfg):
        return
    secs = getattr(cfg, "_chapter_seconds", {})
    if hasattr(cfg, "workerinput"):  # a worker: hand the times to the controller
        cfg.workeroutput["chapter_seconds"] = json.dumps(secs)
        return
    wall = time.perf_counter() - cfg._chapter_t0
    failed = sorted(k for k, (_, f) in secs.items() if f)
    print(f"\nchapters executed in {wall:.0f} s: {len(secs) - len(failed)} ran clean, "
          f"{len(failed)} failed" + (f" ({', '.join(failed)})" if failed else ""), flush=True)
    summary = nbrun.cache_summary(os.environ.get("POSBIAS_CACHE_LOG"))
    if summary:
        print(summary, flush=True)
    out = cfg.option.chapter_times
    if not out:
        return
    p = Path(out)
    from posbias_nb.provenance import machine

    data = json.loads(p.read_text()) if p.exists() else {
        "machine": {"cpus": os.cpu_count(), "cpu": machine.cpu_model(), "id": machine.machine_id(),
                    "python": platform.python_version(), "gpu": False},
        "cache": os.environ.get("POSBIAS_CACHE_STATE", "unknown"),
        "date": time.strftime("%Y-%m-%d"),
        "workers": int(getattr(cfg.option, "numprocesses", None) or 1),
        "threads": int(os.environ.get("OMP_NUM_THREADS", "0") or 0) or None,
        "wall": 0.0, "seconds": {}, "failed": []}
    data["wall"] = round(float(data["wall"]) + wall, 1)
    data["seconds"] = dict(sorted({**data["seconds"],
                                   **{k: s for k, (s, _) in secs.items()}}.items()))
    data["failed"] = sorted(set(data["failed"]) | set(failed))
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(data, indent=2) + "\n")
