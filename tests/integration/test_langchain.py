"""The LangChain integration (posbias_nb/integrations/langchain.py): a prompt remedy file as a
``langchain_core`` document transformer.  The oracle is LangChain's own ``LongContextReorder``
(``langchain_community``); Haystack's rule differs from it at an even count, as the two
libraries do; the very Document objects come back (metadata, duplicates); files for another
model, network remedies and missing questions are refused (tiny random Llama, no hub)."""
import asyncio
import importlib
import sys
import warnings

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from langchain_core.documents import BaseDocumentTransformer, Document  # noqa: E402

with warnings.catch_warnings():  # langchain-community announces its sunset on import
    warnings.simplefilter("ignore", DeprecationWarning)
    from langchain_community.document_transformers import LongContextReorder  # noqa: E402

from posbias_nb.integrations.langchain import RemedyReorder  # noqa: E402
from posbias_nb.measure import entry  # noqa: E402
from posbias_nb.models import remedy_file  # noqa: E402
from posbias_nb.tasks import qa, reorder  # noqa: E402


@pytest.fixture(scope="module")
def tiny(model_dir):
    return entry.loaded(model_dir, weights="pretrained", seed=0)[0]


@pytest.fixture
def write(tmp_path, tiny, model_dir):
    def _write(name, params, file="remedy.json"):
        return remedy_file.write(tmp_path / file, name, params, tiny, model_dir)
    return _write


def _docs(n, prefix="doc"):
    return [Document(page_content=f"{prefix} {i} text", metadata={"title": f"T{i}", "rank": i})
            for i in range(n)]


def _ids(docs):
    return [id(d) for d in docs]


def test_it_is_a_langchain_document_transformer(write, model_dir):
    t = RemedyReorder(write("long-context-reorder", {"ranker": "file"}), model_dir)
    assert isinstance(t, BaseDocumentTransformer)
    assert t.remedy == "long-context-reorder" and t.params == {"ranker": "file"}


@pytest.mark.parametrize("n", range(1, 13))
def test_long_context_reorder_matches_langchain(write, model_dir, n):
    """The file's long-context-reorder with the file ranker is LangChain's LongContextReorder,
    object for object."""
    t = RemedyReorder(write("long-context-reorder", {"ranker": "file"}), model_dir)
    docs = _docs(n)
    got = t.transform_documents(docs)
    want = LongContextReorder().transform_documents(list(docs))
    assert [d.page_content for d in got] == [d.page_content for d in want]
    assert _ids(got) == _ids(want)


@pytest.mark.parametrize("n", range(1, 13))
def test_haystack_differs_from_langchain_at_even_counts(write, model_dir, n):
    """Haystack's LostInTheMiddleRanker puts the most relevant first at every count; LangChain's
    rule is the same order at an odd count and that order reversed at an even one."""
    t = RemedyReorder(write("lost-in-the-middle-ranker", {"ranker": "file"}), model_dir)
    docs = _docs(n)
    got = [d.page_content for d in t.transform_documents(docs)]
    lc = [d.page_content for d in LongContextReorder().transform_documents(list(docs))]
    assert got[0] == docs[0].page_content
    if n > 1:
        assert got[-1] == docs[1].page_content
    if n % 2:
        assert got == lc
    else:
        assert got != lc and got == lc[::-1]


def test_metadata_is_kept_and_duplicates_survive(write, model_dir):
    """The objects given come back, each once: equal documents (same text, title and metadata)
    are told apart by position, not by content."""
    t = RemedyReorder(write("long-context-reorder", {"ranker": "file"}), model_dir)
    same = Document(page_content="same text", metadata={"title": "T", "k": 1})
    docs = [Document(page_content="a", metadata={"title": "A", "k": 0}), same,
            Document(page_content="same text", metadata={"title": "T", "k": 1}),
            Document(page_content="same text", metadata={"title": "T", "k": 2}), same,
            Document(page_content="z", metadata={})]
    snapshot = [(d.page_content, dict(d.metadata)) for d in docs]
    got = t.transform_documents(docs)
    want = LongContextReorder().transform_documents(list(docs))
    assert _ids(got) == _ids(want)
    assert sorted(_ids(got)) == sorted(_ids(docs)) and len(got) == len(docs)
    assert [(d.page_content, d.metadata) for d in docs] == snapshot  # nothing changed in place
    assert got[-1] is docs[0]  # six documents: the most relevant lands last


def test_title_comes_from_metadata(write, model_dir):
    """The bm25 ranker ranks ``title text``: a query that only the title matches ranks it
    first (as tasks.reorder does on the package's own documents)."""
    t = RemedyReorder(write("lost-in-the-middle-ranker", {"ranker": "bm25"}), model_dir)
    docs = [Document(page_content="plain words here"),
            Document(page_content="more plain words", metadata={"title": "Zanzibar"}),
            Document(page_content="other plain words")]
    got = t.transform_documents(docs, query="where is zanzibar")
    ours = [qa.Document(str(d.metadata.get("title", "")), d.page_content) for d in docs]
    ranked = [docs[i] for i in reorder.bm25_ranking("where is zanzibar", ours)]
    assert got[0] is docs[1]
    assert _ids(got) == _ids(reorder.reorder("lost-in-the-middle-ranker", ranked))


def test_curve_order_follows_the_slot_quality(write, model_dir):
    q = [-2.0, 0.5, -1.0, 0.1, -3.0]
    t = RemedyReorder(write("curve-order", {"ranker": "file", "slot_quality": q}), model_dir)
    docs = _docs(5)
    got = t.transform_documents(docs)
    assert _ids(got) == _ids([docs[r] for r in reorder.quality_order(q)])
    assert got[1] is docs[0]  # the best slot (1) holds the most relevant document
    with pytest.raises(ValueError, match="5 slots for 4 documents"):
        t.transform_documents(docs[:4])


