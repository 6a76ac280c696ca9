r"""The model zoo: real architectures at initialization, pretrained weights, the RoPE switch.

Every entry of :data:`ZOO` is a :class:`ModelSpec`: a name, a family (the Hugging Face
``model_type``), a function that writes the architecture's real configuration *in code* (so a
random-init model needs no download), the model's context length, and optionally a
:class:`PretrainedSource` that knows where installed weights live.  Adding a model is a few lines::

    def _bloom_560m(**overrides):
        from transformers import BloomConfig
        return BloomConfig(**{**dict(n_layer=24, hidden_size=1024, n_head=16), **overrides})

    register(ModelSpec("bloom-560m", "bloom", "BLOOM-560M", _bloom_560m, max_length=2048,
                       tiny=dict(n_layer=2, hidden_size=32, n_head=4, vocab_size=300),
                       tiny_name="bloom-tiny"))

Further families live in modules named ``posbias_nb/zoo_*.py`` that call :func:`register` when
imported; this module imports all of them at the end, so the zoo is always complete.

Each spec with a ``tiny`` override also registers a twin (``gpt2-tiny``, ``qwen2-tiny``: the same
family and code path at 2 layers and width 32), so the tests and the command line can exercise a
family in seconds.

:func:`load` returns ``(model, tokenizer_or_None, info)``: a ``*ForCausalLM`` in eval mode,
float32, gradients of the parameters switched off, attention implementation ``"eager"`` by
default (so attention probabilities can be captured through hooks; ``attn="sdpa"`` computes the
same function faster).  Random weights are seeded: ``torch.manual_seed(seed)`` right before the
model is built, so the same seed gives bit-identical weights.  Random-init zoo models have no
tokenizer offline (``None``; see :func:`posbias_nb.measure.text_batch` for the fallback).

The RoPE switch (``rope=False``) rotates every position by angle 0: a forward pre-hook on each
rotary-embedding module (every module holding an ``inv_freq`` buffer) replaces the position ids
*it* sees by zeros, so it returns :math:`\cos = 1, \sin = 0` (times the rope type's attention
scaling, unchanged) for every token.  Nothing else changes: the parameters, the buffers, the
causal mask and the position ids seen by every other module are untouched.  A hook, rather than
zeroed ``inv_freq`` buffers, also holds for the rope types that recompute their frequencies in
``forward`` (dynamic NTK, LongRoPE).  Models without RoPE (GPT-2: learned absolute positions)
raise ``ValueError`` for ``rope=False``.

Nothing here downloads: configurations are written in code, and pretrained weights are read only
from local files (``local_files_only=True``).
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

__all__ = [
    "WEIGHTS",
    "ModelSpec",
    "PretrainedSource",
    "HubCache",
    "ZOO",
    "register",
    "names",
    "resolve",
    "describe",
    "build_config",
    "load",
    "set_rope",
    "has_rope",
    "rope_modules",
    "zoo_table",
]

WEIGHTS = ("random", "pretrained")


class PretrainedSource(Protocol):
    """Where a zoo model's pretrained weights live (a local cache, a file inside a package...).

    ``available()`` must be cheap and never touch the network; ``load(attn, device)`` returns
    ``(model, tokenizer_or_None)`` in float32.
    """

    def describe(self) -> str: ...

    def available(self) -> bool: ...

    def load(self, attn: str, device: str): ...


@dataclass(frozen=True)
class HubCache:
    """Pretrained weights that are already in the local Hugging Face cache (never downloaded).

    ``available()`` is true only if the repository's ``config.json`` and a weights file are in
    the cache; loading uses ``local_files_only=True``.
    """

    repo_id: str

    def describe(self) -> str:
        return f"Hugging Face cache: {self.repo_id}"

    def available(self) -> bool:
        try:
            from huggingface_hub import try_to_load_from_cache
        except ImportError:  # pragma: no cover - huggingface_hub ships with transformers
            return False
        cfg = try_to_load_from_cache(self.repo_id, "config.json")
        if not isinstance(cfg, str):
            return False
        folder = Path(cfg).parent
        return any(folder.glob("*.safetensors")) or any(folder.glob("*.bin"))

    def load(self, attn: str, device: str):
        return _from_pretrained_dir(self.repo_id, attn)


@dataclass(frozen=True)
class ModelSpec:
    """One entry of the zoo.

    Attributes
    ----------
    name : str
        The name used by :func:`load` and ``posbias profile --model``.
    family : str
        The Hugging Face ``model_type`` (``"gpt2"``, ``"qwen2"``, ...).
    description : str
        One line for ``posbias models``.
    config : callable
        ``config(**overrides) -> transformers.PretrainedConfig`` with the real sizes, written in
        code; keyword overrides replace single settings (the test-size twins use them).
    max_length : int
        The longest context the model is meant for (:func:`load` refuses nothing, but
        :func:`posbias_nb.measure.profile` refuses longer inputs).
    pretrained : PretrainedSource or None
        Where installed weights are looked up; None if the zoo knows no offline source.
    tiny : dict or None
        Config overrides for a test-size twin (keys starting with ``_`` are the twin's own
        settings: ``_max_length``).
    tiny_name : str or None
        The twin's name (default ``<name>-tiny``).
    overrides : dict
        Keyword overrides passed to ``config`` by :meth:`build_config` (set on the twins).
    """

    name: str
    family: str
    description: str
    config: Callable[..., Any]
    max_length: int
    pretrained: PretrainedSource | None = None
    tiny: dict | None = None
    tiny_name: str | None = None
    overrides: dict = field(default_factory=dict)

    def build_config(self):
        """The transformers config: ``config(**overrides)``."""
        return self.config(**self.overrides)


ZOO: dict[str, ModelSpec] = {}


def register(spec: ModelSpec) -> ModelSpec:
    """Add ``spec`` to :data:`ZOO` (and its ``-tiny`` twin if ``spec.tiny`` is set)."""
    if spec.name in ZOO:
        raise ValueError(f"model {spec.name!r} is already in the zoo")
    ZOO[spec.name] = spec
    if spec.tiny:
        twin = ModelSpec(
            name=spec.tiny_name or f"{spec.name}-tiny",
            family=spec.family,
            description=f"{spec.name} architecture at test size ({_tiny_summary(spec.tiny)})",
            config=spec.config,
            max_length=int(spec.tiny.get("_max_length", 256)),
            pretrained=None,
            tiny=None,
            overrides={k: v for k, v in spec.tiny.items() if not k.startswith("_")},
        )
        ZOO[twin.name] = twin
    return spec


def _tiny_summary(t: dict) -> str:
    layers = t.get("num_hidden_layers", t.get("n_layer"))
    width = t.get("hidden_size", t.get("n_embd"))
    return f"{layers} layers, width {width}, vocabulary {t.get('vocab_size')}"


# --------------------------------------------------------------------------------------------
# The configurations, written in code with the sizes of the released checkpoints.


def _gpt2_small(**overrides):
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


def _qwen2_05b(**overrides):
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


register(ModelSpec(
    "gpt2", "gpt2", "GPT-2 small (124M): 12 layers, width 768, learned absolute positions",
    _gpt2_small, max_length=1024, pretrained=HubCache("openai-community/gpt2"),
    tiny=dict(n_layer=2, n_embd=32, n_head=4, vocab_size=300, n_positions=256,
              bos_token_id=0, eos_token_id=0),
    tiny_name="gpt2-tiny",
))
register(ModelSpec(
    "qwen2-0.5b", "qwen2",
    "Qwen2-0.5B (494M): 24 layers, width 896, 14 query / 2 key-value heads, RoPE",
    _qwen2_05b, max_length=32768, pretrained=HubCache("Qwen/Qwen2-0.5B"),
    tiny=dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=300, bos_token_id=0, eos_token_id=0,
              _max_length=256),
    tiny_name="qwen2-tiny",
))


# --------------------------------------------------------------------------------------------
# Resolving names and paths


def names() -> list[str]:
    """The zoo's model names, in registration order."""
    return list(ZOO)


