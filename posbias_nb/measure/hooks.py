r"""Hooks that collect what the structural theory needs from a real model, and nothing more.

The hooks only *collect* tensors (attention probabilities, the norms of the residual stream and
of the attention block's output); the formulas live in the pure numerics
(:func:`posbias_nb.metrics.attention_share` for :math:`\lambda`, :mod:`posbias_nb.rollout` for
the predictions).  Every hook is removed when the run ends.  Chapter :ref:`ch-prediction`,
:eq:`eq-pred-measured`.

What is measured, exactly
-------------------------
For a batch of ``B`` sequences of ``L`` tokens (:func:`posbias_nb.tasks.text.text_batch`, the same
windows :func:`posbias_nb.measure.cached.profile` reads for the same ``seed``):

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
  (a forward hook on the module whose output is added to the residual).  Which module that is
  is decided by behaviour, not by names (:func:`posbias_nb.models.blocks.describe_blocks`):
  the submodule whose output, added to the layer's input, gives the residual stream the rest
  of the layer reads, to 1e-5: the attention module in Llama-like models and GPT-2, the norm
  after attention in sandwich-norm and post-norm blocks (Gemma 2 and 3, OLMo 2, EXAONE 4,
  GLM-4), BLOOM's ``self_attention.dense`` (its attention module adds the residual itself).
  Where that addition is scaled (a residual multiplier), :math:`a` includes the scale.
  Parallel blocks (attention beside the MLP from one input: GPT-J, GPT-NeoX, Falcon, Phi,
  Cohere, CodeGen) and every block whose addition cannot be verified are refused with their
  reason.
  The bias of the output projection is part of :math:`a`.  The model runs in float32.

Attention logits (:func:`attention_logits`) are captured inside the attention function, through
transformers' ``AttentionInterface``; the function is registered when first called, never on
import, and the model's attention implementation is restored afterwards.
"""
from __future__ import annotations

import numpy as np

from .._validate import positive_int
from ..metrics import attention_share
from ..models import decoder_layers, fix_falcon_eager_alibi
from ..models.blocks import describe_blocks
from ..models.patches import register_attention

__all__ = ["capture_model", "attention_logits", "n_heads"]


def capture_model(model, input_ids, chunk: int = 4) -> dict:
    r"""Measure :math:`A_t` and :math:`\lambda_t` of ``model`` on a batch (see the module doc).

    Chapter :ref:`ch-prediction`, the inputs of :eq:`eq-pred-measured` (the formula for :math:`\lambda_t` is
    :func:`posbias_nb.metrics.attention_share`).

    A Falcon model with ALiBi gets :func:`posbias_nb.models.patches.fix_falcon_eager_alibi` installed
    (in place; :func:`posbias_nb.models.loading.load` has applied it already).

    Parameters
    ----------
    model : transformers ``*ForCausalLM``
        Loaded with ``attn_implementation="eager"`` (e.g. :func:`posbias_nb.models.loading.load`).
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
        ``lam_win`` (T, B) averaged over positions only, per sequence (window): the unit an
        interval over windows resamples (its mean over windows is ``lam``);
        ``lam_sd`` (T,) the standard deviation of the per-token ratio; ``upper_mass`` (T,) the
        largest row mass found above the diagonal before it was zeroed.

    Raises
    ------
    ValueError
        For a model whose layers cannot be hooked, one that does not return attention
        probabilities (not eager), bad input ids, or a non-causal kernel.
    """
    import torch

    blocks = describe_blocks(model)
    if not blocks.lambda_ok:
        raise ValueError(blocks.reason)
    if getattr(model.config, "_attn_implementation", "eager") != "eager":
        raise ValueError("capture needs attn_implementation='eager' (attention probabilities "
                         f"are not materialized by {model.config._attn_implementation!r})")
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
    fix_falcon_eager_alibi(model)  # idempotent (models.load applies it already)
    layers = decoder_layers(model)
    T = len(layers)
    device = next(model.parameters()).device
    store: dict = {}
    handles = []

    def pre_hook(t):
        def f(module, args, kwargs):
            x = args[0] if args else kwargs["hidden_states"]
            store[("x", t)] = x.detach().float()
        return f

    def out_hook(t, scale):  # collects the two norms per token; the formula is in metrics
        def f(module, args, output):
            a = output[0] if isinstance(output, (tuple, list)) else output
            x = store.pop(("x", t))
            store[("n", t)] = (x.norm(dim=-1).double().cpu().numpy(),
                               abs(scale) * a.detach().float().norm(dim=-1).double().cpu().numpy())
        return f

    A = np.zeros((T, L, L))
    ratios = np.zeros((T, B, L))
    try:
        for t, layer in enumerate(layers):
            handles.append(layer.register_forward_pre_hook(pre_hook(t), with_kwargs=True))
            name, scale = blocks.residual[t]
            mod = layer.get_submodule(name) if name else layer
            handles.append(mod.register_forward_hook(out_hook(t, scale)))
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
                norms = store.pop(("n", t), None)
                if norms is None:
                    raise ValueError(f"layer {t + 1}: the attention-output hook did not fire")
                ratios[t, b0:b0 + sl.shape[0]] = attention_share(*norms)
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
    return {"A": A, "lam": lam, "lam_pos": ratios.mean(axis=1), "lam_win": ratios.mean(axis=2),
            "lam_sd": ratios.reshape(T, -1).std(axis=1), "upper_mass": upper_mass}


