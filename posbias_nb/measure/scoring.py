r"""Teacher-forced scoring of an answer (log-probability and greedy exact match), and greedy
generation scored by substring match.

Chapter *From prior to behaviour*, eq. ``eq-ret-logprob``.  Used by
:mod:`posbias_nb.experiments.prompt.retrieval`; torch is imported when a score is computed.

:func:`score_batch` scores many prompts in few forward passes: the sequences are **right**-padded
and stacked.  In a causal model a token never attends to a later one, so the padding after a
sequence cannot change a logit of that sequence, and no attention mask or position shift is
needed (left padding would need both); only the per-row positions of the answer are read.  The
numbers equal :func:`score`'s up to float rounding of batched matrix products
(``tests/unit/studies/test_retrieval.py`` checks 1e-5).
"""
from __future__ import annotations

import contextlib

import numpy as np

__all__ = ["score", "score_batch", "score_hidden", "answer_logits", "generate_greedy",
           "generate_greedy_batch", "score_and_generate"]


def answer_logits(model, hidden):
    """Output logits of ``hidden`` states (float32), with the model's final soft-capping."""
    import torch

    logits = model.get_output_embeddings()(hidden)
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits.float()


def _check(p, a):
    if len(p) < 1 or len(a) < 1:
        raise ValueError(f"prompt and answer must be non-empty, got {len(p)} and {len(a)} ids")


def score(model, prompt_ids, answer_ids) -> tuple[float, bool]:
    r"""Teacher-forced log-probability of the answer and greedy exact match (eq.
    ``eq-ret-logprob``, chapter *From prior to behaviour*): one forward pass over
    ``prompt_ids + answer_ids``; logits only at the ``m`` answer-predicting positions."""
    lp, ok = score_batch(model, [prompt_ids], [answer_ids], batch=1)
    return float(lp[0]), bool(ok[0])


def score_hidden(model, hidden, prompt_len: int, answer_ids) -> tuple[float, bool]:
    r"""Eq. ``eq-ret-logprob`` from the final hidden states ``hidden`` (``(L, d)``, one
    sequence ``prompt + answer``) of a forward pass already made: ``(logprob, correct)``."""
    import torch

    p, a = int(prompt_len), list(map(int, answer_ids))
    out = torch.log_softmax(answer_logits(model, hidden[p - 1:p + len(a) - 1]).double(), -1)
    tgt = torch.tensor(a, device=out.device)
    return float(out.gather(1, tgt[:, None]).sum()), bool((out.argmax(-1) == tgt).all())


def score_batch(model, prompts, answers, batch: int = 8, max_tokens: int = 4096, within=None):
    r""":func:`score` of many prompts: ``(logprob, correct)`` numpy arrays in input order.

    Sequences (prompt + answer) are sorted by length and stacked, right-padded, in groups of at
    most ``batch`` rows and ``max_tokens`` padded tokens (see the module docstring: right
    padding changes no logit of a causal model).  Chapter *From prior to behaviour*, eq.
    ``eq-ret-logprob``.

    ``within``, if given, is called with the input indices of each stacked group and returns
    a context manager that the group's forward pass runs in: an inference-time remedy whose
    parameters differ by prompt (e.g. ``start``, the prompt's last row, one per sequence).

    Raises
    ------
    ValueError
        An empty prompt or answer, or ``prompts`` and ``answers`` of different lengths.
    """
    import torch

    P = [list(map(int, p)) for p in prompts]
    A = [list(map(int, a)) for a in answers]
    if len(P) != len(A):
        raise ValueError(f"{len(P)} prompts but {len(A)} answers")
    for p, a in zip(P, A):
        _check(p, a)
    batch = max(int(batch), 1)
    n = len(P)
    lens = np.array([len(p) + len(a) for p, a in zip(P, A)])
    order = np.argsort(lens, kind="stable")
    lp = np.zeros(n)
    ok = np.zeros(n, dtype=bool)
    device = next(model.parameters()).device
    i = 0
    while i < n:
        j = i + 1
        while j < n and j - i < batch and lens[order[j]] * (j - i + 1) <= max_tokens:
            j += 1
        rows = order[i:j]
        T = int(lens[rows].max())
        ids = torch.zeros((len(rows), T), dtype=torch.long)
        for r, q in enumerate(rows):
            seq = P[q] + A[q]
            ids[r, :len(seq)] = torch.tensor(seq)
        ctx = within([int(q) for q in rows]) if within is not None else contextlib.nullcontext()
        with torch.no_grad(), ctx:
            h = model.base_model(input_ids=ids.to(device), use_cache=False).last_hidden_state
            for r, q in enumerate(rows):
                lp[q], ok[q] = score_hidden(model, h[r], len(P[q]), A[q])
        i = j
    return lp, ok


