"""Helpers for the chapters: gluing numbers into the prose, formatting intervals, building
the Markdown tables and the verdict tables."""
from __future__ import annotations

import math
import numbers
import re
from pathlib import Path

import numpy as np

__all__ = ["glue", "interval", "paired_difference", "bold_best", "markdown_table", "significant", "value_table",
           "verdict_markdown",
           "verdict_table", "VERDICT_COLUMNS", "decision", "Badge", "BADGE_STYLE", "NO_DECISION",
           "verdict_dir", "write_verdict_record", "read_verdict_records"]


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


def number(value, fmt: str) -> str:
    """``value`` formatted with ``fmt``, a zero never signed: ``-0.0004`` with ``"+.2f"`` is
    ``0.00``, not ``-0.00`` or ``+0.00`` (a sign on a printed zero claims a direction the
    digits do not show).  The one number formatter under :func:`interval` and
    :func:`significant`.

    Examples
    --------
    >>> [number(v, "+.2f") for v in (-0.0004, 0.0004, 0.25, -0.25)]
    ['0.00', '0.00', '+0.25', '-0.25']
    >>> number(-0.0001, ".1%")
    '0.0%'
    """
    out = format(value, fmt)
    return out[1:] if _SIGNED_ZERO.fullmatch(out) else out


#: A float written in full inside a label (``sliding:16@0.014936589462354138``).
_LONG_FLOAT = re.compile(r"(?<![\w.])-?\d+\.\d{5,}(?:[eE][+-]?\d+)?")


def short_floats(text: str, digits: int = 3) -> str:
    """A label with every float written in full rounded to ``digits`` significant digits (by
    :func:`number`), the rest as it is: a layout's sink logits, ``sliding:16@0.014936589462354138``,
    print as ``sliding:16@0.0149``.

    >>> short_floats("sliding:16@0.014936589462354138,full@-0.0017153004222846286,full")
    'sliding:16@0.0149,full@-0.00172,full'
    """
    return _LONG_FLOAT.sub(lambda m: number(float(m.group(0)), f".{digits}g"), str(text))


_SIGNED_ZERO = re.compile(r"[+\-\u2212]0(?:\.0*)?(?:%|[eE][+\-]?\d+)?")

#: The kinds of interval :func:`interval` prints: ``two-sided`` (``est [low, high]``),
#: ``one-sided`` (both one-sided bounds of :func:`posbias_nb.stats.one_sided_bounds`, which
#: together are the two-sided interval at ``2 level - 1``; printed as that interval, saying so)
#: and ``exact`` (a number computed exactly: no interval, ``(exact)``).
INTERVAL_KINDS = ("two-sided", "one-sided", "exact")


