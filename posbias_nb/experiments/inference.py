r"""Inference-time remedies measured on the influence prior, on the task and on the cost.

Chapter :ref:`ch-inference`.  Three remedies (:mod:`posbias_nb.models.remedies`), each applied to
a pretrained model without retraining:

* **hidden scaling** (Yu et al. 2024): the positional hidden channel, scaled before the query and
  key projections of the middle layers;
* **prior calibration** (ours): the last queries' attention in the later layers divided by the
  model's content-free positional prior, measured on offline text; beside it the same
  calibration with the prior measured on **dummy documents** (Hsieh et al. 2024's estimate:
  retrieval prompts with other content);
* **Ms-PoE** (Zhang et al. 2024): per-head RoPE position compression, ratios 1.2 to 1.8 ordered
  by how sharply each head attends.

For each: the **task** change (key-value retrieval, log-probability and accuracy at the
pre-declared middle slots, paired over examples: each example's middle slots are averaged, then
a t interval over examples), the **prior** change (the hidden-state influence profile, paired
over windows, at initialization and pretrained: the middle share and the valley depth), and the
**cost** (next-token loss on held-out text windows, paired over windows).  Hyperparameters are
chosen on the tuning examples (:data:`CHAPTER` ``tune``), never on the examples the verdicts use
(``test``).

Everything is cached (namespace ``inference``); the baseline scores are the retrieval chapter's
cached run on the same prompts.
"""
from __future__ import annotations

import numpy as np

from .. import cache, metrics, models, stats
from ..measure import entry
from ..measure.jacobian import influence_profile
from ..measure.positional import attention_rows, positional_channel, row_nll
from ..measure.scoring import score_batch
from ..models.remedies import REMEDIES, check_applicable, later_layers, ms_poe_ratios
from ..results import Result
from ..tasks.text import text_batch
from . import retrieval as ret

__all__ = ["CHAPTER", "ARMS", "GRID", "fit", "arm_params", "task_arms", "prior_arms",
           "cost_arms", "tune", "summary", "compare_arms", "relative_change", "remedy_run",
           "retrieval_remedy_run", "parse_params", "task_fit", "middle_slots"]

_DEF = "inference-v1"  # bump when a definition below changes

#: The chapter's design, fixed before any measurement.
CHAPTER = {
    "models": ("smollm2-135m", "gemma3-270m"),
    "retrieval": dict(task="kv", positions=7, examples=30, length=350, seed=0),
    "tune": (0,),                         # the example that chooses the hyperparameters
    "test": tuple(range(22, 30)),         # examples the verdicts use
    "profile": dict(length=128, windows=4, probes=4, seed=0),
    "fit_windows": 4,                     # offline text windows: channel, prior, sharpness
    "cost_windows": 4,                    # held-out windows (disjoint from the fit windows)
}

#: The arms: a remedy and the way its parameters are measured.
ARMS = {
    "hidden-scaling": "hidden-scaling",
    "prior-calibration": "prior-calibration",    # prior from offline text
    "dummy-calibration": "prior-calibration",    # prior from dummy documents (Hsieh et al.)
    "ms-poe": "ms-poe",
}

#: The hyperparameter grid of each arm (the tuning examples choose one).
GRID = {
    "hidden-scaling": ({"scale": 0.5}, {"scale": 0.0}, {"scale": -0.5}, {"scale": -1.0}),
    "prior-calibration": ({"tau": 0.25}, {"tau": 0.5}, {"tau": 1.0}),
    "dummy-calibration": "prior-calibration",  # the same temperature: only the prior differs
    "ms-poe": ({"lo": 1.2, "hi": 1.8},),  # the published setting, not tuned
}


def _arm(name):
    if name not in ARMS:
        raise ValueError(f"arm must be one of {', '.join(ARMS)}; got {name!r}")
    return ARMS[name]


def _tokenizer(model, tok):
    if tok is None and isinstance(model, str) and model in models.ZOO:
        try:
            return models.packaged_tokenizer(model)
        except (ValueError, OSError, KeyError):
            return None
    return tok


def _windows(model, m, tok, length, n, seed):
    return text_batch(_tokenizer(model, tok), length, n, seed=seed,
                      vocab_size=m.get_input_embeddings().num_embeddings)


