r"""Lost in the middle on real questions: Liu et al.'s multi-document QA and key-value files.

Chapter :ref:`ch-realqa`.  The design is one frozen object, :data:`DESIGN` (the data files and
their SHA-256, the models, the documents per prompt and the gold positions, the pilot and the
test questions, the scoring, the prior, the families of comparisons), recorded in the registry
(:mod:`posbias_nb.experiments.base.design`) before any test question is scored.  Every measurement is
:func:`posbias_nb.experiments.prompt.user_task.task_run` (``posbias task``) on the design's questions:

* :func:`pilot`: the pilot questions (disjoint from the test ones), which chose how many test
  questions the budget must allow (:func:`power_n`);
* :func:`qa_run` and :func:`kv_run`: the test questions of the NQ-open oracle file and the
  key-value examples, the gold passage (record) moved across the design's positions;
* :func:`prior`: the content-free rollout prior of the gold document in every prompt (the
  structural theory's positional row, :func:`posbias_nb.theory.layout_influence` with each
  layer's measured :math:`\lambda_t`, summed over the document's tokens);
* :func:`jacobian_prior`: the measured influence of the gold document in every prompt (the
  Jacobian of the last prompt token's final hidden state with respect to each input embedding,
  summed over the document's tokens with :func:`posbias_nb.measure.span_profile`);
* :func:`decisions`: the pre-declared families, Holm within each.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ... import measure, models, stats, theory
from ...models.weights import file_sha256
from ...tasks import qa
from ...tasks.codec import Codec, token_span
from . import retrieval as ret
from ..base import study
from . import user_task as task_mod
from ..base.design import Design, check

__all__ = ["DESIGN", "data_path", "published_path", "pilot", "qa_run", "kv_run", "matrices", "prior",
           "gold_spans", "first_middle_last", "paired_by_slot", "power_rule", "power_n", "decisions", "link",
           "jacobian_prior"]

_DATA = Path(__file__).resolve().parents[3] / "data" / "liu2023"
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


def _run(model, which, select, positions):
    d = _checked()
    if which == "qa":
        return task_mod.task_run(model, data_path("qa"), documents=d["documents"],
                                 positions=list(positions), select=list(select),
                                 max_new_tokens=d["max_new_tokens"], examples=None)
    return task_mod.task_run(model, data_path("kv"), keys=d["kv"]["keys"],
                             positions=list(positions), select=list(select),
                             max_new_tokens=d["max_new_tokens"], examples=None)


def pilot(model):
    """The pilot questions (QA file), every position and both reference lines."""
    d = _checked()
    return _run(model, "qa", d["pilot"], d["positions"])


def qa_run(model):
    """The test questions of the QA file: accuracy and log p per gold position."""
    d = _checked()
    return _run(model, "qa", d["test"], d["positions"])


def kv_run(model):
    """Liu et al.'s 75-key examples, cut to the design's keys, the gold record moved."""
    d = _checked()
    return _run(model, "kv", d["kv"]["test"], d["kv"]["positions"])


def matrices(res) -> dict:
    """``(questions, positions)`` tables of log p and of correctness from a task result (the
    document rows only), in the design's question and position order."""
    ex = res["examples"]
    pos = [int(g) - 1 for g in res.meta["gold_documents"]]
    lines = list(res.meta["example_lines"])
    E, P = len(lines), len(pos)
    lp, ok = np.full((E, P), np.nan), np.full((E, P), np.nan)
    for r in ex:
        if r["setting"] != "documents":
            continue
        i, j = lines.index(r["example_line"]), pos.index(int(r["gold_document"]) - 1)
        lp[i, j] = r["logprob"]
        ok[i, j] = float(r["outcome"] == "answer")
    if np.isnan(lp).any():
        raise ValueError("a prompt of the run is missing from its examples")
    return {"logprob": lp, "correct": ok, "positions": pos}


