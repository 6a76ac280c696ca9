"""Retrieval tasks (chapter *From prior to behaviour*): prompts, gold positions, scores, links."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from posbias_nb import metrics
from posbias_nb.experiments import retrieval as R
from posbias_nb.tasks import retrieval as T
from posbias_nb.measure import entry
from posbias_nb.measure.scoring import score

VOCAB = 300  # the -tiny twins' vocabulary: byte-level prompts


def _pairs_of(content: str) -> list[tuple[str, str]]:
    return re.findall(r'"([0-9a-f]{8})": "([0-9a-f]{8})"', content)


def _bytes(ids) -> str:
    return bytes(ids).decode("utf-8")


# --------------------------------------------------------------------------------------------
# Prompt construction (no model)


def test_kv_prompt_is_liu_et_al_format():
    data = [("test key1", "test value1"), ("test key2", "test value2"),
            ("test key3", "test value3")]
    gold = "\n".join([
        "Extract the value corresponding to the specified key in the JSON object below.",
        "",
        "JSON data:",
        '{"test key1": "test value1",',
        ' "test key2": "test value2",',
        ' "test key3": "test value3"}',
        "",
        'Key: "test key2"',
        "Corresponding value:",
    ])
    assert T.kv_prompt(data, "test key2") == gold
    with pytest.raises(ValueError, match="nope"):
        T.kv_prompt(data, "nope")


def test_slot_items_include_ends_and_refuse_collisions():
    assert T.slot_items(17, 7).tolist() == [0, 3, 5, 8, 11, 13, 16]
    assert T.slot_items(7, 7).tolist() == list(range(7))
    with pytest.raises(ValueError, match="6 items"):
        T.slot_items(6, 7)
    with pytest.raises(ValueError, match="positions"):
        T.slot_items(10, 1)


@pytest.fixture(scope="module")
def kv():
    return T.build_prompts(None, "kv", positions=4, examples=3, length=260, seed=5,
                           vocab_size=VOCAB)


def test_kv_gold_pair_sits_at_the_asked_position(kv):
    recs = kv["records"]
    n = kv["n_items"]
    assert len(recs) == 12 and n >= 4
    assert kv["items"][0] == 0 and kv["items"][-1] == n - 1
    for r in recs:
        pairs = _pairs_of(r["content"])
        assert len(pairs) == n
        key = re.search(r'Key: "([0-9a-f]{8})"', r["content"]).group(1)
        assert pairs[r["item"]] == (key, r["value"])
        assert r["item"] == kv["items"][r["gold_index"]]
        a, b = r["span"]  # the token span is the gold value's bytes
        assert _bytes(r["prompt_ids"][a:b]) == r["value"]
        assert _bytes(r["answer_ids"]) == r["value"]
        assert r["text"].endswith('Corresponding value: "')  # lead: the opening quote
        # slot spans: the gold slot's span is the gold span
        assert tuple(r["slot_spans"][r["gold_index"]]) == tuple(r["span"])


def test_kv_same_pairs_at_every_position(kv):
    recs = kv["records"]
    for e in range(3):
        mine = [r for r in recs if r["example"] == e]
        sets = [set(_pairs_of(r["content"])) for r in mine]
        assert all(s == sets[0] for s in sets)
        # only the gold pair moves: the others keep their relative order
        others = [[p for p in _pairs_of(r["content"]) if p[1] != r["value"]] for r in mine]
        assert all(o == others[0] for o in others)
    # different examples, different pairs
    assert set(_pairs_of(recs[0]["content"])) != set(_pairs_of(recs[4]["content"]))


def test_kv_length_rule_tracks_length():
    small = T.build_prompts(None, "kv", 3, 1, 220, 0, vocab_size=VOCAB)
    big = T.build_prompts(None, "kv", 3, 1, 600, 0, vocab_size=VOCAB)
    assert big["n_items"] > small["n_items"]
    for P, L in ((small, 220), (big, 600)):
        got = len(P["records"][0]["prompt_ids"])
        assert abs(got - L) < 30, (got, L)


def test_needle_prompts():
    P = T.build_prompts(None, "needle", positions=3, examples=2, length=1200, seed=1,
                        vocab_size=VOCAB)
    recs = P["records"]
    for e in range(2):
        mine = [r for r in recs if r["example"] == e]
        hay = [" ".join(re.sub(r"The secret code for \w+ is \w+\.", "", r["content"]).split())
               for r in mine]
        assert all(h == hay[0] for h in hay)  # same haystack, only the needle moves
        pos = [r["content"].index("The secret code for") for r in mine]
        assert pos == sorted(pos) and pos[0] < pos[-1]
        assert mine[0]["content"].startswith(R.NEEDLE_INSTRUCTION + "\n\nThe secret code")
        assert re.search(r"is [0-9a-f]{8}\.\n\nQuestion:", mine[-1]["content"])
        for r in mine:
            a, b = r["span"]
            assert _bytes(r["prompt_ids"][a:b]) == r["value"]
            assert _bytes(r["answer_ids"]) == " " + r["value"]
            key = re.search(r"secret code for ([0-9a-f]{8})\?", r["content"]).group(1)
            assert r["text"].endswith(f"Answer: The secret code for {key} is")


@pytest.mark.parametrize("kwargs,match", [
    (dict(task="kv", positions=1, examples=2, length=300), "positions"),
    (dict(task="kv", positions=3, examples=0, length=300), "examples"),
    (dict(task="qa", positions=3, examples=2, length=300), "qa"),
    (dict(task="kv", positions=7, examples=2, length=150), "length 150"),
    (dict(task="needle", positions=7, examples=2, length=120), "length 120"),
    (dict(task="kv", positions=3, examples=2, length=300, seed=-1), "seed"),
])
def test_bad_input_raises(kwargs, match):
    with pytest.raises(ValueError, match=match):
        T.build_prompts(None, vocab_size=VOCAB, **kwargs)


def test_prompts_are_deterministic():
    a = T.build_prompts(None, "kv", 3, 2, 300, seed=3, vocab_size=VOCAB)["records"]
    b = T.build_prompts(None, "kv", 3, 2, 300, seed=3, vocab_size=VOCAB)["records"]
    c = T.build_prompts(None, "kv", 3, 2, 300, seed=4, vocab_size=VOCAB)["records"]
    assert [r["prompt_ids"] for r in a] == [r["prompt_ids"] for r in b]
    assert [r["prompt_ids"] for r in a] != [r["prompt_ids"] for r in c]


# --------------------------------------------------------------------------------------------
# Scores on a tiny model


@pytest.fixture(scope="module")
def tiny():
    from posbias_nb import models

    return models.load("gpt2-tiny", weights="random", seed=0)[0]


def test_logprob_matches_a_hand_computation(tiny):
    import torch

    rng = np.random.default_rng(0)
    prompt = rng.integers(0, VOCAB, 20).tolist()
    answer = rng.integers(0, VOCAB, 4).tolist()
    lp, _ = R.score(tiny, prompt, answer)
    with torch.no_grad():
        logits = tiny(torch.tensor([prompt + answer])).logits[0].double()
    logp = torch.log_softmax(logits, -1)
    hand = sum(float(logp[len(prompt) - 1 + i, a]) for i, a in enumerate(answer))
    assert lp == pytest.approx(hand, abs=1e-4)
    assert lp < 0


def test_exact_match_is_greedy_decoding(tiny):
    import torch

    prompt = list(range(10, 40))
    with torch.no_grad():
        out = tiny.generate(torch.tensor([prompt]), max_new_tokens=3, do_sample=False,
                            pad_token_id=0)
    greedy = out[0, len(prompt):].tolist()
    assert R.score(tiny, prompt, greedy)[1] is True
    wrong = greedy[:2] + [(greedy[2] + 1) % VOCAB]
    assert R.score(tiny, prompt, wrong)[1] is False
    with pytest.raises(ValueError):
        R.score(tiny, prompt, [])


def test_summarize_intervals():
    gi = np.tile(np.arange(3), 4)
    ex = np.repeat(np.arange(4), 3)
    v = np.array([1, 0, 1] * 4, dtype=float)
    s = R.summarize(gi, ex, v, 3)
    assert s["mean"].tolist() == [1, 0, 1]
    assert (s["low"] <= s["mean"]).all() and (s["mean"] <= s["high"]).all()


def test_retrieval_run_json_deterministic(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path))
    kw = dict(task="kv", positions=3, examples=2, length=220, seed=0, weights="random")
    a = R.retrieval_run("gpt2-tiny", **kw)
    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")
    entry.forget()
    b = R.retrieval_run("gpt2-tiny", **kw)
    assert json.dumps(a) == json.dumps(b)  # same seed, same output; cache round-trip exact
    assert a["position"] == [0, 1, 2] and len(a["examples"]) == 6
    for k in ("accuracy", "logprob"):
        assert len(a[k]) == 3
        assert all(lo <= m <= hi for lo, m, hi in zip(a[k + "_low"], a[k], a[k + "_high"]))
    rec = a["examples"][0]
    assert set(rec) >= {"gold_index", "prompt_ids", "answer_ids", "logprob", "correct"}
    assert score(R._load("gpt2-tiny", "random", 0)[0], rec["prompt_ids"],
                   rec["answer_ids"])[0] == pytest.approx(rec["logprob"], abs=1e-9)
    assert a["meta"]["n_items"] >= 3 and a["meta"]["task"] == "kv"
    table = a.table()
    assert list(table) == list(R.CSV_COLUMNS) and all(len(v) == 3 for v in table.values())
    assert json.loads(json.dumps(a.to_json()))["meta"] == json.loads(json.dumps(a["meta"]))
    with pytest.raises(ValueError, match="no-such-model"):
        R.retrieval_run("no-such-model", **kw)
    with pytest.raises(ValueError, match="positions"):
        R.retrieval_run("gpt2-tiny", **dict(kw, positions=1))


@pytest.mark.parametrize("prior", ["argmax_prob", "rollout"])
def test_retrieval_link_shares(prior, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")
    res = R.retrieval_link("gpt2-tiny", task="kv", positions=3, examples=2, length=220,
                           seed=0, weights="random", prior=prior)
    assert res["share"].shape == (6,) and ((res["share"] > 0) & (res["share"] < 1)).all()
    assert res["slot_share"].shape == (6, 3)
    np.testing.assert_allclose(res["slot_share"][np.arange(6), res["gold_index"]],
                               res["share"])
    ends = np.cumsum(res["profile_len"])
    assert np.allclose([res["profile_flat"][e - n:e].sum() for e, n in
                        zip(ends, res["profile_len"])], 1.0)
    with pytest.raises(ValueError, match="prior"):
        R.retrieval_link("gpt2-tiny", prior="nope")


def test_auc_and_link_stats():
    assert metrics.auc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1]) == 1.0
    assert metrics.auc([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1]) == 0.0
    assert metrics.auc([0.5, 0.5], [0, 1]) == 0.5
    assert np.isnan(metrics.auc([0.1, 0.2], [1, 1]))
    rng = np.random.default_rng(0)
    x = rng.random((10, 5))
    s = R.link_stats(x, x + 0.01 * rng.random((10, 5)), "curve")
    assert s["estimate"] > 0.8 and s["low"] <= s["estimate"] <= s["high"]
    s = R.link_stats(x, -x, "within")
    assert s["estimate"] == pytest.approx(-1.0)
    y = (x > 0.5).astype(float)
    assert R.link_stats(x, y, "auc")["estimate"] == 1.0
    assert R.link_stats(x, np.zeros_like(x), "auc")["estimate"] is None  # one class only
    with pytest.raises(ValueError):
        R.link_stats(x, x[:, :3], "curve")
    with pytest.raises(ValueError, match="kind"):
        R.link_stats(x, x, "nope")


def test_retrieval_run_on_a_local_model_directory(tmp_path, monkeypatch):
    from posbias_nb import models

    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")
    m = models.load("gpt2-tiny", weights="random", seed=1)[0]
    m.save_pretrained(tmp_path / "tiny")
    out = R.retrieval_run(str(tmp_path / "tiny"), task="kv", positions=3, examples=2,
                          length=220, seed=0, weights="pretrained")
    assert out["meta"]["model"].endswith("tiny") and len(out["examples"]) == 6
    assert all(np.isfinite(out["logprob"]))


def test_prior_matrices_and_edge_ratios():
    # two examples, three slots; slot_share rows: one prompt per (example, gold slot)
    link = {"example": np.repeat([0, 1], 3), "gold_index": np.tile([0, 1, 2], 2),
            "slot_share": np.array([[.5, .1, .2], [.4, .3, .2], [.4, .1, .6]] * 2),
            "slot_ntok": np.full((6, 3), 2.0),
            "profile_flat": np.concatenate([[4, 1, 1, 1, 8]] * 6).astype(float),
            "profile_len": np.full(6, 5)}
    pm = R.prior_matrices(link)
    np.testing.assert_allclose(pm["gold"][0], [.25, .15, .3])
    np.testing.assert_allclose(pm["positional"][0], [.2, .05, .1])  # mean of non-gold rows / 2
    np.testing.assert_allclose(R.edge_ratios(link), np.tile([[4.0, 8.0]], (6, 1)))
    M = R.as_matrix([0, 0, 1, 1], [0, 1, 0, 1], [1, 2, 3, 4])
    assert M.tolist() == [[1, 2], [3, 4]]


def test_paired_contrast_and_outcome_matrices():
    M = np.array([[0.0, 1.0], [1.0, 3.0], [2.0, 2.0]])
    est, lo, hi = R.paired_contrast(M, 1, 0)
    assert est == pytest.approx(1.0) and lo <= est <= hi and lo >= 0.0
    res = {"examples": [{"example": 0, "gold_index": 0, "logprob": -1.0, "correct": True},
                        {"example": 0, "gold_index": 1, "logprob": -2.0, "correct": False}]}
    out = R.outcome_matrices(res)
    assert out["accuracy"].tolist() == [[1.0, 0.0]] and out["logprob"].tolist() == [[-1.0, -2.0]]
