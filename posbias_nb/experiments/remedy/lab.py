r"""The remedies lab: small causal transformers trained from scratch on synthetic retrieval.

Chapter :ref:`ch-remedies` ("Can training climb out of the valley?").  Everything the chapter
trains goes through :func:`train_run`: a Llama-style decoder (RoPE, RMSNorm, SwiGLU; Hugging Face
``LlamaForCausalLM`` built from a small ``LlamaConfig`` after ``torch.manual_seed``), AdamW, one
answer token per sequence, and the answer placed at a controlled position of the context.

The tasks (:func:`posbias_nb.tasks.synthetic.make_batch`)
---------------------------------------------------------
A sequence of length ``L`` is ``BOS``, a haystack of filler tokens, the answer-bearing token at
the **answer position** ``p`` (``1 <= p <= L - 3``), ``distractors`` look-alike tokens at other
random positions, and a final query token at ``L - 1``; the one trained target is the next token
after the query.

* ``kv`` (key-value recall, the chapter's task): each context token of a pair is one *fused*
  token standing for ``(key, value)`` (4 keys x 8 values); the context holds
  ``distractors + 1`` pairs with distinct keys, the query is a key and the target its value.
  A one-hop lookup: match the query's key against the pair tokens, copy the value.
* ``needle``: the needle is a value token, the distractors come from a separate look-alike
  vocabulary that is never the answer, the query is a fixed marker; the target is the needle.

Why these settings (measured while building them, 2 layers, width 64, L = 64, batch 32): a
single distinct needle, even with 3 look-alikes, is learned everywhere in ~60 steps (the
``needle`` task here, kept as the easy control); a needle written as *marker + value* in a
haystack of value tokens needs an induction circuit and stayed at chance for 800 steps (with one
look-alike: accuracy 0.5, chance among two; learning rate 3e-3, and 1e-2 did worse); key-value
pairs written as two adjacent tokens need the same circuit (12-16 pairs: nothing learned in 3000
steps).  Fused key-value tokens with 4 pairs sit in between: learned in ~100-200 steps, with
measurable differences between positions along the way.

Answer placement during training (``answer_positions``): ``"uniform"`` over ``1..L-3``;
``"start"``: with probability 0.8 in the first 15 % of the context, else uniform;
``"edges"``: with probability 0.8 in the first or last 15 % (half each), else uniform.
The remedies (``remedy``) act on top of that placement at equal compute (same steps, batch and
learning rate): ``"weighted"`` multiplies the loss of examples whose answer lies in the middle
by 4 (weights renormalised per batch); ``"oversample"`` draws half of each batch's answers
from the middle; ``"curriculum"`` draws every answer from the middle for the first
30 % of the steps, then follows the placement.  The middle the remedies act on is a task design
parameter, :func:`posbias_nb.tasks.synthetic.middle_range`: the book's one middle
(:func:`posbias_nb.metrics.regions`, the central half) of the answer positions; it was the middle
third before version ``train-v4``.

Measurement and statistics
--------------------------
The middle is *measured* with the same definition, declared before the data: the central half of
the evaluated answer positions (:func:`middle_and_edges`, ``metrics.regions`` on the slots)
against the first and last slot; the middle of an influence profile is
:func:`posbias_nb.metrics.middle_share`.  The unit of replication is the **seed** (init,
training data and held-out set): every interval is a Student *t* interval over per-seed values
(:func:`posbias_nb.stats.mean_interval`), which covers at a handful of seeds where a percentile
bootstrap does not; examples within a seed are averaged first (they share an initialization),
and two arms trained with the same seeds are compared seed by seed.

The structural lever (``residual_scale`` = :math:`\alpha`): the attention output projection of
every layer is multiplied by :math:`1/\alpha` at init, which at init is the DeepNorm-style
up-weighting of the residual path by :math:`\alpha` relative to the attention branch, so
:math:`\lambda_t` falls as :math:`\alpha` grows (:ref:`ch-residual`).
"""
from __future__ import annotations

import contextlib
import math
import sys

import numpy as np

