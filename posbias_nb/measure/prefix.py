r"""One pass over a prompt, reused: the keys and values of every layer, the last row's attention,
and (on request) every attention block's input, so that what follows a shared prefix is computed
alone.

Chapter :ref:`ch-inference`.  Three of the inference-time remedies (hidden scaling, both
calibrations) change only the rows from the prompt's last token on; every earlier row is the
unmodified model's in every layer.  So a prompt is run once (:class:`Prefix`), and each remedy
recomputes only its last ``len(answer) + 1`` rows on top of the recorded keys and values
(:func:`score_after_prefix`): for a 350-token prompt and a 5-token answer, about 2% of a full
pass.  Hsieh et al.'s dummy documents reuse the prefix they share with the prompt the same way
(:func:`posbias_nb.measure.positional.calibrated_attention`).  ``tests/unit/models/test_remedy_oracles.py``
checks both against full passes.

The cache is rebuilt from the recorded keys and values (a ``DynamicCache`` of the model's own
layer kinds), never cropped: a sliding-window layer's cache cannot be cropped once full.
"""
from __future__ import annotations

import numpy as np

from ..models.patches import register_attention
from ..models.remedies import row_probabilities

__all__ = ["Prefix", "score_after_prefix"]

_REC: dict = {}


def _record_attention(module, query, key, value, attention_mask, scaling=None, **kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    i = module.layer_idx
    if _REC.get("kv"):
        _REC[("kv", i)] = (key.detach(), value.detach())
    p = row_probabilities(query, key, key.shape[2] - 1, scaling, kwargs.get("softcap"),
                          kwargs.get("sliding_window"))
    _REC[("row", i)] = p[:, :, 0].double().mean(1).cpu()  # (B, Lk): mean over heads
    return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling,
                                  **kwargs)


def _attention_input(mod, args, kwargs):
    h = args[0] if args else kwargs["hidden_states"]
    _REC[("h", mod.layer_idx)] = (h.detach(), tuple(t.detach() for t in
                                                     kwargs["position_embeddings"]))


def _run(model, ids, cache=None, kv=False, hidden=False):
    """One pass over ``ids`` (one sequence) after ``cache``: the last row's attention averaged
    over layers and heads, and the recorded keys/values and attention inputs."""
    import torch

    from ..models import decoder_layers
    from .scoring import _cache_kw

    register_attention("posbias_record", _record_attention)
    old = model.config._attn_implementation
    device = next(model.parameters()).device
    hooks = []
    _REC.clear()
    _REC["kv"] = kv
    try:
        if hidden:
            for layer in decoder_layers(model):
                hooks.append(layer.self_attn.register_forward_pre_hook(_attention_input,
                                                                       with_kwargs=True))
        model.set_attn_implementation("posbias_record")
        x = torch.as_tensor([list(map(int, ids))], dtype=torch.long, device=device)
        kw = {} if cache is None else {_cache_kw(): cache}
        n = (0 if cache is None else cache.get_seq_length()) + len(ids)
        with torch.no_grad():
            model.base_model(input_ids=x, use_cache=cache is not None, **kw)
        rows = {k[1]: v for k, v in _REC.items() if isinstance(k, tuple) and k[0] == "row"}
        if not rows:
            raise ValueError(f"{model.config.model_type} does not dispatch through the "
                             "AttentionInterface: its attention cannot be read")
        if any(r.shape[1] != n for r in rows.values()):
            raise ValueError("a sliding-window layer's cache holds fewer keys than the prompt: "
                             "prefix reuse needs prompts within every window")
        row = torch.stack([rows[i][0] for i in sorted(rows)]).mean(0).numpy()
        kvs = {k[1]: v for k, v in _REC.items() if isinstance(k, tuple) and k[0] == "kv"}
        hs = {k[1]: v for k, v in _REC.items() if isinstance(k, tuple) and k[0] == "h"}
        return row, kvs, hs
    finally:
        for h in hooks:
            h.remove()
        model.set_attn_implementation(old)
        _REC.clear()


