"""Prompt remedies from a remedy file (issue 45): ``posbias task --remedy-file`` places every
document prompt's documents by the file's rule and ranker (an oracle built from
``tasks.reorder`` by hand), the one Python call on a plain list of documents, and every
refusal as one line with exit status 2 (tiny random Llama, byte-level text)."""
import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from posbias_nb import cli  # noqa: E402
from posbias_nb.experiments.prompt import user_task as task_mod  # noqa: E402
from posbias_nb.experiments.base import prompts as prompts_mod  # noqa: E402
from posbias_nb.measure import entry  # noqa: E402
from posbias_nb.models import remedy_file  # noqa: E402
from posbias_nb.tasks import qa, reorder  # noqa: E402
from posbias_nb.experiments.base import study
from test_cli_task_file import _file, no_cache  # noqa: E402,F401  (the cache off in every test)


def _plain_rows(n):
    return [{"question": f"what is item {i}", "answers": [f"thing{i}"],
             "documents": [f"noise {i} apple", {"title": "Item", "text": f"Item {i} is thing{i}."},
                           f"noise {i} pear", f"noise {i} plum"], "gold": 1} for i in range(n)]


def _write(tmp_path, model_dir, name, params, file="remedy.json"):
    m = entry.loaded(model_dir, weights="pretrained", seed=0)[0]
    return remedy_file.write(tmp_path / file, name, params, m, model_dir)


@pytest.mark.parametrize("name, params", [
    ("long-context-reorder", {"ranker": "bm25"}),
    ("lost-in-the-middle-ranker", {"ranker": "file"}),
    ("curve-order", {"ranker": "bm25", "slot_quality": [-3.0, -1.0, -2.0, -0.5]}),
    ("query-aware", {}),
])
def test_task_places_each_prompt_by_the_file(tmp_path, model_dir, name, params):
    """Every document prompt of the run is the unpatched prompt's documents ranked by the file's
    ranker and placed by its rule; its log p and generation are those of that prompt; the
    closed-book and oracle references are untouched."""
    from posbias_nb.measure.scoring import score_and_generate
    from posbias_nb.tasks.codec import Codec

    data = _file(tmp_path, _plain_rows(3))
    rf = _write(tmp_path, model_dir, name, params)
    kw = dict(examples=2, max_new_tokens=3, weights="pretrained")
    got = task_mod.task_run(model_dir, data, remedy_file=rf, **kw)
    base = task_mod.task_run(model_dir, data, **kw)
    assert got.meta["remedy"]["name"] == name and got.meta["documents"] == 4
    P = prompts_mod.prepare(data, None, None, 2, None, 0)
    m, tok, _ = entry.loaded(model_dir, weights="pretrained", seed=0)
    codec = Codec(tok, m.get_input_embeddings().num_embeddings)
    ex = got["examples"]
    moved = 0
    for row in ex:
        if not isinstance(row["gold_document"], int):
            continue
        it = P["items"][P["chosen"].index(row["example_line"])]
        docs = it["documents"][row["gold_document"] - 1]
        if name == "query-aware":
            want = reorder.query_aware_prompt(it["question"], docs)
        else:
            rank = reorder.bm25_ranking(it["question"], docs) if params["ranker"] == "bm25" \
                else [docs.index(d) for d in it["file_order"]]
            placed = reorder.reorder(name, [docs[i] for i in rank],
                                     quality=params.get("slot_quality"))
            want = qa.qa_prompt(it["question"], placed)
        moved += want != it["prompts"][row["gold_document"] - 1]
        ids = study.encode(codec, want)
        lps, _ = score_and_generate(m, ids, [study.answer_ids(codec, a)
                                             for a in it["answers"]], 3)
        assert abs(row["logprob"] - max(lps)) < 1e-4, row
    assert moved > 0  # the remedy changed prompts
    refs = [(r["example_line"], r["setting"], r["logprob"]) for r in ex
            if not isinstance(r["gold_document"], int)]
    assert refs and refs == [(r["example_line"], r["setting"], r["logprob"])
                             for r in base["examples"] if not isinstance(r["gold_document"], int)]


