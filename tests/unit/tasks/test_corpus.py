"""The retrieval corpus and its retrievers (posbias_nb/tasks/corpus.py, measure/dense.py; the
pipeline study of chapter ch-practice): the oracle file's corpus, a corpus file's refusals
naming line and field, BM25 over the corpus against bm25s scored directly, top-k's tie rule,
gold ranks, and the dense encoder against sentence-transformers (the library as oracle)."""
import gzip
import json

import numpy as np
import pytest

from posbias_nb.experiments.prompt import realqa
from posbias_nb.tasks import corpus, qa


def test_oracle_corpus_holds_every_gold_passage_once():
    passages, gold, examples = corpus.oracle_corpus(realqa.data_path("qa"))
    assert len(examples) == 2655 and len(passages) == len(set(passages))
    assert all(passages[g] == e.gold_document for g, e in zip(gold, examples))
    # questions that share a gold passage share its index
    assert len(set(gold)) == len(passages)


def _write(path, lines, gz=False):
    text = "".join(lines)
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("gz", [False, True])
def test_read_corpus(tmp_path, gz):
    p = _write(tmp_path / "c.jsonl", [json.dumps({"title": "A", "text": "x y"}) + "\n", "\n",
                                       json.dumps({"title": "", "text": "z"}) + "\n"], gz)
    assert corpus.read_corpus(p) == [qa.Document("A", "x y"), qa.Document("", "z")]


@pytest.mark.parametrize("lines, match", [
    (['{"title": "A", "text": "x"}\n', "not json\n"], r"line 2: not JSON"),
    (['[1, 2]\n'], r"line 1: a JSON object"),
    (['{"title": "A"}\n'], r"line 1: field 'text' must be a string, got missing"),
    (['{"title": 3, "text": "x"}\n'], r"line 1: field 'title' must be a string, got int"),
    (['{"title": "A", "text": "  "}\n'], r"line 1: field 'text' is empty"),
    (["\n"], r"holds no passage"),
])
def test_read_corpus_names_line_and_field(tmp_path, lines, match):
    p = _write(tmp_path / "bad.jsonl", lines)
    with pytest.raises(corpus.CorpusError, match=match):
        corpus.read_corpus(p)


def test_read_corpus_missing_file(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        corpus.read_corpus(tmp_path / "nope.jsonl")


def test_bm25_index_matches_bm25s_scored_directly():
    """The index's scores are bm25s's own (Lucene, k1 1.5, b 0.75, English stop words) on the
    title and text, and search is their arg-sort, ties by corpus order."""
    import bm25s

    docs = [qa.Document(f"T{i}", f"word{i % 3} common text {'rare' if i == 4 else ''}")
            for i in range(9)]
    ix = corpus.BM25Index(docs)
    r = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    r.index(bm25s.tokenize([f"{d.title} {d.text}" for d in docs], stopwords="en",
                           show_progress=False), show_progress=False)
    s = ix.scores(["rare word1"])[0]
    np.testing.assert_allclose(s, r.get_scores(["rare", "word1"]))
    top = ix.search(["rare word1"], 4)[0].tolist()
    assert top[0] == 4 and top[1:] == [1, 7, 0]  # word1 docs 1 and 7 tie: corpus order, then 0
    # a question with no word of the corpus scores 0 everywhere: the corpus order
    assert ix.search(["zzz"], 3)[0].tolist() == [0, 1, 2]


def test_top_k_ties_and_k_checks():
    s = np.array([[1.0, 3.0, 3.0, 2.0]])
    assert corpus.top_k(s, 3).tolist() == [[1, 2, 3]]
    with pytest.raises(ValueError, match="larger than the corpus"):
        corpus.check_k(5, 4)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="k"):
            corpus.check_k(bad, 4)


def test_gold_ranks_and_refusals():
    assert corpus.gold_ranks([[5, 6], [6, 5], [1, 2]], [5, 5, 9]).tolist() == [0, 1, -1]
    with pytest.raises(ValueError, match="questions, k"):
        corpus.gold_ranks([1, 2], [1])


def test_dense_embed_matches_sentence_transformers():
    """measure.dense loads all-MiniLM-L6-v2 with transformers alone; sentence-transformers'
    SentenceTransformer on the same directory is the oracle (texts past 256 tokens included:
    both truncate there)."""
    pytest.importorskip("torch")
    from sentence_transformers import SentenceTransformer

    from posbias_nb.measure import dense

    if not dense.available():
        pytest.fail(f"{dense.DIST} is not installed (make setup installs it)")
    texts = ["who got the first nobel prize in physics", "Paris is the capital of France.",
             "word " * 400, "a"]
    ours = dense.embed(texts, batch=3)
    ref = SentenceTransformer(str(dense.model_dir()), device="cpu").encode(
        texts, convert_to_numpy=True)
    assert ours.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(ours, ref, atol=2e-5)
    # a counterexample: CLS pooling is not what the model declares, and the check sees it
    import torch
    m, tok, L = dense._load()
    with torch.inference_mode():
        enc = tok(texts[:2], padding=True, truncation=True, max_length=L, return_tensors="pt")
        cls = torch.nn.functional.normalize(m(**enc).last_hidden_state[:, 0], dim=1).numpy()
    assert np.abs(cls - ref[:2]).max() > 1e-2


def test_dense_index_search():
    pytest.importorskip("torch")
    from posbias_nb.measure import dense

    docs = [qa.Document("Paris", "The capital of France."), qa.Document("Cats", "Cats purr."),
            qa.Document("Rome", "The capital of Italy.")]
    ix = dense.DenseIndex(docs)
    assert ix.search(["Which city is the capital of Italy?"], 2)[0].tolist()[0] == 2
    with pytest.raises(ValueError, match="larger than the corpus"):
        ix.search(["x"], 4)


