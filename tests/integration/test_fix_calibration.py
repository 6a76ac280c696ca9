"""Hsieh et al.'s attention calibration in ``posbias fix``: the documents of a prompt and their
dummy prompts (pure text), the calibrated attention beyond a sliding window, the scores under
the calibration on a recorded pass and on full passes, the search and the test part, and the
remedy file that carries the temperature (tiny random models, byte-level text)."""
import gzip
import json

import numpy as np
import pytest

from posbias_nb.tasks import qa
from posbias_nb.tasks.codec import Codec


def _qa(k=3):
    return qa.qa_prompt("who?", [qa.Document(f"T{i}", f"text {i}.") for i in range(k)])


def test_document_spans_of_a_qa_and_a_kv_prompt():
    t = _qa(3)
    got = [t[a:b] for a, b in qa.document_char_spans(t)]
    assert got == [f"Document [{i + 1}](Title: T{i}) text {i}." for i in range(3)]
    kv = qa.kv_example_prompt([("k1", "v1"), ("k2", "v2"), ("k3", "v3")], "k2")
    assert [kv[a:b] for a, b in qa.document_char_spans(kv)] == \
        ['"k1": "v1"', '"k2": "v2"', '"k3": "v3"']
    # the dummy prompts: one per document, only that document replaced, in place
    for text in (t, kv):
        spans = qa.document_char_spans(text)
        for k, (alt, (a, b)) in enumerate(qa.dummy_documents(text)):
            c0, c1 = spans[k]
            assert alt[:c0] == text[:c0] and alt[b:] == text[c1:]
            assert ("Dummy" in alt[a:b]) if text is t else alt[a:b].startswith('"0000')


@pytest.mark.parametrize("text, words", [
    ("Write.\n\nDocument [2](Title: A) x.\n\nQuestion: q\nAnswer:", "numbered 1..K"),
    ("Write.\n\nDocument [1](Title: A) x.\nDocument [3](Title: B) y.\n\nQuestion: q\nAnswer:",
     "numbered 1..K"),
    ("Write something without documents.", "no documents"),
])
def test_document_spans_refuse_what_is_not_a_task_prompt(text, words):
    with pytest.raises(ValueError, match=words):
        qa.document_char_spans(text)


def test_a_prompt_that_holds_the_dummy_is_refused():
    t = qa.qa_prompt("who?", [qa.DUMMY_DOCUMENT, qa.Document("B", "y.")])
    with pytest.raises(ValueError, match="dummy document"):
        qa.dummy_documents(t)


@pytest.mark.parametrize("model", ["smollm2-135m", "gemma3-270m"])
def test_token_spans_with_a_real_tokenizer_and_its_chat_template(model):
    """With a packaged BPE tokenizer (SmolLM2's has a chat template): the documents' token
    spans are disjoint, each decodes to its document (give or take the boundary's spaces and
    punctuation merged into a token), and each dummy's span decodes to the dummy."""
    from posbias_nb import models as _models

    tok = _models.packaged_tokenizer(model)
    codec = Codec(tok, len(tok))
    texts = [_qa(4), qa.kv_example_prompt([("a1b2", "c3d4"), ("e5f6", 'say "hi"'),
                                           ("0a0b", "0c0d")], "e5f6")]
    for t in texts:
        ids, spans = qa.document_token_spans(codec, t)
        assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))
        for (a, b), (c0, c1) in zip(spans, qa.document_char_spans(t)):
            got = tok.decode(ids[a:b]).strip()
            assert t[c0:c1].strip("{}, ") in got and len(got) <= len(t[c0:c1]) + 3, (got, t)
        for alt, cs in qa.dummy_documents(t):
            dids, ((a, b),) = qa.document_token_spans(codec, alt, [cs])
            assert alt[cs[0]:cs[1]].strip('"') in tok.decode(dids[a:b])


def test_token_spans_are_disjoint_and_cover_each_document():
    codec = Codec(None, 256)
    t = _qa(4)
    ids, spans = qa.document_token_spans(codec, t)
    text, _ = codec.render(t)
    assert ids == codec.encode(text, prompt=True)[0]
    for (a, b), (c0, c1) in zip(spans, qa.document_char_spans(t)):
        assert bytes(ids[a:b]).decode() == t[c0:c1]  # bytes: one token a character here
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))


