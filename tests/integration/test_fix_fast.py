"""``posbias fix --fast`` (design ``fix-fast``, issue 62 item 4): the landing-slot estimate by
hand and on counterexamples, its landing slots against the full path's own record of where each
scored prompt put the gold passage, the carried remedy alone measured on the test part (and the
question likelihood only where its setting ranks by it), the refusals (tiny random Llama,
byte-level text)."""
import json

import numpy as np
import pytest

from posbias_nb.experiments.remedy import fix_fast as ff

pytest.importorskip("torch")
pytest.importorskip("transformers")

from posbias_nb import cli  # noqa: E402
from posbias_nb.experiments.remedy import fix as fix_mod  # noqa: E402
from test_cli_task_file import _file, no_cache  # noqa: E402,F401  (the cache off in every test)
from test_fix import KW, _qa_rows  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(llama4_dir):
    return llama4_dir


def test_landing_gains_by_hand():
    base = np.array([[-3.0, -5.0, -1.0, -2.0], [-1.0, -1.0, -4.0, -2.0]])
    pos = [0, 1, 3, 4]  # slot 2 of 5 not measured: read between slots 1 and 3
    land = np.array([[[2, 2, 2, 2], [4, 4, 4, 4]]])  # one setting, each example its own slot
    g = ff.landing_gains(base, land, pos, 5)
    # example 0: -3 (the mean of -5 and -1) at every input slot, against -2.75 on average
    # example 1: -2 at every input slot, against -2.0 on average
    assert np.allclose(g["all"], [[-3 + 2.75, 0.0]])
    # middle slots of 4 gold slots are the central half (slots 1 and 2 of the list)
    assert np.allclose(g["middle"], [[-3 - (-5 - 1) / 2, -2 - (-1 - 4) / 2]])
    assert np.allclose(g["edges"], [[-3 - (-3 - 2) / 2, -2 - (-1 - 2) / 2]])


@pytest.mark.parametrize("base,land,pos,k,match", [
    ([[-1.0, -2.0]], [[[0, 5]]], [0, 1], 3, "landing slots"),
    ([[-1.0, -2.0]], [[[0, 1, 1]]], [0, 1], 3, "landing must be"),
    ([[-1.0, np.nan]], [[[0, 1]]], [0, 1], 3, "non-finite"),
    ([[-1.0, -2.0]], [[[0, 1]]], [1, 0], 3, "positions must increase"),
])
def test_landing_gains_refuses(base, land, pos, k, match):
    with pytest.raises(ValueError, match=match):
        ff.landing_gains(base, land, pos, k)


def test_the_fast_path_searches_ranked_remedies_only(model_dir, tmp_path):
    f = _file(tmp_path, _qa_rows(30))
    with pytest.raises(ValueError, match="ranked prompt remedies"):
        ff.fix(model_dir, f, **{k: v for k, v in KW.items() if k != "rule"},
               remedies="query-aware")


