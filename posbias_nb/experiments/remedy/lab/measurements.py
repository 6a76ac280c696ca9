"""The remedies lab's measurements, each cached: a model built and measured at init, a training
run (:func:`train_run`), its float64 twin, the chapter's arms over seeds, the init gradient by
depth and the residual lever at init."""
from __future__ import annotations

import contextlib
import math
import sys
import numpy as np
from .... import models
from ...._validate import choice, positive_float, positive_int
from ....measure.entry import library_versions
from ....results import Result
from ....tasks.synthetic import BOS, N_KEYS, PLACEMENTS, TASKS, VOCAB, eval_positions, make_batch, middle_range, sample_positions
from .config import ARMS, CHAPTER, CURRICULUM_FRAC, DEVICES, JSON_KEYS, MIDDLE_WEIGHT, N_EX, N_PROBE, OVERSAMPLE_P, REMEDIES, TABLE_COLUMNS, TWIN_STEPS, _TWIN_VERSION, _VERSION
from .statistics import contrast, predicted_profile, predicted_ratio, steps_to_threshold

__all__ = ["build_model", "at_init", "train_run", "train_twin", "run_twins", "run_arms", "gradient_by_depth", "lever_at_init", "run_params"]


def _check(task, layers, width, length, steps, seed, answer_positions, remedy, residual_scale,
           device, distractors, batch, checkpoints):
    choice("task", task, TASKS)
    layers = positive_int("layers", layers)
    if not 2 <= layers <= 8:
        raise ValueError(f"layers must lie in 2..8, got {layers!r}")
    width = positive_int("width", width)
    if not 32 <= width <= 128 or width % 16:
        raise ValueError(f"width must be a multiple of 16 in 32..128, got {width!r}")
    length = positive_int("length", length)
    if not 32 <= length <= 256:
        raise ValueError(f"length must lie in 32..256, got {length!r}")
    steps = positive_int("steps", steps)
    seed = positive_int("seed", seed, minimum=0)
    choice("answer_positions", answer_positions, PLACEMENTS)
    choice("remedy", remedy, REMEDIES)
    rs = positive_float("residual_scale", residual_scale)
    choice("device", device, DEVICES)
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ValueError("device 'cuda' requested but CUDA is not available")
    distractors = positive_int("distractors", distractors, minimum=0)
    if (task == "kv" and distractors + 1 > N_KEYS) or distractors > length // 4:
        raise ValueError(f"distractors={distractors} does not fit the task at length {length}")
    batch = positive_int("batch", batch, minimum=2)
    checkpoints = positive_int("checkpoints", checkpoints, minimum=2)
    return (task, layers, width, length, steps, seed, answer_positions, remedy, rs, device,
            distractors, batch, checkpoints)


def build_model(layers: int, width: int, length: int, seed: int, residual_scale: float = 1.0,
                device: str = "cpu"):
    """The lab's model: :func:`posbias_nb.models.build_small` with the task vocabulary
    (:data:`posbias_nb.tasks.synthetic.VOCAB`, ``BOS``)."""
    return models.build_small(layers, width, length, seed, VOCAB, bos=BOS,
                              residual_scale=residual_scale, device=device)


def _capture(model, ids):
    from ....measure.hooks import capture_model

    return capture_model(model, ids)


def _evaluate(model, ids, target, device, dtype=None):
    import torch

    model.eval()
    with torch.no_grad():
        logits = model(input_ids=torch.as_tensor(ids, device=device)).logits[:, -1]
        logits = logits.float() if dtype is None else logits.to(dtype)
        tgt = torch.as_tensor(target, device=device)
        loss = torch.nn.functional.cross_entropy(logits, tgt, reduction="none")
        correct = (logits.argmax(-1) == tgt).float()
    model.train()
    return correct.cpu().numpy(), loss.cpu().numpy()


def _grad_at_init(model, ids, target, pos, device):
    """Norm of d loss / d input embedding at every position, per example (B, L)."""
    import torch

    emb = model.get_input_embeddings()
    x = emb(torch.as_tensor(ids, device=device)).detach().requires_grad_(True)
    logits = model(inputs_embeds=x).logits[:, -1].float()
    loss = torch.nn.functional.cross_entropy(logits, torch.as_tensor(target, device=device),
                                             reduction="sum")
    (g,) = torch.autograd.grad(loss, x)
    return g.double().norm(dim=-1).cpu().numpy()