def interval(estimate, low=None, high=None, fmt: str = ".3f", *, kind: str = "two-sided",
             level: float = 0.95, unit: str = "") -> str:
    """``"estimate [low, high]"``, each number formatted with ``fmt`` (by :func:`number`: no
    signed zero): the one interval formatter of the chapters.

    Called with the three numbers, ``interval(est, lo, hi, ".2f")``, or with one
    ``(estimate, low, high)`` tuple (what :func:`posbias_nb.metrics.bootstrap` returns),
    ``interval(ci, ".2f")`` or ``interval(ci, fmt=".2f")``.

    ``unit`` (``"nats"``) is written once, after the interval.  ``kind`` (one of
    :data:`INTERVAL_KINDS`): ``"one-sided"`` for the two one-sided bounds at ``level`` of
    :func:`posbias_nb.stats.one_sided_bounds`, printed as the two-sided interval they make
    (at ``2 level - 1``) with a note saying so, never as a pair of one-sided bounds in
    brackets;
    ``"exact"`` for an exact number (``low`` and ``high`` equal to it), printed with
    ``(exact)`` and no interval.

    >>> interval(0.72, 0.29, 1.14, "+.2f", kind="one-sided", unit="nats")
    '+0.72 [+0.29, +1.14] nats (a 90% interval: each end a one-sided 95% bound)'
    >>> interval(-0.0004, -0.0021, 0.013, "+.3f")
    '0.000 [-0.002, +0.013]'
    >>> interval(1.5, 1.5, 1.5, ".1f", kind="exact")
    '1.5 (exact)'

    Raises
    ------
    ValueError
        A non-finite number, a tuple that does not hold exactly three numbers, or an interval
        that does not contain its estimate (:func:`posbias_nb.stats.jackknife_interval` is
        the interval for a statistic whose bootstrap leans away from it).

    Examples
    --------
    >>> interval(0.5, 0.41, 0.6, ".2f")
    '0.50 [0.41, 0.60]'
    >>> interval((12.0, 9.4, 15.2), ".0f")
    '12 [9, 15]'

    An interval of positive width gets the digits that show its width (a point estimate
    printed ``0.483 [0.483, 0.483]`` reads as an interval of width 0):

    >>> interval(0.48312, 0.48301, 0.48342, ".3f")
    '0.4831 [0.4830, 0.4834]'
    """
    if high is None and (low is None or isinstance(low, str)):
        if isinstance(low, str):
            fmt = low
        try:
            estimate, low, high = estimate
        except (TypeError, ValueError):
            raise ValueError("interval: pass (estimate, low, high) or one tuple of three, got "
                             f"{estimate!r}") from None
    if kind not in INTERVAL_KINDS:
        raise ValueError(f"interval: kind must be one of {', '.join(INTERVAL_KINDS)}, "
                         f"got {kind!r}")
    vals = [float(v) for v in (estimate, low, high)]
    if not all(np.isfinite(vals)):
        raise ValueError(f"interval: non-finite value in {vals!r}")
    tol = 1e-12 * max(1.0, abs(vals[0]))
    if not vals[1] - tol <= vals[0] <= vals[2] + tol:
        raise ValueError(f"interval: the estimate {vals[0]!r} lies outside its interval "
                         f"[{vals[1]!r}, {vals[2]!r}]")
    u = f" {unit}" if unit else ""
    if kind == "exact":
        if not vals[1] == vals[0] == vals[2]:
            raise ValueError(f"interval: an exact number has no width, got [{vals[1]!r}, "
                             f"{vals[2]!r}] around {vals[0]!r}")
        return f"{number(vals[0], fmt)}{u} (exact)"
    e, lo, hi = (number(v, fmt) for v in vals)
    m = _PRECISION.fullmatch(fmt)
    extra = 0
    while m and lo == hi and vals[1] != vals[2] and extra < 8:
        extra += 1  # an interval of positive width is never printed as a point
        f = f"{m.group(1)}{int(m.group(2)) + extra}{m.group(3)}"
        e, lo, hi = (number(v, f) for v in vals)
    out = f"{e} [{lo}, {hi}]{u}"
    if kind == "one-sided":
        if not 0.5 < level < 1:
            raise ValueError(f"interval: a one-sided level must lie in (0.5, 1), got {level!r}")
        out += (f" (a {number(2 * level - 1, '.0%')} interval: each end a one-sided "
                f"{number(level, '.0%')} bound)")
    return out


_PRECISION = re.compile(r"(.*\.)(\d+)([eEfFgG%])")


