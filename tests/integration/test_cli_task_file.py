"""``posbias task``: the position sweep on a task file, through the command (tiny random model,
byte-level text): the three formats, the table's contract, determinism, and every refusal as one
line with exit status 2 before a model runs, nothing written."""
import gzip
import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from posbias_nb import cli  # noqa: E402
from posbias_nb.experiments.prompt import user_task as task_mod  # noqa: E402
from posbias_nb.experiments.base import prompts as prompts_mod  # noqa: E402
from posbias_nb.experiments.base import study
from posbias_nb.measure import entry  # noqa: E402


@pytest.fixture(autouse=True)
def no_cache(monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")


def _qa_rows(n):
    return [{"question": f"what is item {i}", "answers": [f"thing{i}"],
             "ctxs": [{"title": f"Item {i}", "text": f"Item {i} is thing{i}.", "isgold": True}]}
            for i in range(n)]


def _plain_rows(n):
    return [{"question": f"what is item {i}", "answers": [f"thing{i}"],
             "documents": [f"noise {i} a", {"title": "T", "text": f"Item {i} is thing{i}."},
                           f"noise {i} b"], "gold": 1} for i in range(n)]


def _kv_rows(n):
    return [{"ordered_kv_records": [[f"k{i}{j}", f"v{i}{j}"] for j in range(4)],
             "key": f"k{i}2", "value": f"v{i}2"} for i in range(n)]


def _file(tmp_path, rows, name="t.jsonl.gz"):
    p = tmp_path / name
    with gzip.open(p, "wt") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return p


@pytest.fixture
def BASE(model_dir):
    return ["task", "--model", model_dir, "--weights", "pretrained", "--max-new-tokens", "3"]


@pytest.mark.parametrize("rows, extra, n_pos, refs", [
    (_qa_rows(8), ["--documents", "3"], 3, 2),   # the oracle layout: BM25 fills the distractors
    (_plain_rows(3), ["--documents", "3"], 3, 2),
    (_kv_rows(3), ["--keys", "4"], 4, 0),
])
def test_each_format_gives_the_table(tmp_path, capsys, BASE, rows, extra, n_pos, refs):
    f = _file(tmp_path, rows)
    argv = BASE + ["--data", str(f), "--examples", "3"] + extra
    assert cli.main(argv + ["--format", "json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["setting"] == ["documents"] * n_pos + ["closed-book", "oracle"][:refs]
    assert obj["gold_document"][:n_pos] == list(range(1, n_pos + 1))
    for c in task_mod.CSV_COLUMNS:
        assert len(obj[c]) == n_pos + refs, c
    for lo, m, hi in zip(obj["accuracy_low"], obj["accuracy"], obj["accuracy_high"]):
        assert 0 <= lo <= m <= hi <= 1 and hi > lo  # Wilson: never zero width
    assert all(n == 3 for n in obj["n"])
    assert len(obj["examples"]) == 3 * (n_pos + refs)
    assert sum(sum(v) for v in obj["outcomes"].values()) == 3 * n_pos
    assert obj["meta"]["examples"] == 3
    # the same command, the same numbers; and the CSV has the columns
    assert cli.main(argv + ["--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == obj
    assert cli.main(argv) == 0
    assert capsys.readouterr().out.splitlines()[0] == ",".join(task_mod.CSV_COLUMNS)


def test_only_the_gold_moves_in_the_prompts(tmp_path):
    P = prompts_mod.prepare(_file(tmp_path, _qa_rows(8)), documents=4, examples=2)
    for it in P["items"]:
        docs = [[ln for ln in p.splitlines() if ln.startswith("Document [")]
                for p in it["prompts"]]
        strip = [[ln.split(")", 1)[1] for ln in d] for d in docs]
        golds = [[i for i, ln in enumerate(d) if it["answers"][0] in ln] for d in strip]
        assert [g for (g,) in golds] == P["positions"]
        rest = [[ln for ln in d if it["answers"][0] not in ln] for d in strip]
        assert all(r == rest[0] for r in rest)


@pytest.mark.parametrize("content, extra, words", [
    ('{"question": "q", "answers": ["x"], "ctxs": [{"title": "t", "text": "x", "isgold": true}]}'
     '\n{not json\n', [], "line 2: not valid JSON"),
    ('{"question": "q", "answers": ["x"], "ctxs": [{"title": "t", "text": "x", "isgold": false}]}'
     '\n', [], "no gold document"),
    ('{"question": "q", "answers": ["x"], "documents": ["a", "b"], "gold": 5}\n', [],
     "gold index 5 out of range"),
    ('{"question": "q", "answers": [], "documents": ["a", "b"], "gold": 0}\n', [],
     "non-empty list"),
    ('{"text": "hello"}\n', [], "unknown format"),
    ('{"question": "q", "answers": ["x"], "documents": ["a", "b"], "gold": 0}\n',
     ["--keys", "2"], "--keys is for key-value files"),
    (json.dumps({"question": "q", "answers": ["x"], "documents": ["a b c " * 1000, "b"],
                 "gold": 0}) + "\n",
     ["--documents", "2"], "prompts are too long"),
    ('{"question": "q", "answers": ["x"], "documents": ["a", "b"], "gold": 0}\n',
     ["--positions", "0,7", "--documents", "2"], "positions must be distinct slots"),
    ('{"question": "q", "answers": ["x"], "documents": ["a", "b"], "gold": 0}\n',
     ["--positions", "zero"], "--positions must be comma-separated integers"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, BASE, content,
                                                          extra, words):
    f = tmp_path / "bad.jsonl"
    f.write_text(content)
    out = tmp_path / "out.csv"
    assert cli.main(BASE + ["--data", str(f), "--out", str(out)] + extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("posbias: error:") and words in err[0], err
    assert not out.exists()


def test_bad_file_refused_before_the_model_is_touched(tmp_path, capsys, monkeypatch, BASE):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"text": "x"}\n')

    def boom(*a, **k):
        raise AssertionError("the model was consulted before the file was checked")
    monkeypatch.setattr(entry, "checked", boom)
    monkeypatch.setattr(study, "load", boom)
    assert cli.main(BASE + ["--data", str(f)]) == 2
    assert "unknown format" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["smollm2-tiny", "gemma3-tiny"])  # gemma3: sliding layers
def test_one_prefill_scores_and_generates_as_the_two_passes(name):
    import numpy as np
    import torch

    from posbias_nb import models
    from posbias_nb.measure.scoring import generate_greedy, score_and_generate, score_batch

    m, _, _ = models.load(name, weights="random", seed=0)
    g = torch.Generator().manual_seed(3)
    prompt = torch.randint(0, 200, (150,), generator=g).tolist()  # beyond gemma3-tiny's window
    answers = [torch.randint(0, 200, (n,), generator=g).tolist() for n in (1, 4)]
    lps, gen = score_and_generate(m, prompt, answers, 6)
    ref, _ = score_batch(m, [prompt, prompt], answers, batch=1)
    np.testing.assert_allclose(lps, ref, rtol=1e-4, atol=1e-4)
    assert gen == generate_greedy(m, prompt, 6)
    # the stop rule ends it early, as generate_greedy's does
    _, short = score_and_generate(m, prompt, answers, 6, stop=lambda ids: len(ids) >= 2)
    assert short == gen[:2]


def test_a_progress_bar_while_measuring_and_none_with_quiet(tmp_path, capsys, BASE,
                                                           monkeypatch):
    """posbias task draws a bar over the prompts on stderr while it measures; --quiet draws
    nothing; a second run, read from the cache, draws nothing either."""
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "cache"))
    f = _file(tmp_path, _qa_rows(8))
    argv = BASE + ["--data", str(f), "--examples", "2", "--documents", "3"]
    assert cli.main(argv + ["--quiet"]) == 0
    assert capsys.readouterr().err == ""
    assert cli.main(argv + ["--seed", "1"]) == 0  # other examples: measured anew
    err = capsys.readouterr().err
    assert "task" in err and "prompt" in err, err
    assert cli.main(argv + ["--seed", "1"]) == 0  # cached
    assert capsys.readouterr().err == ""


def test_a_recorded_task_entry_is_re_measured_by_a_sample_of_its_prompts(tmp_path, monkeypatch,
                                                                         model_dir):
    """task_run scores each prompt through one function (cache.Parts): the whole run, recorded,
    re-measured by a sample of its prompts agrees (same log p, same generation), computes
    nothing else, and returns the recorded table; the sample holds a prompt of every gold slot
    and of the closed-book and oracle prompts (the slots its record holds), and of each kind of
    gold answer task_run declares (several tokens or one; issue 56); a recorded entry whose
    numbers differ fails."""
    from remeasure import as_make_test, events

    from posbias_nb import cache
    from posbias_nb.provenance import verify

    seen_kinds = []
    sample = verify.part_sample
    monkeypatch.setattr(verify, "part_sample", lambda ns, k, n, kinds=None: (
        seen_kinds.append(kinds), sample(ns, k, n, kinds))[1])

    data = _file(tmp_path, _qa_rows(4))
    kw = dict(documents=3, examples=2, max_new_tokens=3, weights="pretrained")
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "rec"))
    whole = task_mod.task_run(model_dir, data, **kw)
    (f,) = (tmp_path / "rec" / "task").glob("*.npz")

    def again(name):
        log = as_make_test(monkeypatch, tmp_path, tmp_path / "rec", [f"task/{f.stem}"], name)
        got = task_mod.task_run(model_dir, data, **kw)
        return got, events(log)

    got, ev = again("ok")
    assert got.to_json() == whole.to_json()
    parts = [e for e in ev if e["event"] == "computed-part"]
    slot = cache.read_entry(f)["slot"]
    assert parts[0]["part"] == 0 and parts[0]["parts"] == len(slot) == 10
    assert {int(slot[p["part"]]) for p in parts} == set(slot.tolist()) == {0, 1, 2, -1, -2}
    # the first, the digest's choice, then one a slot not yet covered: 5 or 6 of the 10
    assert len(parts) in (5, 6)
    assert [e for e in ev if e["event"] == "verified"][-1]["sampled"] == len(parts)
    # what the sample was chosen by: each prompt's slot and whether its answer takes several
    # tokens (here every answer does: the tiny model reads bytes)
    assert seen_kinds[-1] == [{"slot": int(s), "several tokens": True} for s in slot]
    assert [e["event"] for e in ev if e["ns"] == "task"][-1] == "verified"
    assert "computed" not in [e["event"] for e in ev]
    # the counterexample: a recorded entry whose log p differs in every prompt
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "rec"))
    arrays = cache.read_entry(f)
    arrays["logprob"] = arrays["logprob"] + 0.5
    cache.write_entry(cache.entry_path("task", f.stem), arrays)
    with pytest.raises(cache.RecordedMismatch, match="part 0 of"):
        again("bad")


def test_a_plain_file_brings_its_own_document_count(tmp_path, capsys, monkeypatch, BASE):
    """issue 45: a plain file of 3 documents a question runs without --documents (its own
    count, not Liu et al.'s 10); with one document a question it is refused in one line,
    exit 2, before the model is touched."""
    P = prompts_mod.prepare(_file(tmp_path, _plain_rows(3)), examples=2)
    assert P["documents"] == 3 and P["positions"] == [0, 1, 2]
    # the fewest of the chosen examples': one with 4 documents beside ones with 3
    rows = _plain_rows(3)
    rows[0]["documents"] = rows[0]["documents"] + ["noise extra"]
    assert prompts_mod.prepare(_file(tmp_path, rows, "mixed.jsonl.gz"), examples=3)["documents"] == 3
    one = [{"question": "what is it", "answers": ["thing"], "documents": ["it is thing"],
            "gold": 0}] * 2

    def boom(*a, **k):
        raise AssertionError("the model was consulted before the file was checked")
    monkeypatch.setattr(entry, "checked", boom)
    assert cli.main(BASE + ["--data", str(_file(tmp_path, one, "one.jsonl.gz"))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "at least 2 documents" in err[0], err