def _eval_set(task, L, seed, distractors):
    """The held-out set of a seed: ``N_EX`` examples at each of :func:`eval_positions`."""
    pos_eval = eval_positions(L)
    erng = np.random.default_rng([seed, 1])
    eval_pos = np.repeat(pos_eval, N_EX)
    eval_ids, eval_tgt = make_batch(task, eval_pos, L, erng, distractors)
    return pos_eval, eval_pos, eval_ids, eval_tgt


class _Deterministic:
    """Deterministic kernels and, on the CPU, one thread (one fixed reduction order)."""

    def __init__(self, device):
        self.device = device

    def __enter__(self):
        import torch

        self.det = torch.are_deterministic_algorithms_enabled()
        self.threads = torch.get_num_threads()
        torch.use_deterministic_algorithms(True, warn_only=True)
        if self.device == "cpu":
            torch.set_num_threads(1)  # small models gain nothing from more

    def __exit__(self, *exc):
        import torch

        torch.use_deterministic_algorithms(self.det)
        torch.set_num_threads(self.threads)


def _init_measures(model, p, influence):
    from ....measure.jacobian import influence_profile

    pos_eval, eval_pos, eval_ids, eval_tgt = _eval_set(p["task"], p["length"], p["seed"],
                                                       p["distractors"])
    probe_ids = eval_ids[::N_EX][:N_PROBE]
    cap0 = _capture(model, probe_ids)
    g = _grad_at_init(model, eval_ids, eval_tgt, eval_pos, p["device"])
    rows = np.arange(len(eval_pos))
    out = {"position": pos_eval, "lambda_init": cap0["lam"], "A_init": cap0["A"],
           # the answer is the single (fused key-value, or needle) token at p
           "grad_init_value": g[rows, eval_pos].reshape(len(pos_eval), N_EX),
           "grad_init_profile": g.mean(0)}
    if influence:
        out["influence_init"] = influence_profile(model, probe_ids, target="hidden",
                                                  method="exact")["influence"]
    return out


def at_init(layers: int, width: int, length: int, seed: int = 0, residual_scale: float = 1.0,
            *, task: str = "kv", distractors: int = 3, influence: bool = True,
            device: str = "cpu", cache: bool = True) -> dict:
    r"""Measure the lab's model at initialization, without training (chapter :ref:`ch-remedies`).

    The model is :func:`build_model` (the same init as :func:`train_run` with the same ``seed``
    and ``residual_scale``), measured on the seed's held-out set (the same as :func:`train_run`'s):
    ``position`` (P,) the evaluated answer positions; ``lambda_init`` (T,) and ``A_init``
    (T, L, L) from the hooks on ``N_PROBE`` = 8 held-out sequences; ``grad_init_value`` (P, 32)
    the norm of :math:`\partial \mathcal L / \partial x_p` at the answer token ``p`` per
    held-out example, ``grad_init_profile`` (L,) that norm at every position averaged over the
    set; with ``influence``, ``influence_init`` (L,) the exact Jacobian influence profile (hidden
    target) on the 8 sequences.  Cached (namespace ``"train-init"``); :func:`train_run` reads its
    init measurements from here, so the arms that share an init share this work.

    Raises
    ------
    ValueError
        As :func:`train_run`, for bad ``layers``, ``width``, ``length``, ``seed``,
        ``residual_scale``, ``task``, ``distractors`` or ``device``.
    """
    (task, layers, width, length, _, seed, _, _, rs, device, distractors, _, _) = _check(
        task, layers, width, length, 1, seed, "uniform", "none", residual_scale, device,
        distractors, 2, 2)
    if not isinstance(influence, (bool, np.bool_)):
        raise ValueError(f"influence must be True or False, got {influence!r}")
    p = dict(task=task, layers=layers, width=width, length=length, seed=seed,
             residual_scale=rs, device=device, distractors=distractors,
             influence=bool(influence), version=_VERSION, **library_versions())

    def compute():
        with _Deterministic(device):
            model = build_model(layers, width, length, seed, rs, device)
            model.train()
            return _init_measures(model, p, bool(influence))
    if cache:
        from .... import cache as _cache

        return dict(_cache.cached("train-init", p, compute))
    return {k: np.asarray(v) for k, v in compute().items()}