def fit(model, weights: str = "pretrained", length: int = 128, start: int | None = None,
        seed: int = 0, windows: int | None = None) -> dict:
    r"""What the remedies need, measured on ``windows`` offline text windows of ``length``:
    the positional channel (:func:`~posbias_nb.measure.positional.positional_channel`), the
    attention rows ``start .. length-1`` of the later layers (the text prior; default: the last
    row) and every head's sharpness (:func:`posbias_nb.metrics.attention_sharpness`, over the
    same rows, all layers).  Cached."""
    windows = CHAPTER["fit_windows"] if windows is None else int(windows)
    start = length - 1 if start is None else int(start)
    info = entry.checked(model, weights, length, windows, seed)
    key = entry.run_key(info, weights, length, windows, seed, start=start, definition=_DEF)

    def compute():
        m, tok, _ = entry.loaded(model, weights=weights, seed=seed)
        ids = _windows(model, m, tok, length, windows, seed)
        ch = positional_channel(m, ids)
        rows = attention_rows(m, ids, start)
        T = rows.shape[0]
        return {"channel": np.array(ch["channel"]), "rho": ch["rho"],
                "channel_values": ch["values"], "sharpness": metrics.attention_sharpness(rows),
                "prior": rows[later_layers(T)].astype(np.float32), "row0": np.array(start)}

    return cache.cached("inference-fit", key, compute)


def dummy_prior(model, records, row0: int, length: int, seed: int = 0) -> np.ndarray:
    r"""Hsieh et al.'s estimate of the positional prior: the attention rows ``row0 ..
    length-1`` of the later layers averaged over retrieval prompts with *other* content (the
    tuning ``records``: prompt and answer, continued by offline text up to ``length`` tokens
    so that every row exists; a row never sees what follows it)."""
    m, tok, _ = entry.loaded(model, weights="pretrained", seed=seed)
    filler = _windows(model, m, tok, length, 1, seed + 1)[0]
    seqs = []
    for r in records:
        s = list(r["prompt_ids"]) + list(r["answer_ids"])
        if len(s) > length:
            raise ValueError(f"a dummy prompt has {len(s)} tokens, more than length={length}")
        seqs.append(s + filler[:length - len(s)].tolist())
    rows = attention_rows(m, np.array(seqs), row0)
    return rows[later_layers(rows.shape[0])].astype(np.float32)


def arm_params(arm: str, fitted: dict, setting: dict, prior=None) -> dict:
    """The keyword arguments of :func:`posbias_nb.models.remedy` for ``arm`` with ``setting``,
    from a :func:`fit` (and, for ``dummy-calibration``, the :func:`dummy_prior`)."""
    kind = _arm(arm)
    if kind == "hidden-scaling":
        return {"channel": int(fitted["channel"]), "scale": float(setting["scale"])}
    if kind == "ms-poe":
        sh = np.asarray(fitted["sharpness"])  # (T, H)
        return {"ratios": np.stack([ms_poe_ratios(row, _n_kv(fitted, row), setting["lo"],
                                                  setting["hi"]) for row in sh])}
    P = fitted["prior"] if arm == "prior-calibration" else prior
    if P is None:
        raise ValueError("dummy-calibration needs the dummy prior (dummy_prior)")
    return {"prior": np.asarray(P), "row0": int(fitted["row0"]), "tau": float(setting["tau"])}


def _n_kv(fitted, row):
    return int(fitted.get("n_kv", len(row)))


def _fit_for(model, weights, length, start, seed):
    f = dict(fit(model, weights, length, start, seed))
    m, _, _ = entry.loaded(model, weights=weights, seed=seed)
    a = models.decoder_layers(m)[0].self_attn
    f["n_kv"] = a.k_proj.out_features // a.head_dim
    return f


def task_fit(model) -> dict:
    """:func:`fit` of the pretrained ``model`` at the geometry of the chapter's retrieval prompts
    (the rows from the first answer row to the longest prompt), plus ``n_kv`` (key-value heads):
    what the task arms apply."""
    row0, length = _geometry(_prompts(model))
    return _fit_for(model, "pretrained", length, row0, 0)


def middle_slots() -> list[int]:
    """The pre-declared middle slots of the chapter's prompts (:func:`posbias_nb.metrics.regions`)."""
    return _middle()