def first_middle_last(res) -> dict:
    """The paired log p differences per question: first minus middle, last minus middle."""
    M = matrices(res)
    pos = M["positions"]
    mid = pos.index(int(CHAPTER["middle"]))
    lp = M["logprob"]
    return {"first": lp[:, 0] - lp[:, mid], "last": lp[:, -1] - lp[:, mid]}


def paired_by_slot(res) -> dict:
    """The gold answer's log p at each gold slot minus at the middle slot, paired by question,
    with its 95% t interval over questions (:func:`posbias_nb.stats.mean_interval`): the quantity
    the position family decides, drawn for every slot.  Returns ``slots`` (1-based), ``diff``,
    ``low``, ``high`` (0 at the middle slot, by construction), ``n`` questions and ``middle``
    (1-based)."""
    M = matrices(res)
    lp, pos = M["logprob"], M["positions"]
    mid = pos.index(int(CHAPTER["middle"]))
    ivs = [stats.mean_interval(lp[:, j] - lp[:, mid]) if j != mid else (0.0, 0.0, 0.0)
           for j in range(len(pos))]
    return dict(slots=np.array(pos) + 1, diff=np.array([float(v[0]) for v in ivs]),
                low=np.array([float(v[1]) for v in ivs]),
                high=np.array([float(v[2]) for v in ivs]), n=int(lp.shape[0]),
                middle=pos[mid] + 1)


def power_rule() -> dict:
    """The design's power rule as :func:`power_n`'s keywords: the target power, and the
    one-sided level, ``alpha`` over the position family's claims (Bonferroni, a bound on
    Holm)."""
    d = _checked()
    return {"target": float(d["power"]["target"]),
            "alpha": float(d["alpha"]) / len(d["families"]["position"])}


def power_n(diffs, *, target: float, alpha: float, n_max: int = 400) -> int:
    """The smallest n at which a one-sided t test at ``alpha`` has power ``target`` for the
    effect size of ``diffs`` (mean over standard deviation; noncentral t, ``scipy.stats``).
    The design's rule: ``power_n(diffs, **power_rule())``.

    Raises
    ------
    ValueError
        Fewer than 2 differences, or no spread; no n up to ``n_max`` reaches the power.
    """
    from scipy import stats as st

    x = np.asarray(diffs, dtype=float)
    if x.size < 2 or not x.std(ddof=1) > 0:
        raise ValueError(f"power_n needs at least 2 differences with spread, got {x.tolist()}")
    d = abs(float(x.mean())) / float(x.std(ddof=1))
    for n in range(2, n_max + 1):
        crit = st.t.ppf(1 - alpha, n - 1)
        if st.nct.sf(crit, n - 1, d * math.sqrt(n)) >= target:
            return n
    raise ValueError(f"no n up to {n_max} reaches power {target:g} at alpha {alpha:g} for the "
                     f"effect size {d:.3g}")


def prepared(res) -> dict:
    """The prompts of the QA run ``res`` (:func:`posbias_nb.experiments.base.prompts.prepare`): its
    questions, documents and gold slots, in its order."""
    if res.meta["format"] != "liu-qa":
        raise ValueError(f"a QA run is needed, got a {res.meta['format']!r} run")
    path = data_path("qa")
    _, exs = qa.read_task_file(path)
    where = {int(e.line): i for i, e in enumerate(exs)}
    select = [where[int(line)] for line in res.meta["example_lines"]]
    return task_mod.prepare(path, int(res.meta["documents"]),
                            [int(g) - 1 for g in res.meta["gold_documents"]], None, None, 0,
                            None, select)