# transformers 5.x renamed the decoding cache argument (``past_key_values`` -> ``cache``, the old
# name deprecated with a warning on stderr); the name this installed version takes
def _cache_kw() -> str:
    import inspect

    from transformers import LlamaModel

    return "cache" if "cache" in inspect.signature(LlamaModel.forward).parameters \
        else "past_key_values"


_CACHE_KW = None


def generate_greedy(model, prompt_ids, max_new_tokens: int, stop=None, eos=None) -> list[int]:
    r"""Greedy decoding of up to ``max_new_tokens`` tokens after ``prompt_ids`` (one prompt; the
    key-value cache carries the prefix).  Stops early at an ``eos`` id, or when
    ``stop(generated_ids)`` returns True (e.g. the answer has already appeared).

    The Liu-faithful variant of chapter *From prior to behaviour* (free generation, scored by
    substring match).  Returns the generated ids (the ``eos`` id included when met).
    """
    import torch

    global _CACHE_KW
    p = list(map(int, prompt_ids))
    if len(p) < 1:
        raise ValueError("prompt must be non-empty")
    if _CACHE_KW is None:
        _CACHE_KW = _cache_kw()
    eos = set() if eos is None else ({int(eos)} if np.isscalar(eos) else set(map(int, eos)))
    device = next(model.parameters()).device
    out: list[int] = []
    past = None
    x = torch.tensor([p], dtype=torch.long, device=device)
    with torch.no_grad():
        for _ in range(int(max_new_tokens)):
            o = model.base_model(input_ids=x, use_cache=True, **({} if past is None else
                                                                 {_CACHE_KW: past}))
            past = getattr(o, "cache", None) or o.past_key_values
            nxt = int(answer_logits(model, o.last_hidden_state[0, -1:])[0].argmax())
            out.append(nxt)
            if nxt in eos or (stop is not None and stop(out)):
                break
            x = torch.tensor([[nxt]], dtype=torch.long, device=device)
    return out


