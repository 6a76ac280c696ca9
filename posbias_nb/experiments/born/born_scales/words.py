"""The born-scales study in words: each part's claim for the verdict rows, and what each group
of matrices moved."""
from __future__ import annotations

from .config import GROUP_WORDS, PARTS, STAT_WORDS

__all__ = ["verdict_rows", "moved_text"]


#: Each part's claim in words, for the verdict rows.
_PART_CLAIMS = {
    "matched": "At a fixed logit scale g, the born shape does not depend on width",
    "factorial": "Each group of matrices leaves each shape statistic within its margin",
    "control": "With QK-norm (Gemma-3), query/key matrices ×10 change nothing",
    "prediction": "A narrow model at the full-width scales predicts the full-width shape",
}


def verdict_rows(summaries: dict, notes: dict | None = None) -> list[dict]:
    """The chapter's verdict rows (:func:`posbias_nb.notebook.verdict_table`), one per part of
    ``summaries`` (``{part: summary(part)}``): the part's claim, its family's claims counted by
    verdict (and ``notes[part]``, a sentence of what was measured, where given), and the
    family's verdict (:func:`summary`)."""
    notes = notes or {}
    from .... import notebook

    rows = []
    for part, s in summaries.items():
        if part not in _PART_CLAIMS:
            raise ValueError(f"unknown part {part!r}; expected one of {', '.join(PARTS)}")
        counts = notebook.decision_counts([dict(decision=w) for w in s["words"].values()])
        rows.append(dict(key=f"born_scales_{part}", claim=_PART_CLAIMS[part],
                         paper="(beyond both papers: the seed assumes uniform attention, "
                               "the limit g → 0)",
                         measured=f"{len(s['words'])} equivalence claims: {counts}"
                                  + (f"; {notes[part]}" if part in notes else ""),
                         verdict=s["verdict"]))
    return rows


def moved_text(by_group: dict) -> str:
    """:func:`moved_by_group` in words, one clause per group."""
    parts = []
    for grp, x in by_group.items():
        if x["moved"]:
            what = "; ".join(f"{STAT_WORDS[k]} ({', '.join(f'{c} {e:+.2f}' for c, e in v.items())})"
                             for k, v in x["moved"].items())
        else:
            what = "no statistic beyond its margin"
        parts.append(f"the {GROUP_WORDS[grp]}: {what}")
    return "; ".join(parts)