from ... import models
from ..._validate import choice, positive_float, positive_int
from ...measure.entry import library_versions
from ...results import Result
from ...tasks.synthetic import (BOS, N_KEYS, PLACEMENTS, TASKS, VOCAB, eval_positions, make_batch,
                                middle_range, sample_positions)
from ..base.design import Design, check, decide_rule, rule_effect

__all__ = ["TASKS", "PLACEMENTS", "REMEDIES", "build_model", "at_init", "train_run",
           "steps_to_threshold", "train_twin", "run_twins", "TWIN_KEYS", "TWIN_STEPS",
           "CHAPTER", "ARMS", "run_arms", "middle_and_edges", "units",
           "contrast", "middle_vs_edges", "predicted_profile", "predicted_ratio",
           "arm_difference", "gradient_by_depth", "lever_at_init", "TABLE_COLUMNS", "JSON_KEYS",
           "DESIGN", "decide", "effect", "verdict_rows", "run_params"]

REMEDIES = ("none", "weighted", "oversample", "curriculum")
DEVICES = ("cpu", "cuda")
MIDDLE_WEIGHT, OVERSAMPLE_P, CURRICULUM_FRAC = 4.0, 0.5, 0.3
# v3: the init gradient is read at the answer token p (v2 read p + 1, a filler token)
# v4: the remedies' middle is the central half of the answer positions (was the middle third)
_VERSION = "train-v4"


# --------------------------------------------------------------------------------------------
# Validation


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
    from ...measure.hooks import capture_model

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


# --------------------------------------------------------------------------------------------
# At initialization


N_EX = 32   # held-out examples per evaluated answer position
N_PROBE = 8  # held-out sequences for the influence profile and the hooks


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
    from ...measure.jacobian import influence_profile

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
        from ... import cache as _cache

        return dict(_cache.cached("train-init", p, compute))
    return {k: np.asarray(v) for k, v in compute().items()}


# --------------------------------------------------------------------------------------------
# Training


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
    from ...measure.jacobian import influence_profile

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
        from ... import cache as _cache

        out = _cache.cached("train", p, lambda: _train(p, progress))
    else:
        out = {k: np.asarray(v) for k, v in _train(p, progress, cache=False).items()}
    out = dict(out)
    out["steps_to_half"] = steps_to_threshold(out["curve"], out["curve_steps"], 0.5)
    out["grad_init"] = np.asarray(out["grad_init_value"]).mean(1)
    return Result(out, meta=dict(p), columns=TABLE_COLUMNS, json_keys=JSON_KEYS)


#: The twin's version: its outputs and dtype (a change re-keys every twin)
_TWIN_VERSION = "train-twin-v1"
#: The steps of the chapter's twins (:func:`run_twins`): the most steps of
#: ``bench/bench_twin_rounding.py``'s grid at which the twin still catches every change of the
#: training step that the float32 check on the recording CPU catches (a unit test compares)
TWIN_STEPS = 100
#: The arrays of a twin: continuous, so that another CPU's rounding moves them by a measured,
#: tiny amount (accuracies flip where a float32 run's do; a twin has none)
TWIN_KEYS = ("train_loss", "curve_loss", "loss", "influence", "lambda")


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
        from ...measure.jacobian import influence_profile

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
        from ... import cache as _cache

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


# --------------------------------------------------------------------------------------------
# Summaries


def steps_to_threshold(curve, steps, threshold: float = 0.5) -> np.ndarray:
    """First checkpoint step at which each position's accuracy reaches ``threshold``.

    ``curve`` (C, P) and ``steps`` (C,) as returned by :func:`train_run`.  A position that never
    gets there is right-censored at ``steps[-1] + (steps[-1] - steps[-2])`` (one checkpoint
    interval past the end), so it counts as slower than any that did (chapter
    :ref:`ch-remedies`).
    """
    c = np.asarray(curve, float)
    s = np.asarray(steps, float)
    if c.ndim != 2 or s.ndim != 1 or c.shape[0] != s.size or s.size < 2:
        raise ValueError(f"curve (C, P) and steps (C,) with C >= 2 needed, got {c.shape}, "
                         f"{s.shape}")
    hit = c >= threshold
    censor = s[-1] + (s[-1] - s[-2])
    first = np.where(hit.any(0), s[np.argmax(hit, axis=0)], censor)
    return first


