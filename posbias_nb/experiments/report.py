r"""``posbias report``: one model's position bias, born and trained, in one page.

The report answers a practitioner's question -- does *my* model lose the middle, where, how badly,
and is it the architecture or the training? -- with four sections and a summary, each computed
by the functions the chapters use (nothing is re-implemented here):

1. **Born vs trained** (chapters :ref:`ch-init` and :ref:`ch-after`).  The Jacobian influence
   profile of the last token's final hidden state (:func:`posbias_nb.measure.profile`, or
   :func:`~posbias_nb.measure.shared_profile` for a packaged zoo model, so both read the same
   token ids) over ``windows >= 8`` disjoint text windows, for the model and for its
   **random-init twin** (the same configuration, ``weights="random"``, the same seed).  Each
   window's profile is normalized to sum 1; per position, the mean over windows with a Student
   *t* 95% interval (:func:`posbias_nb.stats.mean_interval`).  The theory row
   ``theory.influence(L, H, alpha)`` is overlaid with both ``H`` and ``alpha`` fitted
   (:func:`posbias_nb.metrics.fit_theory`).  Headline numbers, each computed **per window** and
   summarized over windows with a *t* interval (ratios on the log scale,
   :func:`posbias_nb.experiments.retrieval.ratio_interval`):

   * ``ptv`` -- the robust peak-to-valley (:func:`posbias_nb.metrics.robust_peak_to_valley`,
     ``ends = 0.02``);
   * ``valley`` -- where the valley sits, as a fraction of the context (its position / L);
   * ``primacy`` and ``recency`` -- the first and the last token's influence over the median of
     the pre-declared middle (:func:`posbias_nb.metrics.regions`), as in
     :func:`~posbias_nb.metrics.profile_summary`;
   * ``change_*`` -- trained over born, paired by window (the same token ids where the
     tokenizer allows; ``meta["paired_ids"]`` says whether they were).

2. **Structural prediction** (chapter :ref:`ch-prediction`, :eq:`eq-pred-measured`).  The
   measured :math:`\lambda_t` and kernels (:func:`posbias_nb.measure.capture`, hooks), the
   residual-aware rollout (:func:`posbias_nb.measure.predict`, ``"residual"``, and the
   attention-only rollout for contrast) against the measured profile: Spearman and :math:`W_1`
   with bootstrap intervals over windows (:func:`posbias_nb.metrics.prediction_scores`), at
   ``min(L, STRUCTURAL_MAX)`` tokens (the kernels take ``T L^2`` floats).  An architecture the
   hooks do not know gets the hooks' own one-line reason instead of numbers.

3. **The task** (chapter *From prior to behaviour*).  Key-value retrieval
   (:func:`posbias_nb.experiments.retrieval.retrieval_run`): accuracy (Wilson) and answer
   log-probability (*t* over examples) by gold position, the pre-declared edge-vs-middle
   contrasts with Holm's correction (:func:`~posbias_nb.experiments.retrieval.contrast_family`),
   and a depth x length heatmap as needle-in-a-haystack tools draw it (prompt lengths up to
   about ``0.85 L``).

4. **Span view**.  The influence on the answer position of each prompt of one example
   (:func:`~posbias_nb.experiments.retrieval.retrieval_link`, hidden-state prior), summed over
   every key-value pair (:func:`posbias_nb.measure.span_profile`): the prior read at the unit the
   task retrieves.

5. **Summary**: one sentence per pre-declared claim, its verdict word from
   :func:`posbias_nb.stats.decide` and its numbers from the sections above; no word is typed
   by hand.  Each claim shows the interval its verdict reads: 95%, or for the two retrieval
   contrasts the t interval at Holm's step-down level.

Everything is cached (:mod:`posbias_nb.cache`): each measurement under its own key, and the
report's numbers under one key of every argument, so a second run that only writes elsewhere
reads them back and only draws the figures.  :func:`write_report` writes ``index.html``
(self-contained: figures as base64 PNG data URIs, no script, no external resource) and
``report.json``; every headline number on the page carries ``data-key`` and ``data-value``
attributes that name its place in ``report.json``.
"""
from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import os
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np

from .. import __version__, cache, metrics, models, stats
from .. import theory as _theory
from ..measure import entry
from ..measure.cached import capture, predict, profile, shared_profile
from ..measure.spans import span_profile
from ..results import Result, plain
from ..tasks.kv_needle import slot_items
from .pages import STYLE, check_out_dir, png
from . import retrieval as _ret
from .design import Design

__all__ = ["report", "write_report", "figures", "SETTINGS", "STRUCTURAL_MAX",
           "headline_items", "DESIGN", "TWINS", "ZERO_REASON"]

_DEF = "report-v7"  # bump when a definition below changes the numbers (v7: reasons of ratios not formed)
_ENDS = 0.02  # robust_peak_to_valley's smoothing share (the chapters' value)
#: Why a report under a calibration file shows the unpatched profile in section 1.
CALIBRATION_TEXT = ("the attention calibration reweights the attention on a prompt's documents "
                    "only; the offline text windows of this section have none, so their "
                    "profile under it is the unpatched one, exactly (not measured again)")
#: Why a report under a remedy has no structural section.
REMEDY_STRUCTURAL = ("the residual-aware rollout models the unpatched attention, so under a "
                     "remedy it is not computed")

#: Sizes of a report: ``quick`` (about 3 minutes for SmolLM2-135M at L = 512 on 2 cores) and
#: ``full`` (the default, about 15).
SETTINGS = {
    "quick": dict(windows=8, probes=2, capture_batch=2, positions=5, examples=4,
                  heat_examples=2, heat_lengths=3, n_boot=500),
    "full": dict(windows=16, probes=4, capture_batch=4, positions=7, examples=10,
                 heat_examples=4, heat_lengths=4, n_boot=2000),
}


#: The report's design, locked: the registry's latest entry for "report"
#: (:mod:`posbias_nb.experiments.design`): its sizes and the constants its claims use.
DESIGN = Design("report", {
    "settings": {k: dict(v) for k, v in SETTINGS.items()},
    "ends": _ENDS,
    "structural_max": 1024,
    # the random-init twins: initialisations seed, seed + 1, ..., on the same windows
    "twins": 3,
    # "ranks positions like the measured profile": a strong rank agreement, not rho > 0
    "rank_threshold": 0.5,
    # the task's sign-flip contrasts are testable only if their smallest p can pass Holm
    "alpha": 0.05,
})
TWINS = DESIGN["twins"]


# --------------------------------------------------------------------------------------------
# Helpers: intervals as dicts


def _iv(t) -> dict:
    e, lo, hi = (float(v) for v in t)
    return {"estimate": e, "low": lo, "high": hi}


def _t(iv: dict) -> tuple:
    return iv["estimate"], iv["low"], iv["high"]


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:  # pragma: no cover
        return "absent"


# --------------------------------------------------------------------------------------------
# 1. Born vs trained


def _profiles(model, weights: str, length: int, s: dict, seed: int, progress: bool,
              init_seed=None) -> dict:
    """Per-window profiles of ``model`` with ``weights``: a packaged zoo model through
    :func:`shared_profile` (its own tokenizer for both weights), anything else through
    :func:`profile` (a directory's random twin reads the directory's tokenizer);
    ``init_seed``: another random-init twin on the same windows."""
    name = str(model)
    if name in models.PRETRAINED_NAMES and models.describe(name)["family"] != "bert":
        return shared_profile(name, weights, length, batch=s["windows"], probes=s["probes"],
                              seed=seed, progress=progress, init_seed=init_seed)
    return profile(model, weights=weights, length=length, probes=s["probes"],
                   batch=s["windows"], seed=seed, progress=progress, init_seed=init_seed)


def _per_window(res) -> np.ndarray:
    W = np.asarray(res["per_sequence"], dtype=np.float64)
    return W / W.sum(1, keepdims=True)