def test_calibration_recall_counts_the_gold_ranked_first():
    from posbias_nb.experiments.remedy.fix import calibration_recall

    R = np.array([[0.3, 0.1, 0.0], [0.0, 0.2, 0.1], [0.5, 0.1, 0.2], [0.0, 0.1, 0.4]])
    got = calibration_recall(R, [0, 1, 1, 0], [0, 2])  # gold documents 0, 2, 2, 0
    assert (got["hits"], got["n"]) == (1, 4) and got["by_slot"] == [0.5, 0.0]
    assert got["share"]["low"] < 0.25 < got["share"]["high"] and got["chance"] == 1 / 3
    # two questions of two prompts: two units, so a wider interval than over four prompts
    two = calibration_recall(R, [0, 1, 1, 0], [0, 2], example=[0, 0, 1, 1])
    assert two["units"] == 2 and two["share"]["estimate"] == 0.25
    assert two["share"]["high"] - two["share"]["low"] > got["share"]["high"] - got["share"]["low"]
    with pytest.raises(ValueError, match="example labels"):
        calibration_recall(R, [0, 1, 1, 0], [0, 2], example=[0, 1])
    for bad in ((R[:, :1], [0, 1, 1, 0], [0, 2]), (R, [0, 1], [0, 2]), (R, [0, 2, 1, 0], [0, 2]),
                (R, [0, 1, 1, 0], [0, 3])):
        with pytest.raises(ValueError, match="relevance"):
            calibration_recall(*bad)


# --------------------------------------------------------------------------------------------
# the measurements (tiny random models)

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from posbias_nb import cache, models  # noqa: E402
from posbias_nb.experiments.base import prompts as prompts_mod  # noqa: E402
from posbias_nb.experiments.remedy import fix as fix_mod  # noqa: E402
from posbias_nb.experiments.remedy.fix import scoring as fix_scoring  # noqa: E402
from posbias_nb.experiments.remedy.fix import tune as fix_tune  # noqa: E402
from posbias_nb.experiments.base.study import score_remedy  # noqa: E402
from posbias_nb.measure import positional  # noqa: E402
from posbias_nb.measure.prefix import Prefix  # noqa: E402
from posbias_nb.measure.scoring import score_batch  # noqa: E402
from posbias_nb.models import remedy_file  # noqa: E402
from posbias_nb.experiments.base import study


@pytest.fixture(scope="module")
def tiny():
    return {n: models.load(n, weights="random", seed=0)[0] for n in ("smollm2-tiny",
                                                                   "gemma3-tiny")}


def _last_row_eager(m, seq):
    m.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            att = m(torch.as_tensor([seq]), output_attentions=True).attentions
    finally:
        m.set_attn_implementation("sdpa")
    return torch.stack([x[0, :, -1].double() for x in att]).mean((0, 1))


def test_calibrated_attention_beyond_a_sliding_window_equals_eager(tiny):
    """Gemma-3's tiny twin has a window of 16: dummy prompts of 30 tokens cannot reuse the
    recorded prefix, and are read by full passes; the result is eq. 4 from eager maps."""
    m = tiny["gemma3-tiny"]
    g = np.random.default_rng(3)
    ids = g.integers(0, 200, 30).tolist()
    spans = [(2, 8), (8, 15), (15, 24)]
    dummy = [70, 71, 72]
    dummies = [{"prompt_ids": ids[:a] + dummy + ids[b:], "span": (a, a + 3)} for a, b in spans]
    got = positional.calibrated_attention(m, ids, spans, dummies)
    for k, (a, b) in enumerate(spans):
        want = float(_last_row_eager(m, ids)[a:b].mean()) - \
            float(_last_row_eager(m, dummies[k]["prompt_ids"])[a:a + 3].mean())
        assert abs(got["relevance"][k] - want) < 1e-6
    assert np.abs(got["relevance"]).max() > 1e-6  # the check can see a difference


