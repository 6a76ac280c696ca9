r"""Measured attention kernels and attention shares of real models, and the rollout they predict.

The structural theory (:mod:`posbias_nb.rollout`) needs two things per layer ``t``: a
row-stochastic kernel :math:`A_t` and an attention share :math:`\lambda_t`.  This module measures
both on a real model through forward hooks, and turns them into predicted influence profiles.

What is measured, exactly
-------------------------
For a batch of ``B`` sequences of ``L`` tokens (:func:`posbias_nb.measure.text_batch`, the same
windows :func:`posbias_nb.measure.profile` reads for the same ``seed``):

* :math:`A_t` — the attention probabilities of layer ``t`` (``attn_implementation="eager"``,
  ``output_attentions=True``: the post-softmax matrix each head multiplies the values with),
  averaged over the heads and over the ``B`` sequences, in float64.  Rows are then renormalized
  to sum to 1 (float32 softmax rounding, below ``1e-6``) and entries above the diagonal, which
  the causal mask makes exactly 0, are checked to be below ``1e-6`` and set to 0.
* :math:`\lambda_t` — the authors' attention share (Herasimchyk et al., 2026; their code
  ``ml-uhh/position-bias``, ``src/util/hooks.py``):

  .. math::
      \lambda_t = \frac{1}{B L} \sum_{b=1}^{B} \sum_{i=1}^{L}
      \frac{\lVert a_{t,b,i} \rVert_2}{\lVert x_{t,b,i} \rVert_2 + \lVert a_{t,b,i} \rVert_2},

  where :math:`x_{t,b,i}` is the residual stream entering layer ``t`` at token ``i`` (the
  layer's input hidden state, captured by a forward pre-hook on the layer) and
  :math:`a_{t,b,i}` is what the attention block adds to it, :math:`\mathrm{Attn}(\mathrm{Norm}\,x)`
  (a forward hook on the module whose output is added to the residual).  Norms are Euclidean
  norms per token; the ratio is taken per token, then averaged over **all** tokens (position 1
  included) and sequences.  The module whose output is :math:`a` depends on the family:

  * ``bloom``: ``self_attention.dense`` (BLOOM's attention module adds the residual itself,
    so its own output is :math:`x + a`);
  * ``gemma2`` / ``gemma3`` (sandwich norm): ``post_attention_layernorm``, the norm after
    attention, whose output is what is added to the residual;
  * all others (gpt2, falcon, mpt, qwen2, llama, ...): the attention module (``attn``,
    ``self_attn``, ``self_attention``), its first output.

  The bias of the output projection is part of :math:`a`.  The model runs in float32.

Predictions (:func:`predict`)
-----------------------------
All four are :func:`posbias_nb.rollout.rollout` rows, i.e. the last row of
:math:`R_T \cdots R_1` with :math:`R_t = (1-\lambda_t) I + \lambda_t K_t`:

* ``"attention"`` — attention-only rollout: :math:`\lambda_t = 1`, :math:`K_t = A_t` measured.
* ``"residual"`` — residual-aware rollout: measured :math:`\lambda_t`, :math:`K_t = A_t` measured.
* ``"positional"`` — the structural theory without content (the authors' ``no_content``
  setting): measured :math:`\lambda_t`, :math:`K_t` = the architecture's content-free kernel,
  :func:`positional_kernel` (uniform causal for learned or rotary positions, the head-averaged
  ALiBi kernel for ALiBi models, with the slopes and logit scale the architecture uses).
* ``"content"`` — the structural theory's content abstraction: measured :math:`\lambda_t`,
  :math:`K_t = (1-d_t) K + d_t I` (:func:`posbias_nb.rollout.content` in probability space, on
  the positional kernel ``K``), with :math:`d_t` chosen so that the **mean diagonal** of
  :math:`K_t` equals the measured mean diagonal of :math:`A_t`,
  :math:`d_t = (\bar a_t - \bar k)/(1 - \bar k)`, clipped to the range that keeps every entry
  nonnegative.  One number per layer summarizes all content.

The high-level entry points :func:`capture` and :func:`measured_influence` go through
:mod:`posbias_nb.cache`; a warm call loads no model.
"""
from __future__ import annotations

