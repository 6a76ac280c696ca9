r"""What the inference-time remedies need from a model, measured on offline data.

Chapter :ref:`ch-inference`.  Each function runs the model and collects; the remedies themselves
live in :mod:`posbias_nb.models.remedies` (so ``models`` imports nothing from here) and the pure
statistics in :mod:`posbias_nb.metrics`.

* :func:`attention_rows` -- the attention probabilities of the last query rows, per layer and
  head, averaged over sequences: the content-free **positional prior** that our prior
  calibration divides out, when the sequences are offline text windows.
* :func:`positional_channel` -- Yu et al.'s search for the positional hidden channel, all
  three stages: monotone in enough layers (cubic fit), smoothest, then lowest validation loss
  with the channel scaled to 0.
* :func:`calibrated_attention` -- Hsieh et al.'s calibrated attention of each document of a
  prompt: its attention minus that of a dummy document at the same place.
* :func:`attention_sort` -- Peysakhovich and Lerer's attention sorting of a prompt's documents:
  by the attention the first generated token gives them, re-sorted for a few rounds.
* :func:`question_likelihood_ranking` -- LongLLMLingua's ranker: each document alone, scored by
  the model's mean loss of the question that follows it.
* :func:`row_nll` -- the next-token loss of the last rows of held-out windows: the cost of a
  remedy.
"""
from __future__ import annotations

import numpy as np

from ..models import decoder_layers
from ..models.patches import register_attention
from ..models.remedies import row_probabilities

__all__ = ["attention_rows", "layer_means", "positional_channel", "calibrated_attention",
           "attention_sort", "ATTENTION_SORT", "question_likelihood_ranking",
           "LONGLLMLINGUA_SUFFIX", "row_nll"]

_TAP = "posbias_rows"
_tapped: dict = {}


def _tap_attention(module, query, key, value, attention_mask, scaling=None, **kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    first = _tapped["first"]
    p = row_probabilities(query, key, first, scaling, kwargs.get("softcap"),
                          kwargs.get("sliding_window"))
    _tapped[module.layer_idx] = p.double().sum(0).cpu()
    return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling,
                                  **kwargs)


def _ids(input_ids):
    import torch

    ids = torch.as_tensor(np.asarray(input_ids), dtype=torch.long)
    return ids[None] if ids.ndim == 1 else ids


def attention_rows(model, input_ids, start: int, chunk: int = 4) -> np.ndarray:
    r"""Mean attention probabilities of the query rows ``start .. L-1`` against every key.

    Returns ``(n_layers, n_heads, L - start, L)`` float64, averaged over the ``B`` sequences of
    ``input_ids`` (``(B, L)``); grouped key-value heads are repeated to the query heads.  The
    probabilities are recomputed from the queries and keys the attention function receives
    (after RoPE, scaling, soft-capping, causal mask and sliding window), while the model runs
    its own fused kernel; works for models that dispatch through transformers'
    ``AttentionInterface`` (Llama-like, Qwen2, Gemma 3).
    """
    import torch
    ids = _ids(input_ids)
    B, L = ids.shape
    if not 0 <= int(start) < L:
        raise ValueError(f"start must be in 0..{L - 1}, got {start!r}")
    register_attention(_TAP, _tap_attention)
    old = model.config._attn_implementation
    device = next(model.parameters()).device
    total = None
    try:
        model.set_attn_implementation(_TAP)
        for i in range(0, B, max(int(chunk), 1)):
            _tapped.clear()
            _tapped["first"] = int(start)
            with torch.no_grad():
                model.base_model(input_ids=ids[i:i + chunk].to(device), use_cache=False)
            layers = sorted(k for k in _tapped if k != "first")
            if not layers:
                raise ValueError(f"{model.config.model_type} does not dispatch through the "
                                 "AttentionInterface: its attention rows cannot be read")
            got = torch.stack([_tapped[k] for k in layers]).numpy()
            total = got if total is None else total + got
    finally:
        model.set_attn_implementation(old)
        _tapped.clear()
    return total / B


