r"""The text the measurements read: offline English from Python's own standard library.

:func:`text_batch` draws seeded windows of token ids from :func:`stdlib_corpus` (docstrings of
standard-library modules, read from their source files) or uniformly random tokens.  The windows
of one batch never overlap (when the corpus holds that many), so they are independent samples
of the text for the intervals computed over them.  The same arguments give the same ids.
Pure data: this module imports no torch (a tokenizer object is only called).  These are the inputs :math:`e_j` of :eq:`eq-jac-influence`
(chapter :ref:`ch-init`) and of every other measurement.
"""
from __future__ import annotations

import hashlib
import os
from functools import lru_cache

import numpy as np

from .._validate import choice, positive_int

__all__ = ["STDLIB_MODULES", "SOURCES", "WINDOWS", "ASCII_ALPHABET", "stdlib_corpus", "corpus_digest",
           "text_batch", "random_ascii_batch"]

#: The rule that draws windows: part of every cache key (bump when :func:`text_batch` changes).
WINDOWS = "disjoint-v1"

SOURCES = ("text", "random")

#: The pure-Python standard-library modules whose docstrings are the offline text corpus.
STDLIB_MODULES = (
    "abc", "argparse", "base64", "bisect", "calendar", "collections", "contextlib", "copy",
    "csv", "dataclasses", "datetime", "decimal", "difflib", "enum", "fractions", "functools",
    "gzip", "heapq", "hmac", "html", "inspect", "ipaddress", "json", "logging", "operator",
    "pathlib", "pickle", "pprint", "queue", "random", "sched", "secrets", "shlex", "shutil",
    "statistics", "string", "subprocess", "tarfile", "tempfile", "textwrap", "threading",
    "timeit", "tokenize", "typing", "unittest", "urllib.parse", "uuid", "warnings", "weakref",
    "zipfile",
)


# --------------------------------------------------------------------------------------------
# Text that ships offline


def _source_docs(path: str) -> list[str]:
    import ast

    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    pieces = []
    doc = ast.get_docstring(tree)
    if doc:
        pieces.append(doc)

    def visit(body, prefix=""):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node.name.startswith("_"):
                    continue
                d = ast.get_docstring(node)
                if d:
                    pieces.append(f"{prefix}{node.name}: {d}")
                if isinstance(node, ast.ClassDef):
                    visit(node.body, prefix=f"{prefix}{node.name}.")

    visit(tree.body)
    return pieces


@lru_cache(maxsize=1)
def stdlib_corpus() -> str:
    """English text that every Python installation has: docstrings of the standard library.

    For each module of :data:`STDLIB_MODULES` (in that order), its source file in the standard
    library folder (``sysconfig.get_paths()["stdlib"]``) is parsed with :mod:`ast` (nothing is
    imported or executed) and its docstrings are taken in source order:
    the module's, then those of its public functions and classes and of the classes' public
    methods, as ``name: docstring``.  Pieces are joined by blank lines.  Reading the source, not
    the live objects, keeps the text independent of what else the process has imported (libraries
    that patch the standard library would otherwise change it), of frozen modules (a Jupyter
    kernel runs with ``-X frozen_modules=off``) and of ``python -OO``.  The text
    depends on the Python version; :func:`corpus_digest` identifies it.

    Raises
    ------
    RuntimeError
        If the standard library's sources are not installed (fewer than 100 000 characters found).
    """
    pieces: list[str] = []
    for path in _source_files():
        try:
            pieces.extend(_source_docs(str(path)))
        except (OSError, SyntaxError, UnicodeDecodeError):  # pragma: no cover
            pass
    text = "\n\n".join(pieces)
    if len(text) < 100_000:  # pragma: no cover - sources stripped from this installation
        raise RuntimeError("the standard library's source files are not installed: "
                           "use source='random'")
    return text


def _source_files() -> list:
    import sysconfig
    from pathlib import Path

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for modname in STDLIB_MODULES:
        rel = Path(*modname.split("."))
        for path in (stdlib / rel.with_suffix(".py"), stdlib / rel / "__init__.py"):
            if path.is_file():
                out.append(path)
                break
    return out


@lru_cache(maxsize=1)
def corpus_digest() -> str:
    """SHA-256 (first 16 hex digits) of :func:`stdlib_corpus`: part of every cache key.

    Memoised on disk (in the cache folder), keyed by the path, size and modification time of
    every source file the corpus is read from and by this module's own code, so a cached
    measurement does not parse the standard library again; any change to those files
    recomputes it."""
    import sys
    from pathlib import Path

    from ..cache import cache_dir

    h = hashlib.sha256(sys.version.encode() + Path(__file__).read_bytes())
    for f in _source_files():
        st = f.stat()
        h.update(f"{f}:{st.st_size}:{st.st_mtime_ns}".encode())
    d = cache_dir()
    memo = None if d is None else d / "corpus" / f"{h.hexdigest()}.txt"
    if memo is not None and memo.is_file():
        text = memo.read_text().strip()
        if len(text) == 16:
            return text
    digest = hashlib.sha256(stdlib_corpus().encode("utf-8")).hexdigest()[:16]
    if memo is not None:
        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            tmp = memo.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(digest)
            os.replace(tmp, memo)
        except OSError:
            pass  # read-only cache folder: no memo, same digest
    return digest


