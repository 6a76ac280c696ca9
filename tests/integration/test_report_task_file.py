"""``posbias report --task-data FILE``: the user's task file in place of the synthetic task
(section 3), the same claims in its words; a bad file refused before anything is measured."""
import gzip
import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from posbias_nb import cli  # noqa: E402


@pytest.fixture(autouse=True)
def no_cache(monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")


def _qa_file(tmp_path, n=10):
    p = tmp_path / "mine.jsonl.gz"
    with gzip.open(p, "wt") as f:
        for i in range(n):
            f.write(json.dumps({"question": f"what is item {i}", "answers": [f"thing{i}"],
                                "ctxs": [{"title": f"Item {i}", "text": f"Item {i} is thing{i}.",
                                          "isgold": True}]}) + "\n")
    return p


def test_report_with_a_task_file(tmp_path, model_dir, capsys):
    out = tmp_path / "r"
    args = ["report", "--model", model_dir, "--length", "64", "--quick", "--quiet",
            "--task-data", str(_qa_file(tmp_path)), "--task-documents", "3", "--out", str(out)]
    assert cli.main(args) == 0, capsys.readouterr().err
    obj = json.loads((out / "report.json").read_text())
    tk = obj["task"]
    assert tk["kind"] == "file" and tk["available"] and tk["file"] == "mine.jsonl.gz"
    assert tk["documents"] == 3 and tk["gold_documents"] == [1, 2, 3]
    assert set(tk["references"]) == {"closed-book", "oracle"}
    assert tk["examples"] == obj["meta"]["sizes"]["examples"]
    for lo, a, hi in zip(tk["accuracy_low"], tk["accuracy"], tk["accuracy_high"]):
        assert lo <= a <= hi and hi > lo
    task_claims = [c for c in obj["claims"] if c["key"].startswith("task_")]
    assert len(task_claims) == 2
    assert all("gold document" in c["claim"] for c in task_claims)
    page = (out / "index.html").read_text()
    assert "3. The task: mine.jsonl.gz" in page and "Reference lines: closed-book" in page


def test_report_refuses_a_bad_task_file_before_measuring(tmp_path, model_dir, capsys,
                                                         monkeypatch):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answers": ["x"], "documents": ["a"], "gold": 3}\n')
    from posbias_nb.experiments.report import run as rep_run

    def boom(*a, **k):
        raise AssertionError("measured before the task file was checked")
    monkeypatch.setattr(rep_run, "born_trained", boom)
    out = tmp_path / "r"
    assert cli.main(["report", "--model", model_dir, "--quick", "--quiet", "--length", "64",
                     "--task-data", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "gold index 3 out of range" in err[0]
    assert not out.exists()
    assert cli.main(["report", "--model", model_dir, "--quick", "--quiet",
                     "--task-documents", "5", "--out", str(out)]) == 2
    assert "--task-documents needs --task-data" in capsys.readouterr().err
