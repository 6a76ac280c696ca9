r"""Born at the scale people use: 7B-class architectures at random init, a width ladder on the
CPU and the full width on a GPU.

Chapter :ref:`ch-scale`.  The design is one frozen object, :data:`DESIGN`, recorded in the
registry (:mod:`posbias_nb.experiments.base.design`) before any of its data:

* five published configurations (:data:`posbias_nb.models.SCALE_MODELS`: Llama-3.1-8B,
  Qwen2.5-7B, Mistral-7B-v0.1, Gemma-3-4B and -12B), each at three hidden sizes of its **width
  ladder** (:func:`posbias_nb.models.at_width`: depth, head counts and layout kept, head and MLP
  widths scaled), under two **initialisers**: transformers' own (``"hf"``, every weight with
  std 0.02 at every width) and a width-aware one (``"fan-in"``, std ``width ** -0.5``);
* per (configuration, width, initialiser), the hidden-state influence of the last token
  (:func:`posbias_nb.measure.cached.profile`) on the design's text windows, and the layout's
  exact row (:func:`posbias_nb.theory.layout_influence`, the layout checked by behaviour,
  :func:`layout`) at the :math:`\alpha` fitted on the mean profile;
* four **shape statistics** per window (:func:`window_stats`): the Spearman correlation of the
  window's profile with that row, the :math:`\alpha` fitted on the window alone, and
  :math:`\log_{10}` of the first-to-middle and last-to-middle ratios (the middle of
  :func:`posbias_nb.metrics.regions`).

The claims (:func:`decisions`), declared before the data: for each initialiser, one family under
Holm's correction of one claim per configuration and statistic, "the statistic at the widest
rung minus at the narrowest lies within the design's margin", an equivalence claim
(:func:`posbias_nb.stats.holm_family`, ``direction="within"``) over the windows, paired (the
same token windows at every width).  "holds": the shape does not depend on width within the
margin; "fails": it moves by more than the margin; otherwise inconclusive.

On a GPU (:func:`gpu_profile`, ``bench/gpu_born.py``), the same configurations at their full
width and at the design's long lengths, with the time of the profile against its bare floor
(:func:`floor_seconds`); those entries are recorded with their device and cannot be re-measured
on a CPU: ``make test`` checks their provenance and re-measures their reduced-width twins
(:data:`posbias_nb.provenance.plan.GPU_MEASURED`).
"""
from __future__ import annotations

import functools
import time

import numpy as np

from ... import cache, metrics, models, stats, theory
from ...measure import cached, entry
from ..base.design import Design, check

__all__ = ["DESIGN", "ladder", "spec", "layout", "measure", "twin_key", "row", "window_stats", "cell",
           "widths_table", "decisions", "valley", "gpu_plan", "gpu_inputs", "gpu_params",
           "gpu_profile", "floor_seconds", "gpu_cell", "unverified", "STATS", "STAT_WORDS",
           "GPU_GRAPH_BUDGET", "configurations", "ladder_summary", "verdict_rows", "INIT_WORDS",
           "gpu_runs", "gpu_status",
           "gpu_summary", "gpu_provenance", "BINS"]

DEFINITION = "scale-v1"  # bump when a definition below changes (the design has its own hash)

#: The four shape statistics of a window's profile (:func:`window_stats`).
STATS = ("spearman", "alpha", "first_middle", "last_middle")
#: Each statistic in words, for the chapter's sentences.
STAT_WORDS = {"spearman": "the Spearman correlation with the layout row",
              "alpha": "the fitted α",
              "first_middle": "log10 first/middle",
              "last_middle": "log10 last/middle"}

