"""Issue 46: the attention calibration's two open choices, ours beside the paper's reading.

The length-matched dummy (its token count on real tokenizers and on bytes, its fixed filler
rule, its refusals), the variants' scores in ``posbias fix`` against full passes under the
remedy, the search over the four combinations under the all-slot rule and the paper's reading
alone under the first design's rule, and a variant's remedy file applied by ``posbias task``.
The shared normaliser's operator is tested against eq. 5 by hand in
``tests/unit/models/test_remedy_oracles.py``."""
import gzip
import json

import numpy as np
import pytest

from posbias_nb.tasks import qa
from posbias_nb.tasks.codec import Codec


def _docs(n=5, seed=0):
    g = np.random.default_rng(seed)
    words = ["river", "castle", "election", "1897", "the", "of", "painter", "was", "born", "in",
             "Müller", "(", ")", "—", "U.S.", "3.5", "km", "a", "novel", "won"]
    return [qa.Document(f"Title {i}", " ".join(g.choice(words, int(g.integers(3, 60)))) + ".")
            for i in range(n)]


def _check_lengths(codec, text):
    _, want = qa.document_token_spans(codec, text)
    alts = qa.length_matched_dummies(codec, text)
    assert len(alts) == len(want)
    chars = qa.document_char_spans(text)
    for k, ((alt, cs), (a, b)) in enumerate(zip(alts, want)):
        _, ((d0, d1),) = qa.document_token_spans(codec, alt, [cs])
        assert d1 - d0 == b - a, (k, d1 - d0, b - a)
        c0, c1 = chars[k]
        assert alt[:c0] == text[:c0] and alt[cs[1]:] == text[c1:]  # only document k replaced
        body = alt[cs[0]:cs[1]]
        assert body.startswith(f"Document [{k + 1}](Title: Dummy)")
        filler = body[len(f"Document [{k + 1}](Title: Dummy) "):]
        assert qa.DUMMY_FILLER.startswith(filler)  # the fixed rule: a cut of the filler


@pytest.mark.slow  # loads the packaged tokenizers
@pytest.mark.parametrize("model", ["smollm2-135m", "gemma3-270m"])
def test_length_matched_dummy_has_the_documents_token_count_on_real_tokenizers(model):
    from posbias_nb import models

    tok = models.packaged_tokenizer(model)
    codec = Codec(tok, len(tok))
    for seed in range(3):
        _check_lengths(codec, qa.qa_prompt("who wrote it?", _docs(5, seed)))


def test_length_matched_dummy_on_bytes_and_a_counterexample():
    codec = Codec(None, 256)
    t = qa.qa_prompt("who?", _docs(4, 7))
    _check_lengths(codec, t)
    # the paper's dummy is one length: here it is not each document's
    paper = [qa.document_token_spans(codec, alt, [cs])[1][0] for alt, cs in
             qa.dummy_documents(t)]
    _, want = qa.document_token_spans(codec, t)
    assert [b - a for a, b in paper] != [b - a for a, b in want]


def test_length_matched_dummy_refusals():
    codec = Codec(None, 256)
    kv = qa.kv_example_prompt([("k1", "v1"), ("k2", "v2")], "k1")
    with pytest.raises(ValueError, match="document prompts"):
        qa.length_matched_dummies(codec, kv)
    held = qa.qa_prompt("who?", [qa.Document("Dummy", "x."), qa.Document("B", "y.")])
    with pytest.raises(ValueError, match="dummy document"):
        qa.length_matched_dummies(codec, held)
    short = qa.qa_prompt("who?", [qa.Document("A", "x."), qa.Document("B", "y.")])
    with pytest.raises(ValueError, match="no cut of the dummy filler"):  # shorter than a header
        qa.length_matched_dummies(codec, short)
    from posbias_nb.experiments.base.study import prompt_documents
    with pytest.raises(ValueError, match="dummy must be one of"):
        prompt_documents(codec, qa.qa_prompt("who?", _docs(3)), dummy="short")


# --------------------------------------------------------------------------------------------
# in posbias fix (tiny random model, bytes)

torch = pytest.importorskip("torch")

from posbias_nb import models  # noqa: E402
from posbias_nb.experiments.remedy import fix as fix_mod  # noqa: E402
from posbias_nb.experiments.base import prompts as prompts_mod  # noqa: E402
from posbias_nb.experiments.remedy.fix import scoring as fix_scoring  # noqa: E402
from posbias_nb.measure import positional  # noqa: E402
from posbias_nb.measure.scoring import score_batch  # noqa: E402
from posbias_nb.models import remedy_file  # noqa: E402
from posbias_nb.experiments.base import study


