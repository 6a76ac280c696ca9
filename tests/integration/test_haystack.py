"""The Haystack integration (posbias_nb/integrations/haystack.py): a prompt remedy file as a
Haystack 2 component, checked against Haystack's own LostInTheMiddleRanker inside a Haystack
Pipeline (tiny random Llama, no hub)."""
import os

import pytest

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # no network from the tests

pytest.importorskip("torch")
from haystack import Document, Pipeline  # noqa: E402
from haystack.components.rankers import LostInTheMiddleRanker  # noqa: E402

from posbias_nb.integrations.haystack import RemedyRanker  # noqa: E402
from posbias_nb.measure import entry  # noqa: E402
from posbias_nb.models import remedy_file  # noqa: E402


@pytest.fixture(scope="module")
def tiny(model_dir):
    return entry.loaded(model_dir, weights="pretrained", seed=0)[0]


@pytest.fixture
def write(tmp_path, tiny, model_dir):
    def _write(name, params):
        return remedy_file.write(tmp_path / "remedy.json", name, params, tiny, model_dir)
    return _write


def _docs(n):
    return [Document(content=f"passage {i} text", meta={"title": f"T{i}"}) for i in range(n)]


@pytest.mark.parametrize("n", range(1, 12))
def test_matches_haystacks_lost_in_the_middle_ranker(write, model_dir, n):
    r = RemedyRanker(write("lost-in-the-middle-ranker", {"ranker": "file"}), model_dir)
    docs = _docs(n)
    got = r.run(documents=docs)["documents"]
    want = LostInTheMiddleRanker().run(documents=list(docs))["documents"]
    assert [d.id for d in got] == [d.id for d in want]
    assert all(a is b for a, b in zip(got, [next(x for x in docs if x.id == w.id) for w in want]))


def test_in_a_pipeline_and_langchains_rule_differs_at_even_counts(write, model_dir):
    pipe = Pipeline()
    pipe.add_component("reorder", RemedyRanker(write("long-context-reorder", {"ranker": "file"}),
                                               model_dir))
    docs = _docs(6)
    got = pipe.run({"reorder": {"documents": docs}})["reorder"]["documents"]
    hay = LostInTheMiddleRanker().run(documents=list(docs))["documents"]
    assert [d.id for d in got] == [d.id for d in hay][::-1]  # LangChain's: Haystack's reversed
    assert got[-1].id == docs[0].id  # a Pipeline hands copies on


def test_a_question_ranker_needs_the_query(write, model_dir):
    r = RemedyRanker(write("long-context-reorder", {"ranker": "bm25"}), model_dir)
    with pytest.raises(ValueError, match="bm25 ranker"):
        r.run(documents=_docs(3))
    docs = [Document(content="cats purr", meta={"title": "a"}),
            Document(content="the capital of Italy is Rome", meta={"title": "b"})]
    assert r.run(documents=docs, query="capital of Italy")["documents"][-1] is docs[1]
