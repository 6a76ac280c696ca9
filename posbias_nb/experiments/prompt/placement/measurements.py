"""``posbias fix``'s prompt remedies measured on a part of the user's examples: the slot
qualities (the curve, the born and the measured prior), the ranking and the placement of the
documents, and each part's cached runs (:func:`on_tuning`, :func:`on_test`)."""
from __future__ import annotations

import time
import numpy as np
from .... import cache
from ....remedy_table import PROMPT as PROMPT_REMEDIES
from ....tasks import qa, reorder
from ...base import study
from ...base import prompts
from .config import BORN_ALPHA, MEASURED_PRIOR, _PRIORS, grid, rankers

__all__ = ["slot_qualities", "rank", "place", "on_tuning", "on_test", "slot_curve", "born_prior", "measured_prior"]


def slot_curve(base, positions, k) -> np.ndarray:
    """The curve's slot quality: the mean over examples of ``base`` ``(examples, gold slots)``,
    read at every slot of ``k`` by linear interpolation between the gold slots ``positions``."""
    q = np.nanmean(np.asarray(base, dtype=float), axis=0)
    return np.interp(np.arange(k), np.asarray(positions, dtype=float), q)


def _spans(codec, texts, ids) -> list:
    return [study.prompt_documents(codec, t, i)[0] for t, i in zip(texts, ids)]


def born_prior(m, spans, lengths) -> np.ndarray:
    from .... import models, theory

    lay = models.model_layout(m)
    rows: dict = {}
    out = []
    for sp, T in zip(spans, lengths):
        if T not in rows:
            r = theory.layout_influence(lay, int(T), BORN_ALPHA)
            rows[T] = r / r.sum()
        out.append(reorder.prior_slot_quality(rows[T], sp))
    return np.mean(out, axis=0)


def _measured_length(lengths) -> int:
    mult = MEASURED_PRIOR["multiple"]
    return max(mult, int(round(float(np.mean(lengths)) / mult)) * mult)


def measured_prior(model, weights, seed, spans, lengths) -> np.ndarray:
    from .... import measure

    L = _measured_length(lengths)
    prof = measure.profile(model, weights, length=L, probes=MEASURED_PRIOR["probes"],
                           batch=MEASURED_PRIOR["windows"], seed=seed)
    p = np.asarray(prof["per_sequence"], dtype=float)
    p = (p / p.sum(axis=1, keepdims=True)).mean(axis=0)
    out = []
    for sp, T in zip(spans, lengths):
        mapped = []
        for a, b in sp:
            a2 = min(L - 1, int(round(a * L / T)))
            mapped.append((a2, max(a2 + 1, min(L, int(round(b * L / T))))))
        out.append(reorder.prior_slot_quality(p, mapped))
    return np.mean(out, axis=0)


def slot_qualities(model, weights, seed, part, base, which=("curve", "born", "measured")) -> dict:
    """The slot qualities learnt on the tuning ``part`` (module docstring): ``{name: array of
    one number a slot}`` for each of ``which``; ``base`` ``(examples, gold slots)`` is the
    model's log p as it is on the part's prompts."""
    k = part["documents"]
    out = {}
    if "curve" in which:
        out["curve"] = slot_curve(base, part["positions"], k)
    if {"born", "measured"} & set(which):
        m, tok, _ = study.load(model, weights, seed)
        codec = study.codec(m, tok)
        texts = [t for it in part["items"] for t in it["prompts"]]
        ids = [study.encode(codec, t) for t in texts]
        spans, lengths = _spans(codec, texts, ids), [len(i) for i in ids]
        if "born" in which:
            out["born"] = born_prior(m, spans, lengths)
        if "measured" in which:
            out["measured"] = measured_prior(model, weights, seed, spans, lengths)
    return out


def _key_doc(d: qa.Document) -> tuple:
    return (d.title, d.text)


