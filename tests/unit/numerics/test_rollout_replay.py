"""rollout.replay: the structural theory's published rollout configurations, replayed.

The reference below transcribes the authors' code (ml-uhh/position-bias, src/rollout/:
content_prior.make_content_prior, positional_encoding.compute_alibi_scores,
attention.compute_row_softmax / make_multihead_attention, main.add_residual / rollout,
util.plot_last_row_distribution) loop for loop, so faithful=True is checked against it bit for bit.

The packaged data is pinned to its source by digests recorded in tests/data (see the README
there): no test reads a file outside the repository.  The cached replay of the chapter,
posbias_nb.experiments.born.replay, is tested at the end.
"""
import copy
import hashlib
import json
import math
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from posbias_nb import cache, rollout
from posbias_nb.experiments.born import replay as exp_replay

DIGESTS = json.loads((Path(__file__).resolve().parents[2] / "data" / "ml-uhh-rollout-configs.sha256.json")
                     .read_text())
MODELS = ["bloom", "bloom-7b1", "falcon-rw-7b", "mpt-7b", "mpt-30b"]


def canonical_digest(entry):
    """The digest recorded in tests/data: SHA-256 of the entry's canonical JSON."""
    return hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()


def authors_reference(e):
    n, T, nh = e["sequence_length"], e["num_layers"], e["num_heads"]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    mask = j <= i
    lam = np.clip(np.array(e["lambdas"]) if e["lambda_schedule"] == "custom"
                  else np.full(T, e["lambda_const"]), 0.0, 1.0)
    P = np.eye(n, dtype=float)
    for t in range(T):
        # content_prior.make_content_prior
        pl, ph = len(e["diagonal_scores"]), len(e["diagonal_scores"][0])
        li = min(t, pl - 1)
        C = np.zeros((nh, n, n), dtype=float)
        for h in range(nh):
            hi = min(h, ph - 1)
            C[hi] = np.full((n, n), e["base_scores"][li][hi], dtype=float) + \
                e["diagonal_scores"][li][hi] * np.eye(n, dtype=float)
        # attention.make_multihead_attention
        lj = min(t, len(e["alibi_slopes"]) - 1)
        w = np.ones(nh, dtype=float) / nh
        A = np.zeros_like(mask, dtype=float)
        for h in range(nh):
            slope = e["alibi_slopes"][lj][min(h, len(e["alibi_slopes"][lj]) - 1)]
            al = -slope * (i - j).astype(float)
            np.fill_diagonal(al, 0.0)
            al = np.where(mask, al, -1e30)
            scores = (C[h] + al) / e.get("softmax_temperature", 1.0)
            ms = np.where(mask, scores, -np.inf)
            sh = ms - np.max(ms, axis=1, keepdims=True)
            ex = np.zeros_like(sh, dtype=float)
            fin = np.isfinite(sh)
            ex[fin] = np.exp(sh[fin])
            den = np.sum(ex, axis=1, keepdims=True)
            K = np.zeros_like(ex, dtype=float)
            good = den[:, 0] > 0
            K[good] = ex[good] / den[good]
            A += w[h] * K
        R = (1.0 - lam[t]) * np.eye(n) + lam[t] * A
        P = R @ P
    row = P[-1].copy()
    return row / row.sum()


def entry(**kw):
    e = dict(sequence_length=5, num_layers=3, num_heads=4,
             alibi_slopes=[[0.5, 0.25, 0.125, 0.0625]], softmax_temperature=1.0,
             diagonal_scores=[[1.5]], base_scores=[[7.0]], lambda_schedule="custom",
             lambdas=[0.3, 0.6, 0.2], mask="causal")
    e.update(kw)
    return e


