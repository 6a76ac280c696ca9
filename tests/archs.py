"""The architecture matrix: tiny random-weight configs, written here in code, for the decoder
architectures of the installed transformers (no weights from anywhere), and what the block
description must decide for each (``posbias_nb.models.blocks``).

``EXPECT[model_type]`` is ``("measured", module)``: lambda is read from that submodule of every
layer (verified by the residual identity); or ``("refused", kind)`` with kind one of
``parallel`` (attention beside another block from one input), ``not causal``, ``not attention``
(state-space, recurrent or hybrid) and ``unverified`` (no addition that the check can verify).
"""
from __future__ import annotations

COMMON = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2, hidden_size=64,
              num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              intermediate_size=128, vocab_size=300, max_position_embeddings=256, head_dim=16,
              # mixture-of-experts sizes (ignored by dense models): a few small experts
              num_experts=4, num_local_experts=4, n_routed_experts=4, num_experts_per_tok=2,
              moe_intermediate_size=32, shared_expert_intermediate_size=32)

_GPT = dict(n_embd=64, n_layer=2, n_head=4, vocab_size=300, n_positions=256, pad_token_id=0,
            bos_token_id=1, eos_token_id=2)

OVERRIDES = {
    "gpt2": _GPT,
    "openai-gpt": dict(_GPT),
    "gptj": dict(_GPT, rotary_dim=8),
    "codegen": dict(_GPT, rotary_dim=8, n_ctx=256),
    "bloom": dict(hidden_size=64, n_layer=2, n_head=4, vocab_size=300, pad_token_id=0),
    "falcon": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=300,
                   new_decoder_architecture=False, parallel_attn=True, alibi=False,
                   pad_token_id=0),
    "gpt_neox": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=128, vocab_size=300, use_parallel_residual=True,
                     pad_token_id=0),
    "gpt_neo": dict(hidden_size=64, num_layers=2, num_heads=4, vocab_size=300, window_size=16,
                    attention_types=[[["global", "local"], 1]], pad_token_id=0),
    "mpt": dict(d_model=64, n_layers=2, n_heads=4, vocab_size=300, max_seq_len=256),
    "ctrl": dict(n_embd=64, n_layer=2, n_head=4, vocab_size=300, dff=128, n_positions=256),
    "deepseek_v2": dict(COMMON, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8,
                        qk_nope_head_dim=8, v_head_dim=16, head_dim=8, n_routed_experts=4,
                        num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=32,
                        first_k_dense_replace=1, n_group=1, topk_group=1,
                        num_key_value_heads=4),
    "deepseek_v3": dict(COMMON, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8,
                        qk_nope_head_dim=8, v_head_dim=16, head_dim=8, n_routed_experts=4,
                        num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=32,
                        first_k_dense_replace=1, n_group=1, topk_group=1,
                        num_key_value_heads=4),
    "bert": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=128, vocab_size=300, pad_token_id=0),
    "mamba": dict(hidden_size=64, num_hidden_layers=2, vocab_size=300, state_size=8,
                  pad_token_id=0),
    "mamba2": dict(hidden_size=64, num_hidden_layers=2, vocab_size=300, state_size=8,
                   num_heads=4, head_dim=32, n_groups=1, pad_token_id=0),
    # LFM2 as shipped: short-convolution layers and attention layers (a hybrid)
    "lfm2": dict(COMMON, layer_types=["conv", "full_attention"]),
    "rwkv": dict(hidden_size=64, num_hidden_layers=2, vocab_size=300, attention_hidden_size=64,
                 intermediate_size=128, context_length=256, pad_token_id=0),
}

M = "measured"
R = "refused"
EXPECT = {
    # pre-norm sequential blocks: the attention module's own output is added
    **{t: (M, "self_attn") for t in (
        "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma",
        "phi3", "granite", "granitemoe", "helium", "internlm3", "olmo", "olmoe", "stablelm",
        "starcoder2", "smollm3", "seed_oss", "nemotron", "persimmon", "glm", "apertus",
        "arcee", "bitnet", "diffllama", "doge", "ernie4_5", "hunyuan_v1_dense", "vaultgemma",
        "biogpt", "xglm", "opt", "gpt_oss", "llama4_text", "deepseek_v2",
        "deepseek_v3", "ministral", "exaone")},
    "gpt2": (M, "attn"), "openai-gpt": (M, "attn"), "gpt_bigcode": (M, "attn"),
    "mpt": (M, "attn"), "jetmoe": (M, "self_attention"), "gpt_neo": (M, "attn"),
    "ctrl": (M, "dropout1"),  # the attention's output through an (eval) dropout: same values
    # BLOOM's attention module adds the residual itself: the addition is its dense output
    "bloom": (M, "self_attention.dense"),
    # sandwich and post-norm blocks: the norm after attention is what the residual receives
    **{t: (M, "post_attention_layernorm") for t in ("gemma2", "gemma3_text", "olmo2", "olmo3",
                                                    "exaone4", "afmoe")},
    "glm4": (M, "post_self_attn_layernorm"),
    # parallel blocks, refused alike
    **{t: (R, "parallel") for t in ("gptj", "codegen", "phi", "cohere", "cohere2", "gpt_neox",
                                    "falcon")},
    # not causal; not attention (state-space, recurrent, hybrids)
    "bert": (R, "not causal"),
    # hybrids by one rule (attention must be the only position mixer): LFM2's convolution
    # layers return no attention; Falcon-H1's Mamba mixer mixes positions beside its attention
    **{t: (R, "not attention") for t in ("mamba", "mamba2", "falcon_mamba", "rwkv", "jamba",
                                         "recurrent_gemma", "xlstm", "qwen3_next", "lfm2",
                                         "falcon_h1")},
    # a residual with its own weights (x * a + attn * b): not the form the check verifies
    "minimax": (R, "unverified"),
}


def config(model_type: str):
    """The tiny config of ``model_type`` (built in code)."""
    from transformers import AutoConfig

    return AutoConfig.for_model(model_type, **OVERRIDES.get(model_type, COMMON))


def build(model_type: str, seed: int = 0, attn: str | None = None):
    """A random-weight tiny model of ``model_type``, eval mode, gradients off (``attn``: the
    attention implementation, e.g. "eager" for the hooks; default the class's own)."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    kw = {} if attn is None else {"attn_implementation": attn}
    m = AutoModelForCausalLM.from_config(config(model_type), **kw).eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m