def _ratio(n: float, d: float) -> float:
    """``n / d`` of two non-negative influences: 0 where only ``n`` is 0, infinite where only
    ``d`` is, NaN for 0 / 0 (no ratio at all), and never a numpy warning."""
    if d > 0:
        return n / d
    return float("inf") if n > 0 else float("nan")


def _window_stats(W: np.ndarray) -> dict:
    """Per window: robust peak-to-valley, valley position / L, first / middle, last / middle
    (each ratio as :func:`_ratio` forms it where an influence is exactly 0)."""
    L = W.shape[1]
    mid = metrics.regions(L).middle
    out = {"ptv": [], "valley": [], "primacy": [], "recency": []}
    for p in W:
        try:
            r, j = metrics.robust_peak_to_valley(p, _ENDS)
        except ValueError:  # the smoothed profile reaches 0 (beyond a local layer's reach)
            r, j = float("inf"), int(np.argmin(p)) + 1
        m = float(np.median(p[mid]))
        out["ptv"].append(r)
        out["valley"].append(j / L)
        out["primacy"].append(_ratio(float(p[0]), m))
        out["recency"].append(_ratio(float(p[-1]), m))
    return {k: np.array(v) for k, v in out.items()}


_NAN = {"estimate": float("nan"), "low": float("nan"), "high": float("nan")}
#: Why a headline ratio has no interval, when no finer reason is known.
ZERO_REASON = ("the influence is exactly 0 over part of the context (beyond the reach of "
               "sliding-window or chunked layers), so this ratio cannot be formed")
#: The two influences of each headline ratio, for the reason a ratio cannot be formed.
_PARTS = {"ptv": ("the peak-to-valley ratio", "the peak", "the valley"),
          "primacy": ("first / middle", "the first token", "the middle's median"),
          "recency": ("last / middle", "the last token", "the middle's median")}


def unformed_reason(k: str, values) -> str | None:
    """Why the ratio ``k`` (``"ptv"``, ``"primacy"``, ``"recency"``) has no log-scale interval
    over ``values`` (its per-window values, as :func:`_ratio` forms them), or None if every
    value is positive and finite.  Counts the windows where the numerator is exactly 0 (ratio
    0), the denominator (infinite) or both (0 / 0).

    Examples
    --------
    >>> unformed_reason("primacy", [0.0, 0.0, 2.0]).split(":")[0]
    'first / middle cannot be formed'
    >>> unformed_reason("primacy", [1.5, 2.0]) is None
    True
    """
    v = np.asarray(values, dtype=float).ravel()
    zero, inf, nan = int(np.sum(v == 0)), int(np.sum(np.isposinf(v))), int(np.sum(np.isnan(v)))
    if zero + inf + nan == 0:
        return None
    name, num, den = _PARTS[k]
    n = v.size
    parts = []
    if zero:
        parts.append(f"{num} has influence exactly 0 in {zero} of {n} windows (a ratio of 0, "
                     "which has no logarithm)")
    if inf:
        parts.append(f"{den} is exactly 0 in {inf} of {n} (an infinite ratio)")
    if nan:
        parts.append(f"both are exactly 0 in {nan} of {n} (0 / 0, no ratio at all)")
    return (f"{name} cannot be formed: " + "; ".join(parts) + ". Positions beyond the reach "
            "of sliding-window or chunked layers have no influence; a shorter --length, within "
            "the layers' reach, gives the ratio")


def _finite_iv(fn, x, k: str | None = None) -> dict:
    x = np.asarray(x, dtype=float)
    why = unformed_reason(k, x) if k in _PARTS else None
    if why is not None:
        return dict(_NAN, reason=why)
    return _iv(fn(x)) if np.all(np.isfinite(x)) and x.size >= 2 else dict(_NAN)


def _headline(ws: dict) -> dict:
    return {"ptv": _finite_iv(_ret.ratio_interval, ws["ptv"], "ptv"),
            "valley": _finite_iv(stats.mean_interval, ws["valley"]),
            "primacy": _finite_iv(_ret.ratio_interval, ws["primacy"], "primacy"),
            "recency": _finite_iv(_ret.ratio_interval, ws["recency"], "recency")}


_RATIOS = ("ptv", "primacy", "recency")


def _two_way(values: np.ndarray, ratio: bool, k: str | None = None, why: str | None = None
             ) -> dict:
    """(twins, windows) values: the two-way interval (on the log scale for ratios); no interval,
    with the reason, where a ratio cannot be formed (``why``, or :func:`unformed_reason`)."""
    v = np.asarray(values, dtype=float)
    if ratio:
        why = why or (unformed_reason(k, v) if k in _PARTS else None)
        if why is not None or not np.all(np.isfinite(v) & (v > 0)):
            return dict(_NAN, reason=why or ZERO_REASON)
        e, lo, hi = stats.two_way_mean_interval(np.log(v))
        return _iv((math.exp(e), math.exp(lo), math.exp(hi)))
    return _iv(stats.two_way_mean_interval(v))


def _twins_headline(stats_by_twin: list) -> dict:
    """The born headline over the twins and windows: each number's interval takes the spread
    across initialisations and across windows (:func:`posbias_nb.stats.two_way_mean_interval`,
    ratios on the log scale)."""
    return {k: _two_way(np.stack([t[k] for t in stats_by_twin]), k in _RATIOS, k)
            for k in ("ptv", "valley", "primacy", "recency")}


def _curve(W: np.ndarray) -> dict:
    iv = [stats.mean_interval(W[:, j]) for j in range(W.shape[1])]
    return {"mean": [v[0] for v in iv], "low": [max(v[1], 0.0) for v in iv],
            "high": [v[2] for v in iv]}


def _change(a: dict, bs: list, k: str) -> dict:
    """Trained over (ratios) or minus (the valley) each twin, window by window, with its
    two-way interval; a ratio of ratios only where both ratios can be formed."""
    if k not in _RATIOS:
        return _two_way(np.stack([a[k] - b[k] for b in bs]), False)
    why = unformed_reason(k, a[k])
    why_b = next((r for r in (unformed_reason(k, b[k]) for b in bs) if r), None)
    if why or why_b:
        return dict(_NAN, reason=f"the {'trained' if why else 'born'} {why or why_b}")
    return _two_way(np.stack([a[k] / b[k] for b in bs]), True, k)


def _layout(model, seed: int) -> dict:
    """The model's attention layout, decided by the behaviour of its random-init twin
    (:func:`posbias_nb.models.model_layout`: kinds and windows from the config, checked row by
    row; sinks from the missing mass at initialization), or the reason it is not known."""
    try:
        m, _, _ = entry.loaded(model, "random", seed)
        lay = models.model_layout(m)
        n = models.attention_layout.check_length(models.config_layout(m.config))
        return {"available": True, "layout": str(lay), "checked_at": n,
                "unverified_layers": models.attention_layout.unverified(lay, n)}
    except ValueError as e:
        return {"available": False, "reason": str(e).strip().splitlines()[0]}


def _layout_row(p: np.ndarray, lay: dict) -> dict:
    """The layout's born row (:func:`posbias_nb.theory.layout_influence`) with alpha fitted on
    the mean profile over the positions the layout reaches."""
    if not lay["available"]:
        return {"available": False, "reason": lay["reason"]}
    layout = _theory.parse_layout(lay["layout"])
    L = p.size
    mask = _theory.log_layout_influence(layout, L, 0.5) > -np.inf
    try:
        a = metrics.fit_layout_alpha(p, layout, mask)
    except ValueError as e:
        return {"available": False, "reason": str(e).strip().splitlines()[0]}
    row = _theory.layout_influence(layout, L, a)
    row = row / row.sum()
    q = p[mask] / p[mask].sum()
    rms = float(np.sqrt(np.mean((np.log(q) - np.log(row[mask] / row[mask].sum())) ** 2)))
    return {"available": True, "layout": lay["layout"], "alpha": a, "rms_log": rms,
            "reachable": int(mask.sum()), "row": row.tolist()}


