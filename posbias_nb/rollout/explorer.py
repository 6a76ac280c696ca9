r"""The reference side of the book's interactive explorer (page *Explore the theory*).

The page computes the born row in the reader's browser, in JavaScript
(``_assets/explorer.js``), by the algorithm of :func:`posbias_nb.rollout.log_layout_rollout`:
one :math:`O(L)` pass a layer.  This module says what a setting of the page means, in one
place, and gives the Python rows the browser test compares the page with:

* :func:`layout_of` and :func:`lambdas_of`: the layout and the :math:`\lambda` schedule a
  setting describes (the same rules as the page);
* :func:`log_row`: the log of the row, :func:`summary`: the numbers the page prints beside it;
* :data:`GRID`: the settings of the fixture (every control, L up to 100,000, H up to 128),
  :func:`fixture` the fixture itself, written by the book's build (``make build-book``);
* :func:`schedules_js`: the published :math:`\lambda` schedules as the JavaScript file the page
  reads (``_assets/explorer-schedules.js``, checked against this function by a test).

A setting is a dict of the page's URL parameters: ``L``, ``H``, ``alpha``, ``layout``
(``full``, ``sliding``, ``hybrid``, ``chunked``), ``w`` (window), ``k`` (local layers per
global one, hybrid), ``c`` (chunk), ``s`` (a sink logit in every layer; absent: no sink),
``schedule`` (``constant``: :math:`\lambda_t = \alpha`; or a published model, whose schedule
fixes ``H``), ``m`` (an ALiBi slope) and ``x`` (the position axis, ``linear`` or ``log``: drawing
only).  Chapter :ref:`ch-layouts`.
"""
from __future__ import annotations

import json
import math

import numpy as np

from .. import theory
from .core import log_layout_rollout
from .published import published_schedules

__all__ = ["DEFAULTS", "LAYOUTS", "GRID", "normalize_settings", "layout_of", "lambdas_of",
           "log_row", "summary", "fixture", "schedules_js", "query", "link"]

#: The page's settings when the URL gives none.
DEFAULTS = {"L": 1000, "H": 12, "alpha": 0.5, "layout": "full", "w": 64, "k": 5, "c": 256,
            "s": None, "schedule": "constant", "m": 0.0, "x": "linear"}
LAYOUTS = ("full", "sliding", "hybrid", "chunked")
_LIMITS = {"L": (16, 100_000), "H": (1, 128), "w": (1, 100_000), "k": (1, 127),
           "c": (1, 100_000)}


def normalize_settings(settings: dict) -> dict:
    """The full setting: defaults filled in, numbers typed and checked (ValueError names the
    offending value); a published schedule sets ``H`` to its length."""
    s = dict(DEFAULTS)
    s.update({k: v for k, v in settings.items() if v is not None})
    out = {}
    for k, (lo, hi) in _LIMITS.items():
        v = int(s[k])
        if not lo <= v <= hi:
            raise ValueError(f"{k} must lie in [{lo}, {hi}], got {s[k]!r}")
        out[k] = v
    a = float(s["alpha"])
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {s['alpha']!r}")
    m = float(s["m"])
    if not (math.isfinite(m) and 0.0 <= m <= 1.0):
        raise ValueError(f"m must lie in [0, 1], got {s['m']!r}")
    if s["layout"] not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {s['layout']!r}")
    sink = None if s.get("s") in (None, "", "none") else float(s["s"])
    if sink is not None and not (math.isfinite(sink) and -20 <= sink <= 20):
        raise ValueError(f"s must lie in [-20, 20], got {s['s']!r}")
    sched = str(s["schedule"])
    pub = published_schedules()
    if sched != "constant" and sched not in pub:
        raise ValueError(f"schedule must be 'constant' or one of {', '.join(pub)}, got {sched!r}")
    if sched != "constant":
        out["H"] = int(pub[sched][1].size)
    if s["x"] not in ("linear", "log"):
        raise ValueError(f"x must be 'linear' or 'log', got {s['x']!r}")
    out.update(alpha=a, m=m, layout=s["layout"], s=sink, schedule=sched, x=s["x"])
    return out


