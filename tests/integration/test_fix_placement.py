"""``posbias fix``'s prompt remedies (issue 45): the placement fix measures is the one ``posbias
task --remedy-file`` and the pipeline call apply; the slot qualities by hand; the tuning scores
are those of the rewritten prompts; the all-slot rule on a counterexample; a prompt remedy's
file from ``fix`` applied by ``task`` and by the Python call; the refusals (tiny random Llama,
byte-level text)."""
import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from posbias_nb import cli, theory  # noqa: E402
from posbias_nb.experiments.remedy import fix as fix_mod  # noqa: E402
from posbias_nb.experiments.prompt import placement  # noqa: E402
from posbias_nb.experiments.prompt import user_task as task_mod  # noqa: E402
from posbias_nb.experiments.base import prompts as prompts_mod  # noqa: E402
from posbias_nb.measure import entry  # noqa: E402
from posbias_nb.models import remedy_file  # noqa: E402
from posbias_nb.tasks import qa, reorder  # noqa: E402
from posbias_nb.experiments.base import study
from test_cli_task_file import _file, no_cache  # noqa: E402,F401  (the cache off in every test)
from test_fix import KW, _qa_rows  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(llama4_dir):
    return llama4_dir


def _loaded(model_dir):
    from posbias_nb.tasks.codec import Codec

    m, tok, _ = entry.loaded(model_dir, weights="pretrained", seed=0)
    return m, Codec(tok, m.get_input_embeddings().num_embeddings)


DOCS = [qa.Document("Pear", "A pear is a fruit of the pear tree."),
        qa.Document("Item", "Item seven is thing seven."),
        qa.Document("Plum", "Plums grow on trees."),
        qa.Document("Apple", "An apple a day."),
        qa.Document("Fig", "Figs are sweet.")]


@pytest.mark.parametrize("name", placement.PROMPT_REMEDIES)
def test_fix_places_as_task_and_the_pipeline_call_do(model_dir, name):
    """For every setting of every prompt remedy (each ranker, each prior), fix's placement of
    one prompt is prompts.prompt_remedy's, the function behind --remedy-file and
    reorder_documents."""
    from posbias_nb.measure.positional import question_likelihood_ranking

    m, codec = _loaded(model_dir)
    q = "what is item seven"
    quality = {"curve": np.array([-1.0, -3.0, -2.0, -0.5, -4.0]),
               "born": np.array([0.4, 0.3, 0.1, 0.1, 0.1]),
               "measured": np.array([0.1, 0.2, 0.3, 0.2, 0.2])}
    nll = {placement.measurements._key_doc(d): float(v) for d, v in
           zip(DOCS, question_likelihood_ranking(m, codec, q, DOCS)["nll"])}
    file_order = [DOCS[i] for i in (3, 1, 0, 4, 2)]
    for st in placement.grid("plain")[name]:
        (order,) = placement.measurements._orders([(name, st)], quality)
        r = st.get("ranker")
        ranking = None if r is None else placement.rank(r, q, DOCS, nll=nll,
                                                        file_order=file_order)
        got = placement.place(name, st, q, DOCS, ranking=ranking, order=order, model=m,
                              codec=codec)
        params = dict(st)
        if name in ("curve-order", "prior-order"):
            params["slot_quality"] = list(quality["curve" if name == "curve-order"
                                                  else st["prior"]])
        want = task_mod.prompt_remedy(name, params, q, DOCS, model=m, codec=codec,
                                      file_order=file_order)
        assert got == want, (name, st)


def test_slot_qualities_by_hand(model_dir):
    """The curve is the mean log p per gold slot, interpolated between gold slots; the born
    prior is the layout's row at alpha 1/2, normalised, summed over each slot's tokens."""
    got = placement.slot_curve([[-1.0, -4.0, -2.0], [-3.0, -2.0, -4.0]], [0, 2, 4], 5)
    assert np.allclose(got, [-2.0, -2.5, -3.0, -3.0, -3.0])
    m, codec = _loaded(model_dir)
    text = qa.qa_prompt("what is item seven", DOCS)
    ids = study.encode(codec, text)
    (spans,) = placement.measurements._spans(codec, [text], [ids])
    got = placement.born_prior(m, [spans], [len(ids)])
    from posbias_nb import models

    row = theory.layout_influence(models.model_layout(m), len(ids), 0.5)
    row = row / row.sum()
    assert np.allclose(got, [row[a:b].sum() for a, b in spans], rtol=1e-12)
    assert got[0] > got[-1]  # the born prior's primacy: the first slot before the last


def test_tuning_scores_are_those_of_the_rewritten_prompts(tmp_path, model_dir):
    """A setting's tuning all-slot gain is the mean over examples and gold slots of the
    teacher-forced log p of the first gold answer after each record's prompt rewritten by the
    remedy, minus the same after the prompt as it is: every record scored alone here."""
    from posbias_nb.measure.scoring import score_batch

    f = _file(tmp_path, _qa_rows(30))
    res = fix_mod.fix(model_dir, f, **KW, remedies="long-context-reorder,query-aware")
    t = res["tuning"]
    m, codec = _loaded(model_dir)
    tune = prompts_mod.prepare(f, 4, fix_mod.fix_positions(4), None, None, 0, "liu-qa",
                            select=res["split"]["tune"], pool_exclude=res["split"]["test"])

    def lp(text, it):
        return score_batch(m, [study.encode(codec, text)],
                           [study.answer_ids(codec, it["answers"][0])])[0][0]

    for name in ("long-context-reorder", "query-aware"):
        st = t[name]["grid"][0]
        d = []
        for it in tune["items"]:
            for j, docs in enumerate(it["documents"]):
                ranking = reorder.bm25_ranking(it["question"], docs) \
                    if st.get("ranker") == "bm25" else None
                p = placement.place(name, st, it["question"], docs, ranking=ranking)
                d.append(lp(p["prompt"], it) - lp(it["prompts"][j], it))
        assert abs(np.mean(d) - t[name]["all_gain"][0]) < 1e-4, name


