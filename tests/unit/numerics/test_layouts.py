"""Layouts (chapter ch-layouts): each layer kind's operator, the O(L) row against dense
products in exact arithmetic, and each closed form against the exact product."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from posbias_nb import theory as T


def dense_row(layout, L, alpha):
    """The last row of N_H ... N_1 by dense exact matrix products (the oracle)."""
    a = Fraction(alpha)
    P = [[Fraction(int(i == j)) for j in range(L)] for i in range(L)]  # running product
    for layer in layout.layers:  # P <- N_t P, input layer first
        K = T.layer_matrix(layer, L, exact=True)
        N = [[(1 - a) * (i == j) + a * K[i][j] for j in range(L)] for i in range(L)]
        P = [[sum(N[i][k] * P[k][j] for k in range(L)) for j in range(L)] for i in range(L)]
    return P[-1]


KINDS = ["full", "sliding:3", "sliding:1", "chunked:4", "chunked:1", "full@0.7",
         "sliding:2@-1", "chunked:3@2"]


@pytest.mark.parametrize("spec", ["3*full", "sliding:3,full,sliding:2", "chunked:4,sliding:5,full@1.5",
                                  "2*sliding:4@0.3,chunked:3", "full,chunked:2,full"])
def test_the_row_equals_dense_exact_products(spec):
    lay = T.parse_layout(spec)
    L = 11
    assert T.layout_influence(lay, L, Fraction(2, 7), exact=True) == dense_row(lay, L, Fraction(2, 7))


@pytest.mark.parametrize("spec", ["2*full", "sliding:3,full,sliding:2", "chunked:4,full@1.5",
                                  "5*sliding:4,full"])
def test_dense_last_row_is_the_full_matrix_product(spec):
    """The chapter's oracle (theory.dense_last_row: a row vector through the layers, last layer
    first) against the full matrix product above (input layer first), exactly."""
    L, a = 9, Fraction(2, 7)
    assert T.dense_last_row(spec, L, a) == dense_row(T.parse_layout(spec), L, a)
    assert T.dense_last_row(T.parse_layout(spec), L, "2/7") == dense_row(T.parse_layout(spec), L, a)
    # two uniform causal layers without residual: the last row of the Cesaro matrix squared
    assert T.dense_last_row("2*full", 3, 1) == [Fraction(11, 18), Fraction(5, 18), Fraction(1, 9)]
    with pytest.raises(ValueError, match="alpha"):
        T.dense_last_row(spec, L, Fraction(3, 2))
    with pytest.raises(ValueError, match="L"):
        T.dense_last_row(spec, 0, a)


@settings(deadline=None)  # timing never fails an example, whatever the profile
@given(st.lists(st.sampled_from(KINDS), min_size=1, max_size=5), st.integers(1, 14),
       st.fractions(0, 1, max_denominator=9))
def test_float_rows_match_exact_rows(kinds, L, a):
    lay = T.parse_layout(",".join(kinds))
    ex = np.array([float(x) for x in T.layout_influence(lay, L, a, exact=True)])
    fl = T.layout_influence(lay, L, float(a))
    assert np.allclose(fl, ex, rtol=1e-12, atol=0)


def test_the_all_full_layout_is_the_cesaro_row():
    assert np.allclose(T.layout_influence(T.Layout.full(7), 300, 0.4), T.influence(300, 7, 0.4),
                       rtol=1e-12, atol=0)
    assert T.layout_influence("4*full", 9, "1/3", exact=True) == T.influence(9, 4, "1/3", exact=True)


def test_rows_without_sinks_sum_to_one_and_sinks_absorb():
    for spec in ["5*sliding:7,full", "chunked:16,3*sliding:8", "full,sliding:2"]:
        assert sum(T.layout_influence(spec, 60, "1/2", exact=True)) == 1
    assert float(np.sum(T.layout_influence("4*full@1", 60, 0.5))) < 0.999


def test_the_log_path_does_not_underflow_and_is_blockwise_free_of_cancellation():
    v = T.log_layout_influence(T.parse_layout("sliding:64,full", 400), 4096, 1.0)
    assert np.all(np.isfinite(v))  # the full layers reach every position
    assert v.min() < np.log(1e-300)  # far below the float64 range, still exact in logs
    # a deep sliding stack against exact arithmetic: a difference of prefix sums loses 2e-7
    # here (its small window sums are differences of two nearly equal totals); blocks do not
    ex = T.layout_influence("12*sliding:8", 200, "99/100", exact=True)
    fl = T.layout_influence("12*sliding:8", 200, 0.99)
    nz = [j for j in range(200) if ex[j] != 0]
    assert np.allclose(fl[nz], [float(ex[j]) for j in nz], rtol=1e-12, atol=0)


def _naive_sliding_row(H, w, L, a):
    """The counterexample: window sums as differences of suffix sums (cancellation)."""
    v = np.zeros(L)
    v[-1] = 1.0
    n = np.minimum(np.arange(1, L + 1), w)
    for _ in range(H):
        suf = np.concatenate([np.cumsum((v / n)[::-1])[::-1], [0.0]])
        Kv = suf[:L] - suf[np.minimum(np.arange(L) + w, L)]
        v = (1 - a) * v + a * Kv
    return v


def test_the_cancellation_check_rejects_prefix_differences():
    ex = T.layout_influence("12*sliding:8", 200, "99/100", exact=True)
    nz = [j for j in range(200) if ex[j] != 0]
    naive = _naive_sliding_row(12, 8, 200, 0.99)
    assert not np.allclose(naive[nz], [float(ex[j]) for j in nz], rtol=1e-12, atol=0)


def test_a_sliding_stack_is_exactly_zero_beyond_its_reach():
    H, w, L = 4, 6, 40
    lay = T.parse_layout(f"{H}*sliding:{w}")
    assert lay.reach() == H * (w - 1)
    v = T.layout_influence(lay, L, "1/2", exact=True)
    assert all(x == 0 for x in v[:L - 1 - H * (w - 1)])
    assert all(x > 0 for x in v[L - 1 - H * (w - 1):])
    assert T.parse_layout("sliding:4,full").reach() is None


def test_the_sliding_closed_form_is_exact_away_from_the_start():
    for H, w, L, a in [(3, 5, 40, Fraction(1, 3)), (4, 7, 30, Fraction(1)), (2, 3, 12, Fraction(3, 4))]:
        ex = T.layout_influence(f"{H}*sliding:{w}", L, a, exact=True)
        fo = T.sliding_row(L, H, w, a, exact=True)
        assert ex[w - 1:] == fo[w - 1:]
        assert np.allclose(T.sliding_row(L, H, w, float(a)), [float(x) for x in fo], atol=1e-15)


@pytest.mark.parametrize("alpha", [0.5, 1.0])
def test_the_irwin_hall_limit_error_falls_with_the_window(alpha):
    errs = []
    for w in (8, 32, 128):
        L, H = 20 * w, 6
        ex = T.layout_influence(f"{H}*sliding:{w}", L, alpha)
        ih = T.irwin_hall_row(L, H, w, alpha)
        m = ex > 1e-3 * ex[:-1].max()
        m[-1] = False
        errs.append(np.max(np.abs(ih[m] / ex[m] - 1)))
    assert errs[0] > 8 * errs[1] > 64 * errs[2]  # O(1/w^2)


def test_the_hybrid_bulk_is_the_full_layers_alone_and_its_error_falls_with_L():
    lay = T.parse_layout("5*sliding:16,full", 12)
    errs = []
    for L in (256, 1024, 4096):
        ex = T.layout_influence(lay, L, 0.5)
        bulk = T.hybrid_bulk_row(lay, L, 0.5)
        m = slice(L // 4, 3 * L // 4)
        errs.append(np.max(np.abs(bulk[m] / ex[m] - 1)))
    assert errs[0] > 3 * errs[1] > 9 * errs[2]
    with pytest.raises(ValueError, match="no full layer"):
        T.hybrid_bulk_row("3*sliding:4", 100, 0.5)


def test_the_sink_law_error_falls_with_L_and_the_kept_mass_matches():
    errs, gaps = [], []
    for L in (512, 2048, 8192):
        ex = T.layout_influence("6*full@2", L, 0.5)
        sr = T.sink_row(L, 6, 2.0, 0.5)
        sl = slice(L // 100, L - 1)
        errs.append(np.max(np.abs(sr[sl] / ex[sl] - 1)))
        gaps.append(abs(T.sink_kept_mass(L, 6, 2.0, 0.5) - ex.sum()))
    assert errs[0] > errs[1] > errs[2] and errs[2] < 0.02
    assert gaps[0] > gaps[1] > gaps[2]
    # s -> -inf is no sink at all
    assert np.allclose(T.sink_row(4096, 3, -50.0, 0.5)[10:-1],
                       T.density(np.arange(1, 4097)[10:-1] / 4096, 3, 0.5) / 4096, rtol=1e-9)


@pytest.mark.parametrize("bad,match", [("windowed:4", "unknown layer kind 'windowed'"),
                                       ("sliding", "needs its size"), ("full:3", "takes no size"),
                                       ("sliding:0", "sliding size"), ("x*full", "bad layer count"),
                                       ("full@inf", "finite"), ("", "empty layout"),
                                       ("sliding:4.5", "bad size"), ("full@x", "bad sink"),
                                       ("full@800", "at most 700"),
                                       ("full,,full", "empty item")])
def test_bad_layouts_are_named(bad, match):
    with pytest.raises(ValueError, match=match):
        T.parse_layout(bad)


def test_the_compact_form_round_trips():
    lay = T.parse_layout("5*sliding:512,full", 18)
    assert lay.depth == 18 and lay.n_full == 3
    assert T.parse_layout(str(lay)) == lay
    assert str(T.parse_layout("2*full@0.5,chunked:8")) == "2*full@0.5,chunked:8"
    odd = T.Layout((T.Layer("full", None, 0.0123456789012345),))
    assert T.parse_layout(str(odd)) == odd  # sinks written to full precision
    with pytest.raises(ValueError, match="takes one layer"):
        T.layer_matrix("2*full", 4)
    with pytest.raises(ValueError, match="values for a layout of 2 layers"):
        T.layout_influence("2*full", 10, [0.5])


# --------------------------------------------------------------------------------------------
# models: a config's layout, checked by the model's behaviour

from tests import archs  # noqa: E402  (tests/ is on the path)

from posbias_nb import models  # noqa: E402

LAYOUT_ARCHS = {  # model_type: overrides that make the layout visible at 24 tokens
    "mistral": dict(sliding_window=8),
    "gemma2": dict(sliding_window=8, layer_types=["sliding_attention", "full_attention"]),
    "gemma3_text": dict(sliding_window=8, layer_types=["sliding_attention", "full_attention"]),
    "cohere2": dict(sliding_window=8, layer_types=["sliding_attention", "full_attention"]),
    "exaone4": dict(sliding_window=8, layer_types=["sliding_attention", "full_attention"]),
    "olmo3": dict(sliding_window=8, layer_types=["sliding_attention", "full_attention"]),
    "gpt_oss": dict(sliding_window=8, layer_types=["sliding_attention", "full_attention"]),
    "llama4_text": dict(attention_chunk_size=8, no_rope_layers=[1, 0]),
    "llama": {},
}


def _tiny(model_type, extra, seed=0):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    kw = dict(archs.OVERRIDES.get(model_type, archs.COMMON), **extra)
    torch.manual_seed(seed)
    m = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **kw)).eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m


@pytest.mark.parametrize("model_type", sorted(LAYOUT_ARCHS))
def test_the_layout_of_each_architecture_is_what_its_attention_does(model_type):
    m = _tiny(model_type, LAYOUT_ARCHS[model_type])
    declared = models.config_layout(m.config)
    lay = models.model_layout(m, length=24)
    assert [(x.kind, x.size) for x in lay.layers] == [(x.kind, x.size) for x in declared.layers]
    kinds = {x.kind for x in lay.layers}
    if model_type in ("mistral",):
        assert kinds == {"sliding"}
    elif model_type == "llama4_text":
        assert "chunked" in kinds
    elif model_type == "llama":
        assert kinds == {"full"}
    else:
        assert kinds == {"sliding", "full"}
    sinks = [x.sink for x in lay.layers]
    if model_type == "gpt_oss":  # a learned sink in every head, logit ~ N(0, 0.02) at init
        assert all(s is not None and abs(s) < 0.5 for s in sinks)
    else:
        assert all(s is None for s in sinks)


def test_a_layout_the_attention_contradicts_is_refused():
    m2 = _tiny("llama", {})
    m2.config.layer_types = ["sliding_attention"] * 2  # a config that lies about the layers
    m2.config.sliding_window = 4
    with pytest.raises(ValueError, match="attends outside the keys"):
        models.model_layout(m2, length=24)


def test_an_unknown_layer_kind_is_named():
    cfg = archs.config("llama")
    cfg.layer_types = ["full_attention", "linear_attention"]
    with pytest.raises(ValueError, match="layer 1 of llama is 'linear_attention'"):
        models.config_layout(cfg)
    assert str(models.config_layout(models.ZOO["gemma3-270m"].build_config())) == \
        "5*sliding:512,full,5*sliding:512,full,5*sliding:512,full"


def test_the_rollout_of_layout_kernels_is_the_layout_row():
    from posbias_nb import rollout

    L = 40
    for spec in ["3*sliding:5,full", "chunked:8,2*full,sliding:3", "4*full"]:
        K = rollout.layout_kernels(rollout.uniform_causal(L), spec)
        lay = T.parse_layout(spec)
        assert K.shape == (lay.depth, L, L)
        got = rollout.rollout(K, np.full(lay.depth, 0.4))
        assert np.allclose(got, T.layout_influence(lay, L, 0.4), rtol=1e-10, atol=1e-300)


def test_the_positional_prediction_uses_the_layout_masks():
    from posbias_nb import rollout
    from posbias_nb.measure.cached import predict

    L, H = 24, 2
    A = np.stack([rollout.uniform_causal(L)] * H)
    cap = dict(A=A, lam=np.full(H, 0.5), family="llama", n_heads=4, layout="2*sliding:4")
    assert np.allclose(predict(cap, "positional"), T.layout_influence("2*sliding:4", L, 0.5))
    cap.pop("layout")
    assert np.allclose(predict(cap, "positional"), T.influence(L, 2, 0.5))


@pytest.mark.parametrize("spec", ["4*full", "sliding:5,full,sliding:3", "chunked:4,full@1.0",
                                  "2*sliding:6@0.5,full"])
@pytest.mark.parametrize("slope", [0.0, 0.05, 0.7])
def test_the_layout_rollout_with_alibi_equals_the_dense_product(spec, slope):
    """The O(L) structural row against a dense oracle written from the kernel's definition."""
    from posbias_nb import rollout

    lay = T.parse_layout(spec)
    L = 37
    lams = np.linspace(0.3, 0.9, lay.depth)
    v = np.zeros(L)
    v[-1] = 1.0
    i, j = np.meshgrid(np.arange(L), np.arange(L), indexing="ij")
    for layer, lam in zip(reversed(lay.layers), reversed(lams)):
        sup = T.layer_matrix(T.Layer(layer.kind, layer.size), L) > 0
        w = np.where(sup, np.exp(-slope * (i - j)), 0.0)
        c = 0.0 if layer.sink is None else np.exp(layer.sink)
        K = w / (w.sum(1, keepdims=True) + c)
        v = (1 - lam) * v + lam * v @ K
    got = rollout.layout_rollout(lay, L, lams, slope)
    assert np.allclose(got, v, rtol=1e-12, atol=0)
    if slope == 0.0:
        assert np.allclose(got, T.layout_influence(lay, L, list(lams)), rtol=1e-12, atol=0)


