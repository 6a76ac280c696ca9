r"""Cached entry points: load a model of the zoo, read text, measure, store on disk.

Each function here checks its arguments once and builds one cache key from every argument that
changes the numbers (model fingerprint, weights, seed, sizes, corpus digest and window rule,
versions of torch and transformers), through the shared helper :mod:`~posbias_nb.measure.entry`, and calls the measurement
(:mod:`~posbias_nb.measure.jacobian`, :mod:`~posbias_nb.measure.hooks`) only on a miss.  A hit
loads no model.

* :func:`profile` — the Jacobian influence profile (chapter :ref:`ch-init`, :eq:`eq-jac-influence`).
* :func:`shared_profile` — the same on the token ids of a packaged model's own tokenizer, for
  both weights, at any output position (chapter :ref:`ch-after`).
* :func:`capture` and :func:`measured_influence` — measured kernels, attention shares and the
  gradient influence on the same sequences (chapter :ref:`ch-prediction`).
* :func:`predict` — a rollout prediction from captured quantities, :eq:`eq-pred-measured`.
"""
from __future__ import annotations

import sys
import time
from importlib import metadata

import numpy as np

from .. import cache, models, rollout
from .._validate import choice, positive_int
from ..tasks.text import SOURCES, corpus_digest, text_batch
from .entry import checked, library_versions, profile_model, run_key
from .hooks import capture_model, n_heads
from .jacobian import METHODS, TARGETS, default_chunk, influence_profile

__all__ = ["profile", "profile_key", "shared_profile", "capture", "measured_influence", "predict",
           "config_kernel", "MODES", "library_versions"]

MODES = ("attention", "residual", "positional", "content")
_CAPTURE_DEF = "capture-v1"  # bump when the definition of A or lambda changes


def profile(model: str, weights: str = "random", length: int = 1024, *, rope: bool = True,
            method: str = "probes", probes: int = 8, batch: int = 1, seed: int = 0,
            target: str = "hidden", source: str = "text", device: str = "cpu",
            chunk: int | None = None, probe_dist: str = "rademacher",
            progress: bool | None = None, dtype: str = "float32", device_map=None,
            init_seed: int | None = None) -> dict:
    """Influence profile of a zoo model (or local directory), through the on-disk cache
    (chapter :ref:`ch-init`, :eq:`eq-jac-influence` and :eq:`eq-hutchinson`).

    Loads the model (:func:`posbias_nb.models.loading.load` with ``seed``, ``rope``, ``device``,
    ``dtype``, ``device_map`` and the fused ``"sdpa"`` attention, the same function as
    ``"eager"``), draws ``batch`` windows of ``length`` tokens
    (:func:`~posbias_nb.tasks.text.text_batch` with ``seed``) and runs
    :func:`~posbias_nb.measure.jacobian.influence_profile` (probes seeded with ``seed``).  One ``seed``
    thus fixes the weights, the text and the probes; ``init_seed`` (random weights only)
    draws another initialisation on the same windows and probes.

    Returns
    -------
    dict of numpy arrays
        As :func:`~posbias_nb.measure.jacobian.influence_profile`, plus ``input_ids`` (B, L).

    Raises
    ------
    ValueError
        Unknown model; ``length < 2`` or beyond the model's context; bad probes, batch, method,
        target, source, dtype; CUDA requested but absent; pretrained weights not installed;
        ``rope=False`` for a model without RoPE.
    """
    params, probes, chunk, init = _profile_params(
        model, weights, length, rope=rope, method=method, probes=probes, batch=batch, seed=seed,
        target=target, source=source, device=device, chunk=chunk, probe_dist=probe_dist,
        dtype=dtype, device_map=device_map, init_seed=init_seed)

    def compute():
        m, tok, _ = profile_model(model, weights, init, rope=rope, device=device, dtype=dtype,
                                  device_map=device_map)  # refused before anything is measured
        ids = text_batch(tok, length, batch, seed=seed, source=source,
                         vocab_size=m.get_input_embeddings().num_embeddings)
        res = influence_profile(m, ids, target=target, method=method, probes=probes, seed=seed,
                                chunk=chunk, probe_dist=probe_dist,
                                progress=sys.stderr.isatty() if progress is None else progress)
        res["input_ids"] = ids
        return res

    return cache.cached("profile", params, compute)