def test_hand_computation_one_layer_two_heads():
    s1, s2, d, lam = 0.7, 0.2, 2.0, 0.4
    e = dict(sequence_length=3, num_layers=1, num_heads=2, alibi_slopes=[[s1, s2]],
             diagonal_scores=[[d]], base_scores=[[0.0]], lambda_schedule="constant",
             lambda_const=lam, mask="causal")

    def head(s, dd):  # last row of one head: logits -2s, -s, dd
        w = np.array([math.exp(-2 * s), math.exp(-s), math.exp(dd)])
        return w / w.sum()

    # the authors' code: only head 1 gets the content score
    a = 0.5 * (head(s1, d) + head(s2, 0.0))
    want = lam * a + (1 - lam) * np.array([0, 0, 1.0])
    np.testing.assert_allclose(rollout.replay(e), want, rtol=1e-13)
    # corrected: both heads, on the logit scale d / sqrt(d_h)
    a = 0.5 * (head(s1, d / 2) + head(s2, d / 2))
    want = lam * a + (1 - lam) * np.array([0, 0, 1.0])
    np.testing.assert_allclose(rollout.replay(e, faithful=False, head_dim=4), want, rtol=1e-13)


def test_no_content_uniform_heads_give_theory_row():
    from posbias_nb import theory
    e = entry(alibi_slopes=[[0.0]], diagonal_scores=[[0.0]], base_scores=[[0.0]],
              lambda_schedule="constant", lambda_const=0.5, num_layers=4, sequence_length=9)
    np.testing.assert_allclose(rollout.replay(e), theory.influence(9, 4, 0.5), rtol=1e-12)


@pytest.mark.parametrize("kw", [
    {},
    dict(diagonal_scores=[[1.0, -2.0]], base_scores=[[0.0, 3.0]]),  # 2 of 4 heads given
    dict(diagonal_scores=[[1.0, -2.0, 0.5, 3.0]] * 3, base_scores=[[0.1, 0.2, 0.3, 0.4]] * 3),
    dict(alibi_slopes=[[0.5, 0.25, 0.125, 0.0625], [1.0, 0.5, 0.1, 0.0], [0.3] * 4],
         softmax_temperature=0.7),
])
def test_faithful_matches_the_authors_code_bit_for_bit(kw):
    e = entry(**kw)
    np.testing.assert_array_equal(rollout.replay(e), authors_reference(e))


def test_faithful_matches_the_authors_code_on_published_entries():
    C = rollout.published_configs()
    for key in ("mean_content/fineweb-edu/mpt-7b", "all_content/fineweb-edu/falcon-rw-7b",
                "no_content/bloom-7b1"):
        e = copy.deepcopy(C[key])
        e["sequence_length"] = 24  # the same layers, heads, scores and shares, shorter context
        np.testing.assert_array_equal(rollout.replay(e), authors_reference(e))


def test_faithful_and_corrected_differ_where_expected():
    C, hd = rollout.published_configs(), rollout.published_head_dims()
    short = lambda k: dict(C[k], sequence_length=32)
    # no content: nothing to correct
    e = short("no_content/mpt-7b")
    np.testing.assert_array_equal(rollout.replay(e), rollout.replay(e, faithful=False))
    # one score per layer: head broadcast and scale both matter
    e = short("mean_content/fineweb-edu/mpt-7b")
    p, q = rollout.replay(e), rollout.replay(e, faithful=False, head_dim=hd["mpt-7b"])
    assert np.max(np.abs(p - q)) > 1e-3
    # broadcast alone (head_dim = 1: no rescaling) already changes a single-score entry ...
    assert np.max(np.abs(p - rollout.replay(e, faithful=False, head_dim=1))) > 1e-3
    # ... but not an all-heads entry, where only the scale can matter
    e = short("all_content/fineweb-edu/mpt-7b")
    np.testing.assert_array_equal(rollout.replay(e), rollout.replay(e, faithful=False, head_dim=1))
    assert np.max(np.abs(rollout.replay(e) - rollout.replay(e, faithful=False, head_dim=128))) > 1e-3


def test_replay_is_a_probability_vector_and_deterministic():
    e = entry()
    p = rollout.replay(e)
    assert p.shape == (5,) and abs(p.sum() - 1) < 1e-12 and np.all(p >= 0)
    np.testing.assert_array_equal(p, rollout.replay(copy.deepcopy(e)))


