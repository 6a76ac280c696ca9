r"""Real questions over real passages (Liu et al. 2023's multi-document QA), and the readers of
users' task files: pure data, no torch.

Chapter *Lost in the middle on real questions* (``book/real_questions.md``); the experiment
that scores the prompts is :mod:`posbias_nb.experiments.prompt.user_task`.

* **Task files** (:func:`read_task_file`): one JSON object a line, plain or gzipped, in one of
  three formats (:data:`FORMATS`), every line checked before anything runs:

  - ``"liu-qa"``, Liu et al.'s QA files: ``question``, ``answers`` (strings), ``ctxs`` (passages
    with ``title``, ``text`` and ``isgold``; exactly one gold);
  - ``"liu-kv"``, Liu et al.'s key-value files: ``ordered_kv_records`` (``[key, value]`` pairs),
    ``key``, ``value``;
  - ``"plain"``, ours: ``question``, ``answers``, ``documents`` (strings, or objects with
    ``title`` and ``text``), ``gold`` (the 0-based index of the passage with the answer).

* **Prompts**: Liu et al.'s own templates, word for word (their repository's
  ``prompts/qa.prompt``, ``closedbook_qa.prompt``; the key-value one is
  :func:`posbias_nb.tasks.kv_needle.kv_prompt`), documents numbered from 1 as
  ``Document [i](Title: ...) text``.  For one question only the gold passage's position changes
  from one prompt to the next (:func:`position_documents`).
* **Distractors** (:func:`bm25_distractors`): where a file gives only the gold passage (the
  oracle file), the other documents are the gold passages of *other* questions of the same file
  that BM25 (``bm25s``, Lucene's variant) ranks most similar to the question, without any that
  contains a normalised gold answer.  Liu et al. retrieve theirs with Contriever from all of
  Wikipedia (their ``make_qa_data_from_retrieval_results.py``); ours come from a pool of 2655
  passages, chosen by word overlap, not by a dense retriever.
* **Scoring** (:func:`best_subspan_em`): Liu et al.'s metric on the first line of the
  prediction (their ``evaluate_qa_responses.py`` cuts at the first newline), SQuAD
  normalisation (:func:`normalize_answer`).
"""
from __future__ import annotations

import gzip
import json
import re
import string
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._validate import positive_int
from .kv_needle import kv_prompt

__all__ = ["FORMATS", "QA_INSTRUCTION", "Document", "QAExample", "KVExample", "TaskFileError",
           "normalize_answer", "best_subspan_em", "first_line", "classify_output",
           "read_task_file", "detect_format", "qa_prompt", "closedbook_prompt", "kv_example_prompt",
           "gold_positions", "position_documents", "position_records", "bm25_distractors",
           "ANSWER_PREFIX", "DUMMY_DOCUMENT", "DUMMY_RECORD", "DUMMY_FILLER", "DUMMIES",
           "length_matched_dummies", "document_char_spans",
           "dummy_documents", "document_token_spans", "search_results"]

FORMATS = ("liu-qa", "liu-kv", "plain")
#: Liu et al.'s instruction (``prompts/qa.prompt``).
QA_INSTRUCTION = ("Write a high-quality answer for the given question using only the provided "
                  "search results (some of which might be irrelevant).")
#: What precedes the answer in every QA prompt; the scored answer is ``" " + answer``.
ANSWER_PREFIX = "Answer:"


class TaskFileError(ValueError):
    """A task file that cannot be read as one of :data:`FORMATS` (the message names the line)."""


@dataclass(frozen=True)
class Document:
    title: str
    text: str


@dataclass(frozen=True)
class QAExample:
    """One question: its gold answers, its documents and which of them is the gold one."""
    question: str
    answers: tuple
    documents: tuple  # of Document
    gold: int
    line: int = 0

    @property
    def gold_document(self) -> Document:
        return self.documents[self.gold]


