"""Where a chapter's seconds go: run chapters as scripts under a stack sampler, and table it.

    python bench/profile_chapters.py measure_init retrieval --label before \
        --out bench/results/profile-before.json

Each chapter (``book/NAME.md``) is turned into a script by jupytext and run in its own Python
process, one chapter after the other (never two at once: two busy processes on 2 cores slow
torch far more than 2x), with the measurement cache of ``$POSBIAS_CACHE_DIR`` (cold if that folder
is new) and ``$POSBIAS_CACHE_LOG`` set, so every cache miss and computation is logged with the
chapter's name.

A background thread samples the main thread's Python stack every 20 ms and charges each sample
to one category, so the categories add up to the wall time (no overlap, no cProfile overhead):

* outermost frame first: ``model_load`` (``models.loading.load`` and the loaders in
  ``models.weights``; its parts ``dequantize`` and ``describe_blocks`` are charged separately
  when they are on the stack), ``generation`` (``measure.scoring.generate_greedy*``, forward
  passes included), ``import``;
* else innermost frame first: ``backward`` (``torch.autograd``), ``forward`` (a ``torch.nn``
  module call), ``sympy``, ``stats`` (``posbias_nb.stats``, ``posbias_nb.metrics``, scipy),
  ``plots`` (matplotlib);
* else ``other`` (tokenization, Python loops, numpy).

Counts: model loads, forward passes (top-level calls of a transformers model), backward passes
(``torch.autograd.grad``/``backward`` calls), cache computations and hits by namespace, and the
keys computed more than once (work done twice).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATEGORIES = ("model_load", "dequantize", "describe_blocks", "generation", "import", "backward",
              "forward", "sympy", "stats", "plots", "other")

# the code that runs inside the chapter's process (python -c): sampler, counters, the script
_INNER = r'''
import builtins, importlib.util, io, json, os, runpy, sys
script, out, bench = sys.argv[1], sys.argv[2], sys.argv[3]
spec = importlib.util.spec_from_file_location("sampler", os.path.join(bench, "sampler.py"))
sampler = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sampler)
dump = sampler.install(out)
def flush():
    import matplotlib.pyplot as plt
    for n in plt.get_fignums():
        plt.figure(n).savefig(io.BytesIO(), format="png", bbox_inches="tight")
    plt.close("all")
builtins.__posbias_flush = flush
try:
    runpy.run_path(script, run_name="__main__")
finally:
    dump()
    from posbias_nb import notebook as _nb
    d = json.load(open(out))
    d["glue"] = {k: repr(v) for k, v in _nb._GLUED.items()}
    json.dump(d, open(out, "w"))
'''


def run_chapter(name: str, work: Path, log: Path) -> dict:
    script = work / f"{name}.py"
    subprocess.run([sys.executable, "-m", "jupytext", "--quiet", "--to", "py:percent", "-o",
                    str(script), str(ROOT / "book" / f"{name}.md")], check=True)
    # a notebook renders every open figure to PNG at the end of each cell (the inline backend):
    # the script does the same, so drawing is charged as it is in the book
    cells = script.read_text().split("\n# %%")
    script.write_text("\n__posbias_flush()\n# %%".join(cells) + "\n__posbias_flush()\n")
    env = dict(os.environ, POSBIAS_CACHE_LOG=str(log), POSBIAS_CACHE_TAG=name, MPLBACKEND="Agg",
               PYTHONPATH=str(ROOT / "tests"))
    out = work / f"{name}.samples.json"
    r = subprocess.run([sys.executable, "-c", _INNER, str(script), str(out),
                        str(ROOT / "bench")], cwd=work, env=env)
    if r.returncode:
        raise SystemExit(f"chapter {name} failed (exit {r.returncode})")
    d = json.loads(out.read_text())
    (work / f"{name}.glue.json").write_text(json.dumps(d.get("glue", {}), indent=0,
                                                       sort_keys=True))
    return _row(d)


def _row(d: dict) -> dict:
    secs = {c: round(d["seconds"].get(c, 0.0), 1) for c in CATEGORIES}
    return {"wall": round(d["wall"], 1), "seconds": secs, "counts": d["counts"]}


def from_kernels(folder: Path) -> dict:
    """The rows of a ``make notebooks NB_PROFILE=FOLDER`` run: one ``NAME.samples.json`` per
    chapter, written by the sampler inside its kernel."""
    return {p.name[: -len(".samples.json")]: _row(json.loads(p.read_text()))
            for p in sorted(folder.glob("*.samples.json"))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("chapters", nargs="*")
    ap.add_argument("--label", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default=str(ROOT / "_build" / "profile"))
    ap.add_argument("--from-kernels", default=None,
                    help="summarize the samples of a make notebooks NB_PROFILE=FOLDER run in this folder "
                         "(its cache log: cache.jsonl there) instead of running chapters")
    a = ap.parse_args(argv)
    if a.from_kernels:
        work = Path(a.from_kernels)
        log = work / "cache.jsonl"
        rows = from_kernels(work)
    else:
        work = Path(a.work)
        work.mkdir(parents=True, exist_ok=True)
        log = work / f"cache-{a.label}.jsonl"
        log.unlink(missing_ok=True)
        rows = {}
        for ch in a.chapters:
            rows[ch] = run_chapter(ch, work, log)
            print(ch, json.dumps(rows[ch]), flush=True)
    events = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    computed = defaultdict(list)
    for e in events:
        if e["event"] == "computed":
            computed[(e["ns"], e["key"])].append(e["tag"])
    for ch in rows:
        mine = [e for e in events if e["tag"] == ch]
        rows[ch]["cache"] = {
            "computed": dict(Counter(e["ns"] for e in mine if e["event"] == "computed")),
            "computed_seconds": round(sum(e["seconds"] for e in mine
                                          if e["event"] == "computed"), 1),
            "hits": dict(Counter(e["ns"] for e in mine if e["event"] == "hit")),
        }
    twice = [{"ns": ns, "key": k, "chapters": tags} for (ns, k), tags in computed.items()
             if len(tags) > 1]
    data = {"label": a.label, "date": time.strftime("%Y-%m-%d"),
            "cache": os.environ.get("POSBIAS_CACHE_STATE", "unknown"), "cpus": os.cpu_count(),
            "total_wall": round(sum(r["wall"] for r in rows.values()), 1),
            "source": "kernels of make notebooks" if a.from_kernels else "chapters as scripts",
            "chapters": rows, "computed_twice": twice,
            "categories": "charged by a 20 ms stack sampler, no overlap (bench/profile_chapters.py)"}
    Path(a.out).write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