def _remedied(model, ids, length, s, seed, spec) -> dict:
    """The pretrained ``model``'s per-window influence profiles under the remedy of the remedy
    file ``spec`` (:mod:`posbias_nb.models.remedy_file`), on the windows ``ids`` of the
    unpatched profile, probes seeded by ``seed`` (cached)."""
    from ..measure.jacobian import influence_profile
    from ..models import remedy_file

    info = entry.checked(model, "pretrained", length, s["windows"], seed)
    key = entry.run_key(info, "pretrained", length, s["windows"], seed, definition=_DEF,
                        probes=s["probes"], remedy=_remedy_key(spec),
                        windows_digest=hashlib.sha256(np.ascontiguousarray(
                            ids, dtype=np.int64).tobytes()).hexdigest()[:16])

    def compute():
        m = entry.loaded(model, weights="pretrained", seed=seed)[0]
        remedy_file.check_model(spec, spec["_path"], model=m)  # these very weights
        with models.remedy(m, spec["remedy"], **spec["params"]):
            prof = influence_profile(m, np.asarray(ids), probes=s["probes"], seed=seed)
        return {"per_sequence": prof["per_sequence"], "input_ids": np.asarray(ids)}

    return cache.cached("report-remedy", key, compute)


def _remedy_key(spec) -> dict | None:
    return None if spec is None else {"remedy": spec["remedy"], "params": spec["params"],
                                      "digest": spec["model"]["digest"]}


def _born_trained(model, weights, length, s, seed, n_layers, progress,
                  spec=None) -> tuple[dict, dict]:
    depths = range(1, max(2 * n_layers, 8) + 1)
    out: dict = {"windows": s["windows"], "probes": s["probes"], "ends": _ENDS}
    out["layout"] = _layout(model, seed)
    W = {}
    ids = {}
    twins = []
    for w in (["pretrained", "random"] if weights == "pretrained" else ["random"]):
        res = _profiles(model, w, length, s, seed, progress)
        if w == "pretrained" and spec is not None:
            plain_w = _per_window(res)
            out["unpatched"] = {"curve": _curve(plain_w),
                                "headline": _headline(_window_stats(plain_w))}
            if spec["remedy"] == "attention-calibration":
                out["remedy_note"] = CALIBRATION_TEXT  # the profile is the unpatched one
            else:
                res = _remedied(model, np.asarray(res["input_ids"]), length, s, seed, spec)
        W[w] = _per_window(res)
        ids[w] = np.asarray(res["input_ids"])
        if w == "random":  # more initialisations, the same windows and probes
            twins = [W[w]] + [_per_window(_profiles(model, w, length, s, seed, progress,
                                                    init_seed=seed + k))
                              for k in range(1, TWINS)]
            W[w] = np.mean(twins, axis=0)
        key = "trained" if w == "pretrained" else "born"
        try:
            fit = metrics.fit_theory(W[w].mean(0), depths)
            theory = {"available": True, "H": fit["H"], "alpha": fit["alpha"],
                      "rms_log": fit["rms_log"], "row": fit["row"].tolist()}
        except ValueError as e:  # e.g. sliding-window layers: influence exactly 0 out of reach
            zeros = int(np.sum(W[w].mean(0) == 0))
            theory = {"available": False, "zeros": zeros,
                      "reason": (f"the full-attention theory row was not fitted: {zeros} of "
                                 f"{W[w].shape[1]} positions have influence exactly 0 (beyond "
                                 "the reach of sliding-window or chunked layers), which no "
                                 "power of the Cesaro matrix gives" if zeros else
                                 str(e).strip().splitlines()[0])}
        head = _headline(_window_stats(W[w])) if w == "pretrained" else \
            _twins_headline([_window_stats(t) for t in twins])
        out[key] = {"curve": _curve(W[w]), "headline": head, "theory": theory,
                    "layout_theory": _layout_row(W[w].mean(0), out["layout"])}
        if w == "random":
            out[key]["twins"] = len(twins)
    if weights == "pretrained":
        a = _window_stats(W["pretrained"])
        bs = [_window_stats(t) for t in twins]
        out["change"] = {  # trained minus (or over) each twin, window by window
            k: _change(a, bs, k) for k in ("ptv", "valley", "primacy", "recency")}
        out["paired_ids"] = bool(np.array_equal(ids["pretrained"], ids["random"]))
    return out, W


# --------------------------------------------------------------------------------------------
# 2. The structural prediction


#: The longest context of the structural section: the captured kernels take T x L x L floats
#: (SmolLM2 at 1024 tokens: 0.25 GB in float64), so longer reports compare the rollout with a
#: profile measured at this length.
STRUCTURAL_MAX = 1024


def _structural(model, weights, length, s, seed, W, progress=False) -> dict:
    Ls = min(int(length), STRUCTURAL_MAX)
    try:
        cap = capture(model, weights=weights, length=Ls, batch=s["capture_batch"], seed=seed)
    except ValueError as e:  # the hooks do not know this architecture (measure.hooks)
        return {"available": False,
                "reason": str(e).strip().splitlines()[0] if str(e).strip() else "ValueError"}
    if Ls != length:
        W = _per_window(_profiles(model, weights, Ls, s, seed, progress))
    preds = {"residual": predict(cap, "residual"), "attention": predict(cap, "attention")}
    sc = metrics.prediction_scores(W, preds, pairs=[("attention", "residual")],
                                   n_boot=s["n_boot"], seed=seed)
    return {"available": True, "batch": s["capture_batch"], "length": Ls,
            "lambda": [float(v) for v in cap["lam"]],
            "prediction": {k: [float(x) for x in v] for k, v in preds.items()},
            "spearman": {m: _iv(sc["rho", m]) for m in preds},
            "w1": {m: _iv(sc["w1", m]) for m in preds},
            "w1_gain": _iv(sc["dw1", "attention", "residual"])}


# --------------------------------------------------------------------------------------------
# 3. The task, 4. the span view


def _retrieval_length(length: int) -> int:
    return max(2, int(0.85 * length))


def _too_short(model, weights, length: int, L: int, E: int, seed: int, reason: str) -> str:
    """The reason the task did not run, in the user's numbers: the ``--length`` asked for, the
    prompt length it leaves, and the shortest ``--length`` whose prompts hold 3 gold positions
    (found by building prompts only, up to the model's context)."""
    if "too small" not in reason:
        return reason
    top = entry.checked(model, weights, 16, 1, seed)["max_length"] or 1 << 16

    def fits(n):
        return _ret.prompt_problem(model, "kv", 3, E, _retrieval_length(n), seed, weights) is None

    lo, hi = int(length), None
    n = int(length)
    while n < top:
        n = min(2 * n, top)
        if fits(n):
            hi = n
            break
        lo = n
    head = (f"--length {length} leaves {L} tokens for its prompts (0.85 L): {reason}")
    if hi is None:
        return f"{head}; no --length up to the model's context ({top}) holds 3 gold positions"
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return f"{head}; the task needs --length {hi} or more"


def _retrieval(model, P, E, L, seed, progress, weights, remedy_path=None) -> dict:
    """:func:`~posbias_nb.experiments.retrieval.retrieval_run`, or with a remedy file
    :func:`~posbias_nb.experiments.inference.retrieval_remedy_run` (the same columns, every
    prompt scored under the remedy from its last row)."""
    if remedy_path is None:
        return _ret.retrieval_run(model, task="kv", positions=P, examples=E, length=L,
                                  seed=seed, progress=progress, weights=weights)
    from .inference import retrieval_remedy_run

    return retrieval_remedy_run(model, None, task="kv", positions=P, examples=E, length=L,
                                seed=seed, weights=weights, progress=progress,
                                file=remedy_path)