def layer_means(model, input_ids, chunk: int = 4) -> np.ndarray:
    """Every layer's output hidden states (``output_hidden_states``: the embeddings first, the
    last after the final norm), averaged over the sequences of ``input_ids``:
    ``(n_layers + 1, L, d)`` float64."""
    import torch

    ids = _ids(input_ids)
    device = next(model.parameters()).device
    total = None
    with torch.no_grad():
        for i in range(0, ids.shape[0], max(int(chunk), 1)):
            hs = model.base_model(input_ids=ids[i:i + chunk].to(device), use_cache=False,
                                  output_hidden_states=True).hidden_states
            got = torch.stack([h.double().sum(0) for h in hs]).cpu().numpy()
            total = got if total is None else total + got
    return total / ids.shape[0]


def positional_channel(model, search_ids, prompts=None, answers=None, top: int = 10,
                       layers=None, scale: float = 0.0) -> dict:
    r"""Yu et al.'s positional hidden channel, found by their three stages
    (``experiments/search_dimension``).

    1. The mean output hidden states of every layer over ``search_ids`` (their corpus: random
       printable ASCII, no BOS, :func:`posbias_nb.tasks.text.random_ascii_batch`).
    2. :func:`posbias_nb.metrics.positional_candidates`: channels monotone (cubic fit) in more
       than a quarter of the layers, the ``top`` smoothest kept.
    3. With validation ``prompts`` and ``answers`` (their KV validation set; here the task's
       tuning prompts): each candidate scaled by ``scale`` (their 0) in ``layers`` (default
       :func:`posbias_nb.models.remedies.yu_layers`) with the last ``len(answer) + 1`` rows
       recomputed, and the mean per-token cross-entropy of the answers; the channel of the
       lowest loss is chosen.  Yu et al. print the three best, the unscaled model ("baseline")
       among them, and choose by hand; here the best candidate is taken, and the baseline's loss
       is returned beside it.  Without prompts the smoothest candidate is taken (stage 3 left
       out: say so).

    Returns ``{"channel", "candidates", "losses" (per candidate), "baseline_loss", "roughness",
    "monotone_layers", "values" (the channel's mean over its layers, by position), "stage3"}``.
    """
    from ..metrics import positional_candidates
    from ..models.remedies import remedy, yu_layers
    from .scoring import score_batch

    H = layer_means(model, search_ids)
    c = positional_candidates(H, top=top)
    cand = [int(x) for x in c["candidates"]]
    if not cand:
        raise ValueError(f"{model.config.model_type}: no channel is monotone in more than a "
                         "quarter of the layers (Yu et al.'s first stage found none)")
    T = len(decoder_layers(model))
    layers = yu_layers(T) if layers is None else [int(x) for x in layers]
    losses = np.full(len(cand), np.nan)
    base = np.nan
    if prompts is not None:
        P = [list(map(int, p)) for p in prompts]
        A = [list(map(int, a)) for a in answers]
        n = np.array([len(a) for a in A], dtype=float)
        lp, _ = score_batch(model, P, A)
        base = float(np.mean(-lp / n))
        for j, ch in enumerate(cand):
            def within(rows, ch=ch):
                return remedy(model, "hidden-scaling", channel=ch, scale=scale, layers=layers,
                              start=[len(P[r]) - 1 for r in rows])
            lp, _ = score_batch(model, P, A, within=within)
            losses[j] = float(np.mean(-lp / n))
        best = cand[int(np.argmin(losses))]
    else:
        best = cand[0]
    hs = H[1:] if H.shape[0] % 2 == 1 else H
    return {"channel": best, "candidates": np.array(cand), "losses": losses,
            "baseline_loss": base, "roughness": c["roughness"],
            "monotone_layers": c["monotone_layers"][cand], "values": hs[:, :, best].mean(0),
            "stage3": prompts is not None}