def _is_hf_dir(name_or_path) -> bool:
    p = Path(str(name_or_path)).expanduser()
    return p.is_dir() and (p / "config.json").is_file()


def resolve(name_or_path) -> ModelSpec | Path:
    """The zoo spec of a name, or the :class:`~pathlib.Path` of a local Hugging Face directory.

    Raises
    ------
    ValueError
        For an unknown name that is not a directory with a ``config.json`` (one line, listing the
        zoo).
    """
    if isinstance(name_or_path, ModelSpec):
        return name_or_path
    s = str(name_or_path)
    if s in ZOO:
        return ZOO[s]
    if _is_hf_dir(s):
        return Path(s).expanduser().resolve()
    hint = " (a directory without config.json)" if Path(s).expanduser().is_dir() else ""
    raise ValueError(f"unknown model {s!r}{hint}: use one of {', '.join(ZOO)} "
                     "or a local Hugging Face model directory containing config.json")


def _dir_config(path: Path):
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(str(path), local_files_only=True)


def build_config(name_or_path):
    """The transformers config of a zoo name or local directory (no weights built)."""
    r = resolve(name_or_path)
    return r.build_config() if isinstance(r, ModelSpec) else _dir_config(r)


def _config_max_length(cfg) -> int | None:
    for k in ("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length",
              "seq_length"):
        v = getattr(cfg, k, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def _weights_files(path: Path) -> list[Path]:
    pats = ("*.safetensors", "*.bin", "*.gguf", "*.pt")
    return sorted(f for pat in pats for f in path.glob(pat))


def _config_layers(cfg) -> int:
    for k in ("num_hidden_layers", "n_layer", "num_layers"):
        v = getattr(cfg, k, None)
        if isinstance(v, int):
            return v
    raise ValueError(f"cannot read the number of layers from the {cfg.model_type} config")


def _config_width(cfg) -> int:
    for k in ("hidden_size", "n_embd", "d_model"):
        v = getattr(cfg, k, None)
        if isinstance(v, int):
            return v
    raise ValueError(f"cannot read the hidden size from the {cfg.model_type} config")


def _config_has_rope(cfg) -> bool:
    """Whether a config describes rotary position embeddings (any truthy ``*rope*``/``*rotary*``
    setting, unless the config says it uses ALiBi instead).  :func:`load` checks the built model
    itself; this is the cheap early answer used before building anything."""
    if getattr(cfg, "alibi", False):
        return False
    d = cfg.to_dict()
    return any(("rope" in k or "rotary" in k) and bool(v) for k, v in d.items())


def describe(name_or_path) -> dict:
    """What is known about a model without building it.

    Returns a dict with ``kind`` (``"zoo"`` or ``"directory"``), ``name``, ``family``,
    ``n_layers``, ``hidden_size``, ``max_length``,
    ``has_rope`` (from the config),
    ``pretrained_available`` (bool), ``pretrained_source`` (str), ``fingerprint`` (a string that
    changes when the model's configuration or, for a directory, its weight files change; part of
    the cache key of measurements).
    """
    r = resolve(name_or_path)
    if isinstance(r, ModelSpec):
        cfg = r.build_config()
        src = r.pretrained
        return {
            "kind": "zoo", "name": r.name, "family": r.family, "description": r.description,
            "n_layers": _config_layers(cfg), "hidden_size": _config_width(cfg),
            "max_length": r.max_length, "has_rope": _config_has_rope(cfg),
            "pretrained_available": bool(src is not None and src.available()),
            "pretrained_source": src.describe() if src is not None else "none known offline",
            "fingerprint": hashlib.sha256(cfg.to_json_string(use_diff=False).encode())
            .hexdigest()[:16] + (":" + src.describe() if src is not None else ""),
        }
    cfg = _dir_config(r)
    files = _weights_files(r)
    h = hashlib.sha256()
    weight_set = set(files)
    for f in sorted(r.iterdir()):  # config, tokenizer and other small files by content
        if f.is_file() and f not in weight_set and f.stat().st_size < 64 * 2**20:
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    for f in files:  # weights by name, size and modification time
        st = f.stat()
        h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return {
        "kind": "directory", "name": str(r), "family": cfg.model_type,
        "description": f"local directory {r}",
        "n_layers": _config_layers(cfg), "hidden_size": _config_width(cfg),
        "max_length": _config_max_length(cfg), "has_rope": _config_has_rope(cfg),
        "pretrained_available": bool(files), "pretrained_source": str(r),
        "fingerprint": h.hexdigest()[:16],
    }


# --------------------------------------------------------------------------------------------
# The RoPE switch


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


# --------------------------------------------------------------------------------------------
# Loading


def _check_device(device: str) -> str:
    import torch

    if not isinstance(device, str) or device.split(":")[0] not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("device 'cuda' requested but CUDA is not available on this machine")
    if device == "mps" and not torch.backends.mps.is_available():
        raise ValueError("device 'mps' requested but MPS is not available on this machine")
    return device


def _from_pretrained_dir(path_or_repo, attn: str):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        str(path_or_repo), local_files_only=True, dtype=torch.float32, attn_implementation=attn)
    return model, _local_tokenizer(path_or_repo)


