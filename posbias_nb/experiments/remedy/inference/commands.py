"""The remedies as commands on a user's model: ``posbias remedy`` (:func:`remedy_run`) and the
retrieval task under a remedy (:func:`retrieval_remedy_run`), cached."""
from __future__ import annotations

import numpy as np
from .... import cache, models
from ....measure import entry
from ....measure.jacobian import influence_profile
from ....measure.positional import calibrated_attention, positional_channel
from ....measure.prefix import Prefix, score_after_prefix
from ....models.remedies import REMEDIES, check_applicable
from ....results import Result
from ....tasks import qa
from ....tasks.kv_needle import dummy_prompts
from ....tasks.text import random_ascii_batch
from ...prompt import retrieval as ret
from ...base import study
from .config import ARMS, CHAPTER, DESIGN, GRID, _DEF, _MODELS, slots
from .measurements import _geometry, _key, _windows, channel, text_prior

__all__ = ["remedy_run", "retrieval_remedy_run"]


def _setting(name: str, params: dict | None) -> dict:
    if name not in REMEDIES:
        raise ValueError(f"remedy must be one of {', '.join(REMEDIES)}; got {name!r}")
    base = dict(GRID[name][0])
    extra = set(params or {}) - set(base)
    if extra:
        raise ValueError(f"{name} takes the parameters {', '.join(sorted(base))}; got "
                         f"{', '.join(sorted(extra))}")
    return dict(base, **(params or {}))

def _cli_channel(model, weights):
    """The channel for a model of the command line: the chapter's search when it is one of the
    chapter's models, else stages 1 and 2 on random ASCII and stage 3 on kv prompts built with
    the model's tokenizer, as in the chapter."""
    if model in _MODELS and weights == "pretrained":
        return channel(model)["channel"]
    cs = CHAPTER["channel_search"]
    d = CHAPTER["retrieval"]
    key = _key(model, weights, cs["length"], cs["samples"], cs["seed"], text=False,
               top=cs["top"], scale=cs["scale"], cli=True)

    def compute():
        P, m = ret.prompts_for(model, d["task"], d["positions"], len(CHAPTER["tune"]),
                                d["length"], d["seed"], weights)
        ids = random_ascii_batch(P["codec"].tok, cs["length"], cs["samples"], seed=cs["seed"],
                                 vocab_size=m.get_input_embeddings().num_embeddings)
        val = [r for r in P["records"] if r["gold_index"] in set(slots())]
        c = positional_channel(m, ids, [r["prompt_ids"] for r in val],
                               [r["answer_ids"] for r in val], top=cs["top"],
                               scale=cs["scale"])
        return {"channel": np.array(c["channel"])}

    return int(cache.cached("inference-channel-cli", key, compute)["channel"])

def _cli_params(model, name, setting, weights, length, row0):
    if name in ("hidden-scaling", "hidden-scaling-all"):
        return {"channel": _cli_channel(model, weights), "scale": float(setting["scale"])}
    if name == "prior-calibration":
        return {"prior": text_prior(model, weights, length, row0), "row0": int(row0),
                "tau": float(setting["tau"])}
    if name == "ms-poe":
        return {"lo": float(setting["lo"]), "hi": float(setting["hi"])}
    return {"temperature": float(setting["temperature"])}

