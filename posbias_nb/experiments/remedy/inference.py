r"""Inference-time remedies measured on the task, on the influence prior and on the cost.

Chapter :ref:`ch-inference`.  Five arms (:data:`ARMS`), each a remedy of
:mod:`posbias_nb.models.remedies` applied to a pretrained model without retraining: the three
papers' own methods (Yu et al.'s hidden scaling, Zhang et al.'s Ms-PoE, Hsieh et al.'s
attention calibration) and two variants of ours beside them, named apart.

The design is one frozen object, :data:`DESIGN`, whose hash the registry
(:mod:`posbias_nb.experiments.base.design`) records with the date and reason of every change; the
chapter prints both.  For each arm and model:

* the **task**: key-value retrieval at the pre-declared slots, the paired change of the gold
  value's log-probability on the test examples (an example is the unit: its slots averaged,
  then a t interval over examples), accuracy beside it (Wilson over examples, never pooled
  prompts);
* the **prior**: the hidden-state influence profile of the last token of offline text windows,
  the paired change of the middle's share (t over windows), pretrained and at initialization;
* the **cost**: the paired change of the next-token loss on held-out windows, over the rows a
  task answer would occupy (t over windows).

Free parameters are chosen on the tuning examples (``tune``), never on the test examples.  The
verdicts are decided family by family with Holm's correction (:func:`decisions`,
:func:`posbias_nb.stats.holm_family`).  Everything is cached (namespaces ``inference-*``).
"""
from __future__ import annotations

import contextlib

import numpy as np

from ... import cache, metrics, models, remedy_table, stats
from ...measure import entry
from ...measure.jacobian import influence_profile
from ...measure.positional import attention_rows, calibrated_attention, positional_channel, row_nll
from ...measure.prefix import Prefix, score_after_prefix
from ...measure.scoring import score_batch
from ...models.remedies import REMEDIES, check_applicable, later_layers, ms_poe_state
from ...results import Result
from ...tasks import qa
from ...tasks.kv_needle import dummy_prompts
from ...tasks.text import random_ascii_batch, text_batch
from ..prompt import retrieval as ret
from ..base import study
from ..base.design import Design, check

__all__ = ["DESIGN", "CHAPTER", "ARMS", "GRID", "FAMILIES", "channel", "text_prior", "tune",
           "task_arms", "prior_arms", "cost_arms", "summary", "decisions", "diagnostics",
           "remedy_run",
           "retrieval_remedy_run", "slots", "arm_params", "verdict_effect"]

_DEF = "inference-v3"  # bump when a definition below changes (the design has its own hash)

#: The arms: the remedy each applies, whose method it is, and which rows it changes ("last":
#: the prompt's last token and the answer only, so the prompt is computed once for all of them).
#: (The design names its arms; what each is, the remedy table says.)
ARMS = {n: {"remedy": n, "method": remedy_table.TABLE[n]["method"],
            "ours": remedy_table.TABLE[n]["ours"], "rows": remedy_table.TABLE[n]["rows"]}
        for n in ("hidden-scaling", "hidden-scaling-all", "ms-poe", "attention-calibration",
                  "prior-calibration")}
_MODELS = ("smollm2-135m", "gemma3-270m")
#: The hyperparameter grids (the tuning examples choose one setting per arm and model): each
#: remedy's own, from the remedy table.
GRID = {n: remedy_table.TABLE[n]["grid"] for n in ARMS}
_PRIOR_ARMS = ("hidden-scaling", "hidden-scaling-all", "ms-poe", "prior-calibration")
#: The pre-declared families of comparisons (Holm within each).
FAMILIES = {
    "task": [f"{m}/{a}" for m in _MODELS for a in ARMS],
    "prior": [f"{m}/{a}" for m in _MODELS for a in _PRIOR_ARMS],
    "init": [f"{m}/{a}" for m in _MODELS for a in _PRIOR_ARMS],
    "cost": [f"{m}/{a}" for m in _MODELS for a in _PRIOR_ARMS],
    "versus": [f"{m}/{a}" for m in _MODELS for a in ("hidden-scaling-all", "prior-calibration")],
}
_VERSUS = {"hidden-scaling-all": "hidden-scaling", "prior-calibration": "attention-calibration"}

