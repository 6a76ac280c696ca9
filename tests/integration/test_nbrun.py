"""The chapters' runner of `make notebooks`: nbval under pytest with book/conftest.py, which reads
each MyST chapter as the build does.  A raising cell fails its chapter and skips the chapter's
later cells; a dead kernel fails its chapter at once and the others still run; the executed
notebooks land in the cache the book build reads; a trailing ``;`` hides a value (cells sent
with store_history, as nbclient sends them); the times file; the kernel profiler."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import nbrun  # tests/, beside this file

ROOT = Path(__file__).resolve().parents[2]

HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# {title}

"""


def _chapter(folder: Path, name: str, *cells: str) -> Path:
    p = folder / f"{name}.md"
    p.write_text(HEADER.format(title=name) + "".join(f"```{{code-cell}} python\n{c}\n```\n\n"
                                                     for c in cells))
    return p


_CONFTEST = f"""import importlib.util
_s = importlib.util.spec_from_file_location("posbias_book_conftest", {str(ROOT / "book" / "conftest.py")!r})
_m = importlib.util.module_from_spec(_s)
_s.loader.exec_module(_m)
globals().update({{k: v for k, v in vars(_m).items() if k.startswith("pytest_")}})
"""


def _run(tmp_path, chapters, *extra, workers=2, env=None):
    """book/conftest.py as make notebooks runs it (the chapters here live in a folder of their
    own, whose conftest.py is book/conftest.py's hooks)."""
    jc, times = tmp_path / "jc", tmp_path / "times.json"
    for d in {Path(c).parent for c in chapters}:
        (d / "conftest.py").write_text(_CONFTEST)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "--rootdir", str(tmp_path), "-c", os.devnull, "-o", f"pythonpath={ROOT}",
           "--nbval-lax",
           "--nbval-cell-timeout", "120", "--jupyter-cache", str(jc), "--chapter-times",
           str(times), "--chapter-previous", str(tmp_path / "none.json"),
           *(["-n", str(workers), "--dist", "loadfile"] if workers > 1 else []), *extra,
           *map(str, chapters)]
    e = {**os.environ, **(env or {})}
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=e)
    return r, jc, times


@pytest.mark.slow
def test_a_failing_cell_or_a_dead_kernel_fails_its_chapter_alone(tmp_path):
    from jupyter_cache import get_cache

    book = tmp_path / "book"
    book.mkdir()
    good = [_chapter(book, f"ch{i}", "x = 41", "x + 1;", "x + 1") for i in range(2)]
    bad = _chapter(book, "bad", "x = 1", "raise RuntimeError('the cell that fails')",
                   "raise SystemExit('a cell after the failure ran')")
    dead = _chapter(book, "dead", "import os", "os._exit(3)", "1")
    plain = book / "plain.md"
    plain.write_text("# no code here\n")
    t0 = time.monotonic()
    r, jc, times = _run(tmp_path, [*good, bad, dead, plain])
    took = time.monotonic() - t0
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "the cell that fails" in out and "a cell after the failure ran" not in out
    assert "died" in out and took < 100  # not the cell timeout (120 s) waited out
    # each failing cell named as it fails, with its error's last line
    assert "FAILED book/bad.md::Cell 1: RuntimeError: the cell that fails" in r.stderr
    t = json.loads(times.read_text())
    assert t["failed"] == ["bad", "dead"] and set(t["seconds"]) == {"ch0", "ch1", "bad", "dead"}
    assert t["workers"] == 2 and t["wall"] > 0
    cache = get_cache(str(jc))
    for p in good:  # what the book build will find: the executed notebook, outputs kept
        nb = cache.get_cache_bundle(cache.match_cache_notebook(nbrun.read_chapter(p)).pk).nb
        outs = [c.outputs for c in nb.cells if c.cell_type == "code"]
        # the trailing ';' hides its value, as in the book build (nbval #194)
        assert outs[1] == [] and outs[2][0]["data"]["text/plain"] == "42", outs
        assert [c.execution_count for c in nb.cells if c.cell_type == "code"] == [1, 2, 3]
    for p in (bad, dead):
        with pytest.raises(KeyError):
            cache.match_cache_notebook(nbrun.read_chapter(p))
    # a second run (the verdict overview, after the others) adds to the times and the cache
    r2, _, _ = _run(tmp_path, [_chapter(book, "gather", "1")], workers=1)
    assert r2.returncode == 0, r2.stdout + r2.stderr
    t2 = json.loads(times.read_text())
    assert set(t2["seconds"]) == {"ch0", "ch1", "bad", "dead", "gather"}
    assert t2["failed"] == ["bad", "dead"] and t2["wall"] > t["wall"]
    assert cache.match_cache_notebook(nbrun.read_chapter(good[0])) is not None


@pytest.mark.slow
def test_the_runner_profiles_each_kernel(tmp_path):
    """NB_PROFILE_DIR: the sampler runs inside the kernel and leaves its totals after the last
    cell; the executed notebook is still the chapter's own (the build finds it in the cache)."""
    from jupyter_cache import get_cache

    ch = _chapter(tmp_path, "prof", "import time\nt = time.time()\nwhile time.time() - t < 0.5:"
                  "\n    pass")
    prof = tmp_path / "prof-out"
    r, jc, _ = _run(tmp_path, [ch], workers=1, env={"NB_PROFILE_DIR": str(prof)})
    assert r.returncode == 0, r.stdout + r.stderr
    got = json.loads((prof / "prof.samples.json").read_text())
    assert got["wall"] > 0.4 and sum(got["seconds"].values()) > 0.3
    assert get_cache(str(jc)).match_cache_notebook(nbrun.read_chapter(ch)) is not None


def test_cache_summary_counts_each_kind_of_event(tmp_path):
    import numpy as np

    from posbias_nb import cache

    assert nbrun.cache_summary(None) == "" and nbrun.cache_summary(tmp_path / "none") == ""
    log = tmp_path / "log.jsonl"
    env = {"POSBIAS_CACHE_DIR": str(tmp_path / "cold"), "POSBIAS_CACHE_LOG": str(log)}

    old = {k: os.environ.get(k) for k in (*env, "POSBIAS_RECORDED_DIR")}
    try:
        os.environ.update(env)
        cache.cached("ns-a", {"x": 1}, lambda: {"a": np.zeros(2)})   # computed
        cache.cached("ns-a", {"x": 1}, lambda: {"a": np.zeros(2)})   # hit
        os.environ["POSBIAS_RECORDED_DIR"] = str(tmp_path / "cold")
        os.environ["POSBIAS_CACHE_DIR"] = str(tmp_path / "live")
        cache.cached("ns-a", {"x": 1}, lambda: {"a": np.zeros(2)})   # recorded
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    s = nbrun.cache_summary(log)
    assert s.startswith("measurements: 1 computed") and "ns-a" in s
    assert "1 read from the cache" in s and "1 read from recorded/" in s and "0 disagreeing" in s
