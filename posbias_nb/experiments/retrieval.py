r"""Retrieval tasks and their scores: does the influence prior decide what a model loses?

Chapter *From prior to behaviour* (``book/retrieval.md``).  Two tasks, each built so that **only the
position of the gold item changes** from one prompt to the next:

* ``task="kv"`` — key–value retrieval as in Liu et al. (2023, "Lost in the Middle";
  ``nelson-liu/lost-in-the-middle``): ``n`` random pairs of 8-hex-digit strings in a JSON object,
  then a question about one key, in their prompt format::

      Extract the value corresponding to the specified key in the JSON object below.

      JSON data:
      {"k1": "v1",
       "k2": "v2",
       ...
       "kn": "vn"}

      Key: "k"
      Corresponding value:

  Example ``e`` draws one set of ``n`` pairs; its first pair is the gold pair.  For gold position
  ``k`` (``k = 0 .. P-1``) the gold pair is moved to item ``round(k (n-1)/(P-1))`` and the other
  pairs keep their relative order, so the *same* set of pairs appears at every position.
* ``task="needle"`` — a needle in a haystack of real prose: the haystack is a run of consecutive
  sentences of :func:`posbias_nb.measure.stdlib_corpus` (a seeded start per example), the needle
  ``"The secret code for K is V."`` (``K``, ``V`` random hex) is inserted between sentences at
  depth ``k/(P-1)`` (boundary ``round(k S/(P-1))`` of the ``S`` sentences), and the question
  ``"What is the secret code for K?"`` follows.  Same haystack and needle at every depth.

**Length rule** (``length`` = the approximate prompt length in tokens, chat template included).
``kv``: the number of pairs is ``n = 2 + round((length - t_2) / ((t_8 - t_2) / 6))`` where
``t_m`` is the token count of the example-0 prompt with its first ``m`` pairs.  ``needle``:
sentences are added (whole) until the haystack holds ``length - t_0`` tokens, ``t_0`` the prompt
with an empty haystack (sentence tokens counted one by one).  Both need at least ``P`` items
(distinct gold positions), else ValueError.

**Prompts and answers.**  A tokenizer with a chat template gets the task text as one user turn and
``add_generation_prompt=True``; without a template the text is used as is (with the tokenizer's
special tokens, e.g. Gemma's ``<bos>``).  The answer is then started by a short *lead*, part of
the prompt (after the generation prompt, or after a space): ``"`` for kv (the value's opening
quote, as the JSON writes it) and ``The secret code for K is`` for needle; the answer is ``V``
(kv) or ``" V"`` (needle).  So the last prompt token is the one that predicts the value's first
token, whatever the model's answer style.  Prompt and answer are tokenized **separately** (the
answer without special tokens).
A model without a tokenizer (random-init zoo models without a packaged tokenizer, tests) reads
UTF-8 bytes, byte ``b`` as token ``b mod vocab_size``.

**Scores** (:func:`score`), per prompt ``x`` and answer ``a_1..a_m``:

.. math::
    \log p(a \mid x) = \sum_{i=1}^{m} \log p(a_i \mid x, a_{<i}),
    \qquad
    \mathrm{correct} = \prod_{i=1}^{m} [\arg\max_v p(v \mid x, a_{<i}) = a_i]

(eq. ``eq-ret-logprob``).  ``correct`` is exact match of greedy decoding of ``m`` tokens: greedy
decoding reproduces ``a`` exactly iff at every step the argmax *given the gold prefix* is the
gold token, so one teacher-forced forward pass gives both scores.

**The prior** (:func:`retrieval_link`, :func:`prior_matrices`): an influence profile
:math:`I_1 \dots I_T` of the prompt positions on the answer position (the last prompt token),
read per token of the value :math:`S_k` that sits at slot ``k``,

.. math::
    \rho_k(x) = \frac{1}{|S_k|} \sum_{j \in S_k} \frac{I_j(x)}{\sum_{i=1}^{T} I_i(x)}

(eq. ``eq-ret-share``): the *gold* reading :math:`\rho_k(x_{e,k})` (the gold value, in the
prompt where it sits at slot ``k``) and the *positional* reading (slot ``k`` holding a
distractor, mean over the other prompts of the example: a content-free prior measured in the very
prompts of the task).  ``I`` is the gradient influence ``target="argmax_prob"``, the hidden-state
Jacobian (``target="hidden"``, Hutchinson probes) or the residual-aware rollout row of the
measured :math:`A_t, \lambda_t` (:func:`posbias_nb.rollout.rollout`).  :func:`link_stats` puts
numbers with bootstrap intervals on the link.
"""
from __future__ import annotations

