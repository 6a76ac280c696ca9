"""Retrieval tasks (chapter *From prior to behaviour*): prompts, gold positions, scores, links."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from posbias_nb import metrics, stats
from posbias_nb.experiments.prompt import retrieval as R
from posbias_nb.tasks import kv_needle as T
from posbias_nb.measure import entry
from posbias_nb.measure.scoring import score, score_batch
from posbias_nb.experiments.base import study

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
    lp, _ = score(tiny, prompt, answer)
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
    assert score(tiny, prompt, greedy)[1] is True
    wrong = greedy[:2] + [(greedy[2] + 1) % VOCAB]
    assert score(tiny, prompt, wrong)[1] is False
    with pytest.raises(ValueError):
        score(tiny, prompt, [])


def test_summarize_intervals():
    gi = np.tile(np.arange(3), 6)
    ex = np.repeat(np.arange(6), 3)
    v = np.array([1, 0, 1] * 6, dtype=float)
    s = stats.summarize(gi, ex, v, 3, kind="proportion")
    assert s["mean"].tolist() == [1, 0, 1]
    assert (s["low"] <= s["mean"]).all() and (s["mean"] <= s["high"]).all()
    # 6/6 is never reported as [1, 1] (the percentile bootstrap did): Wilson gives [0.61, 1]
    assert s["low"][0] == pytest.approx(0.61, abs=0.01) and s["high"][1] > 0.3
    assert (s["high"] - s["low"] > 0.3).all()
    m = stats.summarize(gi, ex, gi + np.repeat(np.arange(6.0), 3), 3)  # t interval over examples
    assert m["mean"].tolist() == [2.5, 3.5, 4.5] and (m["low"] < m["mean"]).all()


def _batched_vs_single(model, vocab, seed=0):
    rng = np.random.default_rng(seed)
    prompts = [rng.integers(0, vocab, int(n)).tolist() for n in rng.integers(5, 40, 7)]
    answers = [rng.integers(0, vocab, int(n)).tolist() for n in rng.integers(1, 5, 7)]
    lp, ok = score_batch(model, prompts, answers, batch=4)
    single = [score(model, p, a) for p, a in zip(prompts, answers)]
    return lp, ok, single


def test_batched_scores_equal_the_unbatched_ones(tiny):
    from posbias_nb.measure.scoring import score_batch

    lp, ok, single = _batched_vs_single(tiny, VOCAB)
    np.testing.assert_allclose(lp, [s[0] for s in single], atol=1e-5, rtol=0)
    assert ok.tolist() == [s[1] for s in single]
    with pytest.raises(ValueError):
        score_batch(tiny, [[1, 2]], [[]])
    with pytest.raises(ValueError):
        score_batch(tiny, [[1, 2]], [[1], [2]])


def test_batched_scores_equal_unbatched_on_a_rope_model():
    from posbias_nb import models
    from posbias_nb.measure.scoring import score_batch

    m = models.load("qwen2-tiny", weights="random", seed=0)[0]
    lp, ok, single = _batched_vs_single(m, m.get_input_embeddings().num_embeddings, seed=1)
    np.testing.assert_allclose(lp, [s[0] for s in single], atol=1e-5, rtol=0)
    assert ok.tolist() == [s[1] for s in single]


def test_greedy_generation_matches_generate(tiny):
    import torch

    from posbias_nb.measure.scoring import generate_greedy

    prompt = list(range(10, 40))
    with torch.no_grad():
        out = tiny.generate(torch.tensor([prompt]), max_new_tokens=6, do_sample=False,
                            pad_token_id=0)
    assert generate_greedy(tiny, prompt, 6) == out[0, len(prompt):].tolist()
    first = out[0, len(prompt)].item()
    assert generate_greedy(tiny, prompt, 6, eos=first) == [first]
    assert len(generate_greedy(tiny, prompt, 6, stop=lambda ids: len(ids) == 2)) == 2


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
    assert score(study.load("gpt2-tiny", "random", 0)[0], rec["prompt_ids"],
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
            "profile_len": np.full(6, 5)}  # regions(5).middle: positions 1..3
    pm = R.prior_matrices(link)
    np.testing.assert_allclose(pm["gold"][0], [.25, .15, .3])
    np.testing.assert_allclose(pm["positional"][0], [.2, .05, .1])  # mean of non-gold rows / 2
    np.testing.assert_allclose(R.edge_ratios(link), np.tile([[4.0, 8.0]], (6, 1)))
    M = R.as_matrix([0, 0, 1, 1], [0, 1, 0, 1], [1, 2, 3, 4])
    assert M.tolist() == [[1, 2], [3, 4]]


def test_paired_contrast_and_outcome_matrices():
    M = np.array([[0.0, 1.0], [1.0, 3.0], [2.0, 2.0]])
    est, lo, hi = R.paired_contrast(M, 1, 0)
    assert est == pytest.approx(1.0) and lo < est < hi  # t interval: 3 examples, wide
    res = {"examples": [{"example": 0, "gold_index": 0, "logprob": -1.0, "correct": True},
                        {"example": 0, "gold_index": 1, "logprob": -2.0, "correct": False}]}
    out = R.outcome_matrices(res)
    assert out["accuracy"].tolist() == [[1.0, 0.0]] and out["logprob"].tolist() == [[-1.0, -2.0]]


# --------------------------------------------------------------------------------------------
# Pre-declared contrasts, Holm, fixed effects (each check fed a counterexample)


def test_region_differences_use_the_declared_middle_not_the_worst():
    M = np.array([[5.0, 0.0, 2.0, 2.0, 2.0, -9.0, 5.0]])  # worst slot 5 is outside the middle
    d = R.region_differences(M)
    assert d["first"][0] == pytest.approx(3.0) and d["last"][0] == pytest.approx(3.0)
    with pytest.raises(ValueError):
        R.region_differences(np.zeros((3, 2)))


def test_contrast_family_holds_for_a_u_and_not_for_a_flat_truth():
    rng = np.random.default_rng(0)
    E = 30
    u = rng.normal(0, 1, (E, 7)) + np.array([2, 0, 0, 0, 0, 0, 2.0])
    fam = R.contrast_family({k: v for k, v in R.region_differences(u).items()})
    assert {v["verdict"] for v in fam.values()} == {"holds"}
    for v in fam.values():
        assert v["p_holm"] < 0.05 and v["adjusted"][1] <= v["interval"][1]  # Holm level
    # counterexample: a flat truth.  Picking the worst middle slot from the data (the old rule)
    # declares an arm often; the pre-declared middle with Holm rarely does.
    false_old = false_new = 0
    for s in range(200):
        X = np.random.default_rng(s).normal(0, 1, (E, 7))
        fam = R.contrast_family(R.region_differences(X), seed=s)
        false_new += any(v["verdict"] == "holds" for v in fam.values())
        worst = 1 + int(np.argmin(X[:, 1:-1].mean(0)))
        false_old += max(R.paired_contrast(X, 0, worst)[1], R.paired_contrast(X, 6, worst)[1]) > 0
    assert false_new <= 0.06 * 200 < false_old
    # primacy only: the last arm must not hold
    p = rng.normal(0, 1, (E, 7)) + np.array([2, 0, 0, 0, 0, 0, 0.0])
    fam = R.contrast_family(R.region_differences(p))
    assert fam["first"]["verdict"] == "holds" and fam["last"]["verdict"] != "holds"


def test_holm_levels_step_down():
    d = {"a": np.full(30, 1.0) + np.linspace(-0.1, 0.1, 30),
         "b": np.linspace(-1, 1.2, 30), "c": np.linspace(-1, 1.1, 30)}
    fam = R.contrast_family(d)
    assert fam["a"]["level"] == pytest.approx(1 - 0.05 / 3)
    assert fam["b"]["level"] == fam["c"]["level"] == pytest.approx(1 - 0.05 / 2)
    assert fam["a"]["verdict"] == "holds" and fam["b"]["verdict"] == "inconclusive"


def test_within_removes_example_effects():
    rng = np.random.default_rng(1)
    E, P = 30, 7
    hard = rng.normal(0, 3, (E, 1))  # example difficulty drives both prior and outcome
    x = hard + rng.normal(0, 1, (E, P))
    y = hard + rng.normal(0, 1, (E, P))
    # counterexample: the old "within positions" (position means only) sees a link ...
    old = metrics.spearman(x - x.mean(0), y - y.mean(0))
    assert old > 0.5
    # ... that example fixed effects remove
    s = R.link_stats(x, y, "within")
    assert s["low"] < 0 < s["high"]
    z = hard + x - hard + 0.3 * rng.normal(0, 1, (E, P))  # a real within-example link
    assert R.link_stats(x, z, "within")["low"] > 0


def test_ratio_interval():
    est, lo, hi = R.ratio_interval(np.full((5, 2), 3.0))
    assert est == pytest.approx(3.0) and lo == pytest.approx(3.0)
    est, lo, hi = R.ratio_interval([0.5, 2.0, 1.0, 1.0])  # no U: interval covers 1
    assert lo < 1 < hi
    with pytest.raises(ValueError):
        R.ratio_interval([1.0, 0.0])


# --------------------------------------------------------------------------------------------
# The Liu-faithful variant


def test_liu_prompts_have_uuids_and_no_lead():
    import uuid

    P = T.build_prompts(None, "kv", positions=3, examples=2, length=600, seed=2,
                        vocab_size=VOCAB, variant="liu")
    assert P["variant"] == "liu"
    for r in P["records"]:
        pairs = re.findall(r'"([0-9a-f-]{36})": "([0-9a-f-]{36})"', r["content"])
        assert len(pairs) == P["n_items"] >= 3
        for k, v in pairs:
            assert uuid.UUID(k).version == 4 and uuid.UUID(v).version == 4
            assert uuid.UUID(v).variant == uuid.RFC_4122
        assert r["text"].endswith("Corresponding value:")  # no forced quote
        a, b = r["span"]
        assert _bytes(r["prompt_ids"][a:b]) == r["value"] and len(r["value"]) == 36
    again = T.build_prompts(None, "kv", 3, 2, 600, seed=2, vocab_size=VOCAB, variant="liu")
    assert [r["text"] for r in again["records"]] == [r["text"] for r in P["records"]]
    with pytest.raises(ValueError, match="variant"):
        T.build_prompts(None, "needle", 3, 1, 600, vocab_size=VOCAB, variant="liu")
    with pytest.raises(ValueError, match="variant"):
        T.build_prompts(None, "kv", 3, 1, 600, vocab_size=VOCAB, variant="uuid")


@pytest.fixture(scope="module")
def long_tiny(tmp_path_factory):
    """A 2-layer GPT-2 reading bytes with a 1024-token context (UUID prompts need > 256 bytes),
    as a local model directory."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    m = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=1024, n_embd=32, n_layer=2,
                                   n_head=2))
    path = tmp_path_factory.mktemp("longtiny") / "gpt2-long-tiny"
    m.save_pretrained(path)
    return str(path)


