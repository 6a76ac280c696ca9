"""Real questions (tasks/qa.py): the vendored data, Liu et al.'s metric and prompts, the readers
of users' task files and their refusals, the BM25 distractors.  No torch."""
import gzip
import hashlib
import json
from pathlib import Path

import pytest

from posbias_nb.tasks import qa

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "data" / "liu2023"


# the vendored files ---------------------------------------------------------------------------

def test_vendored_files_match_their_checksums_and_provenance():
    sums = dict(reversed(line.split()) for line in (DATA / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == {"nq-open-oracle.jsonl.gz", "kv-retrieval-75_keys.jsonl.gz"}
    source = (DATA / "SOURCE.md").read_text()
    for name, digest in sums.items():
        assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest, name
        assert digest in source  # the same digest as the provenance note copied from upstream
    assert "MIT" in (DATA / "LICENSE").read_text()
    assert "CC BY-SA 3.0" in source


def test_the_published_numbers_match_their_checksum_and_hold_together():
    pub = ROOT / "data" / "liu2023_published"
    sums = dict(reversed(line.split()) for line in (pub / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == {"multidoc_qa.json"}
    raw = (pub / "multidoc_qa.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == sums["multidoc_qa.json"]
    d = json.loads(raw)
    assert "Liu" in d["citation"] and d["tables"]["documents_10"]
    for m, v in d["models"].items():  # every model: oracle above closed-book, percentages
        assert 0 < v["closed_book"] < v["oracle"] < 100, m
        assert set(v["documents_10"]) == {"1", "5", "10"}, m
        assert all(0 < x < 100 for x in v["documents_10"].values()), m

def test_vendored_files_read_as_their_formats():
    fmt, ex = qa.read_task_file(DATA / "nq-open-oracle.jsonl.gz")
    assert fmt == "liu-qa" and len(ex) == 2655
    assert all(len(e.documents) == 1 and e.gold == 0 for e in ex)
    fmt, kv = qa.read_task_file(DATA / "kv-retrieval-75_keys.jsonl.gz")
    assert fmt == "liu-kv" and len(kv) == 500
    assert all(len(e.records) == 75 for e in kv)


# best_subspan_em: hand-made cases -------------------------------------------------------------

@pytest.mark.parametrize("prediction, answers, expected", [
    ("Wilhelm Conrad Röntgen", ["Wilhelm Conrad Röntgen"], True),          # exact
    ("wilhelm conrad röntgen", ["Wilhelm Conrad Röntgen"], True),          # case
    ("The Beatles", ["Beatles"], True),                                    # article dropped
    ("Beatles", ["the Beatles"], True),                                    # article in the gold
    ("U.S.A.", ["USA"], True),                                             # punctuation
    ("It was Paris, France, in 1889.", ["Paris"], True),                   # inside a longer one
    ("Pari", ["Paris"], False),                                            # a near miss
    ("Paris\nLondon", ["London"], False),                                  # first line only
    ("", ["Paris"], False),                                                # empty prediction
    ("  \n Paris", ["Paris"], False),                                      # answer after a blank
    ("1,000 people", ["1000"], True),                                      # comma is punctuation
    ("London", ["Paris", "London"], True),                                 # any of the answers
    ("theatre", ["the"], False),                                           # an empty gold
    ("an apple a day", ["apple a day"], True),                             # articles inside
])
def test_best_subspan_em_cases(prediction, answers, expected):
    assert qa.best_subspan_em(prediction, answers) is expected


def test_normalize_answer_is_squads():
    assert qa.normalize_answer("  The  Quick, brown FOX!  ") == "quick brown fox"
    assert qa.normalize_answer("a an the") == ""


@pytest.mark.parametrize("prediction, expected", [
    ("Paris", "answer"), ("", "empty"), ("\nParis", "empty"), ("...", "empty"),
    ("Document [3](Title: Rome) ...", "off-format"),
    ("Document [3](Title: Paris) ...", "answer"),  # Liu et al.'s metric counts a copied title
    ("Question: who", "off-format"),
    ("London", "distractor"), ("Rome", "wrong"),
])
def test_classify_output(prediction, expected):
    assert qa.classify_output(prediction, ["Paris"], wrong_answers=["London"]) == expected


# prompts ----------------------------------------------------------------------------------------

def test_qa_prompt_is_liu_et_als_template_word_for_word():
    p = qa.qa_prompt("who wrote it", [qa.Document("A", "one."), qa.Document("B", "two.")])
    assert p == ("Write a high-quality answer for the given question using only the provided "
                 "search results (some of which might be irrelevant).\n\n"
                 "Document [1](Title: A) one.\nDocument [2](Title: B) two.\n\n"
                 "Question: who wrote it\nAnswer:")
    assert qa.closedbook_prompt("who wrote it") == "Question: who wrote it\nAnswer:"
    with pytest.raises(ValueError):
        qa.qa_prompt("q", [])


def test_only_the_gold_moves():
    g = qa.Document("G", "gold")
    ds = [qa.Document(str(i), str(i)) for i in range(4)]
    sets = [qa.position_documents(g, ds, p) for p in range(5)]
    for p, s in enumerate(sets):
        assert s[p] == g and [d for d in s if d != g] == ds
    with pytest.raises(ValueError, match="out of range"):
        qa.position_documents(g, ds, 5)
    assert qa.gold_positions(20) == [0, 4, 9, 14, 19]
    assert qa.gold_positions(30) == [0, 4, 9, 14, 19, 24, 29]
    assert qa.gold_positions(10) == list(range(10))


def test_kv_records_move_only_the_gold():
    e = qa.KVExample(tuple((f"k{i}", f"v{i}") for i in range(6)), "k2", "v2")
    for p in range(4):
        r = qa.position_records(e, p, n_keys=4)
        assert r[p] == ("k2", "v2") and [x for x in r if x[0] != "k2"] == \
            [("k0", "v0"), ("k1", "v1"), ("k3", "v3")]
    with pytest.raises(ValueError):
        qa.position_records(e, 4, n_keys=4)


# readers and their refusals ---------------------------------------------------------------------

def _write(tmp_path, rows, name="f.jsonl", gz=False, raw=None):
    path = tmp_path / (name + (".gz" if gz else ""))
    text = raw if raw is not None else "".join(json.dumps(r) + "\n" for r in rows)
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path


LIU_QA = {"question": "q?", "answers": ["yes"], "ctxs": [
    {"title": "t0", "text": "x", "isgold": False}, {"title": "t1", "text": "yes", "isgold": True}]}
PLAIN = {"question": "q?", "answers": ["yes"], "documents": ["x", {"title": "T", "text": "yes"}],
         "gold": 1}
LIU_KV = {"ordered_kv_records": [["k1", "v1"], ["k2", "v2"]], "key": "k2", "value": "v2"}


@pytest.mark.parametrize("row, fmt", [(LIU_QA, "liu-qa"), (PLAIN, "plain"), (LIU_KV, "liu-kv")])
@pytest.mark.parametrize("gz", [False, True])
def test_the_three_formats_read(tmp_path, row, fmt, gz):
    got, ex = qa.read_task_file(_write(tmp_path, [row, row], gz=gz))
    assert got == fmt and len(ex) == 2
    assert ex[0].gold == 1 and ex[1].line == 2


@pytest.mark.parametrize("rows, raw, words", [
    ([LIU_QA], '{"question": "q?"\n', "line 1: not valid JSON"),
    ([], json.dumps(LIU_QA) + "\n{oops\n", "line 2: not valid JSON"),
    ([{"prompt": "x"}], None, "unknown format"),
    ([dict(LIU_QA, ctxs=[{"title": "t", "text": "yes", "isgold": False}])], None,
     "no gold document"),
    ([dict(PLAIN, gold=2)], None, "gold index 2 out of range for 2 documents"),
    ([dict(PLAIN, gold=-1)], None, "out of range"),
    ([dict(PLAIN, answers=[])], None, "non-empty list"),
    ([dict(PLAIN, answers="a")], None, "non-empty list"),
    ([dict(PLAIN, answers=["the"])], None, "empty after normalisation"),
    ([dict(LIU_KV, key="k9")], None, "no gold record"),
    ([LIU_QA, PLAIN], None, "line 2: a plain line in a liu-qa file"),
    ([], "", "no examples"),
])
def test_bad_task_files_are_refused_with_the_line(tmp_path, rows, raw, words):
    with pytest.raises(qa.TaskFileError, match=words):
        qa.read_task_file(_write(tmp_path, rows, raw=raw))


def test_missing_and_binary_files_refused(tmp_path):
    with pytest.raises(qa.TaskFileError, match="no task file"):
        qa.read_task_file(tmp_path / "nope.jsonl")
    (tmp_path / "b.bin").write_bytes(b"\x1f\x8bnot gzip at all")
    with pytest.raises(qa.TaskFileError, match="cannot be read"):
        qa.read_task_file(tmp_path / "b.bin")


# BM25 distractors ------------------------------------------------------------------------------

def _ex(q, a, title, text, line=0):
    return qa.QAExample(q, (a,), (qa.Document(title, text),), 0, line)


def test_bm25_distractors_rank_by_overlap_and_drop_answers():
    ex = [_ex("capital city of france", "Paris", "France", "Paris is the capital of France."),
          _ex("largest city of france by population", "Paris", "Cities",
              "Paris is the largest city of France."),
          _ex("river through the capital city", "Seine", "Seine", "The Seine flows on."),
          _ex("capital of germany", "Berlin", "Germany", "Berlin is the capital city."),
          _ex("boiling point of water", "100", "Water", "Water boils at 100 degrees.")]
    d = qa.bm25_distractors(ex, 2)
    # question 0: its own passage and the other one holding "Paris" are out
    titles0 = [x.title for x in d[0]]
    assert "France" not in titles0 and "Cities" not in titles0
    assert titles0[0] == "Germany"  # "capital ... city" overlaps most
    # the same inputs, the same distractors
    assert qa.bm25_distractors(ex, 2) == d
    with pytest.raises(ValueError, match="distractors without an answer"):
        qa.bm25_distractors(ex, 4)


def test_answer_match_is_by_whole_words():
    # the answer "S" is in no passage as a word, though the letter is everywhere
    ex = [_ex("which letter is the ocean shaped like", "S", "Ocean", "It is S-shaped."),
          _ex("what shape is it", "round", "Shapes", "Spheres and shapes are round."),
          _ex("ocean letter", "x", "Seas", "Seas are salty.")]
    d = qa.bm25_distractors(ex, 2)
    assert {x.title for x in d[0]} == {"Shapes", "Seas"}