def test_the_full_layout_rollout_is_the_alibi_rollout():
    from posbias_nb import rollout

    L, m = 50, 0.3
    K = rollout.alibi(L, slopes=[m])
    lams = [0.5, 0.7, 0.2]
    assert np.allclose(rollout.layout_rollout("3*full", L, lams, m), rollout.rollout(K, lams),
                       rtol=1e-10, atol=1e-300)
    with pytest.raises(ValueError, match="slope"):
        rollout.layout_rollout("full", 10, 0.5, -1.0)


def test_the_content_prediction_matches_each_layers_self_weight_under_a_layout():
    from posbias_nb import rollout
    from posbias_nb.measure.cached import predict

    L, H = 24, 2
    lay = "2*sliding:4"
    A = rollout.layout_kernels(rollout.uniform_causal(L), lay)
    for target in (0.1, 0.5, 0.8):  # the measured mean self-attention of every layer
        Ad = A.copy()
        Ad[:, np.arange(L), np.arange(L)] = 0  # only the diagonal's mean is read
        Ad[:, 0, 0] = target * L
        cap = dict(A=Ad, lam=np.full(H, 0.5), family="llama", n_heads=4, layout=lay)
        got = predict(cap, "content")
        Ks = rollout.layout_kernels(rollout.uniform_causal(L), lay)
        want = rollout.rollout(np.stack([rollout.content(L, rollout.matched_diag(K, target),
                                                         base=K) for K in Ks]), [0.5, 0.5])
        assert np.allclose(got, want)
        for K in Ks:  # the matched kernel has that self-weight and the layout's support
            C = rollout.content(L, rollout.matched_diag(K, target), base=K)
            assert abs(np.diagonal(C).mean() - target) < 1e-9
            assert np.all(C[K == 0] == 0)


