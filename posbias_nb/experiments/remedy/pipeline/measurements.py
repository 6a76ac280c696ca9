"""The pipeline study's measurements: the corpus, each retriever's ranking of every question
(namespace ``pipeline-retrieve``, checked up to ties), every arm's passages for a question's
retrieved set, and the scores of a setting's questions (namespace ``pipeline``, in chunks)."""
from __future__ import annotations

import hashlib

import numpy as np

from .... import cache
from ....measure import entry
from ....tasks import corpus as _corpus
from ....tasks import qa, reorder
from ...base import study
from ...prompt import realqa
from .. import confirm
from .config import (_K_MAX, _SEED, ARMS, CHUNK, DEFINITION, DESIGN, GENERATED, SHUFFLES,
                     _checked)

__all__ = ["corpus", "retrieve", "placement_orders", "measure", "run"]


def corpus() -> tuple[list, list[int], list]:
    """The design's corpus: ``(passages, gold, examples)`` of
    :func:`posbias_nb.tasks.corpus.oracle_corpus` on the oracle file (ValueError when its size
    is not the design's)."""
    d = _checked()
    passages, gold, examples = _corpus.oracle_corpus(realqa.data_path("qa"))
    if len(passages) != d["corpus"]["passages"]:
        raise ValueError(f"the corpus holds {len(passages)} passages, the design "
                         f"{d['corpus']['passages']}")
    return passages, gold, examples


def _corpus_digest(passages) -> str:
    h = hashlib.sha256()
    for p in passages:
        h.update(_corpus.passage_text(p).encode())
        h.update(b"\0")
    return h.hexdigest()


def retrieve(retriever: str) -> dict:
    """``retriever``'s ranking of every question of the file over the corpus (cached, namespace
    ``pipeline-retrieve``): ``retrieved`` ``(questions, 20)`` corpus indices, best first, and
    ``gold_rank`` (0-based; -1: not in the top 20).  Where ``make test`` re-measures it, the
    record is checked up to ties (:func:`~posbias_nb.tasks.corpus.ranking_agrees`: near-tied
    passages may come in another order on another CPU) and the recorded ranking is kept."""
    if retriever not in _corpus.RETRIEVERS:
        raise ValueError(f"unknown retriever {retriever!r}; one of "
                         f"{', '.join(_corpus.RETRIEVERS)}")
    passages, gold, examples = corpus()
    key = {"def": DEFINITION, "retriever": retriever, "corpus": _corpus_digest(passages),
           "k": _K_MAX, "library": entry.library_versions()}

    scores = {}

    def compute():
        if retriever == "bm25":
            index = _corpus.BM25Index(passages)
        else:
            from ....measure.dense import DenseIndex
            index = DenseIndex(passages)
        scores["now"] = index.scores([e.question for e in examples])
        got = _corpus.top_k(scores["now"], _K_MAX)
        return {"retrieved": got, "gold_rank": _corpus.gold_ranks(got, gold)}

    def compare(recorded, fresh):
        # a ranking is right in more than one order where scores tie: the record agrees when
        # it orders today's scores up to the rounding another CPU gives them
        return _corpus.ranking_agrees(recorded, scores["now"], gold, _tolerance(retriever))

    return dict(cache.cached("pipeline-retrieve", key, compute, compare=compare))


def _tolerance(retriever: str) -> float:
    """How far two of ``retriever``'s scores may lie apart and count as tied when its ranking
    is checked against the record: the dense retriever's measured rounding
    (:func:`posbias_nb.measure.dense.rank_tolerance`); BM25's scores are sums of float64 terms
    counted from the same tokens, so none (exact ties only)."""
    if retriever == "bm25":
        return 0.0
    from ....measure.dense import rank_tolerance
    return rank_tolerance()


def placement_orders(question: str, docs: list, orders: dict, shuffles: list) -> list:
    """Every arm's passages in prompt order for one question's retrieved ``docs`` (the
    retriever's order, best first)."""
    out = []
    for arm in ARMS:
        if arm == "retriever":
            out.append(list(docs))
        elif arm == "primary":
            out.append(reorder.reorder("long-context-reorder", docs))
        elif arm in orders:
            out.append(reorder.apply_order(docs, orders[arm]))
        else:
            out.append([docs[i] for i in shuffles[SHUFFLES.index(arm)]])
    return out


