"""The confirmatory study's measurement: the slot qualities of a model, every arm's prompt
for each question and gold slot, and their teacher-forced log p and greedy answers, cached by
question (namespace ``confirm``)."""
from __future__ import annotations

import numpy as np

from .... import cache
from ....measure import entry
from ....tasks import qa, reorder
from ...base import prompts, study
from ...prompt import placement, realqa
from .config import _SEED, ARMS, DEFINITION, DESIGN, _checked, realqa_part

__all__ = ["qualities", "ceiling_order", "placement_orders", "GENERATED", "run", "measure"]


def qualities(model) -> dict:
    """The slot qualities of ``model`` (``{"curve", "born", "measured"}``, one number per slot
    of 10), read from the realqa chapter's test prompts and its recorded log p
    (:func:`posbias_nb.experiments.prompt.placement.slot_qualities`)."""
    d = _checked()
    M = realqa.matrices(realqa.qa_run(model))
    if list(M["positions"]) != d["positions"]:
        raise ValueError(f"the realqa run's gold slots {M['positions']} are not the design's")
    got = placement.slot_qualities(model, d["weights"], d["seed"], realqa_part(), M["logprob"])
    return {k: np.asarray(v, dtype=float) for k, v in got.items()}


def ceiling_order(docs, p: int, best: int) -> list:
    rest = docs[:p] + docs[p + 1:]
    return rest[:best] + [docs[p]] + rest[best:]


def placement_orders(item, positions, orders, best, shuffle) -> tuple:
    """Every arm's prompt for each original gold slot: ``(texts (arms, slots), gold_at (arms,
    slots), top1 (slots))``."""
    q = item["question"]
    texts = np.empty((len(ARMS), len(positions)), dtype=object)
    gold_at = np.zeros((len(ARMS), len(positions)), dtype=np.int64)
    top1 = np.zeros(len(positions), dtype=bool)
    canon = item["documents"][0]
    for j, p in enumerate(positions):
        docs = item["documents"][j]
        gold = docs[p]
        ranking = placement.rank("bm25", q, docs)
        top1[j] = docs[ranking[0]] == gold
        for a, arm in enumerate(ARMS):
            if arm == "ceiling":
                placed = ceiling_order(list(docs), p, best)
            elif arm == "shuffle":
                placed = [canon[i] for i in shuffle]
            else:
                name, st = {"primary": ("long-context-reorder", {}),
                            "haystack": ("lost-in-the-middle-ranker", {}),
                            "curve-order": ("curve-order", {}),
                            "prior-born": ("prior-order", {}),
                            "prior-measured": ("prior-order", {})}[arm]
                placed = placement.place(name, st, q, docs, ranking=ranking,
                                         order=orders.get(arm))["documents"]
            texts[a, j] = qa.qa_prompt(q, placed)
            gold_at[a, j] = placed.index(gold)
    return texts, gold_at, top1


GENERATED = ("primary", "ceiling")


def run(model) -> dict:
    """The study's measurement on ``model``: :func:`measure` on the design's questions."""
    return measure(model, _checked()["questions"])


def measure(model, select, weights: str | None = None) -> dict:
    """The design's arms on the NQ-open questions ``select`` (0-based indices into the file),
    for ``model`` (cached by question, namespace ``confirm``):
    ``base_logprob`` ``(questions, slots)`` (the model as it is), ``logprob`` ``(arms,
    questions, slots)``, ``correct`` ``(2, questions, slots)`` (the primary, the ceiling),
    ``gold_slot`` ``(arms, questions, slots)``, ``top1`` ``(questions, slots)`` (BM25 put the
    gold passage first), ``prompt_len`` ``(questions, slots)`` of the model as it is."""
    d = _checked()
    weights = d["weights"] if weights is None else weights
    qual = qualities(model)
    orders = {"curve-order": reorder.quality_order(qual["curve"]),
              "prior-born": reorder.quality_order(qual["born"]),
              "prior-measured": reorder.quality_order(qual["measured"])}
    best = int(reorder.slot_ranking(qual["curve"])[0])
    path = realqa.data_path("qa")
    select = [int(i) for i in select]
    part = prompts.prepare(path, d["documents"], d["positions"], None, None, 0, "liu-qa",
                         select=select)
    pos = d["positions"]
    key = {"def": DEFINITION, "model": model, "weights": weights, "seed": d["seed"],
           "design": DESIGN.hash, "questions": select, "orders": orders, "best": best,
           "library": entry.library_versions()}
    loaded: dict = {}

    def ready():
        if not loaded:
            m, tok, _ = study.load(model, weights, d["seed"])
            codec = study.codec(m, tok)
            loaded.update(m=m, codec=codec, stop=study.first_line_done(codec),
                          eos=study.eos_ids(m, codec.tok))
        return loaded

    def one(e: int) -> dict:
        from ....measure.scoring import score_and_generate

        L = ready()
        m, codec = L["m"], L["codec"]
        it = part["items"][e]
        shuffle = np.random.default_rng([_SEED, e]).permutation(d["documents"])
        texts, gold_at, top1 = placement_orders(it, pos, orders, best, shuffle)
        ans = study.answer_ids(codec, it["answers"][0])
        gen = {t for a in GENERATED for t in texts[ARMS.index(a)].tolist()}
        other = sorted(set(texts.reshape(-1).tolist()) - gen)
        other = sorted(set(other) | (set(it["prompts"]) - gen))
        ids = {t: study.encode(codec, t) for t in sorted(gen) + other}
        lp, ok = {}, {}
        for t in sorted(gen):
            got, g = score_and_generate(m, ids[t], [ans], int(d["max_new_tokens"]),
                                        stop=L["stop"], eos=L["eos"])
            lp[t] = float(got[0])
            ok[t] = bool(qa.best_subspan_em(codec.decode(g), list(it["answers"])))
        if other:
            got, _ = study.score_remedy(m, [ids[t] for t in other], [ans] * len(other), "ms-poe", [])
            lp.update({t: float(v) for t, v in zip(other, got[0])})
        row = lambda f, ts: np.array([f[t] for t in ts])  # noqa: E731
        return {"base_logprob": row(lp, it["prompts"])[None],
                "logprob": np.stack([row(lp, texts[a]) for a in range(len(ARMS))])[:, None],
                "correct": np.stack([row(ok, texts[ARMS.index(a)]) for a in GENERATED])[:, None],
                "gold_slot": gold_at[:, None], "top1": top1[None],
                "prompt_len": np.array([len(ids[t]) for t in it["prompts"]])[None]}

    def compute():
        got = [one(e) for e in range(len(part["items"]))]
        return {k: np.concatenate([g[k] for g in got], axis=-2) for k in got[0]}

    def take(a, e: int) -> dict:
        return {k: np.asarray(v)[..., e:e + 1, :] for k, v in a.items()}

    def kinds() -> list:
        """What sets a question's code path apart (cache.Parts; each covers every arm and
        slot): whether its gold answer takes several tokens (its log p sums over them)."""
        codec = ready()["codec"]
        return [{"several tokens": len(study.answer_ids(codec, it["answers"][0])) > 1}
                for it in part["items"]]

    parts = cache.Parts(len(part["items"]), one, take, kinds)
    return dict(cache.cached("confirm", key, compute, parts=parts))
