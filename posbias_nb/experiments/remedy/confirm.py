r"""Does a reorder help a real retrieval prompt?  The book's confirmatory study of the prompt
remedies (issue 53), chapter :ref:`ch-practice`.

``posbias fix --quick`` (chapter :ref:`ch-documents`) could not see what it looked
for: at 5 documents and 16 test questions the smallest gain it detects is larger than a perfect
reorder's.  This study is sized to see it.  Its design (:data:`DESIGN`, registry ``confirm``)
was fixed before any of its questions was scored, from what the book had already measured:

* **the questions**: 64 NQ-open questions (Liu et al.'s oracle file) that no chapter had used
  (:func:`questions`: a fixed permutation of the file, the questions of *Lost in the middle on
  real questions* and of ``posbias fix``'s runs left out), 10 documents a prompt, the gold
  passage at the five gold slots 1, 3, 5, 8, 10;
* **the claims, per model, declared from the curves of** :ref:`ch-realqa` **(14 questions, 10
  documents)**: both models hear the last slot best, so the primary remedy is LangChain's
  ``LongContextReorder`` at an even count (the top document last), with BM25 as the ranker (no
  model needed: what a pipeline has; the two rankers of ``posbias fix`` put the gold passage
  first equally often on its tuning prompts).  The primary claim is declared one-sided: the mean
  all-slot gain in log p per question is above 0, Student *t* at 5%
  (:func:`posbias_nb.stats.one_sided_bounds`), a sign-flip permutation test beside it.  The
  positive control is the **ceiling**: the gold passage moved to the model's best slot, what a
  perfect ranker would give.  A secondary family (Holm at 5%, two-sided intervals): Haystack's
  rule, curve-order, prior-order (born and measured prior), the primary against a **random
  shuffle** of the same documents (Cuconasu et al.'s baseline), and the two priors against the
  curve (non-inferiority within :data:`MARGIN` nats);
* **the power**: from the spread of the realqa gold-last gain, the design states the smallest
  gain its test detects with 80% power (:func:`posbias_nb.stats.detectable_effect`).

The measurement (:func:`run`) scores every arm's prompt for each question and original gold
slot (teacher-forced log p of the first gold answer, :func:`posbias_nb.measure.scoring.score_and_generate`),
and a greedy answer (Liu et al.'s ``best_subspan_em``) under the primary and the ceiling.  Entries are cached by question (namespace ``confirm``), so ``make test`` re-measures
two questions of each.  :func:`decisions` grades it.
"""
from __future__ import annotations

import numpy as np

from ... import cache, stats
from ...measure import entry
from ...tasks import qa, reorder
from ..prompt import placement, realqa
from ..base import study
from ..base import prompts
from ..base.design import Design, check

__all__ = ["DESIGN", "ARMS", "MARGIN", "questions", "qualities", "run", "measure", "gains", "decisions",
           "primary_label", "verdict_phrase"]

DEFINITION = "confirm-v1"  # bump when a definition below changes the numbers
_SEED = 20263
_N = 64
#: The arms scored on every question, in this order (the model as it is is scored beside).
ARMS = ("primary", "ceiling", "haystack", "curve-order", "prior-born", "prior-measured",
        "shuffle")
#: The non-inferiority margin of the priors against the curve (nats of the mean all-slot log p;
#: the theory family's margin of ``posbias fix``).
MARGIN = placement.THEORY["margin"]


def used_examples() -> list[int]:
    """The file's questions some chapter has scored: the pilot and test questions of
    :ref:`ch-realqa`, and those ``posbias fix`` draws at its quick and full sizes (seed 0)."""
    n = realqa.DESIGN["data"]["qa"]["examples_in_file"]
    got = set(realqa.DESIGN["pilot"]) | set(realqa.DESIGN["test"])
    for sizes in (prompts.FIX_QUICK, prompts.FIX_DEFAULTS):
        got |= {int(i) for i in study.draw_examples(n, sizes["examples"], 0)}
    return sorted(int(i) for i in got)


def questions() -> list[int]:
    """The design's questions: 0-based indices into the NQ-open oracle file, in a fixed
    permutation's order, none that another chapter scored (the pilot and test questions of
    :ref:`ch-realqa`, and those ``posbias fix`` draws at its quick and full sizes)."""
    n = realqa.DESIGN["data"]["qa"]["examples_in_file"]
    skip = set(used_examples())
    perm = np.random.default_rng([_SEED, 0xC0F]).permutation(n)
    return [int(i) for i in perm if int(i) not in skip][:_N]