@pytest.fixture(scope="module")
def _runs(tmp_path_factory, model_dir):
    """The fast path and the full path on the same file and split, each into its own cache;
    the calls of the two expensive steps on the fast path counted."""
    from posbias_nb.measure import positional, scoring

    d = tmp_path_factory.mktemp("fast")
    f = _file(d, _qa_rows(30))
    kw = {k: v for k, v in KW.items() if k != "rule"}
    calls = {"ql": 0, "generate": 0}
    ql, gen = positional.question_likelihood_ranking, scoring.score_and_generate

    def count_ql(*a, **k):
        calls["ql"] += 1
        return ql(*a, **k)

    def count_gen(*a, **k):
        calls["generate"] += 1
        return gen(*a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POSBIAS_CACHE_DIR", str(d / "cache-fast"))
        mp.setattr(positional, "question_likelihood_ranking", count_ql)
        mp.setattr(scoring, "score_and_generate", count_gen)
        fast = ff.fix(model_dir, f, **kw)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POSBIAS_CACHE_DIR", str(d / "cache-full"))
        full = fix_mod.fix(model_dir, f, **kw, remedies=",".join(ff.RANKED),
                           rule="select-one")
    return f, fast, full, calls


def test_landing_slots_are_where_the_scored_prompts_put_the_gold(_runs):
    """The fast path's landing slots, found without scoring, equal the slots the full path
    recorded for the same settings' scored prompts (its ``prompt.gold_slot``); and with the
    full path's base log p they give the estimates the fast path tuned on."""
    f, fast, full, _ = _runs
    a, b = fast["tuning"]["prompt"]["gold_slot"], full["tuning"]["prompt"]["gold_slot"]
    assert set(a) == set(b) and len(a) == 10  # the four ranked remedies' settings (2+2+2+4)
    for k in a:
        assert a[k] == b[k], k
    for r in ff.RANKED:  # the same qualities (curve, priors) ordered the same placements
        assert fast["tuning"][r]["grid"] == full["tuning"][r]["grid"]
    pos, k = [p - 1 for p in fast.meta["gold_slots"]], fast.meta["documents"]
    chk = ff.landing_check(full["tuning"], fast["tuning"]["base_logprob"], pos, k)
    for row in chk["settings"]:
        r, j = row["remedy"], full["tuning"][row["remedy"]]["grid"].index(row["setting"])
        assert np.isclose(row["scored"], full["tuning"][r]["all_gain"][j])
        assert np.isclose(row["estimated"], fast["tuning"][r]["all_gain"][j])


def test_only_the_carried_remedy_is_measured_on_the_test_part(_runs):
    f, fast, full, calls = _runs
    sel, test = fast["selected"], fast["test"]
    assert fast.meta["design"] == "fix-fast" and fast["tuning"]["estimated"]
    carried = sel["carried"]
    if carried is None:  # no estimated gain above 0: nothing is measured on the test part
        assert set(test) == {"n_examples"} and calls["generate"] == 0
        pytest.skip("no remedy carried on this tiny model")
    assert [r for r in ff.RANKED if r in test] == [carried]
    assert sel["exploratory"] == {} and sel["verdict"] in ("holds", "fails", "inconclusive")
    n_test, n_pos = test["n_examples"], len(fast.meta["gold_slots"])
    # answered: the base prompts and the carried remedy's distinct prompts, nothing else
    assert n_pos * n_test <= calls["generate"] <= 2 * n_pos * n_test
    uses_ql = sel["setting"]["ranker"] == "question-likelihood"
    n_tune = len(fast["split"]["tune"])
    timed = min(n_test, int(fix_mod.QUICK["timing_prompts"]))
    # the tuning part ranks by the question likelihood once per example (a setting uses it);
    # the test part only where the carried setting does (each example once, each timed prompt)
    assert calls["ql"] == n_tune + (n_test + timed if uses_ql else 0)
    # the carried remedy's test numbers are those of a statistic over its own examples
    x = np.asarray(test[carried]["all_gain_per_example"])
    assert len(x) == n_test and np.isclose(x.mean(), sel["interval"]["estimate"])


def test_the_page_and_the_command(_runs, tmp_path, capsys, model_dir):
    f, fast, full, _ = _runs
    paths = fix_mod.write_fix(fast, tmp_path / "out")
    page = open(paths["html"]).read()
    assert "fast path (design fix-fast)" in page
    obj = json.loads(open(paths["json"]).read())
    assert obj["meta"]["design"] == "fix-fast"
    for extra, match in ((["--rule", "all-slots"], "--fast runs the select-one rule"),
                         (["--remedies", "ms-poe"], "ranked prompt remedies")):
        out = tmp_path / "bad"
        code = cli.main(["fix", "--model", model_dir, "--data", str(f), "--out", str(out),
                         "--quick", "--fast", "--force", "--examples", "8", "--documents",
                         "4", *extra])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and match in err[0], err
        assert not out.exists()


def test_landing_check_rejects_an_estimate_that_misses():
    """landing_check on a tuning result whose scored gains the estimate reproduces (error 0,
    the same carried setting), and on one where the scored gains run against it."""
    base = np.array([[-2.0, -4.0, -1.0], [-1.0, -3.0, -2.0], [-2.0, -2.5, -1.5]])
    pos, k = [0, 1, 2], 3
    grid = [{"ranker": "bm25"}, {"ranker": "question-likelihood"}]
    lands = {0: np.full((3, 3), 2), 1: np.full((3, 3), 1)}
    est = {j: ff.landing_gains(base, lands[j][None], pos, k)["all"][0] for j in lands}
    gold = {f"long-context-reorder:{json.dumps(s, sort_keys=True)}":
            [int(v) for v in lands[j].reshape(-1)] for j, s in enumerate(grid)}

    def tuning(per):
        return {"prompt": {"gold_slot": gold},
                "long-context-reorder": {"grid": grid, "all_gain_by_example":
                                         [list(map(float, per[0])), list(map(float, per[1]))]}}

    ok = ff.landing_check(tuning([est[0], est[1]]), base, pos, k)
    assert np.isclose(ok["error"]["estimate"], 0) and ok["same_carried"]
    assert ok["spearman"] == pytest.approx(1.0)
    bad = ff.landing_check(tuning([est[1] - 1, est[0] + 3]), base, pos, k)
    assert not bad["same_carried"] and bad["spearman"] == pytest.approx(-1.0)
    assert bad["error"]["low"] > 0


def test_a_question_likelihood_setting_ranks_each_test_example_once(model_dir, tmp_path,
                                                                     monkeypatch):
    """A carried setting that ranks by the question likelihood: one ranking pass per test
    example (a document's likelihood does not depend on its slot) and one per timed prompt,
    and the prompts it scores are those of a ranking made afresh at every gold slot."""
    from posbias_nb.experiments.prompt import placement, user_task as T
    from posbias_nb.measure import positional

    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "cache"))
    f = _file(tmp_path, _qa_rows(12))
    k = KW["documents"]
    pos = fix_mod.fix_positions(k)
    part = T.prepare(f, k, pos, None, None, 0, "liu-qa", select=[0, 1, 2], pool_exclude=[])
    setting = {"ranker": "question-likelihood"}
    sizes = dict(fix_mod.QUICK, timing_prompts=1)
    calls = {"ql": 0}
    ql = positional.question_likelihood_ranking

    def count_ql(*a, **kw):
        calls["ql"] += 1
        return ql(*a, **kw)

    monkeypatch.setattr(positional, "question_likelihood_ranking", count_ql)
    res = ff.judge_test_part(model_dir, "pretrained", 0, part, "long-context-reorder", setting, {},
                        sizes, {"test": "ql-once"})
    assert calls["ql"] == len(part["items"]) + 1
    # the gold passage lands where a ranking made afresh at each gold slot puts it
    from posbias_nb.experiments.base import study

    m, tok, _ = study.load(model_dir, "pretrained", 0)
    codec = study.codec(m, tok)
    want = []
    for it in part["items"]:
        for j, p in enumerate(part["positions"]):
            docs = it["documents"][j]
            nll = {(d.title, d.text): float(v) for d, v in
                   zip(docs, ql(m, codec, it["question"], docs)["nll"])}
            r = placement.rank("question-likelihood", it["question"], docs, nll=nll)
            placed = placement.place("long-context-reorder", setting, it["question"], docs,
                                     ranking=r)
            want.append(placed["documents"].index(docs[p]))
    assert np.asarray(res["gold_slot"]).tolist() == want
