"""The report's measurements: the four sections' profiles, predictions and task runs, each cached
under its own key."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from ... import cache, metrics, models
from ... import theory as _theory
from ...measure import entry
from ...measure.cached import capture, predict, profile, shared_profile
from ...measure.spans import span_profile
from ...tasks.kv_needle import slot_items
from ..prompt import retrieval as _ret
from .config import DEFINITION, ENDS, STRUCTURAL_MAX, TWINS
from .statistics import (as_interval, change, curve, headline, per_window, twins_headline,
                         window_stats)
from .words import CALIBRATION_TEXT


def profiles(model, weights: str, length: int, s: dict, seed: int, progress: bool,
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


def layout_of(model, seed: int) -> dict:
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


def layout_row(p: np.ndarray, lay: dict) -> dict:
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


def remedied(model, ids, length, s, seed, spec) -> dict:
    """The pretrained ``model``'s per-window influence profiles under the remedy of the remedy
    file ``spec`` (:mod:`posbias_nb.models.remedy_file`), on the windows ``ids`` of the
    unpatched profile, probes seeded by ``seed`` (cached)."""
    from ...measure.jacobian import influence_profile
    from ...models import remedy_file

    info = entry.checked(model, "pretrained", length, s["windows"], seed)
    key = entry.run_key(info, "pretrained", length, s["windows"], seed, definition=DEFINITION,
                        probes=s["probes"], remedy=remedy_key(spec),
                        windows_digest=hashlib.sha256(np.ascontiguousarray(
                            ids, dtype=np.int64).tobytes()).hexdigest()[:16])

    def compute():
        m = entry.loaded(model, weights="pretrained", seed=seed)[0]
        remedy_file.check_model(spec, spec["_path"], model=m)  # these very weights
        with models.remedy(m, spec["remedy"], **spec["params"]):
            prof = influence_profile(m, np.asarray(ids), probes=s["probes"], seed=seed)
        return {"per_sequence": prof["per_sequence"], "input_ids": np.asarray(ids)}

    return cache.cached("report-remedy", key, compute)


def remedy_key(spec) -> dict | None:
    return None if spec is None else {"remedy": spec["remedy"], "params": spec["params"],
                                      "digest": spec["model"]["digest"]}


def born_trained(model, weights, length, s, seed, n_layers, progress,
                 spec=None) -> tuple[dict, dict]:
    depths = range(1, max(2 * n_layers, 8) + 1)
    out: dict = {"windows": s["windows"], "probes": s["probes"], "ends": ENDS}
    out["layout"] = layout_of(model, seed)
    W = {}
    ids = {}
    twins = []
    for w in (["pretrained", "random"] if weights == "pretrained" else ["random"]):
        res = profiles(model, w, length, s, seed, progress)
        if w == "pretrained" and spec is not None:
            plain_w = per_window(res)
            out["unpatched"] = {"curve": curve(plain_w),
                                "headline": headline(window_stats(plain_w))}
            if spec["remedy"] == "attention-calibration":
                out["remedy_note"] = CALIBRATION_TEXT  # the profile is the unpatched one
            else:
                res = remedied(model, np.asarray(res["input_ids"]), length, s, seed, spec)
        W[w] = per_window(res)
        ids[w] = np.asarray(res["input_ids"])
        if w == "random":  # more initialisations, the same windows and probes
            twins = [W[w]] + [per_window(profiles(model, w, length, s, seed, progress,
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
        head = headline(window_stats(W[w])) if w == "pretrained" else \
            twins_headline([window_stats(t) for t in twins])
        out[key] = {"curve": curve(W[w]), "headline": head, "theory": theory,
                    "layout_theory": layout_row(W[w].mean(0), out["layout"])}
        if w == "random":
            out[key]["twins"] = len(twins)
    if weights == "pretrained":
        a = window_stats(W["pretrained"])
        bs = [window_stats(t) for t in twins]
        out["change"] = {  # trained minus (or over) each twin, window by window
            k: change(a, bs, k) for k in ("ptv", "valley", "primacy", "recency")}
        out["paired_ids"] = bool(np.array_equal(ids["pretrained"], ids["random"]))
    return out, W


def structural(model, weights, length, s, seed, W, progress=False) -> dict:
    Ls = min(int(length), STRUCTURAL_MAX)
    try:
        cap = capture(model, weights=weights, length=Ls, batch=s["capture_batch"], seed=seed)
    except ValueError as e:  # the hooks do not know this architecture (measure.hooks)
        return {"available": False,
                "reason": str(e).strip().splitlines()[0] if str(e).strip() else "ValueError"}
    if Ls != length:
        W = per_window(profiles(model, weights, Ls, s, seed, progress))
    preds = {"residual": predict(cap, "residual"), "attention": predict(cap, "attention")}
    sc = metrics.prediction_scores(W, preds, pairs=[("attention", "residual")],
                                   n_boot=s["n_boot"], seed=seed)
    return {"available": True, "batch": s["capture_batch"], "length": Ls,
            "lambda": [float(v) for v in cap["lam"]],
            "prediction": {k: [float(x) for x in v] for k, v in preds.items()},
            "spearman": {m: as_interval(sc["rho", m]) for m in preds},
            "w1": {m: as_interval(sc["w1", m]) for m in preds},
            "w1_gain": as_interval(sc["dw1", "attention", "residual"])}


def retrieval_length(length: int) -> int:
    return max(2, int(0.85 * length))


def too_short(model, weights, length: int, L: int, E: int, seed: int, reason: str) -> str:
    """The reason the task did not run, in the user's numbers: the ``--length`` asked for, the
    prompt length it leaves, and the shortest ``--length`` whose prompts hold 3 gold positions
    (found by building prompts only, up to the model's context)."""
    if "too small" not in reason:
        return reason
    top = entry.checked(model, weights, 16, 1, seed)["max_length"] or 1 << 16

    def fits(n):
        return _ret.prompt_problem(model, "kv", 3, E, retrieval_length(n), seed, weights) is None

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
    """:func:`~posbias_nb.experiments.prompt.retrieval.retrieval_run`, or with a remedy file
    :func:`~posbias_nb.experiments.remedy.inference.retrieval_remedy_run` (the same columns, every
    prompt scored under the remedy from its last row)."""
    if remedy_path is None:
        return _ret.retrieval_run(model, task="kv", positions=P, examples=E, length=L,
                                  seed=seed, progress=progress, weights=weights)
    from ..remedy.inference import retrieval_remedy_run

    return retrieval_remedy_run(model, None, task="kv", positions=P, examples=E, length=L,
                                seed=seed, weights=weights, progress=progress,
                                file=remedy_path)


def kv_task(model, weights, length, s, seed, progress, remedy_path=None) -> dict:
    L = retrieval_length(length)
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
                "reason": too_short(model, weights, length, L, E, seed, reason)}
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
        out["contrasts"] = {k: {"interval": as_interval(v["interval"]), "adjusted": as_interval(v["adjusted"]),
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
        out["spans"] = span_view(model, weights, L, s, seed, progress)
    return out


def file_task(model, weights, path, documents, s, seed) -> dict:
    """Section 3 on the user's task file (``posbias task``, :mod:`posbias_nb.experiments.prompt.user_task`):
    the same curves and the same pre-declared contrasts (first and last gold slot against the
    middle region, log p, Holm), examples as the unit; no heatmap and no span view."""
    from ..prompt import user_task as _task_mod

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
        out["contrasts"] = {c: {"interval": as_interval(v["interval"]), "adjusted": as_interval(v["adjusted"]),
                                "level": v["level"], "p_holm": v["p_holm"],
                                "verdict": v["verdict"]} for c, v in fam.items()}
    return out


def pair_spans(model, weights, L, P, seed) -> list:
    """The token spans of every pair in each prompt of example 0 (cached: no model load on a
    second run)."""
    params = dict(_ret.run_params(model, "kv", P, 1, L, seed, weights), what="pair_spans")

    def compute():
        prompts, _ = _ret.prompts_for(model, "kv", P, 1, L, seed, weights)
        S = np.array([r["pair_spans"] for r in prompts["records"]], dtype=np.int64)
        return {"spans": S}

    return cache.cached("report-spans", params, compute)["spans"]


def span_view(model, weights, L, s, seed, progress) -> dict:
    P = s["positions"]
    link = _ret.retrieval_link(model, task="kv", positions=P, examples=1, length=L, seed=seed,
                               weights=weights, prior="hidden", probes=s["probes"],
                               progress=progress)
    spans = pair_spans(model, weights, L, P, seed)
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
