"""The prompting helpers the studies share, one floor below them: a task file's prompts, a prompt
remedy placing a prompt's documents, and the sizes several studies read.

* :func:`prepare` -- the prompts of a run on a task file (pure: no model), the gold passage
  moved across the gold slots (``posbias task``, ``posbias fix`` and its fast path, the prompt
  studies, the confirmatory study, the report);
* :func:`prompt_remedy`, :func:`reorder_documents` -- one prompt under a prompt remedy (the
  remedy table's ``prompt`` kind), and the one call for a retrieval pipeline;
* :data:`TASK_DEFAULTS`, :data:`FIX_DEFAULTS`, :data:`FIX_QUICK`, :data:`QUICK_DOCUMENTS` --
  the sizes of ``posbias task`` and ``posbias fix``, which its fast path, the placement study
  and the confirmatory study read: they live here, not in the study that defined them first.

Chapter :ref:`ch-realqa` (the task) and :ref:`ch-documents` (the remedies in the prompt).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..._validate import positive_int
from ...measure import entry
from ...tasks import qa
from ...tasks.codec import Codec
from . import study

__all__ = ["prepare", "prompt_remedy", "reorder_documents", "TASK_DEFAULTS", "FIX_DEFAULTS",
           "FIX_QUICK", "QUICK_DOCUMENTS"]

#: The defaults of ``posbias task`` (and of :func:`posbias_nb.experiments.prompt.user_task.task_run`); its
#: ``max_new_tokens`` is every study's generation budget.
TASK_DEFAULTS = {"documents": 10, "examples": 24, "max_new_tokens": 32, "seed": 0}


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
    ``TASK_DEFAULTS["documents"]``.

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
        idx = study.draw_examples(len(exs), examples, seed)
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
            k = TASK_DEFAULTS["documents"] if documents is None else \
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
    from ...models.remedy_file import PROMPT_REMEDIES as names
    from ...tasks import reorder

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
        from ...measure.positional import ATTENTION_SORT, attention_sort

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
        from ...measure.positional import question_likelihood_ranking

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
    from ...models import remedy_file as rf

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


#: The documents of ``--quick`` for a question-answering file.  An even count, where
#: LangChain's rule (the top document last) and Haystack's (the top document first) give
#: different prompts.
QUICK_DOCUMENTS = 6


#: The defaults of ``posbias fix`` (and of :func:`posbias_nb.experiments.remedy.fix.fix`), the sizes
#: its fast path and the confirmatory study read too.
FIX_DEFAULTS = {"examples": 48, "documents": 10, "test_share": 2 / 3, "seed": 0,
            "edge_loss": 0.25, "cost_windows": 8, "cost_length": 512, "timing_prompts": 8,
            "channel_samples": 8, "channel_length": 1000}


#: The settings of ``--quick``.  The same grids and rules on 24 examples of 6 documents
#: (prompts about half as long; the book's run of the third design used 5, :data:`posbias_nb.experiments.remedy.fix.DESIGN`
#: ``["sizes"]``), a smaller channel search and cost (Yu et al.'s search skips the first 300
#: positions, so its sequences stay longer than that).
FIX_QUICK = dict(FIX_DEFAULTS, examples=24, documents=QUICK_DOCUMENTS, cost_windows=4, cost_length=256,
                 timing_prompts=4, channel_samples=4, channel_length=512)