_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model")


def _local_tokenizer(path_or_repo):
    """The tokenizer shipped next to the weights, or None (then text is read as bytes).

    A directory without tokenizer files gives None (``AutoTokenizer`` would otherwise build an
    empty tokenizer from ``config.json`` alone)."""
    p = Path(str(path_or_repo))
    if p.is_dir():
        if not any((p / f).is_file() for f in _TOKENIZER_FILES):
            return None
    else:
        try:
            from huggingface_hub import try_to_load_from_cache
        except ImportError:  # pragma: no cover
            return None
        if not any(isinstance(try_to_load_from_cache(str(path_or_repo), f), str)
                   for f in _TOKENIZER_FILES):
            return None
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(path_or_repo), local_files_only=True)
    except Exception:  # unreadable tokenizer files: fall back to bytes
        return None
    return tok if len(tok) >= 256 else None


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


def _from_config(cfg, attn: str, seed: int):
    import torch
    from transformers import AutoModelForCausalLM

    if not _supports(cfg, attn):
        attn = "eager"  # the same function, unfused: the numbers do not change
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(cfg, attn_implementation=attn, dtype=torch.float32)


def missing_weights_message(spec: "ModelSpec") -> str:
    """One line saying that ``spec``'s pretrained weights are not installed, and how to get them."""
    if spec.pretrained is None:
        return (f"pretrained weights for {spec.name!r} are not installed (the zoo knows no "
                "offline source for them); use --weights random")
    hint = getattr(spec.pretrained, "install_hint", None)
    how = f"run: {hint()}" if callable(hint) else "use --weights random"
    return (f"pretrained weights for {spec.name!r} are not installed "
            f"({spec.pretrained.describe()}); {how}")