def measure(model: str, retriever: str, select) -> dict:
    """The design's arms for ``model`` on the retrieved sets of ``retriever`` for the questions
    ``select`` (0-based indices into the file), cached in chunks of :data:`CHUNK` questions
    (namespace ``pipeline``): ``logprob`` ``(arms, questions)``, ``correct`` ``(2,
    questions)`` (the retriever's order, the primary), ``gold_rank`` ``(questions,)`` (-1: the
    gold passage not retrieved), ``prompt_len`` ``(questions,)`` of the retriever's order."""
    d = _checked()
    if [model, retriever] not in [list(s) for s in d["settings"]]:
        raise ValueError(f"({model}, {retriever}) is not a setting of the design: "
                         f"{d['settings']}")
    select = [int(i) for i in select]
    passages, _, examples = corpus()
    ret = retrieve(retriever)
    k = int(d["k"])
    qual = confirm.qualities(model)
    orders = {"curve-order": reorder.quality_order(qual["curve"]),
              "prior-measured": reorder.quality_order(qual["measured"])}
    loaded: dict = {}

    def ready():
        if not loaded:
            m, tok, _ = study.load(model, d["weights"], d["seed"])
            codec = study.codec(m, tok)
            loaded.update(m=m, codec=codec, stop=study.first_line_done(codec),
                          eos=study.eos_ids(m, codec.tok))
        return loaded

    def chunk(qs: list[int]) -> dict:
        key = {"def": DEFINITION, "model": model, "retriever": retriever, "weights": d["weights"],
               "seed": d["seed"], "design": DESIGN.hash, "questions": qs, "orders": orders,
               "retrieved": np.asarray(ret["retrieved"])[qs, :k].tolist(),
               "library": entry.library_versions()}

        def one(e: int) -> dict:
            from ....measure.scoring import score_and_generate, score_batch

            L = ready()
            m, codec = L["m"], L["codec"]
            q = qs[e]
            ex = examples[q]
            docs = [passages[int(i)] for i in np.asarray(ret["retrieved"])[q, :k]]
            shuffles = [np.random.default_rng([_SEED, q, s]).permutation(k).tolist()
                        for s in range(len(SHUFFLES))]
            texts = [qa.qa_prompt(ex.question, p)
                     for p in placement_orders(ex.question, docs, orders, shuffles)]
            ans = study.answer_ids(codec, ex.answers[0])
            ids = {t: study.encode(codec, t) for t in sorted(set(texts))}
            lp, ok = {}, {}
            gen = sorted({texts[ARMS.index(a)] for a in GENERATED})
            for t in gen:
                got, g = score_and_generate(m, ids[t], [ans], int(d["max_new_tokens"]),
                                            stop=L["stop"], eos=L["eos"])
                lp[t] = float(got[0])
                ok[t] = bool(qa.best_subspan_em(codec.decode(g), list(ex.answers)))
            other = sorted(set(texts) - set(gen))
            if other:
                got, _ = score_batch(m, [ids[t] for t in other], [ans] * len(other))
                lp.update({t: float(v) for t, v in zip(other, got)})
            gr = int(ret["gold_rank"][q])
            return {"logprob": np.array([lp[t] for t in texts])[:, None],
                    "correct": np.array([ok[texts[ARMS.index(a)]] for a in GENERATED])[:, None],
                    "gold_rank": np.array([gr if gr < k else -1]),
                    "prompt_len": np.array([len(ids[texts[0]])])}

        def compute():
            got = [one(e) for e in range(len(qs))]
            return {n: np.concatenate([g[n] for g in got], axis=-1) for n in got[0]}

        def take(a, e: int) -> dict:
            return {n: np.asarray(v)[..., e:e + 1] for n, v in a.items()}

        def kinds() -> list:
            """What sets a question's code path apart: whether the gold passage was retrieved
            (the prompt holds it or not) and whether the gold answer takes several tokens."""
            codec = ready()["codec"]
            return [{"gold retrieved": 0 <= int(ret["gold_rank"][q]) < k,
                     "several tokens": len(study.answer_ids(codec, examples[q].answers[0])) > 1}
                    for q in qs]

        parts = cache.Parts(len(qs), one, take, kinds)
        return dict(cache.cached("pipeline", key, compute, parts=parts))

    got = [chunk(select[i:i + CHUNK]) for i in range(0, len(select), CHUNK)]
    return {n: np.concatenate([g[n] for g in got], axis=-1) for n in got[0]}


def run(model: str, retriever: str) -> dict:
    """The study's measurement of one setting: :func:`measure` on the design's questions for
    ``model`` (the first ``questions_per_model[model]`` of :data:`DESIGN`'s)."""
    d = _checked()
    n = int(d["questions_per_model"][model])
    return measure(model, retriever, d["questions"][:n])
