"""The pipeline study (posbias_nb.experiments.remedy.pipeline, issue 62): its questions, its
placements, its retrieval and its decision rule, without a language model."""
import numpy as np
import pytest
from scipy.stats import binomtest

from posbias_nb.experiments.remedy import confirm, pipeline

from posbias_nb.experiments.base import design
from posbias_nb.tasks import qa, reorder


def test_questions_are_new_fixed_and_registered():
    d = pipeline.DESIGN
    design.check(d)
    q = pipeline.questions()
    assert q == list(d["questions"]) and len(q) == len(set(q))
    assert len(q) == max(d["questions_per_model"].values())
    assert not set(q) & set(confirm.DESIGN["questions"])
    assert not set(q) & set(confirm.DESIGN["excluded"])
    assert set(d["excluded"]) == set(confirm.DESIGN["questions"]) | set(confirm.DESIGN["excluded"])


def test_placements_follow_each_rule():
    docs = [qa.Document(f"T{i}", f"text {i}") for i in range(10)]
    quality = np.arange(10.0)  # the last slot best
    orders = {"curve-order": reorder.quality_order(quality),
              "prior-measured": reorder.quality_order(quality[::-1])}
    shuffles = [np.random.default_rng(s).permutation(10).tolist() for s in range(4)]
    got = dict(zip(pipeline.ARMS, pipeline.placement_orders("q", docs, orders, shuffles)))
    assert got["retriever"] == docs
    assert got["primary"][-1] == docs[0] and got["primary"][0] == docs[1]  # LangChain, even count
    assert got["curve-order"][-1] == docs[0] and got["prior-measured"][0] == docs[0]
    for s in range(4):
        assert got[f"shuffle-{s}"] == [docs[i] for i in shuffles[s]]
    assert all(sorted(v, key=lambda d: d.title) == docs for v in got.values())


def test_retrieve_and_recall_refuse_bad_input():
    with pytest.raises(ValueError, match="unknown retriever 'sparse'"):
        pipeline.retrieve("sparse")
    with pytest.raises(ValueError, match="k must lie in 1..20"):
        pipeline.recall("bm25", 21)
    with pytest.raises(ValueError, match="not a setting of the design"):
        pipeline.measure("gemma3-270m", "dense", [0])


def test_bm25_retrieval_finds_gold_ranks_consistently():
    r = pipeline.retrieve("bm25")
    passages, gold, examples = pipeline.corpus()
    got = np.asarray(r["retrieved"])
    assert got.shape == (len(examples), 20)
    ranks = np.asarray(r["gold_rank"])
    hit = ranks >= 0
    assert (got[hit, ranks[hit]] == np.asarray(gold)[hit]).all()
    share, lo, hi = pipeline.recall("bm25", 20)
    assert share == hit.mean() and lo <= share <= hi


def _result(gain, n=40, seed=0, spread=1.0, found=None, correct=None):
    rng = np.random.default_rng(seed)
    base = rng.normal(-8, 2, n)
    lp = np.stack([base + (gain if a == "primary" else 0.0)
                   + (rng.normal(0, spread, n) if a != "retriever" else 0.0)
                   for a in pipeline.ARMS])
    gr = np.zeros(n, dtype=int) if found is None else np.where(found, 0, -1)
    ok = np.zeros((2, n), dtype=bool) if correct is None else np.asarray(correct, dtype=bool)
    return {"logprob": lp, "correct": ok, "gold_rank": gr, "prompt_len": np.full(n, 900)}


def test_decisions_hold_fail_and_inconclusive():
    s = ("smollm2-135m", "bm25")
    up = pipeline.decisions({s: _result(2.0)})[s]
    down = pipeline.decisions({s: _result(-2.0)})[s]
    flat = pipeline.decisions({s: _result(0.0, n=6, spread=3.0)})[s]
    assert up["primary"]["verdict"] == "holds" and down["primary"]["verdict"] == "fails"
    assert flat["primary"]["verdict"] == "inconclusive"
    assert up["primary"]["interval"][1] > 0 >= down["primary"]["interval"][2]


