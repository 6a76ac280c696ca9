r"""``posbias fix --fast``: the prompt remedies' fast path (design ``fix-fast``, issue 62).

The fifth design of ``posbias fix`` (:func:`posbias_nb.experiments.remedy.fix.select_one`: tune on one
part, carry the best remedy to the test part, test it alone, one-sided) spends most of its time
above its floor (the model as it is on the tuning and the test prompts, ``bench/bench_fix.py``)
scoring every setting of every prompt remedy on the tuning part, and scoring and answering
every chosen remedy on the test part where only the carried one is judged.  This design makes
two changes, and nothing else:

1. **Tuning by the landing slot.**  No rewritten prompt is scored on the tuning part.  For each
   tuning example, each gold slot it was asked at and each setting of a ranked prompt remedy
   (:data:`RANKED`), the slot the gold passage lands in is found by the setting's ranker and
   placement alone (BM25 reads text; the question likelihood costs one short pass per document,
   made only where a setting uses it).  The setting's log p on that prompt is *estimated* by the
   model as it is on the same example with the gold passage at that slot: its log p at the gold
   slots measured, read at the landing slot by linear interpolation between them (the curve's
   own reading, :func:`posbias_nb.experiments.prompt.placement.slot_qualities`).  The estimated gain is
   that, less the measured log p at the slot it was asked at (:func:`landing_gains`); the
   all-slot rule and the fifth design's selection then run on the estimates unchanged.
2. **Only the carried remedy on the test part**, scored, answered (greedy, best_subspan_em) and
   timed against the model as it is by :func:`posbias_nb.experiments.remedy.fix.evaluate` itself; the
   other remedies' test-part changes, exploratory in the fifth design, are not measured.

The estimate ignores what a placement does to the other passages' order.  How well it tracks
the scored tuning gains is measured on runs that scored them (the book's and the full path's
records, :func:`landing_check`); ``bench/results/fix-landing.json`` holds the check.  The power
statement comes from the estimates' spread over the tuning questions, which leaves out that
order's share of the spread: the detectable gain it states is a lower bound (said in the result).
The verdict itself is the test part's, scored, as in the fifth design.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ... import cache, metrics, stats
from ..._validate import positive_int
from ...measure import entry
from ...models.weights import file_sha256
from ...results import Result
from ...tasks import qa, reorder
from . import fix as _fix
from ..prompt import placement
from ..base import study
from ..base import prompts
from ..base.design import Design

__all__ = ["DESIGN", "RANKED", "landing_gains", "landing_slots", "landing_check", "tune_settings",
           "fix"]

DEFINITION = "fix-fast-v1"  # bump when a definition below changes the numbers
#: The prompt remedies the fast path searches: those that place documents by a ranking, whose
#: prompt holds the same passages in another order (the landing slot says where the gold goes).
RANKED = placement.RANKED

#: The fast path's design (registry: ``designs.json``), fixed before its first measurement.
DESIGN = Design("fix-fast", {
    "applies_to": "posbias fix --fast (with or without --quick); the fifth design's split, "
                  "sizes, grids and test otherwise",
    "remedies": list(RANKED),
    "tuning": "no rewritten prompt scored: each setting's log p on a tuning prompt estimated by "
              "the model as it is on the same example with the gold passage at the slot the "
              "setting puts it in (measured gold slots, linear interpolation between them); "
              "the question likelihood computed only where a setting uses it",
    "rule": "the fifth design's (fix.select_one) on the estimated all-slot gains: per remedy the "
            "setting with the largest mean estimated gain, the remedy with the largest such "
            "gain above 0 carried",
    "test": "the carried remedy alone, scored, answered and timed by fix.evaluate against the "
            "model as it is; one-sided Student t at 0.05 over test questions, a sign-flip "
            "permutation test beside it; no other remedy measured on the test part",
    "power": "from the estimated per-question gain's SD on the tuning part (a lower bound of "
             "the scored spread: the detectable gain is optimistic)",
    "floor_ratio": 1.3,
    "alpha": 0.05,
})


def as_interval(t) -> dict:
    e, lo, hi = (float(v) for v in t)
    return {"estimate": e, "low": lo, "high": hi}


def gold_slot_groups(n_pos: int) -> dict:
    """The middle gold slots (:func:`posbias_nb.metrics.regions` of the gold slots) and the
    two edge ones, as ``posbias fix`` reads them."""
    r = metrics.regions(n_pos)
    return {"middle": list(range(n_pos))[r.middle], "edges": [0, n_pos - 1]}


def by_slot(values, example, slot, n_ex: int, n_pos: int) -> np.ndarray:
    M = np.full((n_ex, n_pos), np.nan)
    M[np.asarray(example), np.asarray(slot)] = values
    return M


def remedy_params(name, setting, qualities) -> dict:
    """A ranked remedy's remedy-file parameters (:mod:`posbias_nb.models.remedy_file`): its
    setting, and for a quality order the slot quality it learnt."""
    p = dict(setting)
    if name == "curve-order":
        p["slot_quality"] = list(qualities["curve"])
    elif name == "prior-order":
        p["slot_quality"] = list(qualities[setting["prior"]])
    return p


def landing_gains(base, landing, positions, n_slots: int) -> dict:
    """Estimated per-example gains of placements, from the model as it is (module docstring).

    ``base`` ``(examples, J)``: log p with the gold passage at each gold slot ``positions``
    (``J`` increasing 0-based slots of ``n_slots``); ``landing`` ``(settings, examples, J)``:
    the slot the gold passage lands in under each setting when it was asked at gold slot ``j``.
    Returns ``{"all", "middle", "edges"}``, each ``(settings, examples)``: the mean over the
    gold slots (all of them, the middle ones, the first and last) of the estimated log p at the
    landing slot less the measured log p at the slot asked.

    >>> g = landing_gains([[-3.0, -5.0, -1.0]], [[[2, 2, 2]]], [0, 1, 3], 4)
    >>> [round(float(v), 3) for v in g["all"][0]]  # -3 at slot 2 (between -5 and -1) vs -3
    [0.0]
    >>> landing_gains([[-3.0, -5.0, -1.0]], [[[3, 3, 3]]], [0, 1, 3], 4)["all"].tolist()
    [[2.0]]
    """
    base = np.asarray(base, dtype=float)
    landing = np.asarray(landing)
    pos = np.asarray(positions, dtype=float)
    n_slots = positive_int("n_slots", n_slots, minimum=2)
    if base.ndim != 2 or base.shape[1] != len(pos):
        raise ValueError(f"base must be (examples, {len(pos)} gold slots), got {base.shape}")
    if landing.ndim != 3 or landing.shape[1:] != base.shape:
        raise ValueError(f"landing must be (settings, {base.shape[0]}, {base.shape[1]}), got "
                         f"{landing.shape}")
    if not np.all(np.diff(pos) > 0) or pos[0] < 0 or pos[-1] >= n_slots:
        raise ValueError(f"positions must increase within 0..{n_slots - 1}, got {positions!r}")
    if landing.size and (landing.min() < 0 or landing.max() >= n_slots):
        raise ValueError(f"landing slots must lie in 0..{n_slots - 1}, got "
                         f"{int(landing.min())}..{int(landing.max())}")
    if not np.all(np.isfinite(base)):
        raise ValueError("base holds a non-finite log p")
    est = np.stack([np.stack([np.interp(landing[s, e], pos, base[e])
                              for e in range(base.shape[0])]) for s in range(landing.shape[0])]) \
        if landing.size else np.zeros(landing.shape)
    d = est - base[None]
    sl = gold_slot_groups(len(pos))
    return {"all": d.mean(-1), "middle": d[..., sl["middle"]].mean(-1),
            "edges": d[..., sl["edges"]].mean(-1)}


def quality_orders(settings, qualities) -> list:
    out = []
    for name, s in settings:
        if name == "curve-order":
            out.append(reorder.quality_order(qualities["curve"]))
        elif name == "prior-order":
            out.append(reorder.quality_order(qualities[s["prior"]]))
        else:
            out.append(None)
    return out


def landing_slots(part, settings, qualities, nll=None) -> np.ndarray:
    """``(settings, examples, gold slots)``: the slot the gold passage lands in under each
    ``(name, setting)`` of a ranked prompt remedy (:data:`RANKED`), for every prompt of the
    prepared ``part``.  ``nll``: per example, each document's question likelihood by its
    ``(title, text)`` (needed only by a ``question-likelihood`` setting)."""
    bad = [n for n, _ in settings if n not in RANKED]
    if bad:
        raise ValueError(f"the fast path places by a ranking ({', '.join(RANKED)}); got {bad[0]!r}")
    orders = quality_orders(settings, qualities)
    E, J = len(part["items"]), len(part["positions"])
    out = np.zeros((len(settings), E, J), dtype=np.int64)
    for e, it in enumerate(part["items"]):
        q = it["question"]
        for j, p in enumerate(part["positions"]):
            docs = it["documents"][j]
            gold = docs[p]
            cache_r: dict = {}
            for s, ((name, st), order) in enumerate(zip(settings, orders)):
                r = st["ranker"]
                if r not in cache_r:
                    if r == "question-likelihood" and (nll is None or nll[e] is None):
                        raise ValueError("a question-likelihood setting needs each document's "
                                         "question likelihood (nll)")
                    cache_r[r] = placement.rank(r, q, docs, nll=None if nll is None else nll[e],
                                                file_order=it.get("file_order"))
                got = placement.place(name, st, q, docs, ranking=cache_r[r], order=order)
                out[s, e, j] = got["documents"].index(gold)
    return out


def landing_check(tuning: dict, base, positions, n_slots: int) -> dict:
    """How well the landing-slot estimate tracks scored tuning gains: for a run of the full
    path's :func:`posbias_nb.experiments.remedy.fix.tune_settings` (``tuning``, whose ``prompt.gold_slot``
    holds each scored prompt's landing slot) and its base log p ``(examples, gold slots)``.
    Per ranked setting: the scored and the estimated mean all-slot gain; over the settings,
    Spearman's rho between them, and whether the estimate carries the same remedy and setting
    as the scores.  Per example and setting: the estimate's error (scored less estimated), its
    mean with a 95% t interval clustered by example (the mean over settings per example)."""
    base = np.asarray(base, dtype=float)
    E, J = base.shape
    rows, scored, est_all = [], [], []
    gold = (tuning.get("prompt") or {}).get("gold_slot") or {}
    for name in RANKED:
        t = tuning.get(name)
        if not isinstance(t, dict) or not t.get("all_gain_by_example"):
            continue
        for j, st in enumerate(t["grid"]):
            k = f"{name}:{json.dumps(st, sort_keys=True)}"
            if k not in gold:
                continue
            land = np.asarray(gold[k], dtype=np.int64).reshape(1, E, J)
            g = landing_gains(base, land, positions, n_slots)["all"][0]
            sc = np.asarray(t["all_gain_by_example"][j], dtype=float)
            rows.append({"remedy": name, "setting": dict(st), "scored": float(sc.mean()),
                         "estimated": float(g.mean())})
            scored.append(sc)
            est_all.append(g)
    if len(rows) < 2:
        raise ValueError("the tuning result holds fewer than 2 scored ranked settings")
    S, G = np.array(scored), np.array(est_all)
    err = (S - G).mean(0)  # per example, over the settings
    from ...metrics import spearman

    def best(key):
        i = max(range(len(rows)), key=lambda i: rows[i][key])
        return (rows[i]["remedy"], rows[i]["setting"]) if rows[i][key] > 0 else None

    return {"settings": rows, "spearman": float(spearman([r["scored"] for r in rows],
                                                          [r["estimated"] for r in rows])),
            "error": as_interval(stats.mean_interval(err)), "examples": int(E),
            "same_carried": best("scored") == best("estimated"),
            "carried_scored": best("scored"), "carried_estimated": best("estimated")}


def tune_settings(model, part, sizes, seed, weights, info, key, remedies) -> dict:
    """The tuning part under this design (module docstring, step 1): a result shaped as
    :func:`posbias_nb.experiments.remedy.fix.tune_settings`'s for the ranked prompt remedies, whose gains
    are the landing-slot estimates (``"estimated": True``).  Cached (namespace ``fix-fast``:
    the model as it is on every tuning prompt, and the question likelihood of every example's
    documents where a setting ranks by it)."""
    fmt = part["format"]
    g = placement.grid(fmt)
    settings = [(r, dict(s)) for r in RANKED if r in remedies for s in g[r]]
    use_ql = any(s.get("ranker") == "question-likelihood" for _, s in settings)
    n_pos = len(part["positions"])

    def compute():
        from ...measure.positional import question_likelihood_ranking

        m, tok, _ = study.load(model, weights, seed)
        codec = study.codec(m, tok)
        P, A, ex, sl = [], [], [], []
        for e, it in enumerate(part["items"]):
            a = study.answer_ids(codec, it["answers"][0])
            for j, t in enumerate(it["prompts"]):
                P.append(study.encode(codec, t)), A.append(a), ex.append(e), sl.append(j)
        longest = max(len(p) + len(a) for p, a in zip(P, A))
        if info["max_length"] is not None and longest > info["max_length"]:
            raise ValueError(f"the tuning prompts are too long for {info['name']} (context "
                             f"{info['max_length']} tokens, the longest takes {longest}): "
                             "fewer --documents")
        lp = study.score_remedy(m, P, A, "ms-poe", [])[0][0]
        out = {"example": np.array(ex), "slot": np.array(sl), "base#logprob": lp}
        if use_ql:  # one short pass per document, each example's documents once
            out["nll"] = np.stack([question_likelihood_ranking(
                m, codec, it["question"], it["documents"][0])["nll"] for it in part["items"]])
        return out

    res = cache.cached("fix-fast", dict(key, part="tune", question_likelihood=use_ql), compute)
    rec = {"example": np.asarray(res["example"]), "slot": np.asarray(res["slot"])}
    E = len(part["items"])
    base = by_slot(np.asarray(res["base#logprob"]), rec["example"], rec["slot"], E, n_pos)
    need = {"curve"} if "curve-order" in remedies else set()
    if "prior-order" in remedies:
        need |= {"born", "measured"}
    qual = placement.slot_qualities(model, weights, seed, part, base, tuple(sorted(need)))
    nll = None
    if use_ql:
        nll = [{(d.title, d.text): float(v) for d, v in zip(it["documents"][0], row)}
               for it, row in zip(part["items"], np.asarray(res["nll"]))]
    land = landing_slots(part, settings, qual, nll)
    gains = landing_gains(base, land, part["positions"], part["documents"])
    ch = {"candidates": [], "prefix_reuse": None, "channel": None, "losses": [],
          "baseline_loss": None, "reason": "hidden scaling is not on the fast path"}
    out = {"channel": ch, "estimated": True,
           "base_logprob": [[float(v) for v in row] for row in base]}
    rk = [r for r in placement.rankers(fmt)
          if r != "question-likelihood" or use_ql]
    top1 = np.zeros((len(rk), E * n_pos), dtype=bool)
    for e, it in enumerate(part["items"]):
        for j, p in enumerate(part["positions"]):
            docs = it["documents"][j]
            for i, r in enumerate(rk):
                top1[i, e * n_pos + j] = docs[placement.rank(
                    r, it["question"], docs, nll=None if nll is None else nll[e],
                    file_order=it.get("file_order"))[0]] == docs[p]
    out["prompt"] = {"qualities": {q: [float(x) for x in v] for q, v in qual.items()},
                     "rankers": rk,
                     "top1": placement.ranker_top1(top1, rec["example"], rk),
                     "gold_slot": {f"{n}:{json.dumps(s, sort_keys=True)}":
                                   [int(v) for v in land[i].reshape(-1)]
                                   for i, (n, s) in enumerate(settings)}}
    for name in [r for r in RANKED if r in remedies]:
        idx = [i for i, (n, _) in enumerate(settings) if n == name]
        grid = [settings[i][1] for i in idx]
        alls = [float(gains["all"][i].mean()) for i in idx]
        mids = [float(gains["middle"][i].mean()) for i in idx]
        edges = [float(gains["edges"][i].mean()) for i in idx]
        ivs = [{k: as_interval(stats.mean_interval(gains[k2][i])) if E > 1 else None
                for k, k2 in (("middle", "middle"), ("edges", "edges"), ("all", "all"))}
               for i in idx]
        j, elig, why = _fix.pick(alls, mids, edges, "all-slots", sizes["edge_loss"])
        out[name] = {"grid": grid, "middle_gain": mids, "edge_change": edges, "all_gain": alls,
                     "intervals": ivs, "eligible": elig, "chosen": j, "reason": why,
                     "all_gain_by_example": [[float(v) for v in gains["all"][i]] for i in idx],
                     "setting": None if j is None else dict(grid[j]),
                     "params": None if j is None else
                     remedy_params(name, grid[j], out["prompt"]["qualities"])}
    return out


def judge_test_part(model, weights, seed, part, carried, setting, qualities, sizes, key) -> dict:
    """The test part under this design (module docstring, step 2), cached by example
    (namespace ``fix-fast``): for every prompt, the model as it is and the carried remedy's
    rewritten prompt, each scored (teacher-forced log p of the first gold answer) and answered
    (a greedy generation to the first line, Liu et al.'s best_subspan_em); the gold passage's
    landing slot; on the first ``sizes["timing_prompts"]`` examples, the seconds of one prompt
    at the central gold slot each way (the model as it is: one scoring pass; the remedy: its
    ranking, its placement and one scoring pass), interleaved, the order alternating.  The
    question likelihood is computed only where the carried setting ranks by it."""
    import time

    from ...measure.positional import question_likelihood_ranking
    from ...measure.scoring import score_and_generate, score_batch

    positions = part["positions"]
    n_new = int(sizes.get("max_new_tokens", prompts.TASK_DEFAULTS["max_new_tokens"]))
    timing = int(sizes["timing_prompts"])
    order = quality_orders([(carried, setting)], qualities)[0]
    loaded: dict = {}

    def ready():
        if not loaded:
            m, tok, _ = study.load(model, weights, seed)
            codec = study.codec(m, tok)
            loaded.update(m=m, codec=codec, stop=study.first_line_done(codec),
                          eos=study.eos_ids(m, codec.tok))
        return loaded

    def likelihoods(m, codec, q, docs):
        """Each document's question likelihood by its ``(title, text)``, where the carried
        setting ranks by it (else None): one pass a document, independent of its slot."""
        if setting.get("ranker") != "question-likelihood":
            return None
        got = question_likelihood_ranking(m, codec, q, docs)["nll"]
        return {(d.title, d.text): float(v) for d, v in zip(docs, got)}

    def ranked(m, codec, q, docs, file_order, nll=None):
        if nll is None:
            nll = likelihoods(m, codec, q, docs)
        ranking = placement.rank(setting["ranker"], q, docs, nll=nll, file_order=file_order)
        return placement.place(carried, setting, q, docs, ranking=ranking, order=order)

    def one(e: int) -> dict:
        L = ready()
        m, codec = L["m"], L["codec"]
        it = part["items"][e]
        ans = study.answer_ids(codec, it["answers"][0])
        nll = likelihoods(m, codec, it["question"], it["documents"][0])  # once, every slot
        placed = [ranked(m, codec, it["question"], it["documents"][j], it.get("file_order"), nll)
                  for j in range(len(positions))]
        texts = [p["prompt"] for p in placed]
        scored = {}
        for t in sorted(set(texts) | set(it["prompts"])):  # identical prompts scored once
            lps, g = score_and_generate(m, study.encode(codec, t), [ans], n_new, stop=L["stop"],
                                        eos=L["eos"])
            scored[t] = (float(lps[0]), bool(qa.best_subspan_em(codec.decode(g),
                                                                list(it["answers"]))))
        out = {"logprob": np.array([scored[t][0] for t in texts]),
               "correct": np.array([scored[t][1] for t in texts]),
               "base_logprob": np.array([scored[t][0] for t in it["prompts"]]),
               "base_correct": np.array([scored[t][1] for t in it["prompts"]]),
               "gold_slot": np.array([p["documents"].index(it["documents"][j][positions[j]])
                                      for j, p in enumerate(placed)], dtype=np.int64),
               "example": np.full(len(positions), e, dtype=np.int64),
               "slot": np.arange(len(positions), dtype=np.int64)}
        if e < timing:
            j = len(positions) // 2
            docs = it["documents"][j]
            sec = np.zeros(2)
            for who in ((0, 1) if e % 2 == 0 else (1, 0)):
                t0 = time.perf_counter()
                if who == 0:
                    score_batch(m, [study.encode(codec, it["prompts"][j])], [ans])
                else:
                    p = ranked(m, codec, it["question"], docs, it.get("file_order"))
                    score_batch(m, [study.encode(codec, p["prompt"])], [ans])
                sec[who] = time.perf_counter() - t0
            out["seconds"] = sec
        return out

    def compute():
        got = [one(e) for e in range(len(part["items"]))]
        out = {n: np.concatenate([g[n] for g in got]) for n in got[0] if n != "seconds"}
        out["seconds"] = np.stack([g["seconds"] for g in got if "seconds" in g])
        return out

    n = len(positions)

    def take(a, e: int) -> dict:
        out = {k: np.asarray(v)[e * n:(e + 1) * n] for k, v in a.items() if k != "seconds"}
        if e < timing:
            out["seconds"] = np.asarray(a["seconds"])[e]
        return out

    k = dict(key, part="test", carried=carried, setting=setting, max_new_tokens=n_new,
             timing=timing, slot_order=None if order is None else [int(v) for v in order])
    return cache.cached("fix-fast", k, compute,
                        parts=cache.Parts(len(part["items"]), one, take))


def judged_claims(res, carried, setting, part) -> dict:
    """The test part's statistics of the carried remedy, with the keys of
    :func:`posbias_nb.experiments.remedy.fix.evaluate`'s for a prompt remedy (its page and figure
    read them); no Holm family (one remedy is tested)."""
    n_pos = len(part["positions"])
    n_ex = len(part["items"])
    sl = gold_slot_groups(n_pos)

    def mat(name, dtype=float):
        return by_slot(np.asarray(res[name], dtype=dtype), res["example"], res["slot"], n_ex,
                        n_pos)

    lp, ok, b_lp, b_ok = mat("logprob"), mat("correct"), mat("base_logprob"), mat("base_correct")
    d = lp - b_lp
    every, mid = d.mean(1), d[:, sl["middle"]].mean(1)
    sec = np.asarray(res["seconds"], dtype=float)
    iv = as_interval

    def per_slot(M):
        return [iv(stats.mean_interval(M[:, j])) for j in range(n_pos)]

    def acc(M):
        return [iv(stats.proportion_interval(int(M[:, j].sum()), n_ex)) for j in range(n_pos)]

    return {"base": {"logprob": per_slot(b_lp), "accuracy": acc(b_ok)}, "n_examples": n_ex,
            carried: {
                "logprob": per_slot(lp), "logprob_change": per_slot(d), "accuracy": acc(ok),
                "middle_gain_per_example": [float(v) for v in mid],
                "middle_gain": iv(stats.mean_interval(mid)),
                "all_gain_per_example": [float(v) for v in every],
                "all_gain": iv(stats.mean_interval(every)),
                "edge_change": iv(stats.mean_interval(d[:, sl["edges"]].mean(1))),
                "accuracy_change": [iv(stats.paired_proportion_interval(ok[:, j], b_ok[:, j]))
                                    for j in range(n_pos)],
                "base_logprob": per_slot(b_lp), "base_accuracy": acc(b_ok),
                "accuracy_kind": "best_subspan_em of a greedy generation (Liu et al.)",
                "gold_slot": [int(v) + 1 for v in np.asarray(res["gold_slot"])],
                "cost": {"nll_change": None, "nll_base": None,
                         "nll_reason": "not measured: a prompt remedy leaves the model as it "
                                       "is, so its next-token loss on text cannot move",
                         # the scoring pass, and one short pass a document to rank by the
                         # question likelihood
                         "passes": 1 + (int(part["documents"]) if setting["ranker"] ==
                                        "question-likelihood" else 0),
                         "latency_ratio": iv(tuple(np.exp(v) for v in stats.mean_interval(
                             np.log(sec[:, 1] / sec[:, 0])))),
                         "seconds_base": float(np.median(sec[:, 0])),
                         "seconds": float(np.median(sec[:, 1])), "peak_mib_change": None,
                         "windows": 0, "prompts": int(len(sec)),
                         "latency_includes": "the ranking, the placement and the scoring pass"},
                "verdict": None, "adjusted": None, "p_holm": None, "level": None}}


def fix(model, data, documents: int | None = None, examples: int | None = None,
        seed: int = prompts.FIX_DEFAULTS["seed"], weights: str = "pretrained", quick: bool = False,
        edge_loss: float = prompts.FIX_DEFAULTS["edge_loss"],
        test_share: float = prompts.FIX_DEFAULTS["test_share"], progress: bool = False,
        remedies=None, force: bool = False) -> Result:
    """:func:`posbias_nb.experiments.remedy.fix.fix` under this design (module docstring): the same
    split, sizes, grids, refusals and result, the ranked prompt remedies alone (``remedies``:
    among :data:`RANKED`, default all four), tuned by the landing slot, the carried remedy
    alone measured on the test part.  The result's ``meta["design"]`` is ``"fix-fast"``."""
    from ... import __version__

    sel = _fix.select_remedies(list(RANKED) if remedies is None else remedies)
    bad = [r for r in sel if r not in RANKED]
    if bad:
        raise ValueError(f"--fast searches the ranked prompt remedies ({', '.join(RANKED)}); "
                         f"{', '.join(bad)} is not one")
    sizes = dict(prompts.FIX_QUICK if quick else prompts.FIX_DEFAULTS)
    path = Path(data)
    E = sizes["examples"] if examples is None else positive_int("examples", examples,
                                                                minimum=4)
    if not np.isfinite(float(edge_loss)) or float(edge_loss) < 0:
        raise ValueError(f"edge_loss must be a non-negative number of nats, got {edge_loss!r}")
    sizes["edge_loss"] = float(edge_loss)
    fmt, exs = qa.read_task_file(path)
    if fmt == "liu-kv":
        raise ValueError(f"{path.name} is a key-value file; --fast places documents: give a "
                         "question-answering file")
    if documents is not None:
        k = positive_int("documents", documents, minimum=2)
    elif fmt == "plain":
        k = None
    else:
        k = prompts.QUICK_DOCUMENTS if quick else sizes["documents"]
    if k is not None:
        sizes["documents"] = k
    chosen = study.draw_examples(len(exs), E, int(seed))
    if len(chosen) < 4:
        raise ValueError(f"{path.name} holds {len(exs)} examples; fix needs 4 or more")
    tune_i, test_i = _fix.split(len(chosen), test_share, seed)
    if len(test_i) < _fix.MIN_TEST and not force:
        raise ValueError(
            f"{path.name}: {len(chosen)} examples give a test part of {len(test_i)}; fix needs "
            f"a test part of at least {_fix.MIN_TEST} (about "
            f"{int(np.ceil(_fix.MIN_TEST / float(test_share)))} examples): give more, or --force")
    tune_idx, test_idx = [int(chosen[i]) for i in tune_i], [int(chosen[i]) for i in test_i]
    n_slots = k if k is not None else min(len(exs[i].records) for i in chosen)
    pos = _fix.fix_positions(n_slots)
    info = entry.checked(model, weights, 2, 1, seed)
    key = entry.run_key(info, weights, 0, None, seed, text=False, definition=DEFINITION,
                        data=file_sha256(path), format=fmt, documents=k, positions=pos,
                        tune=tune_idx, test=test_idx, sizes=sizes)
    tune_part = prompts.prepare(path, k, pos, None, None, seed, fmt, select=tune_idx,
                              pool_exclude=test_idx)
    choice = tune_settings(model, tune_part, sizes, seed, weights, info, key, sel)
    live = [r for r in sel if choice[r]["chosen"] is not None]
    carried = max(live, key=lambda r: choice[r]["all_gain"][choice[r]["chosen"]], default=None)
    judged = {"n_examples": len(test_idx)}
    if carried is not None:
        test_part = prompts.prepare(path, k, pos, None, None, seed, fmt, select=test_idx,
                                  pool_exclude=tune_idx)
        setting = dict(choice[carried]["setting"])
        res = judge_test_part(model, weights, seed, test_part, carried, setting,
                         choice["prompt"]["qualities"], sizes, key)
        judged = judged_claims(res, carried, setting, test_part)
    picked = _fix.select_one(choice, judged, k if k is not None else len(pos))
    if picked["power"] is not None:
        picked["power"]["from"] += " (landing-slot estimate: a lower bound of the spread)"
    picked["words"] = _fix.verdict_words(picked["verdict"], picked["power"])
    winner = picked["carried"] if picked["verdict"] == "holds" else None
    table = {c: [] for c in ("remedy", "gold_slot", "setting", "logprob", "logprob_low",
                             "logprob_high", "change", "change_low", "change_high")}
    if carried is not None:
        for j, p in enumerate(pos):
            iv, dv = judged[carried]["logprob"][j], judged[carried]["logprob_change"][j]
            for c, v in zip(table, (carried, p + 1, json.dumps(choice[carried]["setting"]),
                                    iv["estimate"], iv["low"], iv["high"], dv["estimate"],
                                    dv["low"], dv["high"])):
                table[c].append(v)
    meta = {"command": "fix", "design": "fix-fast", "model": info["name"],
            "model_argument": str(model), "fingerprint": info["fingerprint"],
            "weights": weights, "data": path.name, "data_sha256": file_sha256(path),
            "format": fmt, "documents": k, "gold_slots": [p + 1 for p in pos],
            "middle_slots": [pos[j] + 1 for j in gold_slot_groups(len(pos))["middle"]],
            "seed": int(seed), "quick": bool(quick), "fast": True, "sizes": sizes,
            "edge_loss": float(edge_loss), "test_share": float(test_share),
            "dummy": f"{qa.DUMMY_DOCUMENT.title}: {qa.DUMMY_DOCUMENT.text}",
            "definition": DEFINITION, "level": 0.95, "version": __version__, "remedies": list(sel),
            "scoring": "test part: teacher-forced log p of the file's first gold answer and "
                       "best_subspan_em of a greedy generation (Liu et al.), the carried "
                       "remedy's prompt against the model as it is; tuning part: no rewritten "
                       "prompt scored (landing-slot estimates)",
            "rule_name": "select-one", "power": picked["power"],
            "rule": "the fast path (design fix-fast): on the tuning part each setting's log p "
                    "is estimated by the model as it is with the gold passage at the slot the "
                    "setting puts it in; per remedy the setting with the largest mean estimated "
                    "gain over all gold slots; the remedy with the largest such gain (above 0) "
                    "is carried to the test part alone and scored there: its mean all-slot "
                    "gain per example greater than 0, one-sided Student t at 0.05 over "
                    "examples, a sign-flip permutation test beside it; no other remedy is "
                    "measured on the test part",
            **entry.library_versions()}
    data_out = dict(table, split={"seed": int(seed), "examples": len(chosen),
                                  "tune_lines": [exs[i].line for i in tune_idx],
                                  "test_lines": [exs[i].line for i in test_idx],
                                  "tune": tune_idx, "test": test_idx},
                    tuning=choice, test=judged, winner=winner, selected=picked)
    return Result(data_out, meta=meta, columns=tuple(table))
