"""The confirmatory study of the prompt remedies (posbias_nb.experiments.remedy.confirm, issue 53):
its questions, its placements and its decision rule, without a model."""
import numpy as np
import pytest

from posbias_nb import stats
from posbias_nb.experiments.remedy import confirm
from posbias_nb.experiments.prompt import realqa
from posbias_nb.experiments.base import prompts as prompts_mod
from posbias_nb.tasks import reorder
from posbias_nb.experiments.base import study


def test_questions_are_new_and_fixed():
    q = confirm.questions()
    d = confirm.DESIGN
    assert q == list(d["questions"]) and len(q) == len(set(q)) >= 60
    used = set(realqa.DESIGN["pilot"]) | set(realqa.DESIGN["test"])
    assert not used & set(q)
    # posbias fix's own questions (quick and full sizes, seed 0) are left out too
    n = d["data"]["examples_in_file"]
    assert not set(study.draw_examples(n, 24, 0).tolist()) & set(q)
    assert not set(study.draw_examples(n, 48, 0).tolist()) & set(q)
    assert set(d["excluded"]) >= used


@pytest.fixture(scope="module")
def item():
    d = realqa.DESIGN
    part = prompts_mod.prepare(realqa.data_path("qa"), 10, list(d["positions"]), None, None, 0,
                            "liu-qa", select=list(d["pilot"])[:1])
    return part["items"][0]


def test_placements_put_each_arm_where_its_rule_says(item):
    pos = list(confirm.DESIGN["positions"])
    quality = np.array([3.0, 0, 0, 0, 0, 0, 0, 0, 1.0, 5.0])   # slot 10 best, then 1, then 9
    orders = {a: reorder.quality_order(quality)
              for a in ("curve-order", "prior-born", "prior-measured")}
    shuffle = np.random.default_rng(0).permutation(10)
    texts, gold_at, top1 = confirm.placement_orders(item, pos, orders, best=9, shuffle=shuffle)
    A = {a: i for i, a in enumerate(confirm.ARMS)}
    assert texts.shape == gold_at.shape == (len(confirm.ARMS), len(pos))
    # the ceiling: the gold passage at the best slot from every original slot, one prompt
    assert (gold_at[A["ceiling"]] == 9).all() and len(set(texts[A["ceiling"]])) == 1
    # the shuffle: one permutation a question, the same prompt from every original slot
    assert len(set(texts[A["shuffle"]])) == 1
    # LangChain's rule at an even count puts BM25's top document last, Haystack's first; the
    # curve order puts it at the best slot by the quality (slot 10 here)
    for j in range(len(pos)):
        if top1[j]:
            assert gold_at[A["primary"], j] == 9 and gold_at[A["haystack"], j] == 0
            assert gold_at[A["curve-order"], j] == 9
    docs = item["documents"][0]
    ranked = [docs[i] for i in reorder.bm25_ranking(item["question"], docs)]
    want = reorder.apply_order(ranked, reorder.long_context_reorder(10))
    got = texts[A["primary"], 0]
    assert got == confirm.measurements.qa.qa_prompt(item["question"], want)


def _result(gain, n=40, seed=0, spread=1.0):
    """A synthetic run whose primary arm gains ``gain`` nats a question on average."""
    rng = np.random.default_rng(seed)
    base = rng.normal(-8, 1, size=(n, 5))
    lp = np.stack([base + rng.normal(gain if a in ("primary", "ceiling") else 0.0, spread,
                                     size=(n, 1)) for a in confirm.ARMS])
    return {"base_logprob": base, "logprob": lp,
            "correct": rng.random((2, n, 5)) < 0.3,
            "top1": rng.random((n, 5)) < 0.5}


@pytest.mark.parametrize("gain, word", [(1.0, "holds"), (-1.0, "fails"), (0.0, None)])
def test_primary_verdict_follows_the_one_sided_test(gain, word):
    res = _result(gain)
    out = confirm.decisions({"m": res})["m"]
    g = confirm.gains(res)["primary"]
    lo = stats.one_sided_bounds(g)[1]
    assert out["primary"]["interval"][1] == pytest.approx(lo)
    if word:
        assert out["primary"]["verdict"] == word
    assert out["primary"]["interval"][1] <= out["primary"]["interval"][0]
    assert out["primary"]["detectable"] == pytest.approx(
        stats.detectable_effect(float(np.std(g, ddof=1)), g.size))
    assert set(out["secondary"]) == {"haystack", "curve-order", "prior-born", "prior-measured",
                                     "primary - shuffle", "prior-born - curve-order",
                                     "prior-measured - curve-order"}


def test_the_gain_is_the_mean_over_original_slots():
    res = _result(0.0, n=3)
    res["logprob"][0] = res["base_logprob"] + np.array([1.0, 0, 0, 0, 4.0])
    assert confirm.gains(res)["primary"] == pytest.approx([1.0, 1.0, 1.0])


def test_only_a_failed_claim_reads_does_not_help():
    """'does not help' only where the decision rule says fails (issue 53): the words come from
    one function, and no chapter types them."""
    from pathlib import Path

    assert confirm.verdict_phrase("fails", 0.3).endswith("does not help")
    for word in ("holds", "inconclusive", "not testable"):
        assert "does not help" not in confirm.verdict_phrase(word, 0.3)
    assert "detectable gains ≥ 0.30 nats" in confirm.verdict_phrase("inconclusive", 0.3)
    book = Path(__file__).resolve().parents[3] / "book"
    typed = [p.name for p in book.glob("*.md") if "does not help" in p.read_text()]
    assert not typed, typed