def _params(task, layers, width, length, steps, seed, answer_positions, remedy, residual_scale,
            device, distractors, batch, checkpoints, lr):
    return dict(task=task, layers=layers, width=width, length=length, steps=steps, seed=seed,
                answer_positions=answer_positions, remedy=remedy, residual_scale=residual_scale,
                device=device, distractors=distractors, batch=batch, checkpoints=checkpoints, lr=lr,
                version=_VERSION, **library_versions())


def _fit(p: dict, progress: bool, dtype=None):
    """The training loop of :func:`train_run` (and of its float64 twin, :func:`train_twin`):
    build the model of ``p``, train it ``p["steps"]`` AdamW steps on the task's batches, and
    evaluate the held-out set at the checkpoints.  ``dtype``: None trains in float32 (the
    recorded runs); ``torch.float64`` trains the model initialised in float64
    (:func:`_in_float64`; run it inside :func:`_float64_throughout`).  Returns
    the trained model (in eval mode), the held-out set and the checkpoint curves."""
    import torch
    from tqdm import tqdm

    task, L, steps, dev = p["task"], p["length"], p["steps"], p["device"]
    if dtype is None:
        model = build_model(p["layers"], p["width"], L, p["seed"], p["residual_scale"], dev)
    else:
        model = _in_float64(p, dev)
    model.train()
    pos_eval, eval_pos, eval_ids, eval_tgt = _eval_set(task, L, p["seed"], p["distractors"])
    n_ex = N_EX
    drng = np.random.default_rng([p["seed"], 2])
    out_dtype = torch.float32 if dtype is None else dtype

    opt = torch.optim.AdamW(model.parameters(), lr=p["lr"], betas=(0.9, 0.98),
                            weight_decay=0.01)
    ck = np.unique(np.round(np.linspace(0, steps, p["checkpoints"] + 1)).astype(int))
    curve, curve_loss, curve_correct, train_loss = [], [], [], []
    a, b = middle_range(L)
    bar = tqdm(total=steps, disable=not progress, file=sys.stderr, leave=False,
               desc=f"train {task} L={L}")
    for step in range(steps + 1):
        if step in ck:
            c, lo = _evaluate(model, eval_ids, eval_tgt, dev, out_dtype)
            curve.append(c.reshape(len(pos_eval), n_ex).mean(1))
            curve_correct.append(c.reshape(len(pos_eval), n_ex))
            curve_loss.append(lo.reshape(len(pos_eval), n_ex).mean(1))
        if step == steps:
            break
        placement = p["answer_positions"]
        if p["remedy"] == "curriculum" and step < CURRICULUM_FRAC * steps:
            placement = "middle"
        pos = sample_positions(drng, p["batch"], L, placement)
        if p["remedy"] == "oversample":
            mid = sample_positions(drng, p["batch"], L, "middle")
            pos = np.where(drng.random(p["batch"]) < OVERSAMPLE_P, mid, pos)
        ids, tgt = make_batch(task, pos, L, drng, p["distractors"])
        logits = model(input_ids=torch.as_tensor(ids, device=dev)).logits[:, -1].to(out_dtype)
        ce = torch.nn.functional.cross_entropy(logits, torch.as_tensor(tgt, device=dev),
                                               reduction="none")
        if p["remedy"] == "weighted":
            w = torch.as_tensor(np.where((pos >= a) & (pos <= b), MIDDLE_WEIGHT, 1.0),
                                device=dev, dtype=ce.dtype)
            loss = (w * ce).sum() / w.sum()
        else:
            loss = ce.mean()
        train_loss.append(float(loss.detach()))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        bar.update(1)
    bar.close()
    model.eval()
    return model, dict(pos_eval=pos_eval, eval_ids=eval_ids, eval_tgt=eval_tgt,
                       curve=curve, curve_loss=curve_loss, curve_correct=curve_correct,
                       curve_steps=ck, train_loss=np.array(train_loss), out_dtype=out_dtype)


def _in_float64(p: dict, device: str):
    """The model of ``p`` (:func:`build_model`, the same seed and residual scale) initialised in
    float64: its weights drawn in float64 (a float32 draw differs between CPUs' kernels by an
    ulp, measured: torch's vectorised normal sampler), its rotary inverse frequencies computed
    in float64 (transformers computes them in float32)."""
    import torch

    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        model = build_model(p["layers"], p["width"], p["length"], p["seed"],
                            p["residual_scale"], device)
    finally:
        torch.set_default_dtype(old)
    model = model.to(torch.float64)
    for m in model.modules():
        if hasattr(m, "inv_freq") and hasattr(m, "original_inv_freq"):
            dim = 2 * m.inv_freq.numel()
            base = m.config.rope_parameters["rope_theta"]
            inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
            m.inv_freq = inv.to(m.inv_freq.device)
            m.original_inv_freq = inv.clone().to(m.inv_freq.device)
    return model