def n_heads(model) -> int:
    """The number of attention heads of a loaded model."""
    cfg = model.config
    for k in ("num_attention_heads", "n_head", "n_heads"):
        v = getattr(cfg, k, None)
        if isinstance(v, int):
            return v
    raise ValueError("cannot read the number of heads")


_CAPTURE = "posbias_capture"
_captured: dict = {}


def _capture_attention(module, query, key, value, attention_mask, scaling=None, **kwargs):
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    h, hk = query.shape[1], key.shape[1]
    k = key.repeat_interleave(h // hk, dim=1) if h != hk else key
    s = scaling if scaling is not None else query.shape[-1] ** -0.5
    _captured[module.layer_idx] = (torch.einsum("bhd,bhld->bhl", query[:, :, -1].float(),
                                                k.float()) * s).detach().cpu()
    return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling,
                                  **kwargs)


def attention_logits(model, input_ids) -> np.ndarray:
    r"""Pre-softmax attention scores of the **last query** against every key, in every layer.

    Chapter :ref:`ch-init` (are the logits near-equal at birth?).

    The scores are taken inside the model's attention function, i.e. after the projections,
    after RoPE (if any, and if switched on) and after the :math:`1/\sqrt{d_h}` scaling: exactly
    the logits the softmax sees (the causal mask hides nothing from the last query).  Grouped
    key-value heads are repeated to the query heads.  Works for the models that dispatch through
    transformers' ``AttentionInterface`` (GPT-2, Qwen2, Llama-like); the model's attention
    implementation is restored afterwards.

    Returns
    -------
    numpy.ndarray, shape (B, n_layers, n_heads, L)
    """
    import torch

    ids = torch.as_tensor(np.asarray(input_ids), dtype=torch.long)
    if ids.ndim == 1:
        ids = ids[None]
    register_attention(_CAPTURE, _capture_attention)  # masks built as for "sdpa"
    old = model.config._attn_implementation
    device = next(model.parameters()).device
    _captured.clear()
    try:
        model.set_attn_implementation(_CAPTURE)
        with torch.no_grad():
            model.base_model(input_ids=ids.to(device), use_cache=False)
        if not _captured:
            raise ValueError(f"{model.config.model_type} does not dispatch through the "
                             "AttentionInterface: attention logits cannot be captured")
        out = torch.stack([_captured[i] for i in sorted(_captured)], dim=1)
    finally:
        model.set_attn_implementation(old)
        _captured.clear()
    return out.numpy()