def _profile_params(model, weights, length, *, rope, method, probes, batch, seed, target, source,
                    device, chunk, probe_dist, dtype, device_map, init_seed):
    """:func:`profile`'s argument checks and cache parameters: ``(params, probes, chunk,
    init_seed)``."""
    info = checked(model, weights, length, batch, seed)
    choice("method", method, METHODS)
    choice("target", target, TARGETS)
    choice("source", source, SOURCES)
    choice("dtype", dtype, models.DTYPES)
    if not rope and not info["has_rope"]:
        raise ValueError(f"{info['name']} has no rotary position embeddings "
                         "(it uses learned or no positions): rope=False does not apply")
    exact = method == "exact" or target == "argmax_prob"
    if not exact:
        probes = positive_int("probes", probes, minimum=2)
    if chunk is None:
        chunk = 1 if target == "argmax_prob" else default_chunk(method, device)
    chunk = positive_int("chunk", chunk)
    if device_map is None:
        models.check_device(device)
    params = run_key(info, weights, length, batch, seed, rope=bool(rope),
                  method="exact" if exact else "probes", probes=None if exact else probes,
                  target=target, source=source,
                  corpus=corpus_digest() if source == "text" else None,
                  probe_dist=None if exact else probe_dist, chunk=chunk,
                  device=device.split(":")[0], attn="sdpa")
    if dtype != "float32" or device_map is not None:  # keys of float32 results stay as they were
        params.update(dtype=dtype, device_map=device_map)
    init = _init_seed(params, weights, seed, init_seed)
    return params, probes, chunk, init


def profile_key(model: str, weights: str = "random", length: int = 1024, *, rope: bool = True,
                method: str = "probes", probes: int = 8, batch: int = 1, seed: int = 0,
                target: str = "hidden", source: str = "text", device: str = "cpu",
                chunk: int | None = None, probe_dist: str = "rademacher", dtype: str = "float32",
                device_map=None, init_seed: int | None = None) -> str:
    """The cache key (namespace ``profile``) of :func:`profile` with these arguments, computing
    nothing: how a recorded entry names the CPU twin that ``make test`` re-measures in its
    place (chapter :ref:`ch-scale`)."""
    params = _profile_params(model, weights, length, rope=rope, method=method, probes=probes,
                             batch=batch, seed=seed, target=target, source=source,
                             device=device, chunk=chunk, probe_dist=probe_dist, dtype=dtype,
                             device_map=device_map, init_seed=init_seed)[0]
    return cache.key("profile", params)


def _init_seed(params: dict, weights: str, seed: int, init_seed) -> int:
    """The seed of the random initialisation: ``seed`` unless ``init_seed`` is given (another
    random-init twin read on the same windows and probes; its cache key says so)."""
    if init_seed is None or weights != "random" or int(init_seed) == int(seed):
        return int(seed)
    params["init_seed"] = positive_int("init_seed", init_seed, minimum=0)
    return int(init_seed)


class _AtPosition:
    """A view of a model whose ``base_model`` returns the hidden state at ``position`` as the
    last one (what :func:`~posbias_nb.measure.jacobian.influence_profile` differentiates)."""

    def __init__(self, model, position: int):
        self._m, self._pos = model, position

    def __getattr__(self, k):
        return getattr(self._m, k)

    def base_model(self, **kw):
        from types import SimpleNamespace

        h = self._m.base_model(**kw).last_hidden_state
        return SimpleNamespace(last_hidden_state=h[:, self._pos: self._pos + 1])