#: The CSV columns of ``posbias train``: one row per evaluated answer position.
TABLE_COLUMNS = ("position", "accuracy", "loss", "steps_to_half", "grad_init")
#: The keys of its JSON object (besides ``meta``).
JSON_KEYS = ("position", "accuracy", "loss", "influence", "lambda", "lambda_init", "curve",
             "curve_steps", "grad_init")


# --------------------------------------------------------------------------------------------
# The chapter's experiments, and the bigger sweep


#: The chapter's configuration: 2 layers, width 64, L = 64, 200 steps of batch 32 (equal compute
#: for every arm), kv recall with 4 pairs.
CHAPTER = dict(task="kv", layers=2, width=64, length=64, steps=200)

#: The arms of the chapter's experiments: name -> keyword arguments of :func:`train_run`.
ARMS = {
    "uniform": dict(answer_positions="uniform"),
    "start": dict(answer_positions="start"),
    "edges": dict(answer_positions="edges"),
    "weighted": dict(answer_positions="edges", remedy="weighted"),
    "oversample": dict(answer_positions="edges", remedy="oversample"),
    "curriculum": dict(answer_positions="edges", remedy="curriculum"),
    "residual_x2": dict(answer_positions="uniform", residual_scale=2.0),
    "residual_x0.5": dict(answer_positions="uniform", residual_scale=0.5),
}


#: The chapter's design (*Fixing it in training*), locked: the registry's latest entry for
#: "remedies" (:mod:`posbias_nb.experiments.base.design`).  The chapter reads its seeds, arms, depths
#: and families from here.
DESIGN = Design("remedies", {
    "config": dict(CHAPTER),
    "arms": {k: dict(v) for k, v in ARMS.items()},
    "chapter_arms": ["uniform", "edges", "weighted", "oversample", "curriculum"],
    "seeds": 10,
    "depths": [2, 4, 8],
    "remedies": ["weighted", "oversample", "curriculum"],
    "remedy_level": "Bonferroni over the three remedies: 1 - 0.05 / 3",
    "residual_scales": [0.5, 1.0, 2.0],
    # each claim's declared rule (design.decide_rule), applied by decide() and verdict_rows()
    "rules": {
        "grad": {"direction": "less", "threshold": 1.0,
                 "says": "the gradient at init, middle over ends, below 1"},
        "depth": {"direction": "less", "threshold": 0.0,
                  "says": "the middle-over-ends gradient ratio falls from 2 to 8 layers, seed by "
                          "seed: the change below 0"},
        "factorial": {"direction": "less", "threshold": {"given": "factorial"},
                      "says": "at the deepest depth H the measured ratio below the seed's "
                              "1/(H-1)!, which the chapter supplies"},
        "speed": {"direction": "less", "threshold": 0.0, "testable": False,
                  "says": "the middle learns slower (area under the curve, middle minus ends, "
                          "below 0); not testable at 2 layers, where the rollout has no dead "
                          "zone"},
        "biased": {"direction": "less", "threshold": 0.0,
                   "says": "answers at the ends widen the middle-minus-ends gap against "
                           "uniform data: the paired change below 0"},
        "influ": {"direction": "less", "threshold": 0.0,
                  "says": "answers at the ends shrink the influence's middle share: the paired "
                          "change below 0"},
        "narrows": {"direction": "greater", "threshold": 0.0,
                    "says": "a remedy narrows the valley against the edges arm: the gap's "
                            "paired change above 0"},
        "faster": {"direction": "greater", "threshold": 0.0,
                   "says": "with a remedy the middle learns faster: above 0"},
        "slower": {"direction": "less", "threshold": 0.0,
                   "says": "with a remedy the ends learn slower: below 0"},
        "lever": {"direction": {"sign_of": "predicted"}, "threshold": 0.0,
                  "says": "the initial middle share moves (alpha 0.5 vs 2) in the direction "
                          "the rollout predicts: the sign of the predicted change, which the "
                          "chapter supplies"},
        "size": {"direction": {"opposite_sign_of": "predicted"}, "threshold": 0.0,
                 "says": "the measured change is smaller than the predicted one: measured "
                         "minus predicted on the side opposite to the prediction's sign"},
    },
})