import sys

import numpy as np

from ._validate import positive_int

__all__ = [
    "MODES",
    "capture_model",
    "fix_falcon_eager_alibi",
    "capture",
    "measured_influence",
    "positional_kernel",
    "predict",
    "register_cli",
]

MODES = ("attention", "residual", "positional", "content")
_DEF_VERSION = "capture-v1"  # bump when the definition of A or lambda changes


# --------------------------------------------------------------------------------------------
# Finding the residual stream and the attention output of each layer


def _layers(model):
    """The decoder layers (a ModuleList with one entry per layer), layer 1 first."""
    import torch

    base = model.base_model
    T = None
    for k in ("num_hidden_layers", "n_layer", "n_layers", "num_layers"):
        v = getattr(model.config, k, None)
        if isinstance(v, int):
            T = v
            break
    for name in ("layers", "h", "blocks"):
        mod = getattr(base, name, None)
        if isinstance(mod, torch.nn.ModuleList) and (T is None or len(mod) == T):
            return list(mod)
    raise ValueError(f"{model.config.model_type}: cannot find the decoder layers to hook")


def _attn_output_module(layer):
    """(module, takes_first) whose forward output is the attention block's addition to x."""
    sa = getattr(layer, "self_attention", None)
    if sa is not None and hasattr(sa, "dense") and hasattr(sa, "query_key_value") \
            and type(sa).__name__.startswith("Bloom"):
        return sa.dense, False
    if hasattr(layer, "pre_feedforward_layernorm") and hasattr(layer, "post_attention_layernorm"):
        return layer.post_attention_layernorm, False  # Gemma's sandwich norm
    for name in ("self_attn", "attn", "self_attention", "attention"):
        m = getattr(layer, name, None)
        if m is not None:
            return m, True
    raise ValueError(f"{type(layer).__name__}: cannot find the attention module to hook")


def _parallel_block(model) -> bool:
    cfg = model.config
    return bool(getattr(cfg, "parallel_attn", False) or getattr(cfg, "new_decoder_architecture",
                                                                   False)
                or getattr(cfg, "use_parallel_residual", False))


