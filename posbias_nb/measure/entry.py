"""The one entry helper of every cached measurement and experiment.

Each entry point (:func:`posbias_nb.measure.profile`, :func:`~posbias_nb.measure.capture`,
:func:`~posbias_nb.measure.init_logits`, the experiments' runs) does the same three things before
it computes anything, and does them here, once:

* :func:`checked` validates the arguments every run shares (model, weights, length, batch,
  seed) and returns :func:`posbias_nb.models.describe` of the model;
* :func:`run_key` builds the cache key from every argument that changes the numbers: model
  fingerprint, weights, seed, sizes, the corpus digest and window rule, and the versions of
  torch and transformers (:func:`library_versions`), so a library upgrade never serves stale
  results;
* :func:`loaded` keeps the last loaded model in memory, so that several entry points on one
  model (a retrieval run, then its link to the prior) load it once.

Importing this module loads no torch.
"""
from __future__ import annotations

from importlib import metadata

from .. import models
from .._validate import positive_int
from ..tasks.text import WINDOWS, corpus_digest

__all__ = ["library_versions", "checked", "run_key", "loaded", "profile_model", "forget"]


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:  # pragma: no cover
        return "absent"


def library_versions() -> dict:
    """The versions of torch and transformers: part of every cache key and of ``meta``."""
    return {"torch": _version("torch"), "transformers": _version("transformers")}


def checked(model, weights: str, length: int, batch: int = 1, seed: int = 0) -> dict:
    """Validate the arguments every measurement shares; return :func:`models.describe`.

    Raises
    ------
    ValueError
        Unknown model or weights not installed, ``length < 2``, ``batch < 1``, a negative
        seed, or a length beyond the model's context.
    """
    info = models.check_weights(model, weights)
    length = positive_int("length", length, minimum=2)
    positive_int("batch", batch)
    positive_int("seed", seed, minimum=0)
    if info["max_length"] is not None and length > info["max_length"]:
        raise ValueError(f"length {length} is beyond the context of {info['name']} "
                         f"({info['max_length']} tokens)")
    return info


def run_key(info: dict, weights: str, length: int, batch: int | None, seed: int, *,
            text: bool = True, **extra) -> dict:
    """The cache parameters of one run: model fingerprint, weights, sizes, seed, the corpus
    digest and window rule (when the run reads text), library versions and ``extra``.
    ``batch=None``: a run without a batch of windows (its key has no ``batch``)."""
    key = {"model": info["name"], "fingerprint": info["fingerprint"], "weights": weights,
           "seed": int(seed), "length": int(length),
           **({} if batch is None else {"batch": int(batch)}), **extra, **library_versions()}
    if text:
        key.setdefault("corpus", corpus_digest())
        key["windows"] = WINDOWS
    return key


_LOADED: dict = {}


def loaded(model, weights: str = "random", seed: int = 0, **kw):
    """``models.load(model, weights=..., seed=..., **kw)``, memoised for the last arguments.

    One model is kept (a second one replaces it): entry points that run one after another on
    the same model load it once.  Returns ``(model, tokenizer, info)``.  A model these
    measurements do not apply to (not causal, or not attention in every layer,
    :func:`posbias_nb.models.blocks.require_causal_attention`) raises ValueError.
    """
    # models.load's defaults, spelled out: one key per model, whoever asks
    for k, v in (("attn", "sdpa"), ("rope", True), ("device", "cpu"), ("dtype", "float32")):
        kw.setdefault(k, v)
    k = (str(model), weights, int(seed), tuple(sorted(kw.items())))
    if k not in _LOADED:
        _LOADED.clear()
        got = models.load(model, weights=weights, seed=seed, **kw)
        models.require_causal_attention(got[0])  # an encoder or an SSM: refused, one line
        _LOADED[k] = got
    return _LOADED[k]


def profile_model(model, weights: str = "random", seed: int = 0, rope: bool = True,
                  device: str = "cpu", dtype: str = "float32", device_map=None):
    """The model :func:`posbias_nb.measure.profile` measures (fused attention), through the
    memo of :func:`loaded` where it can be kept (no ``device_map``): a chapter that profiles a
    model and then reads its layout, or profiles it at two lengths, loads it once."""
    if device_map is not None:
        got = models.load(model, weights=weights, seed=seed, rope=rope, device=device,
                          attn="sdpa", dtype=dtype, device_map=device_map)
        models.require_causal_attention(got[0])
        return got
    return loaded(model, weights, seed, rope=bool(rope), device=device, attn="sdpa",
                  dtype=dtype)


def forget() -> None:
    """Drop the memoised model (frees its memory)."""
    _LOADED.clear()