def layout_of(settings: dict) -> theory.Layout:
    """The layout a setting describes: ``H`` layers of one kind, or for ``hybrid`` the pattern of
    ``k`` sliding layers then one full layer, repeated to ``H`` (Gemma's rule); a sink of logit
    ``s`` in every layer when ``s`` is set."""
    s = normalize_settings(settings)
    sink = "" if s["s"] is None else f"@{s['s']!r}"
    kind = {"full": f"full{sink}", "sliding": f"sliding:{s['w']}{sink}",
            "chunked": f"chunked:{s['c']}{sink}",
            "hybrid": f"{s['k']}*sliding:{s['w']}{sink},full{sink}"}[s["layout"]]
    return theory.parse_layout(kind, depth=s["H"])


def lambdas_of(settings: dict) -> np.ndarray:
    """The schedule: ``alpha`` in every layer (``constant``), or a published model's measured
    :math:`\\lambda_t` (:func:`posbias_nb.rollout.published_schedules`)."""
    s = normalize_settings(settings)
    if s["schedule"] == "constant":
        return np.full(s["H"], s["alpha"])
    return published_schedules()[s["schedule"]][1]


def log_row(settings: dict) -> np.ndarray:
    """The log of the row the page draws (:func:`posbias_nb.rollout.log_layout_rollout`)."""
    s = normalize_settings(settings)
    return log_layout_rollout(layout_of(s), s["L"], list(lambdas_of(s)), s["m"])


def _lse(x):
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x)
    return float(m) if not np.isfinite(m) else float(m + np.log(np.sum(np.exp(x - m))))