@pytest.mark.parametrize("name", ["smollm2-tiny", "gemma3-tiny"])
def test_calibration_scores_equal_full_passes_under_the_remedy(tiny, name):
    """score_remedy of the calibration, on recorded passes (within every window) or on batched
    full passes (beyond one), equals one full pass per prompt under the remedy."""
    m = tiny[name]
    g = np.random.default_rng(4)
    # out of length order, so that the batch's sort reorders them (each row its own spans)
    P = [g.integers(0, 200, n).tolist() for n in (13, 12)]
    if name == "gemma3-tiny":
        P = [g.integers(0, 200, n).tolist() for n in (27, 24)]  # beyond the window of 16
    A = [g.integers(0, 200, 3).tolist() for _ in P]
    S = [[(1, 4), (4, 8), (8, 11)], [(2, 5), (5, 9), (9, 11)]]
    R = [np.array([0.02, -0.01, 0.0]), np.array([0.0, 0.03, -0.02])]
    settings = [{"temperature": 0.01}, {"temperature": 1.0}]
    pre = [Prefix(m, p) for p in P]
    lp, _ = score_remedy(m, P, A, "attention-calibration", settings, spans=S, relevance=R,
                         prefixes=pre)
    for j, kw in enumerate(settings):
        for i, (p, a) in enumerate(zip(P, A)):
            with models.remedy(m, "attention-calibration", start=len(p) - 1, spans=S[i],
                               relevance=R[i], **kw):
                want = score_batch(m, [p], [a])[0][0]
            assert lp[j + 1, i] == pytest.approx(want, abs=2e-4)
    assert np.abs(lp[1] - lp[0]).max() > 1e-6
    with pytest.raises(ValueError, match="spans= and relevance="):
        score_remedy(m, P, A, "attention-calibration", settings)
    with pytest.raises(ValueError, match="recorded passes of the 2 prompts"):
        score_remedy(m, P, A, "attention-calibration", settings, spans=S, relevance=R,
                     prefixes=pre[::-1])


def _qa_rows(n):
    return [{"question": f"what is item {i}", "answers": [f"thing{i}"],
             "ctxs": [{"title": f"Item {i}", "text": f"Item {i} is thing{i}.", "isgold": True}]}
            for i in range(n)]


@pytest.fixture(scope="module")
def model_dir(llama4_dir):
    return llama4_dir


@pytest.fixture(scope="module")
def run(tmp_path_factory, model_dir):
    p = tmp_path_factory.mktemp("data") / "t.jsonl.gz"
    with gzip.open(p, "wt") as f:
        for r in _qa_rows(30):
            f.write(json.dumps(r) + "\n")
    # every setting eligible: the calibration is chosen and judged on the test part
    return p, fix_mod.fix(model_dir, p, documents=4, examples=8, quick=True, edge_loss=1e9,
                          rule="all-slots", force=True)


def test_fix_searches_and_judges_the_calibration(run, model_dir):
    from posbias_nb.measure import entry

    f, res = run
    t = res["tuning"]["attention-calibration"]
    # the paper's reading at three temperatures, then ours (issue 46) at each
    assert [s["temperature"] for s in t["grid"]] == [5e-5, 5e-4, 5e-3] * 4
    assert len(t["middle_gain"]) == 12 and t["chosen"] == int(np.argmax(t["all_gain"]))
    assert t["params"] == t["grid"][t["chosen"]]
    v = res["test"]["attention-calibration"]
    assert v["verdict"] in ("holds", "fails", "inconclusive", "not testable")
    assert v["cost"]["nll_change"] is None and "no documents" in v["cost"]["nll_reason"]
    assert v["cost"]["latency_ratio"]["estimate"] > 0
    # one tuning prompt's score against an oracle: its documents, its dummies, a full pass
    tune_part = prompts_mod.prepare(f, 4, fix_mod.fix_positions(4), None, None, 0, None,
                                      select=[int(i) for i in _tune_indices(f)],
                                      pool_exclude=[int(i) for i in _test_indices(f)])
    m = entry.loaded(model_dir, weights="pretrained", seed=0)[0]
    codec = Codec(None, m.get_input_embeddings().num_embeddings)
    text = tune_part["items"][0]["prompts"][1]
    ids, spans = qa.document_token_spans(codec, text)
    dums = []
    for alt, cs in qa.dummy_documents(text):
        dids, (sp,) = qa.document_token_spans(codec, alt, [cs])
        dums.append({"prompt_ids": dids, "span": sp})
    rel = positional.calibrated_attention(m, ids, spans, dums)["relevance"]
    ans = study.answer_ids(codec, tune_part["items"][0]["answers"][0])
    base = score_batch(m, [ids], [ans])[0][0]
    temp = t["grid"][0]["temperature"]
    with models.remedy(m, "attention-calibration", start=len(ids) - 1, spans=spans,
                       relevance=rel, temperature=temp):
        want = score_batch(m, [ids], [ans])[0][0]
    _, _, codec2, rec = fix_scoring._records(model_dir, "pretrained", 0, tune_part)
    lp, _, R = fix_scoring._calibration_scores(m, codec2, tune_part, rec, [{"temperature": temp}])
    assert rec["prompts"][1] == ids and lp[0, 1] == pytest.approx(want, abs=2e-4)
    np.testing.assert_allclose(R[1], rel, rtol=0, atol=1e-9)
    assert abs(want - base) > 1e-6  # the calibration moved this score: the check can fail