def load(name_or_path, weights: str = "random", seed: int = 0, rope: bool = True,
         device: str = "cpu", attn: str = "eager"):
    """Build or load a model of the zoo, or a local Hugging Face directory.

    Parameters
    ----------
    name_or_path : str or Path
        A zoo name (:func:`names`) or a directory with a ``config.json``.
    weights : {"random", "pretrained"}
        ``"random"``: the architecture at initialization, built from its config with
        ``torch.manual_seed(seed)`` (the model's own ``_init_weights``).  ``"pretrained"``: the
        installed weights (zoo: its :class:`PretrainedSource`; directory: ``from_pretrained`` with
        ``local_files_only=True``).
    seed : int
        Seed of the random initialization (ignored for pretrained weights).
    rope : bool
        False switches rotary position embeddings off (:func:`set_rope`).
    device : str
        ``"cpu"`` or ``"cuda"``.
    attn : str
        Attention implementation: ``"eager"`` (attention probabilities materialized, hookable) or
        ``"sdpa"`` (the same function, fused).

    Returns
    -------
    (model, tokenizer_or_None, info)
        ``model`` is a ``*ForCausalLM`` in eval mode, float32, with ``requires_grad`` off for all
        parameters.  ``info`` has ``name``, ``family``, ``weights``, ``seed``, ``rope`` (the
        switch), ``has_rope`` (the architecture), ``n_layers``, ``hidden_size``, ``n_heads``,
        ``max_length``, ``n_params``, ``attn``, ``device``.

    Raises
    ------
    ValueError
        Unknown model, bad ``weights``/``seed``/``attn``, pretrained weights not installed,
        ``rope=False`` for a model without RoPE, an unavailable device.
    """
    from ._validate import positive_int

    if weights not in WEIGHTS:
        raise ValueError(f"weights must be 'random' or 'pretrained', got {weights!r}")
    seed = positive_int("seed", seed, minimum=0)
    if attn not in ("eager", "sdpa"):
        raise ValueError(f"attn must be 'eager' or 'sdpa', got {attn!r}")
    r = resolve(name_or_path)
    device = _check_device(device)
    tok = None
    if isinstance(r, ModelSpec):
        name, family, max_length = r.name, r.family, r.max_length
        if weights == "random":
            model = _from_config(r.build_config(), attn, seed)
        else:
            if r.pretrained is None or not r.pretrained.available():
                raise ValueError(missing_weights_message(r))
            model, tok = r.pretrained.load(attn, device)
    else:
        cfg = _dir_config(r)
        name, family, max_length = str(r), cfg.model_type, _config_max_length(cfg)
        if weights == "random":
            model = _from_config(cfg, attn, seed)
            tok = _local_tokenizer(r)
        else:
            if not _weights_files(r):
                raise ValueError(f"no weight files (*.safetensors, *.bin) in {r}; "
                                 "use --weights random")
            model, tok = _from_pretrained_dir(r, attn)
    import torch

    model = model.to(device=device, dtype=torch.float32).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    if getattr(model.config, "_attn_implementation", None) == "eager":
        from .capture import fix_falcon_eager_alibi

        fix_falcon_eager_alibi(model)  # no-op except for Falcon with ALiBi (bias applied twice)
    arch_rope = has_rope(model)
    if not rope:
        set_rope(model, False)
    cfg = model.config
    info = {
        "name": name,
        "family": family,
        "weights": weights,
        "seed": seed if weights == "random" else None,
        "rope": bool(rope and arch_rope),
        "has_rope": arch_rope,
        "n_layers": _config_layers(cfg),
        "hidden_size": _config_width(cfg),
        "n_heads": getattr(cfg, "num_attention_heads", getattr(cfg, "n_head", None)),
        "max_length": max_length,
        "n_params": int(sum(p.numel() for p in model.parameters())),
        "attn": attn,
        "device": device,
    }
    return model, tok, info