def _task(model, weights, length, s, seed, progress, remedy_path=None) -> dict:
    L = _retrieval_length(length)
    E = s["examples"]
    run = None
    for P in dict.fromkeys((s["positions"], 3)):  # a short context holds 3 slots, not 5 or 7
        try:
            run = _retrieval(model, P, E, L, seed, progress, weights, remedy_path)
            break
        except ValueError as e:  # a context too short for P pairs, prompts beyond the context
            reason = str(e).strip().splitlines()[0]
    if run is None:
        return {"available": False, "requested_positions": s["positions"],
                "reason": _too_short(model, weights, length, L, E, seed, reason)}
    requested = s["positions"]
    s = dict(s, positions=P)
    out = {"available": True, "length": L, "positions": P, "examples": E,
           "requested_positions": requested,
           "n_items": run["meta"]["n_items"],
           "prompt_tokens_mean": run["meta"]["prompt_tokens_mean"]}
    for k in ("depth", "item", "accuracy", "accuracy_low", "accuracy_high", "logprob",
              "logprob_low", "logprob_high"):
        out[k] = run[k]
    mats = _ret.outcome_matrices(run)
    if P >= 3 and E >= 2:
        fam = _ret.contrast_family(_ret.region_differences(mats["logprob"]), seed=seed)
        out["contrasts"] = {k: {"interval": _iv(v["interval"]), "adjusted": _iv(v["adjusted"]),
                                "level": v["level"], "p_holm": v["p_holm"],
                                "verdict": v["verdict"]} for k, v in fam.items()}
    lengths = sorted({int(round(x)) for x in np.geomspace(max(L / 4, 2), L, s["heat_lengths"])})
    heat = {"lengths": [], "accuracy": [], "logprob": [], "skipped": []}
    hE = min(s["heat_examples"], E)
    for n in lengths:
        if n == L:  # examples 0..hE-1 of the main run are those of a run with hE examples
            heat["lengths"].append(n)
            heat["accuracy"].append(np.nanmean(mats["accuracy"][:hE], 0).tolist())
            heat["logprob"].append(np.nanmean(mats["logprob"][:hE], 0).tolist())
            continue
        try:
            r = _retrieval(model, P, hE, n, seed, progress, weights, remedy_path)
        except ValueError as e:
            heat["skipped"].append({"length": n, "reason": str(e).strip().splitlines()[0]})
            continue
        heat["lengths"].append(n)
        heat["accuracy"].append(r["accuracy"])
        heat["logprob"].append(r["logprob"])
    heat["examples"] = hE
    out["heatmap"] = heat
    if remedy_path is None:  # the span view is the unpatched model's Jacobian on the prompts
        out["spans"] = _span_view(model, weights, L, s, seed, progress)
    return out


def _user_task(model, weights, path, documents, s, seed) -> dict:
    """Section 3 on the user's task file (``posbias task``, :mod:`posbias_nb.experiments.task`):
    the same curves and the same pre-declared contrasts (first and last gold slot against the
    middle region, log p, Holm), examples as the unit; no heatmap and no span view."""
    from . import task as _task_mod

    E = s["examples"]
    try:
        run = _task_mod.task_run(model, path, documents=documents, examples=E, seed=seed,
                                 weights=weights)
    except ValueError as err:  # e.g. prompts beyond the context of this model
        return {"available": False, "kind": "file", "file": Path(path).name,
                "reason": str(err).strip().splitlines()[0]}
    meta = run["meta"]
    docs = [i for i, st in enumerate(run["setting"]) if st == "documents"]
    k = meta.get("documents", meta.get("keys"))
    gold = [int(run["gold_document"][i]) for i in docs]
    out = {"available": True, "kind": "file", "file": Path(path).name, "format": meta["format"],
           "unit": "record" if meta["format"] == "liu-kv" else "document",
           "examples": meta["examples"], "positions": len(docs), "documents": k,
           "gold_documents": gold, "depth": [(g - 1) / (k - 1) for g in gold],
           "prompt_tokens_max": meta["prompt_tokens_max"]}
    for c in ("accuracy", "accuracy_low", "accuracy_high", "logprob", "logprob_low",
              "logprob_high"):
        out[c] = [float(run[c][i]) for i in docs]
    out["references"] = {run["setting"][i]: {c: float(run[c][i]) for c in (
        "accuracy", "accuracy_low", "accuracy_high", "logprob", "logprob_low", "logprob_high")}
        for i in range(len(run["setting"])) if run["setting"][i] != "documents"}
    out["outcomes"] = run["outcomes"]
    lines = sorted({r["example_line"] for r in run["examples"]})
    recs = [r for r in run["examples"] if r["setting"] == "documents"]
    M = _ret.as_matrix([lines.index(r["example_line"]) for r in recs],
                       [gold.index(r["gold_document"]) for r in recs],
                       [r["logprob"] for r in recs])
    if M.shape[1] >= 3 and M.shape[0] >= 2:
        fam = _ret.contrast_family(_ret.region_differences(M), seed=seed)
        out["contrasts"] = {c: {"interval": _iv(v["interval"]), "adjusted": _iv(v["adjusted"]),
                                "level": v["level"], "p_holm": v["p_holm"],
                                "verdict": v["verdict"]} for c, v in fam.items()}
    return out


def _pair_spans(model, weights, L, P, seed) -> list:
    """The token spans of every pair in each prompt of example 0 (cached: no model load on a
    second run)."""
    params = dict(_ret.run_params(model, "kv", P, 1, L, seed, weights), what="pair_spans")

    def compute():
        prompts, _ = _ret.prompts_for(model, "kv", P, 1, L, seed, weights)
        S = np.array([r["pair_spans"] for r in prompts["records"]], dtype=np.int64)
        return {"spans": S}

    return cache.cached("report-spans", params, compute)["spans"]


def _span_view(model, weights, L, s, seed, progress) -> dict:
    P = s["positions"]
    link = _ret.retrieval_link(model, task="kv", positions=P, examples=1, length=L, seed=seed,
                               weights=weights, prior="hidden", probes=s["probes"],
                               progress=progress)
    spans = _pair_spans(model, weights, L, P, seed)
    ends = np.cumsum(link["profile_len"])
    shares, gold_share, gold_item = [], [], []
    items = []
    for i, (e, n) in enumerate(zip(ends, link["profile_len"])):
        row = np.asarray(link["profile_flat"][e - n:e], dtype=np.float64)
        sh = span_profile(row, [tuple(x) for x in spans[i]])
        shares.append(sh.tolist())
        k = int(link["gold_index"][i])
        items.append(k)
    item_of_slot = slot_items(len(spans[0]), P)
    for i, k in enumerate(items):
        gold_item.append(int(item_of_slot[k]))
        gold_share.append(shares[i][int(item_of_slot[k])])
    return {"shares": shares, "gold_slot": items, "gold_item": gold_item,
            "gold_share": gold_share, "n_pairs": int(len(spans[0])),
            "prior": "hidden", "probes": s["probes"]}


# --------------------------------------------------------------------------------------------
# 5. Summary