def _split(f):
    fmt, exs = qa.read_task_file(f)
    chosen = study.draw_examples(len(exs), 8, 0)
    a, b = fix_mod.split(len(chosen), seed=0)
    return [int(chosen[i]) for i in a], [int(chosen[i]) for i in b]


def _tune_indices(f):
    return _split(f)[0]


def _test_indices(f):
    return _split(f)[1]


def test_a_calibration_remedy_file_round_trip_and_restore(run, tmp_path, model_dir):
    """The winner's file carries the temperature; applied with a prompt's spans and relevance
    it scores exactly as the remedy itself; the model comes back bit for bit; a parameter that
    is the file's own cannot be added."""
    from posbias_nb.measure import entry

    _, res = run
    res["winner"] = "attention-calibration"
    paths = fix_mod.write_fix(res, tmp_path / "fix")
    spec = remedy_file.read(paths["remedy"])
    assert spec["remedy"] == "attention-calibration"
    assert spec["params"] == res["tuning"]["attention-calibration"]["params"]
    m = entry.loaded(model_dir, weights="pretrained", seed=0)[0]
    before = {k: v.clone() for k, v in m.state_dict().items()}
    p, a = list(range(5, 40)), [7, 8]
    kw = dict(start=len(p) - 1, spans=[(2, 10), (10, 20), (20, 30)],
              relevance=[0.05, -0.02, 0.0])
    if spec["params"].get("normaliser") == "shared":  # ours: the documents' mean attention
        kw["attention"] = [0.02, 0.01, 0.03]
    with models.remedy(m, paths["remedy"], **kw):
        via_file = score_batch(m, [p], [a])
    own = {k: v for k, v in spec["params"].items() if k != "dummy"}
    with models.remedy(m, "attention-calibration", **own, **kw):
        direct = score_batch(m, [p], [a])
    plain = score_batch(m, [p], [a])
    assert via_file[0][0] == direct[0][0] and via_file[0][0] != plain[0][0]
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())
    with pytest.raises(ValueError, match="a caller may add attention, relevance, spans, start"):
        with models.remedy(m, paths["remedy"], temperature=1.0, **kw):
            pass
    page = (tmp_path / "fix" / "index.html").read_text()
    assert "attention-calibration" in page and "no documents" in page


