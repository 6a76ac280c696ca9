"""The real-questions study (experiments/prompt/realqa.py): its locked design, the power rule that
chose its size, the tables it decides on.  No model runs here."""
import numpy as np
import pytest
from scipy import stats as st

from posbias_nb.experiments.prompt import realqa
from posbias_nb.results import Result
from posbias_nb.experiments.base import study


def test_the_pilot_and_the_test_questions_are_disjoint_and_in_the_file():
    D = realqa.CHAPTER
    pilot, test = set(D["pilot"]), set(D["test"])
    assert not pilot & test
    assert len(pilot) == len(D["pilot"]) and len(test) == len(D["test"])
    assert all(0 <= i < D["data"]["qa"]["examples_in_file"] for i in pilot | test)
    assert D["middle"] in D["positions"] and D["positions"][0] == 0
    assert D["positions"][-1] == D["documents"] - 1 and len(D["positions"]) >= 5


def test_the_data_files_are_the_designs():
    assert realqa.data_path("qa").name == "nq-open-oracle.jsonl.gz"
    with pytest.raises(ValueError, match="which must be 'qa' or 'kv', got 'x'"):
        realqa.data_path("x")


def test_power_n_is_the_smallest_n_with_the_target_power():
    x = np.array([0.2, 1.9, 0.8, 1.1, 0.4, 1.6])  # effect size about 1.1
    rule = realqa.power_rule()
    D = realqa.CHAPTER
    assert rule == {"target": D["power"]["target"],
                    "alpha": D["alpha"] / len(D["families"]["position"])}
    n = realqa.power_n(x, **rule)
    d = x.mean() / x.std(ddof=1)

    def power(k):
        return st.nct.sf(st.t.ppf(1 - rule["alpha"], k - 1), k - 1, d * np.sqrt(k))
    assert power(n) >= rule["target"] > power(n - 1)
    assert realqa.power_n(x - x.mean() / 2, **rule) > n  # half the mean: more questions
    with pytest.raises(ValueError, match="at least 2 differences with spread"):
        realqa.power_n([1.0, 1.0], **rule)
    # an effect too small for the cap raises instead of returning the cap
    tiny = x - x.mean() + 0.01
    with pytest.raises(ValueError, match="no n up to 400 reaches power 0.8"):
        realqa.power_n(tiny, **rule)
    with pytest.raises(TypeError):
        realqa.power_n(x)  # the rule's numbers come from the design, never from defaults


def _fake(lp):
    lines = [10, 20, 30]
    pos = [0, 2, 4, 7, 9]
    ex = [{"example_line": lines[i], "setting": "documents", "gold_document": p + 1,
           "output": "", "outcome": "answer" if lp[i][j] > -1 else "wrong",
           "logprob": lp[i][j]} for i in range(3) for j, p in enumerate(pos)]
    ex.append({"example_line": 10, "setting": "oracle", "gold_document": None, "output": "",
               "outcome": "answer", "logprob": 0.0})
    return Result({"setting": [], "examples": ex},
                  meta={"gold_documents": [p + 1 for p in pos], "example_lines": lines,
                        "format": "liu-qa"}, columns=("setting",))


def test_the_tables_and_the_paired_differences_come_from_the_right_cells():
    lp = [[-1.0, -2.0, -3.0, -2.5, -0.5], [-0.2, -4.0, -5.0, -1.0, -0.1],
          [-2.0, -2.0, -2.0, -2.0, -2.0]]
    M = realqa.matrices(_fake(lp))
    assert np.array_equal(M["logprob"], np.array(lp))
    assert M["correct"][1].tolist() == [1.0, 0.0, 0.0, 0.0, 1.0]
    d = realqa.first_middle_last(_fake(lp))  # the middle is slot 4, the third position
    assert d["first"].tolist() == [2.0, 4.8, 0.0] and d["last"].tolist() == [2.5, 4.9, 0.0]
    bad = _fake(lp)
    bad["examples"].pop(0)
    with pytest.raises(ValueError, match="missing"):
        realqa.matrices(bad)


