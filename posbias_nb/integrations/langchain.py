"""A prompt remedy file applied in a LangChain pipeline: :class:`RemedyCompressor`, a
``langchain_core`` document compressor (it receives the query: the one to use in a retrieval
chain), and :class:`RemedyReorder`, a document transformer in the place of
``LongContextReorder``.

``posbias fix`` writes a remedy file (:mod:`posbias_nb.models.remedy_file`); when the remedy it
chose is a prompt remedy (:data:`~posbias_nb.models.remedy_file.PROMPT_REMEDIES`: LangChain's
or Haystack's fixed rule, our curve or prior order, attention sorting, the query-aware prompt),
this transformer places a retriever's documents by it::

    from posbias_nb.integrations.langchain import RemedyReorder

    from langchain_classic.retrievers import ContextualCompressionRetriever
    from posbias_nb.integrations.langchain import RemedyCompressor

    chain = ContextualCompressionRetriever(
        base_compressor=RemedyCompressor(remedy_file="fix/remedy.json", model="smollm2-135m"),
        base_retriever=retriever)
    docs = chain.invoke(question)   # the retriever's documents, in the remedy's prompt order

LangChain's ``DocumentCompressorPipeline`` calls a document *transformer* without the query, so
a remedy that ranks by the question (the ``bm25`` and ``question-likelihood`` rankers,
attention sorting) needs the compressor; :class:`RemedyReorder` serves the rest (the ``file``
ranker: the retriever's own order is the relevance order).

The ordering is :func:`posbias_nb.experiments.base.prompts.reorder_documents`'s, the one call for a
retrieval pipeline; this module only maps LangChain's ``Document`` to the package's documents
(title from ``metadata["title"]``, text from ``page_content``) and back by position, so the
very objects the retriever returned come back, metadata and duplicates included.

Needs the optional extra: ``pip install 'posbias-nb[langchain]'`` (``make setup`` installs
it).  Nothing in the package imports this module.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:
    from langchain_core.callbacks import Callbacks
    from langchain_core.documents import BaseDocumentCompressor, BaseDocumentTransformer, Document
    from pydantic import ConfigDict, PrivateAttr
except ImportError as e:  # the optional extra is missing
    raise ImportError("posbias_nb.integrations.langchain needs langchain-core: "
                      "pip install 'posbias-nb[langchain]' (in a checkout of the project: "
                      "make setup)") from e

from ..experiments.base.prompts import reorder_documents
from . import prompt_remedy
from ..tasks import qa

__all__ = ["RemedyReorder", "RemedyCompressor", "QUESTION_RANKERS"]

#: The rankers of :data:`~posbias_nb.models.remedy_file.RANKERS` that read the question: a
#: file that ranks by one of them (or sorts by attention) needs ``query=``.
QUESTION_RANKERS = ("bm25", "question-likelihood")


class RemedyReorder(BaseDocumentTransformer):
    """The documents of a LangChain pipeline placed by the prompt remedy of ``remedy_file``,
    made for ``model`` (a zoo name such as ``smollm2-135m``, a model directory or a hub id).

    The file is read and checked here: ValueError, in one line naming the file, when it cannot
    be read or is not a remedy file, when its remedy patches the network (apply that one with
    :func:`posbias_nb.models.remedy`), or when it was made for another model (its recorded
    fingerprint against ``model``'s, :func:`posbias_nb.models.remedy_file.check_model`).

    Attributes: ``path``, ``model``, ``remedy`` (its name) and ``params`` (the file's).
    """

    def __init__(self, remedy_file, model) -> None:
        self.path, self.model, self.remedy, self.params = prompt_remedy(remedy_file, model)

    def __repr__(self) -> str:
        return f"RemedyReorder({str(self.path)!r}, {self.model!r}: {self.remedy})"

    @property
    def needs_query(self) -> bool:
        """True when placing the documents reads the question (a ranker of
        :data:`QUESTION_RANKERS`, or attention sorting)."""
        return self.params.get("ranker") in QUESTION_RANKERS or self.remedy == "attention-sort"

    def transform_documents(self, documents: Sequence[Document], query: str | None = None,
                            **kwargs: Any) -> list[Document]:
        """``documents`` (LangChain ``Document`` objects in the retriever's order, the most
        relevant first) in prompt order: the same objects, placed by
        :func:`posbias_nb.experiments.base.prompts.reorder_documents` (the ``file`` ranker reads the
        given order as the relevance order).  ``query``: the question, needed by the ``bm25``
        and ``question-likelihood`` rankers and attention sorting (ValueError without it).
        An empty list gives an empty list (after that check); a slot quality for another
        number of documents is refused (ValueError)."""
        docs = list(documents)
        if self.needs_query and not query:
            what = ("attention sorting" if self.remedy == "attention-sort"
                    else f"{self.remedy} with the {self.params['ranker']} ranker")
            raise ValueError(f"{self.path.name}: {what} reads the question: give query= to "
                             "transform_documents (a retrieval chain's query to "
                             "RemedyCompressor)")
        if not docs:
            return []
        for d in docs:
            if not isinstance(d, Document):
                raise ValueError(f"a LangChain Document is expected, got {type(d).__name__}")
        ours = [qa.Document(str(d.metadata.get("title") or ""), d.page_content) for d in docs]
        # the prompt reorder_documents also builds is dropped here: without a query (a ranker
        # that does not read it) a placeholder question stands in for it
        placed = reorder_documents(self.path, query or "?", ours, self.model)["documents"]
        where = {id(p): i for i, p in enumerate(ours)}
        order = [where.get(id(p)) for p in placed]
        if None in order or sorted(order) != list(range(len(docs))):
            raise RuntimeError(f"{self.remedy} did not return a permutation of the documents")
        return [docs[i] for i in order]

    async def atransform_documents(self, documents: Sequence[Document],
                                   query: str | None = None, **kwargs: Any) -> list[Document]:
        """:meth:`transform_documents` (pure Python, or one model call for the rankers that
        read the model)."""
        return self.transform_documents(documents, query=query, **kwargs)


class RemedyCompressor(BaseDocumentCompressor):
    """The prompt remedy of ``remedy_file`` for ``model`` as a LangChain document compressor:
    :meth:`compress_documents` receives the retrieval chain's query, so every ranker works in a
    ``ContextualCompressionRetriever``.  It keeps every document (a reorder, not a filter) and
    returns the retriever's very objects in prompt order (:class:`RemedyReorder`'s placement).

    The file is read and checked when the compressor is made (the errors of
    :class:`RemedyReorder`); a ranker that reads the question given an empty query is refused
    (ValueError naming the ranker)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    remedy_file: str
    model: str
    _reorder: RemedyReorder = PrivateAttr()

    def model_post_init(self, __context: Any) -> None:
        self._reorder = RemedyReorder(self.remedy_file, self.model)

    @property
    def remedy(self) -> str:
        """The remedy's name."""
        return self._reorder.remedy

    @property
    def needs_query(self) -> bool:
        """True when placing the documents reads the question."""
        return self._reorder.needs_query

    def compress_documents(self, documents: Sequence[Document], query: str,
                           callbacks: Callbacks | None = None) -> Sequence[Document]:
        """``documents`` in the remedy's prompt order, placed with the chain's ``query``."""
        return self._reorder.transform_documents(documents, query=query)
