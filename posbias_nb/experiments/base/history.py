"""A study's design history in words: the registry's entries as a Markdown table, for its
chapter.
"""
from __future__ import annotations

import re

from .design import Design, check, history

__all__ = ["history_markdown"]


def history_markdown(design: Design, path=None) -> str:
    """The study's design history as a Markdown table (date, design hash, verdict-code hash,
    reason), its current hashes checked first (:func:`~posbias_nb.experiments.base.design.check`)."""
    check(design, path)
    rows = ["| date | design hash | verdict code | change |", "|---|---|---|---|"]
    for e in history(design.study, path):
        h = f"`{e['hash'][:12]}`" if e["hash"] else "(not recorded)"
        c = f"`{e['code'][:12]}`" if e.get("code") else "(not recorded)"
        rows.append(f"| {e['date']} | {h} | {c} | {_reason_markdown(e['reason'])} |")
    return "\n".join(rows)


#: What a registry reason writes as code: a command option (``--quick``), a dotted name
#: (``stats.decide``, ``realqa.jacobian_prior``) or a name with an underscore
#: (``best_subspan_em``), each set as a code span so that a page's smart quotes do not turn
#: ``--`` into a dash and Markdown does not read ``_`` as emphasis.
_CODE_TOKEN = re.compile(r"(?<![\w`/.-])(--[a-z][\w-]*|[A-Za-z_]\w+(?:\.[A-Za-z_]\w+)+(?:\(\))?"
                         r"|[A-Za-z]\w*_\w+)")


def _reason_markdown(reason: str) -> str:
    """A registry reason as the text of one Markdown table cell: code-like tokens as code spans
    (:data:`_CODE_TOKEN`), a ``|`` escaped, line breaks as spaces.

    >>> _reason_markdown("stats.decide and best_subspan_em at --quick; |rho| > 0.5")
    '`stats.decide` and `best_subspan_em` at `--quick`; \\\\|rho\\\\| > 0.5'
    """
    parts = re.split(r"(`[^`]*`)", str(reason).replace("\n", " "))
    out = [p if p.startswith("`") and p.endswith("`") and len(p) > 1
           else _CODE_TOKEN.sub(r"`\1`", p) for p in parts]
    return "".join(out).replace("|", "\\|")
