r"""Building and loading models: :func:`load`, the one place where patches are applied.

Every measuring chapter calls it through :mod:`posbias_nb.measure`; chapter :ref:`ch-reproduce`
shows it on a model of your own.

:func:`load` returns ``(model, tokenizer_or_None, info)``: a ``*ForCausalLM`` in eval mode,
float32 by default (``dtype="bfloat16"`` for large models), gradients of the parameters switched
off, attention implementation ``"sdpa"`` by default: the fused kernel (PyTorch's
``scaled_dot_product_attention``), which never stores the ``L x L`` attention matrix, so the
memory of a forward and backward pass grows linearly in the length (SmolLM2-135M, L = 2048,
4 probes: 27 s and 3.7 GB against 86 s and 10.2 GB eager).  Where a model class has no fused
path (BLOOM, MPT in transformers 5) the same function runs unfused (``info["attn"]`` says which).
Anything that reads attention probabilities (hooks, ``output_attentions=True``;
:func:`posbias_nb.measure.hooks.capture_model`) must ask for ``attn="eager"``.

Random weights are seeded: ``torch.manual_seed(seed)`` right before the model is built, so the
same seed gives bit-identical weights.  Random-init zoo models have no tokenizer offline (``None``; see
:func:`posbias_nb.tasks.text.text_batch` for the fallback, and :func:`packaged_tokenizer` for the
tokenizer of a packaged model without its weights).

Nothing here downloads: configurations are written in code, and pretrained weights are read only
from local files (``local_files_only=True``).
"""
from __future__ import annotations

import os
from pathlib import Path

from .._validate import choice, positive_int
from . import init_scales, patches, weights as _weights
from .weights import from_pretrained_dir, local_tokenizer
from .zoo import (WEIGHTS, ModelSpec, config_int, config_max_length, dir_config,
                  missing_weights_message, resolve, weights_files)

__all__ = ["load", "check_device", "packaged_tokenizer", "load_encoder", "DTYPES"]

DTYPES = ("float32", "bfloat16")


def check_device(device: str) -> str:
    """Return ``device`` if it is usable here, else raise ValueError (one line).  The CPU needs
    no check, so torch is imported only for an accelerator (a cached run on the CPU stays fast)."""
    if not isinstance(device, str) or device.split(":")[0] not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if device == "cpu":
        return device
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("device 'cuda' requested but CUDA is not available on this machine")
    if device == "mps" and not torch.backends.mps.is_available():
        raise ValueError("device 'mps' requested but MPS is not available on this machine")
    return device


def _supports(cfg, attn: str) -> bool:
    """Whether the causal-LM class of ``cfg`` implements attention ``attn`` (BLOOM and MPT have
    no SDPA path in transformers 5)."""
    from transformers import AutoModelForCausalLM

    if attn == "eager":
        return True
    try:
        cls = AutoModelForCausalLM._model_mapping[type(cfg)]
    except KeyError:
        return False
    return bool(getattr(cls, "_supports_sdpa", False))


def _resolve_attn(cfg, attn: str) -> str:
    """``attn``, or ``"eager"`` where the model class of ``cfg`` has no such kernel (the same
    function, unfused: the numbers do not change)."""
    return attn if _supports(cfg, attn) else "eager"


def _from_config(cfg, attn: str, seed: int, dtype: str):
    import torch
    from transformers import AutoModelForCausalLM

    attn = _resolve_attn(cfg, attn)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation=attn,
                                             dtype=getattr(torch, dtype))
    stds = getattr(cfg, init_scales.CONFIG_KEY, None)
    if stds:  # a std per group of matrices (models.at_width(std=...)), decided by behaviour
        init_scales.apply_stds(model, dict(stds), seed=seed)
    return model


def _quiet_notices() -> None:
    """Keep one known import-time notice off the notebooks' stderr: in a Jupyter kernel
    without ipywidgets, ``tqdm.auto`` (imported by transformers) warns "IProgress not found".
    A warnings filter, set when :mod:`posbias_nb.models` is imported; no environment variable."""
    import warnings

    warnings.filterwarnings("ignore", message="IProgress not found")