def claim_rule(claim: str) -> dict:
    check(DESIGN)
    rules = DESIGN.as_dict()["rules"]
    if claim not in rules:
        raise ValueError(f"the remedies design declares no rule {claim!r}; declared: "
                         f"{', '.join(sorted(rules))}")
    return rules[claim]


def decide(claim: str, interval, **given) -> str:
    """The verdict word of ``interval`` under the design's declared rule ``claim``
    (:data:`DESIGN` ``rules``; :func:`posbias_nb.experiments.base.design.decide_rule`); ``given``
    supplies what a data-set rule names (``factorial=``, ``predicted=``).  Chapter
    :ref:`ch-remedies`.  ValueError for a claim the design does not declare, or a missing or
    unexpected given value."""
    return decide_rule(claim_rule(claim), interval, **given)


def effect(claim: str, interval, **given) -> dict:
    """The verdict row's ``effect`` under the declared rule ``claim``
    (:func:`posbias_nb.experiments.base.design.rule_effect`)."""
    return rule_effect(claim_rule(claim), interval, **given)


#: The remedies' names in the verdict rows, in the order of the design's ``remedies``.
REMEDY_NAMES = {"weighted": "middle-weighted loss", "oversample": "middle oversampling",
                "curriculum": "middle-first curriculum"}


def verdict_rows(m: dict) -> list:
    """The chapter's verdict rows (:func:`posbias_nb.notebook.verdict_table`), every word by
    :func:`decide`.  ``m`` holds the chapter's measurements: ``g_ratio`` and ``pred_ratio``
    (section 1), ``D`` (:func:`gradient_by_depth`) and ``d_trend``, ``auc_me`` and ``layers``,
    ``dgap`` and ``dmm`` (section 2), ``close``, ``gain`` and ``cost`` per remedy with their
    ``level`` (section 3), ``d_pred`` and ``d_init`` (section 4); intervals are
    ``(estimate, low, high)``.  Chapter :ref:`ch-remedies`.

    Raises
    ------
    ValueError
        A measurement missing from ``m`` (named).
    """
    from ...notebook import interval as iv

    need = ("g_ratio", "pred_ratio", "D", "d_trend", "auc_me", "layers", "dgap", "dmm",
            "close", "gain", "cost", "level", "d_pred", "d_init")
    missing = [k for k in need if k not in m]
    if missing:
        raise ValueError(f"verdict_rows needs the measurements {missing}")
    D, depths = m["D"], sorted(m["D"])
    H = depths[-1]
    fact = D[H]["factorial"]

    def vals(ci):
        return dict(zip(("est", "lo", "hi"), ci))

    def row(key, claim, paper, measured, rule, x, scale=None, **given):
        eff = effect(rule, x, **given)
        if scale is not None:
            eff["scale"] = scale
        return dict(key=key, claim=claim, paper=paper, measured=measured,
                    verdict=decide(rule, x, **given), values=vals(x), effect=eff)

    pred = {"predicted": m["d_pred"][0]}
    return [
        row("grad", "the gradient reaching the middle is smaller at init (2 layers)",
            "factorially smaller in the dead zone",
            f"middle / ends {iv(*m['g_ratio'], '.2f')} (rollout: {m['pred_ratio']:.2f})",
            "grad", m["g_ratio"]),
        row("depth", "the middle's gradient at init falls behind the ends' with depth",
            "a dead zone that deepens with depth",
            f"middle / ends at H = {', '.join(str(h) for h in depths)}: "
            + ", ".join(iv(*D[h]["measured_ci"], ".3f") for h in depths)
            + " (rollout: " + ", ".join(f"{D[h]['predicted_ci'][0]:.3f}" for h in depths)
            + f"); change {depths[0]} to {H} layers {iv(*m['d_trend'], '.3f')}",
            "depth", m["d_trend"], scale=1.0),
        row("factorial", f"... by a factor 1/(H-1)! ({H} layers: 1/{math.factorial(H - 1)})",
            "factorially smaller", f"middle / ends at H = {H}: {iv(*D[H]['measured_ci'], '.3f')}",
            "factorial", D[H]["measured_ci"], factorial=fact),
        row("speed", "so the middle learns slower (effective learning rate)", "factorially slower",
            f"learning speed (area under curve), middle - ends {iv(*m['auc_me'], '.3f')} at "
            f"{m['layers']} layers, where the rollout has no dead zone",
            "speed", m["auc_me"], scale=1.0),
        row("biased", "biased data (answers at the ends) teaches a task U",
            "position bias follows the data (Wu et al.)",
            f"middle - ends gap vs uniform data {iv(*m['dgap'], '.3f')}", "biased", m["dgap"],
            scale=1.0),
        row("influ", "biased data deepens the influence U", "bias learned into the model",
            f"middle share of influence vs uniform data {iv(*m['dmm'], '.3f')}", "influ", m["dmm"],
            scale=1.0),
    ] + [
        row(r, f"remedy: {name} narrows the valley", "helps the middle (proposed, untested)",
            f"vs ends-biased data ({100 * m['level']:.1f}% intervals): gap "
            f"{iv(*m['close'][r], '.3f')}, middle {iv(*m['gain'][r], '.3f')} (faster: "
            f"{decide('faster', m['gain'][r])}), ends {iv(*m['cost'][r], '.3f')} (slower: "
            f"{decide('slower', m['cost'][r])})", "narrows", m["close"][r], scale=1.0)
        for r, name in REMEDY_NAMES.items()
    ] + [
        row("lever", "scaling the residual path at init moves the U as the rollout says",
            "lambda_t decides the U (structural theory)",
            f"middle share at init, alpha 0.5 vs 2: predicted {iv(*m['d_pred'], '+.3f')}, "
            f"measured {iv(*m['d_init'], '+.3f')}", "lever", m["d_init"], scale=1.0, **pred),
    ]


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
        from ... import cache as _cache

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


