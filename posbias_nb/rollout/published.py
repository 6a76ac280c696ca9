r"""Replay of the structural theory's published rollout configurations (Herasimchyk et al., 2026).

Chapter :ref:`ch-replay` (:eq:`eq-replay`) and chapter :ref:`ch-infinite-depth` (where trained
models sit).  Every number comes from one file, the package data
``posbias_nb/data/ml-uhh-rollout-configs.json`` (source: ml-uhh/position-bias, commit a514e09,
``config/rollout/alibi/**.yaml``; ``posbias_nb/data/README.md`` gives the provenance):
:func:`published_configs` returns its entries, :func:`published_schedules` the measured
:math:`\lambda_t` of the five models' ``no_content`` entries, and :func:`replay` computes what
the authors' code predicts from one entry.
"""
from __future__ import annotations

import json
import math
from importlib import resources

import numpy as np

from .._validate import positive_int
from ._checks import _finite_float

__all__ = [
    "PUBLISHED_MODELS",
    "published_configs",
    "published_head_dims",
    "published_schedules",
    "replay",
]

_CONFIGS_FILE = "ml-uhh-rollout-configs.json"
#: the five models of the structural theory, in the order of its tables
PUBLISHED_MODELS = ("bloom", "bloom-7b1", "falcon-rw-7b", "mpt-7b", "mpt-30b")


