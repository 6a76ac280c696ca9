"""The choice of ``posbias fix``, on the tuning part only (:func:`tune_settings`): every setting of
each remedy's grid scored against the model as it is, and the rule that picks one
(:func:`pick`).
"""
from __future__ import annotations

import json

import numpy as np

from .... import cache
from .... import stats
from ....tasks import qa
from ...prompt import placement
from ...base import study
from .config import GRID, NETWORK_REMEDIES, REMEDIES, RULES, _CAL_PAPER, PROMPT_ONLY
from .scoring import _cal_key, _calibration_one, _calibration_record, _calibration_scores, _check_context, _documents, _fits_prefix, _iv, _matrix, prompt_params, _records, _settings_params
from .parts import slot_groups

__all__ = ["pick", "tune_settings", "calibration_recall"]


def pick(all_gain, middle_gain, edge_change, rule: str, edge_loss: float) -> tuple:
    """The tuning rule (:data:`RULES`) on one remedy's settings: ``(chosen index or None,
    eligible flags, reason)``.  ``all-slots``: the largest mean all-slot gain, judged only where
    it is above 0; ``middle``: the largest middle-slot gain among the settings whose edge change
    is at least ``-edge_loss``.  Ties go to the earlier setting.

    >>> pick([-0.1, 0.3, 0.3], [0.5, 0.2, 0.4], [-1.0, 0.0, 0.1], "all-slots", 0.25)[0]
    1
    >>> pick([-0.1, 0.3, 0.3], [0.5, 0.2, 0.4], [-1.0, 0.0, 0.1], "middle", 0.25)[0]
    2
    >>> pick([-0.1, -0.2], [0.5, 0.2], [0.0, 0.0], "all-slots", 0.25)
    (None, [False, False], 'no setting raises the mean log p over all gold slots')
    """
    if rule == "all-slots":
        elig = [bool(g > 0) for g in all_gain]
        why = "no setting raises the mean log p over all gold slots"
        key = all_gain
    elif rule == "middle":
        elig = [bool(e >= -float(edge_loss)) for e in edge_change]
        why = f"no setting's mean edge change is at least -{float(edge_loss)} nats"
        key = middle_gain
    else:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    cands = [j for j in range(len(elig)) if elig[j]]
    j = max(cands, key=lambda i: (key[i], -i)) if cands else None
    return j, elig, None if j is not None else why


def _candidates(m, codec, sizes, seed):
    """Stages 1 and 2 of Yu et al.'s channel search (chapter *Fixing it at inference time*):
    the mean hidden states of every layer on random printable ASCII, the monotone channels,
    the ``top`` smoothest (best first).  Empty when no channel is monotone."""
    from ....measure.positional import layer_means
    from ....metrics import positional_candidates
    from ....tasks.text import random_ascii_batch

    ids = random_ascii_batch(codec.tok, sizes["channel_length"], sizes["channel_samples"],
                             seed=seed, vocab_size=m.get_input_embeddings().num_embeddings)
    c = positional_candidates(layer_means(m, ids), top=_TOP)
    return [int(x) for x in c["candidates"]]


#: Stage 2 keeps the ``_TOP`` smoothest channels (Yu et al.'s and the chapter's 10); where a
#: prompt cannot be scored on one recorded pass (beyond a sliding window), stage 3 scores only
#: the ``_TOP_FULL`` smoothest, each setting a full pass (said in the output).
_TOP, _TOP_FULL = 10, 3