@dataclass(frozen=True)
class KVExample:
    """One key-value example: the ordered records, the asked key and its value."""
    records: tuple  # of (key, value)
    key: str
    value: str
    line: int = 0

    @property
    def gold(self) -> int:
        return [k for k, _ in self.records].index(self.key)


# --------------------------------------------------------------------------------------------
# scoring (Liu et al.'s metrics.py, from its definition)

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_answer(s: str) -> str:
    """SQuAD normalisation, as Liu et al. apply it: lower case, punctuation removed, the
    articles *a*, *an*, *the* removed, whitespace collapsed.

    >>> normalize_answer("The  Eiffel-Tower!")
    'eiffeltower'
    """
    s = "".join(ch for ch in str(s).lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def first_line(prediction: str) -> str:
    """The prediction up to its first newline, stripped (what Liu et al. score)."""
    return str(prediction).split("\n")[0].strip()


def best_subspan_em(prediction: str, answers) -> bool:
    """Liu et al.'s ``best_subspan_em``: True if a normalised gold answer is a substring of the
    normalised first line of ``prediction``.  An empty normalised answer never matches (theirs
    would match everything; :func:`read_task_file` refuses such answers).

    >>> best_subspan_em("It was Wilhelm Röntgen, in 1901.", ["Wilhelm Röntgen"])
    True
    >>> best_subspan_em("Röntgen", ["Wilhelm Röntgen"])
    False
    """
    pred = normalize_answer(first_line(prediction))
    for a in answers:
        g = normalize_answer(a)
        if g and g in pred:
            return True
    return False


def classify_output(prediction: str, answers, wrong_answers=()) -> str:
    """What a generation was: ``"answer"`` (:func:`best_subspan_em`), ``"empty"`` (nothing on
    the first line), ``"off-format"`` (the first line repeats the prompt's scaffolding: a
    ``Document [``, ``Question:`` or ``Answer:`` line, or a JSON record), ``"distractor"`` (the
    answer of another document or record, where ``wrong_answers`` lists them) or ``"wrong"``."""
    if best_subspan_em(prediction, answers):
        return "answer"
    line = first_line(prediction)
    if not normalize_answer(line):
        return "empty"
    if re.match(r'^(Document \[|Question:|Answer:|Key:|JSON data|\{|")', line):
        return "off-format"
    if wrong_answers and best_subspan_em(prediction, wrong_answers):
        return "distractor"
    return "wrong"


# --------------------------------------------------------------------------------------------
# reading users' files (one place validates them)

def _open(path: Path):
    with open(path, "rb") as f:
        magic = f.read(2)
    return gzip.open(path, "rt", encoding="utf-8") if magic == b"\x1f\x8b" else \
        open(path, encoding="utf-8")


def detect_format(obj: dict) -> str | None:
    """The format of one parsed line (:data:`FORMATS`), or None."""
    if not isinstance(obj, dict):
        return None
    if {"ordered_kv_records", "key", "value"} <= obj.keys():
        return "liu-kv"
    if {"question", "answers", "ctxs"} <= obj.keys():
        return "liu-qa"
    if {"question", "answers", "documents", "gold"} <= obj.keys():
        return "plain"
    return None


def _answers(obj, where):
    a = obj["answers"]
    if isinstance(a, str) or not isinstance(a, list) or not a:
        raise TaskFileError(f"{where}: 'answers' must be a non-empty list of strings, got {a!r}")
    if not all(isinstance(x, str) for x in a):
        raise TaskFileError(f"{where}: every answer must be a string, got {a!r}")
    if not any(normalize_answer(x) for x in a):
        raise TaskFileError(f"{where}: every answer is empty after normalisation: {a!r}")
    return tuple(x for x in a if normalize_answer(x))


def _question(obj, where):
    q = obj["question"]
    if not isinstance(q, str) or not q.strip():
        raise TaskFileError(f"{where}: 'question' must be a non-empty string, got {q!r}")
    return q


def _doc(d, where):
    if isinstance(d, str):
        return Document("", d)
    if isinstance(d, dict) and isinstance(d.get("text"), str):
        t = d.get("title", "")
        return Document("" if t is None else str(t), d["text"])
    raise TaskFileError(f"{where}: a document must be a string or an object with 'text', "
                        f"got {str(d)[:80]!r}")


def _parse(obj, fmt, where, n):
    if fmt == "liu-qa":
        ctxs = obj["ctxs"]
        if not isinstance(ctxs, list) or not ctxs:
            raise TaskFileError(f"{where}: 'ctxs' must be a non-empty list of passages")
        docs = tuple(_doc(c, where) for c in ctxs)
        gold = [i for i, c in enumerate(ctxs) if isinstance(c, dict) and c.get("isgold")]
        if not gold:
            raise TaskFileError(f"{where}: no gold document (no passage with \"isgold\": true)")
        if len(gold) > 1:
            raise TaskFileError(f"{where}: {len(gold)} gold documents; exactly one is needed")
        return QAExample(_question(obj, where), _answers(obj, where), docs, gold[0], n)
    if fmt == "plain":
        docs = obj["documents"]
        if not isinstance(docs, list) or not docs:
            raise TaskFileError(f"{where}: 'documents' must be a non-empty list")
        g = obj["gold"]
        if isinstance(g, bool) or not isinstance(g, int):
            raise TaskFileError(f"{where}: 'gold' must be an integer index, got {g!r}")
        if not 0 <= g < len(docs):
            raise TaskFileError(f"{where}: gold index {g} out of range for {len(docs)} "
                                f"documents (0-based)")
        return QAExample(_question(obj, where), _answers(obj, where),
                         tuple(_doc(d, where) for d in docs), g, n)
    recs = obj["ordered_kv_records"]
    if not isinstance(recs, list) or len(recs) < 2 or not all(
            isinstance(r, list) and len(r) == 2 and all(isinstance(x, str) for x in r)
            for r in recs):
        raise TaskFileError(f"{where}: 'ordered_kv_records' must be a list of at least two "
                            f"[key, value] string pairs")
    keys = [k for k, _ in recs]
    if len(set(keys)) != len(keys):
        raise TaskFileError(f"{where}: duplicate keys in 'ordered_kv_records'")
    k, v = obj["key"], obj["value"]
    if k not in keys:
        raise TaskFileError(f"{where}: no gold record: key {k!r} is not among the records")
    if dict(recs)[k] != v or not str(v).strip():
        raise TaskFileError(f"{where}: the record of key {k!r} does not hold the value {v!r}")
    return KVExample(tuple((a, b) for a, b in recs), k, v, n)


def read_task_file(path, fmt: str | None = None) -> tuple[str, list]:
    """``(format, examples)`` of a task file (see the module docstring), every line checked.

    ``fmt`` forces a format; by default the first line decides and every other line must be of
    the same one.  Raises :class:`TaskFileError` (a ValueError) naming the file and the line:
    a file that does not exist or is empty, a line that is not JSON, an unknown format, no gold
    document, a gold index out of range, an empty answer list.
    """
    p = Path(path)
    if not p.is_file():
        raise TaskFileError(f"no task file at {str(path)!r}")
    if fmt is not None and fmt not in FORMATS:
        raise TaskFileError(f"format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    out = []
    try:
        with _open(p) as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                where = f"{p.name} line {n}"
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise TaskFileError(f"{where}: not valid JSON ({e.msg})") from None
                got = detect_format(obj)
                if got is None:
                    keys = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
                    raise TaskFileError(
                        f"{where}: unknown format (keys {keys}); expected Liu et al.'s QA "
                        f"(question, answers, ctxs), their key-value (ordered_kv_records, key, "
                        f"value) or the plain one (question, answers, documents, gold)")
                if fmt is None:
                    fmt = got
                elif got != fmt:
                    raise TaskFileError(f"{where}: a {got} line in a {fmt} file")
                out.append(_parse(obj, fmt, where, n))
    except (UnicodeDecodeError, OSError, EOFError, gzip.BadGzipFile) as e:
        raise TaskFileError(f"{p.name}: cannot be read as UTF-8 JSON lines "
                            f"({type(e).__name__})") from None
    if not out:
        raise TaskFileError(f"{p.name}: no examples (the file is empty)")
    return fmt, out


# --------------------------------------------------------------------------------------------
# prompts

def qa_prompt(question: str, documents) -> str:
    """Liu et al.'s multi-document prompt (``prompts/qa.prompt``), documents numbered from 1.

    >>> print(qa_prompt("who?", [Document("T", "x.")]))
    Write a high-quality answer for the given question using only the provided search results (some of which might be irrelevant).
    <BLANKLINE>
    Document [1](Title: T) x.
    <BLANKLINE>
    Question: who?
    Answer:
    """
    return f"{QA_INSTRUCTION}\n\n{search_results(question, documents)}\n\nQuestion: {question}\n" \
        f"{ANSWER_PREFIX}"


def search_results(question: str, documents) -> str:
    """The documents as Liu et al.'s prompts list them, numbered from 1 as
    ``Document [i](Title: ...) text``, one a line; ValueError without a question or documents."""
    docs = list(documents)
    if not str(question).strip() or not docs:
        raise ValueError(f"a QA prompt needs a question and documents, got {question!r} and "
                         f"{len(docs)} documents")
    return "\n".join(f"Document [{i + 1}](Title: {d.title}) {d.text}" for i, d in enumerate(docs))


def closedbook_prompt(question: str) -> str:
    """Liu et al.'s closed-book prompt (``prompts/closedbook_qa.prompt``): no documents."""
    if not str(question).strip():
        raise ValueError(f"a closed-book prompt needs a question, got {question!r}")
    return f"Question: {question}\n{ANSWER_PREFIX}"


def kv_example_prompt(records, key: str) -> str:
    """Liu et al.'s key-value prompt (:func:`posbias_nb.tasks.kv_needle.kv_prompt`)."""
    return kv_prompt(records, key)


#: The dummy document of Hsieh et al.'s attention calibration in a QA prompt (their
#: :math:`x^{dum}`, put in the place of each document in turn to read the slot's positional
#: bias): one fixed passage that answers no question, in the documents' own format.
DUMMY_DOCUMENT = Document("Dummy", "This is a dummy document. It contains no information.")
#: The dummy record of a key-value prompt: one fixed pair of UUID-like strings, in the
#: records' own format (Liu et al.'s keys and values are UUIDs).
DUMMY_RECORD = ("00000000-0000-4000-8000-000000000000", "00000000-0000-4000-8000-000000000001")

_DOC_HEAD = re.compile(r"^Document \[(\d+)\]\(Title: ", re.M)


def _kv_body(text: str) -> tuple[int, int]:
    a = text.find("JSON data:\n")
    b = text.find('\n\nKey: "', a)
    if a < 0 or b < 0:
        raise ValueError("not a prompt of qa_prompt or kv_example_prompt: no documents found")
    return a + len("JSON data:\n"), b


def document_char_spans(text: str) -> list[tuple[int, int]]:
    """The character ranges ``[c0, c1)`` of the documents of a prompt, in order: each
    ``Document [i](Title: ...) text`` of a :func:`qa_prompt` (without its newline), or each
    ``"key": "value"`` record of a :func:`kv_example_prompt` (Hsieh et al.'s unit of
    calibration: one document).

    >>> t = qa_prompt("who?", [Document("A", "x."), Document("B", "y.")])
    >>> [t[a:b] for a, b in document_char_spans(t)]
    ['Document [1](Title: A) x.', 'Document [2](Title: B) y.']

    Raises
    ------
    ValueError
        A text with no documents, or whose documents are not numbered 1, 2, ... in order.
    """
    heads = list(_DOC_HEAD.finditer(text))
    if heads:
        nums = [int(h.group(1)) for h in heads]
        end = text.find("\n\nQuestion: ", heads[-1].start())
        if nums != list(range(1, len(nums) + 1)) or end < 0:
            raise ValueError(f"a QA prompt's documents must be numbered 1..K in order, with the "
                             f"question after them; found numbers {nums}")
        starts = [h.start() for h in heads]
        return [(c0, (starts[i + 1] - 1) if i + 1 < len(starts) else end)
                for i, c0 in enumerate(starts)]
    a, b = _kv_body(text)
    out, c = [], a
    lines = text[a:b].split("\n")
    for i, line in enumerate(lines):  # kv_prompt's layout: one record a line
        lead = 1 if line[:1] in ("{", " ") else 0
        tail = 1 if line.endswith("}" if i == len(lines) - 1 else ",") else 0
        rec = line[lead:len(line) - tail]
        if not (rec.startswith('"') and rec.endswith('"') and '": "' in rec):
            raise ValueError(f"record {i + 1} of a key-value prompt is not \"key\": \"value\": "
                             f"{line!r}")
        out.append((c + lead, c + len(line) - tail))
        c += len(line) + 1
    return out


def dummy_documents(text: str, dummy=None) -> list[tuple[str, tuple[int, int]]]:
    """Hsieh et al.'s dummy prompts: for each document ``k`` of ``text``
    (:func:`document_char_spans`), the same prompt with document ``k`` replaced, in place, by
    the dummy (``Document [k](Title: ...)`` with :data:`DUMMY_DOCUMENT`, or the pair
    :data:`DUMMY_RECORD`), and the dummy's character range in it.

    >>> t = qa_prompt("who?", [Document("A", "x."), Document("B", "y.")])
    >>> alt, (a, b) = dummy_documents(t)[1]
    >>> alt[a:b]
    'Document [2](Title: Dummy) This is a dummy document. It contains no information.'

    Raises
    ------
    ValueError
        A prompt without documents (:func:`document_char_spans`), or one that already holds
        the dummy.
    """
    spans = document_char_spans(text)
    qa = bool(_DOC_HEAD.search(text))
    if dummy is None:
        dummy = DUMMY_DOCUMENT if qa else DUMMY_RECORD
    out = []
    for k, (c0, c1) in enumerate(spans):
        if qa:
            new = f"Document [{k + 1}](Title: {dummy.title}) {dummy.text}"
            probe = f"(Title: {dummy.title}) {dummy.text}"
        else:
            new = f'"{dummy[0]}": "{dummy[1]}"'
            probe = dummy[0]
        if probe in text:
            raise ValueError(f"the dummy document {probe!r} occurs in the prompt")
        out.append((text[:c0] + new + text[c1:], (c0, c0 + len(new))))
    return out


#: The dummies of Hsieh et al.'s attention calibration: the paper's one fixed dummy document
#: (:data:`DUMMY_DOCUMENT`) and ours, a dummy as long as each document it replaces
#: (:func:`length_matched_dummies`).
DUMMIES = ("paper", "length-matched")

#: The length-matched dummy's filler (ours, issue 46): the paper's dummy sentences, repeated.
#: The dummy of document ``k`` is ``Document [k](Title: Dummy) `` followed by this text cut
#: after as many tokens as make its token span as long as document ``k``'s.
DUMMY_FILLER = (DUMMY_DOCUMENT.text + " ") * 64


def length_matched_dummies(codec, text: str) -> list[tuple[str, tuple[int, int]]]:
    """The **length-matched dummy** (ours, issue 46) of each document of the QA prompt ``text``:
    as :func:`dummy_documents`, but the dummy put in document ``k``'s place holds as many
    tokens as document ``k`` (its token span, :func:`document_token_spans`, rendered and encoded
    by ``codec`` in the prompt it sits in), so that it sits as far from the last row as the
    document did.  One fixed rule: the paper dummy's header ``Document [k](Title: Dummy)``,
    then :data:`DUMMY_FILLER` (the paper dummy's own sentences repeated) cut after a whole
    number of its tokens, the count found by a few fixed-point steps on the whole prompt's
    encoding (a cut can merge with what follows).

    Raises
    ------
    ValueError
        A key-value prompt (its records have one format, no free text to fill), a prompt that
        already holds the dummy, or a document too short for the dummy's header, or whose count
        no cut of the filler reaches.
    """
    if not _DOC_HEAD.search(text):
        raise ValueError("the length-matched dummy is defined for document prompts (QA), not "
                         "for key-value records")
    probe = f"(Title: {DUMMY_DOCUMENT.title}) "
    if probe in text:
        raise ValueError(f"the dummy document {probe!r} occurs in the prompt")
    char = document_char_spans(text)
    _, tok = document_token_spans(codec, text, char)
    _, offs = codec.encode(DUMMY_FILLER, prompt=False)
    out = []
    for k, (c0, c1) in enumerate(char):
        want = tok[k][1] - tok[k][0]
        head = f"Document [{k + 1}]{probe}"

        def count(n):
            new = head + DUMMY_FILLER[:offs[n - 1][1]] if n > 0 else head.rstrip()
            alt = text[:c0] + new + text[c1:]
            _, (sp,) = document_token_spans(codec, alt, [(c0, c0 + len(new))])
            return sp[1] - sp[0], alt, (c0, c0 + len(new))
        n, found = max(0, want - count(0)[0]), None
        tried = []
        for _ in range(12):  # fixed-point steps, then the cuts around the last one
            if not 0 <= n <= len(offs) or n in tried:
                break
            tried.append(n)
            got, alt, cs = count(n)
            if got == want:
                found = (alt, cs)
                break
            n += want - got
        for n in ([] if found or not tried else
                  [tried[-1] + d for d in (-2, -1, 1, 2) if 0 <= tried[-1] + d <= len(offs)]):
            got, alt, cs = count(n)
            if got == want:
                found = (alt, cs)
                break
        if found is None:
            raise ValueError(f"document {k + 1} has {want} tokens: no cut of the dummy filler "
                             f"after its header gives that many")
        out.append(found)
    return out


def document_token_spans(codec, text: str, spans=None) -> tuple[list[int], list[tuple[int, int]]]:
    """The prompt ids of ``text`` (rendered and encoded by ``codec``, a
    :class:`posbias_nb.tasks.codec.Codec`) and the token ranges ``[t0, t1)`` of its
    character ranges ``spans`` (default: its documents, :func:`document_char_spans`), each
    range ending where the next begins, so that no token belongs to two documents."""
    from .codec import token_span

    spans = document_char_spans(text) if spans is None else list(spans)
    full, off = codec.render(text)
    ids, offs = codec.encode(full, prompt=True)
    tok = [list(token_span(offs, off + a, off + b)) for a, b in spans]
    for i in range(len(tok) - 1):
        tok[i][1] = min(tok[i][1], tok[i + 1][0])
    if any(b <= a for a, b in tok):
        raise ValueError("two documents share every token of one of them")
    return ids, [tuple(t) for t in tok]


def gold_positions(k: int) -> list[int]:
    """The default gold positions among ``k`` documents (0-based): Liu et al.'s rule, the first,
    every fifth from the fifth on, and the last (``0, 4, 9, 14, 19`` of 20), where it gives five
    or more; for fewer documents, every position (``0 .. 9`` of 10).

    >>> gold_positions(20), gold_positions(5)
    ([0, 4, 9, 14, 19], [0, 1, 2, 3, 4])
    """
    k = positive_int("documents", k, minimum=2)
    liu = sorted({0, *range(4, k, 5), k - 1})
    return liu if len(liu) >= 5 else list(range(k))


def position_documents(gold: Document, distractors, position: int) -> list[Document]:
    """The distractors in their order with the gold passage inserted at ``position`` (0-based):
    across positions only the gold passage moves."""
    d = list(distractors)
    if not 0 <= int(position) <= len(d):
        raise ValueError(f"position {position!r} out of range for {len(d) + 1} documents")
    return d[:int(position)] + [gold] + d[int(position):]


def position_records(example: KVExample, position: int, n_keys: int | None = None) -> list:
    """Liu et al.'s key-value records with the gold record moved to ``position`` (0-based), the
    others in their order; ``n_keys`` keeps the gold and the first ``n_keys - 1`` others."""
    others = [r for r in example.records if r[0] != example.key]
    n = len(example.records) if n_keys is None else positive_int("keys", n_keys, minimum=2)
    if n > len(example.records):
        raise ValueError(f"keys must be at most {len(example.records)}, got {n_keys!r}")
    others = others[:n - 1]
    if not 0 <= int(position) < n:
        raise ValueError(f"position {position!r} out of range for {n} records")
    return others[:int(position)] + [(example.key, example.value)] + others[int(position):]


def _contains_answer(doc: Document, answers) -> bool:
    """Whether a normalised gold answer occurs in the passage as a run of whole words (the rule
    of the DPR ``has_answer`` check behind Liu et al.'s ``hasanswer``; a substring test would
    find the answer "S" in almost every passage)."""
    words = normalize_answer(f"{doc.title} {doc.text}").split()
    for a in answers:
        w = normalize_answer(a).split()
        if w and any(words[i:i + len(w)] == w for i in range(len(words) - len(w) + 1)):
            return True
    return False


def bm25_distractors(examples, n: int, pool=None) -> list[list[Document]]:
    """For each QA example, ``n`` distractor passages: the passages of ``pool`` (default: every
    example's gold passage) that BM25 ranks most similar to its question, best first, leaving out
    its own gold passage, duplicates, and every passage that contains one of its normalised gold
    answers (Liu et al. keep only passages without an answer).

    ``bm25s`` scores (Lucene's BM25, ``k1 = 1.5``, ``b = 0.75``, English stop words, no
    stemming); ties are broken by pool order, so the result is a pure function of the inputs.
    ValueError if the pool cannot supply ``n`` for some question.
    """
    import bm25s

    n = positive_int("distractors", n, minimum=1)
    ex = list(examples)
    pool = [e.gold_document for e in ex] if pool is None else list(pool)
    seen, uniq = set(), []
    for d in pool:
        if (d.title, d.text) not in seen:
            seen.add((d.title, d.text))
            uniq.append(d)
    corpus = [f"{d.title} {d.text}" for d in uniq]
    retriever = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    retriever.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False),
                    show_progress=False)
    q_tokens = bm25s.tokenize([e.question for e in ex], stopwords="en", show_progress=False)
    scores = _score_all(retriever, q_tokens, len(uniq))
    out = []
    for i, e in enumerate(ex):
        order = np.lexsort((np.arange(len(uniq)), -scores[i]))  # score down, then pool order
        mine = (e.gold_document.title, e.gold_document.text)
        chosen = []
        for j in order:
            d = uniq[int(j)]
            if (d.title, d.text) == mine or _contains_answer(d, e.answers):
                continue
            chosen.append(d)
            if len(chosen) == n:
                break
        if len(chosen) < n:
            raise ValueError(f"only {len(chosen)} distractors without an answer for question "
                             f"{e.question!r} (line {e.line}); {n} needed: a larger file, or "
                             f"fewer documents")
        out.append(chosen)
    return out


def _score_all(retriever, q_tokens, n_docs: int) -> np.ndarray:
    """BM25 score of every (query, document) pair: a (queries, documents) float64 array."""
    vocab = q_tokens.vocab
    inv = {i: t for t, i in vocab.items()}
    out = np.zeros((len(q_tokens.ids), n_docs))
    for qi, ids in enumerate(q_tokens.ids):
        words = [inv[i] for i in ids if inv[i] in retriever.vocab_dict]
        if words:
            out[qi] = retriever.get_scores(words)
    return out