def capture_model(model, input_ids, chunk: int = 4) -> dict:
    r"""Measure :math:`A_t` and :math:`\lambda_t` of ``model`` on a batch (see the module doc).

    A Falcon model with ALiBi gets :func:`fix_falcon_eager_alibi` installed (in place).

    Parameters
    ----------
    model : transformers ``*ForCausalLM``
        Loaded with ``attn_implementation="eager"`` (e.g. :func:`posbias_nb.models.load`).
    input_ids : array_like of int, shape (B, L) or (L,)
        Token ids, one row per sequence.
    chunk : int
        Sequences per forward pass (memory only; the numbers do not depend on it beyond
        float rounding).

    Returns
    -------
    dict of numpy arrays
        ``A`` (T, L, L) float64 row-stochastic, lower triangular; ``lam`` (T,) the attention
        shares; ``lam_pos`` (T, L) the same ratio averaged over sequences only, per position;
        ``lam_sd`` (T,) the standard deviation of the per-token ratio; ``upper_mass`` (T,) the
        largest row mass found above the diagonal before it was zeroed.

    Raises
    ------
    ValueError
        For a model whose layers cannot be hooked, one that does not return attention
        probabilities (not eager), bad input ids, or a non-causal kernel.
    """
    import torch

    if getattr(model.config, "_attn_implementation", "eager") != "eager":
        raise ValueError("capture needs attn_implementation='eager' (attention probabilities "
                         f"are not materialized by {model.config._attn_implementation!r})")
    if _parallel_block(model):
        raise ValueError(f"{model.config.model_type} runs attention and MLP in parallel: "
                         "lambda as defined here (attention added to x alone) does not apply")
    ids = torch.as_tensor(np.asarray(input_ids), dtype=torch.long)
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.shape[1] < 1:
        raise ValueError(f"input_ids must have shape (batch, L), got {tuple(ids.shape)}")
    chunk = positive_int("chunk", chunk)
    B, L = ids.shape
    vocab = model.get_input_embeddings().num_embeddings
    if int(ids.min()) < 0 or int(ids.max()) >= vocab:
        raise ValueError(f"token ids must lie in 0..{vocab - 1}")
    fix_falcon_eager_alibi(model)  # idempotent; see its docstring
    layers = _layers(model)
    T = len(layers)
    device = next(model.parameters()).device
    store: dict = {}
    handles = []

    def pre_hook(t):
        def f(module, args, kwargs):
            x = args[0] if args else kwargs["hidden_states"]
            store[("x", t)] = x.detach().float()
        return f

    def out_hook(t, first):
        def f(module, args, output):
            a = output[0] if (first and isinstance(output, (tuple, list))) else output
            x = store.pop(("x", t))
            na = a.detach().float().norm(dim=-1)
            nx = x.norm(dim=-1)
            den = nx + na
            r = torch.where(den > 0, na / torch.where(den > 0, den, 1.0), torch.zeros_like(den))
            store[("r", t)] = r.double().cpu()
        return f

    A = np.zeros((T, L, L))
    ratios = np.zeros((T, B, L))
    try:
        for t, layer in enumerate(layers):
            handles.append(layer.register_forward_pre_hook(pre_hook(t), with_kwargs=True))
            mod, first = _attn_output_module(layer)
            handles.append(mod.register_forward_hook(out_hook(t, first)))
        for b0 in range(0, B, chunk):
            sl = ids[b0:b0 + chunk].to(device)
            with torch.no_grad():
                out = model.base_model(input_ids=sl, output_attentions=True, use_cache=False)
            att = getattr(out, "attentions", None)
            if att is None or len(att) != T or any(a is None for a in att):
                raise ValueError(f"{model.config.model_type} did not return attention "
                                 "probabilities for every layer (is the attention eager?)")
            for t in range(T):
                A[t] += att[t].double().sum(dim=(0, 1)).cpu().numpy() / att[t].shape[1]
                r = store.pop(("r", t), None)
                if r is None:
                    raise ValueError(f"layer {t + 1}: the attention-output hook did not fire")
                ratios[t, b0:b0 + sl.shape[0]] = r.numpy()
            del out, att
    finally:
        for h in handles:
            h.remove()
        store.clear()
    A /= B
    upper = np.triu(A, 1)
    upper_mass = upper.sum(axis=2).max(axis=1)
    if np.any(upper_mass > 1e-6):
        t = int(np.argmax(upper_mass))
        raise ValueError(f"layer {t + 1}: attention above the diagonal ({upper_mass[t]:.3g}); "
                         "the model is not causal")
    A = np.tril(A)
    A /= A.sum(axis=2, keepdims=True)
    lam = ratios.mean(axis=(1, 2))
    return {"A": A, "lam": lam, "lam_pos": ratios.mean(axis=1),
            "lam_sd": ratios.reshape(T, -1).std(axis=1), "upper_mass": upper_mass}


# --------------------------------------------------------------------------------------------
# Cached, high-level


