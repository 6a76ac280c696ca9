r"""A retrieval corpus and a sparse retriever over it: pure data, no torch.

Chapter :ref:`ch-practice` (the pipeline study, :mod:`posbias_nb.experiments.remedy.pipeline`).

* **The corpus** (:func:`oracle_corpus`): every distinct passage of Liu et al.'s NQ-open oracle
  file (one gold passage a question, 2655 questions), in the file's order, each question's gold
  passage found in it by identity (title and text).  Liu et al. retrieve from all of Wikipedia
  (21M passages, Contriever); here every passage is some question's gold passage, so the
  distractors a retriever finds are answer-bearing passages of *other* questions: on topic far
  less often than Wikipedia's neighbours of the gold passage (easier to tell apart), but each
  one a fluent, fact-dense passage (harder to dismiss than a random page).
* **A corpus file** (:func:`read_corpus`): one JSON object a line, plain or gzipped, with the
  string fields ``title`` and ``text``; the line and the field are named when one is wrong.
* **BM25** (:class:`BM25Index`): ``bm25s``, Lucene's variant, ``k1 = 1.5``, ``b = 0.75``,
  English stop words, no stemming (the settings of :func:`posbias_nb.tasks.reorder.bm25_ranking`),
  indexed once over the whole corpus; ties keep the corpus order.
* **Recall** (:func:`gold_ranks`): where each question's gold passage lands in a ranking.

The dense retriever (all-MiniLM-L6-v2) needs torch and lives in
:mod:`posbias_nb.measure.dense`.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

from .._validate import positive_int
from .qa import Document, read_task_file

__all__ = ["RETRIEVERS", "CorpusError", "oracle_corpus", "read_corpus", "passage_text",
           "BM25Index", "top_k", "ranking_gaps", "ranking_agrees", "gold_ranks", "check_k"]

#: The retrievers of the pipeline study and of ``posbias retrieve``.
RETRIEVERS = ("bm25", "dense")


class CorpusError(ValueError):
    """A corpus file that cannot be read (the message names the line and the field)."""


def passage_text(doc: Document) -> str:
    """What a retriever reads of a passage: its title, a space, its text (the string BM25 and
    the dense encoder both index)."""
    return f"{doc.title} {doc.text}"


def oracle_corpus(path) -> tuple[list[Document], list[int], list]:
    """The corpus of an NQ-open file in Liu et al.'s format (the oracle file: one gold passage a
    question): ``(passages, gold, examples)``, the distinct passages of every question in the
    file's order (first occurrence), the index of each question's gold passage in them, and the
    file's questions (:class:`~posbias_nb.tasks.qa.QAExample`)."""
    fmt, examples = read_task_file(path, "liu-qa")
    index: dict[tuple[str, str], int] = {}
    passages: list[Document] = []
    for e in examples:
        for d in e.documents:
            if (d.title, d.text) not in index:
                index[(d.title, d.text)] = len(passages)
                passages.append(d)
    gold = [index[(e.gold_document.title, e.gold_document.text)] for e in examples]
    return passages, gold, examples


def _open(path: Path):
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt", encoding="utf-8") if gz else open(path, encoding="utf-8")


