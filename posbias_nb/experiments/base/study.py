r"""The shared base of the studies that score prompts: a model with its codec, a prompt's ids,
an answer's ids, the greedy stop rule, the examples drawn, a remedy file read, and a remedy
scored on prompts.

Every study that puts prompts before a pretrained model (:mod:`.retrieval`, :mod:`.task`,
:mod:`.inference`, :mod:`.placement`, :mod:`.fix`, :mod:`.realqa`, :mod:`.confirm`,
:mod:`.report`) calls these, so each is defined once and public:

=============================  =================================================================
:func:`load`                   the model, its tokenizer (a random twin reads its packaged one) and
                               the entry's description
:func:`codec`                  the :class:`~posbias_nb.tasks.codec.Codec` of a model: how its
                               tokenizer renders and encodes a prompt
:func:`eos_ids`                the ids that end a greedy generation
:func:`encode`                 a prompt text's ids, rendered as the model reads it (chat template
                               where it has one)
:func:`answer_ids`             an answer's ids after the prompt
:func:`first_line_done`        the stop rule of a greedy answer: its first line is complete
:func:`draw_examples`          the examples of a file used, drawn by seed
:func:`remedy_from_file`       a remedy file's remedy and parameters, refused for another model
:func:`score_remedy`           the teacher-forced scores of answers under a remedy's settings
:func:`last_rows_fn`           the context a remedy that changes the last rows is scored in
:func:`prompt_documents`       a prompt's document spans and the calibration's dummy prompts
:func:`calibrated_relevance`   a prompt's recorded pass and its documents' calibrated attention
=============================  =================================================================

It imports no study: it is the first floor of :mod:`posbias_nb.experiments`.
"""
from __future__ import annotations

import numpy as np

from ... import models
from ...measure import entry
from ...measure.positional import calibrated_attention
from ...measure.prefix import Prefix, score_after_prefix, smallest_window
from ...measure.scoring import score_batch
from ...models.remedies import REMEDIES
from ...tasks import qa
from ...tasks.codec import Codec

__all__ = ["load", "codec", "eos_ids", "encode", "answer_ids", "first_line_done", "draw_examples",
           "remedy_from_file", "score_remedy", "last_rows_fn", "prompt_documents",
           "calibrated_relevance", "DUMMIES"]

#: The dummies of the attention calibration (:data:`posbias_nb.tasks.qa.DUMMIES`).
DUMMIES = qa.DUMMIES


def load(model, weights: str, seed: int):
    """``(model, tokenizer, info)`` of ``model`` (:func:`posbias_nb.measure.entry.loaded`,
    fused attention).  A random-init twin of a zoo model reads the packaged tokenizer of its
    pretrained original (the same ids); a ``-tiny`` twin, whose small vocabulary cannot hold
    them, reads bytes (tokenizer None)."""
    m, tok, info = entry.loaded(model, weights=weights, seed=seed)
    if tok is None and isinstance(model, str) and model in models.ZOO:
        try:
            tok = models.packaged_tokenizer(model)
        except (ValueError, OSError, KeyError):
            tok = None
        if tok is not None and len(tok) > m.get_input_embeddings().num_embeddings:
            tok = None
    return m, tok, info


def codec(m, tok) -> Codec:
    """The :class:`~posbias_nb.tasks.codec.Codec` of the model ``m`` and its tokenizer
    ``tok`` (None: bytes within the model's vocabulary)."""
    return Codec(tok, m.get_input_embeddings().num_embeddings)


def eos_ids(m, tok) -> set:
    """The ids that end a greedy generation: the model's generation config's, its config's and
    the tokenizer's ``eos_token_id``, together."""
    ids = set()
    for src in (getattr(m, "generation_config", None), getattr(m, "config", None), tok):
        e = getattr(src, "eos_token_id", None) if src is not None else None
        if e is not None:
            ids.update([e] if np.isscalar(e) else list(e))
    return ids


def encode(codec, text) -> list:
    """The ids of the prompt ``text`` as the model reads it (rendered by ``codec``: its chat
    template where it has one)."""
    prompt, _ = codec.render(text)
    return codec.encode(prompt, prompt=True)[0]


def answer_ids(codec, answer) -> list:
    """The ids of ``answer`` after the prompt: after ``Answer:`` (or the assistant's turn of a
    chat template) the answer starts with a space."""
    return codec.encode(("" if codec.chat else " ") + answer, prompt=False)[0]