#: The study's design, fixed before its data (registry ``scale``).
DESIGN = Design("scale", dict(
    # hidden sizes of each configuration's ladder: a 1/32, 1/16 and 1/8 of the published width
    # where the heads divide it (Gemma-3-12B's 16 heads of a width/15 need multiples of 240)
    ladder={"llama3.1-8b": [128, 256, 512], "qwen2.5-7b": [112, 224, 448],
            "mistral-7b": [128, 256, 512], "gemma3-4b": [80, 160, 320],
            "gemma3-12b": [240, 480, 720]},
    inits=["hf", "fan-in"],
    length=1024, windows=8, probes=2, seed=0,
    # the layout is checked by behaviour on the narrowest rung at this length (a window of
    # this length or more is invisible there and kept as the config says)
    check_length=1025,
    # equivalence margins of the widest-minus-narrowest difference, per statistic
    margins={"spearman": 0.05, "alpha": 0.05, "first_middle": 0.30103, "last_middle": 0.30103},
    family_alpha=0.05,
    # full width on a GPU, float32 with TF32 off: the items in this order; no item starts
    # after `start_by` seconds of the run, nor one whose predicted end (the same
    # configuration's time at the shorter length times `long_factor`, or nothing known) falls
    # after `end_by`; the profile's time against its bare floor (one forward and `probes`
    # plain backward passes on the same window) for `floor`, run after the first `floor_after`
    # items
    gpu=dict(windows={"8192": 2, "32768": 2}, probes=2, seed=0,
             items=[["mistral-7b", 8192], ["gemma3-4b", 8192], ["mistral-7b", 32768],
                    ["gemma3-4b", 32768], ["llama3.1-8b", 8192], ["qwen2.5-7b", 8192],
                    ["gemma3-12b", 8192], ["llama3.1-8b", 32768], ["qwen2.5-7b", 32768],
                    ["gemma3-12b", 32768]],
             floor=dict(model="gemma3-4b", length=8192), floor_after=2,
             start_by=400, end_by=540, long_factor=8),
))


def _checked():
    check(DESIGN)
    return DESIGN


def ladder(config: str) -> list[int]:
    """The design's widths of ``config``, narrowest first."""
    d = _checked()["ladder"]
    if config not in d:
        raise ValueError(f"unknown configuration {config!r}: use one of {', '.join(d)}")
    return [int(w) for w in d[config]]


def spec(config: str, width: int, init: str) -> models.ModelSpec:
    """The random-init model of one rung (:func:`posbias_nb.models.at_width`)."""
    if init not in DESIGN["inits"]:
        raise ValueError(f"init must be one of {', '.join(DESIGN['inits'])}, got {init!r}")
    return models.at_width(config, int(width), init)


def layout(config: str) -> theory.Layout:
    """The configuration's layout, decided by behaviour on its narrowest rung
    (:func:`posbias_nb.models.model_layout` at the design's ``check_length``), cached; the
    layers whose window the check cannot see at that length are as the config declares them
    (:func:`unverified`)."""
    s = spec(config, ladder(config)[0], "hf")
    info = models.describe(s)
    L = int(DESIGN["check_length"])
    params = {"model": s.name, "fingerprint": info["fingerprint"], "length": L, "def": DEFINITION,
              **entry.library_versions()}

    def compute():
        m, _, _ = models.load(s, weights="random", seed=int(DESIGN["seed"]), attn="sdpa")
        found = models.model_layout(m, length=L)
        if any(x.sink is not None for x in found.layers):
            raise RuntimeError(f"{config}: a sink was found, which the published config has not")
        return {"layout": np.asarray(str(found))}

    return theory.parse_layout(str(cache.cached("scale-layout", params, compute)["layout"]))


def unverified(config: str) -> list[int]:
    """The layers of ``config`` whose window the layout check cannot see (window >= its
    length): they are as the config declares them."""
    return models.attention_layout.unverified(layout(config), int(DESIGN["check_length"]))


def measure(config: str, width: int, init: str) -> np.ndarray:
    """The rung's profiles, ``(windows, L)``: hidden-state influence of the last token at random
    init (seed, windows and probes of the design), through the cache (namespace ``profile``)."""
    d = _checked()
    res = cached.profile(spec(config, width, init), "random", length=int(d["length"]),
                         probes=int(d["probes"]), batch=int(d["windows"]), seed=int(d["seed"]),
                         progress=False)
    return np.asarray(res["per_sequence"], dtype=np.float64)


def twin_key(config: str) -> str:
    """The ``profile`` cache key of ``config``'s narrowest rung under transformers' initialiser:
    the CPU twin that ``make test`` re-measures in place of the configuration's GPU entries."""
    d = _checked()
    return cached.profile_key(spec(config, ladder(config)[0], "hf"), "random",
                              length=int(d["length"]), probes=int(d["probes"]),
                              batch=int(d["windows"]), seed=int(d["seed"]))