def paired_difference(scores, stat: str, a: str, b: str, fmt: str = ".3f") -> str:
    """One paired difference of :func:`posbias_nb.metrics.prediction_scores` (``stat`` is
    ``"dw1"`` or ``"drho"``, of the predictions ``a`` and ``b``), formatted: its
    :func:`interval`, or, when the interval has width 0, the estimate alone, marked
    ``(exact)`` where the statistic is exact by construction and otherwise with the share of
    resamples that leave it there (its atom).  Chapter :ref:`ch-prediction` (the table of
    scores).

    Raises
    ------
    KeyError
        ``scores`` without that difference, its ``_exact`` flag or its ``_atom`` share.

    Examples
    --------
    >>> s = {("dw1", "a", "b"): (0.1, 0.05, 0.2), ("dw1_exact", "a", "b"): False,
    ...      ("dw1_atom", "a", "b"): 0.0}
    >>> paired_difference(s, "dw1", "a", "b", ".2f")
    '0.10 [0.05, 0.20]'
    >>> s[("dw1", "a", "b")] = (0.1, 0.1, 0.1); s[("dw1_atom", "a", "b")] = 0.97
    >>> paired_difference(s, "dw1", "a", "b", ".2f")
    '0.10 (in 97.0% of resamples)'
    >>> s[("dw1_exact", "a", "b")] = True
    >>> paired_difference(s, "dw1", "a", "b", ".2f")
    '0.10 (exact)'
    """
    e, lo, hi = scores[stat, a, b]
    if scores[f"{stat}_exact", a, b]:
        return f"{e:{fmt}} (exact)"
    if abs(hi - lo) <= 1e-9 * max(1.0, abs(e)):
        return f"{e:{fmt}} (in {scores[f'{stat}_atom', a, b]:.1%} of resamples)"
    return interval(scores[stat, a, b], fmt)


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
    converted with ``str``; a ``|`` in a cell is escaped, and so is an asterisk inside a word,
    ``5*sliding:512``, which Markdown would read as emphasis), as ``IPython.display.Markdown``.

    The table builder of the chapters (:ref:`ch-prediction`).

    Raises
    ------
    ValueError
        No columns, or a row whose number of cells differs from the header's.

    Examples
    --------
    >>> print(markdown_table(["a", "b"], [[1, "x|y"], ["5*sliding:512", "**0.1**"]]).data)
    | a | b |
    |---|---|
    | 1 | x\\|y |
    | 5\\*sliding:512 | **0.1** |
    """
    from IPython.display import Markdown

    cols = [str(c) for c in columns]
    if not cols:
        raise ValueError("markdown_table needs at least one column")
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for i, r in enumerate(rows):
        cells = [_MID_STAR.sub(r"\\*", str(c)).replace("|", "\\|").replace("\n", " ")
                 for c in r]
        if len(cells) != len(cols):
            raise ValueError(f"row {i} has {len(cells)} cells, the header {len(cols)}")
        lines.append("| " + " | ".join(cells) + " |")
    return Markdown("\n".join(lines))


#: An asterisk between two word characters (``5*sliding:512``), which Markdown reads as the
#: start of emphasis; :func:`markdown_table` escapes it (a bold ``**x**`` stays bold).
_MID_STAR = re.compile(r"(?<=\w)\*(?=\w)")


def significant(value, digits: int = 3) -> str:
    """A number as a reader reads it in a table: a whole number as it is, any other number
    rounded to ``digits`` significant digits without an exponent between 0.001 and 100,000 and
    with one outside (a float error of ``2.4e-15``); ``True``/``False`` as ``yes``/``no``, NaN
    and ``None`` (a statistic that is undefined) as ``—``; anything else (a string) as ``str``
    gives it.

    Examples
    --------
    >>> [significant(v) for v in (512.0, 20.783, 0.12549, 212.861, 2.4288e-15, 8192, True)]
    ['512', '20.8', '0.125', '213', '2.43e-15', '8192', 'yes']
    """
    if value is None:
        return "\u2014"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, numbers.Real):
        return str(value)
    v = float(value)
    if math.isnan(v):
        return "\u2014"
    if math.isinf(v) or (v == int(v) and abs(v) < 1e15):
        return str(int(v)) if math.isfinite(v) else str(v)
    if not 1e-3 <= abs(v) < 1e5:
        return number(v, f".{digits - 1}e")
    return number(v, f".{max(0, digits - 1 - math.floor(math.log10(abs(v))))}f")


def _cell(value, digits, intervals):
    """One cell of :func:`value_table`."""
    if value is None or isinstance(value, (str, bool, np.bool_, numbers.Number)):
        return significant(value, digits)
    vals = list(value) if isinstance(value, (list, tuple)) else list(np.asarray(value).ravel())
    if (intervals and len(vals) == 3 and all(isinstance(v, numbers.Real) for v in vals)
            and np.all(np.isfinite(vals)) and vals[1] <= vals[0] <= vals[2]):
        ref = max(abs(float(v)) for v in vals)  # the largest number gets `digits` digits
        if 1e-3 <= ref < 1e5:
            return interval(vals, f".{max(0, digits - 1 - math.floor(math.log10(ref)))}f")
    return ", ".join(_cell(v, digits, False) for v in vals)


def value_table(values, key: str = "", value: str = "value", digits: int = 3,
                intervals: bool = True, transpose: bool = False):
    """The Markdown table (:func:`markdown_table`) of a dict the chapter computed, in place of
    its Python repr: one row per key; one column ``value`` for a dict of numbers, one column
    per inner key (in order of first appearance; a missing one left empty) for a dict of
    dicts, or with ``transpose`` one row per inner key and one column per outer key.  The
    first column is headed ``key``; a tuple key is joined with spaces.

    Numbers are shown by :func:`significant` (``digits`` significant digits); a sequence of
    three numbers is an ``(estimate, low, high)`` interval shown by :func:`interval`, with
    ``digits`` significant digits for the largest of the three; any other sequence is listed
    with commas.  A sequence of three numbers that is not an interval (its first number
    outside the other two, a number not finite, all three tiny or huge), or any sequence with
    ``intervals=False``, is listed too.

    Raises
    ------
    ValueError
        ``values`` is not a non-empty dict, or ``transpose`` with values that are not dicts.

    Examples
    --------
    >>> print(value_table({"gpt2": 4.2281, "mpt-7b": 5.0}, "model", "ratio").data)
    | model | ratio |
    |---|---|
    | gpt2 | 4.23 |
    | mpt-7b | 5 |
    >>> print(value_table({("G", "r2"): dict(rho=(0.861, 0.61, 0.96), n=30),
    ...                    ("S", "r2"): dict(rho=(0.0, -0.214, 0.107), n=28)}).data)
    |  | rho | n |
    |---|---|---|
    | G r2 | 0.861 [0.610, 0.960] | 30 |
    | S r2 | 0.000 [-0.214, 0.107] | 28 |
    >>> print(value_table({"a": dict(x=1), "b": dict(x=2.5, y=True)}, transpose=True).data)
    |  | a | b |
    |---|---|---|
    | x | 1 | 2.50 |
    | y |  | yes |
    """
    if not isinstance(values, dict) or not values:
        raise ValueError("value_table needs a non-empty dict")
    name = lambda k: " ".join(map(str, k)) if isinstance(k, tuple) else str(k)  # noqa: E731
    nested = all(isinstance(v, dict) for v in values.values())
    if transpose and not nested:
        raise ValueError("value_table(transpose=True) needs a dict of dicts")
    if not nested:
        return markdown_table([key, value], [[name(k), _cell(v, digits, intervals)]
                                             for k, v in values.items()])
    inner = list(dict.fromkeys(c for v in values.values() for c in v))
    cell = lambda r, c: _cell(values[r][c], digits, intervals) if c in values[r] else ""  # noqa: E731
    if transpose:
        return markdown_table([key] + [name(r) for r in values],
                              [[name(c)] + [cell(r, c) for r in values] for c in inner])
    return markdown_table([key] + [name(c) for c in inner],
                          [[name(r)] + [cell(r, c) for c in inner] for r in values])


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
            cells.append(table_cell(r[k]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table_cell(text) -> str:
    """Plain text as one Markdown table cell: ``|`` escaped, line breaks as spaces, and ``_``
    and ``*`` escaped outside ``$...$`` math and backtick code, so that a claim such as
    ``(M^H)_LL`` is not read as emphasis.

    Examples
    --------
    >>> table_cell("L (M^H)_LL = L^(1-H) and $x_j$ or `a_b` | c")
    'L (M^H)\\\\_LL = L^(1-H) and $x_j$ or `a_b` \\\\| c'
    """
    parts = re.split(r"(\$[^$]+\$|`[^`]+`)", str(text).replace("\n", " "))
    out = [p if (p.startswith("$") or p.startswith("`")) and len(p) > 1
           else re.sub(r"([_*])", r"\\\1", p) for p in parts]
    return "".join(out).replace("|", "\\|")


def is_exact(row) -> bool:
    """Whether a verdict row was checked exactly (proved, or computed in exact arithmetic): its
    decision is ``exact``, its effect says ``exact``, or what it measures starts with
    ``exact:``."""
    eff = row.get("effect") or {}
    return (row.get("decision") == "exact" or bool(eff.get("exact"))
            or str(row.get("measured", "")).strip().lower().startswith("exact"))


#: The mark of a verdict row decided from several intervals, and the legend that explains it
#: once, under the overview's table (:func:`verdict_overview_markdown`).
SEVERAL_MARK = "\u2020"
SEVERAL_LEGEND = (f"{SEVERAL_MARK} Decided from several intervals (one per model, arm or "
                  "position, given under \u201cwe measure\u201d), not from one.")


def no_interval_reason(row) -> str | None:
    """Why a recorded verdict row (:func:`read_verdict_records`) has no single interval, in
    words, or None when it has one (its ``effect``).  An exact row (:func:`is_exact`) needs
    none; any other row without an effect was decided from several intervals, or in words."""
    if row.get("effect") and not is_exact(row):
        return None
    if is_exact(row):
        return "an exact result: proved or computed in exact arithmetic, no interval needed"
    if row.get("decision") is None:
        return "a verdict in words, not one decision: read it in the chapter"
    return ("decided from several intervals (one per model, arm or position, given under "
            "\u201cwe measure\u201d), not from one")


def decision_counts(rows) -> str:
    """How many rows carry each decision word, as a phrase: ``"12 hold, 1 fails, 3 are
    inconclusive"`` (words in the order of :data:`posbias_nb.stats.VERDICTS`, rows without a
    word last)."""
    from . import stats

    n = {w: sum(r.get("decision") == w for r in rows) for w in (*stats.VERDICTS, None)}
    verb = {"holds": ("holds", "hold"), "fails": ("fails", "fail"),
            "inconclusive": ("is inconclusive", "are inconclusive"),
            "not testable": ("is not testable", "are not testable"),
            "exact": ("is exact", "are exact"),
            None: ("has a verdict in words", "have a verdict in words")}
    parts = [f"{k} {verb[w][k != 1]}" for w, k in n.items() if k]
    return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]


def verdict_overview_markdown(rows) -> str:
    """The verdict overview's table (chapter :ref:`ch-verdicts`): one row per recorded claim,
    with its chapter (``label`` of the chapter, a ``{ref}`` link), the claim and what the paper
    says, the decision's badge (with the exact badge for a claim checked exactly,
    :func:`is_exact`) and its explanation, and what we measure, marked :data:`SEVERAL_MARK`
    where it was decided from several intervals; the legend of that mark follows the table,
    once.  ``rows`` are the records of :func:`read_verdict_records` with ``chapter`` and
    ``label`` added."""
    rows = list(rows)
    if not rows:
        raise ValueError("verdict_overview_markdown needs at least one row")
    lines = ["| chapter | claim | verdict | we measure |", "|---|---|---|---|"]
    marked = False
    for r in rows:
        badge = Badge(r.get("decision"), is_exact(r))._repr_html_()
        why = no_interval_reason(r)
        verdict = badge + (" " + table_cell(r["explanation"]) if r.get("explanation") else "")
        # an exact row says so by its badge; a row of several intervals by its mark, which the
        # legend under the table (SEVERAL_LEGEND) explains once
        several = why is not None and not is_exact(r) and r.get("decision") is not None
        measured = table_cell(r["measured"]) + (f" {SEVERAL_MARK}" if several else "")
        lines.append(f"| {{ref}}`{r['label']}` | {table_cell(r['claim'])}; *the paper:* "
                     f"{table_cell(r['paper'])} | {verdict} | {measured} |")
        marked = marked or several
    return "\n".join(lines) + (f"\n\n{SEVERAL_LEGEND}" if marked else "")


#: The CSS class of each decision word's badge; its colour is set in ``_assets/posbias.css``,
#: the same as the word's colour in the overview figure (:data:`posbias_nb.plots.VERDICT_COLORS`).
BADGE_STYLE = {w: "posbias-verdict-" + w.replace(" ", "-")
               for w in ("holds", "fails", "inconclusive", "not testable", "exact")}
#: The badge of a row whose verdict has no decision word: the reader must read the row.
NO_DECISION = "see text"
_EFFECT_KEYS = ("interval", "threshold", "direction", "band", "testable", "exact", "scale")


def decision(row) -> tuple[str | None, str]:
    """The decision word of a verdict row and the explanation that follows it.

    The word is the row's ``decision`` field when it has one (it must be one of
    :data:`posbias_nb.stats.VERDICTS`), else the verdict's leading word when that is one of them
    (``"holds; the valley sits late"`` -> ``("holds", "the valley sits late")``), else None (the
    explanation is then the whole verdict).  Punctuation between the word and the explanation
    is dropped.  Used by :func:`verdict_table` for the badges of the introduction's table.

    Raises
    ------
    ValueError
        A ``decision`` that is not a verdict word, or one that contradicts the verdict's own
        leading word.

    Examples
    --------
    >>> decision(dict(verdict="fails at L = 512: the spike is late"))
    ('fails', 'at L = 512: the spike is late')
    >>> decision(dict(verdict="holdsworth"))
    (None, 'holdsworth')
    >>> decision(dict(verdict="in part: both ends stay", decision="inconclusive"))
    ('inconclusive', 'in part: both ends stay')
    """
    from . import stats

    text = str(row.get("verdict", "")).strip()
    lead, rest = None, text
    for w in sorted(stats.VERDICTS, key=len, reverse=True):  # "not testable" before shorter
        if text.startswith(w) and (len(text) == len(w) or not text[len(w)].isalnum()):
            lead, rest = w, text[len(w):].lstrip(" ;,:.-\u2013\u2014").strip()
            break
    if "decision" in row:
        word = row["decision"]
        if word not in stats.VERDICTS:
            raise ValueError(f"verdict row {row.get('key')!r}: decision must be one of "
                             f"{stats.VERDICTS}, got {word!r}")
        if lead is not None and lead != word:
            raise ValueError(f"verdict row {row.get('key')!r}: decision {word!r} contradicts "
                             f"the verdict's leading word {lead!r}")
        return word, rest if lead is not None else text
    return lead, rest


#: Each decision word as the predicate of a sentence whose subject is the claim: the words that
#: are verbs stand alone ("the link holds"), the adjectives take "is" ("the link is inconclusive").
_PREDICATE = {"holds": "holds", "fails": "fails", "inconclusive": "is inconclusive",
              "not testable": "is not testable", "exact": "is exact"}


def verdict_predicate(word: str) -> str:
    """A decision word of :data:`posbias_nb.stats.VERDICTS` as the predicate of a sentence about
    the claim, so that prose reads "the link holds" or "the link is inconclusive", never "the
    link is holds".  Glue it after the claim's subject, with no verb of its own.

    Raises
    ------
    ValueError
        A word that is not a decision word.

    Examples
    --------
    >>> "The link " + verdict_predicate("fails") + " for SmolLM2."
    'The link fails for SmolLM2.'
    >>> verdict_predicate("inconclusive")
    'is inconclusive'
    """
    if word not in _PREDICATE:
        raise ValueError(f"verdict_predicate: {word!r} is not one of {tuple(_PREDICATE)}")
    return _PREDICATE[word]


class Badge:
    """A coloured badge for a decision word: HTML for the website (sphinx-design's badge shape,
    ``sd-badge``, coloured by the book's ``_assets/posbias.css``), the bare word as plain text
    elsewhere.  Glued by :func:`verdict_table` and pasted across documents with the ``{glue}``
    role, which pastes the HTML.

    ``exact``: the claim was checked exactly (:func:`is_exact`): its word (holds, fails) is
    followed by the **exact** badge, which the legend defines, so that the badge says what the
    row's measurement says ("exact: ...")."""

    def __init__(self, word: str | None, exact: bool = False):
        from . import stats

        if word is not None and word not in stats.VERDICTS:
            raise ValueError(f"a badge shows one of {stats.VERDICTS} or None, got {word!r}")
        self.word = word
        self.exact = bool(exact) and word != "exact"

    @property
    def text(self) -> str:
        return (self.word if self.word is not None else NO_DECISION) + \
            (" (exact)" if self.exact else "")

    def _repr_html_(self) -> str:
        cls = BADGE_STYLE.get(self.word, "posbias-verdict-none")
        word = self.word if self.word is not None else NO_DECISION
        out = f'<span class="sd-badge posbias-verdict {cls}">{word}</span>'
        if self.exact:
            out += (f' <span class="sd-badge posbias-verdict {BADGE_STYLE["exact"]}">'
                    f'exact</span>')
        return out

    def __repr__(self) -> str:
        return self.text


def _plain(v):
    """JSON-able copy: numpy scalars and tuples to plain numbers and lists."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, np.ndarray)):
        return [_plain(x) for x in v]
    return v


def _check_effect(row, word):
    """The row's ``effect`` checked against :func:`posbias_nb.stats.decide`; returns the JSON-able
    effect with its :func:`posbias_nb.stats.margin`, or None when the row has no effect."""
    from . import stats

    eff = row.get("effect")
    if eff is None:
        return None
    k = row.get("key")
    if not isinstance(eff, dict) or "interval" not in eff:
        raise ValueError(f"verdict row {k!r}: effect must be a dict with an 'interval'")
    unknown = set(eff) - set(_EFFECT_KEYS)
    if unknown:
        raise ValueError(f"verdict row {k!r}: effect has unknown keys {sorted(unknown)}; "
                         f"allowed: {_EFFECT_KEYS}")
    args = dict(threshold=eff.get("threshold", 0.0), direction=eff.get("direction", "greater"),
                band=eff.get("band"))
    said = stats.decide(eff["interval"], **args, testable=eff.get("testable", True),
                        exact=eff.get("exact", False))
    if said != word:
        raise ValueError(f"verdict row {k!r}: the verdict's decision is {word!r} but "
                         f"stats.decide on its effect says {said!r}")
    out = _plain(dict(eff))
    if not isinstance(out["interval"], list):
        out["interval"] = [float(out["interval"])] * 3  # an exact scalar
    out["interval"] = [float(x) for x in out["interval"]]
    out["margin"] = list(stats.margin(out["interval"], **args, scale=eff.get("scale")))
    return out


def verdict_dir() -> Path:
    """Where :func:`verdict_table` records each chapter's rows (one JSON file per prefix) for the
    overview figure of chapter :ref:`ch-verdicts`: ``$POSBIAS_VERDICTS_DIR`` if set, else the
    folder ``verdicts`` of the cache (:func:`posbias_nb.cache.cache_dir`), else, with the cache
    off, ``$TMPDIR/posbias_nb/verdicts``."""
    import os
    import tempfile

    from . import cache

    if os.environ.get("POSBIAS_VERDICTS_DIR"):
        return Path(os.environ["POSBIAS_VERDICTS_DIR"])
    d = cache.cache_dir()
    if d is None:
        return Path(tempfile.gettempdir()) / "posbias_nb" / "verdicts"
    return d / "verdicts"


def write_verdict_record(prefix: str, rows) -> Path:
    """Write ``rows`` (JSON-able dicts) as ``{prefix}.json`` in :func:`verdict_dir`, atomically;
    returns the path."""
    import json
    import os
    import tempfile
    import time

    d = verdict_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{prefix}.json"
    blob = json.dumps({"prefix": prefix, "written": time.time(), "rows": _plain(list(rows))},
                      indent=1, sort_keys=True, allow_nan=False)
    fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(blob)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_verdict_records(prefixes, sources=None) -> dict:
    """The rows recorded by :func:`verdict_table` for each prefix, ``{prefix: [row, ...]}``, in
    the order of ``prefixes``.  ``sources`` (optional) maps a prefix to its chapter's source
    file: a record written before the source was last changed is stale.

    Raises
    ------
    FileNotFoundError
        A prefix without a record (its chapter has not been executed), or a stale record.
    """
    import json

    d = verdict_dir()
    out = {}
    for p in prefixes:
        path = d / f"{p}.json"
        if not path.exists():
            raise FileNotFoundError(f"no verdict record {path}: execute the chapter that calls "
                                    f"verdict_table(rows, {p!r}) first")
        rec = json.loads(path.read_text())
        src = (sources or {}).get(p)
        if src is not None and Path(src).exists() and Path(src).stat().st_mtime > rec["written"]:
            raise FileNotFoundError(f"verdict record {path} is older than {src}: execute that "
                                    f"chapter again")
        out[p] = rec["rows"]
    return out


def found_markdown(records, keys=None) -> str:
    """The "What we found" list that opens a chapter: one bullet per recorded verdict row
    (:func:`verdict_table`'s records), the decision's badge, the claim and what we measure, in
    the order of ``keys`` (default: every row).

    Raises
    ------
    ValueError
        A key that is not a row's.
    """
    by = {r["key"]: r for r in records}
    keys = list(by) if keys is None else list(keys)
    missing = [k for k in keys if k not in by]
    if missing or not keys:
        raise ValueError(f"found_markdown: no verdict rows {missing} (rows: {sorted(by)})")
    lines = []
    for k in keys:
        r = by[k]
        why = f" ({table_cell(r['explanation'])})" if r.get("explanation") else ""
        lines.append(f"- {Badge(r['decision'], is_exact(r))._repr_html_()} "
                     f"**{table_cell(r['claim'])}**"
                     f"{why}: {table_cell(r['measured'])}")
    return "\n".join(lines)


def verdict_table(rows, prefix: str, found=None):
    """Render the chapter's closing verdict table, glue every cell for the intro's table, and
    record the rows for the overview figure (chapter :ref:`ch-verdicts`).

    For a row with ``key`` ``k`` it glues ``{prefix}_{k}_claim``, ``_paper``, ``_measured`` and
    ``_verdict`` (strings), ``_badge`` (a :class:`Badge` of the row's :func:`decision` word, or
    of none) and ``_explanation`` (the verdict without its decision word), and every entry of the
    row's optional ``values`` mapping as ``{prefix}_{k}_{name}`` (numbers).

    A row may carry ``decision`` (one of :data:`posbias_nb.stats.VERDICTS`, when its verdict
    does not start with the word) and ``effect``, the interval its verdict was decided from::

        effect=dict(interval=(estimate, low, high), threshold=t,
                    direction="greater" | "less" | "within", band=(a, b),  # band: within only
                    testable=True, exact=False,   # as stats.decide
                    scale=s)                      # the unit of the overview; needed when t == 0

    :func:`posbias_nb.stats.decide` on the effect must give the row's decision word.  The rows,
    with their words, explanations and :func:`posbias_nb.stats.margin`, are written by
    :func:`write_verdict_record`, and ``{prefix}_found`` is glued as Markdown: the "What we
    found" list of :func:`found_markdown` over the keys ``found`` (default every row), which the
    chapter pastes at its top with the ``{glue:md}`` directive.  Returns an
    ``IPython.display.Markdown`` of :func:`verdict_markdown`.

    Raises
    ------
    ValueError
        As :func:`verdict_markdown` and :func:`decision`, a row without a ``key``, a repeated
        key, an effect with unknown keys, or one whose decided word is not the row's.
    """
    from IPython.display import Markdown

    rows = list(rows)
    text = verdict_markdown(rows)
    seen = set()
    record = []
    for r in rows:  # every row checked before anything is glued
        k = r.get("key")
        if not k or k in seen:
            raise ValueError(f"verdict rows need distinct keys, got {k!r}")
        seen.add(k)
        word, why = decision(r)
        record.append(dict(key=k, **{c: str(r[c]) for c in ("claim", "paper", "measured",
                                                             "verdict")},
                           decision=word, explanation=why, effect=_check_effect(r, word)))
        record[-1]["exact"] = is_exact(record[-1])
    for r, rec in zip(rows, record):
        k = rec["key"]
        for col in ("claim", "paper", "measured", "verdict"):
            glue(f"{prefix}_{k}_{col}", str(r[col]), display=False)
        glue(f"{prefix}_{k}_badge", Badge(rec["decision"], rec["exact"]), display=False)
        glue(f"{prefix}_{k}_explanation", rec["explanation"], display=False)
        for name, v in (r.get("values") or {}).items():
            glue(f"{prefix}_{k}_{name}", v, display=False)
    glue(f"{prefix}_found", Markdown(found_markdown(record, found)), display=False)
    write_verdict_record(prefix, record)
    return Markdown(text)