def _rows(n):
    return [{"question": f"what is item {i}", "answers": [f"thing{i}"],
             "ctxs": [{"title": f"Item {i}", "text": f"Item {i} is the thing{i} of record {i} "
                       "in the long list.", "isgold": True}]}
            for i in range(n)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    p = tmp_path_factory.mktemp("cv") / "t.jsonl.gz"
    with gzip.open(p, "wt") as f:
        for r in _rows(30):
            f.write(json.dumps(r) + "\n")
    return p


def test_variant_scores_equal_full_passes_under_the_remedy(data, llama4_dir):
    """_calibration_record under each of the four combinations: the relevance of each dummy is
    eq. 4 from its own dummy prompts, and each score is one full pass under the remedy with
    that relevance (and, shared, the documents' mean attention)."""
    from posbias_nb.experiments.base.study import prompt_documents
    from posbias_nb.measure import entry

    part = prompts_mod.prepare(data, 4, fix_mod.fix_positions(4), 2, None, 0, None)
    m, _, codec, rec = fix_scoring._records(llama4_dir, "pretrained", 0, part)
    text = part["items"][0]["prompts"][2]
    i = 2
    docs = {d: prompt_documents(codec, text, rec["prompts"][i], d)
            for d in ("paper", "length-matched")}
    settings = [dict(temperature=t, dummy=d, normaliser=n) for d, n in fix_mod.CAL_VARIANTS
                for t in (5e-3, 5e-2)]
    lp, _, cal = fix_scoring._calibration_record(m, rec, docs, i, settings)
    pid, ans = rec["prompts"][i], rec["answers"][i]
    base = score_batch(m, [pid], [ans])[0][0]
    for j, s in enumerate(settings):
        c = positional.calibrated_attention(m, pid, *docs[s["dummy"]])
        np.testing.assert_allclose(cal[s["dummy"]]["relevance"], c["relevance"], atol=1e-9)
        extra = {"attention": c["attention"]} if s["normaliser"] == "shared" else {}
        with models.remedy(m, "attention-calibration", start=len(pid) - 1,
                           spans=docs[s["dummy"]][0], relevance=c["relevance"],
                           temperature=s["temperature"], normaliser=s["normaliser"], **extra):
            want = score_batch(m, [pid], [ans])[0][0]
        assert lp[j] == pytest.approx(want, abs=2e-4)
    assert np.abs(lp - base).max() > 1e-6
    # the two dummies give two relevances, the normalisers two scores: none is a no-op
    assert np.abs(cal["paper"]["relevance"] - cal["length-matched"]["relevance"]).max() > 1e-9
    assert abs(lp[0] - lp[4]) > 1e-7  # paper per-head against paper shared, same temperature
    assert entry is not None


def test_fix_searches_the_four_combinations_and_the_first_rule_the_papers_alone(data,
                                                                                 llama4_dir):
    kw = dict(documents=4, examples=8, quick=True, edge_loss=1e9, rule="all-slots", force=True,
              remedies=["attention-calibration"])
    res = fix_mod.fix(llama4_dir, data, **kw)
    t = res["tuning"]["attention-calibration"]
    assert t["grid"] == [dict(s) for s in fix_mod.GRID["attention-calibration"]]
    assert len(t["grid"]) == 12 and t["grid"][:3] == [{"temperature": v}
                                                      for v in (5e-5, 5e-4, 5e-3)]
    assert {(s.get("dummy", "paper"), s.get("normaliser", "per-head")) for s in t["grid"]} == \
        set(fix_mod.CAL_VARIANTS)
    j, _, _ = fix_mod.pick(t["all_gain"], t["middle_gain"], t["edge_change"], "all-slots", 1e9)
    assert t["chosen"] == j
    rb = t["recall_by_dummy"]
    assert set(rb) == {"paper", "length-matched"} and t["paper_relevance_agrees"]
    assert rb["paper"]["hits"] == t["recall"]["hits"]
    first = fix_mod.fix(llama4_dir, data, **dict(kw, rule="middle"))["tuning"][
        "attention-calibration"]
    assert first["grid"] == t["grid"][:3] and "recall_by_dummy" not in first
    assert first["middle_gain"] == t["middle_gain"][:3]  # the same entry, read as it was


def test_a_variant_file_applied_by_task_equals_the_remedy(tmp_path, data, llama4_dir):
    """A calibration file of the shared normaliser and the length-matched dummy: posbias task
    measures each prompt's relevance with that dummy and applies the shared normaliser with
    the documents' mean attention (one prompt against a full pass by hand); a bad dummy name
    in a file is refused."""
    from posbias_nb.experiments.prompt import user_task as task_mod
    from posbias_nb.experiments.base.study import prompt_documents
    from posbias_nb.measure import entry

    m = entry.loaded(llama4_dir, weights="pretrained", seed=0)[0]
    params = {"temperature": 5e-3, "dummy": "length-matched", "normaliser": "shared"}
    rf = remedy_file.write(tmp_path / "remedy.json", "attention-calibration", params, m,
                           llama4_dir)
    kw = dict(documents=3, examples=2, max_new_tokens=3)
    got = task_mod.task_run(llama4_dir, data, remedy_file=rf, **kw)["examples"]
    P = prompts_mod.prepare(data, 3, None, 2, None, 0)
    codec = Codec(None, m.get_input_embeddings().num_embeddings)
    it = P["items"][0]
    t = it["prompts"][1]
    pid, _ = qa.document_token_spans(codec, t)
    docs = prompt_documents(codec, t, pid, "length-matched")
    c = positional.calibrated_attention(m, pid, *docs)
    ans = study.answer_ids(codec, it["answers"][0])
    with models.remedy(m, "attention-calibration", start=len(pid) - 1, spans=docs[0],
                       relevance=c["relevance"], attention=c["attention"], temperature=5e-3,
                       normaliser="shared"):
        want = score_batch(m, [pid], [ans])[0][0]
    assert got[1]["logprob"] == pytest.approx(float(want), abs=1e-4)
    with models.remedy(m, rf, start=len(pid) - 1, spans=docs[0], relevance=c["relevance"],
                       attention=c["attention"]):
        via_file = score_batch(m, [pid], [ans])[0][0]
    assert via_file == pytest.approx(float(want), abs=1e-6)
    bad = json.loads(rf.read_text())
    bad["params"]["dummy"] = "short"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="dummy of attention-calibration"):
        remedy_file.read(tmp_path / "bad.json")


