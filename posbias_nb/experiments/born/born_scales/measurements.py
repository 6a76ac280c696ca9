"""The born-scales study's measurements: each cell's stds and random-init model, its profiles
(cached, namespace ``profile``), their five shape statistics per window, the full-width GPU
entries, and each rung's architecture as behaviour shows it (cached, ``born-scales-arch``)."""
from __future__ import annotations

import functools
import math
import numpy as np
from .... import cache, models
from ....measure import cached, entry
from .. import scale
from .config import DEFINITION, PARTS, _checked

__all__ = ["matched_std", "full_std", "factorial_cells", "cell_std", "spec", "measure", "window_stats", "cell", "gpu_windows", "prediction_cell", "architecture"]


def matched_std(g: float, width: int) -> float:
    r"""The std that gives a logit scale ``g`` at ``width``: :math:`\sqrt{g/d}`."""
    g, width = float(g), int(width)
    if not (math.isfinite(g) and g > 0) or width < 1:
        raise ValueError(f"need g > 0 and width >= 1, got g={g!r}, width={width!r}")
    return math.sqrt(g / width)


def full_std(config: str, width: int, low: float | None = None) -> float:
    r"""The std with which a group has, at ``width``, the scale transformers' std (``low``,
    the design's 0.02) gives it at the published width :math:`D`: :math:`0.02\sqrt{D/d}`."""
    low = float(_checked()["factorial"]["low"] if low is None else low)
    D = models.describe(config)["hidden_size"]
    return low * math.sqrt(D / int(width))


def factorial_cells(config: str) -> list[dict]:
    """The factorial's eight cells of ``config``: ``{"levels": {group: 0|1}, "std": {...}}``,
    in the order (qk, block, embed) = 000, 001, ..., 111."""
    d = _checked()
    w = int(d["ladder"][config][0])
    lo, hi = float(d["factorial"]["low"]), full_std(config, w)
    out = []
    for k in range(8):
        lev = {g: (k >> (2 - i)) & 1 for i, g in enumerate(models.init_scales.GROUPS)}
        out.append(dict(levels=lev, std={g: (hi if v else lo) for g, v in lev.items()}))
    return out


def cell_std(part: str, config: str, **kw) -> tuple[int, dict]:
    """``(width, std)`` of one cell: ``matched`` (``g``, ``rung``), ``factorial`` (``k``, the
    index of :func:`factorial_cells`), ``control`` (``scaled``: bool), ``prediction``."""
    d = _checked()
    if part == "matched":
        w = int(d["ladder"][config][int(kw["rung"])])
        s = matched_std(kw["g"], w)
        return w, {g: s for g in models.init_scales.GROUPS}
    if part == "factorial":
        return int(d["ladder"][config][0]), factorial_cells(config)[int(kw["k"])]["std"]
    if part == "control":
        c = d["control"]
        f = float(c["factor"]) if kw.get("scaled") else 1.0
        return int(c["width"]), {"qk": float(c["base"]) * f}
    if part == "prediction":
        return int(d["ladder"][config][0]), factorial_cells(config)[7]["std"]
    raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")


def spec(config: str, width: int, std: dict) -> models.ModelSpec:
    """The random-init model of one cell (:func:`posbias_nb.models.at_width`, ``std=``)."""
    return models.at_width(config, int(width), "hf", std=dict(std))


def gpu_windows() -> int:
    """The number of token windows of the GPU design at the prediction's length."""
    d = _checked()
    return int(scale.DESIGN["gpu"]["windows"][str(int(d["prediction"]["length"]))])


def measure(config: str, width: int, std: dict, *, long: bool = False) -> np.ndarray:
    """The cell's profiles, ``(windows, L)``: hidden-state influence of the last token at random
    init through the cache (namespace ``profile``).  ``long``: the prediction's length and the
    GPU design's windows (the same token windows: :func:`posbias_nb.experiments.born.scale.gpu_inputs`
    and :func:`posbias_nb.tasks.text.text_batch` draw the same bytes)."""
    d = _checked()
    L, B = (int(d["prediction"]["length"]), gpu_windows()) if long else \
        (int(d["length"]), int(d["windows"]))
    res = cached.profile(spec(config, width, std), "random", length=L, probes=int(d["probes"]),
                         batch=B, seed=int(d["seed"]), progress=False)
    return np.asarray(res["per_sequence"], dtype=np.float64)


def window_stats(P: np.ndarray, lay) -> dict:
    """The five shape statistics (:data:`STATS`) of each window of ``P``: those of
    :func:`posbias_nb.experiments.born.scale.window_stats`, and the scatter: the RMS over the
    reachable positions of log10 of the window's profile over the layout row (both normalised
    there)."""
    P = np.asarray(P, dtype=np.float64)
    out = dict(scale.window_stats(P, lay))
    r = scale.row(lay, P)
    m = r["mask"]
    W = P[:, m] / P[:, m].sum(1, keepdims=True)
    out["scatter"] = np.sqrt(np.mean(np.log10(W / r["row"][m]) ** 2, axis=1))
    return out


def cell_stats(config: str, width: int, std_items: tuple, long: bool) -> dict:
    P = measure(config, width, dict(std_items), long=long)
    lay = scale.layout(config)
    return dict(P=P, layout=lay, **scale.row(lay, P), stats=window_stats(P, lay))


_stats = functools.lru_cache(maxsize=256)(cell_stats)  # the figure and the claims read the same cells


def cell(part: str, config: str, **kw) -> dict:
    """One cell: profiles ``P``, the layout row at the mean's fitted α, and each statistic per
    window (``stats``); memoised (the arrays are not to be written to)."""
    w, std = cell_std(part, config, **kw)
    return _stats(config, w, tuple(sorted(std.items())), part == "prediction")


def prediction_cell(config: str) -> dict | None:
    """The full-width GPU entry of ``config`` at the prediction's length, with the same five
    statistics per window (:func:`window_stats`), or None where none is recorded."""
    L = int(_checked()["prediction"]["length"])
    x = scale.gpu_cell(config, L)
    if x is None:
        return None
    return dict(P=x["P"], layout=x["layout"], **scale.row(x["layout"], x["P"]),
                stats=window_stats(x["P"], x["layout"]))


def architecture(config: str, width: int) -> dict:
    """Whether a rung's logit scale is free of the query/key std (QK-norm) and its embedding's
    multiplier, decided by behaviour (:func:`posbias_nb.models.init_scales.attention_scales` on
    the random-init model), cached (namespace ``born-scales-arch``)."""
    s = models.at_width(config, int(width))
    params = {"model": s.name, "fingerprint": models.describe(s)["fingerprint"], "def": DEFINITION,
              **entry.library_versions()}

    def compute():
        m, _, _ = models.load(s, "random", seed=0)
        return {k: np.asarray(v) for k, v in models.init_scales.attention_scales(m).items()}

    out = cache.cached("born-scales-arch", params, compute)
    return {"qk_norm": bool(out["qk_norm"]), "embed_multiplier": float(out["embed_multiplier"])}