def test_irwin_hall_row_validity_range_is_the_bulk_not_the_support_edge():
    """Issue 34, item 17: the docstring's validity range. In the bulk (positions with at least
    1/1000 of the largest value) the error falls as 1/w^2; over the whole support it does
    not fall at all (about 1.02 at every L)."""
    from posbias_nb import theory

    bulk, edge = [], []
    for L in (256, 1024, 4096):
        w = L // 20
        ex = theory.layout_influence(f"6*sliding:{w}", L, 0.5)
        ih = theory.irwin_hall_row(L, 6, w, 0.5)
        m = ex > 1e-3 * ex[:-1].max()
        m[-1] = False
        bulk.append(float(np.max(np.abs(ih[m] / ex[m] - 1))))
        pos = ex > 0
        pos[-1] = False
        edge.append(float(np.max(np.abs(ih[pos] / ex[pos] - 1))))
    # 1/w^2: a factor 16 per quadrupling of w, within a factor 2
    assert all(8 < a / b < 32 for a, b in zip(bulk, bulk[1:])), bulk
    assert all(1.0 < e < 1.05 for e in edge), edge


def _tiny_gemma3():
    import torch
    from transformers import AutoModelForCausalLM

    cfg = models.ZOO["gemma3-270m"].build_config()
    for k, v in dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                     num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                     query_pre_attn_scalar=32, sliding_window=4, vocab_size=97).items():
        setattr(cfg, k, v)
    cfg.layer_types = ["sliding_attention", "full_attention"]
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg).eval()