def test_task_under_a_calibration_file_equals_full_passes(tmp_path, model_dir):
    """posbias task --remedy-file with a calibration file: each document prompt's answer log p
    and greedy generation equal full passes under the calibration with that prompt's spans and
    its relevance (eq. 4 from its dummy prompts); the closed-book and oracle prompts (fewer
    than two documents) are the unpatched run's."""
    from posbias_nb.experiments.prompt import user_task as task_mod
    from posbias_nb.measure import entry

    data = tmp_path / "t.jsonl.gz"
    with gzip.open(data, "wt") as f:
        for r in _qa_rows(6):
            f.write(json.dumps(r) + "\n")
    kw = dict(documents=3, examples=3, max_new_tokens=4)
    m = entry.loaded(model_dir, weights="pretrained", seed=0)[0]
    params = {"temperature": 5e-3}
    rf = remedy_file.write(tmp_path / "remedy.json", "attention-calibration", params, m,
                           model_dir)
    base = task_mod.task_run(model_dir, data, **kw)["examples"]
    got = task_mod.task_run(model_dir, data, remedy_file=rf, **kw)["examples"]
    P = prompts_mod.prepare(data, 3, None, 3, None, 0)
    codec = Codec(None, m.get_input_embeddings().num_embeddings)
    i, moved = 0, 0
    for it in P["items"]:
        ans = study.answer_ids(codec, it["answers"][0])
        for t in it["prompts"]:
            pid, spans = qa.document_token_spans(codec, t)
            dums = [{"prompt_ids": qa.document_token_spans(codec, alt, [cs])[0],
                     "span": qa.document_token_spans(codec, alt, [cs])[1][0]}
                    for alt, cs in qa.dummy_documents(t)]
            rel = positional.calibrated_attention(m, pid, spans, dums)["relevance"]
            rem = dict(params, spans=spans, relevance=rel)
            with models.remedy(m, "attention-calibration", start=len(pid) - 1, **rem):
                want = score_batch(m, [pid], [ans])[0][0]
            assert got[i]["logprob"] == pytest.approx(float(want), abs=1e-4)
            ids = list(pid)
            with torch.no_grad(), models.remedy(m, "attention-calibration",
                                                start=len(pid) - 1, **rem):
                for _ in range(4):
                    ids.append(int(m(torch.tensor([ids])).logits[0, -1].argmax()))
                    if "\n" in codec.decode(ids[len(pid):]).lstrip():
                        break
            assert got[i]["output"] == codec.decode(ids[len(pid):])
            moved += got[i]["logprob"] != base[i]["logprob"]
            i += 1
        for _ in ("closed_book", "oracle"):
            assert got[i]["logprob"] == base[i]["logprob"] and \
                got[i]["output"] == base[i]["output"]
            i += 1
    assert i == len(got) and moved > 0


def test_remedies_searched_are_the_ones_asked_for(tmp_path, monkeypatch, model_dir):
    """--remedies: a remedy left out is neither measured nor returned (its cache entry is not
    even asked for), Holm's family is the ones judged; the calibration alone scores the model
    as it is in an entry of its own, without the channel search."""
    f = tmp_path / "t.jsonl.gz"
    with gzip.open(f, "wt") as fh:
        for r in _qa_rows(30):
            fh.write(json.dumps(r) + "\n")
    parts = []
    real = cache.cached

    def spy(ns, params, compute, *a, **k):
        parts.append(params.get("part"))
        return real(ns, params, compute, *a, **k)
    monkeypatch.setattr(cache, "cached", spy)
    kw = dict(documents=4, examples=8, quick=True, edge_loss=1e9, rule="all-slots", force=True)
    res = fix_mod.fix(model_dir, f, remedies="ms-poe,hidden-scaling", **kw)
    assert set(res["tuning"]) == {"channel", "hidden-scaling", "ms-poe"}
    assert res.meta["remedies"] == ["hidden-scaling", "ms-poe"]
    assert not any("calibration" in str(p) for p in parts) and "tune" in parts

    def no_search(*a, **k):
        raise AssertionError("the channel search ran")
    monkeypatch.setattr(fix_tune, "_candidates", no_search)
    parts.clear()
    res = fix_mod.fix(model_dir, f, remedies=["attention-calibration"], **kw)
    assert set(res["tuning"]) == {"channel", "attention-calibration"}
    assert "tune" not in parts and {"tune-base", "tune-calibration"} <= set(parts)
    assert set(res["test"]) - {"base", "n_examples"} == {"attention-calibration"}
    assert res["test"]["attention-calibration"]["level"] == pytest.approx(0.95)  # a family of 1
    monkeypatch.undo()  # the channel search back, the spy gone
    res = fix_mod.fix(model_dir, f, remedies=["ms-poe"], **kw)  # measured with hidden scaling
    assert set(res["tuning"]) == {"channel", "ms-poe"}
    assert set(res["test"]) - {"base", "n_examples"} <= {"ms-poe"}
    for bad in ("magic", "ms-poe,ms-poe", [], "ms-poe;hidden-scaling"):
        with pytest.raises(ValueError, match="remedies must be distinct names"):
            fix_mod.fix(model_dir, f, remedies=bad, **kw)