@contextlib.contextmanager
def _float64_throughout():
    """transformers' Llama runs three steps in float32 whatever the model's dtype: RMSNorm
    (``hidden_states.to(torch.float32)``), the rotary angles (``.float()``) and the eager
    attention's softmax (``dtype=torch.float32``).  Within this context, for float64 inputs,
    they run the same operations in float64 (float32 inputs take transformers' own code), so a
    float64 twin is float64 throughout: measured, the float32 steps alone left the twin's
    rounding under another CPU's kernels at float32's scale (``bench/bench_twin_rounding.py``)."""
    import torch
    from transformers.models.llama import modeling_llama as ml

    saved = (ml.LlamaRMSNorm.forward, ml.LlamaRotaryEmbedding.forward, torch.nn.functional.softmax)

    def rms(self, h):
        if h.dtype != torch.float64:
            return saved[0](self, h)
        return self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True)
                                              + self.variance_epsilon))

    def rope(self, x, position_ids):
        if x.dtype != torch.float64:
            return saved[1](self, x, position_ids)
        freqs = position_ids[..., None].to(torch.float64) * self.inv_freq.to(x.device,
                                                                              torch.float64)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos() * self.attention_scaling, emb.sin() * self.attention_scaling

    def softmax(x, dim=None, _stacklevel=3, dtype=None):
        if dtype == torch.float32 and x.dtype == torch.float64:
            dtype = torch.float64
        return saved[2](x, dim=dim, _stacklevel=_stacklevel, dtype=dtype)

    ml.LlamaRMSNorm.forward, ml.LlamaRotaryEmbedding.forward = rms, rope
    torch.nn.functional.softmax = softmax
    try:
        yield
    finally:
        ml.LlamaRMSNorm.forward, ml.LlamaRotaryEmbedding.forward, torch.nn.functional.softmax \
            = saved


def _train(p: dict, progress: bool, cache: bool = True) -> dict:
    from ....measure.jacobian import influence_profile

    dev, L, n_ex = p["device"], p["length"], N_EX
    init = at_init(p["layers"], p["width"], L, p["seed"], p["residual_scale"], task=p["task"],
                   distractors=p["distractors"], device=dev, cache=cache)
    with _Deterministic(dev):
        model, f = _fit(p, progress)
        pos_eval, eval_ids = f["pos_eval"], f["eval_ids"]
        probe_ids = eval_ids[::n_ex][:N_PROBE]
        correct, lo = _evaluate(model, eval_ids, f["eval_tgt"], dev)
        cap = _capture(model, probe_ids)
        infl = influence_profile(model, probe_ids, target="hidden", method="exact")
    return {
        "position": pos_eval, "accuracy": correct.reshape(len(pos_eval), n_ex).mean(1),
        "loss": lo.reshape(len(pos_eval), n_ex).mean(1),
        "correct": correct.reshape(len(pos_eval), n_ex),
        "influence": infl["influence"], "influence_init": init["influence_init"],
        "lambda": cap["lam"], "lambda_init": init["lambda_init"],
        "A_init": init["A_init"], "A": cap["A"],
        "curve": np.array(f["curve"]), "curve_loss": np.array(f["curve_loss"]),
        "curve_steps": f["curve_steps"],
        "curve_correct": np.array(f["curve_correct"]),
        "grad_init_value": init["grad_init_value"], "grad_init_key": init["grad_init_value"],
        "grad_init_profile": init["grad_init_profile"],
    }


def _run_params(task, layers, width, length, steps, seed=0, answer_positions="uniform",
                remedy="none", residual_scale=1.0, device="cpu", distractors=3, batch=32,
                checkpoints=10, lr=3e-3):
    """Checked arguments of :func:`train_run`, as the parameters of its cache key."""
    (task, layers, width, length, steps, seed, answer_positions, remedy, rs, device, distractors,
     batch, checkpoints) = _check(task, layers, width, length, steps, seed, answer_positions,
                                  remedy, residual_scale, device, distractors, batch, checkpoints)
    lr = float(lr)
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive number, got {lr!r}")
    return _params(task, layers, width, length, steps, seed, answer_positions, remedy, rs, device,
                   distractors, batch, checkpoints, lr)