def _params(model: str, weights: str, length: int, batch: int, seed: int) -> tuple[dict, dict]:
    from . import measure, models

    info = models.describe(model)
    length = positive_int("length", length, minimum=2)
    batch = positive_int("batch", batch)
    seed = positive_int("seed", seed, minimum=0)
    if weights not in models.WEIGHTS:
        raise ValueError(f"weights must be 'random' or 'pretrained', got {weights!r}")
    if info["max_length"] is not None and length > info["max_length"]:
        raise ValueError(f"length {length} is beyond the context of {info['name']} "
                         f"({info['max_length']} tokens)")
    if weights == "pretrained" and not info["pretrained_available"]:
        raise ValueError(f"pretrained weights for {info['name']!r} are not installed "
                         f"({info['pretrained_source']}); use --weights random")
    params = {
        "model": info["name"], "fingerprint": info["fingerprint"], "weights": weights,
        "seed": seed if weights == "random" else None, "text_seed": seed, "length": length,
        "batch": batch, "source": "text", "corpus": measure.corpus_digest(),
        "definition": _DEF_VERSION, "attn": "eager",
        "falcon_alibi_fix": info["family"] == "falcon" or None,
        "torch": measure._version("torch"), "transformers": measure._version("transformers"),
    }
    return params, info


def _zero_alibi_hook(module, args, kwargs):
    import torch

    if kwargs.get("alibi") is not None:
        kwargs = dict(kwargs)
        kwargs["alibi"] = torch.zeros_like(kwargs["alibi"])
    return args, kwargs


def fix_falcon_eager_alibi(model) -> bool:
    r"""Make eager Falcon-with-ALiBi compute what its fused (SDPA) attention computes.

    In transformers 5.x, ``FalconModel`` folds :math:`\mathrm{ALiBi}/\sqrt{d_h}` into the
    attention mask, and the *eager* ``FalconAttention`` adds ALiBi to the scores once more
    (:math:`(QK^\top + \mathrm{ALiBi})/\sqrt{d_h} + \text{mask}`), so eager attention carries
    the bias twice while SDPA (and the original Falcon code) carries it once.  A forward
    pre-hook on every attention module replaces its ``alibi`` argument by zeros, leaving the
    bias in the mask only: eager and SDPA then agree (``tests/test_capture.py`` checks it).
    Returns True if hooks were installed (a Falcon model with ALiBi in eager mode).
    """
    cfg = model.config
    if cfg.model_type != "falcon" or not getattr(cfg, "alibi", False):
        return False
    if getattr(cfg, "_attn_implementation", "eager") != "eager":
        return False
    for layer in _layers(model):
        att = layer.self_attention
        if getattr(att, "_posbias_alibi_fix", None) is None:
            att._posbias_alibi_fix = att.register_forward_pre_hook(_zero_alibi_hook,
                                                                   with_kwargs=True)
    return True


def _load(model, weights, seed):
    from . import models

    m, tok, info = models.load(model, weights=weights, seed=seed, attn="eager")
    fix_falcon_eager_alibi(m)
    return m, tok, info


def _compute_many(model: str, weights: str, lengths, batch: int, seed: int,
                  influence: bool) -> None:
    """Load the model once and fill every missing cache entry for ``lengths``."""
    from . import cache, measure, models

    todo = []
    for L in lengths:
        p, _ = _params(model, weights, L, batch, seed)
        need_c = cache.load("capture", p) is None
        need_i = influence and cache.load("capture-influence", p) is None
        if need_c or need_i:
            todo.append((L, p, need_c, need_i))
    if not todo:
        return
    m, tok, _ = _load(model, weights, seed)
    vocab = m.get_input_embeddings().num_embeddings
    for L, p, need_c, need_i in todo:
        ids = measure.text_batch(tok, L, batch, seed=seed, source="text", vocab_size=vocab)
        if need_c:
            res = capture_model(m, ids)
            res["input_ids"] = ids
            res["n_heads"] = np.array(_n_heads(m))
            cache.store("capture", p, res)
        if need_i:
            r = measure.influence_profile(m, ids, target="argmax_prob", method="exact",
                                          seed=seed, progress=sys.stderr.isatty())
            cache.store("capture-influence", p, {"influence": r["influence"],
                                                  "batch_stderr": r["batch_stderr"],
                                                  "per_sequence": r["per_sequence"],
                                                  "input_ids": ids})
    del m