# --- a ranking checked against scores, up to ties (pipeline-retrieve's check) ---------------

def _scores(seed=0, q=6, n=40):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(q, n))
    s[:, 3] = s[:, 7] = 5.0  # a passage and its twin: tied first in every question
    return s


def test_ranking_gaps_are_zero_for_top_k_and_count_a_displaced_passage():
    s = _scores()
    r = corpus.top_k(s, 10)
    assert np.all(corpus.ranking_gaps(r, s) == 0)
    bad = r.copy()
    bad[0, [0, 5]] = bad[0, [5, 0]]  # the best and the sixth swapped
    g = corpus.ranking_gaps(bad, s)
    assert g[0, 0] > 0 and g[0, 5] > 0 and np.all(g[1:] == 0)
    with pytest.raises(ValueError, match="passage indices"):
        corpus.ranking_gaps(np.full((6, 10), 40), s)
    with pytest.raises(ValueError, match="questions, k"):
        corpus.ranking_gaps(r[:, :, None], s)


def test_a_ranking_agrees_with_its_record_up_to_ties_and_no_further():
    """The record agrees where another CPU's rounding orders near-tied passages the other way;
    it fails where a passage is displaced by more than the tolerance, a passage is retrieved
    twice, the gold rank is not the gold's rank, or the arrays are not a retrieval's."""
    s = _scores()
    gold = np.array([3, 7, 0, 1, 2, 5])
    r = corpus.top_k(s, 10)
    rec = {"retrieved": r, "gold_rank": corpus.gold_ranks(r, gold)}
    assert corpus.ranking_agrees(rec, s, gold, tol=0.0) == []
    # another CPU: the twin (7) scores 1e-9 above its passage (3), so top_k orders them the
    # other way; the record still agrees at a tolerance above that rounding, not at zero
    moved = s.copy()
    moved[:, 7] += 1e-9
    r2 = corpus.top_k(moved, 10)
    assert not np.array_equal(r2, r)
    assert corpus.ranking_agrees(rec, moved, gold, tol=1e-8) == []
    assert corpus.ranking_agrees(rec, moved, gold, tol=0.0)
    # the gold's rank follows the record's order (question 1's gold is the twin)
    assert not np.array_equal(corpus.gold_ranks(r2, gold), rec["gold_rank"])
    # counterexamples, each failing at the same tolerance
    bad = r.copy()
    bad[2, [1, 4]] = bad[2, [4, 1]]
    got = corpus.ranking_agrees({**rec, "retrieved": bad,
                                 "gold_rank": corpus.gold_ranks(bad, gold)}, moved, gold, 1e-8)
    assert len(got) == 1 and "2 of 60 ranks" in got[0] and "question 2" in got[0]
    twice = r.copy()
    twice[4, 9] = twice[4, 0]
    got = corpus.ranking_agrees({**rec, "retrieved": twice}, s, gold, 1e-8)
    assert any("a passage twice" in m for m in got)
    tampered = rec["gold_rank"].copy()
    tampered[0] += 1
    got = corpus.ranking_agrees({**rec, "gold_rank": tampered}, s, gold, 1e-8)
    assert got == ["gold_rank: 1 entries are not the gold passage's rank in retrieved"]
    assert "a retrieval holds" in corpus.ranking_agrees({"retrieved": r}, s, gold, 1e-8)[0]
    assert "passage indices" in corpus.ranking_agrees(
        {**rec, "retrieved": r + 100}, s, gold, 1e-8)[0]
    with pytest.raises(ValueError, match="non-negative"):
        corpus.ranking_agrees(rec, s, gold, tol=-1.0)


def test_the_dense_rankings_tolerance_is_derived_from_its_measured_rounding():
    """pipeline-retrieve's tolerance is 100 x the largest move other CPUs' kernels (and another
    batch size) gave any score of the corpus, rounded up to a power of ten
    (bench/bench_rank_rounding.py); the recorded ranking agrees with the scores of every
    variant at it; every deliberate change of the retriever moves a rank by at least 10 x it,
    and fails the check."""
    import math

    from posbias_nb.measure import dense

    rr = dense.rank_rounding()
    largest = max(rr["rounding"].values())
    assert largest == rr["largest_rounding"] > 0
    tol = 10.0 ** math.ceil(math.log10(rr["headroom"] * largest))
    assert dense.rank_tolerance() == tol == rr["tolerance"]
    assert rr["recorded_agrees_native"] and all(rr["recorded_agrees_by_variant"].values())
    assert max(rr["recorded_gap_by_variant"].values()) <= tol
    assert rr["caught"] and all(rr["caught"].values())
    assert all(g >= rr["margin"] * tol for g in rr["change_gap"].values())
    # the counterexample: the smallest change's gap fails ranking_agrees at this tolerance,
    # the largest rounding passes
    smallest = min(rr["change_gap"].values())
    s = np.array([[0.9, 0.8, 0.1]])
    rec = {"retrieved": np.array([[0, 1]]), "gold_rank": np.array([0])}
    assert corpus.ranking_agrees(rec, s, [0], tol) == []
    assert corpus.ranking_agrees(rec, s + [[0.0, largest, 0.0]], [0], tol) == []
    assert corpus.ranking_agrees(rec, s + [[0.0, 0.1 + smallest, 0.0]], [0], tol)
