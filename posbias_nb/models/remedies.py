r"""Inference-time remedies for lost-in-the-middle, applied to a loaded model and undone exactly.

Chapter :ref:`ch-inference` measures each one on the influence prior, on the task and on the
cost.  :func:`remedy` is a context manager: inside the ``with`` block the model computes with
the remedy, after it the model is exactly what it was (same parameters, no hook left, the same
attention implementation), so its logits are bit-identical to those before.

Three remedies are the papers' own methods, each tested against an oracle written from the
paper's equations (``tests/unit/models/test_remedy_oracles.py``); two are variants of ours, named apart.

* ``"hidden-scaling"`` (Yu et al. 2024, *PositionalHidden*, their ``LlamaAttention`` with
  ``last_recompute_tokens``).  In each layer of ``layers`` the attention block first computes
  every row as usual; then the **last query rows** (absolute rows ``start ..``, one per
  generated token: ``len(answer) + 1`` rows when an answer is teacher-forced) are recomputed
  with the query and keys of the normalised hidden state whose channel ``channel`` is
  multiplied by ``scale``, against the scaled keys of *every* position, with the values
  **unscaled**:

  .. math:: O_{i} = \mathrm{softmax}_j\big(q'_i \cdot k'_j / \sqrt d\big)\, v_j
     \quad (i \ge \mathrm{start}), \qquad q' = W_q (x \odot w),\; k' = W_k (x \odot w),

  with :math:`w_c = s` and 1 elsewhere (RoPE and any query/key norm after the projection, as
  in the model).  Rows before ``start`` are the unmodified model's in every layer.  With a
  key-value cache the scaled keys of the context are kept (their cache stores them too).
  Default layers :func:`yu_layers` (their 32-layer configuration, layers 10 to 25, scaled to
  the depth).  The channel is found by :func:`posbias_nb.measure.positional.positional_channel`.
* ``"hidden-scaling-all"`` (**ours**): the same channel scaled in the query and key input of
  *every* row (forward pre-hooks on ``q_proj`` and ``k_proj``), so every context token's hidden
  state changes from the first patched layer on.  The book's first version of the remedy.
* ``"ms-poe"`` (Zhang et al. 2024, *Ms-PoE*, their ``MsPoELlamaAttention``).  In each layer of
  ``layers`` (default 2 to T - 1, as their ``--apply_layers``), query head :math:`h` and the
  keys it reads are rotated at positions :math:`t / r_h` instead of :math:`t`.  The ratios
  are :math:`r = \mathrm{lo} + (\mathrm{hi} - \mathrm{lo})\, i / H` for the head of rank
  :math:`i` (so ``hi`` itself is never reached), the heads ranked per prompt, at the prefill,
  by their outlier share (:func:`outlier_share`: the share of the last prompt row's attention
  weights above 3 times the row mean, from the query and key *before* RoPE): the head with the
  most outliers (the most position-aware) gets ``lo``.  The order is kept for every later row
  and every decoded token.  Under grouped-query attention the keys are repeated to the query
  heads first and each copy is rotated with its query head's ratio, so the query heads of one
  key-value group keep distinct ratios.  ``ratios=`` fixes the ratios instead (one per query
  head, or per layer and query head).
* ``"attention-calibration"`` (Hsieh et al. 2024, *Found in the middle*, eqs. 4 to 6).  Given
  the documents' token ``spans`` of each sequence and their **calibrated attention**
  :math:`r_k = \mathrm{Attn}(x^{doc}_k, k) - \mathrm{Attn}(x^{dum}, k)` (measured by
  :func:`posbias_nb.measure.positional.calibrated_attention`), every query row from ``start``
  on, in every head of ``layers`` (default the later half: their last 16 of 32), has its
  attention on the tokens of document :math:`k` rescaled so that the document's total becomes
  proportional to :math:`N_k\,\alpha_k`, :math:`\alpha = \mathrm{softmax}(r / t)`:

  .. math:: a'_{k,i} = C\, \frac{\alpha_k}{A_k}\, a_{k,i}, \qquad
     C = \frac{\sum_k S_k}{\sum_k \alpha_k N_k},

  with :math:`S_k` the document's attention mass in that row and head, :math:`A_k = S_k/N_k`
  its mean per token (eq. 5): the total on the documents is unchanged, the pattern inside a
  document is kept, the other tokens (instruction, question) are untouched.  This is the
  paper's reading of eq. 5's :math:`\mathrm{Attn}_{original}(x^{doc}_k)` per head and row
  (``normaliser="per-head"``, the default): every patched head's document shares become
  :math:`\propto \alpha_k N_k`, whatever that head attended to before.
  ``normaliser="shared"`` (**the shared normaliser**, ours, issue 46) divides instead by the
  quantity the paper calls :math:`\mathrm{Attn}` elsewhere, the last prompt row's attention to
  the document averaged over its tokens, every layer and head (``attention=``, what
  :func:`~posbias_nb.measure.positional.calibrated_attention` returns as ``"attention"``):
  :math:`a'_{k,i} = C\,(\alpha_k/\bar A_k)\,a_{k,i}`, :math:`C` again keeping the row's
  total on the documents.  Every head's document mass is multiplied by one factor per
  document, so each head keeps its own preference among documents; the operator is the
  identity where :math:`\alpha \propto \bar A` (the calibration's target equals the model's
  own mean attention), hence at a uniform :math:`\alpha` where the documents' mean attention
  is equal, but not at a uniform :math:`\alpha` in general (it then flattens the mean attention
  over documents, which is the calibration's purpose).
* ``"prior-calibration"`` (**ours**, after Hsieh et al.): in the given ``layers``, the
  attention of every query row from ``start`` on is reweighted token by token by the model's
  content-free positional prior :math:`K_{l,h}(i, j)` (attention averaged over offline text),
  :math:`p'_{ij} \propto p_{ij}\,(K_{l,h}(i,j) / \bar K_{l,h}(i))^{-\tau}`, with :math:`\bar K`
  the row's geometric mean; one temperature :math:`\tau` (0 changes nothing).  Multiplicative
  and per token, where Hsieh et al.'s operator is additive and per document.

``start`` (the first modified row) is an absolute position, one integer for every sequence
or one per sequence of the batch (prompts of different lengths, right-padded); its default is
the last row.  Ms-PoE and the row recomputations act inside the attention function: the
model's attention implementation is switched, for the duration of the block, to a wrapper
registered with transformers' ``AttentionInterface`` (registered when first used, never on
import) that calls the fused (SDPA) or eager kernel the model had.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np

from .patches import decoder_layers, register_attention, rope_modules
from ..remedy_table import NETWORK as REMEDIES
from ..remedy_table import OURS, TABLE as _TABLE
from .remedy_file import NORMALISERS as _NORMALISERS

__all__ = ["REMEDIES", "OURS", "NORMALISERS", "remedy", "check_applicable", "ms_poe_ratios", "outlier_share",
           "yu_layers", "ms_poe_layers", "later_layers", "row_probabilities",
           "calibration_weights"]

#: The readings of eq. 5's normaliser of the attention calibration
#: (:data:`posbias_nb.models.remedy_file.NORMALISERS`, where a remedy file's values are checked).
NORMALISERS = _NORMALISERS
_ATTN = "posbias_remedy"


def prompt_remedy_refused(path, remedy: str) -> str:
    """The one line that refuses a prompt remedy's file where no documents are (a model patch,
    a text window, a synthetic task)."""
    from pathlib import Path

    return (f"{Path(str(path)).name} holds {remedy}, a prompt remedy: it changes where a task "
            "file's documents go, not the model; apply it with posbias task --remedy-file or "
            "posbias_nb.experiments.task.reorder_documents")


def yu_layers(n_layers: int) -> list[int]:
    """Yu et al.'s layers for a stack of ``n_layers``: their configurations of 32-layer models
    scale layers 10 to 25 (0-based), so here ``round(10 T / 32) .. round(26 T / 32) - 1``.

    Examples
    --------
    >>> yu_layers(32) == list(range(10, 26)), yu_layers(30)[0], yu_layers(30)[-1]
    (True, 9, 23)
    """
    T = int(n_layers)
    lo, hi = int(round(10 * T / 32)), int(round(26 * T / 32))
    return list(range(min(lo, T - 1), max(hi, lo + 1) if hi <= T else T))


def ms_poe_layers(n_layers: int) -> list[int]:
    """Ms-PoE's layers: 2 to T - 1 (0-based; their ``--apply_layers "2,...,31"`` for 32 layers).

    Examples
    --------
    >>> ms_poe_layers(8)
    [2, 3, 4, 5, 6, 7]
    """
    T = int(n_layers)
    return list(range(min(2, T - 1), T))


def later_layers(n_layers: int) -> list[int]:
    """The later half of a stack (0-based ``[T/2, T)``): Hsieh et al.'s last 16 of 32 layers,
    where both calibrations act."""
    T = int(n_layers)
    return list(range(T // 2, T))


def outlier_share(probs) -> np.ndarray:
    r"""Ms-PoE's outlier share of each head: the fraction of a row's attention weights above 3
    times the row's mean, ``mean(p > 3 * mean(p))`` over the row's ``n`` visible keys (their
    ``_calculate_outlier`` on the last prefill row, where every key is visible).

    ``probs``: ``(..., n)`` attention rows.

    Examples
    --------
    >>> outlier_share([[0.8, 0.05, 0.05, 0.05, 0.05], [0.2, 0.2, 0.2, 0.2, 0.2]]).tolist()
    [0.2, 0.0]
    """
    p = np.asarray(probs, dtype=float)
    return (p > 3 * p.mean(axis=-1, keepdims=True)).mean(axis=-1)


def ms_poe_ratios(share, lo: float = 1.2, hi: float = 1.8,
                  assign: str = "rank") -> np.ndarray:
    r"""Ms-PoE's compression ratio of each head from its outlier share (:func:`outlier_share`).

    The heads are ordered by decreasing share (stable: ties keep head order) and the head of rank
    :math:`i` gets :math:`\mathrm{lo} + (\mathrm{hi} - \mathrm{lo})\, i / H` (the reference's
    spacing: ``hi`` is approached, never reached).  ``assign="rank"`` is the paper's rule (the
    most position-aware head compresses least); ``assign="reference-code"`` reproduces the
    reference implementation's indexing, ``cos[head_order]``, which gives head :math:`j` the
    ratio of rank ``order[j]`` (the two agree only by chance).

    Examples
    --------
    >>> ms_poe_ratios([0.1, 0.3, 0.0, 0.2]).round(2).tolist()
    [1.5, 1.2, 1.65, 1.35]
    """
    s = np.asarray(share, dtype=float).ravel()
    if s.size < 1 or not np.all(np.isfinite(s)):
        raise ValueError(f"share must be finite values, one per head, got {share!r}")
    if not (1.0 <= lo <= hi) or not math.isfinite(hi):
        raise ValueError(f"ratios must satisfy 1 <= lo <= hi, got lo={lo!r}, hi={hi!r}")
    if assign not in ("rank", "reference-code"):
        raise ValueError(f"assign must be 'rank' or 'reference-code', got {assign!r}")
    H = s.size
    order = np.argsort(-s, kind="stable")
    steps = lo + (hi - lo) * np.arange(H) / H
    out = np.empty(H)
    if assign == "rank":
        out[order] = steps
    else:
        out = steps[order]
    return out


def calibration_weights(relevance, temperature: float) -> np.ndarray:
    r"""Hsieh et al.'s document weights :math:`\alpha = \mathrm{softmax}(r / t)` (eq. 5) from
    the calibrated attention ``relevance`` (``(..., K)``) and the temperature ``t > 0``.

    Examples
    --------
    >>> calibration_weights([0.0, 0.0], 1.0).tolist()
    [0.5, 0.5]
    """
    r = np.asarray(relevance, dtype=float)
    t = float(temperature)
    if not (math.isfinite(t) and t > 0):
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")
    if r.ndim < 1 or r.shape[-1] < 1 or not np.all(np.isfinite(r)):
        raise ValueError(f"relevance must be finite, one value per document, got {relevance!r}")
    z = r / t
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


# --------------------------------------------------------------------------------------------
# the attention wrapper

def _rotate_half(x):
    import torch

    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def _rotate(x, ang):
    """Rotate the RoPE part of ``x`` (B, H, L, d) by the angles ``ang`` (B or 1, H or 1, L,
    rot/2), in the model's rotate-half convention."""
    import torch

    rot = 2 * ang.shape[-1]
    a = torch.cat((ang, ang), dim=-1)
    cos, sin = a.cos().to(x.dtype), a.sin().to(x.dtype)
    xr = x[..., :rot]
    xr = xr * cos + _rotate_half(xr) * sin
    return torch.cat((xr, x[..., rot:]), dim=-1) if rot < x.shape[-1] else xr


