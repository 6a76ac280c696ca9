"""The figure style the chapters share: one look, labelled axes, log scales where values span
decades.  :func:`force_figure` draws the four forces of chapter :ref:`ch-rollout`."""
from __future__ import annotations

import matplotlib as mpl
import numpy as np

__all__ = ["use_style", "profile_axes", "COLORS", "figure", "positions", "headline_figure",
           "force_figure", "VERDICT_COLORS", "verdict_overview", "COLUMN_PX", "MIN_TEXT_PX",
           "text_sizes", "check_readable", "model_label", "PUBLISHED_LABELS"]

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


#: The narrowest the book's text column gets at the widths the site test reads (1,000 px wide;
#: ``tests/browser/test_site.py`` measures it): a figure wider than this is shown shrunk to it.
COLUMN_PX = 736
#: The smallest text a reader should meet in a figure at the size it is shown, in CSS pixels.
MIN_TEXT_PX = 9.0


def text_sizes(fig, column_px: float = COLUMN_PX) -> list[tuple[float, str]]:
    """Every visible, non-empty text of ``fig`` (tick labels, legends, labels, titles,
    annotations) with its size in pixels **as shown**: the figure saved as the notebook shows
    it (``bbox_inches="tight"`` at the figure's dpi) and shrunk to ``column_px`` when wider.
    Smallest first, each as ``(pixels, text)``.

    Raises
    ------
    ValueError
        A ``column_px`` that is not a positive number.
    """
    from matplotlib.text import Text

    if not (isinstance(column_px, (int, float)) and column_px > 0):
        raise ValueError(f"column_px must be a positive number, got {column_px!r}")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    pad = mpl.rcParams["savefig.pad_inches"]
    width_px = (fig.get_tightbbox(renderer).width + 2 * pad) * fig.dpi
    scale = min(1.0, column_px / width_px)
    out = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip():
            continue
        if t.axes is not None and t.get_window_extent(renderer).width == 0:
            continue
        out.append((t.get_fontsize() * fig.dpi / 72 * scale, t.get_text()))
    return sorted(out)


def check_readable(fig, column_px: float = COLUMN_PX, minimum: float = MIN_TEXT_PX) -> float:
    """The smallest text of ``fig`` at display size (:func:`text_sizes`), or ValueError naming
    the texts below ``minimum`` pixels: draw the figure at the size it is shown, or its text
    larger."""
    sizes = text_sizes(fig, column_px)
    small = [(px, t) for px, t in sizes if px < minimum]
    if small:
        shown = ", ".join(f"{t[:30]!r} {px:.1f} px" for px, t in small[:5])
        raise ValueError(f"{len(small)} text(s) of the figure are below {minimum:g} px as shown "
                         f"in a {column_px:g} px column: {shown}")
    return sizes[0][0] if sizes else float("inf")