def _claims(data: dict) -> list[dict]:
    """The pre-declared claims, each with its interval and :func:`stats.decide` verdict."""
    bt = data["born_trained"]
    out = []

    def add(key, text, iv, threshold):
        if not all(math.isfinite(v) for v in _t(iv)):
            untestable(key, text, iv, iv.get("reason", ZERO_REASON))
            return
        out.append({"key": key, "claim": text, "interval": iv, "level": 0.95,
                    "threshold": threshold, "verdict": stats.decide(_t(iv), threshold)})

    def untestable(key, text, iv, why):
        out.append({"key": key, "claim": text, "interval": iv, "level": 0.95,
                    "threshold": 0.0, "verdict": "not testable", "reason": why})

    b = bt["born"]["headline"]
    add("born_primacy", "At initialization the first token outweighs the middle "
        "(first / middle median > 1)", b["primacy"], 1.0)
    add("born_recency", "At initialization the last token outweighs the middle "
        "(last / middle median > 1)", b["recency"], 1.0)
    if "trained" in bt:
        t = bt["trained"]["headline"]
        add("trained_primacy", "The trained model's first token outweighs the middle",
            t["primacy"], 1.0)
        add("trained_recency", "The trained model's last token outweighs the middle",
            t["recency"], 1.0)
        add("change_ptv", "Pretraining deepens the valley (peak-to-valley trained / born > 1)",
            bt["change"]["ptv"], 1.0)
    st = data["structural"]
    if st["available"]:
        r = DESIGN["rank_threshold"]
        add("rollout_spearman", "The residual-aware rollout ranks positions like the measured "
            f"profile (Spearman > {r:g})", st["spearman"]["residual"], r)
    tk = data["task"]
    if tk["available"] and "contrasts" in tk:
        E = int(tk["examples"])
        p_min = 2.0 ** (1 - E)  # the smallest two-sided p of a sign-flip test of E examples
        first_level = DESIGN["alpha"] / 2  # Holm's first step over the two contrasts
        for k, what in (("first", "first"), ("last", "last")):
            c = tk["contrasts"][k]
            text = (f"Retrieval log-probability is higher with the gold "
                    f"{tk.get('unit', 'pair')} {what} than in the middle (Holm-adjusted)")
            if p_min >= first_level:
                untestable(f"task_{k}", text, c["adjusted"],
                           f"not testable with {E} examples: the smallest p a sign-flip test "
                           f"of {E} examples can give is {p_min:.3g}, not below Holm's first "
                           f"level {first_level:g} (run without --quick for more examples)")
                continue
            out.append({"key": f"task_{k}", "claim": text,
                        "interval": c["adjusted"], "level": c["level"], "threshold": 0.0,
                        "verdict": c["verdict"]})
    return out


def _fmt(v) -> str:
    return f"{v:.3g}"


def _pct(level) -> str:
    return f"{100 * level:.4g}%"


def _summary(data: dict, claims: list) -> str:
    """One sentence per claim: the claim, its verdict word from :func:`stats.decide` and its
    numbers; then what could not be measured.  Nothing here is typed about the results."""
    m = data["meta"]
    parts = [f"{m['model']}, {m['weights']} weights, L = {m['length']}."]
    for c in claims:
        iv = c["interval"]
        if c["verdict"] == "not testable" and c.get("reason"):
            parts.append(f"{c['claim']}: {_options_as_code(c['reason'])}.")
            continue
        parts.append(f"{c['claim']}: {c['verdict']} ({_fmt(iv['estimate'])}, "
                     f"{_pct(c['level'])} interval {_fmt(iv['low'])} to {_fmt(iv['high'])}).")
    if "twins" in data["born_trained"].get("born", {}):
        parts.append(f"Born is the mean of {data['born_trained']['born']['twins']} random "
                     "initialisations; its intervals take the spread across them and across "
                     "windows.")
    st = data["structural"]
    if not st["available"]:
        parts.append(f"The structural prediction is not available for this architecture: "
                     f"{st['reason']}." if st["reason"] != REMEDY_STRUCTURAL else
                     f"The structural prediction is left out: {st['reason']}.")
    rem = m.get("remedy")
    if rem:
        parts.append(f"Everything trained above is measured under the remedy {rem['remedy']} "
                     f"of {rem['file']} ({', '.join(f'{k}={v}' for k, v in rem['params'].items())})"
                     "." + (f" In section 1, {CALIBRATION_TEXT}." if rem["remedy"] ==
                            "attention-calibration" else ""))
    if not rem:
        parts.append(_fix_advice(claims, m["model_argument"]))
    if not data["task"]["available"]:
        what = (f"The task on {data['task']['file']}" if data["task"].get("kind") == "file"
                else "The retrieval task")
        parts.append(f"{what} did not run: {data['task']['reason']}.")
    return " ".join(parts)


def _options_as_code(text: str) -> str:
    """Command options in prose (``--quick``) as code spans, so that a page's smart quotes do
    not turn their hyphens into a dash; options already in a code span are left alone."""
    import re

    parts = re.split(r"(`[^`]*`)", str(text))
    return "".join(p if p.startswith("`") else re.sub(r"(?<![\w`-])(--[a-z][\w-]*)", r"`\1`", p)
                   for p in parts)


def _code_spans(escaped: str) -> str:
    """Backtick spans of already escaped text as ``<code>`` (the summary's commands)."""
    import re

    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


def fix_command(model_argument: str) -> str:
    """The ``posbias fix`` command the summary suggests, as one would type it (ASCII hyphens,
    the model argument quoted for a POSIX shell where it needs quoting)."""
    import shlex

    return (f"posbias fix --model {shlex.quote(str(model_argument))} --data YOUR_FILE "
            "--out DIR")


def _fix_advice(claims: list, model_argument: str) -> str:
    """The summary's last sentence: what the claims say about the middle, and the command that
    searches a remedy.  It says the middle is lost only where a task claim holds (the task is
    what loses answers); an influence profile that favours the ends, with the task claims not
    testable or not run, says only that."""
    by = {c["key"]: c["verdict"] for c in claims}
    cmd = f"`{fix_command(model_argument)}`"
    task = [k for k in ("task_first", "task_last") if by.get(k) == "holds"]
    ends = [k for k in ("trained_primacy", "trained_recency") if by.get(k) == "holds"]
    if task:
        which = " and ".join({"task_first": "first", "task_last": "last"}[k] for k in task)
        return (f"The retrieval task loses the middle here (its {which} position beats the "
                f"middle): {cmd} chooses an inference-time remedy on part of your own examples "
                "and judges it on the rest.")
    if ends:
        which = " and ".join({"trained_primacy": "first", "trained_recency": "last"}[k]
                             for k in ends)
        tested = [k for k in ("task_first", "task_last") if k in by]
        why = ("its retrieval tests did not show the middle lost" if tested and all(
            by[k] not in ("not testable",) for k in tested) else
            "whether answers in the middle are lost was not tested here")
        return (f"The trained influence favours the {which} token over the middle, but {why}; "
                f"{cmd} measures that on your own examples and searches a remedy.")
    return (f"Nothing above shows the middle lost; {cmd} measures it on your own examples and "
            "searches a remedy if it is.")


def headline_items(data: dict) -> list[tuple[str, str, float]]:
    """``(key, label, value)`` of every headline number the page shows, ``key`` the dotted
    path of the value in ``report.json`` (what the page's ``data-key`` attributes carry)."""
    out = []
    bt = data["born_trained"]
    labels = {"ptv": "robust peak-to-valley", "valley": "valley position / L",
              "primacy": "primacy arm (first / middle)", "recency": "recency arm (last / middle)"}
    for who in ("trained", "born", "change"):
        if who not in bt:
            continue
        h = bt[who] if who == "change" else bt[who]["headline"]
        base = f"born_trained.{who}" + ("" if who == "change" else ".headline")
        for k, lab in labels.items():
            for part in ("estimate", "low", "high"):
                out.append((f"{base}.{k}.{part}", f"{who}: {lab} ({part})", h[k][part]))
    st = data["structural"]
    if st["available"]:
        for what in ("spearman", "w1"):
            for m in ("residual", "attention"):
                for part in ("estimate", "low", "high"):
                    out.append((f"structural.{what}.{m}.{part}", f"{what} {m} ({part})",
                                st[what][m][part]))
    return out


# --------------------------------------------------------------------------------------------
# The entry point