def test_the_python_call_reorders_a_plain_list(tmp_path, model_dir):
    """reorder_documents: the caller's documents (strings or title/text objects, in the
    retriever's order) placed by the file; refused for another model, a slot quality of
    another length, an empty list, a file that patches the model."""
    rf = _write(tmp_path, model_dir, "long-context-reorder", {"ranker": "file"})
    docs = ["first", {"title": "T", "text": "second"}, "third", "fourth"]
    got = task_mod.reorder_documents(rf, "which one", docs, model_dir)
    want = reorder.reorder("long-context-reorder",
                           [qa.Document("", "first"), qa.Document("T", "second"),
                            qa.Document("", "third"), qa.Document("", "fourth")])
    assert got["documents"] == want and got["prompt"] == qa.qa_prompt("which one", want)
    cq = _write(tmp_path, model_dir, "curve-order", {"ranker": "file",
                                                     "slot_quality": [0.0, 1.0, 2.0]}, "c.json")
    with pytest.raises(ValueError, match="3 slots for 4 documents"):
        task_mod.reorder_documents(cq, "q", docs, model_dir)
    with pytest.raises(ValueError, match="empty document list"):
        task_mod.reorder_documents(rf, "q", [], model_dir)
    with pytest.raises(ValueError, match="fingerprint|was chosen for"):
        task_mod.reorder_documents(rf, "q", docs, "smollm2-tiny")
    ms = _write(tmp_path, model_dir, "ms-poe", {"lo": 1.2, "hi": 1.8}, "m.json")
    with pytest.raises(ValueError, match="patches the model"):
        task_mod.reorder_documents(ms, "q", docs, model_dir)


def test_refusals_are_one_line(tmp_path, capsys, model_dir):
    """A prompt remedy's file where there are no documents to place (profile), with a slot
    quality for another count, the file ranker on Liu et al.'s format, a key-value file, an
    unknown ranker: one line on stderr, exit status 2, nothing written."""
    base = ["--model", model_dir, "--weights", "pretrained"]
    rf = _write(tmp_path, model_dir, "long-context-reorder", {"ranker": "bm25"})
    cq = _write(tmp_path, model_dir, "curve-order", {"ranker": "bm25",
                                                     "slot_quality": [0.0, 1.0, 2.0]}, "c.json")
    fr = _write(tmp_path, model_dir, "lost-in-the-middle-ranker", {"ranker": "file"}, "f.json")
    bad = tmp_path / "bad.json"
    obj = json.loads(rf.read_text())
    obj["params"]["ranker"] = "tf-idf"
    bad.write_text(json.dumps(obj))
    plain = _file(tmp_path, _plain_rows(3))
    liu = _file(tmp_path, [{"question": f"what is item {i}", "answers": [f"thing{i}"],
                            "ctxs": [{"title": f"Item {i}", "text": f"Item {i} is thing{i}.",
                                      "isgold": True}]} for i in range(6)], "liu.jsonl.gz")
    kv = _file(tmp_path, [{"ordered_kv_records": [[f"k{i}{j}", f"v{i}{j}"] for j in range(4)],
                           "key": f"k{i}2", "value": f"v{i}2"} for i in range(3)], "kv.jsonl.gz")
    out = tmp_path / "out.csv"
    cases = [
        (["profile", *base, "--length", "32", "--remedy-file", str(rf)], "prompt remedy"),
        (["task", *base, "--data", str(plain), "--remedy-file", str(cq), "--out", str(out)],
         "3 slots for prompts of 4 documents"),
        (["task", *base, "--data", str(liu), "--documents", "3", "--remedy-file", str(fr),
          "--out", str(out)], "'file' ranker"),
        (["task", *base, "--data", str(kv), "--remedy-file", str(rf), "--out", str(out)],
         "key-value"),
        (["task", *base, "--data", str(plain), "--remedy-file", str(bad), "--out", str(out)],
         "unknown ranker"),
    ]
    for argv, words in cases:
        capsys.readouterr()
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], (argv, err)
        assert not out.exists()
    with pytest.raises(ValueError, match="prompt remedy"):
        from posbias_nb import models

        m = entry.loaded(model_dir, weights="pretrained", seed=0)[0]
        with models.remedy(m, str(rf)):
            pass