#: The chapter's design, fixed before the measurements it governs (registry: ``designs.json``).
DESIGN = Design("inference", {
    "models": list(_MODELS),
    "retrieval": {"task": "kv", "positions": 7, "examples": 28, "length": 250, "seed": 0},
    "slots": [3],                  # the central slot of seven (the centre of regions(7).middle)
    "tune": list(range(0, 4)),     # the examples that choose the settings (and the channel)
    "test": list(range(4, 28)),    # the examples the verdicts use: 24
    "channel_search": {"samples": 8, "length": 1000, "seed": 0, "top": 10, "scale": 0.0},
    "prior_fit": {"windows": 8, "seed": 0},   # offline text: our prior calibration's prior
    "profile": {"length": 128, "windows": 8, "probes": 2, "seed": 7},
    "cost": {"windows": 8, "seed": 1},
    "arms": {a: dict(v) for a, v in ARMS.items()},
    "grid": {a: [dict(s) for s in g] for a, g in GRID.items()},
    "rules": {
        "task": {"statistic": "paired change of the gold value's log p at the slots, per "
                              "example", "threshold": 0.0, "direction": "greater"},
        "prior": {"statistic": "paired change of the middle share of the influence, per "
                               "window (pretrained)", "threshold": 0.0, "direction": "greater"},
        "init": {"statistic": "per-window relative change of the middle share at "
                              "initialization", "band": [-0.05, 0.05], "direction": "within",
                 "control": "testable only if the same remedy moves the pretrained prior "
                            "outside the band (its 95% interval outside it); measured only "
                            "where it is testable"},
        "cost": {"statistic": "paired change of the next-token loss (nats), per held-out "
                              "window", "threshold": 0.05, "direction": "less"},
        "versus": {"statistic": "ours minus the paper's arm, task log p gain, per example",
                   "threshold": 0.0, "direction": "greater"},
    },
    "families": FAMILIES,
    "alpha": 0.05,
    # added after the verdicts had been seen: they decide nothing (see the registry)
    "diagnostics": {"pi": "position interpolation at 1.2 in Ms-PoE's layers, test prompts",
                    "recall": "argmax of the calibrated and of the raw document attention "
                              "against the gold pair, test prompts"},
})
#: The design as a plain read-only mapping (``CHAPTER["test"]``).
CHAPTER = DESIGN.spec


def _checked():
    check(DESIGN)  # a design that moved without a dated registry entry is refused


def slots() -> list[int]:
    """The pre-declared slots the task is scored at."""
    return [int(s) for s in CHAPTER["slots"]]


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


def _prompts(model, weights="pretrained"):
    d = CHAPTER["retrieval"]
    P, m = ret.prompts_for(model, d["task"], d["positions"], d["examples"], d["length"],
                            d["seed"], weights)
    return P, m


def _chosen(recs, examples):
    ex, sl = set(int(e) for e in examples), set(slots())
    return [r for r in recs if r["example"] in ex and r["gold_index"] in sl]


def _geometry(recs):
    """(first answer row, longest prompt + answer) of the chapter's prompts."""
    row0 = min(len(r["prompt_ids"]) for r in recs) - 1
    length = max(len(r["prompt_ids"]) + len(r["answer_ids"]) for r in recs)
    return row0, length


def _key(model, weights, length, batch, seed, **extra):
    info = entry.checked(model, weights, length, batch, seed)
    return entry.run_key(info, weights, length, batch, seed, design=DESIGN.hash,
                         definition=_DEF, **extra)


