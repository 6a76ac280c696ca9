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

# the code that runs inside the chapter's process (python -c): sampler, counters, then the script
_INNER = r'''
import json, os, runpy, sys, threading, time
from collections import Counter
script, out = sys.argv[1], sys.argv[2]
main = threading.main_thread().ident
samples = Counter()
stop = threading.Event()

def classify(frame):
    stack = []
    while frame is not None:
        stack.append((frame.f_code.co_filename, frame.f_code.co_name))
        frame = frame.f_back
    stack.reverse()  # outermost first
    for f, n in stack:
        if f.endswith("posbias_nb/models/loading.py") and n in ("load", "load_encoder") or \
           f.endswith("posbias_nb/models/weights.py") and n in ("load_pretrained", "from_pretrained_dir"):
            if any(g.endswith("posbias_nb/models/weights.py") and m == "dequantized" for g, m in stack):
                return "dequantize"
            if any(g.endswith("posbias_nb/models/blocks.py") for g, m in stack):
                return "describe_blocks"
            return "model_load"
        if f.endswith("posbias_nb/measure/scoring.py") and n.startswith("generate_greedy"):
            return "generation"
        if f.startswith("<frozen importlib._bootstrap") and n == "_find_and_load":
            return "import"
    for f, n in reversed(stack):
        if "/torch/autograd/" in f:
            return "backward"
        if "/torch/nn/modules/" in f or "/transformers/models/" in f:
            return "forward"
        if "/sympy/" in f or "/mpmath/" in f:
            return "sympy"
        if f.endswith(("posbias_nb/stats.py", "posbias_nb/metrics.py")) or "/scipy/" in f:
            return "stats"
        if "/matplotlib/" in f:
            return "plots"
    return "other"

def sampler():
    last = time.perf_counter()
    while not stop.wait(0.02):
        now = time.perf_counter()
        fr = sys._current_frames().get(main)
        if fr is not None:
            samples[classify(fr)] += now - last
        last = now

counts = Counter()
import torch
from torch.nn.modules.module import (register_module_forward_hook,
                                     register_module_forward_pre_hook)
depth = [0]
def pre(mod, args):
    if getattr(mod, "_is_hf_initialized", None) is not None or hasattr(mod, "config"):
        if depth[0] == 0:
            counts["forward_passes"] += 1
        depth[0] += 1
def post(mod, args, output):
    if getattr(mod, "_is_hf_initialized", None) is not None or hasattr(mod, "config"):
        depth[0] -= 1
register_module_forward_pre_hook(pre)
register_module_forward_hook(post)
_grad, _backward = torch.autograd.grad, torch.autograd.backward
def grad(*a, **k):
    counts["backward_passes"] += 1
    return _grad(*a, **k)
def backward(*a, **k):
    counts["backward_passes"] += 1
    return _backward(*a, **k)
torch.autograd.grad, torch.autograd.backward = grad, backward
import posbias_nb.models.loading as _ld
_load = _ld.load
def load(*a, **k):
    counts["model_loads"] += 1
    return _load(*a, **k)
_ld.load = load
import posbias_nb.models as _m
_m.load = load
import builtins, io
def flush():
    import matplotlib.pyplot as plt
    for n in plt.get_fignums():
        plt.figure(n).savefig(io.BytesIO(), format="png", bbox_inches="tight")
    plt.close("all")
builtins.__posbias_flush = flush
th = threading.Thread(target=sampler, daemon=True)
t0 = time.perf_counter()
th.start()
try:
    runpy.run_path(script, run_name="__main__")
finally:
    stop.set(); th.join()
    wall = time.perf_counter() - t0
    from posbias_nb import notebook as _nb
    glued = {k: repr(v) for k, v in _nb._GLUED.items()}
    json.dump({"wall": wall, "seconds": dict(samples), "counts": dict(counts), "glue": glued},
              open(out, "w"))
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
    r = subprocess.run([sys.executable, "-c", _INNER, str(script), str(out)], cwd=work, env=env)
    if r.returncode:
        raise SystemExit(f"chapter {name} failed (exit {r.returncode})")
    d = json.loads(out.read_text())
    secs = {c: round(d["seconds"].get(c, 0.0), 1) for c in CATEGORIES}
    (work / f"{name}.glue.json").write_text(json.dumps(d.get("glue", {}), indent=0,
                                                       sort_keys=True))
    return {"wall": round(d["wall"], 1), "seconds": secs, "counts": d["counts"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("chapters", nargs="+")
    ap.add_argument("--label", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default=str(ROOT / "_build" / "profile"))
    a = ap.parse_args(argv)
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
            "chapters": rows, "computed_twice": twice,
            "categories": "charged by a 20 ms stack sampler, no overlap (bench/profile_chapters.py)"}
    Path(a.out).write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