def _angles(pos, inv_freq, factor):
    """pos (L,) x factor (B, H) x inv_freq (rot/2,) -> (B, H, L, rot/2), float64."""
    return (factor.double()[:, :, None, None] * pos.double()[None, None, :, None]
            * inv_freq.double()[None, None, None, :])


def row_probabilities(query, key, first: int, scaling=None, softcap=None, sliding_window=None,
                      logw=None, tau: float = 0.0):
    r"""Attention probabilities of the query rows at absolute positions ``first ..`` against
    every key, as the model's softmax computes them (causal mask, optional sliding window and
    soft-capping), optionally reweighted by ``exp(-tau * logw)`` (the prior calibration).

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
        lw = logw.to(scores.device)
        scores = scores - tau * (lw if lw.ndim == 4 else lw[None])
    scores = scores.masked_fill(~vis[None, None], float("-inf"))
    return torch.softmax(scores, dim=-1)


def _starts(st, B, Lk, device):
    """The first modified row of each of the B sequences, as a (B,) long tensor."""
    import torch

    s = st["start"]
    if s is None:
        s = Lk - 1
    if np.ndim(s) == 0:
        out = torch.full((B,), int(s), dtype=torch.long)
    else:
        if len(s) != B:
            raise ValueError(f"start has {len(s)} rows, the batch {B} sequences")
        out = torch.as_tensor(np.asarray(s, dtype=np.int64))
    if int(out.min()) < 0 or int(out.max()) >= Lk:
        raise ValueError(f"start must lie in 0..{Lk - 1} (the sequence), got {s!r}")
    return out.to(device)


def _replace_rows(out, rows_out, first, p0, starts):
    """``out`` (B, Lq, H, d) with its rows ``>= starts[b]`` (absolute) taken from ``rows_out``
    (B, R, H, d), which holds the absolute rows ``first ..``."""
    import torch

    Lq = out.shape[1]
    lo = first - p0
    head = out[:, :lo]
    tail = out[:, lo:]
    rows = torch.arange(first, p0 + Lq, device=out.device)[None, :]
    take = (rows >= starts[:, None])[:, :, None, None]
    return torch.cat((head, torch.where(take, rows_out.to(out.dtype), tail)), dim=1)


class _Groups:
    """``module`` seen by a kernel with keys already repeated to the query heads."""

    def __init__(self, module):
        self._m = module
        self.num_key_value_groups = 1

    def __getattr__(self, name):
        return getattr(self._m, name)


def _mspoe_ratios_now(st, query, key, p0, starts, scaling):
    """The per-head ratios (B, H) of this call: fixed, frozen from the prefill, or ranked now
    by the outlier share of each sequence's row ``start`` (query and key before RoPE)."""
    import torch

    ms = st["mspoe"]
    B, H = query.shape[:2]
    if ms["fixed"] is not None:
        r = ms["fixed"].to(query.device)
        return r[None].expand(B, H)
    if p0 > 0:
        if ms.get("current") is None or ms["current"].shape[0] != B:
            raise ValueError("ms-poe: a cached continuation needs the prefill run under the "
                             "remedy (the head order is fixed at the prefill)")
        return ms["current"].to(query.device)
    Lk = key.shape[2]
    pos = torch.arange(Lk, device=query.device)
    inv = ms["inv_freq"].to(query.device)
    back = _angles(pos, inv, -torch.ones(1, 1))  # undo RoPE: the reference scores raw q, k
    hk = key.shape[1]
    k = key.repeat_interleave(H // hk, dim=1) if H != hk else key
    out = torch.empty(B, H, dtype=torch.float64)
    with torch.no_grad():
        qr = _rotate(query.detach().double(), back)
        kr = _rotate(k.detach().double(), back)
        for b in range(B):
            s = int(starts[b])
            sc = torch.einsum("hd,hjd->hj", qr[b, :, s], kr[b, :, :s + 1]) * scaling
            p = torch.softmax(sc.float(), dim=-1).double()
            share = outlier_share(p.cpu().numpy())
            out[b] = torch.as_tensor(ms_poe_ratios(share, ms["lo"], ms["hi"], ms["assign"]))
    ms["current"] = out
    return out.to(query.device)


def _remedy_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                      **kw):
    import torch

    st = getattr(module, "_posbias_remedy", None)
    base = getattr(module, "_posbias_base", None) or _base_function("sdpa")
    if st is None:
        return base(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                    **kw)
    if st.get("capturing"):  # hidden scaling's nested call: keep q', k', compute nothing
        st["q2"], st["k2"] = query, key
        return torch.zeros_like(query).transpose(1, 2), None
    B, H, Lq, d = query.shape
    Lk = key.shape[2]
    p0 = Lk - Lq
    sc = scaling if scaling is not None else d ** -0.5
    starts = _starts(st, B, Lk, query.device)
    if "mspoe" in st:
        ratios = _mspoe_ratios_now(st, query, key, p0, starts, sc)
        st["mspoe"]["last"] = ratios.detach().cpu()
        inv = st["mspoe"]["inv_freq"].to(query.device)
        pos = torch.arange(Lk, device=query.device)
        extra = 1.0 / ratios.double() - 1.0  # (B, H): rotate t -> t / r on top of RoPE at t
        q = _rotate(query, _angles(pos[p0:], inv, extra))
        hk = key.shape[1]
        kr = key.repeat_interleave(H // hk, dim=1) if H != hk else key
        vr = value.repeat_interleave(H // hk, dim=1) if H != hk else value
        k = _rotate(kr, _angles(pos, inv, extra))
        return base(_Groups(module), q, k, vr, attention_mask, scaling=scaling,
                    dropout=dropout, **kw)
    out, w = base(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                  **kw)
    first = int(starts.min())
    if first < p0:
        first = p0
    if first >= Lk:
        return out, w
    hk = key.shape[1]
    v = value.repeat_interleave(H // hk, dim=1) if H != hk else value
    soft, win = kw.get("softcap"), kw.get("sliding_window")
    if "hidden" in st:
        q2, k2 = st.pop("q2"), st.pop("k2")
        if p0 > 0:
            hist = st.get("khist")
            if hist is None or hist.shape[2] != p0 or hist.shape[0] != B:
                raise ValueError("hidden-scaling: a cached continuation needs the prefill run "
                                 "under the remedy (its cache holds the scaled keys)")
            k2 = torch.cat((hist, k2), dim=2)
        st["khist"] = k2
        probs = row_probabilities(q2, k2, first, sc, soft, win)
    elif "doc" in st:
        probs = _document_calibrated(row_probabilities(query, key, first, sc, soft, win),
                                     st["doc"], first, starts)
    else:  # prior calibration (ours)
        cal = st["cal"]
        K, row0 = cal["logw"], cal["row0"]
        if first < row0 or Lk > row0 + K.shape[1] or Lk > K.shape[2]:
            raise ValueError(f"the prior covers query rows {row0}..{row0 + K.shape[1] - 1}; "
                             f"rows {first}..{Lk - 1} were asked for (measure it at this "
                             "length)")
        probs = row_probabilities(query, key, first, sc, soft, win,
                                  K[:, first - row0:Lk - row0, :Lk], cal["tau"])
    rows_out = torch.matmul(probs.to(v.dtype), v).transpose(1, 2)  # (B, R, H, d)
    return _replace_rows(out, rows_out, first, p0, starts), w


def _document_calibrated(probs, doc, first, starts):
    """Eq. 5 of Hsieh et al. on rows ``first ..`` of ``probs`` (B, H, R, Lk)."""
    import torch

    B, H, R, Lk = probs.shape
    D, alpha = doc["members"], doc["alpha"]  # (B or 1, K, Lmax) 0/1; (B or 1, K)
    if D.shape[0] not in (1, B):
        raise ValueError(f"attention-calibration: spans given for {D.shape[0]} sequences, the "
                         f"batch has {B}")
    if D.shape[2] > Lk:
        raise ValueError(f"attention-calibration: a document span ends at {D.shape[2]}, beyond "
                         f"the {Lk} tokens of the sequence")
    D = torch.nn.functional.pad(D, (0, Lk - D.shape[2])).expand(B, -1, -1).to(probs.device)
    for b in range(B):
        if D[b, :, int(starts[b]):].sum() > 0:
            raise ValueError("attention-calibration: a document span reaches a calibrated row "
                             f"(documents must end before start = {int(starts[b])})")
    alpha = alpha.expand(B, -1).to(probs.device)  # (B, K)
    N = D.sum(-1)  # (B, K)
    p = probs.double()
    S = torch.einsum("bhrl,bkl->bhrk", p, D)  # each document's mass per row and head
    live = S > 0
    zero = torch.zeros((), dtype=p.dtype)
    if doc.get("shared") is None:  # the paper's reading: each head's own A_k = S_k / N_k
        aN = torch.where(live, (alpha * N)[:, None, None, :], zero)
        C = S.sum(-1, keepdim=True) / aN.sum(-1, keepdim=True).clamp_min(1e-300)
        f = torch.where(live, C * alpha[:, None, None, :] * N[:, None, None, :]
                        / S.clamp_min(1e-300), zero)
    else:  # the shared normaliser (ours): one factor alpha_k / mean A_k for every head
        g = (alpha / doc["shared"].expand(B, -1).to(probs.device))[:, None, None, :]
        gS = torch.where(live, g * S, zero)
        C = S.sum(-1, keepdim=True) / gS.sum(-1, keepdim=True).clamp_min(1e-300)
        f = torch.where(live, C * g, zero)
    inside = D.sum(1).clamp(max=1.0)  # (B, Lk): 1 on document tokens
    mult = torch.einsum("bhrk,bkl->bhrl", f, D) + (1.0 - inside)[:, None, None, :]
    new = p * mult
    rows = torch.arange(first, first + R, device=probs.device)[None, :]
    take = (rows >= starts[:, None])[:, None, :, None]
    return torch.where(take, new, p).to(probs.dtype)


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
    (``self_attn.q_proj`` / ``k_proj``) for all, rotary embeddings for Ms-PoE."""
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


def _start_param(v):
    """None (the last row), a non-negative integer, or one per sequence."""
    if v is None:
        return None
    if np.ndim(v) == 0:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"start must be a non-negative integer, got {v!r}")
        return int(v)
    a = np.asarray(v)
    if a.ndim != 1 or a.size < 1 or not np.issubdtype(a.dtype, np.integer) or np.any(a < 0):
        raise ValueError(f"start must be non-negative integers, one per sequence, got {v!r}")
    return a.astype(np.int64)


#: The parameters each remedy takes (the remedy table's ``call``).
_ALLOWED = {n: set(r["call"]) for n, r in _TABLE.items() if r["kind"] == "network"}


def _channel_weight(attns, params, torch):
    if "channel" not in params or "scale" not in params:
        raise ValueError("hidden scaling needs channel= and scale=")
    d = attns[0].q_proj.in_features
    c = params["channel"]
    if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or not 0 <= c < d:
        raise ValueError(f"channel must be an integer in 0..{d - 1}, got {c!r}")
    s = _finite("scale", params["scale"])
    w = torch.ones(d, dtype=attns[0].q_proj.weight.dtype, device=attns[0].q_proj.weight.device)
    w[int(c)] = s
    return w


def _hidden_pre(mod, args, kwargs):
    """Forward pre-hook of an attention block under hidden scaling: compute the scaled query and
    keys of this call (a nested call of the block on the scaled input, its cache withheld)."""
    st = mod._posbias_remedy
    if st.get("capturing"):
        return None
    kw = dict(kwargs)
    h = args[0] if args else kw.pop("hidden_states")
    for k in ("cache", "past_key_values", "past_key_value"):
        if k in kw:
            kw[k] = None
    st["capturing"] = True
    try:
        type(mod).forward(mod, h * st["hidden"], *args[1:], **kw)
    finally:
        st["capturing"] = False
    return None


def _seed_scaled_keys(mod, st):
    """Hidden scaling after a recorded prefix: the scaled keys of its positions (what Yu et
    al.'s cache holds), from the prefix's attention inputs."""
    h, pe = st.pop("context")
    st["capturing"] = True
    try:
        type(mod).forward(mod, h * st["hidden"], position_embeddings=pe, attention_mask=None)
    finally:
        st["capturing"] = False
    st.pop("q2")
    st["khist"] = st.pop("k2")


def _doc_state(params, torch):
    spans = params["spans"]
    try:
        S = np.asarray(spans, dtype=np.int64)
    except (TypeError, ValueError):
        raise ValueError(f"spans must be (start, stop) token ranges, got {spans!r}") from None
    if S.ndim == 2:
        S = S[None]
    if S.ndim != 3 or S.shape[2] != 2 or S.shape[1] < 1 or np.any(S[..., 0] < 0) or \
            np.any(S[..., 1] <= S[..., 0]):
        raise ValueError(f"spans must be (start, stop) ranges with start < stop, per sequence: "
                         f"shape (B, K, 2), got shape {S.shape}")
    if "relevance" not in params or "temperature" not in params:
        raise ValueError("attention-calibration needs spans=, relevance= and temperature=")
    r = np.asarray(params["relevance"], dtype=float)
    if r.ndim == 1:
        r = r[None]
    if r.shape[-1] != S.shape[1]:
        raise ValueError(f"relevance has {r.shape[-1]} documents, spans {S.shape[1]}")
    alpha = calibration_weights(r, params["temperature"])
    B = max(S.shape[0], alpha.shape[0])
    if S.shape[0] not in (1, B) or alpha.shape[0] not in (1, B):
        raise ValueError(f"spans are given for {S.shape[0]} sequences, relevance for "
                         f"{alpha.shape[0]}")
    S = np.broadcast_to(S, (B,) + S.shape[1:])
    alpha = np.broadcast_to(alpha, (B, alpha.shape[-1]))
    L = int(S[..., 1].max())
    D = np.zeros((B, S.shape[1], L))
    for b in range(B):
        for k, (t0, t1) in enumerate(S[b]):
            D[b, k, t0:t1] = 1.0
    if np.any(D.sum(1) > 1):
        raise ValueError("attention-calibration: document spans overlap")
    norm = params.get("normaliser", "per-head")
    if norm not in NORMALISERS:
        raise ValueError(f"normaliser must be one of {', '.join(NORMALISERS)}, got {norm!r}")
    shared = None
    if norm == "shared":
        if params.get("attention") is None:
            raise ValueError("the shared normaliser needs attention= (each document's mean "
                             "attention over layers and heads, calibrated_attention's "
                             "'attention')")
        a = np.asarray(params["attention"], dtype=float)
        if a.ndim == 1:
            a = a[None]
        if a.ndim != 2 or a.shape[-1] != S.shape[1] or a.shape[0] not in (1, B) or \
                not np.all(np.isfinite(a)) or np.any(a <= 0):
            raise ValueError(f"attention must be positive, one value per document "
                             f"({S.shape[1]}) and sequence; got {params['attention']!r}")
        shared = torch.tensor(np.array(a), dtype=torch.float64)
    elif params.get("attention") is not None:
        raise ValueError("attention= is read only by the shared normaliser "
                         "(normaliser='shared')")
    return {"members": torch.tensor(D, dtype=torch.float64),
            "alpha": torch.tensor(np.array(alpha), dtype=torch.float64), "shared": shared}


@contextlib.contextmanager
def remedy(model, name: str, **params):
    r"""Apply the inference-time remedy ``name`` to ``model`` inside a ``with`` block; undo it
    exactly on exit (see the module docstring).

    The parameters, by remedy:

    * ``hidden-scaling``: ``channel`` (int), ``scale`` (float, e.g. 0 or -1), ``layers``
      (0-based; default :func:`yu_layers`), ``start`` (first recomputed row; default the last),
      ``context`` (to continue after a recorded prefix without re-running it: the prefix's
      attention inputs, :meth:`posbias_nb.measure.prefix.Prefix.context`).
    * ``hidden-scaling-all``: ``channel``, ``scale``, ``layers`` (default :func:`yu_layers`).
    * ``ms-poe``: ``lo``, ``hi`` (default 1.2, 1.8), ``assign`` ("rank" or "reference-code"),
      ``start`` (the prefill's last row, where heads are ranked; default the last row),
      ``layers`` (default :func:`ms_poe_layers`); or ``ratios`` (one per query head, or
      ``(n_layers, n_heads)``; each >= 1) instead of the ranking.
    * ``attention-calibration``: ``spans`` (``(K, 2)`` or ``(B, K, 2)`` token ranges of the
      documents), ``relevance`` (``(K,)`` or ``(B, K)``: the calibrated attention),
      ``temperature`` (> 0), ``start`` (first calibrated row, after every document; default
      the last), ``layers`` (default :func:`later_layers`), ``normaliser`` (:data:`NORMALISERS`,
      default ``per-head``) and, for ``shared``, ``attention`` (``(K,)`` or ``(B, K)``: each
      document's mean attention over its tokens, layers and heads).
    * ``prior-calibration``: ``prior`` (array ``(len(layers), n_heads, R, L)``: the
      content-free attention of query rows ``row0 .. row0+R-1`` to every key, in each
      calibrated layer), ``row0`` (int), ``tau`` (float >= 0), ``start`` (first calibrated
      row, default ``row0``), ``layers`` (default :func:`later_layers`).

    ``name`` may also be a remedy file (a path ending in ``.json``,
    :mod:`posbias_nb.models.remedy_file`): its remedy with its parameters, refused unless the
    file was made for these very weights; ``params`` may then add only what belongs to the
    prompt (:data:`~posbias_nb.models.remedy_file.PER_PROMPT`: ``start``, hidden scaling's
    ``context``, the calibration's ``spans`` and ``relevance``).

    Raises
    ------
    ValueError
        An unknown remedy, a missing or bad parameter, or a model it does not fit (Ms-PoE
        without RoPE); a remedy file that is malformed or was made for another model.
    """
    import torch

    from .remedy_file import PER_PROMPT, PROMPT_REMEDIES, check_model, is_remedy_file, read

    if is_remedy_file(name):
        spec = read(name)
        if spec["remedy"] in PROMPT_REMEDIES:
            raise ValueError(prompt_remedy_refused(name, spec["remedy"]))
        check_model(spec, name, model=model)
        extra = set(params) - PER_PROMPT[spec["remedy"]]
        if extra:
            allowed = ", ".join(sorted(PER_PROMPT[spec["remedy"]])) or "nothing"
            raise ValueError(f"a remedy file's parameters are its own; to a file of "
                             f"{spec['remedy']} a caller may add {allowed}, got "
                             f"{sorted(extra)!r}")
        own = dict(spec["params"])
        if spec["remedy"] == "attention-calibration":  # the dummy says how the caller
            own.pop("dummy", None)                     # measured relevance=, not the operator
        with remedy(model, spec["remedy"], **own, **params):
            yield
        return
    if name not in REMEDIES:
        raise ValueError(f"remedy must be one of {', '.join(REMEDIES)}; got {name!r}")
    attns = _attention_modules(model)
    T = len(attns)
    extra = set(params) - _ALLOWED[name]
    if extra:
        raise ValueError(f"{name} takes {', '.join(sorted(_ALLOWED[name]))}; got "
                         f"{sorted(extra)!r}")
    hooks, states = [], []
    start = _start_param(params.get("start"))
    a0 = attns[0]
    H = a0.q_proj.out_features // a0.head_dim
    if name == "hidden-scaling-all":
        w = _channel_weight(attns, params, torch)
        for i in _check_layers(params.get("layers", yu_layers(T)), T):
            def pre(mod, args, w=w):
                return (args[0] * w, *args[1:])
            hooks += [attns[i].q_proj.register_forward_pre_hook(pre),
                      attns[i].k_proj.register_forward_pre_hook(pre)]
    elif name == "hidden-scaling":
        w = _channel_weight(attns, params, torch)
        context = params.get("context")
        if context is not None and not isinstance(context, dict):
            raise ValueError("context must be {layer: (hidden, (cos, sin))} (Prefix.context)")
        for i in _check_layers(params.get("layers", yu_layers(T)), T):
            if context is not None and i not in context:
                raise ValueError(f"context lacks layer {i}")
            states.append((attns[i], {"hidden": w, "start": start,
                                      "context": None if context is None else context[i]}))
            hooks.append(attns[i].register_forward_pre_hook(_hidden_pre, with_kwargs=True))
    elif name == "ms-poe":
        layers = _check_layers(params.get("layers", ms_poe_layers(T)), T)
        lo = _finite("lo", params.get("lo", 1.2), 1.0)
        hi = _finite("hi", params.get("hi", 1.8), lo)
        assign = params.get("assign", "rank")
        ms_poe_ratios([0.0], lo, hi, assign)  # validates assign
        fixed = None
        if params.get("ratios") is not None:
            r = np.asarray(params["ratios"], dtype=float)
            if r.ndim == 1:
                r = np.broadcast_to(r, (T, r.size))
            if r.shape != (T, H) or not np.all(np.isfinite(r)) or np.any(r < 1):
                raise ValueError(f"ratios must be >= 1, one per query head ({H}) or per layer "
                                 f"and query head ({T}, {H}); got shape {r.shape}")
            fixed = r
        for i in layers:
            states.append((attns[i], {"start": start, "mspoe": {
                "lo": lo, "hi": hi, "assign": assign, "inv_freq": _layer_inv_freq(model,
                                                                                  attns[i]),
                "fixed": None if fixed is None else torch.tensor(fixed[i])}}))
    elif name == "attention-calibration":
        if "spans" not in params:
            raise ValueError("attention-calibration needs spans=, relevance= and temperature=")
        doc = _doc_state(params, torch)
        for i in _check_layers(params.get("layers", later_layers(T)), T):
            states.append((attns[i], {"doc": doc, "start": start}))
    else:
        for k in ("prior", "row0", "tau"):
            if k not in params:
                raise ValueError(f"prior-calibration needs {k}=")
        tau = _finite("tau", params["tau"], 0.0)
        row0 = params["row0"]
        if isinstance(row0, bool) or not isinstance(row0, (int, np.integer)) or row0 < 0:
            raise ValueError(f"row0 must be a non-negative integer, got {row0!r}")
        start = row0 if start is None else start
        if np.any(np.asarray(start) < row0):
            raise ValueError(f"start must be >= row0 ({row0}), got {params.get('start')!r}")
        layers = _check_layers(params.get("layers", later_layers(T)), T)
        P = np.asarray(params["prior"], dtype=float)
        if P.ndim != 4 or P.shape[0] != len(layers) or P.shape[1] != H or \
                P.shape[3] < int(row0) + P.shape[2] or not np.all(np.isfinite(P)) or \
                np.any(P < 0):
            raise ValueError(f"prior must be a non-negative array (len(layers)={len(layers)}, "
                             f"n_heads={H}, rows, keys >= row0 + rows), got shape {P.shape}")
        for k, i in enumerate(layers):
            logw = _log_weights(P[k], int(row0))
            states.append((attns[i], {"start": start, "cal": {
                "logw": torch.tensor(logw, dtype=torch.float32), "row0": int(row0),
                "tau": tau}}))
    old = model.config._attn_implementation
    needs_attn = bool(states)
    try:
        if needs_attn:
            base = old if old in ("sdpa", "eager") else "sdpa"
            impl = _register(base)
            fn = _eager_of(a0) if base == "eager" else _base_function(base)
            for a in attns:
                a._posbias_base = fn
            for a, st in states:
                a._posbias_remedy = st
            model.set_attn_implementation(impl)
            for a, st in states:
                if st.get("context") is not None:
                    _seed_scaled_keys(a, st)
        yield model
    finally:
        for h in hooks:
            h.remove()
        for a, _ in states:
            if hasattr(a, "_posbias_remedy"):
                del a._posbias_remedy
        if needs_attn:
            model.set_attn_implementation(old)
            for a in attns:
                if hasattr(a, "_posbias_base"):
                    del a._posbias_base


def ms_poe_state(model) -> dict:
    """Inside an Ms-PoE block: the ratios each patched layer used in its last call, ``{layer:
    (B, H) array}`` (what the chapter's figure shows)."""
    out = {}
    for i, a in enumerate(_attention_modules(model)):
        st = getattr(a, "_posbias_remedy", None)
        if st and "mspoe" in st and st["mspoe"].get("last") is not None:
            out[i] = st["mspoe"]["last"].numpy().copy()
    return out


__all__.append("ms_poe_state")


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
