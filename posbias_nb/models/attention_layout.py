r"""A model's attention layout: which keys each layer's rows see (chapter :ref:`ch-layouts`).

:func:`config_layout` reads a transformers config (``layer_types``, ``sliding_window``,
``attention_chunk_size``) into a :class:`posbias_nb.theory.Layout`, one
:class:`~posbias_nb.theory.Layer` per decoder layer; a layer kind it does not know (linear or
compressed attention, ...) is named in a ValueError, never guessed.  :func:`model_layout` then
checks that layout against the model's *behaviour* on one batch of eager attention: in every
layer each row's nonzero weights must sit exactly on the keys the layout gives it, and a row
whose weights sum to less than 1 has an attention sink (GPT-OSS), whose logit is read from the
missing mass.  What the behaviour contradicts is refused with the layer named.
"""
from __future__ import annotations

import numpy as np

from .. import theory

__all__ = ["config_layout", "model_layout", "check_length", "unverified", "LAYER_TYPES",
           "CHECK_MAX"]

#: The ``layer_types`` values read, and the layer kind each one is.
LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding",
               "chunked_attention": "chunked"}


def _n_layers(cfg) -> int:
    for k in ("num_hidden_layers", "n_layer", "n_layers", "num_layers"):
        v = getattr(cfg, k, None)
        if isinstance(v, int) and v > 0:
            return v
    raise ValueError(f"cannot read the number of layers from the {cfg.model_type} config")


def _text_config(cfg):
    get = getattr(cfg, "get_text_config", None)
    return get() if callable(get) else cfg


def config_layout(cfg) -> theory.Layout:
    """The layout a config declares (no sinks: those are decided by behaviour,
    :func:`model_layout`).

    ``layer_types`` decides each layer's kind when present; otherwise a set ``sliding_window``
    makes every layer sliding (Mistral) unless ``use_sliding_window`` is False (Qwen2), and a
    set ``attention_chunk_size`` without ``layer_types`` makes every layer chunked.

    Raises
    ------
    ValueError
        A layer kind not in :data:`LAYER_TYPES` (named, with its layer), a sliding layer with
        no ``sliding_window``, a chunked one with no ``attention_chunk_size``, ``layer_types``
        of the wrong length.
    """
    cfg = _text_config(cfg)
    n = _n_layers(cfg)
    window = getattr(cfg, "sliding_window", None)
    chunk = getattr(cfg, "attention_chunk_size", None)
    types = getattr(cfg, "layer_types", None)
    if types is None:
        if window is not None and getattr(cfg, "use_sliding_window", True) is not False:
            types = ["sliding_attention"] * n
        elif chunk is not None and cfg.model_type not in ("llama4", "llama4_text"):
            types = ["chunked_attention"] * n
        else:
            types = ["full_attention"] * n
    types = list(types)
    if len(types) != n:
        raise ValueError(f"the {cfg.model_type} config lists {len(types)} layer_types for "
                         f"{n} layers")
    layers = []
    for i, t in enumerate(types):
        if t not in LAYER_TYPES:
            raise ValueError(f"layer {i} of {cfg.model_type} is {t!r}, a layer kind the "
                             f"layout theory does not cover (it covers "
                             f"{', '.join(LAYER_TYPES)})")
        kind = LAYER_TYPES[t]
        if kind == "sliding" and not window:
            raise ValueError(f"layer {i} of {cfg.model_type} is sliding, but the config sets "
                             "no sliding_window")
        if kind == "chunked" and not chunk:
            raise ValueError(f"layer {i} of {cfg.model_type} is chunked, but the config sets "
                             "no attention_chunk_size")
        size = {"full": None, "sliding": window, "chunked": chunk}[kind]
        layers.append(theory.Layer(kind, None if size is None else int(size)))
    return theory.Layout(tuple(layers))


#: The longest batch :func:`model_layout` checks by default (eager attention is L x L a head).
CHECK_MAX = 640


def check_length(layout: theory.Layout) -> int:
    """The default length of :func:`model_layout`'s check: one past the largest window or
    chunk (so that it is visible), at most :data:`CHECK_MAX`."""
    sizes = [x.size for x in layout.layers if x.size]
    return min(CHECK_MAX, max(sizes, default=7) + 1)