def rank(ranker, question, docs, *, nll=None, file_order=None) -> list[int]:
    """The documents' indices in descending relevance by ``ranker``: BM25, the file's order
    (``file_order``: the same documents as the file lists them), or the question likelihood
    (``nll``: each document's LongLLMLingua score by its ``(title, text)``, lower is more
    relevant; ties keep the given order, as
    :func:`posbias_nb.measure.positional.question_likelihood_ranking` does)."""
    if ranker == "bm25":
        return reorder.bm25_ranking(question, docs)
    if ranker == "file":
        if file_order is None:
            raise ValueError("the 'file' ranker needs the documents in the file's own order")
        where = {_key_doc(d): i for i, d in enumerate(docs)}
        return [where[_key_doc(d)] for d in file_order]
    if ranker == "question-likelihood":
        s = np.array([nll[_key_doc(d)] for d in docs], dtype=float)
        return [int(i) for i in np.argsort(s, kind="stable")]
    raise ValueError(f"unknown ranker {ranker!r}")


def place(name, setting, question, docs, *, ranking=None, order=None, model=None,
          codec=None) -> dict:
    """One prompt under the prompt remedy ``name`` at ``setting``: ``{"documents", "prompt"}``.
    A ranked remedy places ``docs`` by ``ranking`` (:func:`rank`), a quality order by ``order``
    (the relevance rank each slot receives, :func:`posbias_nb.tasks.reorder.quality_order`);
    attention sorting runs ``model``."""
    if name == "query-aware":
        return {"documents": list(docs), "prompt": reorder.query_aware_prompt(question, docs)}
    if name == "attention-sort":
        from ....measure.positional import attention_sort

        got = attention_sort(model, codec, question, docs, rounds=int(setting["rounds"]),
                             best_last=bool(setting["best_last"]))
        placed = [docs[i] for i in got["order"]]
    else:
        ranked = [docs[i] for i in ranking]
        if name == "long-context-reorder":
            placed = reorder.apply_order(ranked, reorder.long_context_reorder(len(docs)))
        elif name == "lost-in-the-middle-ranker":
            placed = reorder.apply_order(ranked, reorder.lost_in_the_middle(len(docs)))
        elif name in ("curve-order", "prior-order"):
            placed = reorder.apply_order(ranked, order)
        else:
            raise ValueError(f"unknown prompt remedy {name!r}")
    return {"documents": placed, "prompt": qa.qa_prompt(question, placed)}


def _orders(settings, qualities) -> list:
    """Each setting's quality order (the relevance rank of each slot), or None."""
    out = []
    for name, s in settings:
        if name == "curve-order":
            out.append(reorder.quality_order(qualities["curve"]))
        elif name == "prior-order":
            out.append(reorder.quality_order(qualities[s["prior"]]))
        else:
            out.append(None)
    return out


def _example(m, codec, item, positions, settings, orders, fmt, answer, generate=None):
    """One example of a part (every gold slot): under each of ``settings`` (``(name,
    setting)``), the log p of ``answer`` (ids), its greedy match, the slot the gold passage
    lands in; each ranker's top-1 hit; with ``generate`` (``(max_new_tokens, stop, eos,
    answers)``), also the model as it is, and a free generation's best_subspan_em for each.
    Identical prompts are scored once."""
    from ....measure.positional import question_likelihood_ranking

    q = item["question"]
    rk = rankers(fmt)
    S, J = len(settings), len(positions)
    nll = None
    if "question-likelihood" in rk:
        d0 = item["documents"][0]
        got = question_likelihood_ranking(m, codec, q, d0)["nll"]
        nll = {_key_doc(d): float(v) for d, v in zip(d0, got)}
    texts = np.empty((S, J), dtype=object)
    gold_at = np.zeros((S, J), dtype=np.int64)
    top1 = np.zeros((len(rk), J), dtype=bool)
    for j, p in enumerate(positions):
        docs = item["documents"][j]
        gold = docs[p]
        rankings = {r: rank(r, q, docs, nll=nll, file_order=item.get("file_order"))
                    for r in rk}
        for i, r in enumerate(rk):
            top1[i, j] = docs[rankings[r][0]] == gold
        for s, ((name, st), order) in enumerate(zip(settings, orders)):
            got = place(name, st, q, docs, ranking=rankings.get(st.get("ranker")),
                        order=order, model=m, codec=codec)
            texts[s, j] = got["prompt"]
            gold_at[s, j] = got["documents"].index(gold)
    uniq = sorted(set(texts.reshape(-1).tolist()) |
                  (set(item["prompts"]) if generate is not None else set()))
    ids = {t: study.encode(codec, t) for t in uniq}
    scored = {}
    if generate is None:
        lp, ok = study.score_remedy(m, [ids[t] for t in uniq], [answer] * len(uniq), "ms-poe", [])
        scored = {t: (float(a), bool(b), None) for t, a, b in zip(uniq, lp[0], ok[0])}
    else:
        from ....measure.scoring import score_and_generate

        n_new, stop, eos, answers = generate
        for t in uniq:
            lps, g = score_and_generate(m, ids[t], [answer], n_new, stop=stop, eos=eos)
            out = codec.decode(g)
            scored[t] = (float(lps[0]), bool(qa.best_subspan_em(out, answers)), out)
    res = {"logprob": np.array([[scored[t][0] for t in row] for row in texts]),
           "correct": np.array([[scored[t][1] for t in row] for row in texts]),
           "gold_slot": gold_at, "top1": top1,
           "prompt_len": np.array([[len(ids[t]) for t in row] for row in texts])}
    if generate is not None:
        base = item["prompts"]
        res.update(base_logprob=np.array([scored[t][0] for t in base]),
                   base_correct=np.array([scored[t][1] for t in base]))
    return res