def test_retrieval_under_a_variant_file(tmp_path, llama4_dir):
    """posbias retrieval --remedy-file on its key-value prompts: a shared-normaliser file scores
    each prompt with its records' mean attention (every prompt against a pass by hand); a
    length-matched file is refused in one line (key-value records have no free text)."""
    from posbias_nb.experiments.remedy import inference
    from posbias_nb.experiments.prompt import retrieval as ret
    from posbias_nb.measure import entry
    from posbias_nb.tasks.kv_needle import dummy_prompts

    m = entry.loaded(llama4_dir, weights="pretrained", seed=0)[0]
    kw = dict(task="kv", positions=3, examples=2, length=400, seed=0)
    shared = remedy_file.write(tmp_path / "s.json", "attention-calibration",
                               {"temperature": 5e-3, "normaliser": "shared"}, m, llama4_dir)
    got = inference.retrieval_remedy_run(llama4_dir, None, file=shared, **kw)
    P, mm = ret.prompts_for(llama4_dir, "kv", 3, 2, 400, 0, "pretrained")
    want = {}
    for r in P["records"]:  # every prompt by hand; the run reports each gold slot's mean
        spans = [tuple(s) for s in r["pair_spans"]]
        c = positional.calibrated_attention(mm, r["prompt_ids"], spans, dummy_prompts(P, r))
        with models.remedy(mm, "attention-calibration", start=len(r["prompt_ids"]) - 1,
                           spans=spans, relevance=c["relevance"], attention=c["attention"],
                           temperature=5e-3, normaliser="shared"):
            lp = score_batch(mm, [r["prompt_ids"]], [r["answer_ids"]])[0][0]
        want.setdefault(r["gold_index"], []).append(float(lp))
    want = [np.mean(want[g]) for g in sorted(want)]
    np.testing.assert_allclose(np.asarray(got["logprob"], dtype=float), want, atol=2e-4)
    lm = remedy_file.write(tmp_path / "l.json", "attention-calibration",
                           {"temperature": 5e-3, "dummy": "length-matched"}, m, llama4_dir)
    with pytest.raises(ValueError, match="length-matched dummy is for document prompts"):
        inference.retrieval_remedy_run(llama4_dir, None, file=lm, **kw)