def shared_profile(name: str, weights: str, length: int, *, batch: int = 1, probes: int = 4,
                   seed: int = 0, position: int = -1, progress: bool = False,
                   init_seed: int | None = None) -> dict:
    """Influence profile of the hidden state at ``position`` for a packaged zoo model, on text
    tokenized by the model's **own packaged tokenizer** for both ``weights="pretrained"`` and
    ``weights="random"`` (same seed: the same token ids), chapter :ref:`ch-after`.

    ``position=-1`` is the last token, as in :func:`profile`; for an encoder, whose every
    position sees the whole sequence, a middle position is a second, informative output.
    Hutchinson estimate with ``probes`` probes; cached on disk.  Returns the arrays of
    :func:`~posbias_nb.measure.jacobian.influence_profile` plus ``input_ids``.

    Raises
    ------
    ValueError
        Bad weights, length, position, probes; weights or tokenizer package not installed.
    """
    info = checked(name, weights, length, batch, seed)
    probes = positive_int("probes", probes, minimum=2)
    pos = position if position >= 0 else length + position
    if not 0 <= pos < length:
        raise ValueError(f"position {position} outside 0..{length - 1}")
    params = run_key(info, weights, length, batch, seed, probes=probes, position=pos,
                  corpus=corpus_digest(), attn="sdpa")
    init = _init_seed(params, weights, seed, init_seed)

    def compute():
        tok = models.packaged_tokenizer(name)
        if info["family"] == "bert":
            model = models.load_encoder(name, weights, seed=init)[0]
        else:
            model = models.load(name, weights=weights, seed=init, attn="sdpa")[0]
        ids = text_batch(tok, length, batch, seed=seed,
                         vocab_size=model.get_input_embeddings().num_embeddings)
        m = model if pos == length - 1 else _AtPosition(model, pos)
        res = influence_profile(m, ids, probes=probes, seed=seed,
                                progress=progress and sys.stderr.isatty())
        res["input_ids"] = ids
        return res

    return cache.cached("profile-shared", params, compute)


# --------------------------------------------------------------------------------------------
# Kernels, attention shares and the gradient influence on the same sequences


#: The cache namespace of :func:`capture`: "capture-win" since the entries keep ``lam_win``
#: (lambda per layer and window); the old "capture" entries lack it and are never read.
_CAPTURE_NS = "capture-win"


def _capture_key(model, weights, length, batch, seed) -> tuple[dict, dict]:
    info = checked(model, weights, length, batch, seed)
    params = run_key(info, weights, length, batch, seed, text_seed=seed, source="text",
                  corpus=corpus_digest(), definition=_CAPTURE_DEF, attn="eager",
                  falcon_alibi_fix=info["family"] == "falcon" or None)
    params["seed"] = seed if weights == "random" else None
    return params, info


def _compute_many(model: str, weights: str, lengths, batch: int, seed: int,
                  influence: bool) -> dict:
    """Load the model once; compute every missing entry for ``lengths``; store and return them
    (keyed by (namespace, length)), so that a switched-off cache still gets its results."""
    todo = []
    for L in lengths:
        p, _ = _capture_key(model, weights, L, batch, seed)
        need_c = cache.load(_CAPTURE_NS, p) is None
        need_i = influence and cache.load("capture-influence", p) is None
        if need_c or need_i:
            todo.append((L, p, need_c, need_i))
    out: dict = {}
    if not todo:
        return out
    m, tok, _ = models.load(model, weights=weights, seed=seed, attn="eager")
    models.require_causal_attention(m)  # before anything is measured
    vocab = m.get_input_embeddings().num_embeddings
    for L, p, need_c, need_i in todo:
        ids = text_batch(tok, L, batch, seed=seed, source="text", vocab_size=vocab)
        if need_c:
            t0 = time.perf_counter()
            res = capture_model(m, ids)
            res["input_ids"] = ids
            res["n_heads"] = np.array(n_heads(m))
            cache.store(_CAPTURE_NS, p, res, seconds=time.perf_counter() - t0)
            out[("capture", L)] = res
        if need_i:
            t0 = time.perf_counter()
            r = influence_profile(m, ids, target="argmax_prob", method="exact", seed=seed,
                                  progress=sys.stderr.isatty())
            res = {k: r[k] for k in ("influence", "batch_stderr", "per_sequence")}
            res["input_ids"] = ids
            cache.store("capture-influence", p, res, seconds=time.perf_counter() - t0)
            out[("capture-influence", L)] = res
    return out


