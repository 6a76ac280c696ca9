"""``posbias task``'s measurement: every prompt of the chosen examples scored by greedy
generation and by the gold answer's log p, under a remedy file where one is given (cached,
namespace ``task``)."""
from __future__ import annotations

import sys
from pathlib import Path
import numpy as np
from .... import cache
from ...._validate import positive_int
from ....measure import entry
from ....measure.scoring import score_and_generate
from ....models.remedy_file import PROMPT_REMEDIES
from ....models.weights import file_sha256
from ....results import Result
from ....tasks import qa
from ....tasks.codec import Codec
from ...base import study
from ...base.prompts import TASK_DEFAULTS as DEFAULTS
from ...base.prompts import prepare, prompt_remedy
from .config import DEFINITION
from .statistics import _result

__all__ = ["task_run"]


def task_run(model, data, documents: int | None = None, positions=None,
             examples: int | None = DEFAULTS["examples"], keys: int | None = None,
             seed: int = DEFAULTS["seed"], weights: str = "pretrained",
             max_new_tokens: int = DEFAULTS["max_new_tokens"],
             fmt: str | None = None, select=None, remedy_file=None,
             progress: bool = False) -> Result:
    """Accuracy and answer log-probability per gold position on a task file (module docstring);
    what ``posbias task`` writes.

    Parameters
    ----------
    model : str or path
        A zoo name, a local model directory or a hub id (read from the local hub cache).
    data : path
        A task file in one of :data:`posbias_nb.tasks.qa.FORMATS`.
    documents : int
        Documents per prompt for a QA file (default 10): the file's own passages first, then
        BM25 distractors from the file's other gold passages.
    positions : list of int or None
        The 0-based gold slots (default :func:`posbias_nb.tasks.qa.gold_positions`).
    examples : int or None
        How many examples (drawn by ``seed``, in file order); None: all.
    keys : int or None
        Records per prompt for a key-value file (default: all of them).
    max_new_tokens : int
        The generation budget (Liu et al. allow 100; the first line is what is scored).
    select : list of int or None
        The 0-based indices of the examples to use (instead of ``examples`` and ``seed``).
    progress : bool
        A tqdm bar over the prompts on stderr while they are measured (``posbias task``
        without ``--quiet``); nothing is drawn when the run is read from the cache.
    remedy_file : path or None
        A remedy file (``posbias fix``'s ``remedy.json``, ``posbias task --remedy-file``):
        every prompt is scored and generated under its remedy, from the prompt's last row on
        (hidden scaling, Ms-PoE, our prior calibration) or in every row (hidden-scaling-all):
        the answers' log p as ``posbias fix`` scores them
        (:func:`posbias_nb.experiments.base.study.score_remedy`), the greedy answer decoded
        under the remedy with a key-value cache (equal to full passes:
        ``tests/integration/test_fix.py``).  A file of the attention calibration: each prompt's documents
        are found in its text and their relevance measured on it (one extra pass per
        document, :func:`posbias_nb.experiments.base.study.prompt_documents`); a prompt with fewer
        than two documents (closed-book, oracle) is left as it is, which the calibration would
        not change.  Refused on a model it was not made for.

    Returns
    -------
    Result
        Columns :data:`CSV_COLUMNS`, one row per gold position (``setting="documents"``,
        ``gold_document`` 1-based) and one per reference line; ``outcomes`` (counts per
        position of :data:`OUTCOMES`), ``examples`` (every prompt's generation, its outcome,
        its log p) and ``meta``.

    Raises
    ------
    ValueError
        Every refusal of :func:`prepare`; an unknown model or weights not installed; prompts
        beyond the model's context (how many, and the longest); a remedy file refused
        (:func:`posbias_nb.models.remedy_file.read`, or made for another model).
    """
    path = Path(data)
    P = prepare(path, documents, positions, examples, keys, seed, fmt, select)  # no model yet
    max_new_tokens = positive_int("max_new_tokens", max_new_tokens)
    info = entry.checked(model, weights, 2, 1, seed)
    rem = None if remedy_file is None else _remedy(model, remedy_file, weights, P)
    params = entry.run_key(info, weights, P["documents"], None, seed, text=False,
                           definition=DEFINITION, data=file_sha256(path), format=P["format"],
                           chosen=P["chosen"], positions=P["positions"],
                           max_new_tokens=max_new_tokens,
                           **({} if rem is None else {"remedy": rem[0], "setting": rem[1]}),
                           **({"dummy": [qa.DUMMY_DOCUMENT.title, qa.DUMMY_DOCUMENT.text,
                                         *qa.DUMMY_RECORD]}
                              if rem is not None and rem[0] == "attention-calibration" else {}))

    rows = []  # (example, slot or "closed-book"/"oracle", text)
    for e, it in enumerate(P["items"]):
        rows += [(e, j, t) for j, t in enumerate(it["prompts"])]
        rows += [(e, r, it[r]) for r in ("closed_book", "oracle") if r in it]
    loaded: dict = {}

    def ready() -> dict:
        if not loaded:
            m, tok, _ = study.load(model, weights, seed)
            codec = Codec(tok, m.get_input_embeddings().num_embeddings)
            loaded.update(m=m, codec=codec, eos=study.eos_ids(m, codec.tok),
                          stop=study.first_line_done(codec))
        return loaded

    def one(r: int, pid=None) -> dict:
        """Prompt ``r`` scored and answered alone: what the whole entry holds at row ``r``,
        so a re-measurement can sample prompts (cache.Parts)."""
        L = ready()
        e, kind, t = rows[r]
        pid = study.encode(L["codec"], t) if pid is None else pid
        answers = [study.answer_ids(L["codec"], a) for a in P["items"][e]["answers"]]
        here = rem
        if rem is not None and rem[0] in PROMPT_REMEDIES:
            here = None  # the prompt changes, the model does not
            if not isinstance(kind, str):
                it = P["items"][e]
                t = prompt_remedy(rem[0], rem[1], it["question"], it["documents"][kind],
                                  model=L["m"], codec=L["codec"],
                                  file_order=it.get("file_order"))["prompt"]
                pid = study.encode(L["codec"], t)
                if info["max_length"] is not None and \
                        len(pid) + max_new_tokens > info["max_length"]:
                    raise ValueError(f"under {rem[0]} a prompt takes {len(pid)} tokens with "
                                     f"{max_new_tokens} to answer, beyond {info['name']}'s "
                                     f"context of {info['max_length']}: fewer --documents")
        elif rem is not None and rem[0] == "attention-calibration":
            # the closed-book and oracle prompts hold fewer than two documents: unchanged
            here = None if isinstance(kind, str) else _calibration_here(L["m"], L["codec"],
                                                                         rem, t, pid)
        if here is None:
            lps, g = score_and_generate(L["m"], pid, answers, max_new_tokens, stop=L["stop"],
                                        eos=L["eos"])
        else:
            lps, g = _under_remedy(L["m"], here, pid, answers, max_new_tokens, L["stop"],
                                   L["eos"])
        return {"example": np.array(e),
                "slot": np.array(kind if isinstance(kind, int) else
                                 -1 if kind == "closed_book" else -2),
                "logprob": np.array(float(max(lps))),  # the best of the gold answers
                "output": np.array(L["codec"].decode(g), dtype=str),
                "prompt_len": np.array(len(pid))}

    def compute():
        from tqdm import tqdm

        codec = ready()["codec"]
        ids = [study.encode(codec, t) for _, _, t in rows]
        longest = max(len(i) for i in ids) + max_new_tokens
        if info["max_length"] is not None and longest > info["max_length"]:
            over = sum(len(i) + max_new_tokens > info["max_length"] for i in ids)
            raise ValueError(f"{over} of {len(ids)} prompts are too long for {info['name']} "
                             f"(context {info['max_length']} tokens): the longest takes "
                             f"{longest} with the answer budget; fewer --documents or --keys")
        bar = tqdm(range(len(rows)), disable=not progress, file=sys.stderr, leave=False,
                   desc="task", unit="prompt")
        got = [one(r, ids[r]) for r in bar]
        return {n: np.array([g[n] for g in got], dtype=str if n == "output" else None)
                for n in ("example", "slot", "logprob", "output", "prompt_len")}

    def take(arrays, r: int) -> dict:
        return {n: np.asarray(arrays[n][r]) for n in ("example", "slot", "logprob", "output",
                                                      "prompt_len")}

    def kinds() -> list:
        """What sets a prompt's code path apart beyond its slot (which the record holds), so
        that a re-measurement's sample reaches them all (cache.Parts): whether a gold answer
        takes several tokens (its log p sums over them)."""
        codec = ready()["codec"]
        several = [any(len(study.answer_ids(codec, a)) > 1 for a in it["answers"])
                   for it in P["items"]]
        return [{"several tokens": several[e]} for e, _, _ in rows]

    res = cache.cached("task", params, compute,
                       parts=cache.Parts(len(rows), one, take, kinds))
    out = _result(res, P, info, weights, seed, max_new_tokens, model)
    if rem is not None:
        out.meta.update(remedy={"name": rem[0], "params": rem[1], "file": str(remedy_file)})
    return out


