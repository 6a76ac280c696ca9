r"""The position sweep on real questions, or on the user's own task file: ``posbias task``.

Chapter *Lost in the middle on real questions*; prompts, formats and metric from
:mod:`posbias_nb.tasks.qa`.  For each chosen example the gold passage (or, in a key-value file,
the gold record) is moved across the gold positions while everything else stays in place, and
every prompt is scored two ways:

* **greedy generation**, up to ``max_new_tokens`` tokens or the first newline, scored by Liu et
  al.'s ``best_subspan_em`` on the first line; every generation is kept and classified
  (:func:`posbias_nb.tasks.qa.classify_output`: answer, a distractor's answer, wrong, empty or
  off-format);
* the **teacher-forced log-probability** of the gold answer after ``Answer:`` (the best of the
  gold answers when there are several; :func:`posbias_nb.measure.scoring.score_batch`).  It is
  continuous, so it has power where the accuracy of a small model is near zero.

Per gold position: accuracy with a Wilson interval and mean log p with a Student t interval,
the **example** the unit (each example is asked once at each position).  Two reference lines
(QA files): **closed-book** (the question alone, Liu et al.'s ``closedbook_qa.prompt``) and
**oracle** (the gold passage alone).

Everything the file could get wrong is refused before a model is loaded
(:func:`posbias_nb.tasks.qa.read_task_file`); prompts beyond the model's context are refused
after tokenization and before any forward pass, with their number and the longest.  The run is
cached (namespace ``task``; the key holds the file's SHA-256).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from .. import cache
from .._validate import positive_int
from ..measure import entry
from ..measure.scoring import score_and_generate
from ..models.remedy_file import PROMPT_REMEDIES
from ..models.weights import file_sha256
from ..results import Result
from ..tasks import qa
from ..tasks.codec import Codec
from . import retrieval as ret
from . import study

__all__ = ["task_run", "prepare", "prompt_remedy", "reorder_documents", "CSV_COLUMNS", "OUTCOMES",
           "DEFAULTS"]

_DEF = "task-v2"  # bump when a definition below changes (v2: one prefill per prompt)
#: The columns of the table (the CSV output) of :func:`task_run`, one row per gold position
#: and per reference line: accuracy and mean log p, each with its 95% interval.
CSV_COLUMNS = ("setting", "gold_document", "n", "accuracy", "accuracy_low", "accuracy_high",
               "logprob", "logprob_low", "logprob_high")
#: The outcomes a generation is classified into
#: (:func:`posbias_nb.tasks.qa.classify_output`), counted per gold position.
OUTCOMES = ("answer", "distractor", "wrong", "empty", "off-format")
#: The defaults of ``posbias task`` (and of :func:`task_run`).
DEFAULTS = {"documents": 10, "examples": 24, "max_new_tokens": 32, "seed": 0}




def prepare(data, documents: int | None = None, positions=None, examples: int | None = None,
            keys: int | None = None, seed: int = 0, fmt: str | None = None,
            select=None, pool_exclude=None) -> dict:
    """The prompt texts of a run (pure: no model): ``format``, ``chosen`` (line numbers),
    ``positions`` (0-based gold slots), ``items`` (one dict per example: ``prompts`` per
    position, ``answers``, ``wrong_answers``, and the references ``closed_book`` and
    ``oracle`` for QA).  ``select``: the 0-based indices of the file's examples to use, in
    that order (instead of ``examples`` drawn by ``seed``; a study's locked questions).
    ``pool_exclude``: indices whose gold passages may not serve as distractors (``posbias
    fix``: the tuning prompts never hold a test example's passage).  ``documents=None``: a
    plain file's own count (the fewest documents of its chosen examples), else
    ``DEFAULTS["documents"]``.

    Raises
    ------
    ValueError
        Every refusal of :func:`posbias_nb.tasks.qa.read_task_file`; ``documents`` below 2;
        ``positions`` out of range or repeated; too few distractors without an answer; ``keys``
        with a QA file or ``documents`` with a key-value file.
    """
    fmt, exs = qa.read_task_file(data, fmt)
    seed = positive_int("seed", seed, minimum=0)
    if examples is not None:
        examples = positive_int("examples", examples)
    if select is not None:
        idx = np.asarray([int(i) for i in select], dtype=np.int64)
        if idx.size == 0 or len(set(idx.tolist())) != idx.size or idx.min() < 0 \
                or idx.max() >= len(exs):
            raise ValueError(f"select must be distinct indices in 0..{len(exs) - 1}, got "
                             f"{list(select)!r}")
    else:
        idx = study.choose(len(exs), examples, seed)
    chosen = [exs[int(i)] for i in idx]
    if fmt == "liu-kv":
        if documents is not None:
            raise ValueError("--documents is for question-answering files; a key-value file "
                             "takes --keys (records per prompt)")
        n = min(len(e.records) for e in chosen) if keys is None else \
            positive_int("keys", keys, minimum=2)
        if n > min(len(e.records) for e in chosen):
            raise ValueError(f"keys must be at most {min(len(e.records) for e in chosen)} "
                             f"(the fewest records of an example), got {keys!r}")
        k = n
    else:
        if keys is not None:
            raise ValueError("--keys is for key-value files; a question-answering file takes "
                             "--documents")
        if documents is None and fmt == "plain":
            # a plain file brings its own documents: its count, the fewest of an example's
            k = min(len(e.documents) for e in chosen)
            if k < 2:
                raise ValueError(f"a plain task file needs at least 2 documents a question to "
                                 f"move the gold one; an example has {k}")
        else:
            k = DEFAULTS["documents"] if documents is None else \
                positive_int("documents", documents, minimum=2)
    pos = qa.gold_positions(k) if positions is None else [int(p) for p in positions]
    if not pos or len(set(pos)) != len(pos) or min(pos) < 0 or max(pos) >= k:
        raise ValueError(f"positions must be distinct slots in 0..{k - 1}, got {positions!r}")
    items = []
    if fmt == "liu-kv":
        for e in chosen:
            recs = [qa.position_records(e, p, n_keys=k) for p in pos]
            items.append({"prompts": [qa.kv_example_prompt(r, e.key) for r in recs],
                          "answers": [e.value],
                          "wrong_answers": [v for kk, v in recs[0] if kk != e.key]})
    else:
        need = [max(0, k - len(e.documents)) for e in chosen]
        skip = set() if pool_exclude is None else {int(i) for i in pool_exclude}
        pool = [e.gold_document for i, e in enumerate(exs) if i not in skip]
        extra = qa.bm25_distractors(chosen, max(need), pool=pool) \
            if max(need) > 0 else [[] for _ in chosen]
        for e, x in zip(chosen, extra):
            own = [d for i, d in enumerate(e.documents) if i != e.gold]
            distractors = (own + [d for d in x if d not in own])[:k - 1]
            if len(distractors) < k - 1:
                raise ValueError(f"line {e.line}: only {len(distractors)} distractors for "
                                 f"{k} documents")
            placed = [qa.position_documents(e.gold_document, distractors, p) for p in pos]
            items.append({
                "prompts": [qa.qa_prompt(e.question, d) for d in placed],
                "question": e.question, "documents": placed,
                # the prompt's documents in the file's own order (a plain file's retriever
                # order), its BM25 fillers after
                "file_order": _file_order(e, distractors) if fmt == "plain" else None,
                "answers": list(e.answers),
                "wrong_answers": [],
                "closed_book": qa.closedbook_prompt(e.question),
                "oracle": qa.qa_prompt(e.question, [e.gold_document])})
    return {"format": fmt, "chosen": [int(exs[int(i)].line) for i in idx], "positions": pos,
            "documents": k, "items": items, "n_file": len(exs)}


def _file_order(e, distractors) -> list:
    docs = [e.gold_document] + list(distractors)
    own = list(e.documents)
    return sorted(docs, key=lambda d: own.index(d) if d in own else len(own) + docs.index(d))








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
        (:func:`posbias_nb.experiments.study.score_remedy`), the greedy answer decoded
        under the remedy with a key-value cache (equal to full passes:
        ``tests/integration/test_fix.py``).  A file of the attention calibration: each prompt's documents
        are found in its text and their relevance measured on it (one extra pass per
        document, :func:`posbias_nb.experiments.study.prompt_documents`); a prompt with fewer
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
                           definition=_DEF, data=file_sha256(path), format=P["format"],
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
    from ..models.remedies import check_applicable

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


def _as_document(d) -> qa.Document:
    if isinstance(d, qa.Document):
        return d
    if isinstance(d, str):
        return qa.Document("", d)
    if isinstance(d, dict) and isinstance(d.get("text"), str):
        return qa.Document(str(d.get("title", "")), d["text"])
    raise ValueError(f"a document is a string, a {{'title', 'text'}} object or a "
                     f"tasks.qa.Document; got {d!r}")


def prompt_remedy(name: str, params: dict, question: str, documents, *, model=None,
                  codec=None, file_order=None) -> dict:
    """One prompt under the prompt remedy ``name``
    (:data:`posbias_nb.models.remedy_file.PROMPT_REMEDIES`) with its file's ``params``:
    ``{"documents"`` (in prompt order), ``"prompt"`` (Liu et al.'s QA prompt, or the query-aware
    one)``}``.  ``documents``: as the prompt would hold them without the remedy.

    A fixed rule or a slot quality places the documents in descending relevance by the file's
    ranker (:data:`~posbias_nb.models.remedy_file.RANKERS`: BM25 of the question, ``file_order``
    (the documents as a plain file lists them), or LongLLMLingua's question likelihood, which
    needs ``model`` and ``codec``); attention sorting
    (:func:`posbias_nb.measure.positional.attention_sort`) needs them too; ``query-aware`` keeps
    the order and changes the template.
    """
    from ..models.remedy_file import PROMPT_REMEDIES as names
    from ..tasks import reorder

    if name not in names:
        raise ValueError(f"{name!r} is not a prompt remedy; one of {', '.join(names)}")
    docs = [_as_document(d) for d in documents]
    if not docs:
        raise ValueError("an empty document list: nothing to place")
    if name == "query-aware":
        return {"documents": docs, "prompt": reorder.query_aware_prompt(question, docs)}
    if name == "attention-sort":
        if model is None or codec is None:
            raise ValueError("attention-sort reads the model's attention: give model and codec")
        from ..measure.positional import ATTENTION_SORT, attention_sort

        got = attention_sort(model, codec, question, docs,
                             rounds=int(params.get("rounds", ATTENTION_SORT["rounds"])),
                             best_last=bool(params.get("best_last", ATTENTION_SORT["best_last"])))
        placed = [docs[i] for i in got["order"]]
        return {"documents": placed, "prompt": qa.qa_prompt(question, placed)}
    ranker = params["ranker"]
    if ranker == "bm25":
        ranked = [docs[i] for i in reorder.bm25_ranking(question, docs)]
    elif ranker == "file":
        if file_order is None:
            raise ValueError("the 'file' ranker needs the documents in the file's own order")
        ranked = [_as_document(d) for d in file_order]
        if sorted(map(repr, ranked)) != sorted(map(repr, docs)):
            raise ValueError("the file's order holds other documents than the prompt")
    elif ranker == "question-likelihood":
        if model is None or codec is None:
            raise ValueError("the question-likelihood ranker runs the model: give model and "
                             "codec")
        from ..measure.positional import question_likelihood_ranking

        ranked = [docs[i] for i in question_likelihood_ranking(model, codec, question,
                                                                docs)["ranking"]]
    else:
        raise ValueError(f"unknown ranker {ranker!r}")
    placed = reorder.reorder(name, ranked, quality=params.get("slot_quality"))
    return {"documents": placed, "prompt": qa.qa_prompt(question, placed)}


def reorder_documents(remedy_file, question: str, documents, model) -> dict:
    """The one call for a retrieval pipeline: the caller's ``documents`` (strings, ``{"title",
    "text"}`` objects or :class:`posbias_nb.tasks.qa.Document`, in the retriever's order) placed
    by the prompt remedy of ``remedy_file`` for ``model`` (a zoo name, a directory or a hub id:
    the file is refused, in one line, unless it was made for this model's fingerprint; a
    ranker or rule that reads the model loads it and checks its weights too).  Returns
    ``{"documents", "prompt"}`` (:func:`prompt_remedy`; the ``file`` ranker reads the given
    order as the retriever's)."""
    from ..models import remedy_file as rf

    spec = rf.read(remedy_file)
    if spec["remedy"] not in rf.PROMPT_REMEDIES:
        raise ValueError(f"{Path(str(remedy_file)).name} holds {spec['remedy']}, which patches "
                         "the model: apply it with posbias_nb.models.remedy")
    rf.check_model(spec, remedy_file, name=model)
    docs = [_as_document(d) for d in documents]
    q = spec["params"].get("slot_quality")
    if q is not None and len(q) != len(docs):
        raise ValueError(f"{Path(str(remedy_file)).name}: a slot quality of {len(q)} slots "
                         f"for {len(docs)} documents")
    m = codec = None
    if spec["remedy"] == "attention-sort" or spec["params"].get("ranker") == \
            "question-likelihood":
        m, tok, _ = entry.loaded(model, weights="pretrained", seed=0)
        rf.check_model(spec, remedy_file, model=m)
        codec = Codec(tok, m.get_input_embeddings().num_embeddings)
    return prompt_remedy(spec["remedy"], spec["params"], question, docs, model=m, codec=codec,
                         file_order=docs)


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
    answers scored by :func:`posbias_nb.experiments.study.score_remedy` (what ``posbias
    fix`` scores), the greedy answer generated under the remedy from its own prefill (the
    remedy's state follows one chain of cached steps, so the prefill is not shared)."""
    from ..measure.scoring import generate_greedy

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

    from .. import models

    if rem is None:
        return contextlib.nullcontext()
    name, kw = rem
    if name == "hidden-scaling-all":
        return models.remedy(m, name, **kw)
    return models.remedy(m, name, **dict(kw, start=n_prompt - 1))


def _result(res, P, info, weights, seed, max_new_tokens, model) -> Result:
    from .. import __version__, stats

    ex, slot = np.asarray(res["example"]), np.asarray(res["slot"])
    outs = [str(o) for o in res["output"]]
    outcome = [qa.classify_output(o, P["items"][e]["answers"], P["items"][e]["wrong_answers"])
               for o, e in zip(outs, ex)]
    correct = np.array([o == "answer" for o in outcome], dtype=float)
    lp = np.asarray(res["logprob"], dtype=float)
    pos = P["positions"]
    docs = slot >= 0
    acc = ret.summarize(slot[docs], ex[docs], correct[docs], len(pos), kind="proportion")
    lps = ret.summarize(slot[docs], ex[docs], lp[docs], len(pos))
    table = {c: [] for c in CSV_COLUMNS}

    def row(setting, gold, n, a, l):
        for c, v in zip(CSV_COLUMNS, (setting, gold, n, *a, *l)):
            table[c].append(v)

    for j, p in enumerate(pos):
        row("documents", p + 1, int(np.sum(slot == j)),
            (acc["mean"][j], acc["low"][j], acc["high"][j]),
            (lps["mean"][j], lps["low"][j], lps["high"][j]))
    for name, code in (("closed-book", -1), ("oracle", -2)):
        sel = slot == code
        if sel.any():
            k = int(correct[sel].sum())
            a = stats.proportion_interval(k, int(sel.sum()))
            l = stats.mean_interval(lp[sel]) if sel.sum() >= 2 else (lp[sel][0],) * 3
            row(name, "", int(sel.sum()), a, l)
    counts = {o: [int(sum(1 for s, x in zip(slot, outcome) if s == j and x == o))
                  for j in range(len(pos))] for o in OUTCOMES}
    records = [{"example_line": P["chosen"][int(e)],
                "setting": "documents" if s >= 0 else ("closed-book" if s == -1 else "oracle"),
                "gold_document": int(pos[s]) + 1 if s >= 0 else None,
                "output": o, "outcome": oc, "logprob": float(v)}
               for e, s, o, oc, v in zip(ex, slot, outs, outcome, lp)]
    meta = {"command": "task", "model": info["name"], "model_argument": str(model),
            "weights": weights, "format": P["format"], "examples": len(P["chosen"]),
            "examples_in_file": P["n_file"], "example_lines": P["chosen"],
            "documents" if P["format"] != "liu-kv" else "keys": P["documents"],
            "gold_documents": [p + 1 for p in pos], "seed": seed,
            "max_new_tokens": max_new_tokens, "level": 0.95,
            "prompt_tokens_max": int(np.max(res["prompt_len"])),
            "interval": "accuracy: Wilson over examples (one prompt per example and position); "
                        "log p: Student t over examples",
            "scoring": "greedy generation to the first newline or the token budget, Liu et "
                       "al.'s best_subspan_em on the first line; teacher-forced log p of the "
                       "best gold answer after 'Answer:'",
            "distractors": "the file's own passages, then BM25 (bm25s) over the file's other "
                           "gold passages, none holding a gold answer as whole words",
            "version": __version__, **entry.library_versions()}
    data = dict(table, outcomes=counts, examples=records)
    return Result(data, meta=meta, columns=CSV_COLUMNS)