def _load_published() -> dict:
    """The packaged JSON file, parsed afresh (callers may mutate what they get)."""
    text = (resources.files("posbias_nb") / "data" / _CONFIGS_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def published_configs() -> dict[str, dict]:
    r"""The structural theory's published rollout configurations (Herasimchyk et al., 2026).

    Chapter :ref:`ch-replay`.  Read from the package data file
    ``posbias_nb/data/ml-uhh-rollout-configs.json`` (source: ml-uhh/position-bias, commit
    a514e09, ``config/rollout/alibi/**.yaml``).  Keys are ``<variant>/<dataset>/<model>``
    (``no_content/<model>`` has no dataset); each value is one entry as the authors store it:
    ``sequence_length``, ``num_layers``, ``num_heads``, ``alibi_slopes`` (list of per-head lists,
    one for all layers or one per layer), ``softmax_temperature``, ``diagonal_scores`` and
    ``base_scores`` (per layer and head, or one number), ``lambda_schedule`` (``"custom"`` with
    ``lambdas``, or ``"constant"`` with ``lambda_const``) and ``mask``.  The all_content scores,
    stored in shortest float32 form, are returned as the exact float32 values of the source.

    Returns
    -------
    dict
        A fresh copy on every call.

    Examples
    --------
    >>> c = published_configs()
    >>> c["no_content/mpt-7b"]["num_layers"], len(c["no_content/mpt-7b"]["lambdas"])
    (32, 32)
    """
    out = {}
    for key, entry in _load_published()["configs"].items():
        e = dict(entry)
        if key.startswith("all_content/"):
            for f in ("diagonal_scores", "base_scores"):
                e[f] = np.asarray(e[f], dtype=np.float32).astype(np.float64).tolist()
        out[key] = e
    return out


def published_head_dims() -> dict[str, int]:
    r"""Head dimension :math:`d_h` of each model of :func:`published_configs` (hidden size over
    heads, from the released model configurations): what :func:`replay` needs with
    ``faithful=False`` to put the raw content scores on the logit scale.

    Chapter :ref:`ch-replay`.

    Examples
    --------
    >>> published_head_dims()["falcon-rw-7b"]
    64
    """
    return {k: int(v) for k, v in _load_published()["head_dim"].items()}


def published_schedules() -> dict[str, tuple[int, np.ndarray]]:
    r"""Measured :math:`\lambda_t` schedules of five ALiBi models (Herasimchyk et al., 2026).

    Chapter :ref:`ch-infinite-depth` (where trained models sit).

    The per-layer attention shares
    :math:`\lambda_t = \mathrm{E}[\lVert \mathrm{Attn}(\mathrm{Norm}\,x) \rVert /
    (\lVert x \rVert + \lVert \mathrm{Attn}(\mathrm{Norm}\,x) \rVert)]` the authors measured on
    FineWeb-Edu text at :math:`L = 256`, read from the ``no_content/<model>`` entries of
    :func:`published_configs` (the packaged JSON, full precision).

    Returns
    -------
    dict
        ``{model: (n_heads, lambdas)}`` for ``bloom``, ``bloom-7b1``, ``falcon-rw-7b``,
        ``mpt-7b`` and ``mpt-30b`` (in that order); ``n_heads`` is the model's number of
        attention heads and ``lambdas`` a fresh float64 array, layer 1 first.

    Examples
    --------
    >>> s = published_schedules()
    >>> sorted(s), s["mpt-7b"][0], s["mpt-7b"][1].size
    (['bloom', 'bloom-7b1', 'falcon-rw-7b', 'mpt-30b', 'mpt-7b'], 32, 32)
    """
    configs = _load_published()["configs"]
    out = {}
    for m in PUBLISHED_MODELS:
        e = configs[f"no_content/{m}"]
        lam = np.asarray(e["lambdas"], dtype=np.float64)
        if lam.shape != (e["num_layers"],) or not np.all((lam >= 0) & (lam <= 1)):
            raise ValueError(f"no_content/{m}: lambdas must be num_layers numbers in [0, 1]")
        out[m] = (int(e["num_heads"]), lam)
    return out


def _entry_int(entry, key, minimum=1):
    if key not in entry:
        raise ValueError(f"entry lacks {key!r}")
    return positive_int(key, entry[key], minimum=minimum)


def _entry_table(entry, key, n_layers, n_heads):
    """A per-layer, per-head table stored as a list of lists: 1 or n_layers rows, rows of equal
    length 1..n_heads (the authors' broadcasting rules are applied by the caller)."""
    if key not in entry:
        raise ValueError(f"entry lacks {key!r}")
    try:
        rows = [np.asarray(r, dtype=np.float64).ravel() for r in entry[key]]
    except (TypeError, ValueError):
        raise ValueError(f"{key} must be a list of lists of numbers, got {entry[key]!r:.80}") from None
    if len(rows) not in (1, n_layers):
        raise ValueError(f"{key} must have 1 or num_layers={n_layers} rows, got {len(rows)}")
    widths = {r.size for r in rows}
    if len(widths) != 1 or not 1 <= widths.pop() <= n_heads:
        raise ValueError(f"{key} rows must have one common length in 1..num_heads={n_heads}, "
                         f"got {sorted(r.size for r in rows)!r:.80}")
    if not all(np.all(np.isfinite(r)) for r in rows):
        raise ValueError(f"{key} must be finite, got {entry[key]!r:.80}")
    return rows


def _entry_lambdas(entry, T):
    kind = entry.get("lambda_schedule", "custom")
    if kind == "custom":
        lam = np.asarray(entry.get("lambdas"), dtype=np.float64).ravel()
        if lam.size != T or not np.all(np.isfinite(lam)):
            raise ValueError(f"lambdas must be {T} finite numbers, got {entry.get('lambdas')!r:.80}")
    elif kind == "constant":
        lam = np.full(T, _finite_float("lambda_const", entry.get("lambda_const")))
    elif kind == "power_decay":
        lam0 = _finite_float("lambda_0", entry.get("lambda_0"))
        beta = _finite_float("beta", entry.get("beta"))
        lam = lam0 / (np.arange(T, dtype=float) + 1.0) ** beta
    else:
        raise ValueError(f"lambda_schedule must be custom, constant or power_decay, got {kind!r}")
    return np.clip(lam, 0.0, 1.0)  # as the authors' make_lambda_schedule


def _masked_softmax(scores, mask):
    """Row softmax over the mask (last axis), as the authors' compute_row_softmax: stable,
    all-masked rows left at 0.  ``exp(-inf) = 0`` replaces their boolean indexing, with the same
    values."""
    masked = np.where(mask, scores, -np.inf)
    shifted = masked - np.max(masked, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        exps = np.where(np.isfinite(shifted), np.exp(shifted), 0.0)
    denom = np.sum(exps, axis=-1, keepdims=True)
    return np.divide(exps, denom, out=np.zeros_like(exps), where=denom > 0)


def replay(entry: dict, faithful: bool = True, head_dim: int | None = None) -> np.ndarray:
    r"""Predicted influence profile of one published rollout configuration.

    Chapter :ref:`ch-replay`, :eq:`eq-replay`.  Builds, for each layer ``t``, the head-averaged
    ALiBi-plus-content kernel :math:`A_t` (head ``h``: row softmax over :math:`j \le i` of
    :math:`c^{(t,h)}_{ij} - m_h (i-j)`, content :math:`c_{ij} = b + d\,[i=j]`), the residual
    step :math:`R_t = (1-\lambda_t) I + \lambda_t A_t`, the product
    :math:`P = R_T \cdots R_1`, and returns the last row of ``P`` normalised to sum 1.

    ``faithful=True`` repeats the authors' code (ml-uhh/position-bias, ``src/rollout/``)
    operation for operation, including two departures from their paper:

    * a content table with fewer heads than the model (one number for a layer, as in the
      ``mean_content`` configurations) fills only the first heads' priors; the other heads get
      content 0 (``content_prior.py``: ``content_priors[head_idx] = ...`` with
      ``head_idx = min(i, provided_heads - 1)``);
    * content scores are used as stored, raw :math:`q \cdot k` logits, while the ALiBi bias is
      on the logit scale :math:`q \cdot k / \sqrt{d_h}` (``attention.py``: ``scores =
      content_scores + alibi``, divided only by ``softmax_temperature``).

    ``faithful=False`` corrects both: the last given head's score fills every remaining head,
    and content scores are divided by :math:`\sqrt{d_h}`.

    Parameters
    ----------
    entry : dict
        One configuration as stored (see :func:`published_configs`); ``mask`` must be
        ``"causal"`` and ``head_weights``, if present, one nonnegative list per slope row.
    faithful : bool
        Reproduce the authors' computation (True) or apply the corrections (False).
    head_dim : int or None
        :math:`d_h`, needed when ``faithful=False`` and some content score is nonzero
        (:func:`published_head_dims`); otherwise ignored.

    Returns
    -------
    numpy.ndarray
        ``(sequence_length,)`` float64, sums to 1; entry ``j-1`` is input position ``j``.

    Raises
    ------
    ValueError
        For a malformed entry (missing or inconsistent fields, a mask other than causal, a
        temperature that is not positive), or ``faithful=False`` with nonzero content and no
        ``head_dim``.

    Examples
    --------
    >>> e = dict(sequence_length=3, num_layers=1, num_heads=1, alibi_slopes=[[0.0]],
    ...          diagonal_scores=[[0.0]], base_scores=[[0.0]], lambda_schedule="constant",
    ...          lambda_const=1.0, mask="causal")
    >>> replay(e).round(6).tolist()  # uniform causal attention: the Cesàro row
    [0.333333, 0.333333, 0.333333]
    """
    if not isinstance(entry, dict):
        raise ValueError(f"entry must be a dict, got {type(entry).__name__}")
    L = _entry_int(entry, "sequence_length")
    T = _entry_int(entry, "num_layers")
    nh = _entry_int(entry, "num_heads")
    if entry.get("mask", "causal") != "causal":
        raise ValueError(f"mask must be 'causal', got {entry.get('mask')!r}")
    temp = _finite_float("softmax_temperature", entry.get("softmax_temperature", 1.0))
    if temp <= 0:
        raise ValueError(f"softmax_temperature must be > 0, got {temp!r}")
    slopes = _entry_table(entry, "alibi_slopes", T, nh)
    if slopes[0].size not in (1, nh):
        raise ValueError(f"alibi_slopes rows must have 1 or num_heads={nh} entries, got {slopes[0].size}")
    diag = _entry_table(entry, "diagonal_scores", T, nh)
    base = _entry_table(entry, "base_scores", T, nh)
    if len(diag) != len(base) or diag[0].size != base[0].size:
        raise ValueError("diagonal_scores and base_scores must have the same shape")
    lam = _entry_lambdas(entry, T)
    hw = entry.get("head_weights")
    if hw is not None:
        hw = _entry_table(entry, "head_weights", len(slopes), nh)
        if len(hw) != len(slopes) or any(r.size != slopes[0].size or np.any(r < 0) or r.sum() <= 0
                                         for r in hw):
            raise ValueError("head_weights must match alibi_slopes and be nonnegative, not all 0")
    scale = 1.0
    if not faithful:
        if any(np.any(d != 0) for d in diag) or any(np.any(b != 0) for b in base):
            if head_dim is None:
                raise ValueError("faithful=False needs head_dim for nonzero content scores")
            scale = 1.0 / math.sqrt(positive_int("head_dim", head_dim))

    i = np.arange(L)[:, None]
    j = np.arange(L)[None, :]
    mask = j <= i
    dist = (i - j).astype(float)
    eye = np.eye(L)
    alibi_unit = np.where(mask, -dist, 0.0)  # -(i-j) below the diagonal, 0 on it
    memo: dict = {}

    def layer_kernel(s_row, content, w):
        key = (s_row.tobytes(), tuple(content), w.tobytes())
        if key not in memo:
            m = np.array([s_row[min(h, s_row.size - 1)] for h in range(nh)])[:, None, None]
            d = np.array([c[0] for c in content])[:, None, None]
            b = np.array([c[1] for c in content])[:, None, None]
            # the authors' order: (base + d I) + alibi, alibi = -m (i-j), 0 on the diagonal,
            # -1e30 above it; then / temperature; then the masked row softmax per head
            alibi_scores = np.where(mask, m * alibi_unit, -1e30)
            K = _masked_softmax((np.broadcast_to(b, (nh, L, L)) + d * eye + alibi_scores) / temp,
                                mask)
            A = np.zeros((L, L))
            for h in range(nh):
                A += w[min(h, w.size - 1)] * K[h]
            memo[key] = A
        return memo[key]

    P = np.eye(L)
    for t in range(T):
        d_row, b_row = diag[min(t, len(diag) - 1)], base[min(t, len(base) - 1)]
        provided = d_row.size
        content = [(0.0, 0.0)] * nh
        for h in range(nh):
            src = min(h, provided - 1)
            dst = src if faithful else h  # the authors write head src's prior into slot src
            content[dst] = (float(d_row[src]) * scale, float(b_row[src]) * scale)
        if hw is None:
            w = np.ones(nh) / nh
        else:
            w = hw[min(t, len(hw) - 1)]
            w = w / w.sum()
        A = layer_kernel(slopes[min(t, len(slopes) - 1)], content, w)
        R = (1.0 - lam[t]) * eye + lam[t] * A
        P = R @ P
    row = P[-1].copy()
    s = row.sum()
    if s > 0:
        row /= s
    return row
