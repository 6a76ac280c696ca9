"""Each remedy named after a paper against an oracle written from that paper's equations, on tiny
models; and each oracle shown to reject the departure the book's first version had.

* hidden scaling (Yu et al.): only the rows from ``start`` change, and they equal a direct
  recomputation with the scaled query against the scaled keys and the unscaled values;
* Ms-PoE (Zhang et al.): every head equals that head run alone by the model's own attention at
  ``position_ids / r_h``, with the ratios ranked by the outlier share of the raw last row, and
  distinct ratios inside one key-value group;
* attention calibration (Hsieh et al.): the calibrated attention of a document is its attention
  minus that of a dummy document at its place (eager attention maps), and the remedied layer
  equals eq. 5 applied by hand to the eager probabilities.
"""
import numpy as np
import pytest
import torch

from posbias_nb import models
from posbias_nb.measure import positional
from posbias_nb.measure.prefix import Prefix, score_after_prefix
from posbias_nb.measure.scoring import score_batch
from posbias_nb.models.remedies import (calibration_weights, ms_poe_ratios, ms_poe_state,
                                        outlier_share, remedy)

TINY = ("smollm2-tiny", "gemma3-tiny", "qwen2-tiny")


@pytest.fixture(scope="module")
def tiny():
    return {n: models.load(n, weights="random", seed=0)[0] for n in TINY}


def _ids(L=14, B=2, seed=1):
    return torch.randint(0, 200, (B, L), generator=torch.Generator().manual_seed(seed))


def _capture(m, layer, ids, ctx=None):
    """(input hidden state, position embeddings, output) of layer ``layer``'s attention block,
    and the input of its o_proj (the heads' outputs), in one forward pass."""
    got = {}
    a = models.decoder_layers(m)[layer].self_attn

    def pre(mod, args, kwargs):
        got["h"] = (args[0] if args else kwargs["hidden_states"]).detach().clone()
        got["pe"] = tuple(t.detach().clone() for t in kwargs["position_embeddings"])

    def post(mod, args, out):
        if "out" not in got:  # the first call (a nested call of hidden scaling comes before)
            pass
        got["out"] = out[0].detach().clone()

    def o_pre(mod, args):
        got["heads"] = args[0].detach().clone()
    hs = [a.register_forward_pre_hook(pre, with_kwargs=True), a.register_forward_hook(post),
          a.o_proj.register_forward_pre_hook(o_pre)]
    try:
        with torch.no_grad(), (ctx if ctx is not None else torch.no_grad()):
            m(ids)
    finally:
        for h in hs:
            h.remove()
    return got


def _rope(x, pos, inv_freq, scaling=1.0):
    """Standard RoPE (rotate-half) of x (B, H, L, d) at float positions pos (L,), float64."""
    ang = pos.double()[:, None] * inv_freq.double()[None, :]
    emb = torch.cat((ang, ang), -1)
    cos, sin = emb.cos() * scaling, emb.sin() * scaling
    rot = 2 * inv_freq.numel()
    xr = x[..., :rot]
    h = rot // 2
    half = torch.cat((-xr[..., h:], xr[..., :h]), -1)
    out = xr * cos + half * sin
    return torch.cat((out, x[..., rot:]), -1) if rot < x.shape[-1] else out


def _inv_freq(m, a):
    from posbias_nb.models.remedies import _layer_inv_freq
    return _layer_inv_freq(m, a)


def _qkv(a, x):
    """Projections of x by the attention block a, with its per-head q/k norms if any:
    (q (B, H, L, d), k (B, Hkv, L, d), v (B, Hkv, L, d)) in float64."""
    B, L, _ = x.shape
    d = a.head_dim
    q = a.q_proj(x).view(B, L, -1, d).transpose(1, 2)
    k = a.k_proj(x).view(B, L, -1, d).transpose(1, 2)
    v = a.v_proj(x).view(B, L, -1, d).transpose(1, 2)
    if hasattr(a, "q_norm"):
        q, k = a.q_norm(q), a.k_norm(k)
    return q.double(), k.double(), v.double()