def first_line_done(codec):
    """The stop rule of a greedy answer: ``stop(ids)`` is True once the decoded text holds a
    line break after its leading white space (the first line is complete)."""
    def stop(ids):
        t = codec.decode(ids)
        return "\n" in t.lstrip()
    return stop


def draw_examples(n_total: int, examples: int | None, seed: int) -> np.ndarray:
    """The examples used: all, or ``examples`` of them drawn without replacement by ``seed``,
    in file order."""
    if examples is None or examples >= n_total:
        return np.arange(n_total)
    return np.sort(np.random.default_rng([seed, 0x7A5C]).permutation(n_total)[:examples])


def remedy_from_file(model, file, weights, prompt: bool = False):
    """``(name, params)`` of a remedy file (:mod:`posbias_nb.models.remedy_file`), refused
    unless it was made for ``model``: its fingerprint by name, then its loaded weights.  A
    prompt remedy's file is refused unless ``prompt`` (the caller has documents to place)."""
    from ...models import remedy_file
    from ...models.remedies import prompt_remedy_refused

    spec = remedy_file.read(file)
    if spec["remedy"] in remedy_file.PROMPT_REMEDIES and not prompt:
        raise ValueError(prompt_remedy_refused(file, spec["remedy"]))
    remedy_file.check_model(spec, file, name=model)
    m = entry.loaded(model, weights=weights, seed=0)[0]
    remedy_file.check_model(spec, file, model=m)
    return spec["remedy"], dict(spec["params"])


def last_rows_fn(m, remedy, params, spans, rel):
    """``f(start, context)``: the context manager that applies ``remedy`` (one that changes the
    rows from the prompt's last token on) with ``params`` to ``m``, for
    :func:`~posbias_nb.measure.prefix.score_after_prefix`; the attention calibration also reads
    the prompt's document ``spans`` and their relevance ``rel``."""
    def f(start, context):
        if remedy == "hidden-scaling":
            return models.remedy(m, remedy, start=start, context=context, **params)
        if remedy == "attention-calibration":  # params may name the shared normaliser
            return models.remedy(m, remedy, start=start, spans=spans, relevance=rel, **params)
        return models.remedy(m, remedy, start=start, **params)
    return f