def report(model, weights: str = "pretrained", length: int = 512, quick: bool = False,
           seed: int = 0, progress: bool = False, task_data=None,
           task_documents: int | None = None, remedy_file=None) -> Result:
    r"""The position-bias report of one model (module docstring: the sections and statistics).

    Parameters
    ----------
    model : str or path
        A zoo name, a local Hugging Face model directory, or a hub id ``org/name`` (read from
        the local hub cache when ``HF_HUB_OFFLINE=1``, :func:`posbias_nb.models.hub_snapshot`).
    weights : {"pretrained", "random"}
        The weights reported on.  ``"random"``: the model *is* its random-init twin, so section
        1 has no trained profile and no change.
    length : int
        Context length ``L`` of the profiles (up to the model's context); the retrieval prompts
        are about ``0.85 L`` tokens.
    quick : bool
        The :data:`SETTINGS` ``"quick"`` sizes (8 windows, 2 probes, 5 gold positions x 4
        examples) instead of ``"full"``.
    seed : int
        Seeds the windows, the probes, the random twin, the prompts and the bootstrap.
    progress : bool
        A bar per stage on stderr.
    task_data : path or None
        A task file (:func:`posbias_nb.tasks.qa.read_task_file`: Liu et al.'s QA or key-value
        format, or the plain one): section 3 is then :func:`posbias_nb.experiments.task.task_run`
        on it (the settings' number of examples, ``task_documents`` documents) in place of the
        synthetic key-value task, with the same claims.  Checked before anything is measured.
    remedy_file : path or None
        A remedy file (``posbias fix``, :mod:`posbias_nb.models.remedy_file`): the report of the
        pretrained model patched by it.  Section 1's trained profile is measured under the
        remedy on the same windows (the unpatched profile shown beside it), section 3's
        prompts are scored under it
        (:func:`~posbias_nb.experiments.inference.retrieval_remedy_run`); the structural
        prediction and the span view describe the unpatched model and are left out.  Refused before any measurement on a model whose
        fingerprint differs, after loading on other weights.

    Returns
    -------
    Result
        ``born_trained``, ``structural``, ``task``, ``claims``, ``summary`` (nested dicts, all
        JSON), the CSV columns ``position``, ``influence`` (the reported model's mean profile,
        normalized) with ``influence_low``/``influence_high``, and ``meta``.  Same arguments,
        same numbers.

    Raises
    ------
    ValueError
        Unknown model or hub id not cached offline, a directory without ``config.json``,
        pretrained weights not installed, a length < 16 or beyond the model's context, a
        negative seed.
    """
    from tqdm import tqdm

    s = dict(SETTINGS["quick" if quick else "full"])
    info = entry.checked(model, weights, length, s["windows"], seed)
    if int(length) < 16:
        raise ValueError(f"length must be at least 16 for a report, got {length!r}")
    length = int(length)
    extra = {}
    spec = None
    if remedy_file is not None:
        from ..models import remedy_file as _rf

        if weights != "pretrained":
            raise ValueError("--remedy-file reports the pretrained model the remedy was chosen "
                             f"for, not weights={weights!r}")
        if task_data is not None:
            raise ValueError("--remedy-file with --task-data is not supported: posbias fix "
                             "already scores the remedy on your file (its index.html)")
        spec = _rf.read(remedy_file)
        if spec["remedy"] in _rf.PROMPT_REMEDIES:
            from ..models.remedies import prompt_remedy_refused

            raise ValueError(prompt_remedy_refused(remedy_file, spec["remedy"]))
        _rf.check_model(spec, remedy_file, name=model)  # by fingerprint, before any load
        spec["_path"] = str(remedy_file)
        extra["remedy"] = _remedy_key(spec)
    if task_data is not None:
        from ..models.weights import file_sha256
        from . import task as _task_mod

        _task_mod.prepare(task_data, task_documents, None, s["examples"], None, seed)  # checks
        extra = {"task_data": file_sha256(Path(task_data)),
                 "task_documents": task_documents}
    key = entry.run_key(info, weights, length, s["windows"], seed, definition=_DEF,
                        quick=bool(quick), settings=s, **extra)
    hit = cache.load("report", key)
    if hit is not None:
        data = json.loads(str(hit["json"]))
    else:
        t0 = time.perf_counter()
        bar = tqdm(total=4, disable=not progress, file=sys.stderr, leave=False, unit="stage")
        try:
            bar.set_description("report: born vs trained")
            bt, W = _born_trained(model, weights, length, s, seed, info["n_layers"], progress,
                                  spec)
            bar.update()
            bar.set_description("report: structural prediction")
            measured = W["pretrained"] if weights == "pretrained" else W["random"]
            st = _structural(model, weights, length, s, seed, measured, progress) \
                if spec is None else {"available": False, "reason": REMEDY_STRUCTURAL}
            bar.update()
            bar.set_description("report: retrieval task and spans")
            tk = _task(model, weights, length, s, seed, progress,
                       None if spec is None else spec["_path"]) if task_data is None else \
                _user_task(model, weights, task_data, task_documents, s, seed)
            bar.update()
        finally:
            bar.close()
        entry.forget()
        meta = {
            "command": "report", "model": info["name"], "model_argument": str(model),
            "hub_id": str(model) if models.is_hub_id(str(model)) and str(model) not in models.ZOO
            and not Path(str(model)).exists() else None,
            "family": info["family"], "n_layers": info["n_layers"],
            "hidden_size": info["hidden_size"], "context": info["max_length"],
            "fingerprint": info["fingerprint"], "weights": weights,
            "twin": "the same configuration, weights='random', torch.manual_seed(seed)",
            "length": length, "seed": int(seed), "quick": bool(quick), "sizes": s,
            "definition": _DEF, "design": DESIGN.hash, "level": 0.95,
            "layout": bt["layout"].get("layout"),
            "remedy": None if spec is None else {"file": Path(spec["_path"]).name,
                                                 **_remedy_key(spec)},
            "warnings": [w for k, w in models.weights.LOAD_WARNINGS.items()
                         if k in (str(model), info.get("pretrained_source"))],
            "intervals": "per position and headline: Student t over windows (ratios on the "
                         "log scale); retrieval accuracy: Wilson; log-probability: t over "
                         "examples; Spearman and W1: bootstrap over windows",
            "versions": {"posbias_nb": __version__, **entry.library_versions(),
                         **{p: _version(p) for p in ("numpy", "scipy", "matplotlib",
                                                      "huggingface_hub")}},
        }
        data = {"meta": meta, "born_trained": bt, "structural": st, "task": tk}
        data["claims"] = _claims(data)
        data["summary"] = _summary(data, data["claims"])
        data = plain(data)
        cache.store("report", key, {"json": np.array(json.dumps(data))},
                    seconds=time.perf_counter() - t0)
    data["summary"] = _summary(data, data["claims"])
    meta = data.pop("meta")
    who = "trained" if "trained" in data["born_trained"] else "born"
    c = data["born_trained"][who]["curve"]
    data.update(position=list(range(1, length + 1)), influence=c["mean"],
                influence_low=c["low"], influence_high=c["high"])
    return Result(data, meta=meta, columns=("position", "influence", "influence_low",
                                            "influence_high"))


# --------------------------------------------------------------------------------------------
# The page