def _part_run(key, model, weights, seed, part, settings, qualities, fmt, generate,
              timing=0):
    """The cached measurement of ``settings`` on ``part``, by examples (:class:`cache.Parts`):
    arrays ``(settings, records)`` in the records' order (example-major), ``top1`` ``(rankers,
    records)``; namespace ``fix-test`` with ``generate`` (the test part), else ``fix-tune``."""
    positions = part["positions"]
    orders = _orders(settings, qualities)
    loaded: dict = {}

    def ready():
        if not loaded:
            m, tok, info = study.load(model, weights, seed)
            codec = study.codec(m, tok)
            loaded.update(m=m, codec=codec)
            if generate:
                loaded["gen"] = (generate, study.first_line_done(codec),
                                 study.eos_ids(m, codec.tok))
        return loaded

    def one(e: int) -> dict:
        L = ready()
        it = part["items"][e]
        ans = study.answer_ids(L["codec"], it["answers"][0])
        gen = None if not generate else (L["gen"][0], L["gen"][1], L["gen"][2],
                                         list(it["answers"]))
        r = _example(L["m"], L["codec"], it, positions, settings, orders, fmt, ans, gen)
        r["example"] = np.full(len(positions), e, dtype=np.int64)
        r["slot"] = np.arange(len(positions), dtype=np.int64)
        if timing and e < timing:
            r["seconds"] = _timed(L["m"], L["codec"], it, positions, settings, orders, fmt, ans)
        return r

    def compute():
        got = [one(e) for e in range(len(part["items"]))]
        out = {n: np.concatenate([g[n] for g in got], axis=-1)
               for n in got[0] if n != "seconds"}
        if timing:
            out["seconds"] = np.stack([g["seconds"] for g in got if "seconds" in g])
        return out

    n = len(positions)

    def take(a, e: int) -> dict:
        sl = slice(e * n, (e + 1) * n)
        out = {k: np.asarray(v)[..., sl] for k, v in a.items() if k != "seconds"}
        if timing and e < timing:
            out["seconds"] = np.asarray(a["seconds"])[e]
        return out

    def kinds() -> list:
        """What sets an example's code path apart (cache.Parts; each covers every slot):
        whether its gold answer takes several tokens (its log p sums over them)."""
        codec = ready()["codec"]
        return [{"several tokens": len(study.answer_ids(codec, it["answers"][0])) > 1}
                for it in part["items"]]

    parts = cache.Parts(len(part["items"]), one, take, kinds)
    if generate:
        return cache.cached("fix-test", key, compute, parts=parts)
    return cache.cached("fix-tune", key, compute, parts=parts)


