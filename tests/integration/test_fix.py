"""``posbias fix`` run on a tiny random Llama (byte-level text): no test example read before the
choice, the choice rule, the remedy file's round trip and refusals, the bit-for-bit restore, and
the command's refusals.  The rules on made-up numbers are in tests/unit/studies/test_fix_rules.py."""
import gzip
import copy
import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from posbias_nb import cli  # noqa: E402
from posbias_nb.experiments.remedy import fix as fix_mod  # noqa: E402
from posbias_nb.experiments.remedy.fix import run as fix_run  # noqa: E402
from posbias_nb.experiments.prompt import user_task as task_mod  # noqa: E402
from posbias_nb.experiments.base import prompts as prompts_mod  # noqa: E402
from posbias_nb.models import remedy_file  # noqa: E402
from posbias_nb.tasks import qa  # noqa: E402
from posbias_nb.experiments.base import study


def _qa_rows(n):
    return [{"question": f"what is item {i}", "answers": [f"thing{i}"],
             "ctxs": [{"title": f"Item {i}", "text": f"Item {i} is thing{i}.", "isgold": True}]}
            for i in range(n)]


def _file(tmp_path, rows, name="t.jsonl.gz"):
    p = tmp_path / name
    with gzip.open(p, "wt") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return p


# the third design's rule (every remedy judged, Holm), on a test part below MIN_TEST: forced
KW = dict(documents=4, examples=8, quick=True, rule="all-slots", force=True)


@pytest.fixture(scope="module")
def model_dir(llama4_dir):
    return llama4_dir


class _Read(Exception):
    pass


def test_no_test_example_is_read_before_the_choice(tmp_path, monkeypatch, model_dir):
    """A test example whose prompt raises when it is built: the tuning stage (the channel
    search, every grid setting, the choice) finishes first; the raise comes with the test part,
    and no tuning prompt holds a test example's passage."""
    f = _file(tmp_path, _qa_rows(30))
    chosen = study.draw_examples(30, KW["examples"], 0)
    tune_i, test_i = fix_mod.split(len(chosen), seed=0)
    planted = f"what is item {int(chosen[test_i[0]])}"
    test_passages = {f"thing{int(chosen[i])}." for i in test_i}
    stage = {"chosen": False, "tune_prompts": []}
    real_prompt, real_tune = qa.qa_prompt, fix_mod.tune_settings

    def prompt(question, documents):
        if question == planted:
            raise _Read(f"read at chosen={stage['chosen']}")
        text = real_prompt(question, documents)
        if not stage["chosen"]:
            stage["tune_prompts"].append(text)
        return text

    def tune_settings(*a, **k):
        out = real_tune(*a, **k)
        stage["chosen"] = True
        return out

    monkeypatch.setattr(qa, "qa_prompt", prompt)
    monkeypatch.setattr(fix_run, "tune_settings", tune_settings)
    with pytest.raises(_Read, match="chosen=True"):
        fix_mod.fix(model_dir, f, **KW)
    assert stage["tune_prompts"]
    for t in stage["tune_prompts"]:
        docs = [ln for ln in t.splitlines() if ln.startswith("Document [")]
        assert not any(ln.endswith(p) for ln in docs for p in test_passages), t


def test_the_check_above_catches_a_leak(tmp_path, monkeypatch, model_dir):
    """The counterexample: a fix that builds every prompt up front (here, the test part
    prepared before the choice) is caught by the planted example."""
    f = _file(tmp_path, _qa_rows(30))
    chosen = study.draw_examples(30, KW["examples"], 0)
    _, test_i = fix_mod.split(len(chosen), seed=0)
    planted = f"what is item {int(chosen[test_i[0]])}"
    stage = {"chosen": False}
    real_prompt, real_prepare = qa.qa_prompt, prompts_mod.prepare

    def prompt(question, documents):
        if question == planted:
            raise _Read(f"read at chosen={stage['chosen']}")
        return real_prompt(question, documents)

    def eager(data, *a, select=None, pool_exclude=None, **k):  # reads the whole sample
        real_prepare(data, *a, select=sorted(set(select) | set(pool_exclude)), **k)
        return real_prepare(data, *a, select=select, pool_exclude=pool_exclude, **k)

    monkeypatch.setattr(qa, "qa_prompt", prompt)
    monkeypatch.setattr(prompts_mod, "prepare", eager)
    with pytest.raises(_Read, match="chosen=False"):
        fix_mod.fix(model_dir, f, **KW)