def _check_shown_figures() -> None:
    """In a notebook, every figure shown as PNG is first held to :func:`check_readable`: the
    image formatter of the inline backend is wrapped (once; pyplot is imported first so that
    the backend has registered it)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is None or not hasattr(ip, "display_formatter"):
        return
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    # pyplot loads its backend lazily, at the first figure; the inline backend registers its
    # PNG formatter when it loads, so load it now (the backend stays the configured one)
    plt.switch_backend(mpl.get_backend())

    fmt = ip.display_formatter.formatters["image/png"]
    old = fmt.type_printers.get(Figure)
    if old is None or getattr(old, "_posbias_checked", False):
        return

    def png(fig, _old=old):
        check_readable(fig)
        return _old(fig)

    png._posbias_checked = True
    fmt.for_type(Figure, png)


def use_style() -> None:
    """Apply the book's matplotlib style (call once at the top of a chapter); in a notebook,
    every figure shown is checked for text too small to read (:func:`check_readable`)."""
    mpl.rcParams.update(_STYLE)
    _check_shown_figures()


def figure(ncols: int = 1, nrows: int = 1, width: float = 7.0, height: float = 3.4, **kw):
    """A figure sized for the page width; returns ``(fig, axes)``."""
    import matplotlib.pyplot as plt

    use_style()
    return plt.subplots(nrows, ncols, figsize=(width, height), **kw)


#: The structural theory's five published configurations (``rollout.PUBLISHED_MODELS``) by the
#: names their releases use, for legends and panel titles.
PUBLISHED_LABELS = {"bloom": "BLOOM-176B", "bloom-7b1": "BLOOM-7b1", "falcon-rw-7b": "Falcon-RW-7B",
                    "mpt-7b": "MPT-7B", "mpt-30b": "MPT-30B"}


def model_label(spec) -> str:
    """A model's name as the book's text writes it ("GPT-2 small", "SmolLM2-135M"), for panel
    titles and legends: the head of a zoo entry's description (``spec.description``, read by
    duck typing: the figure style imports no model), before its first colon or parenthesis,
    without a trailing "architecture".

    >>> from types import SimpleNamespace as S
    >>> model_label(S(description="SmolLM2-135M (Instruct weights, GGUF Q4_1): 30 layers"))
    'SmolLM2-135M'
    >>> model_label(S(description="Llama-3.1-8B architecture (random init only): 32 layers"))
    'Llama-3.1-8B'

    An object without a description is refused (ValueError naming it).
    """
    d = getattr(spec, "description", None)
    if not isinstance(d, str) or not d.strip():
        raise ValueError(f"model_label needs a zoo entry with a description, got {spec!r}")
    head = d.split(":", 1)[0].split(" (", 1)[0].strip()
    return head.removesuffix(" architecture").strip()


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


def headline_figure(data: dict):
    """The book's headline figure (chapter :ref:`ch-intro` and the README), from
    :func:`posbias_nb.experiments.prompt.headline.headline_data`.

    Left, at birth: the measured influence of each input on the last position of a randomly
    initialised model (solid) and the exact row of :math:`N^H` at the fitted :math:`\\alpha`
    (dashed); an inset shows the last positions, with the theory row's minimum marked.  Right,
    after training, on real questions: the gold answer's log p at each slot of the gold passage
    minus at the middle slot, paired by question, with 95% t intervals.  Returns
    ``(fig, (ax_born, ax_real, ax_inset))``.
    """
    b = data["born"]
    fig, (ax, ax2) = figure(ncols=2, width=9.0, height=3.4)
    j, L = b["jmin"], b["L"]
    pos = positions(L)
    ax.plot(pos, b["measured"], lw=0.9, color=COLORS[0], label=f"measured ({b['model']}, "
            "random init)")
    ax.plot(pos, b["theory"], "--", lw=1.2, color=COLORS[1],
            label=rf"exact row of $N^{{{b['H']}}}$, fitted $\alpha$ = {b['alpha']:.2f}")
    profile_axes(ax, L, ylabel="influence on the last position\n(normalised to sum 1)")
    ax.set_title("At birth: a primacy tail, then a one-token spike")
    ax.legend(loc="upper right")
    # the last positions, where a linear axis hides the valley and the spike
    k = min(12, L)
    ins = ax.inset_axes([0.42, 0.30, 0.34, 0.34])
    tail = pos[-k:] - L  # j - L: 0 is the last position
    ins.plot(tail, b["measured"][-k:], "o-", ms=2.5, lw=0.8, color=COLORS[0])
    ins.plot(tail, b["theory"][-k:], "s--", ms=2.5, lw=0.9, color=COLORS[1])
    ins.plot([j - L], [b["theory"][j - 1]], "v", ms=7, color=COLORS[1], zorder=5)
    ins.set_yscale("log")
    ins.set_xticks([1 - k, -6, -1] if k > 6 else [1 - k, -1])
    ins.tick_params(axis="x", labelsize=8.5)
    ins.tick_params(axis="y", labelsize=8.5)
    ins.set_xlabel("j \u2212 L", fontsize=8.5, labelpad=1)
    ins.set_ylabel("influence", fontsize=8.5, labelpad=1)
    ins.set_title(f"the last {k}: lowest at {'L' if j == L else f'L{chr(0x2212)}{L - j}'}",
                  fontsize=8.5)
    ax2.axhline(0.0, color="0.35", lw=0.8)
    for i, (name, r) in enumerate(data["real"].items()):
        c = COLORS[(i + 2) % len(COLORS)]
        d = np.asarray(r["diff"], dtype=float)
        x = np.asarray(r["slots"], dtype=float) + (i - 0.5) * 0.14  # the two models side by side
        ax2.errorbar(x, d, yerr=[d - np.asarray(r["low"]), np.asarray(r["high"]) - d],
                     fmt="o-", ms=4, lw=1.2, capsize=2.5, color=c,
                     label=f"{name} ({r['n']} questions)")
    ax2.set_xlabel("slot of the gold passage (of 10)")
    ax2.set_ylabel("log p of the gold answer\nminus at the middle slot (nats)")
    ax2.set_xticks(sorted({int(x) for r in data["real"].values() for x in r["slots"]}))
    ax2.set_title("Trained, real questions: log p by the gold passage's slot")
    ax2.legend(loc="upper center")
    return fig, (ax, ax2, ins)


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


def verdict_overview(rows, linthresh: float = 0.01, label_width: int = 58):
    """Every claim of the book on one axis: the interval of its effect as a signed distance past
    the pre-declared threshold (:func:`posbias_nb.stats.margin`, symmetric-log scale), coloured by
    its decision word; a bar wholly right of 0 holds, one at or left of 0 fails, one across 0 is
    inconclusive.  Chapter :ref:`ch-verdicts`.

    Each label is the chapter and the whole claim, wrapped at ``label_width`` characters (never
    cut).  ``rows``: dicts with ``chapter``, ``claim``, ``decision`` (a word or None) and ``margin``
    (``(estimate, low, high)``, or None for a claim without a single interval: its label is
    drawn, in its verdict's colour, with "no single interval" beside the axis).  Drawn top to
    bottom in the given order.  Returns ``(fig, ax)``.

    Raises
    ------
    ValueError
        No rows, an unknown decision word, or a margin that is not three finite numbers with
        low <= estimate <= high.
    """
    import textwrap

    from matplotlib.lines import Line2D

    rows = list(rows)
    if not rows:
        raise ValueError("verdict_overview needs at least one row")
    n_lines = [len(textwrap.wrap(f"{r['chapter']}: {r['claim']}", label_width)) for r in rows]
    fig, ax = figure(height=0.9 + 0.205 * sum(n_lines) + 0.08 * len(rows), width=8.4)
    n = len(rows)
    labels = []
    drawn = set()
    for i, r in enumerate(rows):
        y = n - 1 - i
        word = r.get("decision")
        if word not in VERDICT_COLORS:
            raise ValueError(f"unknown decision word {word!r}")
        c = VERDICT_COLORS[word]
        labels.append("\n".join(textwrap.wrap(f"{r['chapter']}: {r['claim']}", label_width)))
        m = r.get("margin")
        if m is None:
            ax.annotate("no single interval", (0.01, y), xycoords=("axes fraction", "data"),
                        va="center", fontsize=8.5, color="#7f8c8d", style="italic")
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
    ax.set_yticks(range(n - 1, -1, -1), labels, fontsize=8.5)
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