def _remedy(model, file, weights, P=None):
    """``(name, params)`` of a remedy file that ``task_run`` can apply to ``model`` (and, for a
    prompt remedy, to the prompts ``P`` of :func:`prepare`: a question-answering file, the slot
    quality one number a document, the ``file`` ranker on a plain file)."""
    from ....models.remedies import check_applicable

    name, kw = study.remedy_from_file(model, file, weights, prompt=True)
    if name in PROMPT_REMEDIES:
        if P is not None:
            _check_prompt_remedy(name, kw, P, file)
        return name, kw
    check_applicable(study.load(model, weights, 0)[0], name)
    return name, kw


def _check_prompt_remedy(name, kw, P, file):
    where = Path(str(file)).name
    if P["format"] == "liu-kv":
        raise ValueError(f"{where} holds {name}, a prompt remedy for documents; a key-value "
                         "file has records (use a question-answering file)")
    q = kw.get("slot_quality")
    if q is not None and len(q) != P["documents"]:
        raise ValueError(f"{where}: a slot quality of {len(q)} slots for prompts of "
                         f"{P['documents']} documents (--documents {len(q)}, or a file made "
                         "for this count)")
    if kw.get("ranker") == "file" and P["format"] != "plain":
        raise ValueError(f"{where}: the 'file' ranker reads a plain file's own document order; "
                         f"a {P['format']} file has none (use bm25 or question-likelihood)")