def _figures(data: dict) -> dict:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from .. import plots

    bt = data["born_trained"]
    L = data["meta"]["length"]
    x = np.arange(1, L + 1)
    figs = {}
    fig, ax = plots.figure(width=7.5, height=3.6)
    for i, who in enumerate(("trained", "born")):
        if who not in bt:
            continue
        c = bt[who]["curve"]
        lab = "trained" if who == "trained" else "random-init twin"
        ax.plot(x, c["mean"], color=plots.COLORS[i], label=f"{lab} (mean of "
                f"{bt['windows']} windows)")
        lo = np.asarray(c["low"])
        ax.fill_between(x, np.where(lo > 0, lo, np.nan), c["high"], where=lo > 0,
                        color=plots.COLORS[i], alpha=0.2, lw=0)  # log axis: no band below 0
        th = bt[who]["theory"]
        if th.get("available", True):
            ax.plot(x, th["row"], color=plots.COLORS[i], ls="--", lw=1,
                    label=rf"$N^H$ row, fitted depth H = {th['H']} (the model has "
                          rf"{data['meta']['n_layers']} layers), $\alpha$ = {th['alpha']:.2f} "
                          f"({lab})")
        lt = bt[who].get("layout_theory", {})
        if lt.get("available"):
            r = np.asarray(lt["row"])
            ax.plot(x, np.where(r > 0, r, np.nan), color=plots.COLORS[i], ls=":", lw=1.4,
                    label=rf"layout theory row, $\alpha$ = {lt['alpha']:.2f} ({lab})")
    plots.profile_axes(ax, L, ylabel="influence (share)")
    ax.legend()
    figs["profile"] = png(fig)
    st = data["structural"]
    if st["available"]:
        fig, (a1, a2) = plots.figure(ncols=2, width=8.5, height=3.3)
        lam = st["lambda"]
        a1.plot(range(1, len(lam) + 1), lam, "o-")
        a1.set_xlabel("layer t")
        a1.set_ylabel("lambda_t (attention share)")
        a1.set_ylim(0, 1)
        xs = np.arange(1, st["length"] + 1)
        if st["length"] == L:
            c = bt["trained" if "trained" in bt else "born"]["curve"]
            a2.plot(xs, c["mean"], label="measured")
        a2.plot(xs, st["prediction"]["residual"], label="residual-aware rollout")
        a2.plot(xs, st["prediction"]["attention"], ls=":", label="attention-only rollout")
        plots.profile_axes(a2, st["length"], ylabel="influence (share)")
        r = np.asarray(st["prediction"]["residual"])
        if np.any(r > 0):  # the attention-only row may fall by dozens of decades: clip
            a2.set_ylim(float(r[r > 0].min()) / 100, 2.0 * max(float(r.max()), 1e-300))
        a2.legend()
        figs["structural"] = png(fig)
    tk = data["task"]
    if tk["available"]:
        fig, (a1, a2) = plots.figure(ncols=2, width=8.5, height=3.3)
        d = np.asarray(tk["depth"])
        acc = np.asarray(tk["accuracy"])
        a1.errorbar(d, acc, yerr=[acc - np.asarray(tk["accuracy_low"]),
                                  np.asarray(tk["accuracy_high"]) - acc], fmt="o-", capsize=3)
        a1.set_ylim(-0.02, 1.02)
        a1.set_xlabel("gold position (depth in the prompt)")
        a1.set_ylabel("accuracy (Wilson 95%)")
        lp = np.asarray(tk["logprob"])
        a2.errorbar(d, lp, yerr=[lp - np.asarray(tk["logprob_low"]),
                                 np.asarray(tk["logprob_high"]) - lp], fmt="o-", capsize=3)
        a2.set_xlabel("gold position (depth in the prompt)")
        a2.set_ylabel("answer log-probability (t 95%)")
        figs["task"] = png(fig)
        h = tk.get("heatmap", {"lengths": []})
        if h["lengths"]:
            fig, axes = plots.figure(ncols=2, width=8.5, height=3.3)
            for ax, what, cmap in ((axes[0], "accuracy", "RdYlGn"),
                                   (axes[1], "logprob", "viridis")):
                M = np.asarray(h[what], dtype=float).T  # depth x length
                kw = dict(vmin=0, vmax=1) if what == "accuracy" else {}
                im = ax.imshow(M, aspect="auto", origin="upper", cmap=cmap, **kw)
                ax.set_xticks(range(len(h["lengths"])), [str(n) for n in h["lengths"]])
                ax.set_yticks(range(len(d)), [f"{v:.0%}" for v in d])
                ax.set_xlabel("prompt length (tokens)")
                ax.set_ylabel("gold depth")
                ax.set_title(f"{what}: mean of n = {h['examples']} examples per cell, "
                             "no interval", fontsize=8)
                for (i, j), v in np.ndenumerate(M):
                    ax.text(j, i, f"n={h['examples']}", ha="center", va="center", fontsize=6)
                ax.grid(False)
                fig.colorbar(im, ax=ax)
            figs["heatmap"] = png(fig)
    if tk["available"] and "spans" in tk:
        sp = tk["spans"]
        fig, (a1, a2) = plots.figure(ncols=2, width=8.5, height=3.3)
        mid = len(sp["shares"]) // 2
        sh = np.asarray(sp["shares"][mid])
        cols = [plots.COLORS[1] if j == sp["gold_item"][mid] else plots.COLORS[0]
                for j in range(sh.size)]
        a1.bar(np.arange(1, sh.size + 1), sh, color=cols)
        a1.set_xlabel("key-value pair (gold in red)")
        a1.set_ylabel("share of influence")
        a2.plot(np.asarray(sp["gold_item"]) + 1, sp["gold_share"], "o-")
        a2.set_xlabel("position of the gold pair")
        a2.set_ylabel("gold pair's share")
        figs["spans"] = png(fig)
    return figs


def _num(key: str, v) -> str:
    return (f'<span class="num" data-key="{html.escape(key)}" data-value="{float(v)!r}">'
            f"{_fmt(v)}</span>")


def _iv_cells(key: str, iv: dict) -> str:
    return (f"<td>{_num(key + '.estimate', iv['estimate'])}</td><td>["
            f"{_num(key + '.low', iv['low'])}, {_num(key + '.high', iv['high'])}]</td>")