def capture(model: str, weights: str = "random", length: int = 128, batch: int = 2,
            seed: int = 0) -> dict:
    r"""Measured kernels and attention shares of a zoo model, through the on-disk cache
    (chapter :ref:`ch-prediction`, :eq:`eq-pred-measured`).

    Loads ``model`` (:func:`posbias_nb.models.loading.load`, eager attention, weights seeded with
    ``seed``), draws ``batch`` text windows of ``length`` tokens
    (:func:`~posbias_nb.tasks.text.text_batch` with ``seed``: the windows :func:`profile` reads for
    the same seed) and runs :func:`~posbias_nb.measure.hooks.capture_model`.

    Returns
    -------
    dict
        As :func:`~posbias_nb.measure.hooks.capture_model` plus ``input_ids`` (B, L), ``n_heads``
        (0-d), and the scalars ``model``, ``weights``, ``family``, ``length``.

    Raises
    ------
    ValueError
        Unknown model, bad sizes, a length beyond the model's context, pretrained weights not
        installed, or a model that cannot be hooked.
    """
    p, info = _capture_key(model, weights, length, batch, seed)
    hit = cache.load(_CAPTURE_NS, p)
    if hit is None:
        hit = _compute_many(model, weights, [length], batch, seed, influence=False)[
            ("capture", length)]
    out = dict(hit)
    out.update(model=info["name"], family=info["family"], weights=weights, length=int(length))
    return out


def measured_influence(model: str, weights: str = "random", length: int = 128, batch: int = 2,
                       seed: int = 0, lengths=None) -> dict:
    r"""The gradient-measured influence on the **same** model and sequences as :func:`capture`.

    :func:`~posbias_nb.measure.jacobian.influence_profile` with ``target="argmax_prob"``: the L2 norm
    per position of the gradient of the probability of the argmax next token w.r.t. the input
    embeddings, averaged over the ``batch`` sequences (the authors' measured influence, chapter
    :ref:`ch-prediction`).  One
    model load fills the cache of :func:`capture` too; with ``lengths`` it fills every listed
    length at once (and returns the entry for ``length``).

    Returns
    -------
    dict of numpy arrays
        ``influence`` (L,), ``batch_stderr`` (L,), ``per_sequence`` (B, L), ``input_ids``.
    """
    p, _ = _capture_key(model, weights, length, batch, seed)
    hit = cache.load("capture-influence", p)
    if hit is None:
        ls = sorted({int(length), *(int(x) for x in (lengths or []))})
        hit = _compute_many(model, weights, ls, batch, seed, influence=True)[
            ("capture-influence", length)]
    return hit


# --------------------------------------------------------------------------------------------
# Predictions