@pytest.mark.parametrize("switch", ["qk_norm", "rope_bases", "embed_scale", "sandwich_norms",
                                    "all"])
def test_each_gemma3_switch_changes_the_model_and_only_where_it_says(switch):
    """Issue 34, item 16: each ablation of the layouts study changes the random-init Gemma-3's
    output (checked by behaviour), on the parts it names."""
    import torch
    from posbias_nb.experiments.born import born_layouts as study

    m = _tiny_gemma3()
    ids = torch.arange(1, 13).unsqueeze(0)
    with torch.no_grad():
        before = m(ids).logits
    study.switch_off(m, switch)
    with torch.no_grad():
        after = m(ids).logits
    assert not torch.allclose(before, after)
    a = m.model.layers[0]
    off = {"qk_norm": isinstance(a.self_attn.q_norm, torch.nn.Identity),
           "sandwich_norms": isinstance(a.post_attention_layernorm, torch.nn.Identity),
           "embed_scale": float(m.model.embed_tokens.embed_scale) == 1.0,
           "rope_bases": torch.equal(m.model.rotary_emb.sliding_attention_inv_freq,
                                     m.model.rotary_emb.full_attention_inv_freq)}
    for k, v in off.items():
        assert v == (switch in (k, "all")), (k, switch)


def test_a_switch_is_refused_on_a_model_without_its_parts():
    import torch
    from posbias_nb.experiments.born import born_layouts as study

    with pytest.raises(ValueError, match="unknown switch 'rope'"):
        study.switch_off(_tiny_gemma3(), "rope")
    with pytest.raises(ValueError, match="switch 'qk_norm' needs a Gemma-3 text model"):
        study.switch_off(torch.nn.Linear(2, 2), "qk_norm")
    with pytest.raises(ValueError, match="is not in the design"):
        study.ablation("qk_norms")


