r"""Persistent changes to loaded models, applied in one place: :func:`posbias_nb.models.loading.load`.

The RoPE switch serves chapter :ref:`ch-init` (does RoPE matter at step 0?), the Falcon fix the
ALiBi measurements of chapter :ref:`ch-prediction`.

* **The RoPE switch** (:func:`set_rope`, ``rope=False``) rotates every position by angle 0: a
  forward pre-hook on each rotary-embedding module (every module holding an ``inv_freq``
  buffer) replaces the position ids *it* sees by zeros, so it returns :math:`\cos = 1,
  \sin = 0` (times the rope type's attention scaling, unchanged) for every token.  Nothing else
  changes: parameters, buffers, the causal mask and the position ids seen by every other module
  are untouched.  A hook, rather than zeroed ``inv_freq`` buffers, also holds for the rope types
  that recompute their frequencies in ``forward`` (dynamic NTK, LongRoPE).  Models without RoPE
  (GPT-2: learned absolute positions) raise ``ValueError`` for ``rope=False``.
* **The Falcon ALiBi fix** (:func:`fix_falcon_eager_alibi`): eager Falcon-with-ALiBi in
  transformers 5 applies the bias twice; a pre-hook makes it compute what its fused attention
  computes.
* **The residual-scale lever** (:func:`scale_attention_output`): every layer's attention output
  projection divided by :math:`\alpha`, the DeepNorm-style up-weighting of the residual path
  (chapter :ref:`ch-remedies`).

:func:`decoder_layers` finds the layer stack of a causal LM (used here and by the hooks of
:mod:`posbias_nb.measure.hooks`).
"""
from __future__ import annotations

__all__ = ["rope_modules", "has_rope", "set_rope", "decoder_layers", "fix_falcon_eager_alibi",
           "scale_attention_output", "register_attention"]


def rope_modules(model) -> list:
    """The rotary-embedding modules of ``model``: every module holding an ``*inv_freq`` buffer."""
    out = []
    for m in model.modules():
        if any(n.endswith("inv_freq") for n, _ in m.named_buffers(recurse=False)):
            out.append(m)
    return out


def has_rope(model) -> bool:
    """True if ``model`` uses rotary position embeddings."""
    return bool(rope_modules(model))


def _zero_positions_hook(module, args, kwargs):
    import torch

    if "position_ids" in kwargs:
        kwargs = dict(kwargs)
        kwargs["position_ids"] = torch.zeros_like(kwargs["position_ids"])
    elif len(args) >= 2:
        args = (args[0], torch.zeros_like(args[1]), *args[2:])
    else:  # pragma: no cover - every HF rotary module takes (x, position_ids)
        raise RuntimeError(f"{type(module).__name__}: cannot find position_ids to switch RoPE off")
    return args, kwargs


def set_rope(model, enabled: bool) -> None:
    """Switch rotary position embeddings on or off in place (see the module docstring).

    Raises
    ------
    ValueError
        If ``enabled`` is False and the model has no RoPE.
    """
    mods = rope_modules(model)
    if not enabled and not mods:
        raise ValueError(f"{model.config.model_type} has no rotary position embeddings "
                         "(it uses learned or no positions): rope=False does not apply")
    for m in mods:
        h = getattr(m, "_posbias_rope_off", None)
        if h is not None:
            h.remove()
            m._posbias_rope_off = None
        if not enabled:
            m._posbias_rope_off = m.register_forward_pre_hook(_zero_positions_hook,
                                                              with_kwargs=True)


def decoder_layers(model) -> list:
    """The decoder layers of a causal LM (one module per layer), layer 1 first.

    Raises
    ------
    ValueError
        If no layer stack of the configured depth is found.
    """
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
    if T is not None:  # nested stacks (OPT, BART: decoder.layers): the list of the depth's size
        for _, mod in base.named_modules():
            if isinstance(mod, torch.nn.ModuleList) and len(mod) == T and \
                    len({type(x) for x in mod}) <= 2:
                return list(mod)
    raise ValueError(f"{model.config.model_type}: cannot find the decoder layers to hook")


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
    bias in the mask only: eager and SDPA then agree (``tests/unit/measure/test_hooks.py`` checks it).
    Idempotent.  Returns True if the model needs the fix (a Falcon model with ALiBi in eager
    mode).
    """
    cfg = model.config
    if cfg.model_type != "falcon" or not getattr(cfg, "alibi", False):
        return False
    if getattr(cfg, "_attn_implementation", "eager") != "eager":
        return False
    for layer in decoder_layers(model):
        att = layer.self_attention
        if getattr(att, "_posbias_alibi_fix", None) is None:
            att._posbias_alibi_fix = att.register_forward_pre_hook(_zero_alibi_hook,
                                                                   with_kwargs=True)
    return True


def scale_attention_output(model, residual_scale: float) -> None:
    r"""Divide every layer's attention output projection (``self_attn.o_proj``) by
    ``residual_scale`` (:math:`\alpha`), in place: at init this up-weights the residual path by
    :math:`\alpha` against the attention branch, so :math:`\lambda_t` falls as :math:`\alpha`
    grows (chapter :ref:`ch-remedies`, the structural lever; :ref:`ch-residual`).

    Raises
    ------
    ValueError
        ``residual_scale`` not a positive finite number, or a model whose layers have no
        ``self_attn.o_proj``.
    """
    import torch

    from .._validate import positive_float

    a = positive_float("residual_scale", residual_scale)
    projs = [getattr(getattr(layer, "self_attn", None), "o_proj", None)
             for layer in decoder_layers(model)]
    if not projs or any(p is None for p in projs):
        raise ValueError(f"{type(model).__name__} has no self_attn.o_proj in every layer")
    if a == 1.0:
        return
    with torch.no_grad():
        for p in projs:
            p.weight.div_(a)


def register_attention(name: str, function, mask_like: str = "sdpa") -> str:
    """Register ``function`` with transformers' ``AttentionInterface`` under ``name`` (once per
    process, when first used; never on import), together with the attention-**mask** function
    of ``mask_like``: a custom attention name without a mask function of its own gets no mask
    at all, and sliding-window layers (Gemma 3) would run unmasked.  Returns ``name``, for
    ``model.set_attn_implementation``.  Used by the remedies and by the hooks that read
    attention inside the attention function."""
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    from transformers.modeling_utils import AttentionInterface

    if name not in AttentionInterface._global_mapping:
        AttentionInterface.register(name, function)
    if name not in AttentionMaskInterface._global_mapping:
        AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[mask_like])
    return name