def test_liu_run_on_a_tiny_model(monkeypatch, long_tiny, tmp_path):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path))
    kw = dict(task="kv", positions=3, examples=2, length=400, seed=0, weights="pretrained",
              variant="liu")
    out = R.retrieval_run(long_tiny, **kw)
    again = R.retrieval_run(long_tiny, **kw)  # read back from the cache (no pickled objects)
    assert json.dumps(again.to_json()) == json.dumps(out.to_json())
    assert out["meta"]["variant"] == "liu" and len(out["examples"]) == 6
    assert list(out.table()) == list(R.LIU_COLUMNS) and "logprob" not in out
    for rec in out["examples"]:
        assert isinstance(rec["output"], str) and rec["correct"] is False  # random weights
    assert all(lo < hi for lo, hi in zip(out["accuracy_low"], out["accuracy_high"]))


def test_liu_substring_match_counts_a_correct_generation(monkeypatch, long_tiny):
    """A model that copies the value is scored correct: force it by patching the generator."""
    from posbias_nb.experiments.prompt import retrieval as mod

    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")

    def echo_one(prompt_ids):
        text = bytes(i for i in prompt_ids if i < 256).decode()
        key = re.search(r'Key: "([0-9a-f-]{36})"', text).group(1)
        val = re.search(f'"{key}": "([0-9a-f-]{{36}})"', text).group(1)
        return list(f' "{val.upper()}"'.encode())  # case-insensitive match

    def echo(model, prompts, n, stops=None, eos=None, batch=8):
        return [echo_one(p) for p in prompts]

    monkeypatch.setattr(mod.measurements, "generate_greedy_batch", echo)
    out = R.retrieval_run(long_tiny, task="kv", positions=3, examples=2, length=400,
                          seed=0, weights="pretrained", variant="liu")
    assert all(r["correct"] for r in out["examples"]) and out["accuracy"] == [1.0] * 3