def tune_settings(model, tune_part, sizes, edge_loss, seed=0, weights="pretrained", info=None,
           key=None, remedies=REMEDIES, rule: str = "all-slots") -> dict:
    """Step 2 of the module docstring on the prepared tuning part: ``{remedy: {"grid",
    "middle_gain", "edge_change" (mean per setting), "eligible", "chosen" (index or None),
    "setting", "params" (the chosen setting's remedy parameters), "reason"}, "channel": {...}}``.

    Hidden scaling: Yu et al.'s stage 3 picks the channel among the candidates of stages 1
    and 2 (the lowest mean per-token cross-entropy of the answers at their scale 0, on the
    tuning prompts at the middle slots); then every scale of the grid is scored with that
    channel and the edge rule and the middle gain pick the scale.  Cached.  ``remedies``: the
    ones searched (:func:`fix`'s ``remedies``); the others are not returned, and the
    calibration, left out, is not measured (hidden scaling and Ms-PoE share one entry).

    The prompt remedies (:mod:`posbias_nb.experiments.prompt.placement`) are scored on the same
    records, each setting of their grid (:func:`posbias_nb.experiments.prompt.placement.grid`);
    ``prompt`` holds their slot qualities and each ranker's top-1 rate.  ``rule``
    (:data:`RULES`, :func:`pick`) chooses each remedy's setting; every remedy also reports
    ``all_gain``, the mean change over all gold slots."""
    n_pos = len(tune_part["positions"])
    sl = slot_groups(n_pos)
    scales = [float(g["scale"]) for g in GRID["hidden-scaling"]]

    def compute():
        m, tok, codec, rec = _records(model, weights, seed, tune_part)
        _check_context(info, rec, "tuning")
        out = {"example": rec["example"], "slot": rec["slot"]}
        cand = _candidates(m, codec, sizes, seed)
        reuse = _fits_prefix(m, rec)
        if not reuse:
            cand = cand[:_TOP_FULL]
        out["candidates"], out["prefix_reuse"] = np.array(cand, dtype=np.int64), np.array(reuse)
        P, A = rec["prompts"], rec["answers"]
        mid = [i for i, q in enumerate(rec["slot"]) if int(q) in set(sl["middle"])]
        n = np.array([len(A[i]) for i in mid], dtype=float)
        losses = []
        if cand:  # Yu et al.'s stage 3: each candidate at their scale 0, the middle prompts
            lp, _ = study.score_remedy(m, [P[i] for i in mid], [A[i] for i in mid],
                                           "hidden-scaling",
                                           [{"channel": c, "scale": 0.0} for c in cand])
            losses = [float(np.mean(-v / n)) for v in lp]  # the model as it is first
        out["stage3_losses"] = np.array(losses, dtype=float)
        if cand:
            best = cand[int(np.argmin(losses[1:]))]
            hs = [{"channel": best, "scale": sc} for sc in scales]
            lp, _ = study.score_remedy(m, P, A, "hidden-scaling", hs)
            out["base#logprob"], out["hidden-scaling#logprob"] = lp[0], lp[1:]
        else:
            out["base#logprob"] = study.score_remedy(m, P, A, "ms-poe", [])[0][0]
        lp, _ = study.score_remedy(m, P, A, "ms-poe",
                                       _settings_params("ms-poe", GRID["ms-poe"]), base=False)
        out["ms-poe#logprob"] = lp
        return out

    def compute_base():  # the model as it is alone, where neither prompt-only remedy is searched
        m, tok, codec, rec = _records(model, weights, seed, tune_part)
        _check_context(info, rec, "tuning")
        lp = study.score_remedy(m, rec["prompts"], rec["answers"], "ms-poe", [])[0][0]
        return {"example": rec["example"], "slot": rec["slot"], "base#logprob": lp}

    prompt_only = any(r in PROMPT_ONLY for r in remedies)
    res = cache.cached("fix-tune", dict(key, part="tune"), compute) if prompt_only else \
        cache.cached("fix-tune", dict(key, part="tune-base"), compute_base)

    cal_settings = _settings_params("attention-calibration",
                                    GRID["attention-calibration"][:_CAL_PAPER])
    var_settings = _settings_params("attention-calibration",
                                    GRID["attention-calibration"][_CAL_PAPER:])

    def compute_cal():
        m, tok, codec, rec = _records(model, weights, seed, tune_part)
        lp, _, rel = _calibration_scores(m, codec, tune_part, rec, cal_settings)
        return {"example": rec["example"], "slot": rec["slot"], "logprob": lp,
                "relevance": rel}

    loaded: dict = {}

    def cal_one(i: int) -> dict:  # record i alone (cache.Parts: make test samples records)
        if not loaded:
            m, tok, codec, rec = _records(model, weights, seed, tune_part)
            loaded.update(m=m, rec=rec, codec=codec, docs=_documents(codec, tune_part, rec))
        lp, _, r = _calibration_one(loaded["m"], loaded["rec"], loaded["docs"][i], i,
                                    cal_settings)
        return {"example": loaded["rec"]["example"][i], "slot": loaded["rec"]["slot"][i],
                "logprob": lp, "relevance": r}

    def cal_take(a, i: int) -> dict:
        return {"example": a["example"][i], "slot": a["slot"][i], "logprob": a["logprob"][:, i],
                "relevance": a["relevance"][i]}

    n_rec = sum(len(it["prompts"]) for it in tune_part["items"])
    cal = cache.cached("fix-tune", _cal_key(key, "tune-calibration", grid=[
        dict(s) for s in GRID["attention-calibration"][:_CAL_PAPER]]), compute_cal,
        parts=cache.Parts(n_rec, cal_one, cal_take)) \
        if "attention-calibration" in remedies else None

    def var_one(i: int) -> dict:  # ours (the fourth design): both dummies, the three variants
        if "vdocs" not in loaded:
            if not loaded:
                m, tok, codec, rec = _records(model, weights, seed, tune_part)
                loaded.update(m=m, rec=rec, codec=codec, docs=_documents(codec, tune_part, rec))
            loaded["vdocs"] = {"paper": loaded["docs"], "length-matched": _documents(
                loaded["codec"], tune_part, loaded["rec"], "length-matched")}
        r = loaded["rec"]
        lp, _, c = _calibration_record(loaded["m"], r, {d: v[i] for d, v in
                                                         loaded["vdocs"].items()}, i,
                                       var_settings)
        out = {"example": r["example"][i], "slot": r["slot"][i], "logprob": lp}
        for d in study.DUMMIES:
            for q in ("attention", "dummy", "relevance"):
                out[f"{q}#{d}"] = c[d][q]
        return out

    def var_take(a, i: int) -> dict:
        return {k: (v[:, i] if k == "logprob" else v[i]) for k, v in a.items()}

    def compute_var():
        parts = [var_one(i) for i in range(n_rec)]
        return {k: np.stack([p[k] for p in parts], axis=1 if k == "logprob" else 0)
                for k in parts[0]}

    var = cache.cached("fix-tune", _cal_key(key, "tune-calibration-variants", grid=[
        dict(s) for s in GRID["attention-calibration"][_CAL_PAPER:]], filler=qa.DUMMY_FILLER),
        compute_var, parts=cache.Parts(n_rec, var_one, var_take)) \
        if "attention-calibration" in remedies and rule == "all-slots" else None
    n_ex = len(tune_part["items"])
    rec = {"example": np.asarray(res["example"]), "slot": np.asarray(res["slot"])}
    if cal is not None and not (np.array_equal(np.asarray(cal["example"]), rec["example"]) and
                                np.array_equal(np.asarray(cal["slot"]), rec["slot"])):
        raise ValueError("the calibration's tuning records are not the other remedies'")
    base_lp = np.asarray(res["base#logprob"])
    cand = [int(c) for c in np.asarray(res["candidates"]).reshape(-1)] if prompt_only else []
    ch = {"candidates": cand, "prefix_reuse": bool(res["prefix_reuse"]) if prompt_only else
          None, "channel": None, "losses": [], "baseline_loss": None, "reason": None}
    scores = {}
    if not prompt_only:
        ch["reason"] = "hidden scaling was not searched"
    elif cand:
        losses = [float(v) for v in np.asarray(res["stage3_losses"])]
        ch.update(channel=cand[int(np.argmin(losses[1:]))], losses=losses[1:],
                  baseline_loss=losses[0])
        scores["hidden-scaling"] = np.asarray(res["hidden-scaling#logprob"])
    else:
        ch["reason"] = "Yu et al.'s first stage found no channel monotone in more than a " \
                       "quarter of the layers"
    if prompt_only:
        scores["ms-poe"] = np.asarray(res["ms-poe#logprob"])
    if var is not None and not (np.array_equal(np.asarray(var["example"]), rec["example"]) and
                                np.array_equal(np.asarray(var["slot"]), rec["slot"])):
        raise ValueError("the calibration variants' tuning records are not the other remedies'")
    if cal is not None:
        scores["attention-calibration"] = np.asarray(cal["logprob"]) if var is None else \
            np.concatenate([np.asarray(cal["logprob"]), np.asarray(var["logprob"])])
    out = {"channel": ch}
    base = _matrix(base_lp, rec, n_ex, n_pos)
    grids = {r: [dict(s) for s in GRID[r]] for r in NETWORK_REMEDIES}
    if var is None:  # the first design's rule: the paper's reading alone
        grids["attention-calibration"] = grids["attention-calibration"][:_CAL_PAPER]
    prompt = [r for r in remedies if r in placement.PROMPT_REMEDIES]
    if prompt:
        fmt = tune_part["format"]
        pl = placement.on_tuning(model, weights, seed, tune_part, fmt, prompt, base, key)
        if not (np.array_equal(pl["example"], rec["example"]) and
                np.array_equal(pl["slot"], rec["slot"])):
            raise ValueError("the prompt remedies' tuning records are not the other remedies'")
        for r in prompt:
            idx = [i for i, (n, _) in enumerate(pl["settings"]) if n == r]
            grids[r] = [dict(pl["settings"][i][1]) for i in idx]
            scores[r] = pl["logprob"][idx]
        out["prompt"] = {"qualities": pl["qualities"], "rankers": pl["rankers"],
                         "top1": placement.ranker_top1(pl["top1"], pl["example"],
                                                       pl["rankers"]),
                         "gold_slot": {f"{n}:{json.dumps(s, sort_keys=True)}":
                                       [int(v) for v in g] for (n, s), g in
                                       zip(pl["settings"], pl["gold_slot"])}}
    for name in remedies:
        if name not in scores:
            out[name] = {"grid": grids[name], "middle_gain": [], "edge_change": [],
                         "intervals": [], "all_gain": [], "eligible": [], "chosen": None,
                         "all_gain_by_example": [], "setting": None,
                         "params": None, "reason": ch["reason"]}
            continue
        mids, edges, alls, ivs, pers = [], [], [], [], []
        for j in range(len(grids[name])):
            d = _matrix(scores[name][j], rec, n_ex, n_pos) - base
            per = {"middle": d[:, sl["middle"]].mean(1), "edges": d[:, sl["edges"]].mean(1),
                   "all": d.mean(1)}
            mids.append(float(per["middle"].mean()))
            edges.append(float(per["edges"].mean()))
            alls.append(float(per["all"].mean()))
            pers.append([float(v) for v in per["all"]])
            # a description of the tuning part (t over its examples); the rule reads the means
            ivs.append({k: _iv(stats.mean_interval(v)) if n_ex > 1 else None
                        for k, v in per.items()})
        j, elig, why = pick(alls, mids, edges, rule, edge_loss)
        out[name] = {"grid": grids[name], "middle_gain": mids, "edge_change": edges,
                     "all_gain": alls, "intervals": ivs, "eligible": elig, "chosen": j,
                     "reason": why, "all_gain_by_example": pers,
                     "setting": None if j is None else dict(grids[name][j]),
                     "params": None if j is None else
                     prompt_params(name, grids[name][j], out.get("prompt"))
                     if name in placement.PROMPT_REMEDIES else
                     _settings_params(name, [GRID[name][j]], ch["channel"])[0]}
    if cal is not None:
        out["attention-calibration"]["recall"] = calibration_recall(
            np.asarray(cal["relevance"]), rec["slot"], tune_part["positions"], rec["example"])
    if var is not None:  # each dummy's ranking (the normaliser does not change it)
        out["attention-calibration"]["recall_by_dummy"] = {
            d: calibration_recall(np.asarray(var[f"relevance#{d}"]), rec["slot"],
                                  tune_part["positions"], rec["example"])
            for d in study.DUMMIES}
        # the same computation in two entries, perhaps made on two machines: the recorded-value
        # guard's tolerance for float rounding, and the same top document on every prompt
        a, b = np.asarray(cal["relevance"]), np.asarray(var["relevance#paper"])
        out["attention-calibration"]["paper_relevance_agrees"] = bool(
            not cache.agree({"relevance": a}, {"relevance": b}) and
            np.array_equal(a.argmax(1), b.argmax(1)))
    return out