def generate_greedy_batch(model, prompts, max_new_tokens, stops=None, eos=None,
                          batch: int = 8) -> list[list[int]]:
    r""":func:`generate_greedy` of many prompts, ``batch`` at a time: the prompts are padded on
    the **left** (with an attention mask and explicit position ids, so every row computes what it
    computes alone, up to float rounding) and decoded together, one weight read per step for the
    whole group instead of one per prompt (on a CPU a decoding step streams every weight, the
    output embedding included).  ``max_new_tokens`` and ``stops`` (callables on the generated
    ids) are per prompt or one for all; a row stops at its budget, at an ``eos`` id or when its
    ``stop`` returns True.  Returns the generated ids of each prompt, in input order
    (``tests/unit/studies/test_retrieval.py`` checks them against one-by-one decoding).
    """
    import torch

    global _CACHE_KW
    P = [list(map(int, p)) for p in prompts]
    if any(len(p) < 1 for p in P):
        raise ValueError("prompts must be non-empty")
    n = len(P)
    budget = [int(max_new_tokens)] * n if np.isscalar(max_new_tokens) else \
        [int(b) for b in max_new_tokens]
    stops = [stops] * n if stops is None or callable(stops) else list(stops)
    if len(budget) != n or len(stops) != n:
        raise ValueError("max_new_tokens and stops need one entry per prompt")
    if _CACHE_KW is None:
        _CACHE_KW = _cache_kw()
    eos = set() if eos is None else ({int(eos)} if np.isscalar(eos) else set(map(int, eos)))
    device = next(model.parameters()).device
    out: list = [None] * n
    order = np.argsort([len(p) for p in P], kind="stable")
    for g0 in range(0, n, max(int(batch), 1)):
        rows = [int(i) for i in order[g0:g0 + batch]]
        L = max(len(P[i]) for i in rows)
        ids = torch.zeros((len(rows), L), dtype=torch.long)
        mask = torch.zeros((len(rows), L), dtype=torch.long)
        for r, i in enumerate(rows):
            ids[r, L - len(P[i]):] = torch.tensor(P[i])
            mask[r, L - len(P[i]):] = 1
        pos = (mask.cumsum(1) - 1).clamp(min=0)
        gen = [[] for _ in rows]
        done = [budget[i] <= 0 for i in rows]
        past = None
        x, m_, p_ = ids, mask, pos
        with torch.no_grad():
            for _ in range(max(budget[i] for i in rows)):
                if all(done):
                    break
                o = model.base_model(input_ids=x.to(device), attention_mask=m_.to(device),
                                     position_ids=p_.to(device), use_cache=True,
                                     **({} if past is None else {_CACHE_KW: past}))
                past = getattr(o, "cache", None) or o.past_key_values
                nxt = answer_logits(model, o.last_hidden_state[:, -1]).argmax(-1).cpu()
                for r, i in enumerate(rows):
                    if done[r]:
                        continue
                    t = int(nxt[r])
                    gen[r].append(t)
                    if t in eos or len(gen[r]) >= budget[i] or \
                            (stops[i] is not None and stops[i](gen[r])):
                        done[r] = True
                x = nxt[:, None]
                m_ = torch.cat((m_, torch.ones((len(rows), 1), dtype=torch.long)), dim=1)
                p_ = p_[:, -1:] + 1
        for r, i in enumerate(rows):
            out[i] = gen[r]
    return out


def score_and_generate(model, prompt_ids, answers, max_new_tokens: int, stop=None, eos=None):
    r"""One prefill of ``prompt_ids``, then (a) the teacher-forced log-probability of each of
    ``answers`` (lists of ids) continued from a copy of its key-value cache, and (b) greedy
    decoding of up to ``max_new_tokens`` tokens from it (stopping at an ``eos`` id or when
    ``stop(generated_ids)`` is True): what :func:`score_batch` and :func:`generate_greedy` give
    together, at the cost of one pass over the prompt instead of two.  Equal to them up to float
    rounding (``tests/integration/test_cli_task_file.py`` checks it).  The cache is copied, never cropped (a
    sliding-window layer's cache cannot be cropped once full).

    Returns ``(logprobs, generated_ids)``: one float per answer, and the generated ids.
    """
    import copy

    import torch

    global _CACHE_KW
    p = list(map(int, prompt_ids))
    A = [list(map(int, a)) for a in answers]
    if not p or not A or any(not a for a in A):
        raise ValueError("prompt and every answer must be non-empty")
    if _CACHE_KW is None:
        _CACHE_KW = _cache_kw()
    eos = set() if eos is None else ({int(eos)} if np.isscalar(eos) else set(map(int, eos)))
    device = next(model.parameters()).device
    base = model.base_model

    def step(ids, past):
        x = torch.tensor([ids], dtype=torch.long, device=device)
        o = base(input_ids=x, use_cache=True, **({} if past is None else {_CACHE_KW: past}))
        return o.last_hidden_state[0], getattr(o, "cache", None) or o.past_key_values

    with torch.no_grad():
        h, past = step(p, None)
        last = h[-1:]
        lps = []
        for a in A:
            rows = last
            if len(a) > 1:
                hc, _ = step(a[:-1], copy.deepcopy(past))
                rows = torch.cat((last, hc), 0)
            out = torch.log_softmax(answer_logits(model, rows).double(), -1)
            tgt = torch.tensor(a, device=out.device)
            lps.append(float(out.gather(1, tgt[:, None]).sum()))
        gen: list[int] = []
        row = last
        for _ in range(int(max_new_tokens)):
            nxt = int(answer_logits(model, row)[0].argmax())
            gen.append(nxt)
            if nxt in eos or (stop is not None and stop(gen)):
                break
            h, past = step([nxt], past)
            row = h[-1:]
    return lps, gen
