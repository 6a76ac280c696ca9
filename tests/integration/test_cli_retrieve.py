"""``posbias retrieve`` (chapter ch-practice): a corpus ranked for each question of a QA task
file, recall@k with its Wilson interval; bad input gives one line and exit 2, nothing written."""
import json

import pytest

from posbias_nb.cli import main
from posbias_nb.tasks import corpus, qa


def _qa(tmp_path, n=6):
    lines = []
    for i in range(n):
        lines.append({"question": f"what is topic{i} about", "answers": [f"ans{i}"],
                      "documents": [{"title": f"T{i}", "text": f"topic{i} is about ans{i}"},
                                    {"title": f"U{i}", "text": f"filler {i} words"}],
                      "gold": 0})
    p = tmp_path / "qa.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return p


def _corpus(tmp_path, docs, name="corpus.jsonl"):
    p = tmp_path / name
    p.write_text("".join(json.dumps({"title": t, "text": x}) + "\n" for t, x in docs))
    return p


def test_retrieve_bm25_json(tmp_path, capsys):
    data = _qa(tmp_path)
    out = tmp_path / "r.json"
    assert main(["retrieve", "--data", str(data), "--k", "3", "--format", "json",
                 "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["gold_rank"] == [1] * 6 and r["meta"]["recall_at_k"] == 1.0
    lo, hi = r["meta"]["recall_interval"]
    assert lo < 1.0 <= hi and r["meta"]["passages"] == 12
    assert all(len(x.split(";")) == 3 for x in r["retrieved"])


def test_retrieve_against_a_corpus_file_csv(tmp_path, capsys):
    data = _qa(tmp_path, 3)
    c = _corpus(tmp_path, [("U", "nothing here")] * 2 + [(f"T{i}", f"topic{i} is about ans{i}")
                                                          for i in range(3)])
    assert main(["retrieve", "--data", str(data), "--corpus", str(c), "--k", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "line,gold_rank,retrieved" and out[1:] == ["1,1,2", "2,1,3", "3,1,4"]


@pytest.mark.parametrize("args, corpus_lines, match", [
    (["--k", "99"], None, "k = 99 is larger than the corpus (12 passages)"),
    (["--retriever", "sparse"], None, "invalid choice: 'sparse'"),
    (["--k", "2"], ['{"title": "A", "text": "x"}\n', '{"title": "B"}\n'],
     "line 2: field 'text' must be a string, got missing"),
    (["--k", "1"], ['{"title": "A", "text": "x"}\n'],
     "line 1: the question's gold passage ('T0') is not in the corpus"),
])
def test_retrieve_bad_input_one_line_exit_2_nothing_written(tmp_path, capsys, args,
                                                             corpus_lines, match):
    data = _qa(tmp_path)
    extra = []
    if corpus_lines is not None:
        c = tmp_path / "c.jsonl"
        c.write_text("".join(corpus_lines))
        extra = ["--corpus", str(c)]
    out = tmp_path / "never.csv"
    assert main(["retrieve", "--data", str(data), "--out", str(out)] + extra + args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and match in err and "Traceback" not in err
    assert not out.exists()


def test_retrieve_refuses_a_key_value_file(tmp_path, capsys):
    p = tmp_path / "kv.jsonl"
    p.write_text(json.dumps({"ordered_kv_records": [["a", "b"], ["c", "d"]], "key": "a",
                             "value": "b"}) + "\n")
    assert main(["retrieve", "--data", str(p)]) == 2
    assert "key-value file has no passages" in capsys.readouterr().err


def test_gold_ranks_agree_with_the_index(tmp_path, capsys):
    """The command's ranks are corpus.BM25Index's, read through gold_ranks (not a rule of its
    own): a corpus where the gold passage is outranked twice."""
    data = _qa(tmp_path, 1)
    docs = [("X", "what is topic0 about topic0"), ("Y", "topic0 about topic0 what"),
            ("T0", "topic0 is about ans0")]
    c = _corpus(tmp_path, docs)
    ix = corpus.BM25Index([qa.Document(t, x) for t, x in docs])
    want = int(corpus.gold_ranks(ix.search(["what is topic0 about"], 3), [2])[0]) + 1
    assert main(["retrieve", "--data", str(data), "--corpus", str(c), "--k", "3"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split(",")[1] == str(want)
    assert want == 3