def test_query_aware_keeps_the_order_and_async_delegates(write, model_dir):
    t = RemedyReorder(write("query-aware", {}), model_dir)
    docs = _docs(4)
    assert _ids(t.transform_documents(docs)) == _ids(docs)
    lc = RemedyReorder(write("long-context-reorder", {"ranker": "file"}, "l.json"), model_dir)
    got = asyncio.run(lc.atransform_documents(docs))
    assert _ids(got) == _ids(lc.transform_documents(docs))


def test_empty_list_gives_an_empty_list(write, model_dir):
    t = RemedyReorder(write("long-context-reorder", {"ranker": "file"}), model_dir)
    assert t.transform_documents([]) == []


def test_a_ranker_that_reads_the_question_needs_query(write, model_dir):
    t = RemedyReorder(write("long-context-reorder", {"ranker": "bm25"}), model_dir)
    with pytest.raises(ValueError, match="bm25 ranker reads the question: give query="):
        t.transform_documents(_docs(3))
    assert len(t.transform_documents(_docs(3), query="doc 2")) == 3


def test_a_file_for_another_model_is_refused(tmp_path, write, model_dir):
    """One line naming the file and both models; no file is written or changed."""
    path = write("long-context-reorder", {"ranker": "file"})
    before = {p: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(ValueError) as e:
        RemedyReorder(path, "smollm2-tiny")
    msg = str(e.value)
    assert "\n" not in msg and "remedy.json" in msg and "smollm2-tiny" in msg
    assert remedy_file.read(path)["model"]["name"] in msg
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_network_remedies_and_non_remedy_files_are_refused(tmp_path, write, model_dir):
    hs = write("hidden-scaling", {"channel": 3, "scale": -1.0})
    with pytest.raises(ValueError, match="hidden-scaling, which patches the model"):
        RemedyReorder(hs, model_dir)
    with pytest.raises(ValueError, match="cannot read remedy file"):
        RemedyReorder(tmp_path / "missing.json", model_dir)
    other = tmp_path / "other.json"
    other.write_text('{"format": "something-else"}')
    with pytest.raises(ValueError, match="not a remedy file"):
        RemedyReorder(other, model_dir)


def test_a_missing_extra_names_the_install_command(monkeypatch):
    """Without langchain-core, importing the module says how to install the extra."""
    name = "posbias_nb.integrations.langchain"
    monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "langchain_core", None)
    monkeypatch.setitem(sys.modules, "langchain_core.documents", None)
    with pytest.raises(ImportError, match=r"pip install 'posbias-nb\[langchain\]'.*make setup"):
        importlib.import_module(name)


# --- the compressor inside a real retrieval chain (issue 62) ---------------------------------
def _corpus_docs():
    from posbias_nb.tasks import corpus as _corpus
    from posbias_nb.experiments.prompt import realqa

    passages, _, examples = _corpus.oracle_corpus(realqa.data_path("qa"))
    docs = [Document(page_content=p.text, metadata={"title": p.title}) for p in passages[:300]]
    return docs, [e.question for e in examples[:300:37]]


def _chain(compressor, docs, k=10):
    from langchain_classic.retrievers import ContextualCompressionRetriever
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.retrievers import BM25Retriever
    base = BM25Retriever.from_documents(docs, k=k)
    return base, ContextualCompressionRetriever(base_compressor=compressor, base_retriever=base)


def test_compressor_in_a_retrieval_chain_is_long_context_reorder(write, model_dir):
    """With the file ranker (the retriever's own order, the pipeline study's setting) the
    compressor inside LangChain's ContextualCompressionRetriever over langchain_community's
    BM25Retriever gives LongContextReorder's order, object for object."""
    from langchain_core.documents import BaseDocumentCompressor
    from posbias_nb.integrations.langchain import RemedyCompressor

    c = RemedyCompressor(remedy_file=str(write("long-context-reorder", {"ranker": "file"})),
                         model=str(model_dir))
    assert isinstance(c, BaseDocumentCompressor) and not c.needs_query
    docs, questions = _corpus_docs()
    base, chain = _chain(c, docs)
    for q in questions:
        retrieved = base.invoke(q)
        got = chain.invoke(q)
        want = LongContextReorder().transform_documents(list(retrieved))
        assert len(got) == 10
        assert [d.page_content for d in got] == [d.page_content for d in want]


def test_compressor_reads_the_chains_query_for_bm25(write, model_dir):
    """With the bm25 ranker the chain's query reaches the ranker: the result is LangChain's
    LongContextReorder of the retrieved documents sorted by our BM25 of that query; without a
    query the compressor names the ranker."""
    from posbias_nb.integrations.langchain import RemedyCompressor

    c = RemedyCompressor(remedy_file=str(write("long-context-reorder", {"ranker": "bm25"})),
                         model=str(model_dir))
    assert c.needs_query
    docs, questions = _corpus_docs()
    base, chain = _chain(c, docs)
    moved = 0
    for q in questions:
        retrieved = base.invoke(q)
        ours = [qa.Document(d.metadata["title"], d.page_content) for d in retrieved]
        by_bm25 = [retrieved[i] for i in reorder.bm25_ranking(q, ours)]
        want = LongContextReorder().transform_documents(by_bm25)
        got = chain.invoke(q)
        assert [d.page_content for d in got] == [d.page_content for d in want]
        plain = LongContextReorder().transform_documents(list(retrieved))
        moved += [d.page_content for d in plain] != [d.page_content for d in got]
    assert moved > 0  # the query's own ranking differs from the retriever's somewhere
    with pytest.raises(ValueError, match="bm25 ranker"):
        c.compress_documents(docs[:3], query="")