# --------------------------------------------------------------------------------------------
# what the remedies read from the model

def channel(model) -> dict:
    """Yu et al.'s positional channel of the pretrained ``model``
    (:func:`~posbias_nb.measure.positional.positional_channel`): stages 1 and 2 on
    ``channel_search`` random ASCII sequences, stage 3 on the tuning prompts at the slots.  One
    channel per model, used by every hidden-scaling arm (task, prior at both weights, cost)."""
    cs = CHAPTER["channel_search"]
    key = _key(model, "pretrained", cs["length"], cs["samples"], cs["seed"], text=False,
               top=cs["top"], scale=cs["scale"], tune=list(CHAPTER["tune"]), slots=slots())

    def compute():
        P, m = _prompts(model)
        tok = P["codec"].tok
        ids = random_ascii_batch(tok, cs["length"], cs["samples"], seed=cs["seed"],
                                 vocab_size=m.get_input_embeddings().num_embeddings)
        val = _chosen(P["records"], CHAPTER["tune"])
        c = positional_channel(m, ids, [r["prompt_ids"] for r in val],
                               [r["answer_ids"] for r in val], top=cs["top"],
                               scale=cs["scale"])
        return {k: np.asarray(v) for k, v in c.items()}

    out = cache.cached("inference-channel", key, compute)
    out = dict(out)
    out["channel"] = int(out["channel"])
    return out


def text_prior(model, weights: str, length: int, row0: int) -> np.ndarray:
    """Our prior calibration's prior: the attention rows ``row0 .. length-1`` of the later layers,
    averaged over ``prior_fit`` offline text windows of ``length`` tokens (cached)."""
    pf = CHAPTER["prior_fit"]
    key = _key(model, weights, length, pf["windows"], pf["seed"], row0=int(row0))

    def compute():
        m, tok, _ = entry.loaded(model, weights=weights, seed=0)
        ids = _windows(model, m, tok, length, pf["windows"], pf["seed"])
        rows = attention_rows(m, ids, int(row0))
        return {"prior": rows[later_layers(rows.shape[0])].astype(np.float32)}

    return cache.cached("inference-prior-fit", key, compute)["prior"]


def arm_params(arm: str, setting: dict, model, weights: str = "pretrained", length=None,
               row0=None) -> dict:
    """The keyword arguments of :func:`posbias_nb.models.remedy` for ``arm`` with ``setting``
    that do not depend on the prompt (the channel; our prior at ``length``, from ``row0``)."""
    kind = _arm(arm)["remedy"]
    if kind in ("hidden-scaling", "hidden-scaling-all"):
        return {"channel": channel(model)["channel"], "scale": float(setting["scale"])}
    if kind == "ms-poe":
        return {"lo": float(setting["lo"]), "hi": float(setting["hi"])}
    if kind == "prior-calibration":
        return {"prior": text_prior(model, weights, length, row0), "row0": int(row0),
                "tau": float(setting["tau"])}
    return {"temperature": float(setting["temperature"])}


# --------------------------------------------------------------------------------------------
# the task