class Prefix:
    """One no-cache pass over the token ids ``ids`` of one prompt, recorded.

    Attributes
    ----------
    ids : list of int
    last_row : (L,) ndarray
        Attention of the last token to every token, averaged over every layer and head.
    """

    def __init__(self, model, ids, hidden: bool = False):
        self.model = model
        self.ids = list(map(int, ids))
        if len(self.ids) < 2:
            raise ValueError(f"a prefix needs at least 2 tokens, got {len(self.ids)}")
        self.last_row, self._kv, self._h = _run(model, self.ids, kv=True, hidden=hidden)

    def cache(self, n: int):
        """A key-value cache of the first ``n`` positions (``1 <= n <= len(ids)``)."""
        from transformers import DynamicCache

        n = int(n)
        if not 1 <= n <= len(self.ids):
            raise ValueError(f"n must be in 1..{len(self.ids)}, got {n}")
        cache = DynamicCache(config=self.model.config)
        for i in sorted(self._kv):
            k, v = self._kv[i]
            cache.update(k[:, :, :n], v[:, :, :n], i)
        return cache

    def context(self, n: int) -> dict:
        """The attention blocks' inputs of the first ``n`` positions, ``{layer: (hidden,
        (cos, sin))}``: what hidden scaling needs for the scaled keys of the context (recorded
        only with ``hidden=True``)."""
        if not self._h:
            raise ValueError("this prefix was recorded without hidden=True")
        return {i: (h[:, :n], tuple(t[:, :n] for t in pe)) for i, (h, pe) in self._h.items()}

    def run(self, n: int, ids):
        """The pass over ``ids`` after the first ``n`` positions: ``(last_row, ...)`` as for
        the prompt itself (the attention of the new last token, over layers and heads)."""
        row, _, _ = _run(self.model, ids, cache=self.cache(n))
        return row


def smallest_window(model):
    cfg = getattr(model.config, "get_text_config", lambda: model.config)()
    w = getattr(cfg, "sliding_window", None)
    kinds = getattr(cfg, "layer_types", None)
    if not w or (kinds is not None and "sliding_attention" not in kinds):
        return None
    return int(w)


def score_after_prefix(prefix: Prefix, answer_ids, remedies) -> list[tuple[float, bool]]:
    r"""Teacher-forced scores (eq. ``eq-ret-logprob``) of ``answer_ids`` after the prompt of
    ``prefix``, once per entry of ``remedies``: each a function ``f(start, context)`` returning
    the context manager to score in (``start``: the absolute row of the prompt's last token,
    the first row a remedy may change; ``context``: :meth:`Prefix.context` at ``start``, or
    None when the prefix was recorded without it), or None for the model as it is.  Only the
    rows from ``start`` on are computed, on top of the prompt's recorded keys and values; a
    remedy that changes an earlier row would be scored wrongly, so use this for those that do
    not (hidden scaling, the calibrations), and :func:`posbias_nb.measure.scoring.score_batch`
    for the rest.
    """
    import contextlib

    import torch

    from .scoring import _cache_kw, score_hidden

    m = prefix.model
    P = prefix.ids
    A = list(map(int, answer_ids))
    if not A:
        raise ValueError("answer must be non-empty")
    start = len(P) - 1
    w = smallest_window(m)
    if w is not None and len(P) + len(A) > w:
        raise ValueError(f"prompt and answer ({len(P) + len(A)} tokens) exceed a sliding window "
                         f"of {w}: the recorded keys cannot be reused, score full passes")
    ctx_in = prefix.context(start) if prefix._h else None
    device = next(m.parameters()).device
    x = torch.as_tensor([P[start:] + A], dtype=torch.long, device=device)
    out = []
    for f in remedies:
        ctx = contextlib.nullcontext() if f is None else f(start, ctx_in)
        with torch.no_grad(), ctx:
            h = m.base_model(input_ids=x, use_cache=True,
                             **{_cache_kw(): prefix.cache(start)}).last_hidden_state[0]
        out.append(score_hidden(m, h, 1, A))
    return out
