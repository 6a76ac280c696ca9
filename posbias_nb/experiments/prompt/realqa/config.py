"""The real-questions study's configuration: Liu et al.'s vendored files and their checksums, the
locked order of their questions, the design (locked before its data) and the definition of
its Jacobian prior."""
from __future__ import annotations

from pathlib import Path
import numpy as np
from ....models.weights import file_sha256
from ...base.design import Design, check

__all__ = ["DESIGN", "data_path", "published_path", "JACOBIAN_DEFINITION", "CHAPTER"]


_DATA = Path(__file__).resolve().parents[4] / "data" / "liu2023"

_QA, _KV = "nq-open-oracle.jsonl.gz", "kv-retrieval-75_keys.jsonl.gz"

_ORDER_SEED = 20260

JACOBIAN_DEFINITION = "realqa-jacobian-v1"  # bump when jacobian_prior's measurement changes

_N_PILOT = 4

#: How many test questions: chosen from the pilot (``DESIGN["power"]``), capped by the budget.
_N_TEST = 14


def _order(n_file: int, seed: int) -> list[int]:
    return [int(i) for i in np.random.default_rng([seed, 0x51A]).permutation(n_file)]


_QA_ORDER = _order(2655, _ORDER_SEED)

_KV_ORDER = _order(500, _ORDER_SEED)

#: The chapter's design, fixed before any test question is scored (registry ``realqa``).
DESIGN = Design("realqa", {
    "data": {"qa": {"file": f"data/liu2023/{_QA}", "examples_in_file": 2655,
                    "sha256": "6a7f72b846f663a133ef952244e5a4e43f06bcf190afe34e8fbe687ce0d1653e"},
             "kv": {"file": f"data/liu2023/{_KV}", "examples_in_file": 500,
                    "sha256": "eb6d61fc3473349f2b86df76757c6ab659cc929d907d24caf1c69928e03f6203"}},
    "models": ["smollm2-135m", "gemma3-270m"],
    "documents": 10,
    "positions": [0, 2, 4, 7, 9],          # 0-based gold slots of 10: first, middle (4), last
    "middle": 4,
    "order_seed": _ORDER_SEED,             # one permutation of each file; pilot, then test
    "pilot": _QA_ORDER[:_N_PILOT],
    "test": _QA_ORDER[_N_PILOT:_N_PILOT + _N_TEST],
    "kv": {"keys": 10, "positions": [0, 2, 4, 7, 9], "test": _KV_ORDER[:_N_TEST]},
    "budget": "the pilot measured 42 s (SmolLM2) and 34 s (Gemma-3) per question of 7 prompts "
              "on 2 cores: 14 test questions take about 18 minutes cold for both models, over "
              "the issue's 8; the pilot's rule asks 14 (SmolLM2) and 4 (Gemma-3)",
    "max_new_tokens": 32,
    "distractors": "the other questions' gold passages ranked by BM25 (bm25s) against the "
                   "question, those holding a normalised gold answer as whole words dropped",
    "scoring": {"accuracy": "greedy to the first newline, best_subspan_em on the first line",
                "logprob": "teacher-forced log p of the best gold answer after 'Answer:'"},
    "prior": {"kind": "content-free rollout: theory.layout_influence of the model's layout "
                      "with the per-layer lambda_t of measure.capture (pretrained, L = 128, "
                      "8 text windows, seed 0), at each prompt's length, summed over the gold "
                      "document's tokens",
              "capture": {"length": 128, "batch": 8, "seed": 0}},
    # added after the test run was seen, before any Jacobian of a test prompt was measured
    # (registry entry of 2026-12-02): the second prior, in a family of its own
    "prior_jacobian": {"kind": "measured on each test prompt: the Frobenius norm of the "
                               "Jacobian of the last prompt token's final hidden state with "
                               "respect to each input embedding (measure.jacobian."
                               "influence_profile, target 'hidden', Rademacher probes: the "
                               "synthetic chapter's prior), summed over the gold document's "
                               "tokens (measure.span_profile), over its token count, times the "
                               "prompt's length",
                       "probes": 2, "seed": 0,
                       "budget": "one pilot prompt took 5.2 s (SmolLM2, 1209 tokens) and "
                                 "6.7 s (Gemma-3, 1140 tokens) on 2 cores: the 70 test prompts "
                                 "of each model add about 14 minutes cold",
                       # added after the trained Jacobian link was seen (registry entry of
                       # 2026-12-02): the same profile of the random-init twin (seed 0) on the
                       # same prompts, described beside it; it decides nothing
                       "born": {"weights": "random", "init_seed": 0, "decides": "nothing"}},
    "rules": {
        "position": {"statistic": "paired difference of the gold answer's log p, per test "
                                  "question: the first (last) slot minus the middle slot",
                     "threshold": 0.0, "direction": "greater", "interval": "t over questions"},
        "link": {"statistic": "Spearman between the per-position means of the prior and of "
                              "log p (retrieval.link_stats 'curve', BCa over questions)",
                 "threshold": 0.0, "direction": "greater"},
        "link_jacobian": {"statistic": "Spearman between the per-position means of the "
                                       "Jacobian prior and of log p (retrieval.link_stats "
                                       "'curve', BCa over questions)",
                          "threshold": 0.0, "direction": "greater"},
    },
    "families": {"position": [f"{m}/{e}" for m in ("smollm2-135m", "gemma3-270m")
                              for e in ("first", "last")],
                 "link": [f"{m}/curve" for m in ("smollm2-135m", "gemma3-270m")],
                 "link_jacobian": [f"{m}/jacobian" for m in ("smollm2-135m", "gemma3-270m")]},
    "alpha": 0.05,
    "power": {"target": 0.8, "from": "the pilot's first-vs-middle paired log p differences: "
                                     "the smallest n whose one-sided t test at alpha / 4 "
                                     "(Bonferroni over the family of four, a bound on Holm) "
                                     "has the target power at the pilot's effect size"},
})

#: The design as a plain read-only mapping.
CHAPTER = DESIGN.spec


def _checked():
    check(DESIGN)
    return CHAPTER


def published_path() -> Path:
    """Liu et al.'s published accuracies (``data/liu2023_published/multidoc_qa.json``, read from
    their Table 1 and Appendix G, Table 5), beside the vendored files of the design."""
    return _DATA.parent / "liu2023_published" / "multidoc_qa.json"


def data_path(which: str) -> Path:
    """The vendored file of the design (``"qa"`` or ``"kv"``), its SHA-256 checked against
    ``data/liu2023/SHA256SUMS``."""
    if which not in ("qa", "kv"):
        raise ValueError(f"which must be 'qa' or 'kv', got {which!r}")
    p = _DATA / (_QA if which == "qa" else _KV)
    sums = dict(reversed(line.split()) for line in
                (_DATA / "SHA256SUMS").read_text().splitlines() if line.strip())
    got = file_sha256(p)
    want = CHAPTER["data"][which]["sha256"]
    if sums.get(p.name) != got or got != want:
        raise ValueError(f"{p} has SHA-256 {got}; SHA256SUMS says {sums.get(p.name)}, the "
                         f"design {want}")
    return p
