r"""Jacobian influence profiles of real models, exact and estimated, and the text they read.

The influence of input position :math:`j` on the last output is the Frobenius norm

.. math::
    I_j = \lVert J_j \rVert_F, \qquad
    J_j = \frac{\partial h_L}{\partial e_j} \in \mathbb{R}^{d \times d},

where :math:`e_j` is the token embedding at position :math:`j` (``inputs_embeds``; for GPT-2 the
learned position embedding is added after it, so :math:`\partial/\partial e_j` is also the
derivative w.r.t. the summed input) and :math:`h_L` is the **final-layer hidden state of the last
token after the final norm** — Hugging Face's ``last_hidden_state[:, -1]``, the vector the LM head
reads.  The final norm acts on the last token alone, so it multiplies every :math:`J_j` by the
same :math:`d \times d` matrix; at initialization (unit gain) that matrix is a scaled projection
(RMSNorm: :math:`(I - \hat h \hat h^\top)/\mathrm{rms}`; LayerNorm also removes the mean
direction), so it rescales the profile by a common factor and changes its shape only through the
one or two directions it removes.

Two ways to compute :math:`I_j` for every :math:`j` at once (one forward pass per sequence, then
vector–Jacobian products, each giving a row :math:`v^\top J_j` for *all* positions):

* **exact** (``method="exact"``): the :math:`d` basis vectors :math:`v = e_i` as batched VJPs,
  ``chunk`` directions per backward pass, so memory is bounded by ``chunk`` (not :math:`d`);
  :math:`I_j^2 = \sum_i \lVert e_i^\top J_j \rVert^2`.
* **Hutchinson** (``method="probes"``): :math:`K` random probes :math:`z` with
  :math:`\mathbb{E}[z z^\top] = I` (Rademacher by default, or Gaussian), for which
  :math:`\mathbb{E}_z \lVert z^\top J_j \rVert^2 = \operatorname{tr}(J_j J_j^\top) = I_j^2`
  :cite:p:`hutchinson1989trace`.  With samples :math:`s_k = \lVert z_k^\top J_j \rVert^2`,
  :math:`\hat I_j^2 = \bar s`, :math:`\hat I_j = \sqrt{\bar s}` and, by the delta method
  (:math:`d\sqrt{m} = dm / 2\sqrt{m}`), the standard error
  :math:`\mathrm{se}(\hat I_j) = \mathrm{sd}(s) / (2\sqrt{K \bar s})` (sample standard deviation,
  ``ddof=1``; hence ``probes >= 2``).  The square root makes :math:`\hat I_j` biased low by about
  :math:`\mathrm{se}^2 / (2 I_j)`, negligible next to the standard error whenever the relative
  error is small.  With few probes the reported error is itself noisy (its ratio to the true
  error has Student-like tails; with :math:`K = 2` it is unreliable): use :math:`K \ge 8`.

Over a batch of :math:`B` sequences the profile is the mean :math:`\bar I_j` of the per-sequence
norms.  Two errors are reported: ``stderr``, the Monte Carlo error of the probes *given the
batch* (:math:`\sqrt{\sum_b \mathrm{se}_{bj}^2} / B`, zero for the exact method), which is how far
the estimate may sit from the exact profile of the same sequences; and ``batch_stderr``, the
spread across sequences (:math:`\mathrm{sd}_b / \sqrt{B}`, zero for :math:`B = 1`).

A second target, ``target="argmax_prob"``, is the scalar probability of the argmax next token,
:math:`p = \mathrm{softmax}(W h_L)_{a}` with :math:`a` the argmax (held fixed, not
differentiated), whose gradient norm :math:`\lVert \partial p / \partial e_j \rVert_2` is the
influence the structural theory's authors measure.  A scalar needs one backward pass per sequence,
so it is always exact (``stderr`` is zero).  Only the last token's logits are computed.

Inputs come from :func:`text_batch`: windows of text that ships with Python itself (docstrings of
standard-library modules), or uniformly random tokens.  Everything is seeded; the same arguments
give the same numbers (on the same machine and thread count: float reductions may round
differently elsewhere).  :func:`profile` wraps it all with the on-disk cache.
"""
from __future__ import annotations