def remedy_run(model, name: str | None, weights: str = "pretrained", length: int = 512,
               params: dict | None = None, progress: bool = False, file=None) -> Result:
    """The influence profile of ``model`` under the remedy ``name`` (``posbias profile
    --remedy``) on one offline text window: the remedy's measured inputs (the channel, our
    prior) as in the chapter, its free parameters from ``params`` (default: the first setting
    of :data:`GRID`).  The attention calibration needs documents and is refused here.  ``file``:
    a remedy file (``--remedy-file``) instead of ``name`` and ``params``."""
    kw = None
    if file is not None:
        name, kw = study.remedy_from_file(model, file, weights)
        setting = dict(kw)
    else:
        setting = _setting(name, params)
    if name == "attention-calibration":
        raise ValueError("attention-calibration reweights the attention on documents: a text "
                         "window has none (use posbias retrieval --remedy)")
    m, tok, info = entry.loaded(model, weights=weights, seed=0)
    check_applicable(m, name)  # before anything is measured
    if kw is None:
        kw = _cli_params(model, name, setting, weights, length, length - 1)
    m, tok, info = entry.loaded(model, weights=weights, seed=0)
    ids = _windows(model, m, tok, length, 1, 0)
    with models.remedy(m, name, **kw):
        prof = influence_profile(m, ids, probes=8, seed=0, progress=progress)
    data = {"position": list(range(1, length + 1)),
            "influence": [float(v) for v in prof["influence"]],
            "stderr": [float(v) for v in prof["stderr"]]}
    meta = {"command": "profile", "model": str(model), "weights": weights, "length": length,
            "remedy": name, "setting": setting,
            "remedy_file": None if file is None else str(file), **entry.library_versions()}
    return Result(data, meta=meta, columns=("position", "influence", "stderr"))

#: The dummies of the attention calibration (:data:`posbias_nb.tasks.qa.DUMMIES`).
DUMMIES = qa.DUMMIES

def retrieval_remedy_run(model, name: str | None, params: dict | None = None,
                         task: str = "kv", positions: int = 7, examples: int = 10,
                         length: int = 350, seed: int = 0, weights: str = "pretrained",
                         progress: bool = False, file=None) -> Result:
    """:func:`posbias_nb.experiments.prompt.retrieval.retrieval_run` with the remedy ``name`` applied
    (``posbias retrieval --remedy``), every prompt scored as in the chapter (the rows from the
    prompt's last token on for the remedies that change only those).  The result has the
    baseline run's columns; ``meta`` names the remedy.  ``file``: a remedy file
    (``--remedy-file``) instead of ``name`` and ``params``."""
    fixed = None
    if file is not None:
        name, fixed = study.remedy_from_file(model, file, weights)
        setting = dict(fixed)
    else:
        setting = _setting(name, params)
    check_applicable(study.load(model, weights, seed)[0], name)
    if name == "attention-calibration" and task != "kv":
        raise ValueError("attention-calibration needs documents: the kv task (its pairs)")
    if name == "attention-calibration" and setting.get("dummy", "paper") != "paper":
        raise ValueError("a calibration file of the length-matched dummy is for document "
                         "prompts (posbias task); the key-value prompts here use one dummy "
                         "record of their own format")
    params_key = ret.run_params(model, task, positions, examples, length, seed, weights)
    params_key.update(remedy=name, setting=setting, definition_remedy=_DEF,
                      design=DESIGN.hash, **({} if file is None else {"from_file": True}))

    def compute():
        P, m = ret.prompts_for(model, task, positions, examples, length, seed, weights)
        recs = P["records"]
        row0, L = _geometry(recs)
        kw = dict(fixed) if fixed is not None else _cli_params(model, name, setting, weights, L,
                                                               row0)
        if name == "attention-calibration":
            lp, ok = np.zeros(len(recs)), np.zeros(len(recs), dtype=bool)
            for i, r in enumerate(recs):
                pre = Prefix(m, r["prompt_ids"])
                spans = [tuple(s) for s in r.get("pair_spans", ())]
                c = calibrated_attention(m, pre, spans, dummy_prompts(P, r))
                here = dict(kw, attention=list(c["attention"])) \
                    if kw.get("normaliser", "per-head") == "shared" else kw
                (lp[i], ok[i]), = score_after_prefix(
                    pre, r["answer_ids"], [study.last_rows_fn(m, ARMS[name]["remedy"], here, spans,
                                                         c["relevance"])])
        else:
            lp, ok = study.score_remedy(m, [r["prompt_ids"] for r in recs],
                                  [r["answer_ids"] for r in recs], name, [kw], base=False)
            lp, ok = lp[0], ok[0]
        return dict(ret.record_arrays(P), logprob=lp, correct=ok)

    res = cache.cached("inference-retrieval", params_key, compute)
    out = ret.run_result(res, model, task, positions, examples, length, seed, weights, "hex")
    out.meta.update(remedy=name, remedy_setting=setting,
                    remedy_file=None if file is None else str(file))
    return out
