"""The pipeline study's words: a setting and a verdict as a practitioner reads them."""
from __future__ import annotations

__all__ = ["setting_label", "verdict_phrase"]


def setting_label(model: str, retriever: str) -> str:
    """A setting in words: ``"SmolLM2-135M, BM25"``."""
    names = {"smollm2-135m": "SmolLM2-135M", "gemma3-270m": "Gemma-3-270M"}
    return f"{names.get(model, model)}, {'BM25' if retriever == 'bm25' else 'MiniLM (dense)'}"


def verdict_phrase(word: str, claim: str, detectable: float | None = None) -> str:
    """A verdict word in the words of the claim measured: ``claim`` is ``"log p"`` (the gold
    answer's teacher-forced log p) or ``"answers"`` (greedy accuracy).

    >>> verdict_phrase("holds", "log p")
    "holds: raises the answer's log p"
    >>> verdict_phrase("inconclusive", "answers")
    'inconclusive: better answers not shown at this size'
    """
    what = {"log p": ("raises the answer's log p", "does not raise the answer's log p"),
            "answers": ("answers better", "does not answer better")}
    if claim not in what:
        raise ValueError(f"claim must be 'log p' or 'answers', got {claim!r}")
    up, down = what[claim]
    if word == "holds":
        return f"holds: {up}"
    if word == "fails":
        return f"fails: {down}"
    if word == "inconclusive":
        shown = "a higher log p" if claim == "log p" else "better answers"
        tail = f" (detectable: {detectable:.2f} nats)" if detectable is not None else ""
        return f"inconclusive: {shown} not shown at this size{tail}"
    return word
