"""Helpers for the chapters: gluing numbers into the prose."""
from __future__ import annotations

import numbers

import numpy as np

__all__ = ["glue", "interval", "verdict_markdown", "verdict_table", "VERDICT_COLUMNS"]


def glue(name: str, value, display: bool = False):
    """Glue ``value`` under ``name`` for ``{glue:text}`` roles in the prose.

    NumPy scalars are turned into plain Python numbers first: their NumPy 2 repr
    (``np.float64(0.5)``) cannot be formatted by ``{glue:text}`name:.2f```.
    Non-finite numbers are refused: a NaN in the prose is a bug upstream.
    """
    from myst_nb import glue as _glue

    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if not np.isfinite(float(value)):
            raise ValueError(f"glue {name!r}: non-finite value {value!r}")
    return _glue(name, value, display=display)


def interval(estimate, low, high, fmt: str = ".3f") -> str:
    """``"estimate [low, high]"``, each number formatted with ``fmt``.

    Examples
    --------
    >>> interval(0.5, 0.41, 0.6, ".2f")
    '0.50 [0.41, 0.60]'
    """
    vals = [float(v) for v in (estimate, low, high)]
    if not all(np.isfinite(vals)):
        raise ValueError(f"interval: non-finite value in {vals!r}")
    e, lo, hi = (format(v, fmt) for v in vals)
    return f"{e} [{lo}, {hi}]"


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
