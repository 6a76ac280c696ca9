r"""Inference-time remedies for lost-in-the-middle, applied to a loaded model and undone exactly.

Chapter :ref:`ch-inference` measures each one on the influence prior and on the task.
:func:`remedy` is a context manager: inside the ``with`` block the model computes with the
remedy, after it the model is exactly what it was (same parameters, no hook left, the same
attention implementation), so its logits are bit-identical to those before.

* ``"hidden-scaling"`` (Yu et al. 2024, *PositionalHidden*): one channel ``channel`` of the
  post-norm hidden state that enters the **query and key** projections is multiplied by
  ``scale`` in the given ``layers`` (forward pre-hooks on ``q_proj`` and ``k_proj``); the value
  projection, and so what attention moves, is untouched.  The channel is found by
  :func:`posbias_nb.measure.positional.positional_channel`.
* ``"ms-poe"`` (Zhang et al. 2024): per-head RoPE position rescaling :math:`t \mapsto t/r_h`.
  Rotations in one plane commute, so the remedy rotates the already-rotated query and key of
  head :math:`h` once more, by :math:`t\,(1/r_h - 1)\,\theta_i`; a key-value head and all the
  query heads of its group share one ratio (``ratios`` has one entry per key-value head, see
  :func:`ms_poe_ratios`).  RoPE models only: others raise ``ValueError``.
* ``"prior-calibration"`` (ours, after Hsieh et al. 2024): in the given ``layers``, the
  attention of every query row at absolute position :math:`i \ge` ``start`` is reweighted by
  the model's content-free positional prior :math:`K_{l,h}(i, j)` (attention averaged over
  offline text, or over dummy documents), :math:`p'_{ij} \propto p_{ij}\,(K_{l,h}(i,j) /
  \bar K_{l,h}(i))^{-\tau}`, with :math:`\bar K` the row's geometric mean: one temperature
  :math:`\tau` (0 changes nothing).  The prior is measured by
  :func:`posbias_nb.measure.positional.positional_prior` and passed in.

Ms-PoE and the calibration act inside the attention function: the model's attention
implementation is switched, for the duration of the block, to a wrapper registered with
transformers' ``AttentionInterface`` (registered when first used, never on import) that calls
the fused (SDPA) or eager kernel the model had.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np

from .patches import decoder_layers, register_attention, rope_modules

__all__ = ["REMEDIES", "remedy", "check_applicable", "ms_poe_ratios", "middle_layers",
           "later_layers", "row_probabilities"]

REMEDIES = ("hidden-scaling", "prior-calibration", "ms-poe")
_ATTN = "posbias_remedy"


def middle_layers(n_layers: int) -> list[int]:
    """The middle half of a stack of ``n_layers`` (0-based indices ``[T/4, 3T/4)``), where
    hidden scaling is applied by default."""
    T = int(n_layers)
    lo, hi = T // 4, max(T // 4 + 1, (3 * T + 3) // 4)
    return list(range(lo, min(hi, T)))


def later_layers(n_layers: int) -> list[int]:
    """The later half of a stack (0-based ``[T/2, T)``), where the calibration acts."""
    T = int(n_layers)
    return list(range(T // 2, T))


def ms_poe_ratios(sharpness, n_kv_heads: int, lo: float = 1.2, hi: float = 1.8) -> np.ndarray:
    r"""Ms-PoE's per-head compression ratios for one layer, one per key-value head.

    ``sharpness`` has one value per query head (larger: sharper attention, e.g. minus the mean
    attention entropy).  Query heads are averaged within their key-value group (a group must
    share one rotation), groups are ranked, and the ratios run linearly from ``lo`` (sharpest
    group, least compression) to ``hi`` (flattest).

    Examples
    --------
    >>> ms_poe_ratios([3.0, 1.0, 2.0], 3).tolist()
    [1.2, 1.8, 1.5]
    """
    s = np.asarray(sharpness, dtype=float).ravel()
    g = int(n_kv_heads)
    if g < 1 or s.size % g:
        raise ValueError(f"{s.size} query heads cannot form {n_kv_heads} key-value groups")
    if not (1.0 <= lo <= hi) or not math.isfinite(hi):
        raise ValueError(f"ratios must satisfy 1 <= lo <= hi, got lo={lo!r}, hi={hi!r}")
    per = s.reshape(g, -1).mean(axis=1)
    rank = np.empty(g, dtype=int)
    rank[np.argsort(-per, kind="stable")] = np.arange(g)
    return lo + (hi - lo) * rank / max(g - 1, 1)


# --------------------------------------------------------------------------------------------
# the attention wrapper (Ms-PoE, calibration)

def _rotate_half(x):
    import torch

    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def _extra_rotation(x, pos, inv_freq, ratios):
    """Rotate ``x`` (B, H, L, d) of head h at positions ``pos`` by pos (1/r_h - 1) theta."""
    import torch

    rot = 2 * inv_freq.numel()
    ang = pos.double()[None, :, None] * (1.0 / ratios.double()[:, None, None] - 1.0) \
        * inv_freq.double()[None, None, :]  # (H, L, rot/2)
    ang = torch.cat((ang, ang), dim=-1)
    cos, sin = ang.cos().to(x.dtype)[None], ang.sin().to(x.dtype)[None]
    xr = x[..., :rot]
    xr = xr * cos + _rotate_half(xr) * sin
    return torch.cat((xr, x[..., rot:]), dim=-1) if rot < x.shape[-1] else xr


def row_probabilities(query, key, first: int, scaling=None, softcap=None, sliding_window=None,
                      logw=None, tau: float = 0.0):
    r"""Attention probabilities of the query rows at absolute positions ``first ..`` against
    every key, as the model's softmax computes them (causal mask, optional sliding window and
    soft-capping), optionally reweighted by ``exp(-tau * logw)`` (the calibration).

    ``query`` (B, H, Lq, d) and ``key`` (B, Hkv, Lk, d) are the rotated projections the attention
    function receives (no cache: ``Lq == Lk``; with one, the queries are the last ``Lq``
    positions).  Returns ``(B, H, Lk - first, Lk)`` float32.
    """
    import torch

    B, H, Lq, d = query.shape
    Lk = key.shape[2]
    p0 = Lk - Lq
    q = query[:, :, first - p0:]
    hk = key.shape[1]
    k = key.repeat_interleave(H // hk, dim=1) if H != hk else key
    s = scaling if scaling is not None else d ** -0.5
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * s  # (B, H, R, Lk)
    if softcap:
        scores = torch.tanh(scores / softcap) * softcap
    rows = torch.arange(first, Lk, device=q.device)[:, None]
    cols = torch.arange(Lk, device=q.device)[None, :]
    vis = cols <= rows
    if sliding_window:
        vis = vis & (rows - cols < int(sliding_window))
    if logw is not None and tau:
        scores = scores - tau * logw[None].to(scores.device)
    scores = scores.masked_fill(~vis[None, None], float("-inf"))
    return torch.softmax(scores, dim=-1)


def _calibrated_rows(module, query, key, value, out, cal, scaling, kw):
    import torch

    H, Lq = query.shape[1], query.shape[2]
    Lk = key.shape[2]
    p0 = Lk - Lq  # absolute position of the first query row (0 without a cache)
    first = max(int(cal["start"]), p0)
    if first >= Lk:
        return out
    K = cal["logw"]  # (H, R, Lkeys) for absolute rows row0 .. row0 + R - 1
    row0 = cal["row0"]
    if first < row0 or Lk > row0 + K.shape[1] or Lk > K.shape[2]:
        raise ValueError(f"the prior covers query rows {row0}..{row0 + K.shape[1] - 1}; rows "
                         f"{first}..{Lk - 1} were asked for (measure it at this length)")
    probs = row_probabilities(query, key, first, scaling, kw.get("softcap"),
                              kw.get("sliding_window"), K[:, first - row0:Lk - row0, :Lk],
                              cal["tau"])
    hk = key.shape[1]
    v = value.repeat_interleave(H // hk, dim=1) if H != hk else value
    rows_out = torch.matmul(probs.to(v.dtype), v).transpose(1, 2)  # (B, R, H, d)
    return torch.cat((out[:, :first - p0], rows_out.to(out.dtype)), dim=1)


def _remedy_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                      **kw):
    st = getattr(module, "_posbias_remedy", None)
    base = getattr(module, "_posbias_base", None) or _base_function("sdpa")
    if st is None:
        return base(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                    **kw)
    if "ratios" in st:
        import torch

        Lk, Lq = key.shape[2], query.shape[2]
        pk = torch.arange(Lk, device=key.device)
        rk = st["ratios"].to(key.device)
        rq = rk.repeat_interleave(query.shape[1] // key.shape[1])
        query = _extra_rotation(query, pk[Lk - Lq:], st["inv_freq"].to(query.device), rq)
        key = _extra_rotation(key, pk, st["inv_freq"].to(key.device), rk)
    out, w = base(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                  **kw)
    if "cal" in st:
        out = _calibrated_rows(module, query, key, value, out, st["cal"], scaling, kw)
    return out, w


def _base_function(impl: str):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if impl in ("sdpa", None):
        return sdpa_attention_forward
    return ALL_ATTENTION_FUNCTIONS[impl]


def _attention_modules(model) -> list:
    out = []
    for layer in decoder_layers(model):
        m = getattr(layer, "self_attn", None)
        if m is None or not hasattr(m, "q_proj") or not hasattr(m, "k_proj"):
            raise ValueError(f"{model.config.model_type}: inference-time remedies need "
                             "self_attn.q_proj / k_proj in every layer (Llama-like models)")
        out.append(m)
    return out


def check_applicable(model, name: str) -> None:
    """Raise ValueError (one line) unless the remedy ``name`` fits ``model``: Llama-like layers
    (``self_attn.q_proj`` / ``k_proj``) for all three, rotary embeddings for Ms-PoE."""
    if name not in REMEDIES:
        raise ValueError(f"remedy must be one of {', '.join(REMEDIES)}; got {name!r}")
    if name == "ms-poe" and not rope_modules(model):
        raise ValueError(f"{model.config.model_type} has no rotary position embeddings: Ms-PoE "
                         "rescales RoPE positions and does not apply")
    _attention_modules(model)


def _layer_inv_freq(model, attn):
    mods = rope_modules(model)
    if not mods:
        raise ValueError(f"{model.config.model_type} has no rotary position embeddings: Ms-PoE "
                         "rescales RoPE positions and does not apply")
    rot = mods[0]
    lt = getattr(attn, "layer_type", None)
    name = f"{lt}_inv_freq" if lt is not None and hasattr(rot, f"{lt}_inv_freq") else "inv_freq"
    f = getattr(rot, name, None)
    if f is None:
        raise ValueError(f"{model.config.model_type}: cannot find the RoPE frequencies of "
                         f"layer {attn.layer_idx}")
    return f.detach().clone()


def _check_layers(layers, T):
    try:
        ls = sorted({int(x) for x in layers})
    except (TypeError, ValueError):
        raise ValueError(f"layers must be layer indices, got {layers!r}") from None
    if not ls or ls[0] < 0 or ls[-1] >= T:
        raise ValueError(f"layers must be indices in 0..{T - 1}, got {layers!r}")
    return ls


def _finite(name, v, lo=-math.inf, hi=math.inf):
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {v!r}") from None
    if isinstance(v, bool) or not math.isfinite(x) or not lo <= x <= hi:
        raise ValueError(f"{name} must be a finite number in [{lo}, {hi}], got {v!r}")
    return x


@contextlib.contextmanager
def remedy(model, name: str, **params):
    r"""Apply the inference-time remedy ``name`` to ``model`` inside a ``with`` block; undo it
    exactly on exit (see the module docstring).

    Parameters (by remedy)
    ----------------------
    hidden-scaling : ``channel`` (int), ``scale`` (float, e.g. 0.5, 0, -0.5, -1), ``layers``
        (0-based indices; default :func:`middle_layers`).
    ms-poe : ``ratios`` (array, one per key-value head, or ``(n_layers, n_kv_heads)``; each
        >= 1), ``layers`` (default: all).
    prior-calibration : ``prior`` (array ``(len(layers), n_heads, R, L)``: the content-free
        attention of query rows ``row0 .. row0+R-1`` to every key, in each calibrated layer),
        ``row0`` (int), ``tau`` (float >= 0), ``start`` (first calibrated row, default
        ``row0``), ``layers`` (default :func:`later_layers`).

    Raises
    ------
    ValueError
        An unknown remedy, a missing or bad parameter, or a model it does not fit (Ms-PoE
        without RoPE).
    """
    import torch

    if name not in REMEDIES:
        raise ValueError(f"remedy must be one of {', '.join(REMEDIES)}; got {name!r}")
    attns = _attention_modules(model)
    T = len(attns)
    hooks, states = [], []
    needs_attn = name in ("ms-poe", "prior-calibration")
    allowed = {"hidden-scaling": {"channel", "scale", "layers"},
               "ms-poe": {"ratios", "layers"},
               "prior-calibration": {"prior", "row0", "tau", "start", "layers"}}[name]
    extra = set(params) - allowed
    if extra:
        raise ValueError(f"{name} takes {', '.join(sorted(allowed))}; got {sorted(extra)!r}")
    if name == "hidden-scaling":
        if "channel" not in params or "scale" not in params:
            raise ValueError("hidden-scaling needs channel= and scale=")
        d = attns[0].q_proj.in_features
        c = params["channel"]
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or not 0 <= c < d:
            raise ValueError(f"channel must be an integer in 0..{d - 1}, got {c!r}")
        s = _finite("scale", params["scale"])
        layers = _check_layers(params.get("layers", middle_layers(T)), T)
        for i in layers:
            a = attns[i]
            w = torch.ones(d, dtype=a.q_proj.weight.dtype, device=a.q_proj.weight.device)
            w[int(c)] = s

            def pre(mod, args, w=w):
                return (args[0] * w, *args[1:])
            hooks += [a.q_proj.register_forward_pre_hook(pre),
                      a.k_proj.register_forward_pre_hook(pre)]
    elif name == "ms-poe":
        if "ratios" not in params:
            raise ValueError("ms-poe needs ratios= (one per key-value head; see ms_poe_ratios)")
        layers = _check_layers(params.get("layers", range(T)), T)
        r = np.asarray(params["ratios"], dtype=float)
        n_kv = attns[0].k_proj.out_features // attns[0].head_dim
        if r.ndim == 1:
            r = np.broadcast_to(r, (T, r.size))
        if r.shape != (T, n_kv) or not np.all(np.isfinite(r)) or np.any(r < 1):
            raise ValueError(f"ratios must be >= 1, one per key-value head ({n_kv}) or per "
                             f"layer and key-value head ({T}, {n_kv}); got shape {r.shape}")
        for i in layers:
            a = attns[i]
            states.append((a, {"ratios": torch.tensor(r[i]),
                               "inv_freq": _layer_inv_freq(model, a)}))
    else:
        for k in ("prior", "row0", "tau"):
            if k not in params:
                raise ValueError(f"prior-calibration needs {k}=")
        tau = _finite("tau", params["tau"], 0.0)
        row0 = params["row0"]
        if isinstance(row0, bool) or not isinstance(row0, (int, np.integer)) or row0 < 0:
            raise ValueError(f"row0 must be a non-negative integer, got {row0!r}")
        start = params.get("start", row0)
        if isinstance(start, bool) or not isinstance(start, (int, np.integer)) or start < row0:
            raise ValueError(f"start must be an integer >= row0 ({row0}), got {start!r}")
        layers = _check_layers(params.get("layers", later_layers(T)), T)
        P = np.asarray(params["prior"], dtype=float)
        H = attns[0].q_proj.out_features // attns[0].head_dim
        if P.ndim != 4 or P.shape[0] != len(layers) or P.shape[1] != H or \
                P.shape[3] < int(row0) + P.shape[2] or not np.all(np.isfinite(P)) or \
                np.any(P < 0):
            raise ValueError(f"prior must be a non-negative array (len(layers)={len(layers)}, "
                             f"n_heads={H}, rows, keys >= row0 + rows), got shape {P.shape}")
        for k, i in enumerate(layers):
            logw = _log_weights(P[k], int(row0))
            states.append((attns[i], {"cal": {"logw": torch.tensor(logw, dtype=torch.float32),
                                              "row0": int(row0), "tau": tau,
                                              "start": int(start)}}))
    old = model.config._attn_implementation
    try:
        if needs_attn and states:
            base = old if old in ("sdpa", "eager") else "sdpa"
            impl = _register(base)
            fn = _eager_of(attns[0]) if base == "eager" else _base_function(base)
            for a in attns:
                a._posbias_base = fn
            for a, st in states:
                a._posbias_remedy = st
            model.set_attn_implementation(impl)
        yield model
    finally:
        for h in hooks:
            h.remove()
        for a, _ in states:
            if hasattr(a, "_posbias_remedy"):
                del a._posbias_remedy
        if needs_attn and states:
            model.set_attn_implementation(old)
            for a in attns:
                if hasattr(a, "_posbias_base"):
                    del a._posbias_base


def _register(base: str) -> str:
    """The wrapper's name for a model whose kernel is ``base`` (its masks built as for it)."""
    return register_attention(f"{_ATTN}_{base}", _remedy_attention, mask_like=base)


def _eager_of(attn):
    import sys

    mod = sys.modules[type(attn).__module__]
    f = getattr(mod, "eager_attention_forward", None)
    if f is None:
        raise ValueError(f"{type(attn).__name__}: no eager attention function to wrap")
    return f


def _log_weights(P, row0):
    """log(K / geometric mean of the visible row) for each head and row; 0 where invisible."""
    H, R, Lk = P.shape
    out = np.zeros((H, R, Lk))
    for r in range(R):
        n = row0 + r + 1
        lk = np.log(np.maximum(P[:, r, :n], 1e-8))
        out[:, r, :n] = lk - lk.mean(axis=1, keepdims=True)
    return out