def _prompts(model):
    P, m = ret._prompts_for(model, **{k: CHAPTER["retrieval"][k] for k in
                                      ("task", "positions", "examples", "length", "seed")},
                            weights="pretrained")
    return P["records"]


def _geometry(recs):
    row0 = min(len(r["prompt_ids"]) for r in recs) - 1
    length = max(len(r["prompt_ids"]) + len(r["answer_ids"]) for r in recs)
    return row0, length


def _score_arm(m, arm, params, recs):
    lp, ok = np.zeros(len(recs)), np.zeros(len(recs), dtype=bool)
    if arm is None:  # the model as it is
        return score_batch(m, [r["prompt_ids"] for r in recs], [r["answer_ids"] for r in recs])
    kind = _arm(arm)
    if kind != "prior-calibration":
        with models.remedy(m, kind, **params):
            return score_batch(m, [r["prompt_ids"] for r in recs],
                               [r["answer_ids"] for r in recs])
    # the calibrated rows start at each prompt's last token: prompts of one length share it,
    # so they are scored together (right padding changes no row of a causal model)
    by_len: dict = {}
    for i, r in enumerate(recs):
        by_len.setdefault(len(r["prompt_ids"]), []).append(i)
    for n, idx in sorted(by_len.items()):
        with models.remedy(m, kind, start=n - 1, **params):
            lp[idx], ok[idx] = score_batch(m, [recs[i]["prompt_ids"] for i in idx],
                                           [recs[i]["answer_ids"] for i in idx])
    return lp, ok


def _task_key(model, arm, setting, examples, slots):
    info = entry.checked(model, "pretrained", CHAPTER["retrieval"]["length"], 1, 0)
    return entry.run_key(info, "pretrained", CHAPTER["retrieval"]["length"], 1, 0, arm=arm,
                         setting=setting, examples=list(map(int, examples)),
                         slots=list(map(int, slots)), design=CHAPTER["retrieval"],
                         fit_windows=CHAPTER["fit_windows"], definition=_DEF)


def _arm_scores(model, arm, setting, examples, slots, progress=False) -> dict:
    """Scores of ``arm`` with ``setting`` on the prompts of ``examples`` at ``slots``
    (cached)."""
    def compute():
        recs = _prompts(model)
        row0, length = _geometry(recs)
        chosen = [r for r in recs if r["example"] in set(examples) and r["gold_index"] in
                  set(slots)]
        m, _, _ = entry.loaded(model, weights="pretrained", seed=0)
        if arm is None:
            lp, ok = _score_arm(m, None, None, chosen)
            return {"example": np.array([r["example"] for r in chosen]),
                    "gold_index": np.array([r["gold_index"] for r in chosen]),
                    "logprob": lp, "correct": ok}
        fitted = _fit_for(model, "pretrained", length, row0, 0)
        prior = None
        if arm == "dummy-calibration":
            dummy = [r for r in recs if r["example"] in set(CHAPTER["tune"])]
            prior = _dummy_cached(model, dummy, row0, length)
        lp, ok = _score_arm(m, arm, arm_params(arm, fitted, setting, prior), chosen)
        return {"example": np.array([r["example"] for r in chosen]),
                "gold_index": np.array([r["gold_index"] for r in chosen]),
                "logprob": lp, "correct": ok}

    return cache.cached("inference-task", _task_key(model, arm, setting, examples, slots),
                        compute)


def _dummy_cached(model, dummy, row0, length):
    info = entry.checked(model, "pretrained", length, 1, 0)
    key = entry.run_key(info, "pretrained", length, 1, 0, row0=row0, design=CHAPTER["retrieval"],
                        tune=list(CHAPTER["tune"]), definition=_DEF)
    return cache.cached("inference-dummy", key,
                        lambda: {"prior": dummy_prior(model, dummy, row0, length)})["prior"]


def _baseline(model):
    """The model's own scores: the retrieval chapter's cached run on the same prompts when it
    is there, else (this chapter run alone) the prompts the arms use, scored afresh."""
    d = CHAPTER["retrieval"]
    hit = cache.load("retrieval", ret._params(model, d["task"], d["positions"], d["examples"],
                                              d["length"], d["seed"], "pretrained"))
    if hit is not None:
        return hit
    used = sorted(set(CHAPTER["tune"]) | set(CHAPTER["test"]))
    return _arm_scores(model, None, None, used, _middle())