import hashlib
import sys
import warnings
from functools import lru_cache
from importlib import metadata

import numpy as np

from ._validate import positive_int

__all__ = [
    "STDLIB_MODULES",
    "stdlib_corpus",
    "corpus_digest",
    "text_batch",
    "influence_profile",
    "hutchinson",
    "attention_logits",
    "profile",
    "TARGETS",
    "METHODS",
    "SOURCES",
]

TARGETS = ("hidden", "argmax_prob")
METHODS = ("probes", "exact")
SOURCES = ("text", "random")
PROBE_DISTS = ("rademacher", "gaussian")

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
    import sysconfig
    from pathlib import Path

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    pieces: list[str] = []
    for modname in STDLIB_MODULES:
        rel = Path(*modname.split("."))
        for path in (stdlib / rel.with_suffix(".py"), stdlib / rel / "__init__.py"):
            if path.is_file():
                try:
                    pieces.extend(_source_docs(str(path)))
                except (OSError, SyntaxError, UnicodeDecodeError):  # pragma: no cover
                    pass
                break
    text = "\n\n".join(pieces)
    if len(text) < 100_000:  # pragma: no cover - sources stripped from this installation
        raise RuntimeError("the standard library's source files are not installed: "
                           "use source='random'")
    return text


def corpus_digest() -> str:
    """SHA-256 (first 16 hex digits) of :func:`stdlib_corpus`: part of every cache key."""
    return hashlib.sha256(stdlib_corpus().encode("utf-8")).hexdigest()[:16]


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
        Window starts are drawn uniformly from the token stream with
        ``numpy.random.default_rng([seed, 0x7e57])``; the stream is treated as circular if it is
        shorter than ``length``.
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
    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
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
    starts = rng.integers(0, max(n - length, 0) + 1, size=batch)
    idx = (starts[:, None] + np.arange(length)[None, :]) % n
    ids = stream[idx]
    if vocab_size is not None and ids.max() >= vocab_size:
        raise ValueError(f"token id {int(ids.max())} is outside the vocabulary of {vocab_size}")
    return ids


# --------------------------------------------------------------------------------------------
# The measurement


def _probe_generator(seed: int, b: int):
    import torch

    s = int(np.random.SeedSequence([seed, b, 0x9B0E]).generate_state(1, dtype=np.uint64)[0])
    return torch.Generator(device="cpu").manual_seed(s % (2**63))


def _probes(K: int, d: int, gen, dist: str):
    import torch

    if dist == "rademacher":
        return torch.randint(0, 2, (K, d), generator=gen, dtype=torch.float32) * 2.0 - 1.0
    return torch.randn((K, d), generator=gen, dtype=torch.float32)


def _forward_target(model, x, target: str):
    """The differentiated output for one sequence ``x`` of shape (1, L, d)."""
    import torch

    base = model.base_model
    h = base(inputs_embeds=x, use_cache=False).last_hidden_state[0, -1]  # after the final norm
    if target == "hidden":
        return h
    logits = model.get_output_embeddings()(h)
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    p = torch.softmax(logits.float(), dim=-1)
    return p[int(torch.argmax(p))]


def _vjp_rows(out, x, V):
    """Squared norms ``||v^T J_j||^2`` for each row v of V: a (C, L) float64 tensor."""
    import torch

    if V.shape[0] == 1:
        (g,) = torch.autograd.grad(out, x, grad_outputs=V[0], retain_graph=True)
        return g[0].double().pow(2).sum(-1)[None]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # vmap's "no batching rule, falling back" notes
            (g,) = torch.autograd.grad(out, x, grad_outputs=V, retain_graph=True,
                                       is_grads_batched=True)
        return g[:, 0].double().pow(2).sum(-1)
    except RuntimeError:  # an op without a batching rule: one backward per direction
        rows = []
        for v in V:
            (g,) = torch.autograd.grad(out, x, grad_outputs=v, retain_graph=True)
            rows.append(g[0].double().pow(2).sum(-1))
        return torch.stack(rows)