def _n_heads(m) -> int:
    cfg = m.config
    for k in ("num_attention_heads", "n_head", "n_heads"):
        v = getattr(cfg, k, None)
        if isinstance(v, int):
            return v
    raise ValueError("cannot read the number of heads")


def capture(model: str, weights: str = "random", length: int = 128, batch: int = 2,
            seed: int = 0) -> dict:
    r"""Measured kernels and attention shares of a zoo model, through the on-disk cache.

    Loads ``model`` (:func:`posbias_nb.models.load`, eager attention, weights seeded with
    ``seed``), draws ``batch`` text windows of ``length`` tokens
    (:func:`posbias_nb.measure.text_batch` with ``seed``: the windows
    :func:`posbias_nb.measure.profile` reads for the same seed) and runs :func:`capture_model`.

    Returns
    -------
    dict
        As :func:`capture_model` plus ``input_ids`` (B, L), ``n_heads`` (0-d), and the scalars
        ``model``, ``weights``, ``family``, ``length`` (plain Python values).

    Raises
    ------
    ValueError
        Unknown model, bad sizes, a length beyond the model's context, pretrained weights not
        installed, or a model that cannot be hooked.
    """
    from . import cache

    p, info = _params(model, weights, length, batch, seed)
    hit = cache.load("capture", p)
    if hit is None:
        _compute_many(model, weights, [length], batch, seed, influence=False)
        hit = cache.load("capture", p)
        if hit is None:  # caching switched off: compute in memory
            return _uncached(model, weights, length, batch, seed, info)
    return _decorate(hit, info, weights, length)


def _uncached(model, weights, length, batch, seed, info, influence=False):
    from . import measure

    m, tok, _ = _load(model, weights, seed)
    ids = measure.text_batch(tok, length, batch, seed=seed, source="text",
                             vocab_size=m.get_input_embeddings().num_embeddings)
    if influence:
        r = measure.influence_profile(m, ids, target="argmax_prob", method="exact", seed=seed)
        return {"influence": r["influence"], "batch_stderr": r["batch_stderr"],
                "per_sequence": r["per_sequence"], "input_ids": ids}
    res = capture_model(m, ids)
    res["input_ids"] = ids
    res["n_heads"] = np.array(_n_heads(m))
    return _decorate(res, info, weights, length)


def _decorate(res: dict, info: dict, weights: str, length: int) -> dict:
    out = dict(res)
    out.update(model=info["name"], family=info["family"], weights=weights, length=int(length))
    return out


def measured_influence(model: str, weights: str = "random", length: int = 128, batch: int = 2,
                       seed: int = 0, lengths=None) -> dict:
    r"""The gradient-measured influence on the **same** model and sequences as :func:`capture`.

    :func:`posbias_nb.measure.influence_profile` with ``target="argmax_prob"``: the L2 norm per
    position of the gradient of the probability of the argmax next token w.r.t. the input
    embeddings, averaged over the ``batch`` sequences (the authors' measured influence).  The
    model is loaded with eager attention, which computes the same function as the fused one and,
    unlike it, exists for every family of the zoo (BLOOM and MPT have no fused attention in
    transformers 5).  One model load fills the cache of :func:`capture` too; with ``lengths``
    it fills every listed length at once (and returns the entry for ``length``).

    Returns
    -------
    dict of numpy arrays
        ``influence`` (L,), ``batch_stderr`` (L,), ``per_sequence`` (B, L), ``input_ids``.
    """
    from . import cache

    p, info = _params(model, weights, length, batch, seed)
    hit = cache.load("capture-influence", p)
    if hit is None:
        ls = sorted({int(length), *(int(x) for x in (lengths or []))})
        _compute_many(model, weights, ls, batch, seed, influence=True)
        hit = cache.load("capture-influence", p)
        if hit is None:
            return _uncached(model, weights, length, batch, seed, info, influence=True)
    return hit