def _paired(base, arm_res, key):
    """Per-example mean of (arm - baseline) over the arm's prompts: (examples, diffs)."""
    idx = {(int(e), int(g)): i for i, (e, g) in enumerate(zip(base["example"],
                                                               base["gold_index"]))}
    rows = [idx[(int(e), int(g))] for e, g in zip(arm_res["example"], arm_res["gold_index"])]
    b = np.asarray(base[key], dtype=float)[rows]
    a = np.asarray(arm_res[key], dtype=float)
    ex = np.asarray(arm_res["example"])
    units = np.unique(ex)
    return {"units": units,
            "diff": np.array([(a - b)[ex == u].mean() for u in units]),
            "arm": np.array([a[ex == u].mean() for u in units]),
            "base": np.array([b[ex == u].mean() for u in units])}


def _middle() -> list[int]:
    """The pre-declared middle slots (:func:`posbias_nb.metrics.regions`)."""
    P = CHAPTER["retrieval"]["positions"]
    return list(range(P))[metrics.regions(P).middle]


def tune(model, arm: str, progress: bool = False) -> dict:
    """The setting of ``arm`` with the largest mean middle log-probability gain on the tuning
    examples (:data:`CHAPTER` ``tune``; never the test examples).  Returns ``{"setting",
    "gains"}``; a one-setting grid is returned untuned."""
    _arm(arm)
    grid = GRID[arm]
    if isinstance(grid, str):  # tuned with another arm
        return dict(tune(model, grid, progress), shared_with=grid)
    if len(grid) == 1:
        return {"setting": dict(grid[0]), "gains": np.array([np.nan])}
    mid = _middle()
    base = _baseline(model)
    gains = np.array([_paired(base, _arm_scores(model, arm, s, CHAPTER["tune"], mid),
                              "logprob")["diff"].mean() for s in grid])
    return {"setting": dict(grid[int(np.argmax(gains))]), "gains": gains}


def task_arms(model, arms=tuple(ARMS), progress: bool = False) -> dict:
    """For each arm (tuned on the tuning examples): the paired change at the middle slots on the
    test examples, log-probability and accuracy, with t intervals over examples."""
    mid = _middle()
    base = _baseline(model)
    out = {}
    for arm in arms:
        t = tune(model, arm, progress)
        res = _arm_scores(model, arm, t["setting"], CHAPTER["test"], mid, progress)
        lp = _paired(base, res, "logprob")
        acc = _paired(base, res, "correct")
        n = len(res["correct"])
        out[arm] = {"setting": t["setting"], "tuning_gains": t["gains"],
                    "logprob_change": stats.mean_interval(lp["diff"]),
                    "accuracy_change": stats.mean_interval(acc["diff"]),
                    "accuracy": stats.proportion_interval(int(np.sum(res["correct"])), n),
                    "accuracy_base": stats.proportion_interval(
                        int(round(acc["base"].sum() * len(mid))), n),
                    "logprob": stats.mean_interval(lp["arm"]),
                    "logprob_base": stats.mean_interval(lp["base"]), "n_prompts": n,
                    "n_examples": len(lp["units"]), "units": lp["units"],
                    "logprob_diffs": lp["diff"]}
    return out


def _profile_key(model, weights, arm, setting):
    p = CHAPTER["profile"]
    info = entry.checked(model, weights, p["length"], p["windows"], p["seed"])
    return entry.run_key(info, weights, p["length"], p["windows"], p["seed"], arm=arm,
                         setting=setting, probes=p["probes"], fit_windows=CHAPTER["fit_windows"],
                         definition=_DEF)


def _profiles(model, weights, arm, setting) -> np.ndarray:
    p = CHAPTER["profile"]

    def compute():
        m, tok, _ = entry.loaded(model, weights=weights, seed=p["seed"])
        # windows after the fit windows' seed: the same text for every arm and both weights
        ids = _windows(model, m, tok, p["length"], p["windows"], p["seed"] + 7)
        if arm is None:
            prof = influence_profile(m, ids, probes=p["probes"], seed=p["seed"])
        else:
            fitted = _fit_for(model, weights, p["length"], None, p["seed"])
            with models.remedy(m, _arm(arm), **arm_params(arm, fitted, setting)):
                prof = influence_profile(m, ids, probes=p["probes"], seed=p["seed"])
        return {"per_window": prof["per_sequence"]}

    return cache.cached("inference-prior", _profile_key(model, weights, arm, setting),
                        compute)["per_window"]