@lru_cache(maxsize=4)
def _token_stream(tokenizer) -> np.ndarray:
    text = stdlib_corpus()
    if tokenizer is None:
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64)
    import logging

    log = logging.getLogger("transformers.tokenization_utils_base")
    old = log.level
    log.setLevel(logging.ERROR)  # "sequence longer than the model's maximum": we cut windows
    try:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    finally:
        log.setLevel(old)
    return np.asarray(ids, dtype=np.int64)


def text_batch(tokenizer, length: int, batch: int, seed: int = 0, source: str = "text",
               vocab_size: int | None = None) -> np.ndarray:
    """A ``(batch, length)`` int64 array of token ids, seeded and deterministic.

    Parameters
    ----------
    tokenizer : a Hugging Face tokenizer or None
        ``source="text"`` tokenizes :func:`stdlib_corpus` with it.  **Fallback** when it is None
        (random-init zoo models have no tokenizer offline): the corpus's UTF-8 bytes, byte ``b``
        becoming token id ``b`` (``b mod vocab_size`` if the vocabulary has fewer than 256
        entries).  At initialization the embedding table is random, so which ids stand for which
        bytes is immaterial; what the text contributes is its statistics (repeated tokens,
        recurring words) against the all-distinct tokens of ``source="random"``.
    length, batch : int
        Window length (>= 1) and number of windows (>= 1).
    seed : int
        Windows are disjoint: the stream is cut into ``n // length`` consecutive blocks after a
        random offset, and ``batch`` distinct blocks are drawn without replacement, all with
        ``numpy.random.default_rng([seed, 0x7e57])``.  Only when the stream holds fewer than
        ``batch`` windows are starts drawn independently (the stream is then treated as
        circular, e.g. when it is shorter than ``length``).
    source : {"text", "random"}
        ``"random"``: ids uniform on ``0 .. vocab_size-1`` (needs ``vocab_size``).
    vocab_size : int or None
        If given, every id is checked to be below it.

    Raises
    ------
    ValueError
        Bad sizes or source, ``source="random"`` without ``vocab_size``, or an id out of range.
    """
    length = positive_int("length", length)
    batch = positive_int("batch", batch)
    seed = positive_int("seed", seed, minimum=0)
    choice("source", source, SOURCES)
    if vocab_size is not None:
        vocab_size = positive_int("vocab_size", vocab_size)
    rng = np.random.default_rng([seed, 0x7E57])
    if source == "random":
        if vocab_size is None:
            raise ValueError("source='random' needs vocab_size")
        return rng.integers(0, vocab_size, size=(batch, length), dtype=np.int64)
    stream = _token_stream(tokenizer)
    if tokenizer is None and vocab_size is not None and vocab_size < 256:
        stream = stream % vocab_size
    n = stream.size
    n_blocks = n // length
    if n_blocks >= batch:  # disjoint windows: independent samples
        offset = int(rng.integers(0, n - n_blocks * length + 1))
        starts = offset + rng.choice(n_blocks, size=batch, replace=False) * length
    else:
        starts = rng.integers(0, max(n - length, 0) + 1, size=batch)
    idx = (starts[:, None] + np.arange(length)[None, :]) % n
    ids = stream[idx]
    if vocab_size is not None and ids.max() >= vocab_size:
        raise ValueError(f"token id {int(ids.max())} is outside the vocabulary of {vocab_size}")
    return ids


#: Printable ASCII without whitespace: the alphabet of Yu et al.'s channel-search corpus.
ASCII_ALPHABET = "".join(chr(c) for c in range(33, 127))


def random_ascii_batch(tokenizer, length: int, batch: int, seed: int = 0,
                       vocab_size: int | None = None) -> np.ndarray:
    """Yu et al.'s channel-search inputs (their ``corpus/random_string.txt``, cut into chunks of
    ``10 * length`` characters): ``batch`` strings of ``10 * length`` random printable ASCII
    characters (no spaces), each tokenized **without** special tokens (no BOS) and cut to its
    first ``length`` tokens; ``(batch, length)`` int64, seeded.  A model without a tokenizer
    reads the bytes (``mod vocab_size``).

    Examples
    --------
    >>> random_ascii_batch(None, 5, 2, seed=0, vocab_size=256).shape
    (2, 5)
    """
    length = positive_int("length", length)
    batch = positive_int("batch", batch)
    seed = positive_int("seed", seed, minimum=0)
    rng = np.random.default_rng([seed, 0xA5C11])
    out = np.zeros((batch, length), dtype=np.int64)
    for b in range(batch):
        chars = rng.integers(0, len(ASCII_ALPHABET), size=10 * length)
        text = "".join(ASCII_ALPHABET[i] for i in chars)
        if tokenizer is None:
            if vocab_size is None:
                raise ValueError("a byte-level batch (tokenizer None) needs vocab_size")
            ids = np.frombuffer(text.encode("ascii"), dtype=np.uint8).astype(np.int64) \
                % int(vocab_size)
        else:
            ids = np.asarray(tokenizer(text, add_special_tokens=False)["input_ids"],
                             dtype=np.int64)
        if ids.size < length:
            raise ValueError(f"{10 * length} random characters gave only {ids.size} tokens, "
                             f"fewer than length={length}")
        out[b] = ids[:length]
    if vocab_size is not None and out.max() >= vocab_size:
        raise ValueError(f"token id {int(out.max())} is outside the vocabulary of {vocab_size}")
    return out