def config_kernel(family: str, L: int, heads: int, config=None) -> np.ndarray:
    r"""The content-free kernel of an architecture, read from its transformers ``config``:
    :func:`posbias_nb.rollout.positional_kernel` with the ALiBi switch, head size and MPT's
    ``alibi_bias_max`` taken from the config (needed for Falcon and MPT only).  Chapter
    :ref:`ch-prediction`, :eq:`eq-pred-measured`.

    Raises
    ------
    ValueError
        Falcon without a config, or the errors of :func:`posbias_nb.rollout.positional_kernel`.
    """
    kw: dict = {}
    if family == "falcon":
        if config is None:
            raise ValueError("the Falcon kernel needs the config (head size, alibi switch)")
        kw = dict(alibi_on=bool(getattr(config, "alibi", False)),
                  head_dim=config.hidden_size // config.num_attention_heads)
    elif family == "mpt" and config is not None:
        ac = config.attn_config
        get = ac.get if isinstance(ac, dict) else (lambda k, d=None: getattr(ac, k, d))
        kw = dict(alibi_on=bool(get("alibi", True)), alibi_bias_max=get("alibi_bias_max", 8) or 8)
    return rollout.positional_kernel(family, L, heads, **kw)


def predict(captured: dict, mode: str = "residual") -> np.ndarray:
    r"""A predicted influence profile (probability vector, length L) from captured quantities,
    :eq:`eq-pred-measured` (chapter :ref:`ch-prediction`).

    All four are :func:`posbias_nb.rollout.rollout` rows, the last row of
    :math:`R_T \cdots R_1` with :math:`R_t = (1-\lambda_t) I + \lambda_t K_t`:

    * ``"attention"`` — :math:`\lambda_t = 1`, :math:`K_t = A_t` measured;
    * ``"residual"`` — measured :math:`\lambda_t` and :math:`A_t`;
    * ``"positional"`` — measured :math:`\lambda_t`, the architecture's content-free kernel
      (:func:`config_kernel`; the authors' ``no_content`` setting);
    * ``"content"`` — measured :math:`\lambda_t`, :math:`K_t = (1-d_t) K + d_t I` with
      :math:`d_t` = :func:`posbias_nb.rollout.matched_diag` matching each layer's measured mean
      self-attention.

    Raises
    ------
    ValueError
        For an unknown mode or a dict without ``A`` and ``lam`` (and, for the last two modes,
        the architecture: ``model`` or ``family``, and ``n_heads``).
    """
    choice("mode", mode, MODES)
    try:
        A = np.asarray(captured["A"], dtype=np.float64)
        lam = np.asarray(captured["lam"], dtype=np.float64)
    except (KeyError, TypeError):
        raise ValueError("captured must be a dict with 'A' (T, L, L) and 'lam' (T,)") from None
    if mode == "attention":
        return rollout.rollout(A, np.ones(lam.size))
    if mode == "residual":
        return rollout.rollout(A, lam)
    L = A.shape[1]
    if "n_heads" not in captured or ("model" not in captured and "family" not in captured):
        raise ValueError(f"mode {mode!r} needs the architecture: pass the dict of capture() "
                         "(with 'model' or 'family', and 'n_heads')")
    name = str(captured.get("model"))
    cfg = models.build_config(name) if name in models.ZOO else None
    family = str(captured.get("family", getattr(cfg, "model_type", "")))
    K = config_kernel(family, L, int(captured["n_heads"]), cfg)
    lay = _captured_layout(captured, name, lam.size)
    Ks = rollout.layout_kernels(K, lay) if lay is not None else np.stack([K] * lam.size)
    if mode == "positional":
        return rollout.rollout(Ks, lam)
    diag = np.diagonal(A, axis1=1, axis2=2).mean(axis=1)
    # each layer's own (masked, row-stochastic) kernel is the base its self-weight is matched on
    kernels = np.stack([rollout.content(L, rollout.matched_diag(Kt, float(m)), base=Kt)
                        for Kt, m in zip(Ks, diag)])
    return rollout.rollout(kernels, lam)


def _captured_layout(captured, name, depth):
    """The layout behind a capture: ``captured["layout"]`` (a layout string), else the config's
    (:func:`posbias_nb.models.config_layout`) of a zoo name or directory; None when neither
    gives one of ``depth`` layers (the kernel is then the same in every layer)."""
    from .. import theory

    spec = captured.get("layout")
    try:
        if spec is not None:
            lay = theory.parse_layout(str(spec))
        elif name in models.ZOO or models.zoo._is_hf_dir(name):  # never a hub lookup
            lay = models.config_layout(models.build_config(name))
        else:
            return None
    except (ValueError, OSError):
        return None
    return lay if lay.depth == depth else None