def _valley_depth(per_window):
    """log10 of the robust peak-to-valley of each window's profile."""
    return np.array([np.log10(metrics.robust_peak_to_valley(w)[0]) for w in per_window])


def prior_arms(model, weights: str, settings: dict) -> dict:
    """For each arm (``settings``: arm -> setting, e.g. the tuned ones): the paired change of the
    middle share (:func:`posbias_nb.metrics.middle_share`) and of the valley depth (log10 robust
    peak-to-valley) of the influence profile, t intervals over windows."""
    base = _profiles(model, weights, None, None)
    b_mid = np.array([metrics.middle_share(w) for w in base])
    b_val = _valley_depth(base)
    out = {"base": {"profile": base.mean(0), "middle_share": stats.mean_interval(b_mid),
                    "valley": stats.mean_interval(b_val)}}
    for arm, s in settings.items():
        if arm == "dummy-calibration":
            continue  # the dummy prior is a pretrained-prompt statistic: measured on the task
        pw = _profiles(model, weights, arm, s)
        out[arm] = {"profile": pw.mean(0),
                    "middle_share_change": stats.mean_interval(
                        np.array([metrics.middle_share(w) for w in pw]) - b_mid),
                    "valley_change": stats.mean_interval(_valley_depth(pw) - b_val)}
    return out


def cost_arms(model, settings: dict) -> dict:
    """For each arm: the paired change of the next-token loss (nats) on held-out windows, over
    the rows the calibration acts on (the task's answer rows and beyond)."""
    recs = _prompts(model)
    row0, length = _geometry(recs)
    info = entry.checked(model, "pretrained", length, CHAPTER["cost_windows"], 0)

    def one(arm, s):
        key = entry.run_key(info, "pretrained", length, CHAPTER["cost_windows"], 0, arm=arm,
                            setting=s, row0=row0, fit_windows=CHAPTER["fit_windows"],
                            definition=_DEF)

        def compute():
            m, tok, _ = entry.loaded(model, weights="pretrained", seed=0)
            n = CHAPTER["fit_windows"] + CHAPTER["cost_windows"]
            ids = _windows(model, m, tok, length, n, 0)[CHAPTER["fit_windows"]:]
            if arm is None:
                return {"nll": row_nll(m, ids, row0)}
            fitted = _fit_for(model, "pretrained", length, row0, 0)
            prior = None
            if arm == "dummy-calibration":
                dummy = [r for r in recs if r["example"] in set(CHAPTER["tune"])]
                prior = _dummy_cached(model, dummy, row0, length)
            with models.remedy(m, _arm(arm), **arm_params(arm, fitted, s, prior)):
                return {"nll": row_nll(m, ids, row0)}
        return cache.cached("inference-cost", key, compute)["nll"]

    base = one(None, None)
    out = {"base": stats.mean_interval(base)}
    for arm, s in settings.items():
        out[arm] = stats.mean_interval(one(arm, s) - base)
    return out


def compare_arms(task: dict, a: str, b: str):
    """Paired over the test examples: the middle log-probability gain of arm ``a`` minus that of
    arm ``b`` (t interval), e.g. our prior calibration against the dummy-document one."""
    ta, tb = task[a], task[b]
    if not np.array_equal(ta["units"], tb["units"]):
        raise ValueError("the two arms were measured on different examples")
    return stats.mean_interval(np.asarray(ta["logprob_diffs"]) - np.asarray(tb["logprob_diffs"]))


def relative_change(prior: dict, arm: str):
    """The change of the middle share under ``arm`` relative to the model's own middle share:
    (estimate, low, high) of the paired change divided by the base mean (the base is measured on
    the same windows; its spread is ignored, so this is the change's interval rescaled)."""
    base = prior["base"]["middle_share"][0]
    return tuple(float(v) / base for v in prior[arm]["middle_share_change"])