# --------------------------------------------------------------------------------------------
# Predictions


def positional_kernel(family: str, L: int, n_heads: int, config=None) -> np.ndarray:
    r"""The architecture's content-free attention kernel: all query–key products equal.

    * ``bloom``, ``mpt``: ALiBi, :func:`posbias_nb.rollout.alibi` with the model's heads (MPT's
      slopes :math:`2^{-h \cdot 8/n}` with ``alibi_bias_max = 8`` are the standard ones).
    * ``falcon`` with ALiBi: the same slopes, but transformers' Falcon multiplies the biased
      logits by :math:`1/\sqrt{d_h}`, so the bias is scaled by ``1/sqrt(head_dim)``.
    * everything else (learned absolute or rotary positions): uniform causal attention.

    ``config`` (a transformers config) is needed only for Falcon's head size and MPT's
    ``alibi_bias_max``; without it Falcon raises ``ValueError``.
    """
    from . import rollout

    L = positive_int("L", L)
    if family == "bloom":
        return rollout.alibi(L, n_heads)
    if family == "mpt":
        bias_max = 8
        if config is not None:
            ac = config.attn_config
            get = ac.get if isinstance(ac, dict) else (lambda k, d=None: getattr(ac, k, d))
            bias_max = get("alibi_bias_max", 8) or 8
            if not get("alibi", True):
                return rollout.uniform_causal(L)
        if bias_max == 8:
            return rollout.alibi(L, n_heads)
        if n_heads & (n_heads - 1):
            raise ValueError("MPT ALiBi with alibi_bias_max != 8 needs a power-of-two head count")
        slopes = 2.0 ** (-bias_max * np.arange(1, n_heads + 1) / n_heads)
        return _alibi_from_slopes(L, slopes)
    if family == "falcon":
        if config is None:
            raise ValueError("the Falcon kernel needs the config (head size, alibi switch)")
        if not getattr(config, "alibi", False):
            return rollout.uniform_causal(L)
        head_dim = config.hidden_size // config.num_attention_heads
        return rollout.alibi(L, n_heads, scale=1.0 / np.sqrt(head_dim))
    return rollout.uniform_causal(L)


def _alibi_from_slopes(L: int, slopes) -> np.ndarray:
    i = np.arange(L)[:, None]
    j = np.arange(L)[None, :]
    causal = j <= i
    A = np.zeros((L, L))
    for m in slopes:
        w = np.where(causal, np.exp(-m * np.where(causal, i - j, 0)), 0.0)
        A += w / w.sum(axis=1, keepdims=True)
    return A / len(slopes)


def _content_diag(K: np.ndarray, target_mean_diag: float) -> float:
    k = float(np.mean(np.diag(K)))
    if k >= 1.0:
        return 0.0
    d = (target_mean_diag - k) / (1.0 - k)
    kd = np.diag(K)
    with np.errstate(divide="ignore"):
        lo = np.max(np.where(kd < 1, -kd / (1 - kd), -np.inf))  # (1-d) K_ii + d >= 0
    return float(np.clip(d, lo, 1.0))


