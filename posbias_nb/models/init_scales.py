r"""The scales an initialiser sets, one standard deviation per group of matrices.

Chapter :ref:`ch-born-scales`.  transformers' initialiser draws every weight matrix of a Llama,
Qwen, Mistral or Gemma block with one std (the config's ``initializer_range``, 0.02), so it ties
together three scales that act differently at birth:

* ``"qk"``: the **query and key matrices**, which set the attention logits' scale (without
  QK-norm, a logit's std is :math:`g = \sigma_{qk}^2 d`);
* ``"block"``: **the rest of each block**, every other weight matrix inside a decoder layer
  (value, attention output, the MLP's matrices), which sets how much a block adds to the
  residual stream;
* ``"embed"``: the **input embedding**, which sets the residual stream's own scale.

:func:`weight_groups` decides the groups **by behaviour**, never by module names: for each
decoder layer, a weight matrix of that layer is a query/key matrix if and only if re-drawing it
changes that layer's own attention probabilities on one short batch (eager attention); every
other matrix of the layer belongs to ``"block"``; the embedding is the model's input embedding
(by identity).  Matrices outside the decoder layers (an untied output head) and every vector
(norm gains, biases) keep transformers' initialisation: the hidden-state influence the book
measures does not read the head.  A layer without a query/key matrix found this way is refused.

:func:`apply_stds` re-draws the named groups, :math:`N(0, \sigma^2)`, from a generator seeded by
the model's seed, in the order of ``model.named_parameters()``: the same seed gives the same
weights, bit for bit.  :func:`posbias_nb.models.at_width` (``std=``) carries the stds in the
configuration (``posbias_init``), so they enter the model's fingerprint and every cache key;
:func:`posbias_nb.models.load` applies them right after the model is built.
"""
from __future__ import annotations

import contextlib
import math

__all__ = ["GROUPS", "CONFIG_KEY", "check_stds", "weight_groups", "apply_stds",
           "attention_scales"]

#: The groups of matrices, in the order the chapter names them.
GROUPS = ("qk", "block", "embed")
#: The configuration attribute that carries the stds (a dict group -> std).
CONFIG_KEY = "posbias_init"
_SEED_SALT = 0x5CA1E5  # the re-draw's generator: seed + this, never the global stream
_TOL = 1e-7


def check_stds(std) -> dict:
    """``std`` as ``{group: float}``: a positive finite number (every group) or a dict of some
    of :data:`GROUPS`.

    Raises
    ------
    ValueError
        An unknown group (naming it and the groups), a std that is not a number, not finite or
        not positive (naming it).
    """
    if isinstance(std, dict):
        items = dict(std)
    else:
        items = {g: std for g in GROUPS}
    if not items:
        raise ValueError("std names no group: give a number or a dict of "
                         f"{', '.join(GROUPS)}")
    out = {}
    for g, s in items.items():
        if g not in GROUPS:
            raise ValueError(f"unknown group of matrices {g!r}: use {', '.join(GROUPS)}")
        if isinstance(s, bool) or not isinstance(s, (int, float)):
            raise ValueError(f"std of {g!r} must be a number, got {s!r}")
        if not math.isfinite(float(s)) or float(s) <= 0:
            raise ValueError(f"std of {g!r} must be finite and > 0, got {s!r}")
        out[g] = float(s)
    return {g: out[g] for g in GROUPS if g in out}


def _attentions(model, ids):
    import torch

    with torch.no_grad():
        out = model.base_model(input_ids=ids, output_attentions=True, use_cache=False)
    att = getattr(out, "attentions", None)
    if not att or any(a is None for a in att):
        raise ValueError(f"{model.config.model_type} does not return the attention "
                         "probabilities of every layer: its query/key matrices cannot be "
                         "found by behaviour")
    return [a.detach().double() for a in att]


@contextlib.contextmanager
def _eager(model):
    old = getattr(model.config, "_attn_implementation", None)
    try:
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            model.set_attn_implementation("eager")
        yield
    finally:
        if old is not None:
            with contextlib.suppress(ValueError, AttributeError, TypeError):
                model.set_attn_implementation(old)