def zoo_table() -> list[dict]:
    """One row per zoo model: name, family, layers, width, context, pretrained availability."""
    rows = []
    for n in ZOO:
        d = describe(n)
        rows.append({k: d[k] for k in ("name", "family", "n_layers", "hidden_size", "max_length",
                                       "pretrained_available", "pretrained_source",
                                       "description")})
    return rows


def _env_offline() -> None:
    """Make sure nothing reaches the network from here (idempotent), and keep one known
    import-time notice off the notebooks' stderr: in a Jupyter kernel without ipywidgets,
    ``tqdm.auto`` (imported by transformers) warns "IProgress not found"."""
    import warnings

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    warnings.filterwarnings("ignore", message="IProgress not found")


def _load_zoo_extensions() -> None:
    """Import every ``posbias_nb.zoo_*`` module (in name order): each registers its specs with
    :func:`register` when imported, so the zoo is complete whoever imports :mod:`models` first.
    A module that fails to import fails loudly here."""
    import importlib
    import pkgutil

    pkg = __name__.rpartition(".")[0]
    folder = Path(__file__).parent
    for m in sorted(pkgutil.iter_modules([str(folder)]), key=lambda m: m.name):
        if m.name.startswith("zoo_"):
            importlib.import_module(f"{pkg}.{m.name}")


_env_offline()
_load_zoo_extensions()
