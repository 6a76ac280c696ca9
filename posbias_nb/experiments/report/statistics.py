"""The report's statistics: per-window headline numbers and their intervals (Student *t* over
windows, two-way over twins and windows, ratios on the log scale)."""
from __future__ import annotations

import math

import numpy as np

from ... import metrics, stats
from ..prompt import retrieval as _ret
from .config import ENDS
from .words import RATIO_PARTS, ZERO_REASON, unformed_reason


def as_interval(t) -> dict:
    e, lo, hi = (float(v) for v in t)
    return {"estimate": e, "low": lo, "high": hi}


def as_tuple(iv: dict) -> tuple:
    return iv["estimate"], iv["low"], iv["high"]


def per_window(res) -> np.ndarray:
    W = np.asarray(res["per_sequence"], dtype=np.float64)
    return W / W.sum(1, keepdims=True)


def safe_ratio(n: float, d: float) -> float:
    """``n / d`` of two non-negative influences: 0 where only ``n`` is 0, infinite where only
    ``d`` is, NaN for 0 / 0 (no ratio at all), and never a numpy warning."""
    if d > 0:
        return n / d
    return float("inf") if n > 0 else float("nan")


def window_stats(W: np.ndarray) -> dict:
    """Per window: robust peak-to-valley, valley position / L, first / middle, last / middle
    (each ratio as :func:`safe_ratio` forms it where an influence is exactly 0)."""
    L = W.shape[1]
    mid = metrics.regions(L).middle
    out = {"ptv": [], "valley": [], "primacy": [], "recency": []}
    for p in W:
        try:
            r, j = metrics.robust_peak_to_valley(p, ENDS)
        except ValueError:  # the smoothed profile reaches 0 (beyond a local layer's reach)
            r, j = float("inf"), int(np.argmin(p)) + 1
        m = float(np.median(p[mid]))
        out["ptv"].append(r)
        out["valley"].append(j / L)
        out["primacy"].append(safe_ratio(float(p[0]), m))
        out["recency"].append(safe_ratio(float(p[-1]), m))
    return {k: np.array(v) for k, v in out.items()}

NAN = {"estimate": float("nan"), "low": float("nan"), "high": float("nan")}


def finite_interval(fn, x, k: str | None = None) -> dict:
    x = np.asarray(x, dtype=float)
    why = unformed_reason(k, x) if k in RATIO_PARTS else None
    if why is not None:
        return dict(NAN, reason=why)
    return as_interval(fn(x)) if np.all(np.isfinite(x)) and x.size >= 2 else dict(NAN)


def headline(ws: dict) -> dict:
    return {"ptv": finite_interval(_ret.ratio_interval, ws["ptv"], "ptv"),
            "valley": finite_interval(stats.mean_interval, ws["valley"]),
            "primacy": finite_interval(_ret.ratio_interval, ws["primacy"], "primacy"),
            "recency": finite_interval(_ret.ratio_interval, ws["recency"], "recency")}

RATIOS = ("ptv", "primacy", "recency")


def two_way(values: np.ndarray, ratio: bool, k: str | None = None, why: str | None = None
            ) -> dict:
    """(twins, windows) values: the two-way interval (on the log scale for ratios); no interval,
    with the reason, where a ratio cannot be formed (``why``, or :func:`unformed_reason`)."""
    v = np.asarray(values, dtype=float)
    if ratio:
        why = why or (unformed_reason(k, v) if k in RATIO_PARTS else None)
        if why is not None or not np.all(np.isfinite(v) & (v > 0)):
            return dict(NAN, reason=why or ZERO_REASON)
        e, lo, hi = stats.two_way_mean_interval(np.log(v))
        return as_interval((math.exp(e), math.exp(lo), math.exp(hi)))
    return as_interval(stats.two_way_mean_interval(v))


def twins_headline(stats_by_twin: list) -> dict:
    """The born headline over the twins and windows: each number's interval takes the spread
    across initialisations and across windows (:func:`posbias_nb.stats.two_way_mean_interval`,
    ratios on the log scale)."""
    return {k: two_way(np.stack([t[k] for t in stats_by_twin]), k in RATIOS, k)
            for k in ("ptv", "valley", "primacy", "recency")}


def curve(W: np.ndarray) -> dict:
    iv = [stats.mean_interval(W[:, j]) for j in range(W.shape[1])]
    return {"mean": [v[0] for v in iv], "low": [max(v[1], 0.0) for v in iv],
            "high": [v[2] for v in iv]}


def change(a: dict, bs: list, k: str) -> dict:
    """Trained over (ratios) or minus (the valley) each twin, window by window, with its
    two-way interval; a ratio of ratios only where both ratios can be formed."""
    if k not in RATIOS:
        return two_way(np.stack([a[k] - b[k] for b in bs]), False)
    why = unformed_reason(k, a[k])
    why_b = next((r for r in (unformed_reason(k, b[k]) for b in bs) if r), None)
    if why or why_b:
        return dict(NAN, reason=f"the {'trained' if why else 'born'} {why or why_b}")
    return two_way(np.stack([a[k] / b[k] for b in bs]), True, k)