def test_subsets_and_answers():
    s = ("smollm2-135m", "bm25")
    n = 40
    found = np.arange(n) >= 2  # two questions whose gold was missed: not testable
    correct = np.zeros((2, n), dtype=bool)
    correct[1, :12] = True  # only the reorder right on 12
    correct[0, 12:14] = True  # only the retriever's order right on 2
    d = pipeline.decisions({s: _result(1.0, found=found, correct=correct)})[s]
    fam = d["secondary"]
    assert fam["primary | gold not retrieved"]["verdict"] == "not testable"
    assert fam["primary | gold retrieved"]["verdict"] in ("holds", "inconclusive")
    assert d["n_retrieved"] == n - 2
    a = d["answers"]
    assert a["discordant"] == (12, 2)
    assert a["p_mcnemar"] == pytest.approx(binomtest(12, 14, 0.5).pvalue)
    assert a["primary - retriever"][0] == pytest.approx(10 / n)
    assert a["verdict"] == "holds"
    # a counterexample: the same counts the other way round fail
    d2 = pipeline.decisions({s: _result(1.0, found=found, correct=correct[::-1])})[s]
    assert d2["answers"]["verdict"] == "fails"


def test_mcnemar_without_discordant_pairs():
    assert pipeline.mcnemar_p([1, 0, 1], [1, 0, 1]) == 1.0


def test_verdict_phrases_name_the_claim():
    assert pipeline.verdict_phrase("holds", "log p") == "holds: raises the answer's log p"
    assert pipeline.verdict_phrase("fails", "answers") == "fails: does not answer better"
    assert "0.42 nats" in pipeline.verdict_phrase("inconclusive", "log p", 0.42)
    with pytest.raises(ValueError, match="claim must be"):
        pipeline.verdict_phrase("holds", "accuracy")


def test_a_retrieval_is_checked_against_its_record_up_to_ties(tmp_path, monkeypatch):
    """Sampled by make test, pipeline-retrieve's recorded BM25 ranking is computed anew and
    checked up to ties (corpus.ranking_agrees): today's code verifies it and the recorded
    ranking is returned; a changed ranker (its scores moved by noise) fails by name."""
    import json
    from pathlib import Path

    from posbias_nb import cache
    from posbias_nb.measure import entry
    from posbias_nb.provenance import verify
    from posbias_nb.tasks import corpus

    recorded = Path(__file__).resolve().parents[3] / "recorded"
    passages, _, _ = pipeline.corpus()
    params = {"def": pipeline.DEFINITION, "retriever": "bm25",
              "corpus": pipeline.measurements._corpus_digest(passages), "k": pipeline.config._K_MAX,
              "library": entry.library_versions()}
    k = cache.key("pipeline-retrieve", params)
    if not (recorded / "cache" / "pipeline-retrieve" / f"{k}.npz").is_file():
        pytest.skip(f"no recorded BM25 retrieval for this library stack ({k[:12]})")
    monkeypatch.setenv("POSBIAS_RECORDED_DIR", str(recorded / "cache"))
    (tmp_path / "keys.txt").write_text(f"pipeline-retrieve/{k}\n")
    monkeypatch.setenv("POSBIAS_RECORDED_VERIFY_KEYS", str(tmp_path / "keys.txt"))
    rec = cache.load_recorded("pipeline-retrieve", params)

    def run(name):
        monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / name))
        monkeypatch.setenv("POSBIAS_CACHE_LOG", str(tmp_path / f"{name}.jsonl"))
        try:
            out = pipeline.retrieve("bm25")
        except verify.RecordedMismatch as e:
            out = e
        log = (tmp_path / f"{name}.jsonl").read_text().splitlines()
        return out, [json.loads(x)["event"] for x in log]

    out, events = run("today")
    assert events[-1] == "verified", events
    np.testing.assert_array_equal(out["retrieved"], rec["retrieved"])
    scores = corpus.BM25Index.scores
    noise = np.random.default_rng(0)
    monkeypatch.setattr(corpus.BM25Index, "scores", lambda self, q: scores(self, q)
                        + noise.normal(0, 1.0, (len(q), len(self))))
    out, events = run("changed")
    assert isinstance(out, verify.RecordedMismatch) and events[-1] == "mismatch"
    assert "pipeline-retrieve" in str(out) and "ranks lie more than 0" in str(out)
