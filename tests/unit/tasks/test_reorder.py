"""The prompt remedies (posbias_nb.tasks.reorder) against their anchors.

The oracles are written from each library's documented rule, not from our closed forms:

* LangChain's ``LongContextReorder`` (langchain_community/document_transformers/
  long_context_reorder.py, ``_litm_reordering``): reverse the relevance-ranked list, then walk
  it, putting the documents at even steps in front and at odd steps at the back.
* Haystack's ``LostInTheMiddleRanker`` (haystack/components/rankers/lost_in_the_middle.py,
  ``run``): start from [0]; insert each next document at index ``len // 2 + len % 2``.
* Liu et al.'s ``prompts/qa_with_query_aware_contextualization.prompt`` (nelson-liu/
  lost-in-the-middle): the instruction, ``Question: {question}``, the search results, then
  ``Question: {question}`` and ``Answer:``.
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posbias_nb.tasks import qa, reorder


def langchain_oracle(docs):
    docs = list(docs)[::-1]
    out = []
    for i, d in enumerate(docs):
        if i % 2 == 1:
            out.append(d)
        else:
            out.insert(0, d)
    return out


def haystack_oracle(docs):
    idx = [0]
    for j in range(1, len(docs)):
        idx.insert(len(idx) // 2 + len(idx) % 2, j)
    return [docs[i] for i in idx]


@given(st.integers(1, 40))
def test_long_context_reorder_is_langchains_rule(n):
    docs = [f"d{i}" for i in range(n)]
    assert reorder.reorder("long-context-reorder", docs) == langchain_oracle(docs)


@given(st.integers(1, 40))
def test_lost_in_the_middle_ranker_is_haystacks_rule(n):
    docs = [f"d{i}" for i in range(n)]
    assert reorder.reorder("lost-in-the-middle-ranker", docs) == haystack_oracle(docs)


def test_the_top_document_lands_where_the_libraries_say():
    # LangChain: last for an even count, first for an odd one; Haystack: always first
    for n in (2, 4, 10):
        assert reorder.reorder("long-context-reorder", list(range(n)))[-1] == 0
        assert reorder.reorder("lost-in-the-middle-ranker", list(range(n)))[0] == 0
    for n in (1, 3, 9):
        assert reorder.reorder("long-context-reorder", list(range(n)))[0] == 0
    # the least relevant sits in the middle
    assert reorder.reorder("long-context-reorder", list(range(7)))[3] == 6


def test_the_oracles_reject_a_wrong_rule():
    """The anchors can tell a plausible wrong rule apart (top document always last)."""
    wrong = lambda n: reorder.lost_in_the_middle(n)[::-1]  # noqa: E731
    assert [list(range(5))[i] for i in wrong(5)] != langchain_oracle(list(range(5)))
    assert [list(range(4))[i] for i in wrong(4)] != haystack_oracle(list(range(4)))


def test_curve_order_by_hand():
    """Slot quality (mean log p of the gold answer per gold slot), worked by hand: slots by
    quality 3 (-0.2) > 4 (-0.5) > 0 (-0.9) > 2 (-1.4) > 1 (-2.0), so the most relevant goes to
    slot 3, the second to slot 4, the third to slot 0, the fourth to slot 2, the last to 1."""
    quality = [-0.9, -2.0, -1.4, -0.2, -0.5]
    docs = ["r0", "r1", "r2", "r3", "r4"]
    assert reorder.reorder("curve-order", docs, quality=quality) == ["r2", "r4", "r3", "r0", "r1"]
    # ties go to the earlier slot
    assert reorder.quality_order([1.0, 1.0, 0.0]) == [0, 1, 2]


def test_curve_order_with_a_u_shaped_quality_is_an_ends_first_rule():
    u = [3, 1, 0, 2, 4]   # the last slot best, then the first, the middle worst
    assert reorder.reorder("curve-order", list("abcde"), quality=u) == list("bdeca")


def test_prior_slot_quality_sums_the_prior_over_each_slot():
    prior = np.array([5.0, 1, 1, 0.1, 0.1, 0.2, 2, 3])
    q = reorder.prior_slot_quality(prior, [(1, 3), (3, 6), (6, 8)])
    np.testing.assert_allclose(q, [2.0, 0.4, 5.0])
    assert reorder.quality_order(q) == [1, 2, 0]
    with pytest.raises(ValueError, match="outside a prior"):
        reorder.prior_slot_quality(prior, [(6, 9)])
    with pytest.raises(ValueError, match="empty"):
        reorder.prior_slot_quality(prior, [(3, 3)])


def test_query_aware_prompt_is_liu_et_als_template():
    docs = [qa.Document("A", "one."), qa.Document("B", "two.")]
    expected = (
        "Write a high-quality answer for the given question using only the provided search "
        "results (some of which might be irrelevant).\n\nQuestion: who?\n\n"
        "Document [1](Title: A) one.\nDocument [2](Title: B) two.\n\nQuestion: who?\nAnswer:")
    assert reorder.query_aware_prompt("who?", docs) == expected
    # the plain prompt is the same without the first question
    assert qa.qa_prompt("who?", docs) == expected.replace("Question: who?\n\n", "", 1)
    assert reorder.reorder("query-aware", docs) == docs


def test_bm25_ranking_puts_the_matching_document_first():
    docs = [qa.Document("Paris", "The capital of France is Paris."),
            qa.Document("Eiffel", "The Eiffel tower was built by Gustave Eiffel in 1889."),
            qa.Document("Rome", "Rome is in Italy.")]
    r = reorder.bm25_ranking("who built the eiffel tower", docs)
    assert r[0] == 1 and sorted(r) == [0, 1, 2]
    # no overlap at all: the given order
    assert reorder.bm25_ranking("zzz", docs) == [0, 1, 2]


@pytest.mark.parametrize("call, match", [
    (lambda: reorder.reorder("long-context-reorder", []), "empty document list"),
    (lambda: reorder.reorder("best-order", ["a"]), "unknown prompt remedy 'best-order'"),
    (lambda: reorder.reorder("curve-order", ["a", "b"]), "needs a slot quality"),
    (lambda: reorder.reorder("curve-order", ["a", "b"], quality=[1, 2, 3]),
     "3 slots for 2 documents"),
    (lambda: reorder.apply_order(["a", "b"], [0, 0]), "permutation"),
    (lambda: reorder.slot_ranking([1.0, float("nan")]), "finite"),
    (lambda: reorder.lost_in_the_middle(0), "positive integer, got 0"),
])
def test_bad_input_is_refused_by_name(call, match):
    with pytest.raises(ValueError, match=match):
        call()