def row(lay: theory.Layout, P: np.ndarray) -> dict:
    r"""The layout's row at the :math:`\alpha` fitted on the mean of ``P`` (reachable
    positions), both normalised there."""
    P = np.asarray(P, dtype=np.float64)
    L = P.shape[1]
    mask = theory.log_layout_influence(lay, L, 0.5) > -np.inf
    p = P.mean(0)
    a = metrics.fit_layout_alpha(p, lay, mask)
    t = theory.layout_influence(lay, L, a)
    return dict(mask=mask, p=p / p[mask].sum(), alpha=a, row=t / t[mask].sum(), L=L)


def window_stats(P: np.ndarray, lay: theory.Layout) -> dict:
    """The four shape statistics (:data:`STATS`) of each window's profile in ``P``: Spearman
    with the layout row at the mean profile's :math:`\\alpha`, the window's own fitted
    :math:`\\alpha`, and log10 of its first-to-middle and last-to-middle ratios."""
    P = np.asarray(P, dtype=np.float64)
    r = row(lay, P)
    m = r["mask"]
    reg = metrics.regions(r["L"])
    mid = P[:, reg.middle].mean(1)
    return dict(
        spearman=np.array([metrics.spearman(w[m], r["row"][m]) for w in P]),
        alpha=np.array([metrics.fit_layout_alpha(w, lay, m) for w in P]),
        first_middle=np.log10(P[:, 0] / mid),
        last_middle=np.log10(P[:, -1] / mid))


def valley(P: np.ndarray) -> np.ndarray:
    """Per window, where the profile is lowest before the last token, as a fraction of the
    length (position j = 1..L-1 over L)."""
    P = np.asarray(P, dtype=np.float64)
    return (np.argmin(P[:, :-1], axis=1) + 1) / P.shape[1]


@functools.lru_cache(maxsize=64)
def cell(config: str, width: int, init: str) -> dict:
    """One rung: profiles, the fitted row, each statistic per window with its 95% t interval
    over the windows, and the valley's position.  Memoised (the table and the figure read the
    same rungs; the arrays are not to be written to)."""
    P = measure(config, width, init)
    lay = layout(config)
    out = dict(P=P, layout=lay, **row(lay, P))
    ws = window_stats(P, lay)
    for k in STATS:
        out[k] = ws[k]
        out[f"{k}_ci"] = stats.mean_interval(ws[k])
    out["valley"] = valley(P)
    out["valley_ci"] = stats.mean_interval(out["valley"])
    return out


def widths_table(init: str) -> list[dict]:
    """One row per (configuration, width) of ``init``: each statistic's 95% interval."""
    rows = []
    for c in DESIGN["ladder"]:
        for w in ladder(c):
            x = cell(c, w, init)
            rows.append(dict(config=c, width=w, init=init, alpha_mean=x["alpha"],
                             **{f"{k}_ci": x[f"{k}_ci"] for k in STATS},
                             valley_ci=x["valley_ci"]))
    return rows


def decisions(init: str) -> dict:
    """The pre-declared family of ``init`` (module docstring), decided with Holm's correction:
    ``{"<config>:<stat>": holm_family's result}``."""
    d = _checked()
    if init not in d["inits"]:
        raise ValueError(f"init must be one of {', '.join(d['inits'])}, got {init!r}")
    claims = {}
    for c in d["ladder"]:
        lay = layout(c)
        w = ladder(c)
        lo = window_stats(measure(c, w[0], init), lay)
        hi = window_stats(measure(c, w[-1], init), lay)
        for k in STATS:
            m = float(d["margins"][k])
            claims[f"{c}:{k}"] = dict(x=hi[k] - lo[k], direction="within", band=(-m, m))
    return stats.holm_family(claims, alpha=float(d["family_alpha"]))


# --------------------------------------------------------------------------------------------
# Full width on a GPU (bench/gpu_born.py): recorded with their device, never re-measured on a CPU

def gpu_plan() -> list[tuple[str, int]]:
    """The GPU run's (configuration, length) items, in the design's order."""
    return [(str(c), int(L)) for c, L in _checked()["gpu"]["items"]]


def _gpu_configs() -> list[str]:
    return list(dict.fromkeys(c for c, _ in gpu_plan()))