def calibrated_attention(model, prompt_ids, spans, dummies) -> dict:
    r"""Hsieh et al.'s calibrated attention (eq. 4) of each document of one prompt.

    :math:`\mathrm{Attn}(x^{doc}_k, k)` is the attention of the prompt's last token to the
    tokens of document :math:`k` (``spans[k]``), averaged over those tokens, every layer and
    every head (their section 2); :math:`\mathrm{Attn}(x^{dum}, k)` is the same quantity for the
    dummy document in the prompt where it replaces document :math:`k` (``dummies[k]``: a dict
    with ``prompt_ids`` and the dummy's ``span``, e.g. from
    :func:`posbias_nb.tasks.kv_needle.dummy_prompts`).  One extra pass per document, as the
    paper says; each reuses the keys and values of the prefix it shares with the prompt
    (``prompt_ids`` may be a :class:`posbias_nb.measure.prefix.Prefix` of the prompt already
    recorded), except where the dummy prompt is longer than a sliding window of the model: a
    full cache of such a layer cannot be reused, so that dummy prompt is one full pass (the
    same numbers up to float rounding, ``tests/unit/models/test_remedy_oracles.py``).

    Returns ``{"attention", "dummy", "relevance"}`` (``(K,)`` each; relevance = attention -
    dummy).
    """
    from .prefix import Prefix, smallest_window

    spans = [tuple(map(int, s)) for s in spans]
    w = smallest_window(model)
    if len(dummies) != len(spans):
        raise ValueError(f"{len(spans)} documents but {len(dummies)} dummy prompts")
    pre = prompt_ids if isinstance(prompt_ids, Prefix) else Prefix(model, prompt_ids)
    ids, row = pre.ids, pre.last_row
    att = np.array([row[a:b].mean() for a, b in spans])
    dum = np.zeros(len(spans))
    for k, d in enumerate(dummies):
        dids = list(map(int, d["prompt_ids"]))
        a, b = map(int, d["span"])
        c = 0
        while c < min(len(ids), len(dids), a) and ids[c] == dids[c]:
            c += 1
        if c < 1:
            raise ValueError("a dummy prompt shares no prefix with the prompt")
        if w is not None and len(dids) > w:
            dum[k] = Prefix(model, dids).last_row[a:b].mean()
        else:
            dum[k] = pre.run(c, dids[c:])[a:b].mean()
    return {"attention": att, "dummy": dum, "relevance": att - dum}


#: Peysakhovich and Lerer's defaults (``adamlerer/synthwiki``, ``eval_llama.py``):
#: ``--attn_sort_iters 3`` rounds and ``--best_doc_last 1`` (the most attended document last,
#: next to the question).
ATTENTION_SORT = {"rounds": 3, "best_last": True}


def attention_sort(model, codec, question: str, documents, rounds: int = ATTENTION_SORT["rounds"],
                   best_last: bool = ATTENTION_SORT["best_last"]) -> dict:
    r"""Peysakhovich and Lerer's attention sorting (2023; ``attnSortLLM`` in
    ``adamlerer/synthwiki``'s ``llama_utils.py``) of the documents of one question.

    Each round builds the question's prompt with the documents in the current order
    (:func:`posbias_nb.tasks.qa.qa_prompt`), runs it once, and scores each document by the
    attention that the prompt's last token (the one that generates the first answer token)
    gives its tokens: summed over the document's tokens, averaged over heads and layers (their
    ``getCitation`` then ``getAttnScores``).  The documents are sorted by that score, highest
    first, and reversed where ``best_last`` (their ``best_doc_last``), and the next round scores
    the new order.  ``rounds`` passes in all; the answer is then scored on the final order.

    Departures: the prompt is this book's (Liu et al.'s QA template, rendered by ``codec``, the
    chat template of an instruct model), not their "wizard" instruction prompt; the attention
    is read with the model's own attention function (softcap and sliding windows included,
    :func:`posbias_nb.models.remedies.row_probabilities`) where theirs patches Llama's.

    Returns ``{"order": [...]`` (indices into ``documents``, first slot first), ``"scores"``
    (``(rounds, K)``: each round's score of every document, indexed as ``documents``)``}``.
    """
    from ..tasks import qa
    from .._validate import positive_int
    from .prefix import Prefix

    docs = list(documents)
    if not docs:
        raise ValueError("an empty document list: nothing to sort")
    rounds = positive_int("rounds", rounds)
    order = list(range(len(docs)))
    scores = np.zeros((rounds, len(docs)))
    for r in range(rounds):
        ids, spans = qa.document_token_spans(codec, qa.qa_prompt(question,
                                                                 [docs[i] for i in order]))
        if len(spans) != len(docs):
            raise ValueError(f"a prompt of {len(docs)} documents was read as {len(spans)}: a "
                             "document's text holds another document header")
        row = Prefix(model, ids).last_row
        s = np.array([row[a:b].sum() for a, b in spans])
        scores[r, order] = s
        ranked = [order[i] for i in np.argsort(-s, kind="stable")]
        order = ranked[::-1] if best_last else ranked
    return {"order": order, "scores": scores}