#: The study's design, fixed before any of its questions was scored (registry ``confirm``).
DESIGN = Design("confirm", {
    "data": dict(realqa.DESIGN["data"]["qa"]),
    "models": ["smollm2-135m", "gemma3-270m"],
    "weights": "pretrained", "seed": 0,
    "documents": 10,
    "positions": [0, 2, 4, 7, 9],
    "questions": questions(),
    "excluded": used_examples(),
    "ranker": "bm25",
    "declared_from": "the log p curves of the realqa chapter's 14 test questions (10 documents, "
                     "the same gold slots): the last slot is each model's best (SmolLM2 -8.80 "
                     "against an all-slot mean of -9.92, Gemma-3 -6.75 against -7.50), so the "
                     "primary remedy puts the top document last",
    # the text below is the design as registered before the data (the measurement's cache key
    # holds its hash); the registry's second entry changed one thing in the code that reads it:
    # the accuracy's Wilson interval is over questions, not over prompts (decisions())
    "primary": {"arm": "primary", "remedy": "long-context-reorder",
                "setting": {"ranker": "bm25"},
                "claim": "the mean over questions of the all-slot gain (log p under the remedy "
                         "minus the model as it is, averaged over the five original gold slots) "
                         "is above 0",
                "sided": "one-sided at alpha 0.05: holds when the one-sided 95% lower t bound is "
                         "above 0, fails when the one-sided 95% upper bound is at or below 0",
                "robustness": "sign-flip permutation test of the per-question gains, one-sided, "
                              "9,999 flips, seed 0 (stats.paired_test)",
                "accuracy": "best_subspan_em of a greedy answer (32 new tokens, to the first "
                            "line) under the primary and under the ceiling, Wilson over prompts "
                            "per arm, and the paired difference (t over questions); the model as "
                            "it is gets no greedy answer here (five more generations a question: "
                            "over the budget), its log p is the claim's reference"},
    "ceiling": {"arm": "ceiling",
                "what": "the gold passage moved to the model's best slot by the realqa curve "
                        "(read between gold slots by linear interpolation), the other "
                        "documents in their order: a perfect ranker's placement",
                "claim": "all-slot gain above 0, one-sided t at alpha 0.05 (positive control: "
                         "if it does not hold, no reorder can be seen at this size)"},
    "secondary": {
        "arms": {"haystack": ["lost-in-the-middle-ranker", {"ranker": "bm25"}],
                 "curve-order": ["curve-order", {"ranker": "bm25"}],
                 "prior-born": ["prior-order", {"ranker": "bm25", "prior": "born"}],
                 "prior-measured": ["prior-order", {"ranker": "bm25", "prior": "measured"}],
                 "shuffle": ["random shuffle of the documents, one seeded permutation per "
                             "question (seed 20263), the same for every original slot", {}]},
        "qualities": "placement.slot_qualities on the realqa test prompts (the model as it is, "
                     "pretrained, seed 0): curve from their recorded log p, the born prior at "
                     "alpha 0.5, the measured Jacobian prior",
        "claims": [["haystack", "gain > 0"], ["curve-order", "gain > 0"],
                   ["prior-born", "gain > 0"], ["prior-measured", "gain > 0"],
                   ["primary - shuffle", "> 0"],
                   ["prior-born - curve-order", f"> -{MARGIN}"],
                   ["prior-measured - curve-order", f"> -{MARGIN}"]],
        "family": "Holm at alpha 0.05 over the seven claims, per model; two-sided t intervals "
                  "(stats.holm_family)"},
    "scoring": "teacher-forced log p of the file's first gold answer after 'Answer:'; identical "
               "prompts scored once",
    "power": {"from": "the per-question SD of the realqa gold-last gain (last slot minus the "
                      "all-slot mean): SmolLM2 1.30 nats, Gemma-3 0.72 nats (14 questions)",
              "detectable": "with 64 questions, one-sided t at 0.05, power 0.8: 0.41 nats "
                            "(SmolLM2) and 0.23 nats (Gemma-3); the design asks at most 0.5",
              "rule": "stats.detectable_effect(sd, 64)"},
    "alpha": 0.05,
    "max_new_tokens": 32,
    "twenty_documents": "not run: the budget of this session holds one count",
})