@pytest.mark.parametrize("bad,match", [
    (dict(sequence_length=0), "sequence_length"),
    (dict(num_layers=None), "num_layers"),
    (dict(mask="full"), "mask"),
    (dict(lambdas=[0.1, 0.2]), "lambdas"),
    (dict(lambda_schedule="cosine"), "lambda_schedule"),
    (dict(alibi_slopes=[[0.5]] * 2), "alibi_slopes"),
    (dict(alibi_slopes=[[0.5, 0.25]]), "alibi_slopes"),
    (dict(diagonal_scores=[[1.0, 2.0]]), "same shape"),
    (dict(diagonal_scores=[[1.0, 2.0, 3.0, 4.0, 5.0]], base_scores=[[0.0] * 5]), "diagonal_scores"),
    (dict(base_scores="x"), "base_scores"),
    (dict(diagonal_scores=[[float("nan")]]), "diagonal_scores"),
    (dict(softmax_temperature=0.0), "softmax_temperature"),
])
def test_replay_rejects_malformed_entries(bad, match):
    with pytest.raises(ValueError, match=match):
        rollout.replay(entry(**bad))


def test_replay_rejects_missing_fields_and_non_dicts():
    e = entry()
    del e["alibi_slopes"]
    with pytest.raises(ValueError, match="alibi_slopes"):
        rollout.replay(e)
    with pytest.raises(ValueError, match="dict"):
        rollout.replay([1, 2, 3])
    with pytest.raises(ValueError, match="head_dim"):
        rollout.replay(entry(), faithful=False)


def test_published_configs_cover_five_models_and_three_variants():
    C = rollout.published_configs()
    for m in MODELS:
        for k in (f"no_content/{m}", f"mean_content/fineweb-edu/{m}", f"all_content/fineweb-edu/{m}"):
            assert k in C, k
            assert len(C[k]["lambdas"]) == C[k]["num_layers"]
    assert set(MODELS) <= set(rollout.published_head_dims())
    assert list(rollout.PUBLISHED_MODELS) == MODELS


def test_published_schedules_are_the_packaged_lambdas_exactly():
    # one copy of the data: the schedules are read from the JSON, to the last digit
    C, pub = rollout.published_configs(), rollout.published_schedules()
    assert list(pub) == MODELS
    for m in MODELS:
        heads, lam = pub[m]
        e = C[f"no_content/{m}"]
        assert heads == e["num_heads"]
        assert lam.dtype == np.float64
        np.testing.assert_array_equal(lam, np.array(e["lambdas"]))
    # a fresh array on every call: a caller's edit does not leak into the next call
    pub["mpt-7b"][1][0] = -1.0
    assert rollout.published_schedules()["mpt-7b"][1][0] > 0