def predict(captured: dict, mode: str = "residual") -> np.ndarray:
    r"""A predicted influence profile (probability vector, length L) from captured quantities.

    ``mode`` is one of :data:`MODES` (see the module docstring): ``"attention"`` (λ = 1,
    measured kernels), ``"residual"`` (measured λ and kernels), ``"positional"`` (measured λ,
    the architecture's content-free kernel), ``"content"`` (measured λ, the content-free kernel
    plus a diagonal term matching each layer's measured mean self-attention).

    Raises
    ------
    ValueError
        For an unknown mode or a dict without ``A`` and ``lam``.
    """
    from . import models, rollout

    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    try:
        A = np.asarray(captured["A"], dtype=np.float64)
        lam = np.asarray(captured["lam"], dtype=np.float64)
    except (KeyError, TypeError):
        raise ValueError("captured must be a dict with 'A' (T, L, L) and 'lam' (T,)") from None
    if mode == "attention":
        return rollout.rollout(A, np.ones(lam.size))
    if mode == "residual":
        return rollout.rollout(A, lam)
    L = A.shape[1]
    if "n_heads" not in captured or ("model" not in captured and "family" not in captured):
        raise ValueError(f"mode {mode!r} needs the architecture: pass the dict of capture() "
                         "(with 'model' or 'family', and 'n_heads')")
    name = str(captured.get("model"))
    cfg = models.build_config(name) if name in models.ZOO else None
    family = str(captured.get("family", getattr(cfg, "model_type", "")))
    K = positional_kernel(family, L, int(captured["n_heads"]), cfg)
    if mode == "positional":
        return rollout.rollout(K, lam)
    diag = np.diagonal(A, axis1=1, axis2=2).mean(axis=1)
    kernels = np.stack([rollout.content(L, _content_diag(K, float(m)), base=K) for m in diag])
    return rollout.rollout(kernels, lam)


# --------------------------------------------------------------------------------------------
# Command line: posbias rollout


def _cmd_rollout(args) -> tuple[dict, dict]:
    from . import __version__, _cli_ext, measure

    _cli_ext._quiet_libraries()
    try:
        cap = capture(args.model, weights=args.weights, length=args.length, batch=args.batch,
                      seed=args.seed)
    except OSError as e:
        raise ValueError(f"cannot load {args.model!r}: {str(e).strip().splitlines()[0]}") from None
    lam = [float(v) for v in cap["lam"]]
    meta = {"command": "rollout", "model": cap["model"], "family": cap["family"],
            "weights": args.weights, "length": args.length, "seed": args.seed,
            "batch": args.batch, "mode": args.mode, "n_layers": len(lam),
            "sum_lambda": float(sum(lam)),
            "lambda_definition": "mean over tokens and sequences of |Attn(Norm x)| / "
                                 "(|x| + |Attn(Norm x)|), x the residual stream entering the layer",
            "version": __version__, "torch": measure._version("torch"),
            "transformers": measure._version("transformers")}
    if args.lambdas:
        return {"layer": list(range(1, len(lam) + 1)), "lambda": lam}, meta
    row = predict(cap, args.mode)
    columns = {"position": list(range(1, args.length + 1)),
               "influence": [float(v) for v in row]}
    if args.format == "json":  # JSON arrays need not share a length: one lambda per layer
        columns["lambda"] = lam
    return columns, meta


def register_cli(sub, common) -> None:
    """Add ``posbias rollout`` to the ``posbias`` parser (``sub``: its subparsers).

    CSV output is the predicted profile only (``position,influence``); ``--lambdas`` prints the
    λ table instead (``layer,lambda``).  JSON output has ``position``, ``influence`` and
    ``meta`` and the measured schedule as a top-level array ``lambda`` (one per layer, layer 1
    first); ``meta["sum_lambda"]`` is its sum.  Errors are ``ValueError`` (one line, exit 2).
    """
    p = sub.add_parser("rollout", help="influence profile predicted by the rollout of the "
                                       "model's measured attention kernels and shares")
    p.add_argument("--model", required=True, help="zoo name (see `posbias models`)")
    p.add_argument("--weights", choices=["random", "pretrained"], default="random")
    p.add_argument("--length", type=int, required=True, help="sequence length L >= 2")
    p.add_argument("--mode", choices=list(MODES), default="residual",
                   help="residual (measured lambda and kernels; default), attention (lambda = 1), "
                        "positional (measured lambda, content-free kernel), content")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and the text windows")
    p.add_argument("--batch", type=int, default=2, help="sequences averaged (default 2)")
    p.add_argument("--lambdas", action="store_true",
                   help="print the measured lambda per layer instead of the profile")
    common(p)
    p.set_defaults(func=_cmd_rollout)
