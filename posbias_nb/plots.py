"""The figure style the chapters share: one look, labelled axes, log scales where values span
decades.  :func:`force_figure` draws the four forces of chapter :ref:`ch-rollout`."""
from __future__ import annotations

import matplotlib as mpl
import numpy as np

__all__ = ["use_style", "profile_axes", "COLORS", "figure", "positions", "u_shape_figure",
           "force_figure", "VERDICT_COLORS", "verdict_overview"]

COLORS = ["#1b4f72", "#c0392b", "#27ae60", "#8e44ad", "#d68910", "#5d6d7e", "#17a589", "#a04000"]

_STYLE = {
    "figure.figsize": (7.0, 3.6),
    "figure.dpi": 110,
    "savefig.dpi": 130,
    "savefig.bbox": "tight",
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": mpl.cycler(color=COLORS),
    "font.size": 10,
    "axes.titlesize": 10,
    "legend.fontsize": 8.5,
    "legend.frameon": False,
    "lines.linewidth": 1.6,
    "figure.constrained_layout.use": True,
}


def use_style() -> None:
    """Apply the book's matplotlib style (call once at the top of a chapter)."""
    mpl.rcParams.update(_STYLE)


def figure(ncols: int = 1, nrows: int = 1, width: float = 7.0, height: float = 3.4, **kw):
    """A figure sized for the page width; returns ``(fig, axes)``."""
    import matplotlib.pyplot as plt

    use_style()
    return plt.subplots(nrows, ncols, figsize=(width, height), **kw)


def profile_axes(ax, L: int | None = None, logy: bool = True, relative: bool = False,
                 ylabel: str = "influence", logx: bool = False):
    """Label an axis for an influence profile: position on x, influence (log) on y; ``logx``
    puts the positions on a log scale too (long contexts, where the first tokens would
    otherwise be squeezed against the axis)."""
    ax.set_xlabel("relative position j / L" if relative else "input position j")
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    if L is not None and not relative:
        ax.set_xlim(*((0.8, 1.25 * L) if logx else (0, L + 1)))
    return ax


def positions(L: int) -> np.ndarray:
    """1-indexed positions 1..L."""
    return np.arange(1, L + 1)


def u_shape_figure(L: int = 512, depth: int = 8, alphas=(1.0, 0.7, 0.5)):
    """The book's opening figure: the last row of ((1-a) I + a M)^depth for a few mixings a.

    Used by the introduction chapter and, through ``make readme-figure``, by the README.
    """
    from . import theory

    fig, ax = figure(height=3.0)
    for a in alphas:
        ax.plot(positions(L), theory.influence(L, depth, alpha=a), label=rf"$\alpha$ = {a}")
    profile_axes(ax, L)
    ax.set_title(f"Influence of each input on the last output: {depth} uniform-attention "
                 f"layers, L = {L}")
    ax.legend()
    return fig


def force_figure(L: int, profiles: dict, x, y, xlabel: str, *, color: int = 0,
                 legend: str = "upper center", ylabel: str = "mean position (0 = first, 1 = last)"):
    """The two panels of one force in chapter :ref:`ch-rollout` (the four forces).

    Left: the influence profiles ``profiles`` (label -> row of length ``L``, log scale).  Right:
    the profile's mean position against the force's strength ``x``; ``y`` is one curve, or a
    mapping label -> curve for several (drawn with markers ``o-``, ``s--``, ...).  Returns
    ``(fig, (ax, ax2))`` for the chapter's finishing touches.
    """
    fig, (ax, ax2) = figure(ncols=2, height=3.2)
    for k, (label, row) in enumerate(profiles.items()):
        ax.plot(positions(L), row, color=COLORS[k % len(COLORS)], label=label)
    profile_axes(ax, L)
    ax.legend(loc=legend)
    curves = y if isinstance(y, dict) else {None: y}
    for k, (label, yk) in enumerate(curves.items()):
        ax2.plot(x, yk, ["o-", "s--", "^:"][k % 3], ms=3,
                 color=COLORS[(color + k) % len(COLORS)], label=label)
    ax2.set_xlabel(xlabel)
    ax2.set_ylabel(ylabel)
    if isinstance(y, dict):
        ax2.legend(loc="upper left")
    return fig, (ax, ax2)