# --------------------------------------------------------------------------------------------
# Summaries over seeds (the unit of replication is the seed)


def middle_and_edges(position) -> tuple[np.ndarray, np.ndarray]:
    """Indices into the evaluated answer positions: the middle, and the two ends.

    The book's one middle (:func:`posbias_nb.metrics.regions`) applied to the ``P`` evaluated
    slots: the central half of them, against the first and the last slot.  Declared from ``P``
    alone, before any data (chapter :ref:`ch-remedies`); with the chapter's eight positions
    1, 10, 18, 27, 35, 44, 52, 61 the middle is 18, 27, 35, 44.

    >>> middle_and_edges([1, 10, 18, 27, 35, 44, 52, 61])
    (array([2, 3, 4, 5]), array([0, 7]))
    """
    from ...metrics import regions

    pos = np.asarray(position)
    if pos.ndim != 1 or pos.size < 3:
        raise ValueError(f"need at least 3 evaluated positions, got {pos.shape}")
    r = regions(pos.size)
    return r.indices("middle"), np.r_[r.indices("first"), r.indices("last")]


def units(results, what: str = "auc", per_seed: bool = True) -> np.ndarray:
    """Per-seed numbers at every evaluated position: shape (seeds, positions); with
    ``per_seed=False`` one row per seed x held-out example (rows of one seed share an
    initialization, so they are *not* independent units).

    ``what``: ``"auc"`` the accuracy averaged over the checkpoints (the area under the learning
    curve, a learning-speed score in [0, 1]); ``"final"`` the correctness after training;
    ``"grad"`` the norm of the loss gradient at the answer token at init.  Rows of two arms
    trained with the same seeds are paired (same init, same held-out examples).
    Chapter :ref:`ch-remedies`.
    """
    key = {"auc": "curve_correct", "final": "correct", "grad": "grad_init_value"}
    if what not in key:
        raise ValueError(f"what must be one of {', '.join(key)}, got {what!r}")
    out = []
    for r in results:
        x = np.asarray(r[key[what]], float)
        x = (x.mean(0) if what == "auc" else x).T
        out.append(x.mean(0, keepdims=True) if per_seed else x)
    return np.concatenate(out)


