r"""Cached attention logits at initialization, RoPE on and off (chapter *The U at birth*,
section *Does RoPE matter at step 0?*).

Re-exported by :mod:`posbias_nb.measure` as :func:`init_logits`.
"""
from __future__ import annotations

import numpy as np

from .. import cache, models
from ..tasks.text import text_batch
from .entry import checked, run_key
from .hooks import attention_logits

__all__ = ["init_logits", "key_spread_ratio"]


def init_logits(name: str, length: int, batch: int, seed: int = 0) -> dict:
    r"""Pre-softmax logits of the last query against every key, in every layer and head, of the
    zoo model ``name`` with random weights (``seed``), on ``batch`` text windows of ``length``
    tokens (:func:`~posbias_nb.measure.text_batch` with ``seed``), with RoPE **on** and, for the
    same weights and text, **off** (:func:`posbias_nb.models.set_rope`).

    Chapter *The U at birth*, figure ``fig-init-rope-logits``.  Cached on disk (namespace
    ``"init-logits"``); a hit loads no model.

    Returns
    -------
    dict of numpy arrays
        ``on`` and ``off``, each (batch, n_layers, n_heads, length) (see
        :func:`~posbias_nb.measure.attention_logits`), and ``input_ids`` (batch, length).

    Raises
    ------
    ValueError
        Unknown model, bad sizes, a model without RoPE, or one whose attention cannot be hooked.
    """
    info = checked(name, "random", length, batch, seed)
    if not info.get("has_rope", True):
        raise ValueError(f"{info['name']} has no rotary position embeddings: nothing to switch")
    params = run_key(info, "random", length, batch, seed, attn="sdpa",
                  what="last-query logits, rope on/off")

    def compute():
        model, tok, _ = models.load(name, seed=seed, attn="sdpa")
        ids = text_batch(tok, length, batch, seed=seed,
                         vocab_size=model.get_input_embeddings().num_embeddings)
        on = attention_logits(model, ids)
        models.set_rope(model, False)
        return {"on": on, "off": attention_logits(model, ids), "input_ids": ids}

    return cache.cached("init-logits", params, compute)


def key_spread_ratio(on, off) -> np.ndarray:
    r"""Per window and layer: the spread of the logits across keys (standard deviation over
    keys, median over heads) with RoPE off, over the same with RoPE on.

    Chapter *The U at birth*.  ``on`` and ``off`` are (B, T, heads, L) arrays from
    :func:`init_logits`; returns (B, T).  Pure numpy.
    """
    on, off = np.asarray(on, dtype=np.float64), np.asarray(off, dtype=np.float64)
    if on.shape != off.shape or on.ndim != 4:
        raise ValueError(f"on and off must be (B, T, heads, L) of one shape, got {on.shape} "
                         f"and {off.shape}")
    return np.median(off.std(axis=3), axis=2) / np.median(on.std(axis=3), axis=2)