def test_a_recorded_layout_agrees_across_float_rounding_of_its_sinks(tmp_path, monkeypatch):
    """The layouts study's cached layout keeps its sinks as floats beside the kinds' text: a
    sink logit read from float32 attention rows moves in its 7th digit with the machine and the
    thread count (CI's recorded check once failed on exactly that, the sinks written into the
    text), while a changed kind or a sink moved by far more still fails the check."""
    from pathlib import Path

    from posbias_nb import cache
    from posbias_nb.experiments.born import born_layouts as study
    from posbias_nb.experiments.born.born_layouts import measurements

    found = {"now": T.parse_layout("sliding:16@0.014936589462354138,full@-0.0017153004222846")}
    monkeypatch.setattr(measurements.entry, "profile_model", lambda *a, **k: (None, None, None))
    monkeypatch.setattr(measurements.models, "model_layout", lambda m, length: found["now"])
    monkeypatch.setattr(measurements.models, "describe", lambda spec: {"fingerprint": "f"})
    got = study.layout("gpt-oss")
    assert got == found["now"] and got.layers[0].sink == 0.014936589462354138
    # record this entry, then compute it again under three changes
    rec = tmp_path / "recorded"
    (rec / "layouts-layout").mkdir(parents=True)
    live = Path(cache.cache_dir()) / "layouts-layout"
    for f in live.iterdir():
        f.rename(rec / "layouts-layout" / f.name)
    monkeypatch.setenv("POSBIAS_RECORDED_DIR", str(rec))
    monkeypatch.setenv("POSBIAS_RECORDED_VERIFY", "layouts-layout")
    found["now"] = T.parse_layout("sliding:16@0.014936580120110284,full@-0.0017153421162378")
    assert study.layout("gpt-oss") == found["now"]  # rounding: agrees
    for f in live.iterdir():
        f.unlink()
    for bad in ("sliding:8@0.014936580120110284,full@-0.0017153421162378",
                "sliding:16@0.0249,full@-0.0017153421162378",
                "sliding:16,full@-0.0017153421162378"):
        found["now"] = T.parse_layout(bad)
        with pytest.raises(cache.RecordedMismatch):
            study.layout("gpt-oss")