def test_command_refuses_unknown_remedies_one_line(tmp_path, capsys, model_dir):
    from posbias_nb import cli

    f = tmp_path / "t.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in _qa_rows(30)))
    out = tmp_path / "new" / "fix"
    argv = ["fix", "--model", model_dir, "--data", str(f), "--out", str(out), "--quick",
            "--remedies", "hidden-scaling,magic"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "remedies must be distinct names" in err[0], err
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
def test_report_under_a_calibration_file(tmp_path, capsys, model_dir):
    """posbias report --remedy-file with a calibration file: section 1's trained profile is the
    unpatched one (text windows hold no documents), the summary says so, and section 3's
    key-value prompts are scored under the calibration."""
    from posbias_nb import cli
    from posbias_nb.experiments.report.words import CALIBRATION_TEXT
    from posbias_nb.measure import entry

    m = entry.loaded(model_dir, weights="pretrained", seed=0)[0]
    rf = remedy_file.write(tmp_path / "remedy.json", "attention-calibration",
                           {"temperature": 5e-4}, m, model_dir)
    base = ["report", "--model", model_dir, "--length", "300", "--quick", "--quiet"]
    assert cli.main([*base, "--out", str(tmp_path / "plain")]) == 0
    assert cli.main([*base, "--remedy-file", str(rf), "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    plain = json.loads((tmp_path / "plain" / "report.json").read_text())
    obj = json.loads((tmp_path / "r" / "report.json").read_text())
    bt = obj["born_trained"]
    assert bt["trained"]["curve"] == bt["unpatched"]["curve"] == \
        plain["born_trained"]["trained"]["curve"]
    assert CALIBRATION_TEXT in obj["summary"]
    assert obj["meta"]["remedy"]["remedy"] == "attention-calibration"
    assert json.dumps(obj["task"], sort_keys=True) != json.dumps(plain["task"], sort_keys=True)


def test_a_recorded_calibration_tuning_entry_is_re_measured_by_a_sample_of_records(
        tmp_path, monkeypatch, model_dir):
    """The calibration's tuning entry is its records end to end (fix.scoring._calibration_one, record
    by record): recorded whole, it is re-measured by a sample of its records (cache.Parts), one
    at every gold slot at least (the kinds it declares, issue 56), which agree, and the same
    choice comes back; a recorded relevance moved by 0.5 fails naming the part."""
    from posbias_nb import cache
    from remeasure import as_make_test, events

    f = tmp_path / "t.jsonl.gz"
    with gzip.open(f, "wt") as fh:
        for r in _qa_rows(30):
            fh.write(json.dumps(r) + "\n")
    kw = dict(documents=4, examples=8, quick=True, edge_loss=1e9, rule="all-slots", force=True,
              remedies=["attention-calibration"])
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "rec"))
    first = fix_mod.fix(model_dir, f, **kw)
    cal = []
    for p in (tmp_path / "rec" / "fix-tune").glob("*.npz"):
        a = cache.read_entry(p)
        if "relevance" in a:
            cal.append((p, a))
    (path, arrays), = cal

    def again(name):
        log = as_make_test(monkeypatch, tmp_path, tmp_path / "rec", [f"fix-tune/{path.stem}"],
                           name)
        res = fix_mod.fix(model_dir, f, **kw)
        return res, events(log)

    res, ev = again("ok")
    assert res["tuning"] == first["tuning"]
    mine = [e for e in ev if e["ns"] == "fix-tune" and e["key"] == path.stem[:16]]
    parts = [e["part"] for e in mine if e["event"] == "computed-part"]
    assert {int(arrays["slot"][i]) for i in parts} == set(arrays["slot"].tolist()) == set(range(4))
    assert parts[0] == 0 and len(parts) in (4, 5)  # the first, the digest's, the slots left
    assert mine[-1]["event"] == "verified" and mine[-1]["parts"] == len(arrays["slot"])
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "rec"))
    arrays["relevance"] = arrays["relevance"] + 0.5
    cache.write_entry(cache.entry_path("fix-tune", path.stem), arrays)
    with pytest.raises(cache.RecordedMismatch, match="part 0 of"):
        again("bad")