def summary(model, progress: bool = False) -> dict:
    """Task, prior (pretrained and at initialization) and cost of every arm on ``model``, with
    the tuned settings: the chapter's table for one model."""
    task = task_arms(model, progress=progress)
    settings = {a: task[a]["setting"] for a in task}
    return {"task": task, "settings": settings,
            "prior": {w: prior_arms(model, w, settings) for w in ("pretrained", "random")},
            "cost": cost_arms(model, settings)}


def remedy_run(model, name: str, weights: str = "pretrained", length: int = 512,
               params: dict | None = None, progress: bool = False) -> Result:
    """The influence profile of ``model`` under the remedy ``name`` (``posbias profile
    --remedy``): the remedy's measured inputs come from :func:`fit` on the same length, its
    free parameters from ``params`` (default: the first setting of :data:`GRID`)."""
    setting = _setting(name, params)
    arm = name
    m, tok, info = entry.loaded(model, weights=weights, seed=0)
    check_applicable(m, name)  # before anything is measured
    fitted = _fit_for(model, weights, length, None, 0)
    ids = _windows(model, m, tok, length, 1, 0)
    with models.remedy(m, name, **arm_params(arm, fitted, setting)):
        prof = influence_profile(m, ids, probes=8, seed=0, progress=progress)
    data = {"position": list(range(1, length + 1)),
            "influence": [float(v) for v in prof["influence"]],
            "stderr": [float(v) for v in prof["stderr"]]}
    meta = {"command": "profile", "model": str(model), "weights": weights, "length": length,
            "remedy": name, "setting": setting, **entry.library_versions()}
    return Result(data, meta=meta, columns=("position", "influence", "stderr"))


def parse_params(pairs) -> dict:
    """``["tau=0.5", "scale=-1"]`` (the ``--remedy-param`` flags) as ``{"tau": 0.5, ...}``.

    Examples
    --------
    >>> parse_params(["tau=0.5", "lo=1.2"])
    {'tau': 0.5, 'lo': 1.2}
    """
    out = {}
    for p in pairs or ():
        k, sep, v = str(p).partition("=")
        if not sep or not k:
            raise ValueError(f"--remedy-param must be KEY=VALUE, got {p!r}")
        try:
            out[k.strip()] = float(v)
        except ValueError:
            raise ValueError(f"--remedy-param {k}: a number is needed, got {v!r}") from None
    return out


def _setting(name: str, params: dict | None) -> dict:
    if name not in REMEDIES:
        raise ValueError(f"remedy must be one of {', '.join(REMEDIES)}; got {name!r}")
    base = dict(GRID[name][0])
    extra = set(params or {}) - set(base)
    if extra:
        raise ValueError(f"{name} takes the parameters {', '.join(sorted(base))}; got "
                         f"{', '.join(sorted(extra))}")
    return dict(base, **(params or {}))


def retrieval_remedy_run(model, name: str, params: dict | None = None, task: str = "kv",
                         positions: int = 7, examples: int = 10, length: int = 350,
                         seed: int = 0, weights: str = "pretrained",
                         progress: bool = False) -> Result:
    """:func:`posbias_nb.experiments.retrieval.retrieval_run` with the remedy ``name`` applied
    (``posbias retrieval --remedy``): the remedy's inputs measured by :func:`fit` on offline
    text at the prompts' length, its free parameter from ``params`` (default: the first of
    :data:`GRID`).  The result has the baseline run's columns; ``meta`` names the remedy."""
    setting = _setting(name, params)
    check_applicable(ret._load(model, weights, seed)[0], name)
    params_key = ret._params(model, task, positions, examples, length, seed, weights)
    params_key.update(remedy=name, setting=setting, fit_windows=CHAPTER["fit_windows"],
                      definition_remedy=_DEF)

    def compute():
        P, m = ret._prompts_for(model, task, positions, examples, length, seed, weights)
        recs = P["records"]
        row0, L = _geometry(recs)
        f = _fit_for(model, weights, L, row0, seed)
        lp, ok = _score_arm(m, name, arm_params(name, f, setting), recs)
        return dict(ret.record_arrays(P), logprob=lp, correct=ok)

    res = cache.cached("inference-retrieval", params_key, compute)
    out = ret._run_result(res, model, task, positions, examples, length, seed, weights, "hex")
    out.meta.update(remedy=name, remedy_setting=setting)
    return out