def calibration_recall(relevance, slot, positions, example=None) -> dict:
    """A description that decides nothing: how often Hsieh et al.'s calibrated attention
    ranks the gold passage first among a prompt's documents (the premise of their eq. 5, which
    moves the attention towards the documents it ranks high).  ``relevance`` ``(n, K)``, the
    gold slot index of each prompt ``slot`` (into ``positions``, the 0-based gold documents),
    the question of each prompt ``example`` (default: each prompt its own).  Returns
    ``hits``, ``n``, the share with its interval over questions
    (:func:`posbias_nb.stats.unit_proportion_interval`: the prompts of one question are not
    independent), ``units``, ``chance`` (1/K), the share per gold slot and ``top``, how many
    prompts rank each document slot first (where the calibration sends the attention).

    >>> r = calibration_recall([[0.3, 0.1], [0.0, 0.2], [0.5, 0.1]], [0, 1, 1], [0, 1])
    >>> r["hits"], r["n"], r["chance"], r["by_slot"], r["top"]
    (2, 3, 0.5, [1.0, 0.5], [2, 1])
    """
    R = np.asarray(relevance, dtype=float)
    slot = np.asarray(slot, dtype=np.int64)
    pos = np.asarray(positions, dtype=np.int64)
    if R.ndim != 2 or R.shape[0] != slot.size or R.shape[0] < 1 or slot.min() < 0 or \
            slot.max() >= pos.size or pos.max() >= R.shape[1]:
        raise ValueError(f"relevance (n, K) with one gold slot per prompt, got shapes "
                         f"{R.shape}, {slot.shape} and positions {list(pos)}")
    hit = R.argmax(1) == pos[slot]
    ex = np.arange(hit.size) if example is None else np.asarray(example)
    if ex.shape != hit.shape:
        raise ValueError(f"relevance of {hit.size} prompts, but {ex.size} example labels")
    units = np.unique(ex)
    return {"hits": int(hit.sum()), "n": int(hit.size), "chance": 1.0 / R.shape[1],
            "units": int(units.size),
            "share": _iv(stats.unit_proportion_interval([hit[ex == u].mean() for u in units])),
            "by_slot": [float(hit[slot == j].mean()) for j in range(pos.size)],
            "top": np.bincount(R.argmax(1), minlength=R.shape[1]).tolist()}