#: What LongLLMLingua appends to the question (``get_distance_longllmlingua``).
LONGLLMLINGUA_SUFFIX = " We can get the answer to this question in the given documents."


def question_likelihood_ranking(model, codec, question: str, documents) -> dict:
    r"""LongLLMLingua's question-aware ranking of documents (Jiang et al. 2024;
    ``microsoft/LLMLingua``, ``PromptCompressor.get_rank_results`` with
    ``rank_method="longllmlingua"`` and ``condition_in_question="after"``, its README's setting).

    Each document alone, followed by the question and :data:`LONGLLMLINGUA_SUFFIX`, is one pass
    of the model; its score is the mean negative log-likelihood of the question's tokens (their
    ``get_condition_ppl``: the loss from the document's last token on, so the first question
    token counts).  Lower is more relevant, and the ranking sorts ascending.  No document
    shares a pass with another, so the ranking carries no position of the prompt.

    The text is tokenized as LLMLingua tokenizes it: the model's tokenizer with its special
    tokens and no chat template (``codec``'s bytes for a tokenizer-free model).  A document is
    its text as Liu et al.'s prompt shows it, without its number: ``(Title: T) text``.

    Returns ``{"ranking": [...]`` (indices into ``documents``, most relevant first),
    ``"nll"`` (``(K,)``, nats per question token)``}``.
    """
    import torch

    docs = list(documents)
    if not docs:
        raise ValueError("an empty document list: nothing to rank")

    def ids(text):
        if codec.tok is None:
            return codec.encode(text, prompt=True)[0]
        return list(codec.tok(text, add_special_tokens=True)["input_ids"])

    device = next(model.parameters()).device
    nll = np.zeros(len(docs))
    q = question + LONGLLMLINGUA_SUFFIX
    for k, d in enumerate(docs):
        text = f"(Title: {d.title}) {d.text}"
        cond = len(ids(text)) - 1
        full = ids(text + q)
        if len(full) <= cond + 1:
            raise ValueError(f"document {k}: the question adds no token after it")
        x = torch.as_tensor([full], dtype=torch.long, device=device)
        with torch.no_grad():
            logits = model(input_ids=x).logits[0, :-1].double()
        loss = torch.nn.functional.cross_entropy(logits, x[0, 1:], reduction="none")
        nll[k] = float(loss[cond:].mean())
    return {"ranking": [int(i) for i in np.argsort(nll, kind="stable")], "nll": nll}


def row_nll(model, input_ids, start: int) -> np.ndarray:
    r"""Mean next-token loss (nats) of the predictions made at rows ``start .. L-2`` of each
    sequence of ``input_ids``: ``(B,)``.  The cost of a remedy: its change on held-out text."""
    import torch

    from .scoring import answer_logits

    ids = _ids(input_ids)
    B, L = ids.shape
    if not 0 <= int(start) < L - 1:
        raise ValueError(f"start must be in 0..{L - 2}, got {start!r}")
    device = next(model.parameters()).device
    out = np.zeros(B)
    with torch.no_grad():
        for b in range(B):
            h = model.base_model(input_ids=ids[b:b + 1].to(device),
                                 use_cache=False).last_hidden_state[0]
            lp = torch.log_softmax(answer_logits(model, h[start:L - 1]).double(), -1)
            tgt = ids[b, start + 1:].to(device)
            out[b] = -float(lp.gather(1, tgt[:, None]).mean())
    return out