def weight_groups(model, length: int = 8, seed: int = 0) -> dict:
    """The model's weight matrices by group (module docstring), decided by behaviour.

    Returns
    -------
    dict
        ``{"qk": [...], "block": [...], "embed": [...]}``, each a list of parameter names
        (``model.named_parameters()``), and ``"layers"``: per decoder layer, the number of its
        query/key matrices.

    Raises
    ------
    ValueError
        A model whose layers do not all return attention probabilities, or a layer in which no
        matrix changes that layer's attention (nothing to call its query/key matrices).
    """
    import numpy as np
    import torch

    from .patches import decoder_layers

    layers = decoder_layers(model)
    emb = model.get_input_embeddings().weight
    names = {id(p): n for n, p in model.named_parameters()}
    V = int(emb.shape[0])
    dev = emb.device
    ids = torch.as_tensor(np.random.default_rng([seed, 0x9C]).integers(0, V, size=(1, length)),
                          dtype=torch.long, device=dev)
    gen = torch.Generator(device="cpu").manual_seed(int(seed) + _SEED_SALT)
    qk, block, per_layer = [], [], []
    with _eager(model):
        base = _attentions(model, ids)
        for t, layer in enumerate(layers):
            found = 0
            for p in layer.parameters():
                if p.ndim != 2 or p is emb:
                    continue
                keep = p.detach().clone()
                scale = float(keep.std()) or 1.0
                with torch.no_grad():
                    p.copy_(torch.randn(p.shape, generator=gen).to(p) * scale)
                try:
                    a = _attentions(model, ids)[t]
                finally:
                    with torch.no_grad():
                        p.copy_(keep)
                moved = float((a - base[t]).abs().max())
                if moved > _TOL:
                    qk.append(names[id(p)])
                    found += 1
                else:
                    block.append(names[id(p)])
            if not found:
                raise ValueError(f"{model.config.model_type}: no matrix of layer {t + 1} changes "
                                 "its attention probabilities, so it has no query/key matrices "
                                 "to scale")
            per_layer.append(found)
    return {"qk": qk, "block": block, "embed": [names[id(emb)]], "layers": per_layer}


def apply_stds(model, std, seed: int = 0, groups: dict | None = None) -> dict:
    """Re-draw the matrices of the groups in ``std`` (:func:`check_stds`) as
    :math:`N(0, \\sigma^2)`, in place, from a generator seeded by ``seed`` (the same seed, the
    same weights); ``groups`` from :func:`weight_groups` (decided here when None).  Returns
    the groups."""
    import torch

    stds = check_stds(std)
    groups = weight_groups(model, seed=seed) if groups is None else groups
    where = {n: g for g in GROUPS for n in groups[g]}
    gen = torch.Generator(device="cpu").manual_seed(int(seed) + _SEED_SALT)
    with torch.no_grad():
        for n, p in model.named_parameters():
            g = where.get(n)
            if g in stds:
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float32).to(p) * stds[g])
    return groups


def attention_scales(model, length: int = 8, seed: int = 0, groups: dict | None = None) -> dict:
    """Two facts of the scales at birth, decided by behaviour on one short batch:

    * ``qk_norm``: whether the logit scale is free of the query/key std: scaling layer 1's
      query/key matrices (:func:`weight_groups`) by 10 leaves layer 1's attention probabilities
      unchanged to 1e-3 (QK-norm divides the scale out; its float32 eps leaves about 1e-5,
      while without it the logits grow a hundredfold);
    * ``embed_multiplier``: the median over the tokens of the norm of layer 1's input over the
      norm of the embedding row it reads (Gemma multiplies by :math:`\\sqrt d`, Llama by 1).

    Raises
    ------
    ValueError
        As :func:`weight_groups`.
    """
    import numpy as np
    import torch

    groups = weight_groups(model, seed=seed) if groups is None else groups
    emb = model.get_input_embeddings().weight
    V = int(emb.shape[0])
    ids = torch.as_tensor(np.random.default_rng([seed, 0x9D]).integers(0, V, size=(1, length)),
                          dtype=torch.long, device=emb.device)
    with torch.no_grad():
        h0 = model.base_model(input_ids=ids, output_hidden_states=True,
                              use_cache=False).hidden_states[0][0].double()
    rows = emb[ids[0]].detach().double()
    mult = float(torch.median(h0.norm(dim=-1) / rows.norm(dim=-1)))
    params = dict(model.named_parameters())
    first = [params[n] for n in groups["qk"][: groups["layers"][0]]]
    with _eager(model):
        base = _attentions(model, ids)[0]
        keep = [p.detach().clone() for p in first]
        try:
            with torch.no_grad():
                for p in first:
                    p.mul_(10.0)
            moved = float((_attentions(model, ids)[0] - base).abs().max())
        finally:
            with torch.no_grad():
                for p, k in zip(first, keep):
                    p.copy_(k)
    return {"qk_norm": moved <= 1e-3, "embed_multiplier": mult, "moved": moved}