def test_the_all_slot_rule_rejects_a_remedy_that_loses():
    """A remedy whose every setting lowers the mean over the slots is not judged, however much
    it gains in the middle; the middle rule would have taken it."""
    j, elig, why = fix_mod.pick([-0.5, -0.1], [2.0, 1.0], [0.0, 0.0], "all-slots", 0.25)
    assert j is None and not any(elig) and "all gold slots" in why
    assert fix_mod.pick([-0.5, -0.1], [2.0, 1.0], [0.0, 0.0], "middle", 0.25)[0] == 0
    with pytest.raises(ValueError, match="rule must be"):
        fix_mod.pick([0.1], [0.1], [0.0], "best", 0.25)


def test_a_prompt_remedy_file_from_fix_is_applied_by_task_and_the_call(tmp_path, model_dir):
    """The file fix writes for a prompt remedy (forced here: the file's contract, whatever the
    test part says) carries the setting and the slot quality it learnt; posbias task applies
    it to a file of the same document count, and the pipeline call reorders a plain list."""
    f = _file(tmp_path, _qa_rows(30))
    res = fix_mod.fix(model_dir, f, **KW, remedies="curve-order")
    t = res["tuning"]["curve-order"]
    j = int(np.argmax(t["all_gain"]))
    params = dict(t["grid"][j], slot_quality=res["tuning"]["prompt"]["qualities"]["curve"])
    res["tuning"]["curve-order"].update(chosen=j, setting=t["grid"][j], params=params)
    if "curve-order" not in res["test"]:
        res["test"]["curve-order"] = {"verdict": "not judged here"}
    res["winner"] = "curve-order"
    paths = fix_mod.write_fix(res, tmp_path / "fix")
    spec = remedy_file.read(paths["remedy"])
    assert spec["remedy"] == "curve-order" and len(spec["params"]["slot_quality"]) == 4
    docs = ["one", "two", "three", "four"]
    got = task_mod.reorder_documents(paths["remedy"], "which", docs, model_dir)
    assert sorted(d.text for d in got["documents"]) == sorted(docs)
    run = task_mod.task_run(model_dir, f, documents=4, examples=2, max_new_tokens=2,
                            remedy_file=paths["remedy"])
    assert run.meta["remedy"]["name"] == "curve-order"


def test_refusals_one_line_exit_2(tmp_path, capsys, model_dir):
    f = _file(tmp_path, _qa_rows(30))
    kv = _file(tmp_path, [{"ordered_kv_records": [[f"k{i}{j}", f"v{i}{j}"] for j in range(4)],
                           "key": f"k{i}2", "value": f"v{i}2"} for i in range(12)],
               "kv.jsonl.gz")
    out = tmp_path / "new" / "fix"
    base = ["fix", "--model", model_dir, "--out", str(out), "--quick"]
    cases = [
        (["--data", str(f), "--remedies", "curve-order", "--rule", "middle"], "middle rule"),
        (["--data", str(kv)], "key-value file"),
        (["--data", str(f), "--remedies", "reorder-by-vibes"], "remedies must be"),
    ]
    for extra, words in cases:
        capsys.readouterr()
        assert cli.main(base + extra) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], (extra, err)
        assert not (tmp_path / "new").exists()


def test_ranker_top1_is_clustered_by_question():
    got = placement.ranker_top1([[1, 1, 0, 0], [1, 0, 1, 0]], [0, 0, 1, 1], ["a", "b"])
    assert got["a"]["hits"] == 2 and got["a"]["units"] == 2
    assert got["a"]["share"]["estimate"] == 0.5 and got["b"]["share"]["estimate"] == 0.5
    assert got["a"]["share"]["low"] < 0.5 < got["a"]["share"]["high"]


def test_the_theory_family_on_a_counterexample():
    """The theory's comparisons: a prior that loses a nat against the curve is not
    non-inferior, and one that ties the fixed rules is not better; one that gains is."""
    rng = np.random.default_rng(0)
    th = placement.theory_settings(placement.PROMPT_REMEDIES)
    n = 12
    noise = rng.normal(0, 0.05, size=(len(th), n))
    curve, born, meas, lcr, litm = (np.zeros(n) + noise[i] for i in range(5))
    born = born - 1.0       # a nat below the curve, and below the fixed rules
    meas = meas + 1.0       # a nat above everything
    got = placement.theory_family([curve, born, meas, lcr, litm], th)
    v = {k.split(" (")[0]: x["verdict"] for k, x in got.items()}
    assert v["prior-order:born vs curve-order"] == "fails"
    assert v["prior-order:measured vs curve-order"] == "holds"
    assert v["prior-order:born vs long-context-reorder"] == "fails"
    assert v["prior-order:measured vs lost-in-the-middle-ranker"] == "holds"
    assert placement.theory_settings(["curve-order", "prior-order"]) == []