def _calibration_here(m, codec, rem, text, pid):
    """The calibration file ``rem`` with the spans and relevance of this document prompt's
    documents (Hsieh et al.'s eq. 4, measured on it with the file's dummy), their mean
    attention for the shared normaliser, and its recorded pass (``prefix``)."""

    kw = dict(rem[1])
    docs = study.prompt_documents(codec, text, pid, kw.pop("dummy", "paper"))
    pre, c = study.calibrated_relevance(m, pid, docs, full=True)
    if kw.get("normaliser", "per-head") == "shared":
        kw["attention"] = list(c["attention"])
    return rem[0], dict(kw, spans=docs[0], relevance=c["relevance"], prefix=pre)


def _under_remedy(m, rem, pid, answers, max_new_tokens, stop, eos):
    """:func:`~posbias_nb.measure.scoring.score_and_generate` under the remedy ``rem``: the
    answers scored by :func:`posbias_nb.experiments.base.study.score_remedy` (what ``posbias
    fix`` scores), the greedy answer generated under the remedy from its own prefill (the
    remedy's state follows one chain of cached steps, so the prefill is not shared)."""
    from ....measure.scoring import generate_greedy

    name, kw = rem
    if name == "attention-calibration":
        kw = dict(kw)
        n = len(answers)
        docs = {"spans": [kw.pop("spans")] * n, "relevance": [kw.pop("relevance")] * n,
                "prefixes": [kw.pop("prefix")] * n}
        rem = (name, dict(kw, spans=docs["spans"][0], relevance=docs["relevance"][0]))
    else:
        docs = {}
    lp, _ = study.score_remedy(m, [pid] * len(answers), answers, name, [kw], base=False, **docs)
    with _within(m, rem, len(pid)):
        g = generate_greedy(m, pid, max_new_tokens, stop=stop, eos=eos)
    return [float(v) for v in lp[0]], g


def _within(m, rem, n_prompt):
    """The remedy ``rem`` on ``m`` for a prompt of ``n_prompt`` tokens (from its last row on,
    hidden-scaling-all in every row), or nothing."""
    import contextlib

    from .... import models

    if rem is None:
        return contextlib.nullcontext()
    name, kw = rem
    if name == "hidden-scaling-all":
        return models.remedy(m, name, **kw)
    return models.remedy(m, name, **dict(kw, start=n_prompt - 1))