def gold_spans(model, res) -> np.ndarray:
    """``(questions, positions, 3)``: for every document prompt of the QA run ``res`` (its
    questions, documents and gold slots, in its order), the gold document's token span
    ``[a, b)`` and the prompt's length in tokens, as the model's tokenizer encodes it."""
    P = prepared(res)
    tok = models.packaged_tokenizer(model)
    codec = Codec(tok, len(tok))
    out = np.zeros((len(P["items"]), len(P["positions"]), 3), dtype=np.int64)
    for i, it in enumerate(P["items"]):
        for j, (p, text) in enumerate(zip(P["positions"], it["prompts"])):
            full, off = codec.render(text)
            ids, offs = codec.encode(full, prompt=True)
            c0 = text.index(f"Document [{p + 1}](Title:")
            nxt = text.find(f"\nDocument [{p + 2}](Title:", c0)
            c1 = nxt if nxt >= 0 else text.index("\n\nQuestion:", c0)
            a, b = token_span(offs, off + c0, off + c1)
            out[i, j] = (a, b, len(ids))
    return out


def prior(model, res) -> np.ndarray:
    """``(questions, positions)``: the content-free rollout prior of the gold document in each
    prompt, per token (the document's share of the row, :func:`posbias_nb.measure.span_profile`,
    over its token count, times the prompt's length: 1 is the prompt's average token)."""
    c = _checked()["prior"]["capture"]
    cap = measure.capture(model, "pretrained", length=c["length"], batch=c["batch"],
                          seed=c["seed"])
    lam = np.asarray(cap["lam"], dtype=np.float64)
    lay = models.config_layout(models.build_config(model))
    if lay.depth != lam.size:
        raise ValueError(f"{model}: a layout of {lay.depth} layers for {lam.size} values of "
                         "lambda")
    S = gold_spans(model, res)
    rows = {}
    out = np.zeros(S.shape[:2])
    for i in range(S.shape[0]):
        for j in range(S.shape[1]):
            a, b, T = (int(v) for v in S[i, j])
            if T not in rows:
                rows[T] = theory.layout_influence(lay, T, lam)
            out[i, j] = measure.span_profile(rows[T], [(a, b)])[0] / (b - a) * T
    return out


def jacobian_prior(model, res, progress: bool = False, weights: str = "pretrained") -> np.ndarray:
    """``(questions, positions)``: the measured influence of the gold document in each prompt of
    the QA run ``res``, per token (the design's ``prior_jacobian``: the Jacobian profile of the
    prompt's last hidden state, :func:`posbias_nb.measure.jacobian.influence_profile`, its share
    on the document by :func:`posbias_nb.measure.span_profile`, over the document's token count,
    times the prompt's length: 1 is the prompt's average token).  Cached, one profile per
    prompt; the probes of prompt ``k`` (question-major) are seeded ``seed + k``.
    ``weights="random"``: the random-init twin (the design's ``born`` initialisation seed) read
    on the same prompts, a description beside the trained one that decides nothing."""
    from ... import cache
    from ...measure import entry

    c = _checked()["prior_jacobian"]
    S = gold_spans(model, res)
    if weights not in ("pretrained", "random"):
        raise ValueError(f"weights must be 'pretrained' or 'random', got {weights!r}")
    init = int(c["born"]["init_seed"]) if weights == "random" else 0
    info = entry.checked(model, weights, 2, 1, init)
    params = {"model": info["name"], "fingerprint": info["fingerprint"],
              "data": file_sha256(data_path("qa")), "lines": [int(x) for x in
                                                         res.meta["example_lines"]],
              "documents": int(res.meta["documents"]),
              "gold": [int(g) for g in res.meta["gold_documents"]],
              "probes": int(c["probes"]), "seed": int(c["seed"]), "def": JACOBIAN_DEFINITION,
              **({} if weights == "pretrained" else {"weights": weights, "init_seed": init}),
              **entry.library_versions()}

    P = prepared(res)
    texts = [t for it in P["items"] for t in it["prompts"]]
    loaded: dict = {}

    def one(k: int) -> dict:
        """Prompt ``k``'s profile alone (its probes seeded ``seed + k``): the whole entry is
        these rows end to end, so a re-measurement can sample prompts (cache.Parts)."""
        from ...measure.jacobian import influence_profile

        if not loaded:
            m, tok, _ = study.load(model, weights, init)
            loaded.update(m=m, codec=Codec(tok, m.get_input_embeddings().num_embeddings))
        ids = study.encode(loaded["codec"], texts[k])
        r = influence_profile(loaded["m"], np.asarray(ids)[None], target="hidden",
                              method="probes", probes=int(c["probes"]), seed=int(c["seed"]) + k)
        return {"row": np.asarray(r["per_sequence"][0], dtype=np.float64)}

    def compute():
        import sys

        from tqdm import tqdm

        rows = [one(k)["row"] for k in tqdm(range(len(texts)), disable=not progress,
                                            file=sys.stderr, leave=False, desc="jacobian",
                                            unit="prompt")]
        return {"flat": np.concatenate(rows), "lens": np.array([len(r) for r in rows])}

    def take(arrays, k: int) -> dict:
        ends = np.cumsum(arrays["lens"])
        return {"row": np.asarray(arrays["flat"][ends[k] - arrays["lens"][k]:ends[k]])}

    got = cache.cached("realqa-jacobian", params, compute,
                       parts=cache.Parts(len(texts), one, take))
    ends = np.cumsum(got["lens"])
    out = np.zeros(S.shape[:2])
    for k, (e, n) in enumerate(zip(ends, got["lens"])):
        i, j = divmod(k, S.shape[1])
        a, b, T = (int(v) for v in S[i, j])
        if int(n) != T:
            raise RuntimeError(f"prompt {k}: a profile of {int(n)} tokens for a prompt of {T}")
        row = np.asarray(got["flat"][e - n:e], dtype=np.float64)
        out[i, j] = measure.span_profile(row, [(a, b)])[0] / (b - a) * T
    return out