import sys

import numpy as np

from .. import cache, metrics
from .._validate import choice, positive_int
from ..measure import entry
from ..measure.scoring import score
from ..results import Result
from ..tasks.retrieval import (KV_INSTRUCTION, NEEDLE_INSTRUCTION, TASKS, build_prompts,
                               check_args)

__all__ = [
    "TASKS", "PRIORS", "KV_INSTRUCTION", "NEEDLE_INSTRUCTION", "LIU_MPT30B",
    "summarize", "retrieval_run", "retrieval_link",
    "link_stats", "as_matrix", "outcome_matrices", "paired_contrast", "prior_matrices",
    "edge_ratios", "CSV_COLUMNS",
]

PRIORS = ("argmax_prob", "hidden", "rollout")
_DEF_VERSION = "retrieval-v1"  # bump when the prompts or the scores change

#: Liu et al. (2023), mpt-30b-instruct, 140 keys: gold item index and accuracy (their Fig. 7).
LIU_MPT30B = {"item": [0, 34, 69, 104, 139], "n_items": 140,
              "accuracy": [1.0, 0.936, 0.886, 0.804, 0.962]}

CSV_COLUMNS = ("position", "depth", "item", "accuracy", "accuracy_low", "accuracy_high",
               "logprob", "logprob_low", "logprob_high")


# --------------------------------------------------------------------------------------------
# Summaries


def summarize(gold_index, example, values, positions: int, seed: int = 0,
              n_boot: int = 2000) -> dict:
    """Mean of ``values`` per gold position with a 95% percentile bootstrap interval over
    examples (:func:`posbias_nb.metrics.bootstrap`).  One example: the interval is the point."""
    gi, ex, v = (np.asarray(x) for x in (gold_index, example, values))
    E = int(ex.max()) + 1
    M = np.full((E, positions), np.nan)
    M[ex, gi] = v
    est, lo, hi = [], [], []
    for k in range(positions):
        col = M[:, k]
        if E >= 2:
            m, l, h = metrics.bootstrap(np.mean, col, n_boot=n_boot, seed=seed)
        else:
            m = l = h = float(col[0])
        est.append(m), lo.append(l), hi.append(h)
    return {"mean": np.array(est), "low": np.array(lo), "high": np.array(hi), "matrix": M}


# --------------------------------------------------------------------------------------------
# Loading (through the shared entry helper: checks, cache key, loaded-model memo)


def _load(model, weights: str, seed: int):
    from .. import models

    m, tok, info = entry.loaded(model, weights=weights, seed=seed, attn="eager")
    if tok is None and isinstance(model, str) and model in models.ZOO:
        try:
            tok = models.packaged_tokenizer(model)  # random twin reads the same ids
        except (ValueError, OSError, KeyError):
            tok = None
        if tok is not None and len(tok) > m.get_input_embeddings().num_embeddings:
            tok = None  # a -tiny twin: its small vocabulary reads bytes
    return m, tok, info


def _params(model, task, positions, examples, length, seed, weights) -> dict:
    task, positions, examples, length, seed = check_args(task, positions, examples, length, seed)
    info = entry.checked(model, weights, length, 1, seed)
    key = entry.run_key(info, weights, length, 1, seed, text=task == "needle", task=task,
                        positions=positions, examples=examples, definition=_DEF_VERSION)
    key.pop("batch")
    return key


def _prompts_for(model, task, positions, examples, length, seed, weights):
    m, tok, info = _load(model, weights, seed)
    P = build_prompts(tok, task, positions, examples, length, seed,
                      vocab_size=m.get_input_embeddings().num_embeddings)
    longest = max(len(r["prompt_ids"]) + len(r["answer_ids"]) for r in P["records"])
    if info["max_length"] is not None and longest > info["max_length"]:
        raise ValueError(f"length {length} gives prompts of {longest} tokens, beyond the context "
                         f"of {info['name']} ({info['max_length']} tokens)")
    return P, m


def _ragged(lists):
    lens = np.array([len(x) for x in lists], dtype=np.int64)
    flat = np.concatenate([np.asarray(x, dtype=np.int64) for x in lists]) if lists else \
        np.zeros(0, np.int64)
    return flat, lens


def _unragged(flat, lens):
    ends = np.cumsum(lens)
    return [flat[e - n:e].tolist() for e, n in zip(ends, lens)]