def score_remedy(m, prompts, answers, name: str, settings, base: bool = True, spans=None,
                 relevance=None, prefixes=None):
    r"""Teacher-forced scores (eq. ``eq-ret-logprob``) of ``answers`` after ``prompts`` under
    the remedy ``name`` with each of ``settings`` (prompt-independent keyword arguments of
    :func:`posbias_nb.models.remedy`; ``start``, the prompt's last row, is added per prompt),
    and of the model as it is first when ``base``: ``(logprob, correct)``, each of shape
    ``(len(settings) + base, len(prompts))``.

    A remedy that changes only the rows from the prompt's last token on (hidden scaling, our
    prior calibration) is scored on one recorded pass per prompt
    (:func:`~posbias_nb.measure.prefix.score_after_prefix`) where prompt and answer fit every
    sliding window; otherwise, and for the remedies that change every row (Ms-PoE, hidden
    scaling in every row), by batched full passes
    (:func:`~posbias_nb.measure.scoring.score_batch`).  Both equal full passes up to float
    rounding (``tests/unit/models/test_remedy_oracles.py``).  The attention calibration reads each prompt's
    documents: ``spans`` (the documents' token ranges of each prompt, the same number of
    documents in every prompt where they are scored by batched full passes) and ``relevance``
    (their calibrated attention, :func:`~posbias_nb.measure.positional.calibrated_attention`),
    one entry per prompt; ``prefixes`` may give each prompt's recorded
    :class:`~posbias_nb.measure.prefix.Prefix` (made for the relevance) to score on.
    """
    if name not in REMEDIES:
        raise ValueError(f"score_remedy scores {', '.join(REMEDIES)}; got {name!r}")
    P = [list(map(int, p)) for p in prompts]
    A = [list(map(int, a)) for a in answers]
    S = [dict(s) for s in settings]
    n = len(P)
    cal = name == "attention-calibration"
    if cal and (spans is None or relevance is None or len(spans) != n or len(relevance) != n):
        raise ValueError(f"attention-calibration needs spans= and relevance=, one per prompt: "
                         f"{n} prompts, {None if spans is None else len(spans)} spans, "
                         f"{None if relevance is None else len(relevance)} relevances")
    if prefixes is not None and (len(prefixes) != n or any(
            list(pre.ids) != p for pre, p in zip(prefixes, P))):
        raise ValueError(f"prefixes must be the recorded passes of the {n} prompts, in order "
                         f"(got {len(prefixes)}, or one of another prompt)")
    lp = np.zeros((len(S) + bool(base), n))
    ok = np.zeros((len(S) + bool(base), n), dtype=bool)
    w = smallest_window(m)
    prefix = name in ("hidden-scaling", "prior-calibration", "attention-calibration") and \
        n > 0 and (w is None or max(len(p) + len(a) for p, a in zip(P, A)) <= w)
    if prefix:
        for i, (p, a) in enumerate(zip(P, A)):
            pre = prefixes[i] if prefixes is not None and \
                (name != "hidden-scaling" or prefixes[i]._h) else \
                Prefix(m, p, hidden=name == "hidden-scaling")
            sp, rel = ([tuple(x) for x in spans[i]], relevance[i]) if cal else ((), None)
            fns = ([None] if base else []) + [last_rows_fn(m, name, kw, sp, rel) for kw in S]
            for j, (v, c) in enumerate(score_after_prefix(pre, a, fns)):
                lp[j, i], ok[j, i] = v, c
        return lp, ok
    if base:
        lp[0], ok[0] = score_batch(m, P, A)
    for j, kw in enumerate(S):
        def within(rows, kw=kw):
            if name == "hidden-scaling-all":  # every row: no start
                return models.remedy(m, name, **kw)
            if cal:
                return models.remedy(m, name, **dict(
                    kw, start=[len(P[q]) - 1 for q in rows],
                    spans=[[tuple(x) for x in spans[q]] for q in rows],
                    relevance=[list(relevance[q]) for q in rows]))
            return models.remedy(m, name, **dict(kw, start=[len(P[q]) - 1 for q in rows]))
        lp[j + bool(base)], ok[j + bool(base)] = score_batch(m, P, A, within=within)
    return lp, ok


def prompt_documents(codec, text: str, ids=None, dummy: str = "paper") -> tuple[list, list]:
    """The token spans of the documents of the prompt ``text`` (a QA or key-value task prompt,
    :func:`posbias_nb.tasks.qa.document_token_spans`) and Hsieh et al.'s dummy prompts, each
    document replaced in turn by the dummy (``dummy="paper"``:
    :func:`posbias_nb.tasks.qa.dummy_documents`; ``"length-matched"``, ours:
    :func:`posbias_nb.tasks.qa.length_matched_dummies`), as
    :func:`~posbias_nb.measure.positional.calibrated_attention` reads them.  ``ids``: the
    prompt's ids as the caller encoded them, which must be these."""
    if dummy not in DUMMIES:
        raise ValueError(f"dummy must be one of {', '.join(DUMMIES)}, got {dummy!r}")
    got, spans = qa.document_token_spans(codec, text)
    if ids is not None and list(got) != list(map(int, ids)):
        raise ValueError(f"a prompt's documents were read from another encoding than its ids "
                         f"({len(got)} tokens against {len(ids)})")
    dums = []
    alts = qa.dummy_documents(text) if dummy == "paper" else \
        qa.length_matched_dummies(codec, text)
    for alt, cs in alts:
        dids, (sp,) = qa.document_token_spans(codec, alt, [cs])
        dums.append({"prompt_ids": dids, "span": sp})
    return spans, dums


def calibrated_relevance(m, ids, docs, full: bool = False):
    """One prompt's recorded pass (:class:`~posbias_nb.measure.prefix.Prefix`) and the
    calibrated attention of its documents (Hsieh et al.'s eq. 4), ``docs`` from
    :func:`prompt_documents`; with ``full``, the whole of
    :func:`~posbias_nb.measure.positional.calibrated_attention`'s answer (``attention``,
    ``dummy``, ``relevance``) instead of the relevance."""
    pre = ids if isinstance(ids, Prefix) else Prefix(m, ids)
    got = calibrated_attention(m, pre, docs[0], docs[1])
    return pre, got if full else got["relevance"]