def summary(settings: dict, lrow=None) -> dict:
    """The numbers the page prints, from the log row (no underflow at any depth):
    ``spike`` (log of the last entry), ``spike_law`` (log of :math:`\\prod_t (1-\\lambda_t)`,
    the recency mass), ``log10_ptv`` and ``valley`` (:func:`posbias_nb.metrics.robust_peak_to_valley`,
    ends 0.02, its valley's 1-indexed centre), ``middle_share``
    (:func:`posbias_nb.metrics.middle_share`), ``log10_first_arm`` (the first entry over the
    median of the middle, as the report's primacy), all of the normalized row."""
    from .. import metrics

    s = normalize_settings(settings)
    v = log_row(s) if lrow is None else np.asarray(lrow, dtype=np.float64)
    v = v - _lse(v)
    L = v.size
    k = max(1, int(round(0.02 * L)))
    peak = np.logaddexp(_lse(v[:k]), _lse(v[-k:])) - np.log(2 * k)
    run = np.array([_lse(v[i:i + k]) for i in range(L - k + 1)]) - np.log(k) if L <= 4096 \
        else _log_running(v, k) - np.log(k)
    j = int(np.argmin(run))
    mid = metrics.regions(L).middle
    vm = np.sort(v[mid])
    n = vm.size
    med = vm[n // 2] if n % 2 else np.logaddexp(vm[n // 2 - 1], vm[n // 2]) - np.log(2)
    lam = lambdas_of(s)
    with np.errstate(divide="ignore"):
        law = float(np.sum(np.log1p(-lam)))
    ln10 = np.log(10.0)
    with np.errstate(invalid="ignore"):
        out = {"spike": float(v[-1]), "spike_law": law,
               "log10_ptv": float((peak - run[j]) / ln10), "valley": j + (k - 1) // 2 + 1,
               "middle_share": float(np.exp(_lse(v[mid]))),
               "log10_first_arm": float((v[0] - med) / ln10)}
    # a quantity of zero influence (beyond a sliding stack's reach) is not defined: None
    return {k2: (x if isinstance(x, int) or np.isfinite(x) else None) for k2, x in out.items()}


def _log_running(v, k):
    """log of the sums of exp(v) over every k consecutive entries, by block-wise log-sums."""
    from ..theory.layouts import _log_cumsum_blocks

    L = v.size
    suffix = _log_cumsum_blocks(v, k, reverse=True)
    prefix = _log_cumsum_blocks(np.concatenate([v, np.full(k, -np.inf)]), k, reverse=False)
    j = np.arange(L - k + 1)
    nxt = np.where(j % k == 0, -np.inf, prefix[j + k - 1])
    return np.logaddexp(suffix[:L - k + 1], nxt)


def query(settings: dict) -> str:
    """The page's URL query for a setting (only what differs from :data:`DEFAULTS`, in a fixed
    order), e.g. ``L=4096&H=18&layout=hybrid``."""
    out = []
    for k in DEFAULTS:
        v = settings.get(k)
        if v is None or v == DEFAULTS[k]:
            continue
        out.append(f"{k}={v}")
    return "&".join(out)


def _grid() -> list:
    g = []
    for L in (16, 100, 1000, 4096):
        for H in (1, 4, 12):
            for a in (0.3, 1.0):
                g.append(dict(L=L, H=H, alpha=a))
    g += [dict(L=100_000, H=128, alpha=0.5), dict(L=100_000, H=128, alpha=1.0),
          dict(L=100_000, H=12, alpha=0.5, layout="hybrid", w=512, k=5),
          dict(L=20_000, H=128, alpha=0.9, layout="sliding", w=32),
          dict(L=2000, H=128, alpha=0.0), dict(L=500, H=6, alpha=0.5, layout="sliding", w=1)]
    for lay in ("sliding", "hybrid", "chunked"):
        for a in (0.5, 1.0):
            g.append(dict(L=1000, H=18, alpha=a, layout=lay, w=64, k=5, c=128))
    g += [dict(L=1000, H=8, alpha=0.5, layout="hybrid", w=16, k=1),
          dict(L=3000, H=24, alpha=0.7, layout="chunked", c=1000),
          dict(L=1000, H=12, alpha=0.5, s=0.0), dict(L=1000, H=12, alpha=0.5, s=4.0),
          dict(L=4096, H=18, alpha=0.5, layout="hybrid", w=64, k=5, s=2.0),
          dict(L=1000, H=12, alpha=1.0, layout="sliding", w=100, s=-3.0)]
    for m in (0.01, 0.1, 1.0):
        g.append(dict(L=1000, H=12, alpha=0.5, m=m))
    g += [dict(L=1000, H=12, alpha=0.5, layout="sliding", w=50, m=0.05),
          dict(L=1000, H=12, alpha=0.5, layout="hybrid", w=50, k=3, m=0.2, s=1.0)]
    for name in published_schedules():
        g.append(dict(L=512, schedule=name))
    g += [dict(L=2048, schedule="bloom", m=0.05), dict(L=100_000, schedule="mpt-30b")]
    return g


#: The fixture's settings: every control, L from 16 to 100,000, H from 1 to 128.
GRID = tuple(_grid())


def fixture() -> dict:
    """``{"settings": [...], "query": [...], "log_rows": [[...], ...], "summary": [...]}``
    for :data:`GRID` (``-inf`` written as None)."""
    out = {"settings": [], "query": [], "log_rows": [], "summary": []}
    for g in GRID:
        s = normalize_settings(g)
        v = log_row(s)
        out["settings"].append(s)
        out["query"].append(query(g))
        out["log_rows"].append([None if not np.isfinite(x) else float(x) for x in v])
        out["summary"].append(summary(s, v))
    return out


def schedules_js() -> str:
    """The JavaScript file that gives the page the published schedules (``_assets/
    explorer-schedules.js``): one assignment to ``window.POSBIAS_SCHEDULES``."""
    data = {k: [float(x) for x in lam] for k, (_, lam) in published_schedules().items()}
    return ("// Generated by posbias_nb.rollout.explorer.schedules_js() from the packaged\n"
            "// ml-uhh rollout configurations (Herasimchyk et al., 2026): do not edit.\n"
            f"window.POSBIAS_SCHEDULES = {json.dumps(data)};\n")


def main(argv=None) -> int:
    """``python -m posbias_nb.rollout.explorer FIXTURE.json``: write the fixture."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m posbias_nb.rollout.explorer FIXTURE.json", file=sys.stderr)
        return 2
    with open(args[0], "w") as f:
        json.dump(fixture(), f)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())


def link(text: str = "Explore this setting in your browser", **settings):
    """A link from a chapter's figure to the explorer page at the figure's own settings
    (``link(L=4096, H=8, alpha=1.0)``), as HTML for the chapter's output; the settings are
    checked (:func:`normalize_settings`)."""
    import html

    from IPython.display import HTML

    normalize_settings(settings)
    q = query(settings)
    href = "explore.html" + (f"?{q}" if q else "")
    return HTML(f'<p class="posbias-explore-link"><a href="{html.escape(href)}">'
                f"{html.escape(text)}</a> <code>{html.escape(q or 'defaults')}</code></p>")