def _mask(L, window=None):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    vis = j <= i
    if window:
        vis = vis & (i - j < window)
    return vis


def _attend(q, k, v, scale, vis, softcap=None):
    H, Hk = q.shape[1], k.shape[1]
    k = k.repeat_interleave(H // Hk, 1)
    v = v.repeat_interleave(H // Hk, 1)
    s = q @ k.transpose(-1, -2) * scale
    if softcap:
        s = torch.tanh(s / softcap) * softcap
    s = s.masked_fill(~vis, float("-inf"))
    return torch.softmax(s, -1) @ v, torch.softmax(s, -1)


def _moved(a, b):
    """a differs from b by more than float rounding (relative to b's scale)."""
    return bool((a - b).abs().max() > 1e-4 * b.abs().max())


def _close(a, b):
    """a equals b up to float32 rounding (relative to b's scale)."""
    torch.testing.assert_close(a, b.to(a.dtype), rtol=1e-4, atol=1e-5 * float(b.abs().max()))


def _window(a):
    return getattr(a, "sliding_window", None)


def _out(a, heads):
    """o_proj of (B, H, L, d) head outputs."""
    B, H, L, d = heads.shape
    return a.o_proj(heads.transpose(1, 2).reshape(B, L, H * d).to(a.o_proj.weight.dtype))


# --------------------------------------------------------------------------------------------
# hidden scaling

@pytest.mark.parametrize("model", TINY)
def test_hidden_scaling_equals_the_recomputed_last_rows(tiny, model):
    m = tiny[model]
    layer = len(models.decoder_layers(m)) - 1
    a = models.decoder_layers(m)[layer].self_attn
    ids = _ids(L=12)
    start, c, s = 9, 5, -1.0
    base = _capture(m, layer, ids)
    got = _capture(m, layer, ids, remedy(m, "hidden-scaling", channel=c, scale=s,
                                          layers=[layer], start=start))
    x = base["h"]
    assert torch.equal(got["h"], x)  # only this layer is patched: its input is the model's
    L = x.shape[1]
    pos = torch.arange(L)
    inv = _inv_freq(m, a)
    with torch.no_grad():
        q, k, v = _qkv(a, x)
        xs = x.clone()
        xs[..., c] *= s
        q2, k2, _ = _qkv(a, xs)  # the values stay those of x
        q, k, q2, k2 = (_rope(t, pos, inv) for t in (q, k, q2, k2))
        vis = _mask(L, _window(a))
        o, _ = _attend(q, k, v, a.scaling, vis, getattr(a, "attn_logit_softcapping", None))
        o2, _ = _attend(q2, k2, v, a.scaling, vis, getattr(a, "attn_logit_softcapping", None))
        o[:, :, start:] = o2[:, :, start:]
        want = _out(a, o)
    _close(got["out"], want)
    torch.testing.assert_close(got["out"][:, :start], base["out"][:, :start], rtol=0, atol=0)
    assert _moved(got["out"][:, start:], base["out"][:, start:])
    # the departure put back: our all-rows variant scales every row's query and key
    ours = _capture(m, layer, ids, remedy(m, "hidden-scaling-all", channel=c, scale=s,
                                           layers=[layer]))
    assert _moved(ours["out"][:, :start], want[:, :start].float())


def test_hidden_scaling_with_a_cache_keeps_the_scaled_keys(tiny):
    """Generation: a prefill under the remedy then one token at a time equals the full pass
    with every row from the prefill's last on recomputed (Yu et al.'s cache holds scaled
    keys)."""
    m = tiny["smollm2-tiny"]
    from posbias_nb.measure.scoring import _cache_kw
    ids = _ids(L=12, B=1)
    with torch.no_grad():
        with remedy(m, "hidden-scaling", channel=2, scale=0.0, start=7):
            full = m(ids).logits
        with remedy(m, "hidden-scaling", channel=2, scale=0.0, start=7):
            o = m(ids[:, :8], use_cache=True)
            cache = getattr(o, "cache", None) or o.past_key_values
            steps = [o.logits[:, -1]]
            for t in range(8, 12):
                o = m(ids[:, t:t + 1], use_cache=True, **{_cache_kw(): cache})
                cache = getattr(o, "cache", None) or o.past_key_values
                steps.append(o.logits[:, -1])
    torch.testing.assert_close(torch.stack(steps[:-1], 1), full[:, 7:11], rtol=1e-4,
                               atol=1e-4)


# --------------------------------------------------------------------------------------------
# Ms-PoE

def _head_alone_at(m, layer, x, pe_fn, ratio, h):
    """Head h of layer ``layer`` run by the model's own attention block with the positions
    divided by ``ratio`` (its rotary embedding at float positions)."""
    a = models.decoder_layers(m)[layer].self_attn
    B, L, _ = x.shape
    pos = (torch.arange(L, dtype=torch.float32) / ratio)[None].expand(B, L)
    cos, sin = pe_fn(x, pos)
    got = {}
    hk = a.o_proj.register_forward_pre_hook(lambda mod, args: got.__setitem__("o", args[0]))
    try:
        with torch.no_grad():
            mask = None  # the block's own causal handling (sdpa is_causal) for full layers
            if _window(a):
                vis = _mask(L, _window(a))
                mask = torch.zeros(L, L).masked_fill(~vis, float("-inf"))[None, None]
            a(hidden_states=x, position_embeddings=(cos, sin), attention_mask=mask)
    finally:
        hk.remove()
    d = a.head_dim
    return got["o"].view(B, L, -1, d)[:, :, h]


def _rotary_fn(m, a):
    rot = [mod for mod in m.modules() if any(n.endswith("inv_freq") for n, _ in
                                               mod.named_buffers(recurse=False))][0]
    lt = getattr(a, "layer_type", None)
    if lt is not None and hasattr(rot, f"{lt}_inv_freq"):
        return lambda x, pos: rot(x, pos, layer_type=lt)
    return lambda x, pos: rot(x, pos)


def _oracle_ratios(m, a, x, row, lo=1.2, hi=1.8):
    """Ms-PoE's ratios from the paper's rule: outlier share of the raw (pre-RoPE) attention of
    row ``row``, heads of most outliers first, lo + (hi - lo) i / H."""
    with torch.no_grad():
        q, k, _ = _qkv(a, x)
    H = q.shape[1]
    k = k.repeat_interleave(H // k.shape[1], 1)
    out = []
    for b in range(x.shape[0]):
        s = (q[b, :, row] @ k[b, :, :row + 1].transpose(-1, -2)) * a.scaling
        p = torch.softmax(s.float(), -1).double().numpy()
        share = (p > 3 * p.mean(-1, keepdims=True)).mean(-1)
        order = np.argsort(-share, kind="stable")
        r = np.empty(H)
        r[order] = lo + (hi - lo) * np.arange(H) / H
        out.append(r)
    return np.array(out)


@pytest.mark.parametrize("model", TINY)
def test_ms_poe_each_head_is_that_head_at_compressed_positions(tiny, model):
    m = tiny[model]
    layer = len(models.decoder_layers(m)) - 1
    a = models.decoder_layers(m)[layer].self_attn
    ids = _ids(L=12)
    start = 11
    base = _capture(m, layer, ids)
    ctx = remedy(m, "ms-poe", layers=[layer], start=start)
    got = {}

    with torch.no_grad(), ctx:
        res = _capture(m, layer, ids)
        got["ratios"] = ms_poe_state(m)[layer]
    want_r = _oracle_ratios(m, a, base["h"], start)
    np.testing.assert_allclose(got["ratios"], want_r, rtol=0, atol=1e-12)
    H, Hk = want_r.shape[1], a.k_proj.out_features // a.head_dim
    if H != Hk:  # distinct ratios inside one key-value group
        g = want_r[0].reshape(Hk, -1)
        assert np.any(g.max(1) > g.min(1))
    pe = _rotary_fn(m, a)
    heads = res["heads"].view(*res["heads"].shape[:2], H, -1)
    for b in range(2):
        for h in range(H):
            alone = _head_alone_at(m, layer, base["h"][b:b + 1], pe, float(want_r[b, h]), h)
            _close(heads[b:b + 1, :, h], alone)
    # the departure put back: one ratio per key-value group (the first head's) is not it
    if H != Hk:
        shared = np.repeat(want_r[0].reshape(Hk, -1)[:, :1], H // Hk, axis=1).ravel()
        with torch.no_grad(), remedy(m, "ms-poe", layers=[layer], ratios=shared):
            grp = _capture(m, layer, ids[:1])
        assert _moved(grp["out"], res["out"][:1])


def test_ms_poe_ranking_rule():
    share = [0.1, 0.3, 0.0, 0.2]
    assert ms_poe_ratios(share).round(3).tolist() == [1.5, 1.2, 1.65, 1.35]
    code = ms_poe_ratios(share, assign="reference-code")  # their cos[head_order]
    assert code.round(3).tolist() == [1.35, 1.65, 1.2, 1.5]
    assert ms_poe_ratios([0.0] * 4).tolist() == [1.2, 1.35, 1.5, 1.65]  # ties keep head order
    assert outlier_share([[0.8, 0.05, 0.05, 0.05, 0.05], [0.9, 0.05, 0.05, 0, 0]]).tolist() == [0.2, 0.2]
    with pytest.raises(ValueError):
        ms_poe_ratios([0.1], assign="sorted")
    with pytest.raises(ValueError):
        ms_poe_ratios([0.1], lo=0.5)


def test_ms_poe_frozen_order_in_generation(tiny):
    """The head order is fixed at the prefill; decoded tokens keep it (and their positions are
    compressed too): prefill + steps equal the full pass ranked at the prefill's last row."""
    m = tiny["qwen2-tiny"]
    from posbias_nb.measure.scoring import _cache_kw
    ids = _ids(L=12, B=1)
    with torch.no_grad():
        with remedy(m, "ms-poe", start=7):
            full = m(ids).logits
        with remedy(m, "ms-poe", start=7):
            o = m(ids[:, :8], use_cache=True)
            cache = getattr(o, "cache", None) or o.past_key_values
            steps = [o.logits[:, -1]]
            for t in range(8, 12):
                o = m(ids[:, t:t + 1], use_cache=True, **{_cache_kw(): cache})
                cache = getattr(o, "cache", None) or o.past_key_values
                steps.append(o.logits[:, -1])
    torch.testing.assert_close(torch.stack(steps[:-1], 1), full[:, 7:11], rtol=1e-4,
                               atol=1e-4)


# --------------------------------------------------------------------------------------------
# attention calibration (Hsieh et al.)

def _eager_attentions(m, ids):
    m.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            return m(torch.as_tensor([ids]), output_attentions=True).attentions
    finally:
        m.set_attn_implementation("sdpa")


@pytest.mark.parametrize("model", ["smollm2-tiny", "gemma3-tiny"])
def test_calibrated_attention_is_attention_minus_the_dummys(tiny, model):
    m = tiny[model]
    g = np.random.default_rng(0)
    ids = g.integers(0, 200, 15).tolist()
    spans = [(1, 4), (4, 7), (7, 11)]
    dummy = [70, 71, 72, 73]
    dummies = []
    for a, b in spans:
        d = ids[:a] + dummy + ids[b:]
        dummies.append({"prompt_ids": d, "span": (a, a + len(dummy))})
    got = positional.calibrated_attention(m, ids, spans, dummies)

    def doc_attention(seq, a, b):
        att = _eager_attentions(m, seq)
        row = torch.stack([x[0, :, -1].double() for x in att]).mean((0, 1))  # layers, heads
        return float(row[a:b].mean())
    for k, (a, b) in enumerate(spans):
        want = doc_attention(ids, a, b) - doc_attention(dummies[k]["prompt_ids"], a,
                                                        a + len(dummy))
        assert abs(got["relevance"][k] - want) < 1e-6
    # the departure put back: a prior read at absolute rows of other sequences is not it
    other = positional.attention_rows(m, np.array([dummies[0]["prompt_ids"]]), 14)
    wrong = np.array([other[:, :, 0, a:b].mean() for a, b in spans])
    assert np.abs((got["attention"] - wrong) - got["relevance"]).max() > 1e-4


#: one prompt of two rows with three documents before the patched rows (start on)
_EQ5 = dict(start=10, spans=[(1, 3), (3, 6), (6, 9)], t=0.01,
            rel=np.array([[0.02, -0.01, 0.0], [0.0, 0.03, -0.02]]))


def _eq5_by_hand(m, layer, ids, factor):
    """The last layer's output by hand on the model's eager probabilities: from row ``start``
    on, each document's attention times ``factor(b, S, N)[k]`` (S the row's mass on each
    document, N its token count), rescaled so that the row keeps its total on the documents
    (eq. 5).  Returns the captured unpatched layer and the wanted output."""
    a = models.decoder_layers(m)[layer].self_attn
    start, spans, L = _EQ5["start"], _EQ5["spans"], ids.shape[1]
    base = _capture(m, layer, ids)
    att = _eager_attentions(m, ids[0].tolist()), _eager_attentions(m, ids[1].tolist())
    with torch.no_grad():
        _, _, v = _qkv(a, base["h"])
    H = a.q_proj.out_features // a.head_dim
    v = v.repeat_interleave(H // v.shape[1], 1)
    N = np.array([s1 - s0 for s0, s1 in spans], dtype=float)
    o = torch.zeros(2, H, L, a.head_dim, dtype=torch.float64)
    for b in range(2):
        p = att[b][layer][0].double().clone()  # (H, L, L) the model's own probabilities
        for h in range(H):
            for i in range(start, L):
                S = np.array([float(p[h, i, s0:s1].sum()) for s0, s1 in spans])
                f = factor(b, S, N)
                C = S.sum() / (f * S).sum()
                for k, (s0, s1) in enumerate(spans):
                    p[h, i, s0:s1] = C * f[k] * p[h, i, s0:s1]
        o[b] = p @ v[b]
    with torch.no_grad():
        return base, _out(a, o)


@pytest.mark.parametrize("model", TINY)
def test_attention_calibration_layer_equals_eq5(tiny, model):
    m = tiny[model]
    layer = len(models.decoder_layers(m)) - 1
    ids = _ids(L=13)
    start, spans, rel, t = _EQ5["start"], _EQ5["spans"], _EQ5["rel"], _EQ5["t"]
    got = _capture(m, layer, ids, remedy(m, "attention-calibration", layers=[layer],
                                          start=start, spans=spans, relevance=rel,
                                          temperature=t))
    alpha = calibration_weights(rel, t)
    # the paper's per head and row: document k's shares become C alpha_k N_k
    base, want = _eq5_by_hand(m, layer, ids, lambda b, S, N: alpha[b] * N / S)
    _close(got["out"][:, start:], want[:, start:])
    torch.testing.assert_close(got["out"][:, :start], base["out"][:, :start], rtol=0, atol=0)
    # the departure put back: our multiplicative per-token calibration is not eq. 5
    T = len(models.decoder_layers(m))
    H = models.decoder_layers(m)[layer].self_attn.q_proj.out_features // \
        models.decoder_layers(m)[layer].self_attn.head_dim
    prior = np.random.default_rng(1).random((1, H, 3, 13)) + 0.05
    ours = _capture(m, layer, ids, remedy(m, "prior-calibration", layers=[layer], prior=prior,
                                           row0=10, tau=1.0))
    assert _moved(ours["out"][:, start:], want[:, start:].float())
    assert T >= 1


@pytest.mark.parametrize("model", TINY)
def test_shared_normaliser_layer_equals_its_eq5(tiny, model):
    """Ours (issue 46): eq. 5 with the shared normaliser, by hand on the eager probabilities:
    every head's document mass times one factor alpha_k / mean A_k per document, the row's
    total on the documents kept."""
    m = tiny[model]
    layer = len(models.decoder_layers(m)) - 1
    ids = _ids(L=13)
    start, spans, rel, t = _EQ5["start"], _EQ5["spans"], _EQ5["rel"], _EQ5["t"]
    shared = np.array([[0.05, 0.02, 0.08], [0.03, 0.06, 0.01]])
    kw = dict(layers=[layer], start=start, spans=spans, relevance=rel, temperature=t)
    got = _capture(m, layer, ids, remedy(m, "attention-calibration", normaliser="shared",
                                          attention=shared, **kw))
    per_head = _capture(m, layer, ids, remedy(m, "attention-calibration", **kw))
    alpha = calibration_weights(rel, t)
    base, want = _eq5_by_hand(m, layer, ids, lambda b, S, N: alpha[b] / shared[b])
    _close(got["out"][:, start:], want[:, start:])
    torch.testing.assert_close(got["out"][:, :start], base["out"][:, :start], rtol=0, atol=0)
    assert _moved(per_head["out"][:, start:], want[:, start:].float())  # the paper's is not it


def test_shared_normaliser_is_the_identity_where_alpha_follows_the_mean_attention():
    """The shared normaliser changes nothing where alpha is proportional to the documents' mean
    attention (bit for bit up to float64 rounding), hence at a uniform alpha over documents of
    equal mean attention; the paper's per-head normaliser at the same alpha moves every head
    whose document shares differ from alpha N; and a uniform alpha over documents of unequal
    mean attention is no identity under either (it flattens the mean attention)."""
    from posbias_nb.models.remedies import _document_calibrated
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(1, 4, 3, 14, generator=g, dtype=torch.float64), -1)
    D = torch.zeros(1, 3, 14, dtype=torch.float64)
    D[0, 0, 1:4], D[0, 1, 4:8], D[0, 2, 8:10] = 1, 1, 1
    rows = torch.tensor([11])

    def run(alpha, shared):
        doc = {"members": D, "alpha": torch.tensor(np.array([alpha]), dtype=torch.float64),
               "shared": None if shared is None else torch.tensor([shared],
                                                                  dtype=torch.float64)}
        return _document_calibrated(p, doc, 11, rows)

    def tv(a, b):
        return float((a - b).abs().sum(-1).max() / 2)
    mean_a = [0.07, 0.03, 0.11]  # any positive means
    follow = np.array(mean_a) / np.sum(mean_a)
    torch.testing.assert_close(run(follow, mean_a), p, rtol=0, atol=1e-15)
    torch.testing.assert_close(run([1 / 3] * 3, [0.05] * 3), p, rtol=0, atol=1e-15)
    assert tv(run(follow, None), p) > 0.01  # per head: every head's shares overwritten
    assert tv(run([1 / 3] * 3, mean_a), p) > 0.01  # uniform alpha, unequal means: it moves
    # each head keeps its own preference: the ratio of two documents' mass changes by one
    # factor, the same in every head and row
    new = run([0.6, 0.3, 0.1], mean_a)
    r = (new[..., 1:4].sum(-1) / new[..., 4:8].sum(-1)) / (p[..., 1:4].sum(-1) /
                                                            p[..., 4:8].sum(-1))
    torch.testing.assert_close(r, torch.full_like(r, (0.6 / 0.07) / (0.3 / 0.03)), rtol=1e-12,
                               atol=0)


@pytest.mark.parametrize("model", ["smollm2-tiny", "gemma3-tiny"])
def test_shared_normaliser_on_a_model_at_its_fixed_point(tiny, model):
    """On a tiny model: relevance t log(mean attention) gives alpha proportional to it, and the
    shared normaliser leaves the layer's output as it is; the paper's reading moves it."""
    m = tiny[model]
    layer = len(models.decoder_layers(m)) - 1
    ids = _ids(L=13)
    spans = [(1, 3), (3, 6), (6, 9)]
    mean_a = np.array([[0.05, 0.02, 0.08], [0.03, 0.06, 0.01]])
    t = 0.5
    kw = dict(layers=[layer], start=10, spans=spans, relevance=t * np.log(mean_a),
              temperature=t)
    base = _capture(m, layer, ids)
    same = _capture(m, layer, ids, remedy(m, "attention-calibration", normaliser="shared",
                                           attention=mean_a, **kw))
    torch.testing.assert_close(same["out"], base["out"], rtol=1e-5,
                               atol=1e-6 * float(base["out"].abs().max()))
    moved = _capture(m, layer, ids, remedy(m, "attention-calibration", **kw))
    assert _moved(moved["out"][:, 10:], base["out"][:, 10:])


def test_shared_normaliser_refusals(tiny):
    m = tiny["smollm2-tiny"]
    kw = dict(spans=[(1, 3), (3, 6)], relevance=[0.0, 0.1], temperature=1.0, start=8)
    for extra, words in (({"normaliser": "global"}, "normaliser must be one of"),
                         ({"normaliser": "shared"}, "needs attention="),
                         ({"normaliser": "shared", "attention": [0.1]}, "one value per"),
                         ({"normaliser": "shared", "attention": [0.1, 0.0]}, "positive"),
                         ({"attention": [0.1, 0.2]}, "read only by the shared")):
        with pytest.raises(ValueError, match=words):
            with remedy(m, "attention-calibration", **kw, **extra):
                pass


def test_eq5_keeps_the_document_total_and_the_pattern_inside():
    from posbias_nb.models.remedies import _document_calibrated
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(1, 2, 3, 12, generator=g), -1)
    D = torch.zeros(1, 2, 12, dtype=torch.float64)
    D[0, 0, 1:4], D[0, 1, 4:8] = 1, 1
    doc = {"members": D, "alpha": torch.tensor([[0.9, 0.1]], dtype=torch.float64)}
    new = _document_calibrated(p, doc, 9, torch.tensor([9]))
    torch.testing.assert_close(new.sum(-1), torch.ones(1, 2, 3), rtol=0, atol=1e-6)
    tot = lambda q, a, b: q[..., a:b].sum(-1)  # noqa: E731
    torch.testing.assert_close(tot(new, 1, 8), tot(p, 1, 8), rtol=0, atol=1e-6)  # total kept
    ratio = (tot(new, 1, 4) / 3) / (tot(new, 4, 8) / 4)
    torch.testing.assert_close(ratio, torch.full_like(ratio, 9.0), rtol=1e-5, atol=0)
    torch.testing.assert_close(new[..., 8:], p[..., 8:], rtol=0, atol=1e-7)  # others untouched
    inside = new[..., 1:4] / p[..., 1:4]
    torch.testing.assert_close(inside, inside[..., :1].expand_as(inside), rtol=1e-5, atol=0)


# --------------------------------------------------------------------------------------------
# the recorded prefix: the remedies that change only the last rows, scored after it

@pytest.mark.parametrize("model", TINY)
def test_scores_after_a_recorded_prefix_equal_full_passes(tiny, model):
    m = tiny[model]
    g = np.random.default_rng(2)
    P, A = g.integers(0, 200, 10).tolist(), g.integers(0, 200, 4).tolist()
    spans, rel = [(1, 3), (3, 6), (6, 9)], [0.01, 0.0, -0.01]
    pre = Prefix(m, P, hidden=True)
    arms = [None,
            lambda s, c: remedy(m, "hidden-scaling", channel=3, scale=-1.0, start=s, context=c),
            lambda s, c: remedy(m, "attention-calibration", spans=spans, relevance=rel,
                                temperature=0.01, start=s)]
    got = [lp for lp, _ in score_after_prefix(pre, A, arms)]
    full = [score_batch(m, [P], [A])[0][0]]
    for name, p in (("hidden-scaling", dict(channel=3, scale=-1.0)),
                    ("attention-calibration", dict(spans=spans, relevance=rel,
                                                   temperature=0.01))):
        with remedy(m, name, start=len(P) - 1, **p):
            full.append(score_batch(m, [P], [A])[0][0])
    np.testing.assert_allclose(got, full, rtol=0, atol=2e-4)
    assert abs(full[1] - full[0]) > 1e-6 and abs(full[2] - full[0]) > 1e-6


@pytest.mark.parametrize("model", ["smollm2-tiny", "gemma3-tiny"])
def test_attention_sort_is_peysakhovich_and_lerers_algorithm(tiny, model):
    """measure.positional.attention_sort against their attnSortLLM written out on HF's eager
    attentions (adamlerer/synthwiki, llama_utils.py): each round, the last prompt token's
    attention summed over each document's tokens, averaged over heads (getCitation's groupby)
    and layers (getAttnScores), sorted highest first, reversed with best_doc_last; the next
    round scores the new order."""
    from posbias_nb.tasks import qa
    from posbias_nb.tasks.codec import Codec

    m = tiny[model]
    codec = Codec(None, m.get_input_embeddings().num_embeddings)
    docs = [qa.Document(f"Title {i}", f"Passage {i} says {'abc' * (i + 1)} here.")
            for i in range(5)]
    q = "what does passage three say"

    def reference(rounds, best_last):
        order, seen = list(range(len(docs))), []
        for _ in range(rounds):
            ids, spans = qa.document_token_spans(codec, qa.qa_prompt(q, [docs[i] for i in order]))
            att = _eager_attentions(m, ids)
            per_layer = [[x[0, :, -1, a:b].double().sum(-1).mean().item() for a, b in spans]
                         for x in att]
            s = np.mean(per_layer, axis=0)
            seen.append(dict(zip(order, s)))
            order = [order[i] for i in np.argsort(-s, kind="stable")]
            if best_last:
                order = order[::-1]
        return order, seen

    for rounds, best_last in ((3, True), (2, False)):
        got = positional.attention_sort(m, codec, q, docs, rounds=rounds, best_last=best_last)
        want, seen = reference(rounds, best_last)
        assert got["order"] == want
        for r in range(rounds):
            for i, v in seen[r].items():
                assert abs(got["scores"][r, i] - v) < 1e-6
    assert positional.ATTENTION_SORT == {"rounds": 3, "best_last": True}
    with pytest.raises(ValueError, match="empty document list"):
        positional.attention_sort(m, codec, q, [])
    with pytest.raises(ValueError, match="rounds"):
        positional.attention_sort(m, codec, q, docs, rounds=0)


@pytest.mark.parametrize("model", ["smollm2-tiny", "qwen2-tiny"])
def test_question_likelihood_ranking_is_longllmlinguas(tiny, model):
    """measure.positional.question_likelihood_ranking against LLMLingua's get_condition_ppl
    ('after') and get_distance_longllmlingua written out: the document then the question and
    its suffix, one pass each, the mean cross-entropy from the document's last token on,
    ranked ascending; a document scored alone does not depend on the others."""
    from posbias_nb.tasks import qa
    from posbias_nb.tasks.codec import Codec

    m = tiny[model]
    codec = Codec(None, m.get_input_embeddings().num_embeddings)
    docs = [qa.Document(f"T{i}", f"passage {i} {'xyz' * i}") for i in range(4)]
    q = "which passage"
    got = positional.question_likelihood_ranking(m, codec, q, docs)

    def get_ppl(text, cond):  # LLMLingua's get_ppl, condition_mode="after"
        ids = torch.as_tensor([codec.encode(text, prompt=True)[0]])
        with torch.no_grad():
            logits = m(ids).logits
        loss = torch.nn.CrossEntropyLoss(reduction="none")(
            logits[..., :-1, :].reshape(-1, logits.shape[-1]), ids[..., 1:].reshape(-1))
        return loss[cond:].mean().item()

    suffix = q + " We can get the answer to this question in the given documents."
    want = [get_ppl(f"(Title: {d.title}) {d.text}" + suffix,
                    len(codec.encode(f"(Title: {d.title}) {d.text}", prompt=True)[0]) - 1)
            for d in docs]
    assert np.allclose(got["nll"], want, atol=1e-5)
    assert got["ranking"] == [i for _, i in sorted((v, i) for i, v in enumerate(want))]
    alone = positional.question_likelihood_ranking(m, codec, q, docs[2:3])
    assert abs(alone["nll"][0] - got["nll"][2]) < 1e-9
    with pytest.raises(ValueError, match="empty document list"):
        positional.question_likelihood_ranking(m, codec, q, [])
