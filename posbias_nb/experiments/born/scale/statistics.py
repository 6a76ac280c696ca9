"""Born at scale, its statistics: the layout row at the fitted alpha, the four shape statistics
per window, the valley, each rung's intervals, the family decided with Holm's correction, and
the GPU entries' summary."""
from __future__ import annotations

import functools
import numpy as np
from .... import metrics, stats, theory
from .config import DESIGN, STATS, _checked
from .measurements import ladder, layout, measure

__all__ = ["row", "window_stats", "cell", "widths_table", "decisions", "valley", "gpu_summary", "BINS"]


def row(lay: theory.Layout, P: np.ndarray) -> dict:
    r"""The layout's row at the :math:`\alpha` fitted on the mean of ``P`` (reachable
    positions), both normalised there."""
    P = np.asarray(P, dtype=np.float64)
    L = P.shape[1]
    mask = theory.log_layout_influence(lay, L, 0.5) > -np.inf
    p = P.mean(0)
    a = metrics.fit_layout_alpha(p, lay, mask)
    t = theory.layout_influence(lay, L, a)
    return dict(mask=mask, p=p / p[mask].sum(), alpha=a, row=t / t[mask].sum(), L=L)


def window_stats(P: np.ndarray, lay: theory.Layout) -> dict:
    """The four shape statistics (:data:`STATS`) of each window's profile in ``P``: Spearman
    with the layout row at the mean profile's :math:`\\alpha`, the window's own fitted
    :math:`\\alpha`, and log10 of its first-to-middle and last-to-middle ratios."""
    P = np.asarray(P, dtype=np.float64)
    r = row(lay, P)
    m = r["mask"]
    reg = metrics.regions(r["L"])
    mid = P[:, reg.middle].mean(1)
    return dict(
        spearman=np.array([metrics.spearman(w[m], r["row"][m]) for w in P]),
        alpha=np.array([metrics.fit_layout_alpha(w, lay, m) for w in P]),
        first_middle=np.log10(P[:, 0] / mid),
        last_middle=np.log10(P[:, -1] / mid))


def valley(P: np.ndarray) -> np.ndarray:
    """Per window, where the profile is lowest before the last token, as a fraction of the
    length (position j = 1..L-1 over L)."""
    P = np.asarray(P, dtype=np.float64)
    return (np.argmin(P[:, :-1], axis=1) + 1) / P.shape[1]


@functools.lru_cache(maxsize=64)
def cell(config: str, width: int, init: str) -> dict:
    """One rung: profiles, the fitted row, each statistic per window with its 95% t interval
    over the windows, and the valley's position.  Memoised (the table and the figure read the
    same rungs; the arrays are not to be written to)."""
    P = measure(config, width, init)
    lay = layout(config)
    out = dict(P=P, layout=lay, **row(lay, P))
    ws = window_stats(P, lay)
    for k in STATS:
        out[k] = ws[k]
        out[f"{k}_ci"] = stats.mean_interval(ws[k])
    out["valley"] = valley(P)
    out["valley_ci"] = stats.mean_interval(out["valley"])
    return out


def widths_table(init: str) -> list[dict]:
    """One row per (configuration, width) of ``init``: each statistic's 95% interval."""
    rows = []
    for c in DESIGN["ladder"]:
        for w in ladder(c):
            x = cell(c, w, init)
            rows.append(dict(config=c, width=w, init=init, alpha_mean=x["alpha"],
                             **{f"{k}_ci": x[f"{k}_ci"] for k in STATS},
                             valley_ci=x["valley_ci"]))
    return rows


def decisions(init: str) -> dict:
    """The pre-declared family of ``init`` (module docstring), decided with Holm's correction:
    ``{"<config>:<stat>": holm_family's result}``."""
    d = _checked()
    if init not in d["inits"]:
        raise ValueError(f"init must be one of {', '.join(d['inits'])}, got {init!r}")
    claims = {}
    for c in d["ladder"]:
        lay = layout(c)
        w = ladder(c)
        lo = window_stats(measure(c, w[0], init), lay)
        hi = window_stats(measure(c, w[-1], init), lay)
        for k in STATS:
            m = float(d["margins"][k])
            claims[f"{c}:{k}"] = dict(x=hi[k] - lo[k], direction="within", band=(-m, m))
    return stats.holm_family(claims, alpha=float(d["family_alpha"]))


#: Blocks of positions of :func:`gpu_summary`'s binned Spearman.
BINS = 64


def gpu_summary(x: dict) -> dict:
    """A measured GPU cell in numbers, each per window (two windows: no interval is printed,
    both values are): Spearman with the layout row at the fitted :math:`\\alpha`, the same over
    :data:`BINS` blocks of positions (each block's mean, the last token left out: the trend
    without the position-to-position spread of the content), the valley, log10 of first/middle
    and last/middle; and the median relative probe error (how much of that spread the two
    probes add)."""
    m = x["mask"]
    P, r = x["P"], x["row"]
    n = (P.shape[1] - 1) // BINS * BINS
    blocks = P[:, :n].reshape(P.shape[0], BINS, -1).mean(2)
    rb = r[:n].reshape(BINS, -1).mean(1)
    e = x["entry"]
    return dict(alpha=x["alpha"],
                spearman=np.array([metrics.spearman(w[m], r[m]) for w in P]),
                binned=np.array([metrics.spearman(w, rb) for w in blocks]),
                valley=x["valley"], first_middle=x["first_middle"],
                last_middle=x["last_middle"],
                probe_error=float(np.median(np.asarray(e["probe_stderr"]) / P)),
                seconds=float(e["profile_seconds"]), peak_gb=float(e["peak_bytes"]) / 1e9,
                device=str(e["device_name"]), torch=str(e["torch"]), cuda=str(e["cuda"]),
                graph_budget_gib=float(e["graph_budget"]) / 2**30)
