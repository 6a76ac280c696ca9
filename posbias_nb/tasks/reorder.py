r"""Remedies in the prompt: where each document goes, as pure functions on a list of documents.
No torch, no model: what a practitioner changes in a retrieval-augmented pipeline.

Chapter :ref:`ch-documents`; ``posbias fix`` chooses among them
(:mod:`posbias_nb.experiments.remedy.fix`).

Every reorder takes the documents **in descending relevance** (the first is the most relevant,
as a retriever or a ranker returns them) and returns the same documents in prompt order.

=============================  ===============================================================
``long-context-reorder``       LangChain's ``LongContextReorder`` (``langchain_community.
                               document_transformers``; LlamaIndex's ``LongContextReorder``
                               postprocessor gives the same order): the list reversed, then
                               each document put alternately in front and at the back, so the
                               most relevant lands **last for an even count, first for an odd
                               one**, the least relevant in the middle
                               (:func:`long_context_reorder`).
``lost-in-the-middle-ranker``  Haystack's ``LostInTheMiddleRanker`` (and LLMLingua's
                               ``two_stage`` reorder): the most relevant always **first**, the
                               second last, the third second, ... (:func:`lost_in_the_middle`).
``query-aware``                Liu et al. (2023, section 4.2)'s query-aware contextualization,
                               their ``qa_with_query_aware_contextualization.prompt``: the
                               question before and after the documents; the order is kept
                               (:func:`query_aware_prompt`).
``curve-order`` (ours)         the documents assigned to the slots in the order of a measured
                               slot quality, the most relevant where the model hears best
                               (after AttnRank, arXiv 2508.05128): the quality is the mean log p
                               of the gold answer per gold slot on a tuning set
                               (:func:`quality_order`).
``prior-order`` (ours)         the same, with the quality of a slot read from an influence
                               prior summed over the slot's tokens (:func:`prior_slot_quality`).
=============================  ===============================================================

Rankers (what "descending relevance" means): :func:`bm25_ranking` (BM25 of the question
against the prompt's documents), or the order the file gives.  LongLLMLingua's question
likelihood needs a model and lives in :mod:`posbias_nb.measure`.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..remedy_table import TABLE as _TABLE
from .qa import ANSWER_PREFIX, QA_INSTRUCTION, Document, search_results

__all__ = ["PROMPT_REMEDIES", "FIXED_RULES", "long_context_reorder", "lost_in_the_middle",
           "quality_order", "slot_ranking", "prior_slot_quality", "query_aware_prompt",
           "bm25_ranking", "apply_order", "reorder"]

#: The prompt remedies :func:`reorder` applies (those of the remedy table that need no model):
#: fixed rules need only the relevance order, the curve and prior orders a slot quality,
#: ``query-aware`` changes the template, not the order.  (Attention sorting reads the model's
#: attention: :func:`posbias_nb.measure.positional.attention_sort`.)
FIXED_RULES = tuple(n for n, r in _TABLE.items() if r["kind"] == "prompt"
                    and r["needs"] == ("ranker",))
PROMPT_REMEDIES = tuple(n for n, r in _TABLE.items() if r["kind"] == "prompt"
                        and "model" not in r["needs"])


def _count(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"a document count must be a positive integer, got {n!r}")
    return int(n)


def lost_in_the_middle(n: int) -> list[int]:
    """Haystack's ``LostInTheMiddleRanker`` order for ``n`` documents ranked by relevance: the
    relevance ranks (0 = most relevant) in prompt order.  The even ranks fill the prompt from the
    front, the odd ranks from the back, so rank 0 is first, rank 1 last, rank 2 second, and the
    least relevant sit in the middle.

    >>> lost_in_the_middle(5)
    [0, 2, 4, 3, 1]
    """
    n = _count(n)
    return list(range(0, n, 2)) + list(range(1, n, 2))[::-1]


def long_context_reorder(n: int) -> list[int]:
    """LangChain's ``LongContextReorder`` order for ``n`` documents ranked by relevance: the
    relevance ranks in prompt order.  Its rule (reverse the list, then put the documents
    alternately in front and at the back) is Haystack's order for an odd count and that order
    reversed for an even one: the most relevant document comes first for an odd count and last
    for an even count.

    >>> long_context_reorder(4), long_context_reorder(5)
    ([1, 3, 2, 0], [0, 2, 4, 3, 1])
    """
    order = lost_in_the_middle(n)
    return order if n % 2 else order[::-1]


def slot_ranking(quality) -> list[int]:
    """The slots from the best to the worst by ``quality`` (higher is better); ties go to the
    earlier slot.  ValueError on an empty or non-finite quality."""
    q = np.asarray(quality, dtype=float)
    if q.ndim != 1 or q.size == 0 or not np.all(np.isfinite(q)):
        raise ValueError(f"a slot quality must be a non-empty 1-d array of finite numbers, "
                         f"got {quality!r}")
    return [int(i) for i in np.lexsort((np.arange(q.size), -q))]


def quality_order(quality) -> list[int]:
    """``curve-order`` and ``prior-order``: the relevance ranks in prompt order when the document
    of relevance rank r goes to the r-th best slot by ``quality`` (one number a slot).

    >>> quality_order([0.0, -2.0, -1.0, 0.5])   # slot 3 best, then 0, 2, 1
    [1, 3, 2, 0]
    """
    best = slot_ranking(quality)
    order = [0] * len(best)
    for rank, slot in enumerate(best):
        order[slot] = rank
    return order


def prior_slot_quality(prior, spans) -> np.ndarray:
    """The quality of each document slot read from an influence prior: the prior (one number a
    token position, e.g. the last row of N^H or a measured Jacobian profile) summed over the
    slot's token span ``[start, end)``.  ValueError on a span outside the prior or empty."""
    p = np.asarray(prior, dtype=float)
    if p.ndim != 1 or not np.all(np.isfinite(p)):
        raise ValueError(f"an influence prior must be a 1-d array of finite numbers, got shape "
                         f"{p.shape}")
    out = []
    for i, (a, b) in enumerate(spans):
        if not (0 <= a < b <= p.size):
            raise ValueError(f"slot {i}'s span {(a, b)} is empty or outside a prior of "
                             f"{p.size} positions")
        out.append(float(p[a:b].sum()))
    if not out:
        raise ValueError("no slots: a prompt needs at least one document")
    return np.asarray(out)


