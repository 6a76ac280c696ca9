"""The fast path's measurements: where each ranked setting lands the gold passage on the tuning
part, the tuning and the test part's scores, each cached (namespace ``fix-fast``)."""
from __future__ import annotations

import json
import numpy as np
from .... import cache, stats
from ....tasks import qa, reorder
from .. import fix as _fix
from ...prompt import placement
from ...base import study
from ...base import prompts
from .config import RANKED
from .statistics import as_interval, by_slot, landing_gains

__all__ = ["landing_slots", "tune_settings"]


def remedy_params(name, setting, qualities) -> dict:
    """A ranked remedy's remedy-file parameters (:mod:`posbias_nb.models.remedy_file`): its
    setting, and for a quality order the slot quality it learnt."""
    p = dict(setting)
    if name == "curve-order":
        p["slot_quality"] = list(qualities["curve"])
    elif name == "prior-order":
        p["slot_quality"] = list(qualities[setting["prior"]])
    return p

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
        from ....measure.positional import question_likelihood_ranking

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

    from ....measure.positional import question_likelihood_ranking
    from ....measure.scoring import score_and_generate, score_batch

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