def test_contrast_family_refuses_a_zero_width_interval():
    fam = R.contrast_family({"first": np.zeros(6), "last": np.ones(6)})
    assert fam["first"]["verdict"] == fam["last"]["verdict"] == "not testable"


def test_study_one_pass_equals_run_and_link(monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")
    kw = dict(task="kv", positions=3, examples=2, length=220, seed=0, weights="random")
    run, link = R.retrieval_study("gpt2-tiny", **kw)
    ref_run = R.retrieval_run("gpt2-tiny", **kw)
    ref_link = R.retrieval_link("gpt2-tiny", prior="rollout", **kw)
    np.testing.assert_allclose([r["logprob"] for r in run["examples"]],
                               [r["logprob"] for r in ref_run["examples"]], atol=1e-5, rtol=0)
    assert [r["correct"] for r in run["examples"]] == [r["correct"] for r in ref_run["examples"]]
    for k in ("slot_share", "share", "profile_flat"):
        np.testing.assert_allclose(link[k], ref_link[k], atol=1e-8, rtol=1e-6)
    assert list(run.table()) == list(R.CSV_COLUMNS)


def test_region_accuracy_pools_the_middle_and_refuses_non_binary():
    import numpy as np

    from posbias_nb.experiments.prompt.retrieval import region_accuracy

    M = np.array([[1, 0, 0, 0, 0, 0, 1], [1, 1, 1, 1, 0, 0, 1]])  # middle: slots 2..4
    est, lo, hi = region_accuracy(M)
    assert est == 2 / 6 and 0 < lo < est < hi < 1
    assert region_accuracy(M, "first")[0] == 1.0
    with pytest.raises(ValueError):
        region_accuracy(np.array([[0.5, 1.0]]))


def test_region_pairs_and_the_paired_proportion_contrast():
    M = np.array([[1, 0, 1], [1, 1, 0], [0, 0, 0]])
    p = R.region_pairs(M)
    assert p["first"][0].tolist() == [1, 1, 0] and p["first"][1].tolist() == [0, 1, 0]
    assert p["last"][0].tolist() == [1, 0, 0] and p["last"][1].tolist() == [0, 1, 0]
    with pytest.raises(ValueError, match="3 slots, not one"):
        R.region_pairs(np.zeros((4, 5)))
    with pytest.raises(ValueError, match="0/1 outcomes, got 0.5"):
        R.region_pairs(np.full((4, 3), 0.5))
    # Liu et al.'s case: every example ties (all correct everywhere).  The t interval of the
    # 0/1 differences is [0, 0] (zero width, "not testable"); the paired proportion interval is
    # wide and the verdict inconclusive, never "holds" on four examples
    ones = np.ones((4, 3))
    assert R.contrast_family(R.region_differences(ones))["first"]["verdict"] == "not testable"
    fam = R.contrast_family(R.region_pairs(ones))
    for v in fam.values():
        est, lo, hi = v["interval"]
        assert est == 0 and lo < -0.4 and hi > 0.4 and v["verdict"] == "inconclusive"
        assert v["adjusted"][1] <= lo and v["adjusted"][2] >= hi  # Holm level is wider
    # a clear primacy arm on 30 examples holds, its recency arm fails to
    E = 30
    P = np.zeros((E, 3))
    P[:, 0] = 1
    P[:3, 1] = 1
    fam = R.contrast_family(R.region_pairs(P))
    assert fam["first"]["verdict"] == "holds" and fam["last"]["verdict"] != "holds"
    assert fam["first"]["interval"] == stats.paired_proportion_interval(P[:, 0], P[:, 1])
    with pytest.raises(ValueError, match="only 0 and 1"):
        R.contrast_family({"x": (np.array([1, 2.0]), np.array([0, 1.0]))})


# --------------------------------------------------------------------------------------------
# Hsieh et al.'s dummy documents, and Liu et al.'s generations classified

def test_dummy_prompts_replace_one_pair_in_place():
    P = T.build_prompts(None, "kv", positions=3, examples=1, length=300, vocab_size=VOCAB)
    rec = P["records"][1]
    dk, dv = T.DUMMY_PAIR
    out = T.dummy_prompts(P, rec)
    assert len(out) == len(rec["pairs"]) == len(rec["pair_spans"])
    for (k, v), d in zip(rec["pairs"], out):
        text = _bytes(d["prompt_ids"])
        assert text == rec["text"].replace(f'"{k}": "{v}"', f'"{dk}": "{dv}"')
        a, b = d["span"]
        assert _bytes(d["prompt_ids"][a:b]) == f'"{dk}": "{dv}"'
    with pytest.raises(ValueError, match="occurs"):
        T.dummy_prompts(P, rec, dummy=rec["pairs"][0])
    needle = T.build_prompts(None, "needle", positions=3, examples=1, length=300,
                             vocab_size=VOCAB)
    with pytest.raises(ValueError, match="kv record"):
        T.dummy_prompts(needle, needle["records"][0])


def test_liu_outcomes():
    v = "0b9d5e0f-1c2d-4e3f-8a9b-0c1d2e3f4a5b"
    w = "11111111-2222-4333-8444-555555555555"
    assert R.liu_outcome(f"The value is {v.upper()}.", v) == "correct"
    assert R.liu_outcome(f' "{w}"', v, others=[w]) == "another pair's value"
    assert R.liu_outcome(f' "{w}"', v, others=[]) == "a UUID not in the prompt"
    assert R.liu_outcome(' "0b9d5e0f-1c2d-4e', v) == "cut short (a prefix of the value)"
    # a truncated *wrong* UUID is a retrieval error, not a format failure (issue 34)
    assert R.liu_outcome(' "0b9d5e0f-9999', v) == "a wrong UUID, cut short"
    assert R.liu_outcome(' "77aa0c1e', v) == "a wrong UUID, cut short"
    assert "a wrong UUID, cut short" in R.LIU_RETRIEVAL_ERRORS
    assert R.liu_outcome(' "0b9d5', v) == "cut short (a prefix of the value)"
    assert R.liu_outcome(' "abc', v) == "no UUID"  # too short to be a UUID's start
    assert R.liu_outcome(" I do not know", v) == "no UUID"
    assert R.liu_outcome(' "77aa0c1e-5b" and more text', v) == "no UUID"  # not at the end
    assert set(R.LIU_OUTCOMES) == {"correct", "another pair's value", "a UUID not in the prompt",
                                   "cut short (a prefix of the value)",
                                   "a wrong UUID, cut short", "no UUID"}


@pytest.mark.parametrize("name", ["gpt2-tiny", "gemma3-tiny", "smollm2-tiny"])
def test_batched_greedy_decoding_equals_one_by_one(name):
    """Left padding with a mask and explicit positions: every prompt decodes as it does alone
    (prompts longer than Gemma-3-tiny's sliding window included)."""
    from posbias_nb import models
    from posbias_nb.measure.scoring import generate_greedy, generate_greedy_batch

    m, _, _ = models.load(name, weights="random", seed=0)
    V = m.get_input_embeddings().num_embeddings
    g = np.random.default_rng(0)
    P = [g.integers(0, V, n).tolist() for n in (5, 9, 12, 7, 30)]
    budgets = [6, 3, 6, 5, 6]
    one = [generate_greedy(m, p, b) for p, b in zip(P, budgets)]
    assert generate_greedy_batch(m, P, budgets, batch=3) == one
    stop = [lambda ids: len(ids) >= 2] * len(P)  # a stop rule ends a row early
    assert generate_greedy_batch(m, P, 6, stops=stop, batch=2) == [o[:2] for o in one]