def _checked() -> dict:
    check(DESIGN)
    return DESIGN.as_dict()


def realqa_part():
    """The realqa chapter's test prompts (its questions, 10 documents, its gold slots): where
    the slot qualities are read, before this study's data."""
    d = realqa.DESIGN
    return prompts.prepare(realqa.data_path("qa"), d["documents"], list(d["positions"]), None,
                         None, 0, "liu-qa", select=list(d["test"]))


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
        from ...measure.scoring import score_and_generate

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


def gains(res) -> dict:
    """Per question, each arm's all-slot gain (log p under the arm minus the model as it is,
    averaged over the five original gold slots): ``{arm: (questions,)}``."""
    base = np.asarray(res["base_logprob"], dtype=float)
    lp = np.asarray(res["logprob"], dtype=float)
    return {a: (lp[i] - base).mean(axis=1) for i, a in enumerate(ARMS)}


def verdict_phrase(word: str, detectable: float) -> str:
    """A verdict word in the words a practitioner reads: "it helps" only where the claim holds,
    "it does not help" only where it fails; an inconclusive one says what the design could
    detect.

    >>> verdict_phrase("inconclusive", 0.41)
    'inconclusive: not shown to help at this size (detectable gains ≥ 0.41 nats)'
    """
    if word == "holds":
        return "holds: it helps"
    if word == "fails":
        return "fails: it does not help"
    if word == "inconclusive":
        return (f"inconclusive: not shown to help at this size (detectable gains ≥ "
                f"{detectable:.2f} nats)")
    return word


def primary_label() -> str:
    """The primary remedy in words."""
    return "LangChain's LongContextReorder (BM25 ranking, 10 documents: the top one last)"


def decisions(results: dict) -> dict:
    """The design's verdicts per model from :func:`run`'s results (``{model: run(model)}``):
    ``primary`` (one-sided bounds, verdict, permutation p, detectable effect at the measured
    spread, questions needed for 0.5 and 1.0 nats), ``ceiling`` (the same), ``secondary``
    (:func:`posbias_nb.stats.holm_family`), ``accuracy`` (Wilson over questions for the primary
    and the ceiling, their paired difference), ``top1`` (BM25's rate of the gold passage first, Wilson over questions)."""
    d = _checked()
    alpha = float(d["alpha"])
    out = {}
    for model, res in results.items():
        g = gains(res)
        n = int(g["primary"].size)

        def one_sided(x):
            iv = stats.one_sided_bounds(x, 1 - alpha)
            sd = float(np.std(x, ddof=1))
            return {"interval": iv, "two_sided": stats.mean_interval(x),
                    "verdict": stats.decide(iv),
                    "p_perm": stats.paired_test(x, np.zeros_like(x), "greater").pvalue,
                    "sd": sd, "n": n,
                    "detectable": stats.detectable_effect(sd, n, alpha),
                    "needed": {e: stats.units_needed(e, sd, alpha) for e in (0.5, 1.0)}}

        fam = {"haystack": dict(x=g["haystack"]), "curve-order": dict(x=g["curve-order"]),
               "prior-born": dict(x=g["prior-born"]),
               "prior-measured": dict(x=g["prior-measured"]),
               "primary - shuffle": dict(x=g["primary"] - g["shuffle"]),
               "prior-born - curve-order": dict(x=g["prior-born"] - g["curve-order"],
                                                threshold=-MARGIN),
               "prior-measured - curve-order": dict(x=g["prior-measured"] - g["curve-order"],
                                                    threshold=-MARGIN)}
        ok = np.asarray(res["correct"], dtype=float)
        acc = {"primary": stats.unit_proportion_interval(ok[0].mean(1)),
               "ceiling": stats.unit_proportion_interval(ok[1].mean(1)),
               "primary - ceiling": stats.mean_interval(ok[0].mean(1) - ok[1].mean(1))}
        top = np.asarray(res["top1"], dtype=bool)
        out[model] = {"primary": one_sided(g["primary"]), "ceiling": one_sided(g["ceiling"]),
                      "secondary": stats.holm_family(fam, alpha), "accuracy": acc,
                      "top1": stats.unit_proportion_interval(top.mean(1)),
                      "gains": {a: stats.mean_interval(v) for a, v in g.items()},
                      "n": n}
    return out