def _scores(model, task, positions, examples, length, seed, weights, progress) -> dict:
    params = _params(model, task, positions, examples, length, seed, weights)

    def compute():
        from tqdm import tqdm

        P, m = _prompts_for(model, task, positions, examples, length, seed, weights)
        recs = P["records"]
        lp = np.zeros(len(recs))
        ok = np.zeros(len(recs), dtype=bool)
        for i, r in enumerate(tqdm(recs, disable=not progress, file=sys.stderr, leave=False,
                                   desc=f"retrieval {task}", unit="prompt")):
            lp[i], ok[i] = score(m, r["prompt_ids"], r["answer_ids"])
        pf, pl = _ragged([r["prompt_ids"] for r in recs])
        af, al = _ragged([r["answer_ids"] for r in recs])
        return {"example": np.array([r["example"] for r in recs]),
                "gold_index": np.array([r["gold_index"] for r in recs]),
                "item": np.array([r["item"] for r in recs]),
                "span": np.array([r["span"] for r in recs]),
                "logprob": lp, "correct": ok, "prompt_flat": pf, "prompt_len": pl,
                "answer_flat": af, "answer_len": al,
                "n_items": np.array(P["n_items"] if P["n_items"] is not None else -1),
                "chat": np.array(P["chat"])}

    return cache.cached("retrieval", params, compute)


def retrieval_run(model, task: str = "kv", positions: int = 7, examples: int = 10,
                  length: int = 350, seed: int = 0, progress: bool = False,
                  weights: str = "pretrained") -> dict:
    """Retrieval accuracy and answer log-probability per gold position (chapter *From prior to
    behaviour*, eq. ``eq-ret-logprob``); the JSON that ``posbias retrieval`` prints.

    Parameters
    ----------
    model : str or path
        A zoo name or a local Hugging Face model directory.
    task : {"kv", "needle"}
        Key–value retrieval or needle in a haystack (module docstring).
    positions : int
        Number ``P >= 2`` of gold positions, first and last included.
    examples : int
        Number ``E >= 1`` of examples; each is asked at every position (``E x P`` prompts).
    length : int
        Approximate prompt length in tokens (module docstring: the length rule).
    seed : int
        Seeds the pairs, haystacks and needles (and the random init for ``weights="random"``).
    progress : bool
        A tqdm bar on stderr.
    weights : {"pretrained", "random"}
        ``"random"``: the architecture at initialization, reading the pretrained tokenizer's ids
        where the zoo packages one (same prompts).

    Returns
    -------
    dict (JSON-able)
        ``position`` (0..P-1), ``depth`` (k/(P-1)), ``item`` (index of the gold item among the
        items: pairs for kv, haystack boundary for needle, of example 0), ``accuracy``,
        ``accuracy_low``, ``accuracy_high``, ``logprob``, ``logprob_low``, ``logprob_high``
        (means over examples per position and 95% bootstrap intervals over examples);
        ``examples``: one record per prompt with ``example``, ``gold_index``, ``prompt_ids``,
        ``answer_ids``, ``logprob``, ``correct``; ``meta``.  Same seed, same output.

    Raises
    ------
    ValueError
        Unknown task or model, ``positions < 2``, ``examples < 1``, a length too small for
        the task or beyond the model's context, weights not installed.
    """
    res = _scores(model, task, positions, examples, length, seed, weights, progress)
    from .. import models

    info = models.describe(model)
    acc = summarize(res["gold_index"], res["example"], res["correct"].astype(float), positions,
                    seed=seed)
    lp = summarize(res["gold_index"], res["example"], res["logprob"], positions, seed=seed)
    prompts = _unragged(res["prompt_flat"], res["prompt_len"])
    answers = _unragged(res["answer_flat"], res["answer_len"])
    recs = [{"example": int(e), "gold_index": int(k), "prompt_ids": p, "answer_ids": a,
             "logprob": float(l), "correct": bool(c)}
            for e, k, p, a, l, c in zip(res["example"], res["gold_index"], prompts, answers,
                                        res["logprob"], res["correct"])]
    n_items = int(res["n_items"])
    from .. import __version__

    data = {
        "position": list(range(positions)),
        "depth": [k / (positions - 1) for k in range(positions)],
        "item": [int(x) for x in res["item"][:positions]],
        "accuracy": acc["mean"].tolist(), "accuracy_low": acc["low"].tolist(),
        "accuracy_high": acc["high"].tolist(),
        "logprob": lp["mean"].tolist(), "logprob_low": lp["low"].tolist(),
        "logprob_high": lp["high"].tolist(),
        "examples": recs,
    }
    meta = {"model": info["name"], "weights": weights, "task": task,
            "positions": positions, "examples": examples, "length": length, "seed": seed,
            "n_items": n_items if n_items >= 0 else None,
            "prompt_tokens_mean": float(np.mean(res["prompt_len"])),
            "chat_template": bool(res["chat"]), "level": 0.95,
            "interval": "percentile bootstrap over examples, 2000 resamples",
            "version": __version__, **entry.library_versions()}
    return Result(data, meta=meta, columns=CSV_COLUMNS)