def _timed(m, codec, item, positions, settings, orders, fmt, answer) -> np.ndarray:
    """Seconds of one prompt at the central gold slot: ``(settings, 2)``, the model as it is
    (one scoring pass) and the remedy (its ranking, its placement and one scoring pass),
    interleaved, the order alternating by setting."""
    from ....measure.positional import question_likelihood_ranking
    from ....measure.scoring import score_batch

    j = len(positions) // 2
    q, docs = item["question"], item["documents"][j]
    out = np.zeros((len(settings), 2))

    def base():
        score_batch(m, [study.encode(codec, item["prompts"][j])], [answer])

    def remedy(name, st, order):
        r = st.get("ranker")
        nll = None
        if r == "question-likelihood":
            got = question_likelihood_ranking(m, codec, q, docs)["nll"]
            nll = {_key_doc(d): float(v) for d, v in zip(docs, got)}
        ranking = None if r is None else rank(r, q, docs, nll=nll,
                                              file_order=item.get("file_order"))
        p = place(name, st, q, docs, ranking=ranking, order=order, model=m, codec=codec)
        score_batch(m, [study.encode(codec, p["prompt"])], [answer])

    for s, ((name, st), order) in enumerate(zip(settings, orders)):
        for who in ((0, 1) if s % 2 == 0 else (1, 0)):
            t0 = time.perf_counter()
            base() if who == 0 else remedy(name, st, order)
            out[s, who] = time.perf_counter() - t0
    return out


def _settings(chosen) -> list:
    return [(name, dict(s)) for name, sets in chosen.items() for s in sets]


def on_tuning(model, weights, seed, part, fmt, remedies, base, key) -> dict:
    """Every setting of the ``remedies`` (prompt remedies among :data:`PROMPT_REMEDIES`) on the
    tuning ``part``: ``{"settings": [(name, setting)], "logprob" (settings, records),
    "gold_slot", "top1" (rankers, records), "qualities", "rankers"}``.  ``base`` ``(examples,
    gold slots)`` is the model's log p as it is (the curve's quality).  Cached."""
    g = grid(fmt)
    settings = _settings({r: g[r] for r in PROMPT_REMEDIES if r in remedies})
    need = {"curve"} if "curve-order" in remedies else set()
    if "prior-order" in remedies:
        need |= set(_PRIORS)
    qual = slot_qualities(model, weights, seed, part, base, tuple(sorted(need)))
    k = dict(key, part="tune-prompt", settings=settings, born_alpha=BORN_ALPHA,
             measured_prior=MEASURED_PRIOR,
             slot_orders={q: reorder.slot_ranking(v) for q, v in qual.items()})
    res = _part_run(k, model, weights, seed, part, settings, qual, fmt, False)
    return {"settings": settings, "logprob": np.asarray(res["logprob"]),
            "gold_slot": np.asarray(res["gold_slot"]), "top1": np.asarray(res["top1"]),
            "example": np.asarray(res["example"]), "slot": np.asarray(res["slot"]),
            "qualities": {q: [float(x) for x in v] for q, v in qual.items()},
            "rankers": list(rankers(fmt))}


def on_test(model, weights, seed, part, fmt, settings, qualities, sizes, key) -> dict:
    """The ``settings`` (``[(name, setting)]``: the chosen ones, and those of the theory's
    comparisons, :data:`THEORY`) on the test ``part``, with the model as it is on the same
    prompts: log p, greedy free generation (best_subspan_em, Liu et al.'s accuracy,
    ``sizes["max_new_tokens"]`` tokens to the first line) and, on the first
    ``sizes["timing_prompts"]`` examples, the seconds of one prompt each way.  Cached."""
    settings = [(n, dict(s)) for n, s in settings]
    qual = {q: np.asarray(v, dtype=float) for q, v in qualities.items()}
    n_new = int(sizes.get("max_new_tokens", prompts.TASK_DEFAULTS["max_new_tokens"]))
    k = dict(key, part="test-prompt", settings=settings, born_alpha=BORN_ALPHA,
             slot_orders={q: reorder.slot_ranking(v) for q, v in qual.items()},
             max_new_tokens=n_new, timing=int(sizes["timing_prompts"]))
    res = _part_run(k, model, weights, seed, part, settings, qual, fmt, n_new,
                    timing=int(sizes["timing_prompts"]))
    return {n: np.asarray(v) for n, v in res.items()} | {"settings": settings}