def _page(data: dict, meta: dict, figs: dict) -> str:
    e = html.escape
    bt, st, tk = data["born_trained"], data["structural"], data["task"]
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>posbias report: {e(meta['model'])}</title>", f"<style>{STYLE}</style>",
           "</head><body>", f"<h1>Position bias of <code>{e(meta['model_argument'])}</code></h1>",
           f'<p class="meta">{e(meta["family"])}, {meta["n_layers"]} layers, width '
           f'{meta["hidden_size"]}; {e(meta["weights"])} weights; L = {meta["length"]}; seed '
           f'{meta["seed"]}; {"quick" if meta["quick"] else "full"} sizes; fingerprint '
           f'{e(str(meta["fingerprint"]))}; posbias_nb {e(meta["versions"]["posbias_nb"])}</p>',
           *([f'<p class="meta" id="remedy">Patched by <code>{e(meta["remedy"]["file"])}</code>: '
              f'{e(meta["remedy"]["remedy"])} {e(json.dumps(meta["remedy"]["params"]))}</p>']
             if meta.get("remedy") else []),
           "<h2>Summary</h2>", f'<p id="summary">{_code_spans(e(data["summary"]))}</p>',
           "<table><tr><th>claim</th><th>estimate</th><th>interval</th><th>level</th>"
           "<th>verdict</th></tr>"]
    for i, c in enumerate(data["claims"]):
        out.append(f"<tr><td>{e(c['claim'])}</td>{_iv_cells(f'claims.{i}.interval', c['interval'])}"
                   f"<td>{_pct(c['level'])}</td>"
                   f'<td class="v-{e(c["verdict"].replace(" ", "-"))}">{e(c["verdict"])}'
                   + (' <span class="meta">('
                      + _code_spans(e(_options_as_code(c["reason"]))) + ")</span>"
                      if c.get("reason") else "") + "</td></tr>")
    out.append("</table>")
    out.append("<h2>1. Born vs trained</h2>")
    out.append(f"<p>Influence of each input position on the last token's final hidden state "
               f"(Jacobian, {bt['probes']} Hutchinson probes), each of {bt['windows']} text "
               "windows normalized to sum 1; the band is the per-position t 95% interval over "
               "windows (not drawn where its lower end is not above 0: the axis is "
               "logarithmic); dashed: the theory row with H and alpha fitted.</p>")
    out.append(f'<img alt="influence profiles" src="{figs["profile"]}">')
    out.append("<table><tr><th>number</th><th>estimate</th><th>95% interval</th></tr>")
    for key, label, _ in headline_items(data):
        if key.endswith(".estimate") and key.startswith("born_trained"):
            base = key[: -len(".estimate")]
            node = data
            for part in base.split("."):
                node = node[part]
            out.append(f"<tr><td>{e(label.rsplit(' (', 1)[0])}</td>{_iv_cells(base, node)}</tr>")
    out.append("</table>")
    for who in ("trained", "born", "change"):  # the ratios that could not be formed, and why
        h = bt.get(who, {}) if who == "change" else bt.get(who, {}).get("headline", {})
        for k, v in h.items():
            if v.get("reason"):
                out.append(f"<p>{who}, {e(_PARTS.get(k, (k,))[0])}: no interval: "
                           f"{e(v['reason'])}.</p>")
    for who in ("trained", "born"):
        if who in bt:
            th = bt[who]["theory"]
            if not th.get("available", True):
                out.append(f"<p>Theory fit ({who}): not made: {e(th['reason'])}.</p>")
                continue
            out.append(f"<p>Theory fit ({who}): H = {_num(f'born_trained.{who}.theory.H', th['H'])}"
                       f", alpha = {_num(f'born_trained.{who}.theory.alpha', th['alpha'])}, "
                       f"rms log error {_num(f'born_trained.{who}.theory.rms_log', th['rms_log'])}"
                       "</p>")
    lay = bt.get("layout", {})
    if lay.get("available"):
        unv = lay.get("unverified_layers", [])
        note = (f"; {len(unv)} layers have a window or chunk of {lay['checked_at']} tokens or "
                "more, which the check cannot see at its length: those are as the config says"
                if unv else "")
        out.append(f"<p>Attention layout (checked by behaviour on the random-init twin, at "
                   f"{lay.get('checked_at')} tokens{note}): "
                   f"<code>{e(lay['layout'])}</code>.</p>")
    else:
        out.append(f"<p>Attention layout: not known: {e(lay.get('reason', 'not decided'))}.</p>")
    for who in ("trained", "born"):
        lt = bt.get(who, {}).get("layout_theory")
        if lt is None:
            continue
        if lt.get("available"):
            out.append(f"<p>Layout theory row ({who}): alpha = "
                       f"{_num(f'born_trained.{who}.layout_theory.alpha', lt['alpha'])}, rms log "
                       f"error {_num(f'born_trained.{who}.layout_theory.rms_log', lt['rms_log'])}"
                       f" over the {lt['reachable']} positions the layout reaches</p>")
        else:
            out.append(f"<p>Layout theory row ({who}): not made: {e(lt['reason'])}.</p>")
    if "paired_ids" in bt:
        out.append(f"<p>Change = trained / born per window (valley: difference); the twin read "
                   f"{'the same' if bt['paired_ids'] else 'different'} token ids.</p>")
    out.append("<h2>2. Structural prediction</h2>")
    if st["available"]:
        out.append(f"<p>Attention shares lambda_t measured by hooks on {st['batch']} windows of "
                   f"{st['length']} tokens; the rollout rows against the measured profile "
                   "(Spearman and W1 on positions scaled to [0, 1]; bootstrap 95% intervals over "
                   "windows).</p>")
        out.append(f'<img alt="lambda and rollout" src="{figs["structural"]}">')
        out.append("<table><tr><th>prediction</th><th>Spearman</th><th>95%</th><th>W1</th>"
                   "<th>95%</th></tr>")
        for m in ("residual", "attention"):
            out.append(f"<tr><td>{m} rollout</td>{_iv_cells(f'structural.spearman.{m}', st['spearman'][m])}"
                       f"{_iv_cells(f'structural.w1.{m}', st['w1'][m])}</tr>")
        out.append("</table>")
    else:
        out.append(f'<p id="structural-unavailable">Not available for this architecture: '
                   f"{e(st['reason'])}</p>")
    if tk.get("kind") == "file":
        out.append(f"<h2>3. The task: {e(tk['file'])}</h2>")
        if tk["available"]:
            refs = "; ".join(
                f"{name}: accuracy {_fmt(r['accuracy'])} [{_fmt(r['accuracy_low'])}, "
                f"{_fmt(r['accuracy_high'])}], log p {_fmt(r['logprob'])} "
                f"[{_fmt(r['logprob_low'])}, {_fmt(r['logprob_high'])}]"
                for name, r in tk["references"].items())
            out.append(f"<p>{tk['examples']} examples of {e(tk['file'])} ({e(tk['format'])}), "
                       f"{tk['documents']} {tk['unit']}s a prompt, the gold {tk['unit']} at "
                       f"{', '.join(map(str, tk['gold_documents']))} (1-based), prompts of up "
                       f"to {tk['prompt_tokens_max']} tokens (posbias task). Accuracy: greedy "
                       "generation, Liu et al.'s best_subspan_em, Wilson 95%; log-probability "
                       "of the gold answer: t 95% over examples."
                       + (f" Reference lines: {e(refs)}." if refs else "") + "</p>")
            out.append(f'<img alt="task accuracy by gold position" src="{figs["task"]}">')
        else:
            out.append(f"<p>Not run: {e(tk['reason'])}</p>")
        out.append("<h2>4. Span view</h2><p>Not drawn for a task file: it reads the pairs of "
                   "the synthetic key-value prompts.</p>")
        out.append('<p class="meta">Every number: report.json.</p></body></html>')
        return "\n".join(out)
    out.append("<h2>3. The task: key-value retrieval</h2>")
    if tk["available"]:
        fewer = tk.get("requested_positions", tk["positions"]) != tk["positions"]
        out.append(f"<p>{tk['examples']} examples x {tk['positions']} gold positions, prompts "
                   f"of about {tk['prompt_tokens_mean']:.0f} tokens ({tk['n_items']} pairs). "
                   "Accuracy: Wilson 95%; log-probability: t 95% over examples."
                   + (f" The settings ask for {tk['requested_positions']} gold positions; "
                      f"prompts of {tk['length']} tokens hold too few pairs for them, so "
                      f"{tk['positions']} are used." if fewer else "") + "</p>")
        out.append(f'<img alt="retrieval by gold position" src="{figs["task"]}">')
        if "heatmap" in figs:
            out.append(f'<img alt="depth x length heatmap" src="{figs["heatmap"]}">')
            out.append(f"<p>Each heatmap cell is the mean of {tk['heatmap']['examples']} "
                       "examples, shown without an interval: a sketch, not a measurement "
                       "the summary relies on.</p>")
        for sk in tk["heatmap"]["skipped"]:
            out.append(f"<p>Length {sk['length']} skipped: {e(sk['reason'])}</p>")
        if "spans" in figs:
            out.append("<h2>4. Span view</h2><p>Influence on the answer position summed over "
                       "each key-value pair (measure.span_profile), gold pair at the middle "
                       "slot (left) and the gold pair's share by its position (right).</p>")
            out.append(f'<img alt="span view" src="{figs["spans"]}">')
        else:
            out.append("<h2>4. Span view</h2><p>Left out under a remedy: it reads the "
                       "unpatched model's influence on the task's prompts.</p>")
    else:
        out.append(f"<p>Not run: {e(tk['reason'])}</p>")
        out.append("<h2>4. Span view</h2><p>Not run: it reads the influence over the pairs of "
                   "the task's prompts, and the task did not run (above).</p>")
    out.append('<p class="meta">Every number: report.json.</p></body></html>')
    return "\n".join(out)


def figures(result) -> dict:
    """The report's figures as PNG bytes, by name (``profile``, ``structural``, ``task``,
    ``heatmap``, ``spans``; those the result has): what the page embeds, for a notebook to show
    (chapter *Measure your own model*)."""
    obj = result.to_json()
    data = {k: v for k, v in obj.items() if k != "meta"}
    return {k: base64.b64decode(v.split(",", 1)[1])
            for k, v in _figures({**data, "meta": obj["meta"]}).items()}


def write_report(result: Result, directory) -> dict:
    """Write ``index.html`` (self-contained) and ``report.json`` of a :func:`report` result into
    ``directory`` (created if missing).  Returns ``{"html": path, "json": path}``."""
    d = check_out_dir(directory)
    obj = result.to_json()
    data = {k: v for k, v in obj.items() if k != "meta"}
    figs = _figures({**data, "meta": obj["meta"]})
    page = _page(data, obj["meta"], figs)
    jp, hp = d / "report.json", d / "index.html"
    jp.write_text(json.dumps(obj, indent=1, allow_nan=True) + "\n")
    hp.write_text(page, encoding="utf-8")
    return {"html": str(hp), "json": str(jp)}