@pytest.fixture(scope="module")
def _fixed(tmp_path_factory, model_dir):
    """One run of the fix for the tests of this module (about 7 s on 2 cores), into a cache
    of its own, which :func:`run` hands on to each test."""
    cache = tmp_path_factory.mktemp("fix-cache")
    f = _file(tmp_path_factory.mktemp("fix"), _qa_rows(30))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POSBIAS_CACHE_DIR", str(cache))
        return f, fix_mod.fix(model_dir, f, **KW), cache


@pytest.fixture
def run(_fixed, monkeypatch):
    """The module's run, a copy each test may change (its winner, say), with the cache it was
    computed into (the same arguments then read the same numbers)."""
    f, res, cache = _fixed
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(cache))
    return f, copy.deepcopy(res)


def test_fix_result_contract(run, model_dir):
    f, res = run
    obj = res.to_json()
    sp = obj["split"]
    assert len(sp["tune"]) + len(sp["test"]) == KW["examples"]
    assert not set(sp["tune"]) & set(sp["test"])
    t = obj["tuning"]
    for r in fix_mod.REMEDIES:
        assert r in t
        assert len(t[r]["all_gain"]) == len(t[r]["grid"]) or t[r]["grid"] and not t[r]["all_gain"]
        if t[r]["chosen"] is not None:  # the all-slot rule: the best, and only if it gains
            j = t[r]["chosen"]
            assert t[r]["all_gain"][j] == max(t[r]["all_gain"]) > 0
            assert obj["test"][r]["verdict"] in ("holds", "fails", "inconclusive",
                                                 "not testable")
            assert len(obj["test"][r]["logprob_change"]) == len(obj["meta"]["gold_slots"])
    assert len(obj["test"]["theory"]["claims"]) == 6  # every remedy searched: the theory's family
    # same arguments, same numbers (cached or not)
    again = fix_mod.fix(model_dir, f, **KW).to_json()
    assert json.dumps(again["test"], sort_keys=True) == json.dumps(obj["test"], sort_keys=True)


def test_choice_rule_respects_the_edge_loss(run, model_dir):
    """With no loss allowed at the edges, only settings that do not lower the edges are
    eligible; with an unbounded one, every setting is."""
    f, res = run
    t = res["tuning"]["ms-poe"]
    net = dict(KW, remedies=fix_mod.NETWORK_REMEDIES, rule="middle")
    wide = fix_mod.fix(model_dir, f, edge_loss=1e9, **net)["tuning"]["ms-poe"]
    assert all(wide["eligible"])
    assert wide["chosen"] == int(np.argmax(wide["middle_gain"]))
    strict = fix_mod.fix(model_dir, f, edge_loss=0.0, **net)["tuning"]["ms-poe"]
    assert strict["eligible"] == [e >= 0 for e in t["edge_change"]]
    # the same tuning entries under either rule: the numbers the two rules read agree
    assert strict["middle_gain"] == t["middle_gain"] and strict["all_gain"] == t["all_gain"]


def test_no_winner_no_remedy_file_and_a_stale_one_removed(run, tmp_path):
    _, res = run
    out = tmp_path / "fix"
    out.mkdir()
    (out / "remedy.json").write_text("{}")
    res["winner"] = None
    paths = fix_mod.write_fix(res, out)
    assert set(paths) == {"json", "html"} and not (out / "remedy.json").exists()
    page = (out / "index.html").read_text()
    assert "No remedy holds on the test part" in page and "<img" in page
    assert "does not help" not in page  # only a verdict of fails may say so


