"""The chapter runner of `make notebooks` (tests/nbrun.py): a raising cell fails the run, the
executed notebooks land in the cache the book build reads, the gathering page runs last."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import nbrun  # noqa: E402

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

```{{code-cell}} python
{code}
```
"""


def _chapter(folder: Path, name: str, code: str) -> Path:
    p = folder / f"{name}.md"
    p.write_text(HEADER.format(title=name, code=code))
    return p


@pytest.mark.slow
def test_runner_fails_on_a_raising_cell_caches_the_rest_and_runs_the_gatherer_last(tmp_path,
                                                                                   capsys):
    from jupyter_cache import get_cache

    book = tmp_path / "book"
    book.mkdir()
    marks = tmp_path / "marks"
    marks.mkdir()
    good = [_chapter(book, f"ch{i}", f"import time, pathlib\ntime.sleep(0.5)\n"
                     f"pathlib.Path({str(marks)!r}, 'ch{i}').write_text('done')") for i in range(3)]
    bad = _chapter(book, "bad", "x = 1\nraise RuntimeError('the cell that fails')")
    # the gathering page asserts that every other chapter has already run
    last = _chapter(book, "gather", f"import pathlib\nassert sorted(p.name for p in "
                    f"pathlib.Path({str(marks)!r}).iterdir()) == ['ch0', 'ch1', 'ch2']")
    plain = book / "plain.md"
    plain.write_text("# no code here\n")
    jc, times = tmp_path / "jc", tmp_path / "times.json"
    rc = nbrun.main([*map(str, good), str(bad), str(plain), "--last", str(last), "--workers", "2",
                     "--jupyter-cache", str(jc), "--times", str(times),
                     "--previous", str(tmp_path / "none.json")])
    err = capsys.readouterr().err
    assert rc == 1
    assert "FAILED bad" in err and "the cell that fails" in err
    t = json.loads(times.read_text())
    assert t["failed"] == ["bad"] and set(t["seconds"]) == {"ch0", "ch1", "ch2", "bad", "gather"}
    assert t["workers"] == 2 and t["wall"] > 0
    cache = get_cache(str(jc))
    for p in [*good, last]:  # what the book build will find: the executed notebook, outputs kept
        assert cache.match_cache_notebook(nbrun.read_chapter(p)) is not None, p
    with pytest.raises(KeyError):
        cache.match_cache_notebook(nbrun.read_chapter(bad))


@pytest.mark.slow
def test_runner_passes_when_every_cell_runs(tmp_path):
    ch = _chapter(tmp_path, "one", "print('hello')")
    assert nbrun.main([str(ch), "--workers", "1", "--jupyter-cache", str(tmp_path / "jc"),
                       "--previous", str(tmp_path / "none.json")]) == 0


def test_runner_refuses_a_missing_chapter_and_bad_workers(tmp_path):
    with pytest.raises(SystemExit):
        nbrun.main([str(tmp_path / "missing.md"), "--jupyter-cache", str(tmp_path / "jc")])
    ch = _chapter(tmp_path, "one", "1")
    with pytest.raises(SystemExit):
        nbrun.main([str(ch), "--workers", "0", "--jupyter-cache", str(tmp_path / "jc")])


def test_longest_first():
    assert nbrun._order(["a.md", "b.md", "c.md"], {"a": 5.0, "b": 50.0}) == ["c.md", "b.md",
                                                                           "a.md"]


@pytest.mark.slow
def test_runner_profiles_each_kernel(tmp_path):
    """--profile: the sampler runs inside the kernel and leaves its totals after the last cell;
    the executed notebook is still the chapter's own (the build finds it in the cache)."""
    from jupyter_cache import get_cache

    ch = _chapter(tmp_path, "prof", "import time\nt = time.time()\nwhile time.time() - t < 0.5:\n"
                  "    pass")
    import os

    prof = tmp_path / "prof-out"
    jc = tmp_path / "jc"
    before = {k: os.environ.get(k) for k in ("IPYTHONDIR", "POSBIAS_CACHE_LOG")}
    assert nbrun.main([str(ch), "--workers", "1", "--jupyter-cache", str(jc), "--profile",
                       str(prof), "--previous", str(tmp_path / "none.json")]) == 0
    assert {k: os.environ.get(k) for k in before} == before  # the environment restored
    got = json.loads((prof / "prof.samples.json").read_text())
    assert got["wall"] > 0.4 and sum(got["seconds"].values()) > 0.3
    assert get_cache(str(jc)).match_cache_notebook(nbrun.read_chapter(ch)) is not None


def test_cache_summary_counts_each_kind_of_event(tmp_path):
    from posbias_nb import cache
    import numpy as np

    assert nbrun.cache_summary(None) == "" and nbrun.cache_summary(tmp_path / "none") == ""
    log = tmp_path / "log.jsonl"
    env = {"POSBIAS_CACHE_DIR": str(tmp_path / "cold"), "POSBIAS_CACHE_LOG": str(log)}
    import os

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