def unverified(layout: theory.Layout, length: int) -> list:
    """The layers whose window or chunk is not visible at ``length`` tokens (size >= length):
    the check cannot tell them from full layers there, so they are as the config says."""
    return [t for t, x in enumerate(layout.layers) if x.size and x.size >= length]


def _support(layer: theory.Layer, L: int) -> np.ndarray:
    return np.asarray(theory.layer_matrix(theory.Layer(layer.kind, layer.size), L)) > 0


def model_layout(model, length: int | None = None, seed: int = 0) -> theory.Layout:
    """The layout of a loaded model: :func:`config_layout`, checked against the model's eager
    attention on ``length`` random tokens (default: one past the largest window or chunk, at
    most :data:`CHECK_MAX`), with each layer's sink decided by its rows' missing mass.

    Per layer, the check asserts that the nonzero attention weights of every row sit exactly on
    the layout's keys (to 1e-12), and reads the sink: when the rows sum to
    :math:`r_i < 1 - 10^{-6}`, the sink logit is the mean over heads and rows of
    :math:`\\ln\\big(\\sum_j e^{\\ell_{ij}}(1-r_i)/r_i\\big)`, estimated at initialization as
    :math:`\\ln(n_i (1-r_i)/r_i)` (logits near 0).  A window or chunk of ``length`` or more is
    not visible at that length and is kept as the config says (:func:`unverified` lists them).  Kept on the model
    (``model._posbias_layout``, per length).

    Raises
    ------
    ValueError
        A config layout that the attention contradicts (layer and rows named), a model that
        returns no attention probabilities, and the errors of :func:`config_layout`.
    """
    import torch

    from .blocks import _quiet

    lay = config_layout(model.config)
    L = int(length) if length is not None else check_length(lay)
    memo = getattr(model, "_posbias_layout", None)
    if isinstance(memo, dict) and L in memo:
        return memo[L]
    V = model.get_input_embeddings().num_embeddings
    g = np.random.default_rng([seed, 0x1A70])
    ids = torch.as_tensor(g.integers(0, V, size=(1, L)), dtype=torch.long)
    old = getattr(model.config, "_attn_implementation", None)
    dev = next(model.parameters()).device
    try:
        with _quiet():
            model.set_attn_implementation("eager")
            with torch.no_grad():
                out = model.base_model(input_ids=ids.to(dev), output_attentions=True,
                                       use_cache=False)
    finally:
        if old is not None:
            with _quiet():
                model.set_attn_implementation(old)
    att = getattr(out, "attentions", None)
    if not att or len(att) != lay.depth or any(a is None for a in att):
        raise ValueError(f"{model.config.model_type} returns no attention probabilities for "
                         "every layer: its layout cannot be checked")
    layers = []
    n = None
    for t, (layer, a) in enumerate(zip(lay.layers, att)):
        A = a[0].detach().double().cpu().numpy()  # (heads, L, L)
        sup = _support(layer, L)
        off = np.abs(A[:, ~sup]).max() if (~sup).any() else 0.0
        on_min = A[:, sup].min()
        if off > 1e-12 or on_min <= 0:
            bad = np.argwhere((np.abs(A) > 1e-12).any(0) != sup)
            i = int(bad[0][0]) + 1 if len(bad) else 0
            raise ValueError(f"layer {t} of {model.config.model_type} attends outside the keys "
                             f"its config gives it ({layer}): row {i} at length {L}; its "
                             "layout cannot be verified")
        r = A.sum(-1)  # (heads, L)
        sink = None
        # a sink takes e^s/(n_i + e^s) of every row: far above float rounding (1e-7 in float32)
        # at any logit the theory cares about; rows at or above 1 carry none
        deficit = 1 - r
        if np.median(deficit) > 1e-5:
            n = np.broadcast_to(sup.sum(-1)[None, :], r.shape)
            ok = (deficit > 1e-5) & (r > 0)
            sink = float(np.mean(np.log(n[ok] * deficit[ok] / r[ok])))
        layers.append(theory.Layer(layer.kind, layer.size, sink))
    out_layout = theory.Layout(tuple(layers))
    memo = memo if isinstance(memo, dict) else {}
    memo[L] = out_layout
    try:
        model._posbias_layout = memo
    except AttributeError:  # pragma: no cover
        pass
    return out_layout
