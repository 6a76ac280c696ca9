"""Born at scale on a GPU (``bench/gpu_born.py``): the plan, the token windows, the cache
parameters, the profile at full width under a time rule and a graph budget, and the entries
recorded with their device (never re-measured on a CPU)."""
from __future__ import annotations

import time
import numpy as np
from .... import cache, metrics, models
from ....measure import entry
from .config import DEFINITION, GPU_GRAPH_BUDGET, _checked
from .measurements import layout
from .statistics import row, valley

__all__ = ["gpu_plan", "gpu_inputs", "gpu_params", "gpu_profile", "floor_seconds", "gpu_cell"]


def gpu_plan() -> list[tuple[str, int]]:
    """The GPU run's (configuration, length) items, in the design's order."""
    return [(str(c), int(L)) for c, L in _checked()["gpu"]["items"]]


def _gpu_configs() -> list[str]:
    return list(dict.fromkeys(c for c, _ in gpu_plan()))


def gpu_inputs(length: int) -> np.ndarray:
    """The GPU design's token windows at ``length``: the corpus's bytes
    (:func:`posbias_nb.tasks.text.text_batch` without a tokenizer), made here and carried to
    the GPU (``bench/gpu_born.py prepare``), since another Python's corpus would give others."""
    from ....tasks.text import text_batch

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

    from ....measure import jacobian

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

    from ....measure import jacobian

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
