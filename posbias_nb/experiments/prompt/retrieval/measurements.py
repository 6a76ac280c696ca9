"""The retrieval study's measurements, each cached: the scores and answers of a run, the
rollout beside them, the link records of the priors; and Liu et al.'s diagnosis of a run's
outputs."""
from __future__ import annotations

import sys
import numpy as np
from .... import cache
from ...._validate import choice, positive_int
from ....measure.scoring import generate_greedy_batch, score_batch
from ....tasks.kv_needle import build_prompts
from ...base import study
from .config import LIU_OUTCOMES, PRIORS, _MARGIN, run_params
from .statistics import _ragged, liu_outcome, run_result

__all__ = ["retrieval_run", "retrieval_link", "retrieval_study", "liu_diagnosis", "prompts_for"]


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

def _score_and_rollout(m, prompt_ids, answer_ids):
    """One eager forward pass over ``prompt + answer``: the scores of eq. ``eq-ret-logprob``
    (from the final hidden states, caught by a forward hook on the base model) and the rollout
    row of the last prompt token.  Causal attention makes the kernels' prompt block, and the
    shares averaged over the prompt positions, those of the prompt alone."""
    from .... import rollout as _rollout
    from ....measure.hooks import capture_model
    from ....measure.scoring import score_hidden

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

        from .... import rollout as _rollout
        from ....measure.hooks import capture_model
        from ....measure.jacobian import influence_profile

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