#: The colour of each decision word in :func:`verdict_overview`, the same as its badge's in the
#: introduction's table (``_assets/posbias.css``); ``None``: a verdict without a decision word.
VERDICT_COLORS = {"holds": "#1e8449", "exact": "#1b4f72", "fails": "#c0392b",
                  "inconclusive": "#ad6800", "not testable": "#5d6d7e", None: "#aab7b8"}


def verdict_overview(rows, linthresh: float = 0.01, label_width: int = 62):
    """Every claim of the book on one axis: the interval of its effect as a signed distance past
    the pre-declared threshold (:func:`posbias_nb.stats.margin`, symmetric-log scale), coloured by
    its decision word; a bar wholly right of 0 holds, one at or left of 0 fails, one across 0 is
    inconclusive.  Chapter :ref:`ch-verdicts`.

    ``rows``: dicts with ``chapter``, ``claim``, ``decision`` (a word or None) and ``margin``
    (``(estimate, low, high)``, or None for a claim without a single interval: its label is
    drawn, in its verdict's colour, with "no single interval" beside the axis).  Drawn top to
    bottom in the given order.  Returns ``(fig, ax)``.

    Raises
    ------
    ValueError
        No rows, an unknown decision word, or a margin that is not three finite numbers with
        low <= estimate <= high.
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    rows = list(rows)
    if not rows:
        raise ValueError("verdict_overview needs at least one row")
    fig, ax = figure(height=0.9 + 0.2 * len(rows), width=7.6)
    n = len(rows)
    labels = []
    drawn = set()
    for i, r in enumerate(rows):
        y = n - 1 - i
        word = r.get("decision")
        if word not in VERDICT_COLORS:
            raise ValueError(f"unknown decision word {word!r}")
        c = VERDICT_COLORS[word]
        text = f"{r['chapter']}: {r['claim']}"
        labels.append(text if len(text) <= label_width else text[:label_width - 1] + "\u2026")
        m = r.get("margin")
        if m is None:
            ax.annotate("no single interval", (0.01, y), xycoords=("axes fraction", "data"),
                        va="center", fontsize=7, color="#7f8c8d", style="italic")
            continue
        e, lo, hi = (float(v) for v in m)
        if not (np.isfinite([e, lo, hi]).all() and lo <= e <= hi):
            raise ValueError(f"margin must be finite with low <= estimate <= high, got {m!r}")
        ax.plot([lo, hi], [y, y], color=c, lw=2.2, solid_capstyle="butt")
        ax.plot([e], [y], "o", color=c, ms=4)
        drawn.add(word)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xscale("symlog", linthresh=linthresh)
    ends = [abs(float(v)) for r in rows if r.get("margin") is not None for v in r["margin"]]
    reach = 3 * max(ends + [10 * linthresh])  # room for the dots at the ends, both sides
    ax.set_xlim(-reach, reach)
    # ticks at 0 and at most four decades each side, labelled 10^k
    lo_k, hi_k = int(np.ceil(np.log10(linthresh))), int(np.floor(np.log10(reach)))
    step = max(1, int(np.ceil((hi_k - lo_k + 1) / 4)))
    ks = list(range(hi_k, lo_k - 1, -step))[::-1]
    ticks = [-(10.0 ** k) for k in ks[::-1]] + [0.0] + [10.0 ** k for k in ks]
    ax.set_xticks(ticks, [f"$-10^{{{k}}}$" for k in ks[::-1]] + ["0"]
                  + [f"$10^{{{k}}}$" for k in ks])
    ax.minorticks_off()
    ax.set_yticks(range(n - 1, -1, -1), labels, fontsize=7)
    for tick, r in zip(ax.get_yticklabels(), rows):
        tick.set_color(VERDICT_COLORS[r.get("decision")])
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel("signed distance past the claim's threshold, relative to it "
                  "(symmetric log; > 0: the claim holds)")
    ax.set_ylabel("claim")
    ax.grid(axis="y", alpha=0)
    words = [w for w in VERDICT_COLORS if w in {r.get("decision") for r in rows}]
    ax.legend([Line2D([], [], color=VERDICT_COLORS[w], lw=2.2, marker="o", ms=4) for w in words],
              [w if w is not None else "no decision word" for w in words],
              loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(words))
    return fig, ax
