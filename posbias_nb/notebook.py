"""Helpers for the chapters: gluing numbers into the prose, formatting intervals, building
the Markdown tables and the verdict tables."""
from __future__ import annotations

import numbers

import numpy as np

__all__ = ["glue", "interval", "bold_best", "markdown_table", "verdict_markdown",
           "verdict_table", "VERDICT_COLUMNS"]


_GLUED: dict = {}


def glue(name: str, value, display: bool = False):
    """Glue ``value`` under ``name`` for ``{glue:text}`` roles in the prose.

    NumPy scalars are turned into plain Python numbers first: their NumPy 2 repr
    (``np.float64(0.5)``) cannot be formatted by ``{glue:text}`name:.2f```.
    Non-finite numbers are refused: a NaN in the prose is a bug upstream.  A name glued twice
    in one kernel is refused (the book build would warn "duplicate" and the prose show the
    later value) when the values differ, or always with ``POSBIAS_STRICT_GLUE=1`` (set by
    ``make notebooks``, where every cell runs once); re-running a cell interactively stays
    allowed.
    """
    import os

    from myst_nb import glue as _glue

    if name in _GLUED:
        same = repr(_GLUED[name]) == repr(value)
        if os.environ.get("POSBIAS_STRICT_GLUE") == "1" or not same:
            raise ValueError(f"glue {name!r} is glued twice in this notebook")
    _GLUED[name] = value

    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if not np.isfinite(float(value)):
            raise ValueError(f"glue {name!r}: non-finite value {value!r}")
    return _glue(name, value, display=display)


def interval(estimate, low=None, high=None, fmt: str = ".3f") -> str:
    """``"estimate [low, high]"``, each number formatted with ``fmt``: the one interval formatter
    of the chapters.

    Called with the three numbers, ``interval(est, lo, hi, ".2f")``, or with one
    ``(estimate, low, high)`` tuple (what :func:`posbias_nb.metrics.bootstrap` returns),
    ``interval(ci, ".2f")`` or ``interval(ci, fmt=".2f")``.

    Raises
    ------
    ValueError
        A non-finite number, or a tuple that does not hold exactly three numbers.

    Examples
    --------
    >>> interval(0.5, 0.41, 0.6, ".2f")
    '0.50 [0.41, 0.60]'
    >>> interval((12.0, 9.4, 15.2), ".0f")
    '12 [9, 15]'
    """
    if high is None and (low is None or isinstance(low, str)):
        if isinstance(low, str):
            fmt = low
        try:
            estimate, low, high = estimate
        except (TypeError, ValueError):
            raise ValueError("interval: pass (estimate, low, high) or one tuple of three, got "
                             f"{estimate!r}") from None
    vals = [float(v) for v in (estimate, low, high)]
    if not all(np.isfinite(vals)):
        raise ValueError(f"interval: non-finite value in {vals!r}")
    e, lo, hi = (format(v, fmt) for v in vals)
    return f"{e} [{lo}, {hi}]"


def bold_best(values, fmt: str = ".3f", best=min) -> list[str]:
    """Each value formatted with ``fmt``, the best one (``best``: ``min`` or ``max``) in bold
    (``**...**``); ties are all bold.

    Chapter :ref:`ch-prediction` (the smallest W₁ of each row of the score table).

    Examples
    --------
    >>> bold_best([0.2, 0.1, 0.3], ".1f")
    ['0.2', '**0.1**', '0.3']
    """
    vals = [float(v) for v in values]
    if not vals:
        raise ValueError("bold_best needs at least one value")
    b = best(vals)
    return [f"**{v:{fmt}}**" if v == b else f"{v:{fmt}}" for v in vals]


def markdown_table(columns, rows):
    """A Markdown table with the header ``columns`` and one line per row of ``rows`` (cells
    converted with ``str``; a ``|`` in a cell is escaped), as ``IPython.display.Markdown``.

    The table builder of the chapters (:ref:`ch-prediction`).

    Raises
    ------
    ValueError
        No columns, or a row whose number of cells differs from the header's.

    Examples
    --------
    >>> print(markdown_table(["a", "b"], [[1, "x|y"]]).data)
    | a | b |
    |---|---|
    | 1 | x\\|y |
    """
    from IPython.display import Markdown

    cols = [str(c) for c in columns]
    if not cols:
        raise ValueError("markdown_table needs at least one column")
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for i, r in enumerate(rows):
        cells = [str(c).replace("|", "\\|").replace("\n", " ") for c in r]
        if len(cells) != len(cols):
            raise ValueError(f"row {i} has {len(cells)} cells, the header {len(cols)}")
        lines.append("| " + " | ".join(cells) + " |")
    return Markdown("\n".join(lines))


VERDICT_COLUMNS = ("claim", "the paper says", "we measure (95% interval)", "verdict")


def verdict_markdown(rows) -> str:
    """A Markdown table, one row per claim, with the columns of :data:`VERDICT_COLUMNS`.

    Each row is a mapping with the keys ``claim``, ``paper``, ``measured`` and ``verdict``
    (strings; ``measured`` built from computed numbers, e.g. with :func:`interval`).  A ``|`` in
    a cell is escaped.

    Raises
    ------
    ValueError
        No rows, or a row missing a key or with an empty cell.

    Examples
    --------
    >>> print(verdict_markdown([dict(claim="U", paper="yes", measured="12 [9, 15]",
    ...                              verdict="holds")]))
    | claim | the paper says | we measure (95% interval) | verdict |
    |---|---|---|---|
    | U | yes | 12 [9, 15] | holds |
    """
    rows = list(rows)
    if not rows:
        raise ValueError("verdict table needs at least one row")
    lines = ["| " + " | ".join(VERDICT_COLUMNS) + " |", "|---|---|---|---|"]
    for i, r in enumerate(rows):
        cells = []
        for k in ("claim", "paper", "measured", "verdict"):
            if k not in r or not str(r[k]).strip():
                raise ValueError(f"verdict row {i} has no {k!r}")
            cells.append(str(r[k]).replace("|", "\\|").replace("\n", " "))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def verdict_table(rows, prefix: str):
    """Render the chapter's closing verdict table and glue every cell for the intro's table.

    For a row with ``key`` ``k`` it glues ``{prefix}_{k}_claim``, ``_paper``, ``_measured`` and
    ``_verdict`` (strings), and every entry of the row's optional ``values`` mapping as
    ``{prefix}_{k}_{name}`` (numbers).  Returns an ``IPython.display.Markdown`` of
    :func:`verdict_markdown`.

    Raises
    ------
    ValueError
        As :func:`verdict_markdown`, or a row without a ``key``, or a repeated key.
    """
    from IPython.display import Markdown

    rows = list(rows)
    text = verdict_markdown(rows)
    seen = set()
    for r in rows:
        k = r.get("key")
        if not k or k in seen:
            raise ValueError(f"verdict rows need distinct keys, got {k!r}")
        seen.add(k)
        for col in ("claim", "paper", "measured", "verdict"):
            glue(f"{prefix}_{k}_{col}", str(r[col]), display=False)
        for name, v in (r.get("values") or {}).items():
            glue(f"{prefix}_{k}_{name}", v, display=False)
    return Markdown(text)