# --------------------------------------------------------------------------------------------
# The link to the prior


def retrieval_link(model, task: str = "kv", positions: int = 7, examples: int = 10,
                   length: int = 350, seed: int = 0, weights: str = "pretrained",
                   prior: str = "argmax_prob", probes: int = 4,
                   progress: bool = False) -> dict:
    r"""The gold value's share of influence on the answer position, per prompt of
    :func:`retrieval_run` (eq. ``eq-ret-share``, chapter *From prior to behaviour*).

    ``prior``: ``"argmax_prob"`` (gradient of the probability of the argmax next token, exact),
    ``"hidden"`` (Frobenius norm of the hidden-state Jacobian, ``probes`` Hutchinson probes) or
    ``"rollout"`` (residual-aware rollout of the measured :math:`A_t, \lambda_t` of this very
    prompt).  Cached.

    Returns
    -------
    dict of numpy arrays
        ``example``, ``gold_index``, ``share`` (R,) the gold value's share; ``slot_share``
        (R, P) the share of the item sitting at each slot (its value for kv, the needle value or
        the haystack sentence at that boundary for needle) and ``slot_ntok`` (R, P) its token
        count, so that the non-gold slots give a content-free positional prior; ``profile_flat`` and
        ``profile_len``, the normalized profiles (ragged, one per prompt); ``span`` (R, 2).
    """
    choice("prior", prior, PRIORS)
    probes = positive_int("probes", probes, minimum=2)
    params = _params(model, task, positions, examples, length, seed, weights)
    params.update(prior=prior, probes=probes if prior == "hidden" else None)

    def compute():
        from tqdm import tqdm

        from .. import rollout as _rollout
        from ..measure.hooks import capture_model
        from ..measure.jacobian import influence_profile

        P, m = _prompts_for(model, task, positions, examples, length, seed, weights)
        recs = P["records"]
        shares, profs, slot_sh, slot_nt = [], [], [], []
        for i, r in enumerate(tqdm(recs, disable=not progress, file=sys.stderr, leave=False,
                                   desc=f"prior {prior}", unit="prompt")):
            ids = np.asarray(r["prompt_ids"])[None]
            if prior == "rollout":
                cap = capture_model(m, ids)
                row = _rollout.rollout(cap["A"], cap["lam"])
            else:
                res = influence_profile(m, ids, target=prior,
                                        method="exact" if prior == "argmax_prob" else "probes",
                                        probes=probes, seed=seed + i)
                row = res["per_sequence"][0]
            row = np.asarray(row, dtype=np.float64)
            row = row / row.sum()
            a, b = r["span"]
            shares.append(row[a:b].sum())
            slot_sh.append([row[x:y].sum() for x, y in r["slot_spans"]])
            slot_nt.append([y - x for x, y in r["slot_spans"]])
            profs.append(row)
        flat = np.concatenate(profs)
        return {"example": np.array([r["example"] for r in recs]),
                "gold_index": np.array([r["gold_index"] for r in recs]),
                "span": np.array([r["span"] for r in recs]), "share": np.array(shares),
                "slot_share": np.array(slot_sh), "slot_ntok": np.array(slot_nt),
                "profile_flat": flat, "profile_len": np.array([len(p) for p in profs])}

    return cache.cached("retrieval-link", params, compute)


def as_matrix(example, gold_index, values) -> np.ndarray:
    """Per-prompt values as an ``(E, P)`` array (example x gold position)."""
    ex, gi, v = (np.asarray(x) for x in (example, gold_index, values))
    M = np.full((int(ex.max()) + 1, int(gi.max()) + 1), np.nan)
    M[ex, gi] = v
    return M


def outcome_matrices(result: dict) -> dict:
    """``accuracy`` and ``logprob`` of a :func:`retrieval_run` result as ``(E, P)`` arrays."""
    ex = [r["example"] for r in result["examples"]]
    gi = [r["gold_index"] for r in result["examples"]]
    return {"accuracy": as_matrix(ex, gi, [float(r["correct"]) for r in result["examples"]]),
            "logprob": as_matrix(ex, gi, [r["logprob"] for r in result["examples"]])}


