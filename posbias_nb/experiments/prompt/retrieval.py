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

**Departures from Liu et al.** (:data:`LIU_DEPARTURES`).  The default task (``variant="hex"``)
uses 8-hex-digit keys and values instead of UUIDs, about 15 pairs (350 tokens) instead of 75,
140 or 300, a forced opening quote, and teacher-forced exact match instead of free generation
scored by substring match.  ``variant="liu"`` is the faithful one: version-4 UUID keys and
values from the seeded generator, no lead (the prompt ends at ``Corresponding value:``), greedy
generation of up to the value's token count + 8 tokens
(:func:`posbias_nb.measure.scoring.generate_greedy_batch`, eight prompts at a time), correct
when the value appears in the decoded output (case-insensitive).

**Statistics.**  Accuracy per position: Wilson interval; log-probability per position: t
interval over examples.  The task's U is graded by pre-declared paired contrasts, first and
last slot against the mean of the central region of :func:`posbias_nb.metrics.regions`
(:func:`region_differences`), with Holm's correction over the family (:func:`contrast_family`);
where the middle is one slot and the outcome 0/1 (Liu et al.'s setting, three slots, accuracy),
the first and last slot against the middle are paired proportions (:func:`region_pairs`,
Newcombe's interval :func:`posbias_nb.stats.paired_proportion_interval`).

**The prior** (:func:`retrieval_link`, :func:`prior_matrices`): an influence profile
:math:`I_1 \dots I_T` of the prompt positions on the answer position (the last prompt token),
read per token of the value :math:`S_k` that sits at slot ``k``,

.. math::
    \rho_k(x) = \frac{1}{|S_k|} \sum_{j \in S_k} \frac{I_j(x)}{\sum_{i=1}^{T} I_i(x)}

(eq. ``eq-ret-share``): the *gold* reading :math:`\rho_k(x_{e,k})` (the gold value, in the
prompt where it sits at slot ``k``) and the *positional* reading (slot ``k`` holding a
distractor, mean over the other prompts of the example: a content-free prior measured in the very
prompts of the task).  ``I`` is the hidden-state Jacobian (``prior="hidden"``, Hutchinson
probes: the chapter's prior, blind to which token the model will produce), the residual-aware
rollout row of the measured :math:`A_t, \lambda_t` (:func:`posbias_nb.rollout.rollout`), or the
gradient of the argmax probability (``prior="argmax_prob"``: a *readout* of the answer, since the
argmax is the answer's first token).  :func:`link_stats` puts numbers with BCa bootstrap
intervals on the link.
"""
from __future__ import annotations

import re
import sys

import numpy as np

from ... import cache, metrics, stats
from ..._validate import choice, positive_int
from ...measure import entry
from ...measure.scoring import generate_greedy_batch, score, score_batch
from ...results import Result
from ...tasks.kv_needle import (KV_INSTRUCTION, NEEDLE_INSTRUCTION, TASKS, VARIANTS, build_prompts,
                                check_args)
from ..base import study
from ..base.design import Design

__all__ = [
    "DESIGN", "TASKS", "VARIANTS", "PRIORS", "KV_INSTRUCTION", "NEEDLE_INSTRUCTION", "LIU_MPT30B",
    "LIU_DEPARTURES", "retrieval_run", "retrieval_link", "retrieval_study",
    "link_stats", "as_matrix", "outcome_matrices", "paired_contrast", "prior_matrices",
    "edge_ratios", "region_accuracy", "region_differences", "region_pairs", "contrast_family",
    "ratio_interval", "CSV_COLUMNS", "LIU_OUTCOMES", "LIU_RETRIEVAL_ERRORS", "liu_outcome", "liu_diagnosis",
    "LIU_COLUMNS", "run_params", "prompts_for", "run_result",
]

PRIORS = ("hidden", "rollout", "argmax_prob")
_DEF_VERSION = "retrieval-v2"  # bump when the prompts or the scores change

#: Liu et al. (2023), mpt-30b-instruct, 140 keys: gold item index and accuracy (their Fig. 7).
LIU_MPT30B = {"item": [0, 34, 69, 104, 139], "n_items": 140,
              "accuracy": [1.0, 0.936, 0.886, 0.804, 0.962]}

#: Where the chapter's fast task (``variant="hex"``) departs from Liu et al.'s; the ``"liu"``
#: variant undoes the first, third and fourth.
LIU_DEPARTURES = (
    "keys and values are 8 hexadecimal digits, not 36-character UUIDs",
    "a prompt holds about 15 pairs (350 tokens), not 75, 140 or 300",
    "the answer is started by a forced opening quote",
    "scored by teacher-forced exact match, not free generation scored by substring match",
)

#: The chapter's design (*From prior to behaviour*), locked: its hash is the registry's latest
#: entry for "retrieval" (:mod:`posbias_nb.experiments.base.design`).
DESIGN = Design("retrieval", {
    "task": {"task": "kv", "positions": 7, "examples": 30, "length": 350, "seed": 0},
    "runs": {"G": ["gemma3-270m", "pretrained", 30], "S": ["smollm2-135m", "pretrained", 30],
             "R": ["gemma3-270m", "random", 3]},
    "readout": {"model": "gemma3-270m", "examples": 3, "prior": "argmax_prob"},
    "liu": {"model": "gemma3-270m", "positions": 3, "examples": 24, "length": 800},
    "families": {"task_u": "first and last slot minus the middle region, log p, per model "
                           "(Holm over the four)",
                 "liu": "first and last pair minus the middle pair, accuracy (Newcombe, Holm "
                        "over the two)"},
    "link": {"n_boot": 2000, "seed": 0},
    "alpha": 0.05,
})

CSV_COLUMNS = ("position", "depth", "item", "accuracy", "accuracy_low", "accuracy_high",
               "logprob", "logprob_low", "logprob_high")
LIU_COLUMNS = CSV_COLUMNS[:6]
_MARGIN = 8  # generated tokens beyond the value's own token count (variant "liu")


# --------------------------------------------------------------------------------------------
# Summaries


# --------------------------------------------------------------------------------------------
# Loading (through the shared entry helper: checks, cache key, loaded-model memo)


def run_params(model, task, positions, examples, length, seed, weights, variant="hex") -> dict:
    task, positions, examples, length, seed = check_args(task, positions, examples, length, seed,
                                                         variant)
    info = entry.checked(model, weights, length, 1, seed)
    key = entry.run_key(info, weights, length, None, seed, text=task == "needle", task=task,
                        positions=positions, examples=examples, definition=_DEF_VERSION)
    if variant != "hex":
        key["variant"] = variant
    return key


def prompts_for(model, task, positions, examples, length, seed, weights, variant="hex"):
    m, tok, info = study.load(model, weights, seed)
    P = build_prompts(tok, task, positions, examples, length, seed,
                      vocab_size=m.get_input_embeddings().num_embeddings, variant=variant)
    extra = _MARGIN if variant == "liu" else 0
    longest = max(len(r["prompt_ids"]) + len(r["answer_ids"]) + extra for r in P["records"])
    if info["max_length"] is not None and longest > info["max_length"]:
        raise ValueError(f"length {length} gives prompts of {longest} tokens, beyond the context "
                         f"of {info['name']} ({info['max_length']} tokens)")
    return P, m


def prompt_problem(model, task: str, positions: int, examples: int, length: int, seed: int = 0,
                   weights: str = "pretrained", variant: str = "hex") -> str | None:
    """Why the prompts of a retrieval run of these settings cannot be built (the first line of
    :func:`~posbias_nb.tasks.kv_needle.build_prompts`' or the context check's error), or None
    if they can.  Tokenization only: no forward pass."""
    try:
        prompts_for(model, task, positions, examples, length, seed, weights, variant)
    except ValueError as e:
        return str(e).strip().splitlines()[0]
    return None


def _ragged(lists):
    lens = np.array([len(x) for x in lists], dtype=np.int64)
    flat = np.concatenate([np.asarray(x, dtype=np.int64) for x in lists]) if lists else \
        np.zeros(0, np.int64)
    return flat, lens


def _unragged(flat, lens):
    ends = np.cumsum(lens)
    return [flat[e - n:e].tolist() for e, n in zip(ends, lens)]


def record_arrays(P) -> dict:
    """The prompts of :func:`~posbias_nb.tasks.kv_needle.build_prompts` as the arrays a run
    caches (ragged ids flattened with their lengths); the scores are added by the caller."""
    recs = P["records"]
    pf, pl = _ragged([r["prompt_ids"] for r in recs])
    af, al = _ragged([r["answer_ids"] for r in recs])
    return {"example": np.array([r["example"] for r in recs]),
            "gold_index": np.array([r["gold_index"] for r in recs]),
            "item": np.array([r["item"] for r in recs]),
            "span": np.array([r["span"] for r in recs]),
            "prompt_flat": pf, "prompt_len": pl, "answer_flat": af, "answer_len": al,
            "n_items": np.array(P["n_items"] if P["n_items"] is not None else -1),
            "chat": np.array(P["chat"])}


def _scores(model, task, positions, examples, length, seed, weights, progress,
            variant="hex") -> dict:
    params = run_params(model, task, positions, examples, length, seed, weights, variant)
    if variant == "liu":
        params["margin"] = _MARGIN

    def compute():
        from tqdm import tqdm

        P, m = prompts_for(model, task, positions, examples, length, seed, weights, variant)
        recs = P["records"]
        out = record_arrays(P)
        if variant == "hex":
            lp, ok = score_batch(m, [r["prompt_ids"] for r in recs],
                                 [r["answer_ids"] for r in recs])
            out.update(logprob=lp, correct=ok)
            return out
        codec = P["codec"]
        eos = study.eos_ids(m, codec.tok)
        gens, ok = [], np.zeros(len(recs), dtype=bool)
        step = 8  # prompts decoded together (one weight read per step for the group)
        for g0 in tqdm(range(0, len(recs), step), disable=not progress, file=sys.stderr,
                       leave=False, desc="retrieval liu (generation)", unit="batch"):
            part = recs[g0:g0 + step]
            gens += generate_greedy_batch(
                m, [r["prompt_ids"] for r in part],
                [len(r["answer_ids"]) + _MARGIN for r in part],
                stops=[(lambda ids, w=r["value"].lower(): w in codec.decode(ids).lower())
                       for r in part], eos=eos, batch=step)
        for i, (r, g) in enumerate(zip(recs, gens)):
            ok[i] = r["value"].lower() in codec.decode(g).lower()
        gf, gl = _ragged(gens)
        out.update(correct=ok, output_flat=gf, output_len=gl,
                   output_text=np.array([codec.decode(g) for g in gens], dtype=str))
        return out

    res = cache.cached("retrieval", params, compute)
    return res


def retrieval_run(model, task: str = "kv", positions: int = 7, examples: int = 10,
                  length: int = 350, seed: int = 0, progress: bool = False,
                  weights: str = "pretrained", variant: str = "hex") -> dict:
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
    variant : {"hex", "liu"}
        ``"hex"`` (default): the fast task, teacher-forced.  ``"liu"`` (kv only): Liu et al.'s
        setting — UUID keys and values, no forced lead, greedy generation of up to the value's
        token count + 8 tokens, correct when the value appears in the decoded output
        (case-insensitive substring match); no log-probability columns.

    Returns
    -------
    dict (JSON-able)
        ``position`` (0..P-1), ``depth`` (k/(P-1)), ``item`` (index of the gold item among the
        items: pairs for kv, haystack boundary for needle, of example 0), ``accuracy``,
        ``accuracy_low``, ``accuracy_high`` (share of examples answered, Wilson 95% interval),
        ``logprob``, ``logprob_low``, ``logprob_high`` (mean over examples, t 95% interval;
        not for ``variant="liu"``); ``examples``: one record per prompt with ``example``,
        ``gold_index``, ``prompt_ids``, ``answer_ids``, ``correct`` and ``logprob`` (hex) or
        ``output`` (liu: the decoded generation); ``meta``.  Same seed, same output.

    Raises
    ------
    ValueError
        Unknown task, variant or model, ``positions < 2``, ``examples < 1``, a length too small
        for the task or beyond the model's context, weights not installed, ``variant="liu"``
        with the needle task.
    """
    res = _scores(model, task, positions, examples, length, seed, weights, progress, variant)
    return run_result(res, model, task, positions, examples, length, seed, weights, variant)


def run_result(res, model, task, positions, examples, length, seed, weights, variant):
    """The :class:`~posbias_nb.results.Result` of :func:`retrieval_run` from its scores."""
    from ... import models

    info = models.describe(model)
    acc = stats.summarize(res["gold_index"], res["example"], res["correct"].astype(float), positions,
                    kind="proportion")
    prompts = _unragged(res["prompt_flat"], res["prompt_len"])
    answers = _unragged(res["answer_flat"], res["answer_len"])
    liu = variant == "liu"
    recs = []
    for i, (e, k, p, a, c) in enumerate(zip(res["example"], res["gold_index"], prompts, answers,
                                            res["correct"])):
        rec = {"example": int(e), "gold_index": int(k), "prompt_ids": p, "answer_ids": a,
               "correct": bool(c)}
        if liu:
            rec["output"] = str(res["output_text"][i])
        else:
            rec["logprob"] = float(res["logprob"][i])
        recs.append(rec)
    n_items = int(res["n_items"])
    from ... import __version__

    data = {
        "position": list(range(positions)),
        "depth": [k / (positions - 1) for k in range(positions)],
        "item": [int(x) for x in res["item"][:positions]],
        "accuracy": acc["mean"].tolist(), "accuracy_low": acc["low"].tolist(),
        "accuracy_high": acc["high"].tolist(),
    }
    if not liu:
        lp = stats.summarize(res["gold_index"], res["example"], res["logprob"], positions)
        data.update(logprob=lp["mean"].tolist(), logprob_low=lp["low"].tolist(),
                    logprob_high=lp["high"].tolist())
    data["examples"] = recs
    meta = {"model": info["name"], "weights": weights, "task": task, "variant": variant,
            "positions": positions, "examples": examples, "length": length, "seed": seed,
            "n_items": n_items if n_items >= 0 else None,
            "prompt_tokens_mean": float(np.mean(res["prompt_len"])),
            "chat_template": bool(res["chat"]), "level": 0.95,
            "interval": "accuracy: Wilson score interval per position; log-probability: "
                        "Student t over examples",
            "scoring": ("greedy generation of up to the value's tokens + "
                        f"{_MARGIN}, case-insensitive substring match" if liu else
                        "teacher-forced exact match and log-probability"),
            "version": __version__, **entry.library_versions()}
    return Result(data, meta=meta, columns=LIU_COLUMNS if liu else CSV_COLUMNS)


#: What a Liu et al. generation can be (:func:`liu_outcome`), in the order they are tested.
LIU_OUTCOMES = ("correct", "another pair's value", "a UUID not in the prompt",
                "cut short (a prefix of the value)", "a wrong UUID, cut short", "no UUID")
#: The outcomes that are retrieval errors (a wrong UUID, whole or cut short).
LIU_RETRIEVAL_ERRORS = ("another pair's value", "a UUID not in the prompt",
                        "a wrong UUID, cut short")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: The start of a UUID at the end of an output (8 hex digits, then its groups, each maybe cut).
_UUID_START = re.compile(r"[0-9a-f]{8}(-[0-9a-f]{0,4}(-[0-9a-f]{0,4}(-[0-9a-f]{0,4}"
                         r"(-[0-9a-f]{0,12})?)?)?)?$")


def liu_outcome(output: str, value: str, others=()) -> str:
    """Which of :data:`LIU_OUTCOMES` a generated ``output`` is, for the gold ``value`` and the
    prompt's ``others`` values: it contains the value (case-insensitive, Liu et al.'s rule);
    it gives another pair's value, or a UUID absent from the prompt (a retrieval error); it is
    a prefix of the value, cut by the token budget (a scoring limit); it ends in the start of
    a *different* UUID, cut by the budget (a retrieval error, :data:`LIU_RETRIEVAL_ERRORS`);
    or it holds no UUID at all (a format failure).

    Examples
    --------
    >>> v = "0b9d5e0f-1c2d-4e3f-8a9b-0c1d2e3f4a5b"
    >>> liu_outcome(' "' + v + '"', v), liu_outcome(' "0b9d5e0f-1c2d', v), liu_outcome(" ok", v)
    ('correct', 'cut short (a prefix of the value)', 'no UUID')
    >>> liu_outcome(' "77aa0c1e-5b', v)
    'a wrong UUID, cut short'
    """
    o, v = str(output).lower(), str(value).lower()
    if v in o:
        return LIU_OUTCOMES[0]
    found = _UUID.findall(o)
    if found:
        return LIU_OUTCOMES[1] if found[0] in {str(x).lower() for x in others} else LIU_OUTCOMES[2]
    tail = re.findall(r"[0-9a-f-]{4,}", o)
    if tail and v.startswith(tail[-1]) and o.rstrip().endswith(tail[-1]):
        return LIU_OUTCOMES[3]
    if _UUID_START.search(o.rstrip()):
        return LIU_OUTCOMES[4]
    return LIU_OUTCOMES[5]


def liu_diagnosis(model, positions: int = 3, examples: int = 24, length: int = 800,
                  seed: int = 0, weights: str = "pretrained") -> dict:
    """Liu et al.'s setting (``variant="liu"``) with every generation classified by
    :func:`liu_outcome`: ``{"outcome": per prompt, "gold_index", "example", "output",
    "counts": {slot: {outcome: n}}}`` (the run itself is :func:`retrieval_run`'s, cached)."""
    run = retrieval_run(model, "kv", positions, examples, length, seed, weights=weights,
                        variant="liu")
    P, _ = prompts_for(model, "kv", positions, examples, length, seed, weights, "liu")
    out, gi, ex, txt = [], [], [], []
    for rec, r in zip(P["records"], run["examples"]):
        others = [v for k, v in rec["pairs"] if v != rec["value"]]
        out.append(liu_outcome(r["output"], rec["value"], others))
        gi.append(r["gold_index"]), ex.append(r["example"]), txt.append(r["output"])
    counts = {k: {o: sum(1 for a, g in zip(out, gi) if g == k and a == o) for o in LIU_OUTCOMES}
              for k in range(positions)}
    return {"outcome": out, "gold_index": np.array(gi), "example": np.array(ex), "output": txt,
            "counts": counts, "run": run}


# --------------------------------------------------------------------------------------------
# The link to the prior


def _score_and_rollout(m, prompt_ids, answer_ids):
    """One eager forward pass over ``prompt + answer``: the scores of eq. ``eq-ret-logprob``
    (from the final hidden states, caught by a forward hook on the base model) and the rollout
    row of the last prompt token.  Causal attention makes the kernels' prompt block, and the
    shares averaged over the prompt positions, those of the prompt alone."""
    from ... import rollout as _rollout
    from ...measure.hooks import capture_model
    from ...measure.scoring import score_hidden

    p, a = list(map(int, prompt_ids)), list(map(int, answer_ids))
    got = {}
    h = m.base_model.register_forward_hook(
        lambda mod, args, out: got.__setitem__("h", out.last_hidden_state.detach()))
    try:
        cap = capture_model(m, np.asarray(p + a)[None])
    finally:
        h.remove()
    T = len(p)
    row = _rollout.rollout(cap["A"][:, :T, :T], cap["lam_pos"][:, :T].mean(1))
    lp, ok = score_hidden(m, got["h"][0], T, a)
    return lp, ok, np.asarray(row, dtype=np.float64)


def _link_record(recs, rows):
    shares, slot_sh, slot_nt, profs = [], [], [], []
    for r, row in zip(recs, rows):
        row = np.asarray(row, dtype=np.float64)
        row = row / row.sum()
        a, b = r["span"]
        shares.append(row[a:b].sum())
        slot_sh.append([row[x:y].sum() for x, y in r["slot_spans"]])
        slot_nt.append([y - x for x, y in r["slot_spans"]])
        profs.append(row)
    return {"example": np.array([r["example"] for r in recs]),
            "gold_index": np.array([r["gold_index"] for r in recs]),
            "span": np.array([r["span"] for r in recs]), "share": np.array(shares),
            "slot_share": np.array(slot_sh), "slot_ntok": np.array(slot_nt),
            "profile_flat": np.concatenate(profs),
            "profile_len": np.array([len(p) for p in profs])}


def retrieval_study(model, task: str = "kv", positions: int = 7, examples: int = 10,
                    length: int = 350, seed: int = 0, weights: str = "pretrained",
                    progress: bool = False):
    """:func:`retrieval_run` and :func:`retrieval_link` with ``prior="rollout"`` on the same
    prompts, from **one** forward pass per prompt (:func:`_score_and_rollout`: eager attention,
    the scores read from the final hidden states, the kernels and shares from the same pass)
    instead of two.  Chapter *From prior to behaviour*.  Both results go to the cache under the
    keys the two functions use, so either function called later reads them.

    Returns ``(run, link)``.  The scores equal :func:`retrieval_run`'s up to float rounding
    (eager against fused attention); the link equals :func:`retrieval_link`'s.
    """
    rparams = run_params(model, task, positions, examples, length, seed, weights)
    link_params = dict(rparams, prior="rollout", probes=None)
    memo: dict = {}

    def one_pass():
        if memo:
            return memo
        from tqdm import tqdm

        P, m = prompts_for(model, task, positions, examples, length, seed, weights)
        recs = P["records"]
        lp = np.zeros(len(recs))
        ok = np.zeros(len(recs), dtype=bool)
        rows = []
        old = m.config._attn_implementation
        if old != "eager":
            m.set_attn_implementation("eager")
        try:
            for i, r in enumerate(tqdm(recs, disable=not progress, file=sys.stderr, leave=False,
                                       desc="retrieval + rollout", unit="prompt")):
                lp[i], ok[i], row = _score_and_rollout(m, r["prompt_ids"], r["answer_ids"])
                rows.append(row)
        finally:
            if m.config._attn_implementation != old:
                m.set_attn_implementation(old)
        memo["run"] = dict(record_arrays(P), logprob=lp, correct=ok)
        memo["link"] = _link_record(recs, rows)
        return memo

    res = cache.cached("retrieval", rparams, lambda: one_pass()["run"])
    link = cache.cached("retrieval-link", link_params, lambda: one_pass()["link"])
    run = run_result(res, model, task, positions, examples, length, seed, weights, "hex")
    return run, link


def retrieval_link(model, task: str = "kv", positions: int = 7, examples: int = 10,
                   length: int = 350, seed: int = 0, weights: str = "pretrained",
                   prior: str = "hidden", probes: int = 2,
                   progress: bool = False) -> dict:
    r"""The influence profile of every prompt of :func:`retrieval_run` on the answer position,
    read per item (eq. ``eq-ret-share``, chapter *From prior to behaviour*).

    ``prior``:

    * ``"hidden"`` (default, the chapter's prior): Frobenius norm of the Jacobian of the last
      prompt token's final hidden state with respect to each input embedding, ``probes``
      Hutchinson probes — it weighs every output direction alike, so it does not read which
      token the model is about to produce;
    * ``"rollout"``: residual-aware rollout of the measured :math:`A_t, \lambda_t` of this very
      prompt (the model switches to eager attention for the capture, then back);
    * ``"argmax_prob"``: gradient of the probability of the argmax next token (exact).  In a
      model that answers, the argmax *is* the answer's first token, so this profile reads out
      which item the model copies from: a readout of the answer, not a prior.

    Cached.

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
    params = run_params(model, task, positions, examples, length, seed, weights)
    params.update(prior=prior, probes=probes if prior == "hidden" else None)

    def compute():
        from tqdm import tqdm

        from ... import rollout as _rollout
        from ...measure.hooks import capture_model
        from ...measure.jacobian import influence_profile

        P, m = prompts_for(model, task, positions, examples, length, seed, weights)
        recs = P["records"]
        rows = []
        old = m.config._attn_implementation
        if prior == "rollout" and old != "eager":
            m.set_attn_implementation("eager")  # the capture needs the attention weights
        try:
            for i, r in enumerate(tqdm(recs, disable=not progress, file=sys.stderr, leave=False,
                                       desc=f"prior {prior}", unit="prompt")):
                ids = np.asarray(r["prompt_ids"])[None]
                if prior == "rollout":
                    cap = capture_model(m, ids)
                    rows.append(_rollout.rollout(cap["A"], cap["lam"]))
                else:
                    res = influence_profile(m, ids, target=prior,
                                            method="exact" if prior == "argmax_prob" else "probes",
                                            probes=probes, seed=seed + i)
                    rows.append(res["per_sequence"][0])
        finally:
            if m.config._attn_implementation != old:
                m.set_attn_implementation(old)
        return _link_record(recs, rows)

    return cache.cached("retrieval-link", params, compute)


def as_matrix(example, gold_index, values) -> np.ndarray:
    """Per-prompt values as an ``(E, P)`` array (example x gold position)."""
    ex, gi, v = (np.asarray(x) for x in (example, gold_index, values))
    M = np.full((int(ex.max()) + 1, int(gi.max()) + 1), np.nan)
    M[ex, gi] = v
    return M


def outcome_matrices(result: dict) -> dict:
    """``accuracy`` and ``logprob`` of a :func:`retrieval_run` result as ``(E, P)`` arrays
    (``logprob`` only where the run has one)."""
    ex = [r["example"] for r in result["examples"]]
    gi = [r["gold_index"] for r in result["examples"]]
    out = {"accuracy": as_matrix(ex, gi, [float(r["correct"]) for r in result["examples"]])}
    if result["examples"] and "logprob" in result["examples"][0]:
        out["logprob"] = as_matrix(ex, gi, [r["logprob"] for r in result["examples"]])
    return out


# --------------------------------------------------------------------------------------------
# Pre-declared contrasts (the middle of metrics.regions, never the worst position found)


def region_accuracy(matrix, region: str = "middle"):
    """Accuracy over the slots of one pre-declared ``region`` (:func:`posbias_nb.metrics.regions`)
    of an ``(examples, positions)`` 0/1 matrix, pooled over its prompts, with its Wilson 95%
    interval: ``(estimate, low, high)``.  (Prompts of one example are pooled as independent.)

    >>> [round(v, 3) for v in region_accuracy(np.array([[1, 0, 0, 1], [1, 0, 1, 1]]))]
    [0.25, 0.046, 0.699]
    """
    M = np.asarray(matrix, dtype=float)
    if M.ndim != 2 or not np.all((M == 0) | (M == 1)):
        raise ValueError(f"matrix must be a 2-D 0/1 array, got shape {M.shape}")
    R = M[:, getattr(metrics.regions(M.shape[1]), region)]
    return tuple(float(v) for v in stats.proportion_interval(int(R.sum()), R.size))


def region_differences(matrix) -> dict:
    """Per example (row of an ``(E, P)`` array), the first slot minus the middle and the last
    slot minus the middle, the middle being the **mean over the central region**
    :func:`posbias_nb.metrics.regions` ``(P).middle`` (for ``P = 7``: slots 2, 3, 4), declared
    from ``P`` alone before any data is seen.  Returns ``{"first": (E,), "last": (E,)}``.

    Examples
    --------
    >>> d = region_differences([[3.0, 0, 1, 1, 1, 0, 2.0]])
    >>> float(d["first"][0]), float(d["last"][0])
    (2.0, 1.0)
    """
    M = np.asarray(matrix, dtype=float)
    if M.ndim != 2 or M.shape[1] < 3:
        raise ValueError(f"need an (examples, positions >= 3) array, got shape {M.shape}")
    mid = M[:, metrics.regions(M.shape[1]).middle].mean(1)
    return {"first": M[:, 0] - mid, "last": M[:, -1] - mid}


def region_pairs(matrix) -> dict:
    """For an ``(E, P)`` 0/1 matrix whose pre-declared middle region is **one** slot (``P = 3``:
    first, middle, last), the paired outcomes ``{"first": (first, middle), "last": (last,
    middle)}``, each an ``(E,)`` pair of 0/1 arrays, for :func:`contrast_family` to grade with
    :func:`posbias_nb.stats.paired_proportion_interval`.  A wider middle region is averaged by
    :func:`region_differences` instead (its per-example mean is not a 0/1 outcome).

    Examples
    --------
    >>> p = region_pairs([[1, 0, 1], [1, 1, 0]])
    >>> [v.tolist() for v in p["first"]], [v.tolist() for v in p["last"]]
    ([[1.0, 1.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]])
    """
    M = np.asarray(matrix, dtype=float)
    if M.ndim != 2 or M.shape[1] < 3:
        raise ValueError(f"need an (examples, positions >= 3) array, got shape {M.shape}")
    if not np.all((M == 0) | (M == 1)):
        bad = float(M[(M != 0) & (M != 1)][0])
        raise ValueError(f"matrix must hold 0/1 outcomes, got {bad!r}")
    mid = metrics.regions(M.shape[1]).middle
    if mid.stop - mid.start != 1:
        raise ValueError(f"the middle region of {M.shape[1]} positions is {mid.stop - mid.start} "
                         "slots, not one: use region_differences")
    m = M[:, mid.start]
    return {"first": (M[:, 0], m), "last": (M[:, -1], m)}


def contrast_family(diffs: dict, alpha: float = 0.05, seed: int = 0) -> dict:
    r"""Grade a pre-declared family of paired contrasts with Holm's correction.

    ``diffs`` maps a name to one contrast: either the per-example differences (e.g. the
    outputs of :func:`region_differences`), or a pair ``(a, b)`` of paired **0/1** outcome
    arrays (e.g. the outputs of :func:`region_pairs`).  Each claim is "the mean difference is
    greater than 0".  For each contrast:

    * ``interval``: its 95% interval -- for differences, the Student t interval of their mean
      over examples (:func:`posbias_nb.stats.mean_interval`); for a pair of 0/1 outcomes,
      Newcombe's paired interval of ``mean(a) - mean(b)``
      (:func:`posbias_nb.stats.paired_proportion_interval`), which, unlike t, never has zero
      width when every example ties;
    * ``p``: two-sided exact / sign-flip permutation p-value (:func:`posbias_nb.stats.paired_test`),
      ``p_holm`` its Holm-adjusted value over the family (:func:`posbias_nb.stats.holm`);
    * ``level`` and ``adjusted``: the interval at Holm's step-down level for this contrast,
      ``1 - alpha / (m - i + 1)`` for the contrast of rank ``i`` in p (the levels stop
      stepping down at the first contrast Holm does not reject);
    * ``verdict``: :func:`posbias_nb.stats.decide` of ``adjusted`` against 0 — "holds" only
      when the Holm-level interval lies above 0; for differences, "not testable" when they do
      not vary at all (every example ties: no t interval exists); a pair of 0/1 outcomes is
      always testable (all ties give a wide Newcombe interval, "inconclusive").

    Chapter *From prior to behaviour* (the task's U; Liu et al.'s own setting).
    """
    names = list(diffs)
    if not names:
        raise ValueError("contrast_family needs at least one contrast")
    pairs = {k: isinstance(diffs[k], tuple) for k in names}
    D, AB = [], []
    for k in names:
        if pairs[k]:
            if len(diffs[k]) != 2:
                raise ValueError(f"contrast {k!r}: a pair must be (a, b), got {len(diffs[k])} "
                                 "arrays")
            a, b = (np.asarray(v, dtype=float) for v in diffs[k])
            stats.paired_proportion_interval(a, b)  # validates: 0/1, same length
            AB.append((a, b))
            D.append(a - b)
        else:
            AB.append(None)
            D.append(np.asarray(diffs[k], dtype=float))
    p = np.array([stats.paired_test(d, np.zeros_like(d), seed=seed).pvalue for d in D])
    p_holm = stats.holm(p)
    m = len(D)
    order = np.argsort(p, kind="stable")
    level = np.empty(m)
    stepping = True
    frozen = None
    for i, j in enumerate(order):
        div = m - i
        if not stepping:
            div = frozen
        level[j] = 1 - alpha / div
        if stepping and p[j] >= alpha / div:
            stepping, frozen = False, div
    out = {}
    for j, k in enumerate(names):
        if pairs[k]:
            ci = stats.paired_proportion_interval(*AB[j])
            adj = stats.paired_proportion_interval(*AB[j], level=float(level[j]))
            testable = True
        else:
            ci = stats.mean_interval(D[j])
            adj = stats.mean_interval(D[j], level=float(level[j]))
            testable = bool(np.ptp(D[j]) > 0)
        out[k] = {"interval": ci, "adjusted": adj, "level": float(level[j]),
                  "p": float(p[j]), "p_holm": float(p_holm[j]),
                  "verdict": stats.decide(adj, 0.0, testable=testable)}
    return out


def paired_contrast(matrix, a: int, b: int):
    """Mean over examples of ``matrix[:, a] - matrix[:, b]`` (position ``a`` against ``b``
    within each example) with its Student t 95% interval over examples (paired):
    ``(estimate, low, high)``."""
    M = np.asarray(matrix, dtype=float)
    return stats.mean_interval(M[:, a] - M[:, b])


def ratio_interval(ratios, level: float = 0.95):
    """Geometric mean of positive per-unit ratios with a t interval on the log scale
    (:func:`posbias_nb.stats.mean_interval` of the logs, exponentiated): ``(est, low, high)``.
    ``ratios`` is ``(units,)`` or ``(units, k)`` (each unit's logs averaged first).

    Examples
    --------
    >>> [round(v, 3) for v in ratio_interval([2.0, 2.0, 8.0, 8.0])]
    [4.0, 1.119, 14.294]
    """
    r = np.asarray(ratios, dtype=float)
    if np.any(~(r > 0)):
        raise ValueError("ratios must be positive and finite")
    lg = np.log(r)
    if lg.ndim == 2:
        lg = lg.mean(1)
    return tuple(float(np.exp(v)) for v in stats.mean_interval(lg, level=level))


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


def edge_ratios(link: dict) -> np.ndarray:
    """Per prompt of a :func:`retrieval_link` result: the influence of the first and of the
    last prompt token over the median influence of the prompt's middle region
    (:func:`posbias_nb.metrics.regions` of the prompt length: its central half) — the two arms
    of the U over the whole prompt.  An ``(R, 2)`` array."""
    ends = np.cumsum(link["profile_len"])
    out = []
    for e, n in zip(ends, link["profile_len"]):
        p = np.asarray(link["profile_flat"][e - n:e], float)
        med = np.median(p[metrics.regions(int(n)).middle])
        out.append((p[0] / med, p[-1] / med))
    return np.array(out)


def _two_way(a):
    """Residual of an (E, P) array after example (row) and position (column) means."""
    return a - a.mean(1, keepdims=True) - a.mean(0, keepdims=True) + a.mean()


def link_stats(prior, outcome, kind: str, seed: int = 0, n_boot: int = 2000,
               level: float = 0.95) -> dict:
    """Statistics linking a prior to an outcome, with BCa bootstrap intervals over examples at
    ``level`` (95% by default; :func:`posbias_nb.stats.bootstrap`; an example's prompts are
    resampled together).

    ``prior`` and ``outcome`` are ``(E, P)`` arrays (example x gold position).  ``kind``:

    * ``"curve"`` — Spearman between the per-position means of prior and outcome
      (the shape of the two curves over positions);
    * ``"example"`` — Spearman between prior and outcome over all prompts;
    * ``"within"`` — the same after removing **example and position fixed effects** from both
      (two-way residuals, ``x - row mean - column mean + grand mean``): does the prior predict
      the outcome beyond the position *and* beyond how hard the example is?
    * ``"auc"`` — AUC of the prior for a binary outcome over all prompts;
    * ``"auc_within"`` — AUC of the prior's two-way residual for the binary outcome;
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
    kinds = ("curve", "example", "within", "auc", "auc_within", "r2")
    choice("kind", kind, kinds)

    def stat(a, b):
        if kind == "curve":
            return metrics.spearman(a.mean(0), b.mean(0))
        if kind == "example":
            return metrics.spearman(a, b)
        if kind == "within":
            return metrics.spearman(_two_way(a), _two_way(b))
        if kind == "auc":
            return metrics.auc(a.ravel(), b.ravel() > 0.5)
        if kind == "auc_within":
            return metrics.auc(_two_way(a).ravel(), b.ravel() > 0.5)
        u, w = np.log(a.mean(0)), b.mean(0)
        if np.ptp(u) == 0 or np.ptp(w) == 0:
            return float("nan")
        return float(np.corrcoef(u, w)[0, 1] ** 2)

    try:
        est = stat(x, y)
    except ValueError:
        est = float("nan")
    if not np.isfinite(est) or x.shape[0] < 2:
        return {"estimate": est if np.isfinite(est) else None, "low": None, "high": None}
    try:
        e, lo, hi = stats.bootstrap(stat, x, y, n_boot=n_boot, seed=seed, level=level)
    except ValueError:
        return {"estimate": est, "low": None, "high": None}
    return {"estimate": e, "low": lo, "high": hi}
