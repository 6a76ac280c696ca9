"""The figure style the chapters share: one look, labelled axes, log scales where values span
decades.  :func:`force_figure` draws the four forces of chapter :ref:`ch-rollout`."""
from __future__ import annotations

import matplotlib as mpl
import numpy as np

__all__ = ["use_style", "profile_axes", "COLORS", "figure", "positions", "u_shape_figure",
           "force_figure"]

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
                 ylabel: str = "influence"):
    """Label an axis for an influence profile: position on x, influence (log) on y."""
    ax.set_xlabel("relative position j / L" if relative else "input position j")
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    if L is not None and not relative:
        ax.set_xlim(0, L + 1)
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