def gpu_inputs(length: int) -> np.ndarray:
    """The GPU design's token windows at ``length``: the corpus's bytes
    (:func:`posbias_nb.tasks.text.text_batch` without a tokenizer), made here and carried to
    the GPU (``bench/gpu_born.py prepare``), since another Python's corpus would give others."""
    from ...tasks.text import text_batch

    g = _checked()["gpu"]
    return text_batch(None, int(length), int(g["windows"][str(int(length))]),
                      seed=int(g["seed"]), vocab_size=256)


def gpu_params(config: str, length: int) -> dict:
    """The cache parameters of a GPU entry: the configuration's fingerprint, the sizes, the
    digest of its token windows (:func:`gpu_inputs`), float32 without TF32.  No library
    versions: the GPU's torch and transformers are the entry's provenance, not its key, so
    that a CPU can read the entry."""
    import hashlib

    g = _checked()["gpu"]
    if config not in _gpu_configs():
        raise ValueError(f"{config!r} is not a configuration of the GPU design: use one of "
                         f"{', '.join(_gpu_configs())}")
    if str(int(length)) not in g["windows"]:
        raise ValueError(f"length {length} is not a length of the GPU design: use one of "
                         f"{', '.join(g['windows'])}")
    s = models.ZOO[config]
    info = entry.checked(s, "random", length, int(g["windows"][str(int(length))]),
                         int(g["seed"]))
    ids = gpu_inputs(length)
    return {"model": s.name, "fingerprint": info["fingerprint"], "length": int(length),
            "windows": int(ids.shape[0]), "probes": int(g["probes"]), "seed": int(g["seed"]),
            "inputs": hashlib.sha256(np.ascontiguousarray(ids).tobytes()).hexdigest()[:16],
            "device": "cuda", "dtype": "float32", "tf32": False, "def": DEFINITION}


def _environment(device: str = "cuda") -> dict:
    import torch
    import transformers

    name = torch.cuda.get_device_name(0) if device.startswith("cuda") else cache.cpu_model()
    return {"device_name": name, "torch": torch.__version__,
            "transformers": transformers.__version__, "cuda": str(torch.version.cuda),
            "tf32": bool(torch.backends.cuda.matmul.allow_tf32)}


def _build(config: str, seed: int, device: str, width: int | None):
    import torch
    from transformers import AutoModelForCausalLM

    s = models.ZOO[config] if width is None else models.at_width(config, int(width))
    cfg = s.build_config()
    torch.manual_seed(seed)
    with torch.device(device):  # built where it runs: 8B float32 weights are not made on a CPU
        m = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa",
                                             dtype=torch.float32)
    m.eval()
    for p in m.parameters():
        p.requires_grad_(False)
    models.require_causal_attention(m)  # decided by behaviour on one batch, as every load
    return m, cfg


class _Clock:
    """Wall-clock seconds and peak memory of a block on ``device`` (synchronised on CUDA)."""

    def __init__(self, device: str):
        import torch

        self.cuda = device.startswith("cuda")
        self.torch = torch

    def __enter__(self):
        if self.cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        if self.cuda:
            self.torch.cuda.synchronize()
        self.seconds = time.perf_counter() - self.t0
        self.peak = int(self.torch.cuda.max_memory_allocated()) if self.cuda else 0


#: Bytes of autograd graph the GPU run keeps before it recomputes layers
#: (:data:`posbias_nb.measure.jacobian.GRAPH_BUDGET` there; changes only float rounding).
GPU_GRAPH_BUDGET = 24 * 2**30


def _check_run(config: str, length: int, ids, device: str, width) -> np.ndarray:
    g = _checked()["gpu"]
    if config not in _gpu_configs():
        raise ValueError(f"{config!r} is not a configuration of the GPU design: use one of "
                         f"{', '.join(_gpu_configs())}")
    ids = np.asarray(ids)
    if width is None:  # a measurement of the design: its windows exactly
        n = int(g["windows"].get(str(int(length)), 0))
        if ids.shape != (n, int(length)):
            raise ValueError(f"windows of shape {ids.shape}: the GPU design asks for "
                             f"{(n, int(length))}")
        entry.checked(models.ZOO[config], "random", length, n, int(g["seed"]))
    elif ids.ndim != 2 or ids.shape[1] != int(length):
        raise ValueError(f"windows of shape {ids.shape} for length {length}")
    models.check_device(device)
    if device.startswith("cuda"):
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    return ids


