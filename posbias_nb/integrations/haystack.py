"""A prompt remedy file applied in a Haystack 2 pipeline: :class:`RemedyRanker`, a Haystack
``@component`` in the place of ``LostInTheMiddleRanker``.

``posbias fix`` writes a remedy file (:mod:`posbias_nb.models.remedy_file`); when its remedy is a
prompt remedy, this component places a retriever's documents by it, after the retriever and
before the prompt builder::

    from posbias_nb.integrations.haystack import RemedyRanker

    pipe.add_component("reorder", RemedyRanker("fix/remedy.json", "smollm2-135m"))
    pipe.connect("retriever.documents", "reorder.documents")
    pipe.connect("reorder.documents", "prompt_builder.documents")
    pipe.run({"retriever": {"query": q}, "reorder": {"query": q}, ...})

The placement is :class:`posbias_nb.integrations.langchain.RemedyReorder`'s rule, through the
same :func:`posbias_nb.experiments.base.prompts.reorder_documents`; this module maps Haystack's
``Document`` (``content``, ``meta["title"]``) to the package's and back by position, so the very
objects come back.  Unlike ``LostInTheMiddleRanker`` it neither deduplicates nor truncates: a
reorder keeps every document.  ``tests/integration/test_haystack.py`` checks it against Haystack's own
ranker.

Needs ``haystack-ai`` (``make setup`` installs it).  Nothing in the package imports this module.
"""
from __future__ import annotations


try:
    from haystack import Document, component
except ImportError as e:  # the optional dependency is missing
    raise ImportError("posbias_nb.integrations.haystack needs haystack-ai: pip install "
                      "haystack-ai (in a checkout of the project: make setup)") from e

from ..experiments.base.prompts import reorder_documents
from . import prompt_remedy
from ..tasks import qa

__all__ = ["RemedyRanker"]

#: The rankers of a remedy file that read the question (``query`` is then required).
QUESTION_RANKERS = ("bm25", "question-likelihood")


@component
class RemedyRanker:
    """The documents of a Haystack pipeline placed by the prompt remedy of ``remedy_file``, made
    for ``model`` (a zoo name, a model directory or a hub id).  The file is read and checked
    here: ValueError naming the file when it is not a remedy file, when its remedy patches the
    network, or when it was made for another model."""

    def __init__(self, remedy_file, model) -> None:
        self.path, self.model, self.remedy, self.params = prompt_remedy(remedy_file, model)

    @property
    def needs_query(self) -> bool:
        """True when placing the documents reads the question."""
        return self.params.get("ranker") in QUESTION_RANKERS or self.remedy == "attention-sort"

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document], query: str | None = None) -> dict:
        """``{"documents": ...}``: ``documents`` (in the retriever's order, the most relevant
        first) in prompt order.  ``query`` is required by the rankers that read the question
        (ValueError naming the ranker)."""
        docs = list(documents)
        if self.needs_query and not query:
            what = ("attention sorting" if self.remedy == "attention-sort"
                    else f"{self.remedy} with the {self.params['ranker']} ranker")
            raise ValueError(f"{self.path.name}: {what} reads the question: connect a query "
                             "to RemedyRanker.run")
        if not docs:
            return {"documents": []}
        for d in docs:
            if not isinstance(d, Document) or d.content is None:
                raise ValueError("RemedyRanker places textual Haystack Documents only")
        ours = [qa.Document(str((d.meta or {}).get("title") or ""), d.content) for d in docs]
        placed = reorder_documents(self.path, query or "?", ours, self.model)["documents"]
        where = {id(p): i for i, p in enumerate(ours)}
        order = [where.get(id(p)) for p in placed]
        if None in order or sorted(order) != list(range(len(docs))):
            raise RuntimeError(f"{self.remedy} did not return a permutation of the documents")
        return {"documents": [docs[i] for i in order]}