def _stage(model, examples, settings: dict, tag: str) -> dict:
    """Scores of the model as it is and of every ``settings[arm]`` (a list of settings) on the
    prompts of ``examples`` at the slots: one recorded pass per prompt for every arm that changes
    only the last rows, batched full passes for the others.  Cached."""
    _checked()
    d = CHAPTER["retrieval"]
    plain = {a: [dict(s) for s in v] for a, v in settings.items()}
    key = _key(model, "pretrained", d["length"], 1, d["seed"], stage=tag,
               examples=[int(e) for e in examples], slots=slots(), settings=plain)

    def compute():
        P, m = _prompts(model)
        recs = _chosen(P["records"], examples)
        row0, length = _geometry(P["records"])
        out = {"example": np.array([r["example"] for r in recs]),
               "gold_index": np.array([r["gold_index"] for r in recs])}
        last = [(a, j, s) for a, v in plain.items() if ARMS[a]["rows"] == "last"
                for j, s in enumerate(v)]
        kws = {(a, j): arm_params(a, s, model, "pretrained", length, row0) for a, j, s in last}
        n = len(recs)
        lp = {(a, j): np.zeros(n) for a, j, _ in last}
        ok = {(a, j): np.zeros(n, dtype=bool) for a, j, _ in last}
        base_lp, base_ok = np.zeros(n), np.zeros(n, dtype=bool)
        rel, att, dum = [], [], []
        for i, r in enumerate(recs):
            pre = Prefix(m, r["prompt_ids"], hidden=True)
            spans = [tuple(s) for s in r["pair_spans"]]
            rel_i = None
            if any(a == "attention-calibration" for a, _, _ in last):
                c = calibrated_attention(m, pre, spans, dummy_prompts(P, r))
                rel_i = c["relevance"]
                rel.append(rel_i), att.append(c["attention"]), dum.append(c["dummy"])
            fns = [None]
            for a, j, s in last:
                fns.append(study.last_rows_fn(m, ARMS[a]["remedy"], kws[a, j], spans, rel_i))
            got = score_after_prefix(pre, r["answer_ids"], fns)
            base_lp[i], base_ok[i] = got[0]
            for (a, j, _), g in zip(last, got[1:]):
                lp[a, j][i], ok[a, j][i] = g
        out["base_logprob"], out["base_correct"] = base_lp, base_ok
        for (a, j), v in lp.items():
            out[f"{a}#{j}#logprob"], out[f"{a}#{j}#correct"] = v, ok[a, j]
        if rel:
            out["relevance"], out["doc_attention"] = np.array(rel), np.array(att)
            out["doc_dummy"] = np.array(dum)
            out["gold_item"] = np.array([r["item"] for r in recs])
        for a, v in plain.items():
            if ARMS[a]["rows"] != "all":
                continue
            for j, s in enumerate(v):
                p = arm_params(a, s, model)
                ratios = []

                @contextlib.contextmanager
                def within(rows, a=a, p=p, ratios=ratios):
                    st = [len(recs[q]["prompt_ids"]) - 1 for q in rows]
                    kw = dict(p, start=st) if a == "ms-poe" else p
                    with models.remedy(m, ARMS[a]["remedy"], **kw):
                        yield
                        if a == "ms-poe":
                            ratios.append((rows, ms_poe_state(m)))
                l_, o_ = score_batch(m, [r["prompt_ids"] for r in recs],
                                     [r["answer_ids"] for r in recs], within=within)
                out[f"{a}#{j}#logprob"], out[f"{a}#{j}#correct"] = l_, o_
                if ratios:
                    lay = sorted(ratios[0][1])
                    R = np.zeros((n, len(lay), ratios[0][1][lay[0]].shape[1]))
                    for rows, stt in ratios:
                        for q_i, q in enumerate(rows):
                            R[q] = np.stack([stt[li][q_i] for li in lay])
                    out[f"{a}#{j}#ratios"], out[f"{a}#{j}#ratio_layers"] = R, np.array(lay)
        return out

    return cache.cached("inference-task", key, compute)




def _per_example(res, key):
    ex = np.asarray(res["example"])
    units = np.unique(ex)
    v = np.asarray(res[key], dtype=float)
    return units, np.array([v[ex == u].mean() for u in units])


def tune(model) -> dict:
    """For each arm, the setting of :data:`GRID` with the largest mean paired log-probability
    gain on the tuning examples (a one-setting grid is returned untuned): ``{arm: {"setting",
    "gains"}}``."""
    res = _stage(model, CHAPTER["tune"], {a: GRID[a] for a in ARMS if len(GRID[a]) > 1},
                 "tune")
    _, base = _per_example(res, "base_logprob")
    out = {}
    for a in ARMS:
        if len(GRID[a]) == 1:  # nothing to choose (Ms-PoE's published ratios)
            out[a] = {"setting": dict(GRID[a][0]), "gains": np.array([np.nan])}
            continue
        gains = np.array([(_per_example(res, f"{a}#{j}#logprob")[1] - base).mean()
                          for j in range(len(GRID[a]))])
        out[a] = {"setting": dict(GRID[a][int(np.argmax(gains))]), "gains": gains}
    return out