def gpu_profile(config: str, length: int, ids: np.ndarray, *, device: str = "cuda",
                width: int | None = None) -> dict:
    """The full-width profile of ``config`` on the token windows ``ids`` (``(windows,
    length)``, :func:`gpu_inputs`), float32 with TF32 off, with the run's provenance: device,
    torch, transformers, CUDA, seconds of the build and of the profile, peak memory, and the
    configuration as transformers there wrote it.  Not cached here: ``bench/gpu_born.py
    import`` stores it under :func:`gpu_params` (namespace ``scale-gpu``) once its
    configuration is checked against this machine's.  ``width`` (with ``device="cpu"``): a dry
    run of the same code on a rung of the ladder, at any length, for trying the script on a
    CPU; never recorded.

    Raises
    ------
    ValueError
        No such device, a configuration or length not in the GPU design, windows of another
        shape.
    """
    import json

    from ...measure import jacobian

    g = _checked()["gpu"]
    ids = _check_run(config, length, ids, device, width)
    with _Clock(device) as build:
        m, cfg = _build(config, int(g["seed"]), device, width)
    old = jacobian.GRAPH_BUDGET
    jacobian.GRAPH_BUDGET = GPU_GRAPH_BUDGET
    try:
        with _Clock(device) as run:
            res = jacobian.influence_profile(m, ids, probes=int(g["probes"]),
                                             seed=int(g["seed"]), progress=False)
    finally:
        jacobian.GRAPH_BUDGET = old
    del m
    _free(device)
    return {"per_window": res["per_sequence"], "probe_stderr": res["per_sequence_stderr"],
            "profile_seconds": np.float64(run.seconds), "build_seconds": np.float64(build.seconds),
            "peak_bytes": np.int64(max(build.peak, run.peak)),
            "graph_budget": np.int64(GPU_GRAPH_BUDGET),
            "config_json": np.asarray(json.dumps(cfg.to_dict(), sort_keys=True, default=str)),
            **{k: np.asarray(str(v)) for k, v in _environment(device).items()}}


def _free(device: str) -> None:
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def floor_seconds(config: str, length: int, ids: np.ndarray, *, device: str = "cuda",
                  width: int | None = None) -> dict:
    """The bare floor of a profile, timed against the profile itself in the same run: on the
    first of the windows ``ids``, one forward pass that keeps the whole graph and ``probes``
    plain backward passes (no layer recomputed, no bookkeeping), after one warm-up; then the
    profile of that window (:func:`posbias_nb.measure.jacobian.influence_profile`, graph
    budget as in :func:`gpu_profile`).  Returns both times, their ratio and the peak memory of
    each.  Not cached: a timing."""
    import torch

    from ...measure import jacobian

    g = _checked()["gpu"]
    ids = _check_run(config, length, ids, device, width)[:1]
    m, _ = _build(config, int(g["seed"]), device, width)
    x_ids = torch.as_tensor(ids, device=device)
    K = int(g["probes"])
    d = m.get_input_embeddings().embedding_dim
    gen = torch.Generator(device=device).manual_seed(int(g["seed"]))
    Z = (torch.randint(0, 2, (K, d), generator=gen, device=device) * 2 - 1).float()

    def floor():
        with torch.no_grad():
            x0 = m.get_input_embeddings()(x_ids)
        x = x0.detach().requires_grad_(True)
        with torch.enable_grad():
            h = m.base_model(inputs_embeds=x, use_cache=False).last_hidden_state[0, -1]
            for k in range(K):
                (gx,) = torch.autograd.grad(h, x, Z[k], retain_graph=k + 1 < K)
                gx.square().sum(-1)

    old = jacobian.GRAPH_BUDGET
    jacobian.GRAPH_BUDGET = GPU_GRAPH_BUDGET
    try:
        with _Clock(device):
            floor()  # warm-up: kernels chosen, memory pool grown
        with _Clock(device) as f:
            floor()
        with _Clock(device) as p:
            jacobian.influence_profile(m, ids, probes=K, seed=int(g["seed"]))
    finally:
        jacobian.GRAPH_BUDGET = old
    del m
    _free(device)
    return dict(model=config, length=int(length), probes=K, floor_seconds=f.seconds,
                profile_seconds=p.seconds, ratio=p.seconds / f.seconds,
                floor_peak_bytes=f.peak, profile_peak_bytes=p.peak, **_environment(device))