#: The parameters of :func:`train_run`'s cache key, for the calls that make a training entry
#: elsewhere (``python -m posbias_nb.provenance cpu-reference``).
run_params = _run_params


def train_run(task: str, layers: int, width: int, length: int, steps: int, seed: int = 0,
              answer_positions: str = "uniform", remedy: str = "none",
              residual_scale: float = 1.0, device: str = "cpu", progress: bool = False, *,
              distractors: int = 3, batch: int = 32, checkpoints: int = 10, lr: float = 3e-3,
              cache: bool = True) -> dict:
    r"""Train one small model on one task and measure it (chapter :ref:`ch-remedies`).

    The result is cached (``posbias_nb.cache``, namespace ``"train"``); the same arguments give
    the same numbers bit for bit (seeded init, seeded data, deterministic kernels).

    Parameters
    ----------
    task : {"kv", "needle"}
    layers : int in 2..8
    width : int, a multiple of 16 in 32..128
    length : int in 32..256
        Context length (the query is the last token).
    steps : int >= 1
        AdamW steps (batch ``batch``, learning rate ``lr``, gradient clipping at 1).
    seed : int >= 0
        Seeds the init, the training data and the evaluation set.
    answer_positions : {"uniform", "edges", "start"}
    remedy : {"none", "weighted", "oversample", "curriculum"}
    residual_scale : float > 0
        :math:`\alpha`: attention output projections divided by it at init.
    device : {"cpu", "cuda"}
    progress : bool
        A tqdm bar on stderr.

    Returns
    -------
    dict
        Numpy arrays ``position`` (P,) evaluated answer positions (P = 8 by default);
        ``accuracy``, ``loss`` (P,) after training (32 held-out examples per position);
        ``correct`` (P, 32) per example; ``influence`` (L,) the trained model's Jacobian
        influence profile (``measure.influence_profile``, exact, hidden target, on 8 held-out
        sequences), ``influence_init`` the same at init; ``lambda``
        and ``lambda_init`` (T,) the attention shares after training and at init;
        ``A``, ``A_init`` (T, L, L) the measured kernels; ``curve``, ``curve_loss`` (C, P) per
        position at the steps ``curve_steps`` (C,), ``curve_correct`` (C, P, 32) per example; ``grad_init_value``, ``grad_init_key``
        (P, 32) the norm of :math:`\partial \mathcal L / \partial x_j` at init at the answer
        token ``p`` (one fused token holds key and value, so the two are equal; before version
        ``train-v3`` the value was read at ``p + 1``, a filler token); ``grad_init`` (P,) its mean
        and ``steps_to_half`` (P,) :func:`steps_to_threshold` at 0.5; ``grad_init_profile``
        (L,) the same norm at every position,
        averaged over the evaluation set; and ``meta`` (a dict of the arguments and library
        versions).  A :class:`posbias_nb.results.Result`: ``table()`` gives the CSV rows of
        ``posbias train`` (:data:`TABLE_COLUMNS`), ``to_json()`` its JSON object.

    Raises
    ------
    ValueError
        Naming the bad value: unknown task, placement, remedy or device, layers outside 2..8,
        width outside 32..128 or not a multiple of 16, length outside 32..256, steps < 1,
        a negative seed, residual_scale <= 0, or ``"cuda"`` without CUDA.
    """
    p = _run_params(task, layers, width, length, steps, seed, answer_positions, remedy,
                    residual_scale, device, distractors, batch, checkpoints, lr)
    if cache:
        from .... import cache as _cache

        out = _cache.cached("train", p, lambda: _train(p, progress))
    else:
        out = {k: np.asarray(v) for k, v in _train(p, progress, cache=False).items()}
    out = dict(out)
    out["steps_to_half"] = steps_to_threshold(out["curve"], out["curve_steps"], 0.5)
    out["grad_init"] = np.asarray(out["grad_init_value"]).mean(1)
    return Result(out, meta=dict(p), columns=TABLE_COLUMNS, json_keys=JSON_KEYS)