def test_packaged_file_is_the_recorded_one():
    raw = (resources.files("posbias_nb") / "data" / "ml-uhh-rollout-configs.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == DIGESTS["packaged"]["sha256"]


def test_packaged_entries_equal_the_anchor_exactly():
    C = rollout.published_configs()
    assert sorted(C) == sorted(DIGESTS["entries"])
    for k, e in C.items():
        assert canonical_digest(e) == DIGESTS["entries"][k], k
    # the check can fail: one float32 ulp in one content score changes the digest
    e = copy.deepcopy(C["all_content/fineweb-edu/mpt-7b"])
    d = np.float32(e["diagonal_scores"][0][0])
    e["diagonal_scores"][0][0] = float(np.nextafter(d, np.float32(np.inf)))
    assert canonical_digest(e) != DIGESTS["entries"]["all_content/fineweb-edu/mpt-7b"]


# ------------------------------------------------------------ the chapter's cached replay
@pytest.fixture
def short_configs(monkeypatch):
    """The published entries at L = 32 (cheap replays), and a counter of rollout.replay calls."""
    real_configs, real_replay = rollout.published_configs, rollout.replay
    calls = []

    def configs():
        return {k: dict(e, sequence_length=32) for k, e in real_configs().items()}

    def counting(*args, **kw):
        calls.append(args)
        return real_replay(*args, **kw)

    monkeypatch.setattr(rollout, "published_configs", configs)
    monkeypatch.setattr(rollout, "replay", counting)
    return calls


def test_replayed_second_call_is_a_cache_hit_equal_to_the_first(short_configs):
    key = "mean_content/fineweb-edu/mpt-7b"
    a = exp_replay.replayed(key, False, 128)
    assert len(short_configs) == 1
    b = exp_replay.replayed(key, False, 128)
    assert len(short_configs) == 1  # served from the cache, not recomputed
    np.testing.assert_array_equal(a["influence"], b["influence"])
    assert a.meta == b.meta
    # the stored file is where the cache says, under the parameters the chapter used
    params = dict(key=key, entry=canonical_digest(rollout.published_configs()[key]),
                  faithful=False, head_dim=128)
    assert cache.load("replay", params) is not None
    # a different reading is a different entry: computed, not served the first one
    c = exp_replay.replayed(key, True)
    assert len(short_configs) == 2
    assert np.max(np.abs(c["influence"] - a["influence"])) > 1e-3


def test_replayed_is_keyed_by_the_entry_content(short_configs, monkeypatch):
    key = "no_content/mpt-7b"
    a = exp_replay.replayed(key)
    edited = rollout.published_configs

    def longer():
        return {k: dict(e, sequence_length=33) for k, e in edited().items()}

    monkeypatch.setattr(rollout, "published_configs", longer)
    b = exp_replay.replayed(key)  # same key, other content: recomputed
    assert len(short_configs) == 2 and a["influence"].size == 32 and b["influence"].size == 33


def test_replayed_equals_rollout_replay_and_is_a_result():
    key = "no_content/bloom-7b1"  # the full L = 256 entry (one shared kernel: about a second)
    r = exp_replay.replayed(key)
    want = rollout.replay(rollout.published_configs()[key])
    np.testing.assert_array_equal(r["influence"], want)
    t = r.table()
    assert list(t) == ["position", "influence"] and t["position"] == list(range(1, 257))
    assert r.meta["key"] == key and r.meta["faithful"] is True and r.meta["sequence_length"] == 256
    assert r.meta["entry_sha256"] == DIGESTS["entries"][key]
    assert json.loads(json.dumps(r.to_json()))["meta"]["head_dim"] is None


def test_replayed_rejects_unknown_keys():
    with pytest.raises(ValueError, match="unknown published configuration"):
        exp_replay.replayed("no_content/gpt-5")


def test_sum_lambda_is_a_t_interval_over_windows():
    from posbias_nb import metrics, stats
    from posbias_nb.experiments.born.replay import sum_lambda

    rng = np.random.default_rng(0)
    lam_win = rng.uniform(0.05, 0.3, size=(6, 8))
    est, lo, hi = sum_lambda({"lam_win": lam_win, "lam": lam_win.mean(axis=1)})
    assert est == pytest.approx(lam_win.mean(axis=1).sum(), rel=1e-12)
    assert (est, lo, hi) == stats.mean_interval(lam_win.sum(axis=0))
    for bad in ({"lam": np.ones(3)}, {"lam_win": np.ones((3, 1))}, {"lam_win": np.ones(3)}):
        with pytest.raises(ValueError, match="lam_win"):
            sum_lambda(bad)
    # counterexample: each window shifts every position's share (text varies by window), so
    # positions within a window are not independent.  Resampling positions (the old interval)
    # misses the true sum far more often than the t interval over windows.
    T, B, L, truth = 4, 8, 32, 4 * 0.2
    hit_win = hit_pos = 0
    reps = 200
    for r in range(reps):
        g = np.random.default_rng([1, r])
        per = 0.2 + g.normal(0, 0.05, (T, B, 1)) + g.normal(0, 0.01, (T, B, L))  # (T, B, L)
        _, lo, hi = sum_lambda({"lam_win": per.mean(axis=2)})
        hit_win += lo <= truth <= hi
        _, lo, hi = metrics.bootstrap(lambda lp: float(lp.mean(axis=0).sum()),
                                      per.mean(axis=1).T, n_boot=200, seed=r)
        hit_pos += lo <= truth <= hi
    assert hit_win / reps >= 0.9 and hit_pos / reps < 0.5, (hit_win, hit_pos)