def _env_offline() -> None:
    """Where a model or a tokenizer is loaded: nothing reaches the network from here
    (``HF_HUB_OFFLINE`` and ``TRANSFORMERS_OFFLINE`` set to 1 unless the user set them: a
    user's own setting wins; every load also passes ``local_files_only=True``)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    _quiet_notices()


class _QuietBars:
    """Within the block, transformers' own progress bars ("Loading weights", GGUF
    de-quantization) stay off stderr: the command line and the chapters keep their one bar."""

    def __enter__(self):
        from transformers.utils import logging as hf_logging

        self.was = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()

    def __exit__(self, *exc):
        from transformers.utils import logging as hf_logging

        if self.was:
            hf_logging.enable_progress_bar()


def _point_base_model(model) -> None:
    """Make ``model.base_model`` the decoder stack where a class's ``base_model_prefix`` names
    no child (Llama 4's text model: prefix ``language_model``, stack ``model``), so that every
    measurement reads ``last_hidden_state`` from it.  The stack is found by identity: the one
    child model that holds the model's own input embeddings."""
    if model.base_model is not model:
        return
    emb = model.get_input_embeddings()
    from transformers import PreTrainedModel

    kids = [n for n, c in model.named_children()
            if isinstance(c, PreTrainedModel) and c.get_input_embeddings() is emb]
    if len(kids) == 1:
        model.base_model_prefix = kids[0]  # on the instance only


def load(name_or_path, weights: str = "random", seed: int = 0, rope: bool = True,
         device: str = "cpu", attn: str = "sdpa", dtype: str = "float32", device_map=None):
    """Build or load a model of the zoo, or a local Hugging Face directory.

    Parameters
    ----------
    name_or_path : str or Path
        A zoo name (:func:`posbias_nb.models.zoo.names`) or a directory with a ``config.json``.
    weights : {"random", "pretrained"}
        ``"random"``: the architecture at initialization, built from its config with
        ``torch.manual_seed(seed)`` (the model's own ``_init_weights``).  ``"pretrained"``: the
        installed weights (zoo: its pretrained source; directory: ``from_pretrained`` with
        ``local_files_only=True``).
    seed : int
        Seed of the random initialization (ignored for pretrained weights).
    rope : bool
        False switches rotary position embeddings off (:func:`posbias_nb.models.patches.set_rope`).
    device : str
        ``"cpu"`` or ``"cuda"`` (ignored when ``device_map`` is given).
    attn : {"sdpa", "eager"}
        Attention implementation.  ``"sdpa"`` (default): the fused kernel, memory linear in the
        length, the fastest on CPU and CUDA; a model class without it (BLOOM, MPT) gets
        ``"eager"``, for random and pretrained weights alike.  ``"eager"``: the attention
        probabilities materialized (``L x L`` per head and layer), which hooks and
        ``output_attentions=True`` need (:func:`posbias_nb.measure.hooks.capture_model` refuses
        anything else).  Both compute the same function.
    dtype : {"float32", "bfloat16"}
        Parameter dtype.  float32 (the default) is what every chapter uses; bfloat16 halves the
        memory of a large model.
    device_map : None, "auto", "cpu" or a dict
        Passed to ``from_pretrained`` (pretrained weights only): ``"auto"`` lets accelerate shard
        a model that outgrows one accelerator across all visible devices and the CPU.  None (the
        default) loads on ``device``.

    Returns
    -------
    (model, tokenizer_or_None, info)
        ``model`` is a ``*ForCausalLM`` in eval mode with ``requires_grad`` off for all
        parameters.  ``info`` has ``name``, ``family``, ``weights``, ``seed``, ``rope`` (the
        switch), ``has_rope`` (the architecture), ``n_layers``, ``hidden_size``, ``n_heads``,
        ``max_length``, ``n_params``, ``attn`` (the implementation the model runs, after the
        fallback to ``"eager"``), ``device``, ``dtype``, ``device_map``.

    Raises
    ------
    ValueError
        Unknown model, bad ``weights``/``seed``/``attn``/``dtype``/``device_map``, pretrained
        weights not installed, ``rope=False`` for a model without RoPE, an unavailable device.
    """
    _env_offline()
    choice("weights", weights, WEIGHTS)
    seed = positive_int("seed", seed, minimum=0)
    choice("attn", attn, ("eager", "sdpa"))
    choice("dtype", dtype, DTYPES)
    if device_map is not None and not isinstance(device_map, (str, dict)):
        raise ValueError(f"device_map must be 'auto', a device name or a dict, got {device_map!r}")
    r = resolve(name_or_path)
    if device_map is None:
        device = check_device(device)
    tok = None
    if isinstance(r, ModelSpec):
        name, family, max_length = r.name, r.family, r.max_length
        if weights == "random":
            model = _from_config(r.build_config(), attn, seed, dtype)
        else:
            if r.pretrained is None or not r.pretrained.available():
                raise ValueError(missing_weights_message(r))
            with _QuietBars():
                model, tok = r.pretrained.load(_resolve_attn(r.build_config(), attn), device,
                                               dtype=dtype, device_map=device_map)
    else:
        cfg = dir_config(r)
        name, family, max_length = str(r), cfg.model_type, config_max_length(cfg)
        if weights == "random":
            model = _from_config(cfg, attn, seed, dtype)
            tok = local_tokenizer(r)
        else:
            if not weights_files(r):
                raise ValueError(missing_weights_message(r))
            with _QuietBars():
                model, tok = from_pretrained_dir(r, _resolve_attn(cfg, attn), dtype=dtype,
                                                 device_map=device_map)
    import torch

    if device_map is None:
        model = model.to(device=device, dtype=getattr(torch, dtype))
    model = model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    patches.fix_falcon_eager_alibi(model)  # no-op except eager Falcon with ALiBi
    _point_base_model(model)
    arch_rope = patches.has_rope(model)
    if not rope:
        patches.set_rope(model, False)
    from .blocks import describe_blocks

    blocks = describe_blocks(model)  # decided once, by behaviour, on one short batch
    cfg = model.config
    info = {
        "name": name,
        "family": family,
        "weights": weights,
        "seed": seed if weights == "random" else None,
        "rope": bool(rope and arch_rope),
        "has_rope": arch_rope,
        "n_layers": config_int(cfg, "layers"),
        "hidden_size": config_int(cfg, "width"),
        "n_heads": getattr(cfg, "num_attention_heads", getattr(cfg, "n_head", None)),
        "max_length": max_length,
        "n_params": int(sum(p.numel() for p in model.parameters())),
        "attn": getattr(cfg, "_attn_implementation", None) or attn,
        "device": str(next(model.parameters()).device) if device_map is not None else device,
        "dtype": dtype,
        "device_map": device_map,
        "causal": blocks.causal, "attention": blocks.attention, "blocks": blocks.layout,
        "warnings": list(getattr(model, "_posbias_warnings", [])),
    }
    return model, tok, info


def packaged_tokenizer(name: str):
    """A packaged model's own tokenizer, without building the model (``-tiny`` twins map to
    their full-size entry), so a random-init model can read exactly the token ids its
    pretrained counterpart reads.

    Raises
    ------
    ValueError
        If ``name`` has no packaged weights or the package is not installed (the message names
        the install command).
    """
    from transformers import AutoTokenizer

    _env_offline()
    base = name[: -len("-tiny")] if name.endswith("-tiny") else name
    path = _weights.locate(base)
    if _weights.SOURCES[base].kind == "gguf":
        path = _weights.dequantized(base, path)
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def load_encoder(name: str = "minilm-l6", weights: str = "random", seed: int = 0,
                 attn: str = "sdpa"):
    """``(BertModel, tokenizer_or_None)`` of an encoder entry of the zoo (``minilm-l6``,
    ``minilm-tiny``), random (seeded) or pretrained, float32, eval mode, gradients off.

    Attention is *bidirectional* (``is_decoder=False``): the contrast to the causal models in
    chapter *After training*.  A ``BertConfig`` given to ``AutoModelForCausalLM`` would become
    ``BertLMHeadModel``; this builds ``BertModel`` directly for both weights.

    Raises
    ------
    ValueError
        For a model that is not a BERT encoder, bad ``weights``, or weights not installed.
    """
    import torch
    from transformers import BertModel

    spec = resolve(name)
    if not isinstance(spec, ModelSpec) or spec.family != "bert":
        raise ValueError(f"load_encoder needs a BERT encoder of the zoo, got {name!r}")
    if weights == "pretrained":
        model, tok = load(name, weights="pretrained", attn=attn)[:2]
    elif weights == "random":
        torch.manual_seed(positive_int("seed", seed, minimum=0))
        model = BertModel(spec.build_config(), add_pooling_layer=False)
        model.config._attn_implementation = attn
        tok = None
    else:
        choice("weights", weights, WEIGHTS)
    model = model.float().eval()
    for p in model.parameters():
        p.requires_grad_(False)
    if model.config.is_decoder:  # pragma: no cover - the zoo's encoder config says False
        raise ValueError(f"{name} is configured as a decoder")
    return model, tok