def test_winner_round_trip_apply_and_restore(run, tmp_path, model_dir):
    """A winning remedy's file carries the chosen parameters; applied from the file it scores
    exactly as the remedy itself, and the model comes back bit for bit."""
    import torch

    from posbias_nb import models
    from posbias_nb.measure import entry
    from posbias_nb.measure.scoring import score_batch

    _, res = run
    res["winner"] = "ms-poe"  # whatever the test part says: the file's contract
    out = tmp_path / "fix"
    paths = fix_mod.write_fix(res, out)
    spec = remedy_file.read(paths["remedy"])
    assert spec["remedy"] == "ms-poe"
    assert spec["params"] == res["tuning"]["ms-poe"]["params"]
    assert spec["evidence"]["test"]["verdict"] == res["test"]["ms-poe"]["verdict"]
    m = entry.loaded(model_dir, weights="pretrained", seed=0)[0]
    before = {k: v.clone() for k, v in m.state_dict().items()}
    p, a = list(range(5, 60)), [7, 8]
    with models.remedy(m, paths["remedy"], start=len(p) - 1):
        via_file = score_batch(m, [p], [a])
    with models.remedy(m, "ms-poe", **spec["params"], start=len(p) - 1):
        direct = score_batch(m, [p], [a])
    plain = score_batch(m, [p], [a])
    assert via_file[0][0] == direct[0][0] and via_file[0][0] != plain[0][0]
    after = m.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    # refused on other weights: one line naming both digests
    torch.manual_seed(1)
    other = type(m)(m.config)
    with pytest.raises(ValueError, match="weights digest"):
        with models.remedy(other, paths["remedy"]):
            pass


@pytest.mark.parametrize("extra, words", [
    (["--examples", "3"], "examples must be"),
    (["--edge-loss", "-1"], "edge_loss must be"),
    (["--documents", "1"], "documents must be"),
    (["--examples", "9"], "test part of 6"),   # below MIN_TEST without --force
])
def test_command_refusals_one_line_exit_2_nothing_written(tmp_path, capsys, model_dir, extra,
                                                          words):
    f = _file(tmp_path, _qa_rows(30))
    out = tmp_path / "new" / "fix"
    argv = ["fix", "--model", model_dir, "--data", str(f), "--out", str(out), "--quick"] + extra
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("posbias: error:") and words in err[0], err
    assert not (tmp_path / "new").exists()


def test_command_writes_the_page(tmp_path, capsys, model_dir):
    f = _file(tmp_path, _qa_rows(30))
    out = tmp_path / "fix"
    argv = ["fix", "--model", model_dir, "--data", str(f), "--out", str(out), "--quick",
            "--documents", "4", "--examples", "8", "--quiet", "--force"]
    assert cli.main(argv) == 0
    assert (out / "index.html").exists() and (out / "fix.json").exists()
    obj = json.loads((out / "fix.json").read_text())
    assert (out / "remedy.json").exists() == (obj["winner"] is not None)
    err = capsys.readouterr().err
    assert "posbias: wrote" in err
    # the default rule carries one remedy and says what its test part can detect
    sel, pw = obj["selected"], obj["meta"]["power"]
    assert obj["meta"]["rule_name"] == "select-one" and pw == sel["power"]
    if pw is not None:
        assert f"{pw['detectable']:.2f} nats" in err and "would" in err
        assert f"{pw['detectable']:.2f} nats" in (out / "index.html").read_text()
    if sel["verdict"] != "holds":
        assert obj["winner"] is None and not (out / "remedy.json").exists()


@pytest.mark.slow
def test_report_runs_on_the_patched_model_and_refuses_another(tmp_path, capsys, model_dir):
    """posbias report --remedy-file: the trained profile measured under the remedy on the
    unpatched profile's windows (which it changes), the task scored under it, the structural
    section left out with its reason; a file made for other weights is refused in one line."""
    import torch
    from transformers import AutoModelForCausalLM

    from posbias_nb.measure import entry

    m = entry.loaded(model_dir, weights="pretrained", seed=0)[0]
    rf = remedy_file.write(tmp_path / "remedy.json", "ms-poe", {"lo": 1.2, "hi": 1.8}, m,
                           model_dir)
    out = tmp_path / "r"
    argv = ["report", "--model", model_dir, "--length", "128", "--quick", "--quiet",
            "--remedy-file", str(rf), "--out", str(out)]
    assert cli.main(argv) == 0
    capsys.readouterr()
    obj = json.loads((out / "report.json").read_text())
    assert obj["meta"]["remedy"]["remedy"] == "ms-poe"
    bt = obj["born_trained"]
    assert bt["unpatched"]["curve"]["mean"] != bt["trained"]["curve"]["mean"]
    assert obj["structural"]["available"] is False and "unpatched" in \
        obj["structural"]["reason"]
    assert "under the remedy ms-poe" in obj["summary"]
    assert 'id="remedy"' in (out / "index.html").read_text()
    # the same file on other weights of the same configuration: refused after loading
    torch.manual_seed(5)
    other = tmp_path / "other"
    AutoModelForCausalLM.from_config(m.config).save_pretrained(str(other))
    entry.forget()
    capsys.readouterr()  # the save's own progress bar
    bad = ["report", "--model", str(other), "--length", "128", "--quick", "--quiet",
           "--remedy-file", str(rf), "--out", str(tmp_path / "r2")]
    assert cli.main(bad) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("digest" in err[0] or "fingerprint" in err[0]), err
    assert not (tmp_path / "r2").exists()