def task_arms(model) -> dict:
    """For each arm with its tuned setting: the per-example paired changes on the test examples
    (log-probability, accuracy) and their intervals, the levels with and without (accuracy:
    :func:`posbias_nb.stats.unit_proportion_interval` over examples), and for Ms-PoE the ratios
    each test prompt got."""
    t = tune(model)
    settings = {a: [t[a]["setting"]] for a in ARMS}
    res = _stage(model, CHAPTER["test"], settings, "test")
    units, b_lp = _per_example(res, "base_logprob")
    _, b_ok = _per_example(res, "base_correct")
    out = {"units": units, "base_logprob": b_lp, "base_accuracy": b_ok,
           "accuracy_base": stats.unit_proportion_interval(b_ok)}
    for a in ARMS:
        _, lp = _per_example(res, f"{a}#0#logprob")
        _, ok = _per_example(res, f"{a}#0#correct")
        out[a] = {"setting": t[a]["setting"], "tuning_gains": t[a]["gains"],
                  "logprob_diffs": lp - b_lp, "logprob_change": stats.mean_interval(lp - b_lp),
                  "accuracy": stats.unit_proportion_interval(ok),
                  "accuracy_diffs": ok - b_ok}
        if f"{a}#0#ratios" in res:
            out[a]["ratios"] = res[f"{a}#0#ratios"]
            out[a]["ratio_layers"] = res[f"{a}#0#ratio_layers"]
    if "relevance" in res:
        out["calibration"] = {k: res[k] for k in ("relevance", "doc_attention", "doc_dummy",
                                                  "gold_item")}
    return out


def diagnostics(model) -> dict:
    """What a skeptical reader checks first, added after the verdicts were seen (they decide
    nothing; the registry records when they were added):

    * ``"pi"``: plain position interpolation at Ms-PoE's smallest ratio, 1.2, in every head of
      Ms-PoE's layers, on the test prompts (per-example paired log p change, t interval): how
      much of Ms-PoE's effect is the compression of positions itself;
    * ``"recall"``: how often the document that Hsieh et al.'s calibrated attention ranks first
      is the gold pair, against the raw attention (Wilson intervals over the test prompts, one
      per example): their Table 1, here.
    """
    _checked()
    t = task_arms(model)
    cal = t.get("calibration")
    out = {}
    if cal is not None:
        g = np.asarray(cal["gold_item"])
        hit_r = int(np.sum(np.argmax(cal["relevance"], 1) == g))
        hit_a = int(np.sum(np.argmax(cal["doc_attention"], 1) == g))
        n = len(g)
        out["recall"] = {"calibrated": stats.proportion_interval(hit_r, n),
                         "raw": stats.proportion_interval(hit_a, n), "n": n,
                         "chance": 1.0 / cal["relevance"].shape[1]}
    d = CHAPTER["retrieval"]
    key = _key(model, "pretrained", d["length"], 1, d["seed"], stage="pi-1.2",
               examples=[int(e) for e in CHAPTER["test"]], slots=slots())

    def compute():
        P, m = _prompts(model)
        recs = _chosen(P["records"], CHAPTER["test"])
        a = models.decoder_layers(m)[0].self_attn
        H = a.q_proj.out_features // a.head_dim
        lp, _ = score_batch(m, [r["prompt_ids"] for r in recs], [r["answer_ids"] for r in recs],
                            within=lambda rows: models.remedy(m, "ms-poe",
                                                              ratios=np.full(H, 1.2)))
        return {"example": np.array([r["example"] for r in recs]), "logprob": lp}

    pi = cache.cached("inference-diagnostic", key, compute)
    _, lp = _per_example(pi, "logprob")
    out["pi"] = stats.mean_interval(lp - t["base_logprob"])
    return out


