r"""What the inference-time remedies need from a model, measured on offline text.

Chapter :ref:`ch-inference`.  Each function runs the model and collects; the remedies themselves
live in :mod:`posbias_nb.models.remedies` (so ``models`` imports nothing from here) and the pure
statistics in :mod:`posbias_nb.metrics`.

* :func:`attention_rows` — the attention probabilities of the last query rows, per layer and
  head, averaged over sequences: the content-free **positional prior** that the calibration
  divides out when the sequences are offline text windows, the *dummy-document* estimate
  (Hsieh et al. 2024) when they are retrieval prompts with other content.
* :func:`positional_channel` — the hidden channel that changes most monotonically with position
  (Yu et al. 2024's criterion), read at the input of the query/key projections.
* :func:`row_nll` — the next-token loss of the last rows of held-out windows: the cost of a
  remedy.
"""
from __future__ import annotations

import numpy as np

from ..metrics import monotone_channels
from ..models import decoder_layers
from ..models.patches import register_attention
from ..models.remedies import row_probabilities

__all__ = ["attention_rows", "positional_channel", "row_nll"]

_TAP = "posbias_rows"
_tapped: dict = {}


def _tap_attention(module, query, key, value, attention_mask, scaling=None, **kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    first = _tapped["first"]
    p = row_probabilities(query, key, first, scaling, kwargs.get("softcap"),
                          kwargs.get("sliding_window"))
    _tapped[module.layer_idx] = p.double().sum(0).cpu()
    return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling,
                                  **kwargs)


def _ids(input_ids):
    import torch

    ids = torch.as_tensor(np.asarray(input_ids), dtype=torch.long)
    return ids[None] if ids.ndim == 1 else ids


def attention_rows(model, input_ids, start: int, chunk: int = 4) -> np.ndarray:
    r"""Mean attention probabilities of the query rows ``start .. L-1`` against every key.

    Returns ``(n_layers, n_heads, L - start, L)`` float64, averaged over the ``B`` sequences of
    ``input_ids`` (``(B, L)``); grouped key-value heads are repeated to the query heads.  The
    probabilities are recomputed from the queries and keys the attention function receives
    (after RoPE, scaling, soft-capping, causal mask and sliding window), while the model runs
    its own fused kernel; works for models that dispatch through transformers'
    ``AttentionInterface`` (Llama-like, Qwen2, Gemma 3).
    """
    import torch
    ids = _ids(input_ids)
    B, L = ids.shape
    if not 0 <= int(start) < L:
        raise ValueError(f"start must be in 0..{L - 1}, got {start!r}")
    register_attention(_TAP, _tap_attention)
    old = model.config._attn_implementation
    device = next(model.parameters()).device
    total = None
    try:
        model.set_attn_implementation(_TAP)
        for i in range(0, B, max(int(chunk), 1)):
            _tapped.clear()
            _tapped["first"] = int(start)
            with torch.no_grad():
                model.base_model(input_ids=ids[i:i + chunk].to(device), use_cache=False)
            layers = sorted(k for k in _tapped if k != "first")
            if not layers:
                raise ValueError(f"{model.config.model_type} does not dispatch through the "
                                 "AttentionInterface: its attention rows cannot be read")
            got = torch.stack([_tapped[k] for k in layers]).numpy()
            total = got if total is None else total + got
    finally:
        model.set_attn_implementation(old)
        _tapped.clear()
    return total / B


def positional_channel(model, input_ids, layers=None, skip: int = 1) -> dict:
    r"""The hidden channel whose value changes most monotonically with position.

    The post-norm hidden state entering the query projection of each layer in ``layers``
    (0-based; default the middle half) is averaged over the sequences and those layers; each
    channel's Spearman correlation with position over positions ``skip .. L-1`` (position 0,
    the attention sink, is an outlier in most models) is
    :func:`posbias_nb.metrics.monotone_channels`; the channel with the largest ``|rho|`` is
    Yu et al.'s positional hidden dimension.

    Returns ``{"channel", "rho" (all channels), "values" (the channel by position),
    "layers"}``.
    """
    import torch

    from ..models.remedies import middle_layers

    ids = _ids(input_ids)
    stack = decoder_layers(model)
    layers = middle_layers(len(stack)) if layers is None else [int(x) for x in layers]
    acc: dict = {}
    hooks = []
    for i in layers:
        q = getattr(getattr(stack[i], "self_attn", None), "q_proj", None)
        if q is None:
            raise ValueError(f"{model.config.model_type}: no self_attn.q_proj to read the "
                             "hidden state at (Llama-like models only)")

        def pre(mod, args, i=i):
            acc[i] = acc.get(i, 0) + args[0].detach().double().sum(0).cpu()
        hooks.append(q.register_forward_pre_hook(pre))
    device = next(model.parameters()).device
    try:
        with torch.no_grad():
            model.base_model(input_ids=ids.to(device), use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    mean = (sum(acc[i] for i in layers) / (len(layers) * ids.shape[0])).numpy()  # (L, d)
    rho = monotone_channels(mean[int(skip):])
    c = int(np.nanargmax(np.abs(rho)))
    return {"channel": c, "rho": rho, "values": mean[:, c], "layers": np.asarray(layers)}


def row_nll(model, input_ids, start: int) -> np.ndarray:
    r"""Mean next-token loss (nats) of the predictions made at rows ``start .. L-2`` of each
    sequence of ``input_ids``: ``(B,)``.  The cost of a remedy: its change on held-out text."""
    import torch

    from .scoring import answer_logits

    ids = _ids(input_ids)
    B, L = ids.shape
    if not 0 <= int(start) < L - 1:
        raise ValueError(f"start must be in 0..{L - 2}, got {start!r}")
    device = next(model.parameters()).device
    out = np.zeros(B)
    with torch.no_grad():
        for b in range(B):
            h = model.base_model(input_ids=ids[b:b + 1].to(device),
                                 use_cache=False).last_hidden_state[0]
            lp = torch.log_softmax(answer_logits(model, h[start:L - 1]).double(), -1)
            tgt = ids[b, start + 1:].to(device)
            out[b] = -float(lp.gather(1, tgt[:, None]).mean())
    return out