def gpu_cell(config: str, length: int) -> dict | None:
    """A recorded GPU entry of ``config`` at ``length`` (read, never computed on a CPU), with
    its layout row at the fitted :math:`\\alpha`, the valley and the ratios; None where the GPU
    run did not reach it."""
    got = cache.load("scale-gpu", gpu_params(config, length))
    if got is None:
        return None
    P = np.asarray(got["per_window"], dtype=np.float64)
    lay = layout(config)
    out = dict(P=P, layout=lay, **row(lay, P), entry=got)
    out["valley"] = valley(P)
    reg = metrics.regions(P.shape[1])
    mid = P[:, reg.middle].mean(1)
    out["first_middle"] = np.log10(P[:, 0] / mid)
    out["last_middle"] = np.log10(P[:, -1] / mid)
    return out


# --------------------------------------------------------------------------------------------
# What the chapter shows: tables and sentences, computed here (the chapter only renders them)

def _layout_words(lay: theory.Layout) -> str:
    """A layout in a few words: each layer kind (with its window) and its count."""
    from collections import Counter

    n = Counter(f"{x.kind} {x.size}" if x.size else x.kind for x in lay.layers)
    return ", ".join(f"{k} ×{v}" for k, v in sorted(n.items(), key=lambda kv: -kv[1]))


def configurations() -> list[dict]:
    """One row per configuration of the design: its published sizes, layout and context, and
    the ``config.json`` its function copies (:mod:`posbias_nb.models.configs`)."""
    rows = []
    for c in DESIGN["ladder"]:
        spec_ = models.ZOO[c]
        cfg = spec_.build_config()
        hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        rope = cfg.rope_parameters
        bases = sorted({float(v["rope_theta"]) for v in rope.values()}) \
            if all(isinstance(v, dict) for v in rope.values()) else [float(rope["rope_theta"])]
        doc = (spec_.config.__doc__ or "").split("``")
        rows.append(dict(name=c, layers=cfg.num_hidden_layers, width=cfg.hidden_size,
                         heads=f"{cfg.num_attention_heads}/{cfg.num_key_value_heads}",
                         head_dim=hd, mlp=cfg.intermediate_size,
                         rope="/".join(f"{b:.0e}".replace("e+0", "e") for b in bases),
                         layout=_layout_words(models.config_layout(cfg)),
                         context=spec_.max_length,
                         source=doc[1] if len(doc) > 1 else "", ladder=ladder(c)))
    return rows


def ladder_summary(init: str) -> dict:
    """The family of ``init`` in words: the verdict of "the shape does not depend on width" over
    all its claims (:func:`posbias_nb.stats.decide_all`), the claims by verdict, and for each
    statistic the configurations where it moved beyond its margin, with the difference
    (``moved``, and in words, ``moved_text``)."""
    dec = decisions(init)
    words = {k: v["verdict"] for k, v in dec.items()}
    by = {w: sorted(k for k, x in words.items() if x == w) for w in set(words.values())}
    moved = {}
    for k, v in dec.items():
        c, s = k.split(":")
        if v["verdict"] == "fails":
            moved.setdefault(s, []).append((c, float(v["interval"][0])))
    text = "; ".join(f"{STAT_WORDS[s]} ({', '.join(f'{c} {e:+.2f}' for c, e in lst)})"
                     for s, lst in moved.items()) or "no statistic moved beyond its margin"
    return dict(verdict=stats.decide_all(list(words.values())), words=words, by_verdict=by,
                moved=moved, moved_text=text, decisions=dec)


#: The initialisers in the words of the chapter's verdict rows.
INIT_WORDS = {"hf": "transformers' initialiser, std 0.02",
              "fan-in": "width-aware initialiser, std 1/√d"}


