"""The small causal transformers that the remedies lab trains from scratch.

Chapter :ref:`ch-remedies`.  Built here, beside the zoo, so that every model the package trains or
measures comes from :mod:`posbias_nb.models`; the training loop lives in
:mod:`posbias_nb.experiments.remedy.lab`.  Importing this module loads no torch.
"""
from __future__ import annotations

from .._validate import positive_int
from .patches import scale_attention_output

__all__ = ["small_llama_config", "build_small"]


def small_llama_config(layers: int, width: int, length: int, vocab: int, bos: int = 0):
    """A small ``LlamaConfig``: heads of width 16, SwiGLU width ``2 * width``, RoPE, RMSNorm,
    untied embeddings, context ``max(length, 64)``; ``bos`` is also the EOS and pad token."""
    from transformers import LlamaConfig

    layers, width = positive_int("layers", layers), positive_int("width", width, minimum=16)
    if width % 16:
        raise ValueError(f"width must be a multiple of 16 (heads of width 16), got {width!r}")
    length, vocab = positive_int("length", length), positive_int("vocab", vocab, minimum=2)
    return LlamaConfig(vocab_size=vocab, hidden_size=width, intermediate_size=2 * width,
                       num_hidden_layers=layers, num_attention_heads=width // 16,
                       num_key_value_heads=width // 16, max_position_embeddings=max(length, 64),
                       rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=bos,
                       eos_token_id=bos, pad_token_id=bos)


def build_small(layers: int, width: int, length: int, seed: int, vocab: int, *, bos: int = 0,
                residual_scale: float = 1.0, device: str = "cpu"):
    """A small ``LlamaForCausalLM`` (:func:`small_llama_config`) built after
    ``torch.manual_seed(seed)``, with eager attention (so the hooks see the attention
    probabilities), and the attention output projections divided by ``residual_scale``
    (:func:`posbias_nb.models.patches.scale_attention_output`)."""
    import torch
    from transformers import AutoModelForCausalLM

    cfg = small_llama_config(layers, width, length, vocab, bos)
    seed = positive_int("seed", seed, minimum=0)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    scale_attention_output(model, residual_scale)
    return model.to(device)