def apply_order(documents: Sequence, order: Sequence[int]) -> list:
    """The documents (in descending relevance) placed in prompt order: slot i gets the document
    of relevance rank ``order[i]``.  ValueError unless ``order`` is a permutation of the
    documents' ranks."""
    docs = list(documents)
    if not docs:
        raise ValueError("an empty document list: nothing to reorder")
    if sorted(int(o) for o in order) != list(range(len(docs))):
        raise ValueError(f"a slot order must be a permutation of 0..{len(docs) - 1} (one slot a "
                         f"document), got {list(order)!r}")
    return [docs[int(o)] for o in order]


def query_aware_prompt(question: str, documents) -> str:
    """Liu et al.'s query-aware contextualization
    (``prompts/qa_with_query_aware_contextualization.prompt``): their QA prompt with the question
    also before the documents.

    >>> print(query_aware_prompt("who?", [Document("T", "x.")]))
    Write a high-quality answer for the given question using only the provided search results (some of which might be irrelevant).
    <BLANKLINE>
    Question: who?
    <BLANKLINE>
    Document [1](Title: T) x.
    <BLANKLINE>
    Question: who?
    Answer:
    """
    return (f"{QA_INSTRUCTION}\n\nQuestion: {question}\n\n{search_results(question, documents)}"
            f"\n\nQuestion: {question}\n{ANSWER_PREFIX}")


def bm25_ranking(question: str, documents) -> list[int]:
    """The documents' indices in descending BM25 relevance to the question (``bm25s``, Lucene's
    variant, ``k1 = 1.5``, ``b = 0.75``, English stop words, the prompt's own documents as the
    corpus); ties keep the given order."""
    import bm25s

    docs = list(documents)
    if not docs:
        raise ValueError("an empty document list: nothing to rank")
    corpus = [f"{d.title} {d.text}" if isinstance(d, Document) else str(d) for d in docs]
    retriever = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    retriever.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False),
                    show_progress=False)
    q = bm25s.tokenize([str(question)], stopwords="en", show_progress=False)
    inv = {i: t for t, i in q.vocab.items()}
    words = [inv[i] for i in q.ids[0] if inv[i] in retriever.vocab_dict]
    scores = retriever.get_scores(words) if words else np.zeros(len(docs))
    return [int(i) for i in np.lexsort((np.arange(len(docs)), -np.asarray(scores)))]


def reorder(name: str, documents: Sequence, *, quality=None) -> list:
    """One call for a pipeline: the documents (in descending relevance, as a retriever returns
    them) in the prompt order of the remedy ``name``.  ``curve-order`` and ``prior-order`` need
    the slot ``quality`` a remedy file carries (one number a slot, as many as documents);
    ``query-aware`` keeps the order (build its prompt with :func:`query_aware_prompt`).

    >>> reorder("long-context-reorder", ["a", "b", "c", "d"])   # a is the most relevant
    ['b', 'd', 'c', 'a']
    """
    docs = list(documents)
    if name not in PROMPT_REMEDIES:
        raise ValueError(f"unknown prompt remedy {name!r}; one of {', '.join(PROMPT_REMEDIES)}")
    if not docs:
        raise ValueError("an empty document list: nothing to reorder")
    if name == "long-context-reorder":
        return apply_order(docs, long_context_reorder(len(docs)))
    if name == "lost-in-the-middle-ranker":
        return apply_order(docs, lost_in_the_middle(len(docs)))
    if name == "query-aware":
        return docs
    if quality is None:
        raise ValueError(f"{name} needs a slot quality (one number a slot), from a remedy file")
    q = np.asarray(quality, dtype=float)
    if q.shape != (len(docs),):
        raise ValueError(f"{name}: a slot quality of {q.size} slots for {len(docs)} documents")
    return apply_order(docs, quality_order(q))