# --------------------------------------------------------------------------------------------
# the prior and the cost

def _profiles(model, weights, arm, setting) -> np.ndarray:
    p = CHAPTER["profile"]
    key = _key(model, weights, p["length"], p["windows"], p["seed"], arm=arm,
               setting=None if setting is None else dict(setting), probes=p["probes"])

    def compute():
        m, tok, _ = entry.loaded(model, weights=weights, seed=0)
        ids = _windows(model, m, tok, p["length"], p["windows"], p["seed"])
        if arm is None:
            prof = influence_profile(m, ids, probes=p["probes"], seed=p["seed"])
        else:
            kw = arm_params(arm, setting, model, weights, p["length"], p["length"] - 1)
            with models.remedy(m, ARMS[arm]["remedy"], **kw):
                prof = influence_profile(m, ids, probes=p["probes"], seed=p["seed"])
        return {"per_window": prof["per_sequence"]}

    return cache.cached("inference-prior", key, compute)["per_window"]


def prior_arms(model, weights: str, settings: dict, arms=_PRIOR_ARMS) -> dict:
    """For each of ``arms`` (default: every arm of the prior; the one that needs documents is
    left out; ``settings``: arm -> setting): per-window middle shares with and without it, their
    paired change (t over windows) and the per-window relative change."""
    base = _profiles(model, weights, None, None)
    b_mid = np.array([metrics.middle_share(w) for w in base])
    out = {"base": {"profile": base.mean(0), "middle_share": stats.mean_interval(b_mid),
                    "per_window": b_mid}}
    for arm in arms:
        pw = _profiles(model, weights, arm, settings[arm])
        mid = np.array([metrics.middle_share(w) for w in pw])
        out[arm] = {"profile": pw.mean(0), "diffs": mid - b_mid,
                    "middle_share_change": stats.mean_interval(mid - b_mid),
                    "relative": mid / b_mid - 1.0,
                    "relative_change": stats.mean_interval(mid / b_mid - 1.0)}
    return out


def cost_arms(model, settings: dict) -> dict:
    """For each arm of the prior: the paired change of the next-token loss (nats) on held-out
    windows of the prompts' length, over the rows a task answer occupies (from the first answer
    row on; the row-recomputing arms recompute those rows)."""
    P, _ = _prompts(model)
    row0, length = _geometry(P["records"])
    c = CHAPTER["cost"]
    pf = CHAPTER["prior_fit"]

    def one(arm, s):
        key = _key(model, "pretrained", length, c["windows"], c["seed"], arm=arm,
                   setting=None if s is None else dict(s), row0=row0)

        def compute():
            m, tok, _ = entry.loaded(model, weights="pretrained", seed=0)
            n = pf["windows"] + c["windows"]  # disjoint from the prior's fit windows
            ids = _windows(model, m, tok, length, n, pf["seed"])[pf["windows"]:]
            if arm is None:
                return {"nll": row_nll(m, ids, row0)}
            kw = arm_params(arm, s, model, "pretrained", length, row0)
            if ARMS[arm]["remedy"] in ("hidden-scaling", "ms-poe", "prior-calibration"):
                kw["start"] = row0
            with models.remedy(m, ARMS[arm]["remedy"], **kw):
                return {"nll": row_nll(m, ids, row0)}
        return cache.cached("inference-cost", key, compute)["nll"]

    base = one(None, None)
    out = {"base": stats.mean_interval(base)}
    for arm in _PRIOR_ARMS:
        d = one(arm, settings[arm]) - base
        out[arm] = {"diffs": d, "change": stats.mean_interval(d)}
    return out


