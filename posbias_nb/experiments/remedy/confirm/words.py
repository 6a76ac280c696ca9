"""The confirmatory study's words: a verdict as a practitioner reads it, and the primary
remedy's name."""
from __future__ import annotations

__all__ = ["verdict_phrase", "primary_label"]


def verdict_phrase(word: str, detectable: float) -> str:
    """A verdict word in the words a practitioner reads: "it helps" only where the claim holds,
    "it does not help" only where it fails; an inconclusive one says what the design could
    detect.

    >>> verdict_phrase("inconclusive", 0.41)
    'inconclusive: not shown to help at this size (detectable gains ≥ 0.41 nats)'
    """
    if word == "holds":
        return "holds: it helps"
    if word == "fails":
        return "fails: it does not help"
    if word == "inconclusive":
        return (f"inconclusive: not shown to help at this size (detectable gains ≥ "
                f"{detectable:.2f} nats)")
    return word


def primary_label() -> str:
    """The primary remedy in words."""
    return "LangChain's LongContextReorder (BM25 ranking, 10 documents: the top one last)"
