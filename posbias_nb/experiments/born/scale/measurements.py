"""Born at scale, its CPU measurements: each configuration's width ladder and random-init models,
its layout decided by behaviour (cached, namespace ``scale-layout``), and each rung's profiles
(cached, namespace ``profile``)."""
from __future__ import annotations

import numpy as np
from .... import cache, models, theory
from ....measure import cached, entry
from .config import DEFINITION, DESIGN, _checked

__all__ = ["ladder", "spec", "layout", "measure", "twin_key", "unverified"]


def ladder(config: str) -> list[int]:
    """The design's widths of ``config``, narrowest first."""
    d = _checked()["ladder"]
    if config not in d:
        raise ValueError(f"unknown configuration {config!r}: use one of {', '.join(d)}")
    return [int(w) for w in d[config]]


def spec(config: str, width: int, init: str) -> models.ModelSpec:
    """The random-init model of one rung (:func:`posbias_nb.models.at_width`)."""
    if init not in DESIGN["inits"]:
        raise ValueError(f"init must be one of {', '.join(DESIGN['inits'])}, got {init!r}")
    return models.at_width(config, int(width), init)


def layout(config: str) -> theory.Layout:
    """The configuration's layout, decided by behaviour on its narrowest rung
    (:func:`posbias_nb.models.model_layout` at the design's ``check_length``), cached; the
    layers whose window the check cannot see at that length are as the config declares them
    (:func:`unverified`)."""
    s = spec(config, ladder(config)[0], "hf")
    info = models.describe(s)
    L = int(DESIGN["check_length"])
    params = {"model": s.name, "fingerprint": info["fingerprint"], "length": L, "def": DEFINITION,
              **entry.library_versions()}

    def compute():
        m, _, _ = models.load(s, weights="random", seed=int(DESIGN["seed"]), attn="sdpa")
        found = models.model_layout(m, length=L)
        if any(x.sink is not None for x in found.layers):
            raise RuntimeError(f"{config}: a sink was found, which the published config has not")
        return {"layout": np.asarray(str(found))}

    return theory.parse_layout(str(cache.cached("scale-layout", params, compute)["layout"]))


def unverified(config: str) -> list[int]:
    """The layers of ``config`` whose window the layout check cannot see (window >= its
    length): they are as the config declares them."""
    return models.attention_layout.unverified(layout(config), int(DESIGN["check_length"]))


def measure(config: str, width: int, init: str) -> np.ndarray:
    """The rung's profiles, ``(windows, L)``: hidden-state influence of the last token at random
    init (seed, windows and probes of the design), through the cache (namespace ``profile``)."""
    d = _checked()
    res = cached.profile(spec(config, width, init), "random", length=int(d["length"]),
                         probes=int(d["probes"]), batch=int(d["windows"]), seed=int(d["seed"]),
                         progress=False)
    return np.asarray(res["per_sequence"], dtype=np.float64)


def twin_key(config: str) -> str:
    """The ``profile`` cache key of ``config``'s narrowest rung under transformers' initialiser:
    the CPU twin that ``make test`` re-measures in place of the configuration's GPU entries."""
    d = _checked()
    return cached.profile_key(spec(config, ladder(config)[0], "hf"), "random",
                              length=int(d["length"]), probes=int(d["probes"]),
                              batch=int(d["windows"]), seed=int(d["seed"]))