def summary(model) -> dict:
    """Task, channel, prior (pretrained and at initialization) and cost of every arm on
    ``model``, with the tuned settings: the chapter's measurements for one model."""
    _checked()
    task = task_arms(model)
    settings = {a: task[a]["setting"] for a in ARMS}
    pre = prior_arms(model, "pretrained", settings)
    controls = [a for a in _PRIOR_ARMS if control_moved(pre[a])]
    return {"task": task, "settings": settings, "channel": channel(model),
            "cost": cost_arms(model, settings), "controls": controls,
            "prior": {"pretrained": pre, "random": prior_arms(model, "random", settings,
                                                              controls)}}


def control_moved(arm_prior) -> bool:
    """The init claim's positive control: the same remedy moved the pretrained prior outside
    the band (its relative change's 95% interval lies outside)."""
    band = tuple(CHAPTER["rules"]["init"]["band"])
    return stats.decide(arm_prior["relative_change"], direction="within", band=band) == "fails"


def decisions(summaries: dict) -> dict:
    """The verdicts of the chapter: each pre-declared family of :data:`FAMILIES` decided with
    Holm's correction (:func:`posbias_nb.stats.holm_family`), ``{family: {"model/arm":
    result}}``.  The init claims are testable only where the pretrained prior moved outside the
    band (the positive control)."""
    R = CHAPTER["rules"]
    claims = {f: {} for f in FAMILIES}
    for name in FAMILIES["task"]:
        m, a = name.split("/")
        claims["task"][name] = dict(x=summaries[m]["task"][a]["logprob_diffs"],
                                    threshold=R["task"]["threshold"],
                                    direction=R["task"]["direction"])
    for name in FAMILIES["prior"]:
        m, a = name.split("/")
        claims["prior"][name] = dict(x=summaries[m]["prior"]["pretrained"][a]["diffs"],
                                     threshold=R["prior"]["threshold"],
                                     direction=R["prior"]["direction"])
    band = tuple(R["init"]["band"])
    for name in FAMILIES["init"]:
        m, a = name.split("/")
        moved = control_moved(summaries[m]["prior"]["pretrained"][a])
        rnd = summaries[m]["prior"]["random"].get(a)
        claims["init"][name] = dict(x=None if rnd is None else rnd["relative"], band=band,
                                    direction="within", testable=moved and rnd is not None)
    for name in FAMILIES["cost"]:
        m, a = name.split("/")
        claims["cost"][name] = dict(x=summaries[m]["cost"][a]["diffs"],
                                    threshold=R["cost"]["threshold"],
                                    direction=R["cost"]["direction"])
    for name in FAMILIES["versus"]:
        m, a = name.split("/")
        T = summaries[m]["task"]
        claims["versus"][name] = dict(x=T[a]["logprob_diffs"] - T[_VERSUS[a]]["logprob_diffs"],
                                      threshold=R["versus"]["threshold"],
                                      direction=R["versus"]["direction"])
    return {f: stats.holm_family(c, alpha=CHAPTER["alpha"]) for f, c in claims.items()}


# --------------------------------------------------------------------------------------------
# the command line: posbias profile --remedy, posbias retrieval --remedy

def verdict_effect(claim: dict) -> dict:
    """The effect of one claim of :func:`decisions` for a verdict row
    (:func:`posbias_nb.notebook.verdict_table`): its Holm-adjusted interval against its
    declared threshold (or band, for ``within``) and direction; an untestable claim has no
    interval (zeros, marked ``testable=False``)."""
    c = claim["claim"]
    kw = {"band": tuple(c["band"])} if c["direction"] == "within" else \
        {"threshold": c["threshold"], "scale": 1.0}
    ci = claim["adjusted"] if claim["testable"] else (0.0, 0.0, 0.0)
    return dict(interval=ci, direction=c["direction"], testable=claim["testable"], **kw)


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