def link(model, res, level: float = 0.95, prior_values=None) -> dict:
    """The prior against the task curve: :func:`posbias_nb.experiments.prompt.retrieval.link_stats`
    ``"curve"`` (Spearman of the per-position means, BCa over questions), at ``level``.
    ``prior_values``: :func:`prior` of this model and run, when already computed."""
    pri = prior(model, res) if prior_values is None else np.asarray(prior_values, dtype=float)
    return ret.link_stats(pri, matrices(res)["logprob"], "curve", seed=0, level=level)


def decisions(runs: dict) -> dict:
    """The pre-declared families, ``runs``: model -> its :func:`qa_run`.  ``position``: Holm over
    the four paired t claims (:func:`posbias_nb.stats.holm_family`); ``link``: Holm's step-down
    over the two bootstrap claims on their BCa intervals (:func:`posbias_nb.stats.holm_intervals`:
    both at ``1 - alpha / 2``, the one left at ``1 - alpha`` once the other holds);
    ``link_jacobian``: the same for :func:`jacobian_prior`."""
    d = _checked()
    R = d["rules"]
    claims = {}
    for name in d["families"]["position"]:
        m, e = name.split("/")
        claims[name] = dict(x=first_middle_last(runs[m])[e], threshold=R["position"]["threshold"],
                            direction=R["position"]["direction"])
    out = {"position": stats.holm_family(claims, alpha=d["alpha"])}

    for fam, of in (("link", prior), ("link_jacobian", jacobian_prior)):
        out[fam] = link_family(runs, d["families"][fam], of, R[fam], d["alpha"])
    return out


def link_family(runs, names, prior_of, rule, alpha) -> dict:
    """Holm's step-down (:func:`posbias_nb.stats.holm_intervals`) over the link claims
    ``names`` (``model/...``), each prior computed once per model by ``prior_of``."""
    pri = {n.split("/")[0]: prior_of(n.split("/")[0], runs[n.split("/")[0]]) for n in names}

    def interval_at(name, level):
        m = name.split("/")[0]
        v = link(m, runs[m], level=level, prior_values=pri[m])
        return (v["estimate"], v["low"], v["high"]) if v["low"] is not None else (np.nan,) * 3

    return stats.holm_intervals(interval_at, names, alpha=alpha, threshold=rule["threshold"],
                                direction=rule["direction"])