def train_twin(task: str, layers: int, width: int, length: int, steps: int, seed: int = 0,
               answer_positions: str = "uniform", remedy: str = "none",
               residual_scale: float = 1.0, *, distractors: int = 3, batch: int = 32,
               checkpoints: int = 10, lr: float = 3e-3, cache: bool = True) -> dict:
    r"""The float64 twin of :func:`train_run`: the same model, data and training loop
    (:func:`_fit`, one code path with the recorded runs), in float64 on the CPU, measured by
    continuous quantities only (:data:`TWIN_KEYS`): ``train_loss`` (steps,) the loss of every
    training batch, ``curve_loss`` (C, P) the held-out loss at the checkpoints, ``loss`` (P,)
    after training, ``influence`` (L,) the exact Jacobian influence profile and ``lambda`` (T,)
    the attention shares of the trained model.

    Why: training amplifies float rounding (a float32 run on another CPU flips held-out answers,
    :data:`posbias_nb.provenance.machine.ROUNDING_AMPLIFIED`), so a recorded float32 run can be
    re-measured only on its own CPU.  In float64 throughout (:func:`_float64_throughout`: the
    steps transformers keeps in float32 too) the same rounding differences start 2^29 times
    smaller and, over a short run, stay far below what a change of the training step moves
    (measured in ``bench/bench_twin_rounding.py``; the tolerance
    :data:`posbias_nb.provenance.verify.NAMESPACE_RTOL` comes from there).  Cached (namespace
    ``"train-twin"``), verified on every CPU; chapter :ref:`ch-remedies` reads the chapter's
    arms' twins (:func:`run_twins`).

    Raises
    ------
    ValueError
        As :func:`train_run`.
    """
    import torch

    p = _run_params(task, layers, width, length, steps, seed, answer_positions, remedy,
                    residual_scale, "cpu", distractors, batch, checkpoints, lr)
    p = dict(p, dtype="float64", version=_TWIN_VERSION)

    def compute():
        from ....measure.jacobian import influence_profile

        with _Deterministic("cpu"), _float64_throughout():
            model, f = _fit(p, False, dtype=torch.float64)
            probe_ids = f["eval_ids"][::N_EX][:N_PROBE]
            _, lo = _evaluate(model, f["eval_ids"], f["eval_tgt"], "cpu", torch.float64)
            cap = _capture(model, probe_ids)
            infl = influence_profile(model, probe_ids, target="hidden", method="exact")
        P = len(f["pos_eval"])
        return {"train_loss": f["train_loss"], "curve_loss": np.array(f["curve_loss"]),
                "loss": lo.reshape(P, N_EX).mean(1), "influence": np.asarray(infl["influence"]),
                "lambda": np.asarray(cap["lam"])}
    if cache:
        from .... import cache as _cache

        return dict(_cache.cached("train-twin", p, compute))
    return {k: np.asarray(v) for k, v in compute().items()}


def run_twins(arms=None, seed: int = 0) -> dict:
    """The float64 twin (:func:`train_twin`, :data:`TWIN_STEPS` steps) of every arm of
    :data:`ARMS` (default: all) at the chapter's configuration, seed ``seed``: ``{arm: twin}``.
    Every training code path the chapter takes (each placement, remedy and residual scale)
    runs in one of them, so a changed training step moves at least one twin."""
    arms = list(ARMS) if arms is None else list(arms)
    for a in arms:
        if a not in ARMS:
            raise ValueError(f"unknown arm {a!r}; known: {', '.join(ARMS)}")
    return {a: train_twin(**dict(CHAPTER, steps=TWIN_STEPS), **ARMS[a], seed=seed) for a in arms}


def _train_cached(kw):
    train_run(**kw)  # a worker fills the cache; the parent reads it back
    return None