def influence_profile(model, input_ids, target: str = "hidden", method: str = "probes",
                      probes: int = 8, seed: int = 0, chunk: int | None = None,
                      probe_dist: str = "rademacher", progress: bool = False) -> dict:
    r"""Influence profile of ``model`` on a batch of token ids (see the module docstring).

    Parameters
    ----------
    model : transformers ``*ForCausalLM``
        E.g. from :func:`posbias_nb.models.load` (eval mode, float32).
    input_ids : array_like of int, shape (B, L) or (L,)
        Token ids; ``L >= 2``.
    target : {"hidden", "argmax_prob"}
        ``"hidden"``: Frobenius norm of the Jacobian of the last token's final hidden state
        (after the final norm).  ``"argmax_prob"``: L2 norm of the gradient of the probability
        of the argmax next token (always exact).
    method : {"probes", "exact"}
        Hutchinson estimate with ``probes`` random probes, or all ``d`` output directions.
    probes : int
        Number of probes ``K >= 2`` (``method="probes"``).
    seed : int
        Seeds the probes (sequence ``b`` uses ``SeedSequence([seed, b, ...])``).
    chunk : int or None
        Output directions per backward pass (memory grows linearly with it); default 8 for
        probes, 32 for exact.  Changes only float rounding.
    probe_dist : {"rademacher", "gaussian"}
        Probe law; both have identity covariance, Rademacher has the smaller variance.
    progress : bool
        A tqdm bar on stderr.

    Returns
    -------
    dict of numpy arrays
        ``influence`` (L,) mean over the batch; ``stderr`` (L,) the probe error given the batch;
        ``batch_stderr`` (L,) the spread over sequences; ``per_sequence`` and
        ``per_sequence_stderr`` (B, L); ``probe_samples`` (B, K, L), the squared norms
        :math:`\lVert z_k^\top J_j \rVert^2` of each probe (K = 0 for exact results), from
        which :func:`hutchinson` recomputes the estimate for any subset of probes.

    Raises
    ------
    ValueError
        For a bad target, method, probe count, chunk or input shape.
    """
    import torch

    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if probe_dist not in PROBE_DISTS:
        raise ValueError(f"probe_dist must be one of {', '.join(PROBE_DISTS)}, got {probe_dist!r}")
    seed = positive_int("seed", seed, minimum=0)
    if method == "probes" and target == "hidden":
        probes = positive_int("probes", probes, minimum=2)
    ids = torch.as_tensor(np.asarray(input_ids), dtype=torch.long)
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.shape[1] < 2 or ids.shape[0] < 1:
        raise ValueError("input_ids must have shape (batch, L) with L >= 2, "
                         f"got {tuple(ids.shape)}")
    B, L = ids.shape
    vocab = model.get_input_embeddings().num_embeddings
    if int(ids.min()) < 0 or int(ids.max()) >= vocab:
        raise ValueError(f"token ids must lie in 0..{vocab - 1}")
    device = next(model.parameters()).device
    d = model.get_input_embeddings().embedding_dim
    if target == "argmax_prob":
        n_dir, C = 1, 1
    else:
        n_dir = d if method == "exact" else probes
        C = chunk if chunk is not None else (32 if method == "exact" else 8)
        C = min(positive_int("chunk", C), n_dir)
    n_chunks = -(-n_dir // C)

    from tqdm import tqdm  # plain bar on stderr (tqdm.auto warns in kernels without widgets)

    bar = tqdm(total=B * n_chunks, disable=not progress, file=sys.stderr, leave=False,
               desc=f"influence L={L}", unit="vjp" if C == 1 else f"x{C} vjp")
    per_seq = np.zeros((B, L))
    per_se = np.zeros((B, L))
    samples = np.zeros((B, probes if (method == "probes" and target == "hidden") else 0, L))
    emb = model.get_input_embeddings()
    try:
        for b in range(B):
            with torch.no_grad():
                x0 = emb(ids[b:b + 1].to(device))
            x = x0.detach().clone().requires_grad_(True)
            with torch.enable_grad():
                out = _forward_target(model, x, target)
                if target == "argmax_prob":
                    (g,) = torch.autograd.grad(out, x)
                    per_seq[b] = g[0].double().pow(2).sum(-1).sqrt().cpu().numpy()
                    bar.update(1)
                    continue
                if method == "exact":
                    eye = torch.eye(d, device=device, dtype=out.dtype)
                    sq = torch.zeros(L, dtype=torch.float64, device=device)
                    for c0 in range(0, d, C):
                        sq += _vjp_rows(out, x, eye[c0:c0 + C]).sum(0)
                        bar.update(1)
                    per_seq[b] = sq.sqrt().cpu().numpy()
                else:
                    Z = _probes(probes, d, _probe_generator(seed, b), probe_dist).to(device)
                    s = torch.cat([_vjp_rows(out, x, Z[c0:c0 + C]) for c0 in
                                   _ticking(range(0, probes, C), bar)]).cpu().numpy()
                    samples[b] = s
                    per_seq[b], per_se[b] = hutchinson(s)
            del out, x
    finally:
        bar.close()
    infl = per_seq.mean(0)
    se = np.sqrt((per_se**2).sum(0)) / B
    bse = per_seq.std(0, ddof=1) / np.sqrt(B) if B > 1 else np.zeros(L)
    return {"influence": infl, "stderr": se, "batch_stderr": bse,
            "per_sequence": per_seq, "per_sequence_stderr": per_se, "probe_samples": samples}


def hutchinson(samples, axis: int = 0):
    r"""Frobenius-norm estimate and its delta-method standard error from probe samples.

    ``samples`` holds :math:`s_k = \lVert z_k^\top J \rVert^2` along ``axis`` (K >= 2 of them).
    Returns ``(sqrt(mean(s)), std(s, ddof=1) / (2 sqrt(K mean(s))))`` with ``axis`` reduced; the
    error is 0 where the mean is 0.

    Examples
    --------
    >>> est, se = hutchinson([[4.0], [4.0]])
    >>> float(est[0]), float(se[0])
    (2.0, 0.0)
    """
    s = np.asarray(samples, dtype=np.float64)
    K = s.shape[axis]
    if K < 2:
        raise ValueError(f"the standard error needs at least 2 probes, got {K}")
    m = s.mean(axis)
    sd = s.std(axis, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.where(m > 0, sd / (2.0 * np.sqrt(K * m)), 0.0)
    return np.sqrt(m), se


def _ticking(it, bar):
    for v in it:
        yield v
        bar.update(1)


# --------------------------------------------------------------------------------------------
# The high-level, cached measurement


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:  # pragma: no cover
        return "absent"


def profile(model: str, weights: str = "random", length: int = 1024, *, rope: bool = True,
            method: str = "probes", probes: int = 8, batch: int = 1, seed: int = 0,
            target: str = "hidden", source: str = "text", device: str = "cpu",
            chunk: int | None = None, probe_dist: str = "rademacher",
            progress: bool | None = None) -> dict:
    """Influence profile of a zoo model (or local directory), through the on-disk cache.

    Loads the model (:func:`posbias_nb.models.load` with ``seed``, ``rope``, ``device`` and the
    fused ``"sdpa"`` attention, the same function as ``"eager"``), draws ``batch`` windows of
    ``length`` tokens (:func:`text_batch` with ``seed``) and runs :func:`influence_profile` (probes
    seeded with ``seed``).  One ``seed`` thus fixes the weights, the text and the probes.

    The cache key holds every argument that changes the numbers (model fingerprint, weights,
    seed, rope, length, method, probes, batch, target, source, corpus digest, probe law, chunk,
    device type) and the versions of torch and transformers; a hit costs no model load.

    Returns
    -------
    dict of numpy arrays
        As :func:`influence_profile`, plus ``input_ids`` (B, L).

    Raises
    ------
    ValueError
        Unknown model; ``length < 2`` or beyond the model's context; bad probes, batch, method,
        target, source; CUDA requested but absent; pretrained weights not installed;
        ``rope=False`` for a model without RoPE.
    """
    from . import cache, models

    info = models.describe(model)
    length = positive_int("length", length, minimum=2)
    if info["max_length"] is not None and length > info["max_length"]:
        raise ValueError(f"length {length} is beyond the context of {info['name']} "
                         f"({info['max_length']} tokens)")
    batch = positive_int("batch", batch)
    seed = positive_int("seed", seed, minimum=0)
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    if weights not in models.WEIGHTS:
        raise ValueError(f"weights must be 'random' or 'pretrained', got {weights!r}")
    if weights == "pretrained" and not info["pretrained_available"]:
        if info["kind"] == "directory":
            raise ValueError(f"no weight files (*.safetensors, *.bin) in {info['name']}; "
                             "use --weights random")
        raise ValueError(models.missing_weights_message(models.resolve(model)))
    if not rope and not info["has_rope"]:
        raise ValueError(f"{info['name']} has no rotary position embeddings "
                         "(it uses learned or no positions): rope=False does not apply")
    exact = method == "exact" or target == "argmax_prob"
    if not exact:
        probes = positive_int("probes", probes, minimum=2)
    if chunk is None:
        chunk = 1 if target == "argmax_prob" else (32 if method == "exact" else 8)
    chunk = positive_int("chunk", chunk)
    models._check_device(device)
    params = {
        "model": info["name"], "fingerprint": info["fingerprint"], "weights": weights,
        "seed": seed, "rope": bool(rope), "length": length,
        "method": "exact" if exact else "probes", "probes": None if exact else probes,
        "batch": batch, "target": target, "source": source,
        "corpus": corpus_digest() if source == "text" else None,
        "probe_dist": None if exact else probe_dist, "chunk": chunk,
        "device": device.split(":")[0], "attn": "sdpa",
        "torch": _version("torch"), "transformers": _version("transformers"),
    }

    def compute():
        m, tok, minfo = models.load(model, weights=weights, seed=seed, rope=rope, device=device,
                                    attn="sdpa")
        ids = text_batch(tok, length, batch, seed=seed, source=source,
                         vocab_size=m.get_input_embeddings().num_embeddings)
        res = influence_profile(m, ids, target=target, method=method, probes=probes, seed=seed,
                                chunk=chunk, probe_dist=probe_dist,
                                progress=sys.stderr.isatty() if progress is None else progress)
        res["input_ids"] = ids
        return res

    return cache.cached("profile", params, compute)


# --------------------------------------------------------------------------------------------
# Attention logits of the last query, captured inside the attention function

_CAPTURE = "posbias_capture"
_captured: dict = {}


def _capture_attention(module, query, key, value, attention_mask, scaling=None, **kwargs):
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    h, hk = query.shape[1], key.shape[1]
    k = key.repeat_interleave(h // hk, dim=1) if h != hk else key
    s = scaling if scaling is not None else query.shape[-1] ** -0.5
    _captured[module.layer_idx] = (torch.einsum("bhd,bhld->bhl", query[:, :, -1].float(),
                                                k.float()) * s).detach().cpu()
    return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling,
                                  **kwargs)


def attention_logits(model, input_ids) -> np.ndarray:
    r"""Pre-softmax attention scores of the **last query** against every key, in every layer.

    The scores are taken inside the model's attention function, i.e. after the projections,
    after RoPE (if any, and if switched on) and after the :math:`1/\sqrt{d_h}` scaling: exactly
    the logits the softmax sees (the causal mask hides nothing from the last query).  Grouped
    key-value heads are repeated to the query heads.  Works for the models that dispatch through
    transformers' ``AttentionInterface`` (GPT-2, Qwen2, Llama-like); the model's attention
    implementation is restored afterwards.

    Returns
    -------
    numpy.ndarray, shape (B, n_layers, n_heads, L)
    """
    import torch
    from transformers.modeling_utils import AttentionInterface

    ids = torch.as_tensor(np.asarray(input_ids), dtype=torch.long)
    if ids.ndim == 1:
        ids = ids[None]
    if _CAPTURE not in AttentionInterface._global_mapping:
        AttentionInterface.register(_CAPTURE, _capture_attention)
    old = model.config._attn_implementation
    device = next(model.parameters()).device
    _captured.clear()
    try:
        model.set_attn_implementation(_CAPTURE)
        with torch.no_grad():
            model.base_model(input_ids=ids.to(device), use_cache=False)
        if not _captured:
            raise ValueError(f"{model.config.model_type} does not dispatch through the "
                             "AttentionInterface: attention logits cannot be captured")
        out = torch.stack([_captured[i] for i in sorted(_captured)], dim=1)
    finally:
        model.set_attn_implementation(old)
        _captured.clear()
    return out.numpy()