def paired_contrast(matrix, a: int, b: int, seed: int = 0, n_boot: int = 2000):
    """Mean over examples of ``matrix[:, a] - matrix[:, b]`` (position ``a`` against ``b``
    within each example) with its 95% bootstrap interval over examples:
    ``(estimate, low, high)``."""


    M = np.asarray(matrix, dtype=float)
    return metrics.bootstrap(lambda X: float(np.mean(X[:, a] - X[:, b])), M, n_boot=n_boot,
                             seed=seed)


def prior_matrices(link: dict) -> dict:
    """From a :func:`retrieval_link` result, ``(E, P)`` arrays of influence **per token**:

    * ``gold`` — the gold value's, in the prompt where it sits at position ``k``;
    * ``positional`` — the item at slot ``k`` when it is *not* the gold one (mean over the
      ``P - 1`` prompts of the example where another slot holds the gold item): the
      content-free positional prior of the same prompts.
    """
    dens = np.asarray(link["slot_share"], float) / np.asarray(link["slot_ntok"], float)
    ex, gi = np.asarray(link["example"]), np.asarray(link["gold_index"])
    E, P = int(ex.max()) + 1, dens.shape[1]
    gold = as_matrix(ex, gi, dens[np.arange(len(gi)), gi])
    pos = np.zeros((E, P))
    for e in range(E):
        rows = dens[ex == e]
        g = gi[ex == e]
        for k in range(P):
            pos[e, k] = rows[g != k, k].mean()
    return {"gold": gold, "positional": pos}


def edge_ratios(link: dict, middle: float = 0.5) -> np.ndarray:
    """Per prompt of a :func:`retrieval_link` result: the influence of the first and of the
    last prompt token over the median influence of the middle ``middle`` fraction of the
    prompt's tokens — the two arms of the U over the whole prompt.  An ``(R, 2)`` array."""
    ends = np.cumsum(link["profile_len"])
    out = []
    for e, n in zip(ends, link["profile_len"]):
        p = np.asarray(link["profile_flat"][e - n:e], float)
        a = int(round(n * (1 - middle) / 2))
        med = np.median(p[a:n - a])
        out.append((p[0] / med, p[-1] / med))
    return np.array(out)


def link_stats(prior, outcome, kind: str, seed: int = 0, n_boot: int = 2000) -> dict:
    """Statistics linking a prior to an outcome, with 95% bootstrap intervals over examples.

    ``prior`` and ``outcome`` are ``(E, P)`` arrays (example x gold position).  ``kind``:

    * ``"curve"`` — Spearman between the per-position means of prior and outcome
      (the shape of the two curves over positions);
    * ``"example"`` — Spearman between prior and outcome over all prompts;
    * ``"within"`` — the same after subtracting each position's mean from both (does the prior
      predict the outcome *beyond* the position?);
    * ``"auc"`` — AUC of the prior for a binary outcome over all prompts;
    * ``"auc_within"`` — AUC after subtracting each position's mean prior;
    * ``"r2"`` — the share of the variance of the outcome's per-position means explained by a
      straight line in the log of the prior's per-position means (squared Pearson correlation;
      the prior must be positive).

    Returns ``{"estimate", "low", "high"}``; non-finite values (e.g. an AUC with one class)
    come back as None.
    """


    x, y = np.asarray(prior, dtype=float), np.asarray(outcome, dtype=float)
    if x.shape != y.shape or x.ndim != 2:
        raise ValueError(f"prior and outcome must be (examples, positions) arrays of one shape, "
                         f"got {x.shape} and {y.shape}")

    def stat(a, b):
        if kind == "curve":
            return metrics.spearman(a.mean(0), b.mean(0))
        if kind == "example":
            return metrics.spearman(a, b)
        if kind == "within":
            return metrics.spearman(a - a.mean(0), b - b.mean(0))
        if kind == "auc":
            return metrics.auc(a.ravel(), b.ravel() > 0.5)
        if kind == "auc_within":
            return metrics.auc((a - a.mean(0)).ravel(), b.ravel() > 0.5)
        if kind == "r2":
            u, w = np.log(a.mean(0)), b.mean(0)
            if np.ptp(u) == 0 or np.ptp(w) == 0:
                return float("nan")
            return float(np.corrcoef(u, w)[0, 1] ** 2)
        raise ValueError("kind must be curve, example, within, auc, auc_within or r2, "
                         f"got {kind!r}")

    est = stat(x, y)
    if not np.isfinite(est) or x.shape[0] < 2:
        return {"estimate": est if np.isfinite(est) else None, "low": None, "high": None}
    try:
        e, lo, hi = metrics.bootstrap(stat, x, y, n_boot=n_boot, seed=seed)
    except ValueError:
        return {"estimate": est, "low": None, "high": None}
    return {"estimate": e, "low": lo, "high": hi}