def read_corpus(path) -> list[Document]:
    """A corpus file: one JSON object a line (plain or gzipped), with string fields ``title``
    and ``text``; blank lines are skipped.  :class:`CorpusError` (a ValueError) naming the file,
    the line and the field when a line is not such an object, and when the file holds no
    passage."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"corpus file {str(path)!r} does not exist")
    out = []
    try:
        with _open(path) as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise CorpusError(f"{path.name}, line {n}: not JSON ({e.msg})") from None
                if not isinstance(obj, dict):
                    raise CorpusError(f"{path.name}, line {n}: a JSON object with 'title' and "
                                      f"'text' is expected, got {type(obj).__name__}")
                for field in ("title", "text"):
                    if not isinstance(obj.get(field), str):
                        got = "missing" if field not in obj else type(obj[field]).__name__
                        raise CorpusError(f"{path.name}, line {n}: field {field!r} must be a "
                                          f"string, got {got}")
                if not obj["text"].strip():
                    raise CorpusError(f"{path.name}, line {n}: field 'text' is empty")
                out.append(Document(obj["title"], obj["text"]))
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise CorpusError(f"corpus file {path.name} cannot be read: {e}") from None
    if not out:
        raise CorpusError(f"corpus file {path.name} holds no passage")
    return out


def check_k(k, corpus_size: int) -> int:
    """``k`` as a positive integer no larger than the corpus (ValueError naming both)."""
    k = positive_int("k", k, minimum=1)
    if k > corpus_size:
        raise ValueError(f"k = {k} is larger than the corpus ({corpus_size} passages)")
    return k


class BM25Index:
    """BM25 over a corpus of :class:`~posbias_nb.tasks.qa.Document` (``bm25s``, Lucene's
    variant, ``k1 = 1.5``, ``b = 0.75``, English stop words), indexed once.

    >>> ix = BM25Index([Document("Paris", "capital of France"), Document("Rome", "capital of "
    ...                 "Italy"), Document("Oslo", "capital of Norway")])
    >>> ix.search(["what is the capital of Italy"], 2)[0].tolist()
    [1, 0]
    """

    def __init__(self, passages) -> None:
        import bm25s

        self.passages = list(passages)
        if not self.passages:
            raise ValueError("an empty corpus: nothing to index")
        self._bm25 = bm25s
        self._index = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
        self._index.index(bm25s.tokenize([passage_text(d) for d in self.passages],
                                         stopwords="en", show_progress=False),
                          show_progress=False)

    def __len__(self) -> int:
        return len(self.passages)

    def scores(self, questions) -> np.ndarray:
        """BM25 score of every (question, passage) pair: ``(questions, passages)`` float64."""
        q = self._bm25.tokenize([str(x) for x in questions], stopwords="en",
                                show_progress=False)
        inv = {i: t for t, i in q.vocab.items()}
        out = np.zeros((len(q.ids), len(self.passages)))
        for i, ids in enumerate(q.ids):
            words = [inv[t] for t in ids if inv[t] in self._index.vocab_dict]
            if words:
                out[i] = self._index.get_scores(words)
        return out

    def search(self, questions, k: int) -> np.ndarray:
        """The ``k`` best passages for each question, best first (ties: corpus order):
        ``(questions, k)`` int64 indices into the corpus."""
        k = check_k(k, len(self.passages))
        return top_k(self.scores(questions), k)


def top_k(scores, k: int) -> np.ndarray:
    """Row-wise indices of the ``k`` highest scores, highest first, ties by index (a stable
    rule, so a retrieval is a pure function of its scores)."""
    s = np.asarray(scores, dtype=float)
    idx = np.arange(s.shape[1])
    return np.stack([np.lexsort((idx, -row))[:k] for row in s]).astype(np.int64)


def ranking_gaps(retrieved, scores) -> np.ndarray:
    """How far each retrieved passage's score lies from the score its rank calls for:
    ``|scores[i, retrieved[i, j]] - (the j-th highest of scores[i])|``, ``(questions, k)``.
    Zero everywhere for :func:`top_k` of the same scores; a ranking that differs from it only
    by the order of tied (or near-tied) passages has gaps no larger than their spread.

    >>> ranking_gaps([[1, 0]], [[0.5, 0.5, 0.1]]).tolist()   # a tie, ordered the other way
    [[0.0, 0.0]]
    >>> ranking_gaps([[2, 0]], [[0.5, 0.4, 0.1]]).round(6).tolist()
    [[0.4, 0.1]]
    """
    r = np.asarray(retrieved)
    s = np.asarray(scores, dtype=float)
    if r.ndim != 2 or s.ndim != 2 or r.shape[0] != s.shape[0] or r.shape[1] > s.shape[1]:
        raise ValueError(f"retrieved must be (questions, k) and scores (questions, passages) "
                         f"with k <= passages, got {r.shape} and {s.shape}")
    if r.dtype.kind not in "iu" or (r.size and (r.min() < 0 or r.max() >= s.shape[1])):
        raise ValueError(f"retrieved must hold passage indices in 0..{s.shape[1] - 1}")
    best = -np.sort(-s, axis=1)[:, :r.shape[1]]
    return np.abs(np.take_along_axis(s, r, axis=1) - best)


def ranking_agrees(recorded, scores, gold, tol: float) -> list[str]:
    """The differences between a recorded retrieval (``retrieved``, ``gold_rank``: what
    ``pipeline.retrieve`` stores) and ``scores`` computed now, up to ties: an empty list when
    every retrieved passage lies within ``tol`` of the score its rank calls for
    (:func:`ranking_gaps`), no passage is retrieved twice for a question, and ``gold_rank`` is
    the rank of ``gold`` in ``retrieved``.  So a ranking whose near-tied passages another CPU's
    rounding ordered the other way agrees, and one that a changed retriever ordered differently
    does not.  ``tol``: how far the same code's scores move on another CPU, measured
    (:func:`posbias_nb.measure.dense.rank_tolerance`), not guessed.

    >>> rec = {"retrieved": np.array([[1, 0]]), "gold_rank": np.array([0])}
    >>> ranking_agrees(rec, [[0.5, 0.5 + 1e-9, 0.1]], [1], tol=1e-6)
    []
    >>> ranking_agrees(rec, [[0.5, 0.4, 0.1]], [1], tol=1e-6)
    ['retrieved: 2 of 2 ranks lie more than 1e-06 from the score their rank calls for (question 0, rank 0: passage 1 scores 0.4, rank 0 calls for 0.5)']
    """
    tol = float(tol)
    if not tol >= 0:
        raise ValueError(f"tol must be a non-negative number, got {tol!r}")
    if set(recorded) != {"retrieved", "gold_rank"}:
        return [f"arrays {sorted(recorded)} recorded, a retrieval holds retrieved and gold_rank"]
    r = np.asarray(recorded["retrieved"])
    s = np.asarray(scores, dtype=float)
    try:
        gaps = ranking_gaps(r, s)
    except ValueError as e:
        return [f"retrieved: {e}"]
    out = []
    twice = [i for i, row in enumerate(r) if len(set(row.tolist())) != len(row)]
    if twice:
        out.append(f"retrieved: {len(twice)} questions retrieve a passage twice (question "
                   f"{twice[0]})")
    bad = gaps > tol
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        out.append(f"retrieved: {int(bad.sum())} of {bad.size} ranks lie more than {tol:g} from "
                   f"the score their rank calls for (question {i}, rank {j}: passage "
                   f"{int(r[i, j])} scores {s[i, r[i, j]]:.6g}, rank {j} calls for "
                   f"{-np.sort(-s[i])[j]:.6g})")
    want = gold_ranks(r, gold)
    got = np.asarray(recorded["gold_rank"])
    if got.shape != want.shape or not np.array_equal(got, want):
        out.append(f"gold_rank: {int(np.sum(got != want)) if got.shape == want.shape else 'all'} "
                   f"entries are not the gold passage's rank in retrieved")
    return out


def gold_ranks(retrieved, gold) -> np.ndarray:
    """The 0-based rank of each question's gold passage in its retrieved list, -1 where it was
    not retrieved: ``retrieved`` ``(questions, k)`` indices, ``gold`` one index a question.

    >>> gold_ranks([[3, 1, 2], [0, 4, 5]], [1, 9]).tolist()
    [1, -1]
    """
    r = np.asarray(retrieved)
    g = np.asarray(gold)
    if r.ndim != 2 or g.shape != (r.shape[0],):
        raise ValueError(f"retrieved must be (questions, k) and gold one index a question, got "
                         f"{r.shape} and {g.shape}")
    hit = r == g[:, None]
    return np.where(hit.any(1), hit.argmax(1), -1).astype(np.int64)