def contrast(u, position, ratio: bool = False) -> np.ndarray:
    """Per row of ``u`` (seeds, positions): mean over the middle minus mean over the two ends
    (:func:`middle_and_edges`), or with ``ratio`` middle over ends.

    >>> contrast([[1.0, 0.5, 0.5, 0.5, 0.5, 1.0]], [1, 2, 3, 4, 5, 6]).tolist()
    [-0.5]
    """
    x = np.asarray(u, float)
    if x.ndim != 2 or x.shape[1] != np.asarray(position).size:
        raise ValueError(f"u must be (seeds, positions) with {np.asarray(position).size} "
                         f"positions, got {x.shape}")
    mid, edge = middle_and_edges(position)
    m, e = x[:, mid].mean(1), x[:, edge].mean(1)
    return m / e if ratio else m - e


def middle_vs_edges(u, position, ratio: bool = False, level: float = 0.95):
    """(estimate, low, high): Student *t* interval over seeds
    (:func:`posbias_nb.stats.mean_interval`) of the per-seed :func:`contrast`, middle minus ends
    (or their ratio).

    ``u`` has one row per seed (:func:`units` with ``per_seed=True``): the seeds are the
    independent units; a percentile bootstrap over five seeds covers only ~84%, and resampling
    seed x example rows would ignore that the rows of one seed share an init.
    Chapter :ref:`ch-remedies`.
    """
    from ...stats import mean_interval

    return mean_interval(contrast(u, position, ratio), level=level)


def arm_difference(u_a, u_b, position, where: str = "middle", level: float = 0.95):
    """(estimate, low, high): *t* interval over seeds of the paired difference between two arms
    trained with the same seeds (same init, same held-out examples), seed by seed: of their
    means over the ``"middle"`` or the ``"edges"`` positions (:func:`middle_and_edges`), or,
    for ``"gap"``, of their middle-minus-ends gaps (positive: arm ``a`` has the smaller valley).
    Chapter :ref:`ch-remedies`.

    >>> a = [[1.0, 0.9, 1.0], [1.0, 0.8, 1.0], [1.0, 0.9, 1.0]]
    >>> b = [[1.0, 0.5, 1.0], [1.0, 0.6, 1.0], [1.0, 0.4, 1.0]]
    >>> [round(v, 2) for v in arm_difference(a, b, [1, 2, 3], "gap")]   # 3 seeds: wide
    [0.37, -0.01, 0.75]
    """
    from ...stats import mean_interval

    if where not in ("middle", "edges", "gap"):
        raise ValueError(f"where must be 'middle', 'edges' or 'gap', got {where!r}")
    a, b = np.asarray(u_a, float), np.asarray(u_b, float)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"arms are not paired: shapes {a.shape} and {b.shape}")
    mid, edge = middle_and_edges(position)
    if where == "gap":
        d = contrast(a, position) - contrast(b, position)
    else:
        idx = mid if where == "middle" else edge
        d = a[:, idx].mean(1) - b[:, idx].mean(1)
    return mean_interval(d, level=level)


def predicted_profile(lambdas, length: int) -> np.ndarray:
    r"""The theory's prediction: residual-aware rollout with uniform causal kernels and the given
    :math:`\lambda_t` (``rollout.rollout``; chapter :ref:`ch-rollout`, :eq:`eq-rem-rollout` in
    :ref:`ch-remedies`)."""
    from ...rollout import rollout, uniform_causal

    lam = np.asarray(lambdas, float)
    A = uniform_causal(int(length))
    return rollout([A] * lam.size, lam)


def predicted_ratio(lambdas, position, length: int) -> float:
    """The rollout's middle-over-ends ratio of the gradient at the evaluated answer positions
    (:func:`predicted_profile` read at ``position``, middle and ends of :func:`middle_and_edges`).

    >>> round(predicted_ratio([1.0], [1, 2, 3, 4, 5, 6], 8), 6)   # one uniform layer: flat
    1.0
    """
    pred = predicted_profile(lambdas, length)
    return float(contrast(pred[np.asarray(position)][None], position, ratio=True)[0])


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
    from ...stats import mean_interval

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
    from ...metrics import middle_share

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