def verdict_rows(summaries: dict) -> list[dict]:
    """The verdict rows of chapter *Born at scale* (:func:`posbias_nb.notebook.verdict_table`),
    one per initialiser of ``summaries`` (``{init: ladder_summary(init)}``, in the design's
    order): the claim "the born profile's shape does not depend on width", its family's claims
    counted by verdict, and the family's verdict (:func:`ladder_summary`)."""
    from ... import notebook

    rows = []
    for init, s in summaries.items():
        if init not in INIT_WORDS:
            raise ValueError(f"unknown initialiser {init!r}; expected one of "
                             f"{', '.join(INIT_WORDS)}")
        counts = notebook.decision_counts([dict(decision=w) for w in s["words"].values()])
        rows.append(dict(key="ladder_" + init.replace("-", ""),
                         claim="the born profile's shape does not depend on width "
                               f"({INIT_WORDS[init]})",
                         paper="(not treated: measured at widths 768 and 896)",
                         measured=f"{len(s['words'])} equivalence claims, widest − "
                                  f"narrowest rung: {counts}",
                         verdict=s["verdict"]))
    return rows


def _results_file():
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    return root / "bench" / "results" / "gpu-born.json"


def gpu_runs(path=None) -> list[dict]:
    """The GPU runs' logs (``bench/results/gpu-born.json``, written by ``bench/gpu_born.py
    import``), oldest first; empty where none was recorded."""
    import json
    from pathlib import Path

    p = Path(path) if path is not None else _results_file()
    return json.loads(p.read_text())["runs"] if p.is_file() else []


def gpu_status() -> list[dict]:
    """Per item of the GPU design: the entry if one is recorded, else what the runs say of it
    (out of memory, not started under the time rule, or never run)."""
    last = {}
    for r in gpu_runs():
        for it in r["items"]:
            last[(it["model"], int(it["length"]))] = it
    out = []
    for c, L in gpu_plan():
        x = gpu_cell(c, L)
        st = "measured" if x is not None else last.get((c, L), {}).get("status", "never run")
        out.append(dict(model=c, length=L, status=st, cell=x))
    return out


#: Blocks of positions of :func:`gpu_summary`'s binned Spearman.
BINS = 64


def gpu_summary(x: dict) -> dict:
    """A measured GPU cell in numbers, each per window (two windows: no interval is printed,
    both values are): Spearman with the layout row at the fitted :math:`\\alpha`, the same over
    :data:`BINS` blocks of positions (each block's mean, the last token left out: the trend
    without the position-to-position spread of the content), the valley, log10 of first/middle
    and last/middle; and the median relative probe error (how much of that spread the two
    probes add)."""
    m = x["mask"]
    P, r = x["P"], x["row"]
    n = (P.shape[1] - 1) // BINS * BINS
    blocks = P[:, :n].reshape(P.shape[0], BINS, -1).mean(2)
    rb = r[:n].reshape(BINS, -1).mean(1)
    e = x["entry"]
    return dict(alpha=x["alpha"],
                spearman=np.array([metrics.spearman(w[m], r[m]) for w in P]),
                binned=np.array([metrics.spearman(w, rb) for w in blocks]),
                valley=x["valley"], first_middle=x["first_middle"],
                last_middle=x["last_middle"],
                probe_error=float(np.median(np.asarray(e["probe_stderr"]) / P)),
                seconds=float(e["profile_seconds"]), peak_gb=float(e["peak_bytes"]) / 1e9,
                device=str(e["device_name"]), torch=str(e["torch"]), cuda=str(e["cuda"]),
                graph_budget_gib=float(e["graph_budget"]) / 2**30)


def gpu_provenance(manifest=None) -> dict:
    """The recorded GPU entries' provenance (``recorded/MANIFEST.json`` beside the recorded
    folder): their number, commits, and whether today's code digest of namespace ``scale-gpu``
    is the one that measured them (``current``), as ``make test``'s plan says."""
    import json

    if manifest is None:
        d = cache.recorded_dir()
        f = None if d is None else d.parent / "MANIFEST.json"
        manifest = json.loads(f.read_text()) if f is not None and f.is_file() else {}
    ents = {k: v for k, v in manifest.get("entries", {}).items() if k.startswith("scale-gpu/")}
    today = cache.code_digest("scale-gpu")
    return dict(n=len(ents), commits=sorted({v["commit"][:12] for v in ents.values()}),
                current=bool(ents) and all(v.get("code") == today for v in ents.values()))