@pytest.mark.parametrize("name, params", [("ms-poe", {"lo": 1.2, "hi": 1.8}),
                                          ("hidden-scaling", {"channel": 3, "scale": 0.0})])
def test_task_under_a_remedy_file_equals_full_passes_under_the_remedy(tmp_path, model_dir,
                                                                       name, params):
    """posbias task --remedy-file: every prompt's answer log p and greedy generation under the
    file's remedy equal an oracle of full passes under the same remedy from the prompt's last
    row on (no key-value cache), and differ from the unpatched run."""
    import torch

    from posbias_nb import models
    from posbias_nb.experiments.base.study import score_remedy
    from posbias_nb.measure import entry
    from posbias_nb.tasks.codec import Codec

    data = _file(tmp_path, _qa_rows(6))
    kw = dict(documents=3, examples=3, max_new_tokens=5)
    m = entry.loaded(model_dir, weights="pretrained", seed=0)[0]
    rf = remedy_file.write(tmp_path / "remedy.json", name, params, m, model_dir)
    base = task_mod.task_run(model_dir, data, **kw)
    got = task_mod.task_run(model_dir, data, remedy_file=rf, **kw)
    assert got.meta["remedy"]["name"] == name and "remedy" not in base.meta
    P = prompts_mod.prepare(data, 3, None, 3, None, 0)
    codec = Codec(None, m.get_input_embeddings().num_embeddings)
    recs = got["examples"]
    i = 0
    for it in P["items"]:
        texts = list(it["prompts"]) + [it[r] for r in ("closed_book", "oracle") if r in it]
        for t in texts:
            pid = study.encode(codec, t)
            ans = study.answer_ids(codec, it["answers"][0])
            lp, _ = score_remedy(m, [pid], [ans], name, [params], base=False)
            assert recs[i]["logprob"] == pytest.approx(float(lp[0, 0]), abs=1e-4)
            ids = list(pid)
            with torch.no_grad(), models.remedy(m, name, start=len(pid) - 1, **params):
                for _ in range(5):
                    nxt = int(m(torch.tensor([ids])).logits[0, -1].argmax())
                    ids.append(nxt)
                    if "\n" in codec.decode(ids[len(pid):]).lstrip():
                        break
            assert recs[i]["output"] == codec.decode(ids[len(pid):]), (i, t)
            i += 1
    assert i == len(recs)
    assert [r["logprob"] for r in recs] != [r["logprob"] for r in base["examples"]]


def test_task_remedy_file_refusals_one_line_exit_2(tmp_path, capsys, model_dir):
    """A remedy file made for other weights, or a malformed one, is refused by posbias task in
    one line, exit 2, before anything is written."""
    import torch
    from transformers import AutoModelForCausalLM

    from posbias_nb.measure import entry

    data = _file(tmp_path, _qa_rows(6))
    m = entry.loaded(model_dir, weights="pretrained", seed=0)[0]
    torch.manual_seed(7)
    other = tmp_path / "other"
    AutoModelForCausalLM.from_config(m.config).save_pretrained(str(other))
    rf = remedy_file.write(tmp_path / "remedy.json", "ms-poe", {"lo": 1.2, "hi": 1.8}, m,
                           model_dir)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    capsys.readouterr()
    for model, f, words in ((str(other), rf, "was chosen for"), (model_dir, bad, "bad.json")):
        out = tmp_path / "out.csv"
        argv = ["task", "--model", model, "--data", str(data), "--documents", "3",
                "--examples", "3", "--quiet", "--remedy-file", str(f), "--out", str(out)]
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("posbias") and words in err[0], err
        assert not out.exists()
    out = tmp_path / "ok.json"
    argv = ["task", "--model", model_dir, "--data", str(data), "--documents", "3", "--examples",
            "3", "--quiet", "--remedy-file", str(rf), "--format", "json", "--out", str(out)]
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert json.loads(out.read_text())["meta"]["remedy"]["name"] == "ms-poe"