def run_arms(arms=None, seeds=(0, 1, 2), progress: bool = False, workers: int = 1,
             **config) -> dict:
    """Train every arm for every seed (cached); ``{arm: [result per seed]}``.

    ``config`` overrides :data:`CHAPTER` (e.g. more ``steps`` or a ``device`` for the sweep);
    ``arms`` is a list of names from :data:`ARMS` (default: all).  ``workers > 1`` trains that
    many runs at once in separate processes (each run uses one thread and deterministic kernels,
    so the numbers are the same bit for bit; the results travel through the cache).
    Chapter :ref:`ch-remedies`.
    """
    arms = list(ARMS) if arms is None else list(arms)
    for a in arms:
        if a not in ARMS:
            raise ValueError(f"unknown arm {a!r}; known: {', '.join(ARMS)}")
    seeds = [positive_int("seed", s, minimum=0) for s in seeds]
    if len(seeds) < 1:
        raise ValueError("seeds must not be empty")
    workers = positive_int("workers", workers)
    cfg = {**CHAPTER, **config}
    jobs = [dict(**cfg, **ARMS[a], seed=s) for a in arms for s in seeds]
    if workers > 1:
        from .... import cache as _cache

        # only the runs not cached yet; without a cache the workers' results could not travel
        jobs = ([kw for kw in jobs if _cache.load("train", _run_params(**kw)) is None]
                if _cache.cache_dir() is not None else [])
    if workers > 1 and len(jobs) > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(min(workers, len(jobs)),
                                 mp_context=mp.get_context("spawn")) as ex:
            list(ex.map(_train_cached, jobs))
    return {a: [train_run(**cfg, **ARMS[a], seed=s, progress=progress) for s in seeds]
            for a in arms}


def gradient_by_depth(depths=(2, 4, 8), seeds=range(10), width: int = 64, length: int = 64,
                      task: str = "kv", level: float = 0.95) -> dict:
    r"""The seed paper's dead zone, where it can show: the middle-over-ends ratio of the loss
    gradient at the answer token *at initialization*, over depths, against the rollout's
    prediction (chapter :ref:`ch-remedies`, :eq:`eq-rem-rollout`).

    For each depth ``H`` and seed, :func:`at_init` (no training) gives the gradient norm at each
    evaluated answer position (mean over the seed's held-out examples) and :math:`\lambda_t` at
    init; the measured ratio is its :func:`contrast` (middle / ends), the predicted one
    :func:`predicted_ratio` from that seed's :math:`\lambda_t`.  Returns ``{H: dict(measured=
    (seeds,), predicted=(seeds,), lam=(seeds, H), measured_ci=(est, lo, hi), predicted_ci=...,
    factorial=1/(H-1)!)}``, intervals *t* over seeds.

    Raises
    ------
    ValueError
        A depth outside 2..8, fewer than 2 seeds, or a bad ``width``/``length``/``task``.
    """
    from ....stats import mean_interval

    seeds = [positive_int("seed", s, minimum=0) for s in seeds]
    if len(seeds) < 2:
        raise ValueError(f"gradient_by_depth needs at least 2 seeds, got {len(seeds)}")
    out = {}
    for H in depths:
        meas, pred, lam = [], [], []
        for s in seeds:
            r = at_init(H, width, length, s, task=task, influence=False)
            pos = r["position"]
            meas.append(contrast(np.asarray(r["grad_init_value"]).mean(1)[None], pos, True)[0])
            pred.append(predicted_ratio(r["lambda_init"], pos, length))
            lam.append(np.asarray(r["lambda_init"]))
        meas, pred = np.array(meas), np.array(pred)
        out[int(H)] = dict(measured=meas, predicted=pred, lam=np.array(lam),
                           measured_ci=mean_interval(meas, level),
                           predicted_ci=mean_interval(pred, level),
                           factorial=1 / math.factorial(int(H) - 1))
    return out


def lever_at_init(scales=(0.5, 1.0, 2.0), seeds=range(10), **config) -> dict:
    r"""The structural lever at init: for each residual scale :math:`\alpha`, per seed,
    :math:`\lambda_t` at init, the measured middle share of the influence profile at init and the
    rollout's predicted middle share from those :math:`\lambda_t`
    (:func:`posbias_nb.metrics.middle_share`, BOS left out; chapter :ref:`ch-remedies`).
    ``config`` overrides :data:`CHAPTER` (``layers``, ``width``, ``length``, ``task``).

    Returns ``{alpha: dict(lam=(seeds, T), measured=(seeds,), predicted=(seeds,))}``.
    """
    from ....metrics import middle_share

    cfg = {**CHAPTER, **config}
    cfg.pop("steps", None)
    L = cfg["length"]
    out = {}
    for a in scales:
        lam, meas, pred = [], [], []
        for s in seeds:
            r = at_init(cfg["layers"], cfg["width"], L, s, a, task=cfg["task"])
            lam.append(np.asarray(r["lambda_init"]))
            meas.append(middle_share(np.asarray(r["influence_init"])[1:]))
            pred.append(middle_share(predicted_profile(r["lambda_init"], L)[1:]))
        out[float(a)] = dict(lam=np.array(lam), measured=np.array(meas), predicted=np.array(pred))
    return out
