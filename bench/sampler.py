"""The stack sampler and counters of bench/profile_chapters.py, for a script or a kernel.

``install(out)`` starts a thread that samples the main thread's Python stack every 20 ms and
charges each sample to one category (bench/profile_chapters.py says which), counts model loads,
forward passes and backward passes, and returns ``dump()``, which writes ``{"wall", "seconds",
"counts"}`` to ``out``.  In a Jupyter kernel (``make notebooks NB_PROFILE=DIR`` installs it from
an IPython startup file) the dump runs after every cell, so the file is complete when the
kernel stops.
"""
import json
import sys
import threading
import time
from collections import Counter

samples = Counter()
counts = Counter()
stop = threading.Event()
_t0 = [None]


main = threading.main_thread().ident

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


def _install_counters():
    import torch
    from torch.nn.modules.module import (register_module_forward_hook,
                                         register_module_forward_pre_hook)

    depth = [0]

    def is_model(mod):
        return hasattr(mod, "config")

    def pre(mod, args):
        if is_model(mod):
            if depth[0] == 0:
                counts["forward_passes"] += 1
            depth[0] += 1

    def post(mod, args, output):
        if is_model(mod):
            depth[0] = max(0, depth[0] - 1)

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
    import posbias_nb.models as _m
    import posbias_nb.models.loading as _ld

    _load = _ld.load

    def load(*a, **k):
        counts["model_loads"] += 1
        return _load(*a, **k)

    _ld.load = _m.load = load


def install(out):
    """Start the sampler and the counters; return ``dump()``, which writes the totals so far."""
    _install_counters()
    _t0[0] = time.perf_counter()
    threading.Thread(target=sampler, daemon=True).start()

    def dump():
        with open(out, "w") as f:
            json.dump({"wall": time.perf_counter() - _t0[0], "seconds": dict(samples),
                       "counts": dict(counts)}, f)
    return dump
