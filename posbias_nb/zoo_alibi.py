r"""ALiBi architectures of the zoo at their real sizes, random-init, configurations written in code.

Three families whose position signal is an ALiBi bias on the attention logits
(Press et al., 2022), the setting of the structural theory's measurements
(Herasimchyk et al., 2026):

* ``bloom-560m`` — BLOOM-560M (``bigscience/bloom-560m``'s config.json): 24 layers, width 1024,
  16 heads, vocabulary 250 880, pre-LayerNorm, ALiBi.
* ``falcon-rw-1b`` — Falcon-RW-1B (``tiiuae/falcon-rw-1b``): 24 layers, width 2048, 32 heads,
  vocabulary 50 304, ALiBi, sequential (not parallel) attention and MLP, biases, one key-value
  head per query head (``multi_query=False``), the old decoder architecture.
* ``mpt-1b`` — an MPT of 1B size with the MPT-7B recipe scaled down (``d_model=2048``,
  ``n_heads=16``, ``n_layers=24``, vocabulary 50 368, ALiBi with ``alibi_bias_max=8``, no biases,
  context 2048).  The released ``mosaicml/mpt-1b-redpajama-200b`` uses custom code outside
  transformers; this is the transformers ``MptConfig`` with those sizes.

Each has a test-size twin (``bloom-tiny``, ``falcon-rw-tiny``, ``mpt-tiny``: 2 layers, width 32,
vocabulary 300).  No pretrained source is known offline for these, so only ``weights="random"``
loads.  Nothing here downloads.

All three run with ``attn_implementation="eager"`` and return their attention probabilities with
``output_attentions=True`` in transformers 5.x (checked in ``tests/test_capture.py``).
"""
from __future__ import annotations

from .models import ZOO, ModelSpec, register

__all__ = ["ALIBI_MODELS"]

#: The full-size ALiBi zoo entries registered by this module.
ALIBI_MODELS = ("bloom-560m", "falcon-rw-1b", "mpt-1b")


def _bloom_560m(**overrides):
    """BLOOM-560M: ``bigscience/bloom-560m``'s config.json."""
    from transformers import BloomConfig

    return BloomConfig(**{**dict(
        vocab_size=250880,
        hidden_size=1024,
        n_layer=24,
        n_head=16,
        layer_norm_epsilon=1e-5,
        initializer_range=0.02,
        apply_residual_connection_post_layernorm=False,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        pretraining_tp=1,
        slow_but_exact=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
        tie_word_embeddings=True,
    ), **overrides})


def _falcon_rw_1b(**overrides):
    """Falcon-RW-1B: ``tiiuae/falcon-rw-1b``'s config.json (ALiBi, sequential attention/MLP)."""
    from transformers import FalconConfig

    return FalconConfig(**{**dict(
        vocab_size=50304,
        hidden_size=2048,
        num_hidden_layers=24,
        num_attention_heads=32,
        layer_norm_epsilon=1e-5,
        initializer_range=0.02,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        alibi=True,
        new_decoder_architecture=False,
        multi_query=False,
        parallel_attn=False,
        bias=True,
        max_position_embeddings=2048,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=True,
    ), **overrides})


def _mpt_1b(**overrides):
    """MPT at 1B size (d_model 2048, 16 heads, 24 layers), ALiBi, the MPT-7B recipe otherwise."""
    from transformers import MptConfig

    attn = dict(attn_type="multihead_attention", attn_pdrop=0, attn_impl="torch",
                clip_qkv=None, softmax_scale=None, prefix_lm=False, qk_ln=False,
                attn_uses_sequence_id=False, alibi=True, alibi_bias_max=8)
    attn.update(overrides.pop("attn_config", {}) or {})
    return MptConfig(**{**dict(
        d_model=2048,
        n_heads=16,
        n_layers=24,
        expansion_ratio=4,
        max_seq_len=2048,
        vocab_size=50368,
        resid_pdrop=0.0,
        emb_pdrop=0.0,
        layer_norm_epsilon=1e-5,
        learned_pos_emb=False,
        no_bias=True,
        norm_type="low_precision_layernorm",
        initializer_range=0.02,
        tie_word_embeddings=True,
        attn_config=attn,
    ), **overrides})


def _register() -> None:
    if "bloom-560m" in ZOO:  # imported twice (e.g. by models.py and explicitly): nothing to do
        return
    register(ModelSpec(
        "bloom-560m", "bloom", "BLOOM-560M: 24 layers, width 1024, 16 heads, ALiBi",
        _bloom_560m, max_length=2048,
        tiny=dict(n_layer=2, hidden_size=32, n_head=4, vocab_size=300, bos_token_id=0,
                  eos_token_id=0, pad_token_id=0),
        tiny_name="bloom-tiny",
    ))
    register(ModelSpec(
        "falcon-rw-1b", "falcon",
        "Falcon-RW-1B: 24 layers, width 2048, 32 heads, ALiBi, sequential attention/MLP",
        _falcon_rw_1b, max_length=2048,
        tiny=dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, vocab_size=300,
                  bos_token_id=0, eos_token_id=0),
        tiny_name="falcon-rw-tiny",
    ))
    register(ModelSpec(
        "mpt-1b", "mpt", "MPT-1B: 24 layers, width 2048, 16 heads, ALiBi (MPT-7B recipe)",
        _mpt_1b, max_length=2048,
    ))
    # the twin by hand: MptConfig names its sizes n_layers / d_model, which the automatic
    # twin's description does not read
    register(ModelSpec(
        "mpt-tiny", "mpt", "mpt-1b architecture at test size (2 layers, width 32, vocabulary 300)",
        _mpt_1b, max_length=256,
        overrides=dict(n_layers=2, d_model=32, n_heads=4, vocab_size=300),
    ))

_register()