def test_paired_by_slot_is_the_mean_paired_difference_with_its_t_interval():
    from scipy import stats as st

    lp = np.array([[-1.0, -2.0, -3.0, -2.5, -0.5], [-0.2, -4.0, -5.0, -1.0, -0.1],
                   [-2.0, -2.0, -2.0, -2.0, -2.5]])
    r = realqa.paired_by_slot(_fake(lp.tolist()))
    assert r["slots"].tolist() == [1, 3, 5, 8, 10] and r["middle"] == 5 and r["n"] == 3
    d = lp - lp[:, [2]]  # the middle slot, 5, is the third position
    assert np.allclose(r["diff"], d.mean(0)) and r["diff"][2] == 0 == r["low"][2] == r["high"][2]
    # the oracle: scipy's t interval of the first slot's paired differences
    lo, hi = st.t.interval(0.95, 2, loc=d[:, 0].mean(), scale=st.sem(d[:, 0]))
    assert np.isclose(r["low"][0], lo) and np.isclose(r["high"][0], hi)
    # the first slot minus the middle is first_middle_last's "first", the same numbers
    assert np.allclose(d[:, 0], realqa.first_middle_last(_fake(lp.tolist()))["first"])


@pytest.mark.slow  # Jacobians of a model's prompts
def test_the_jacobian_prior_reads_each_gold_span_of_its_own_prompts(monkeypatch, tmp_path):
    """jacobian_prior: one profile per prompt, question-major, its share on the gold document
    per token.  With a fake profile that is 1 on the gold document's tokens and 0 elsewhere, the
    prior is the prompt's length over the document's (the span and the prompt line up); with a
    flat profile it is 1 everywhere; a profile of the wrong length is refused."""
    pytest.importorskip("transformers")
    from posbias_nb import models
    from posbias_nb.measure import jacobian
    from posbias_nb.tasks import qa

    _, exs = qa.read_task_file(realqa.data_path("qa"))
    D = realqa.CHAPTER
    res = Result({"examples": []}, meta={
        "format": "liu-qa", "documents": D["documents"], "gold_documents": [1, 5, 10],
        "example_lines": [exs[D["pilot"][0]].line, exs[D["pilot"][1]].line]}, columns=())
    tok = models.packaged_tokenizer("smollm2-135m")

    class _Emb:
        num_embeddings = len(tok)

    class _M:
        def get_input_embeddings(self):
            return _Emb()

    monkeypatch.setattr(study, "load", lambda *a, **k: (_M(), tok, None))
    S = realqa.gold_spans("smollm2-135m", res)
    assert S.shape == (2, 3, 3)
    seen = []
    mode = {"v": "gold"}

    def fake(m, ids, **kw):
        k = len(seen)
        seen.append(kw["seed"])
        a, b, T = S[k // 3, k % 3]
        assert ids.shape == (1, T)
        row = np.zeros(T + (mode["v"] == "long"))
        if mode["v"] == "flat":
            row[:] = 1.0
        else:
            row[a:b] = 1.0
        return {"per_sequence": row[None]}

    monkeypatch.setattr(jacobian, "influence_profile", fake)
    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")
    got = realqa.jacobian_prior("smollm2-135m", res)
    assert np.allclose(got, S[:, :, 2] / (S[:, :, 1] - S[:, :, 0]))
    assert seen == [D["prior_jacobian"]["seed"] + k for k in range(6)]
    mode["v"], seen[:] = "flat", []
    assert np.allclose(realqa.jacobian_prior("smollm2-135m", res), 1.0)
    mode["v"], seen[:] = "long", []
    with pytest.raises(RuntimeError, match="a profile of"):
        realqa.jacobian_prior("smollm2-135m", res)
    # a sampled re-measurement computes two of the six prompts, seeded as in the whole
    # (cache.Parts: prompt k alone is row k of the whole), and agrees with the recorded entry
    import json

    from remeasure import as_make_test

    from posbias_nb.provenance import verify

    mode["v"], seen[:] = "gold", []
    rec = tmp_path / "rec"
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(rec))
    whole = realqa.jacobian_prior("smollm2-135m", res)
    (f,) = (rec / "realqa-jacobian").glob("*.npz")
    log = as_make_test(monkeypatch, tmp_path, rec, [f"realqa-jacobian/{f.stem}"], "parts")
    seen[:] = []
    calls = []
    def _by_seed(m, ids, **kw):
        k = kw["seed"] - D["prior_jacobian"]["seed"]
        calls.append(k)
        a, b, T = S[k // 3, k % 3]
        row = np.zeros(T)
        row[a:b] = 1.0
        return {"per_sequence": row[None]}

    monkeypatch.setattr(jacobian, "influence_profile", _by_seed)
    assert np.array_equal(realqa.jacobian_prior("smollm2-135m", res), whole)
    assert calls == verify.part_sample("realqa-jacobian", f.stem, 6) and len(calls) == 2
    ev = [json.loads(x)["event"] for x in log.read_text().splitlines()]
    assert ev.count("computed-part") == 2 and "verified" in ev and "computed" not in ev
