"""The code behind each recorded measurement is part of its identity (issue 44): the digest of a
namespace's normalised source, the sample ``make test`` measures anew (posbias_nb.provenance.plan),
and a fake namespace recorded under one version of its code and read under another."""
import ast
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from remeasure import as_make_test  # tests/, beside this file

from posbias_nb import cache
from posbias_nb.provenance import code, machine, plan, verify
from posbias_nb.provenance import record as rec

ROOT = Path(__file__).resolve().parents[3]


SRC = '''"""A fake measurement."""
import numpy as np

SEED = 0  # the probes' seed


def compute(n):
    """n numbers from the seed."""
    return {"x": np.random.default_rng(SEED).standard_normal(n)}
'''
# only a comment, a docstring and the layout differ
SRC_COMMENT = SRC.replace("# the probes' seed", "# a new comment").replace(
    '"""n numbers from the seed."""', '"""Other words."""\n').replace("(n)}", "(\n        n)}")
# the code changed and so do the numbers (issue 44's seed constant)
SRC_SEED = SRC.replace("SEED = 0", "SEED = 1")
# the code changed, the numbers did not
SRC_SAME = SRC.replace("standard_normal(n)", "standard_normal(size=n)")


def test_normalised_source_ignores_comments_docstrings_and_layout():
    n = code.normalised_source
    assert n(SRC) == n(SRC_COMMENT)
    assert n(SRC) != n(SRC_SEED) and n(SRC) != n(SRC_SAME)
    # a function whose body is only a docstring still parses
    assert "Pass" in n('def f():\n    """doc"""\n')


def _cached_namespaces():
    """Every namespace literal passed to cache.cached/load/store in the package."""
    found = {}
    for f in (ROOT / "posbias_nb").rglob("*.py"):
        tree = ast.parse(f.read_text())
        consts = {t.targets[0].id: t.value.value for t in ast.walk(tree)
                  if isinstance(t, ast.Assign) and len(t.targets) == 1
                  and isinstance(t.targets[0], ast.Name) and isinstance(t.value, ast.Constant)}
        for c in ast.walk(tree):
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) \
                    and c.func.attr in ("cached", "load", "store") \
                    and isinstance(c.func.value, ast.Name) and c.func.value.id in ("cache", "_cache") \
                    and c.args:
                a = c.args[0]
                ns = a.value if isinstance(a, ast.Constant) else consts[a.id]
                mod = ".".join(f.relative_to(ROOT / "posbias_nb").with_suffix("").parts)
                found.setdefault(ns, set()).add(mod)
    return found


def test_every_cached_namespace_declares_the_module_that_computes_it():
    found = _cached_namespaces()
    assert len(found) >= 20
    for ns, mods in found.items():
        assert ns in code.NAMESPACE_CODE, ns
        assert mods <= set(code.NAMESPACE_CODE[ns]), (ns, mods)
    # every recorded namespace is declared
    man = json.loads((ROOT / "recorded" / "MANIFEST.json").read_text())
    assert {k.split("/")[0] for k in man["entries"]} <= set(code.NAMESPACE_CODE)


def test_code_modules_follow_imports_not_presentation():
    mods = code.code_modules("profile")
    assert {"measure.cached", "measure.jacobian", "models.zoo", "tasks.text"} <= set(mods)
    assert not set(mods) & code.NOT_COMPUTING
    assert "experiments.prompt.realqa" not in mods  # measure does not import experiments
    assert "measure.jacobian" in code.code_modules("realqa-jacobian")
    with pytest.raises(ValueError, match="nope"):
        code.code_modules("nope")


def _pkg(src):
    return {"__init__.py": "", "fake.py": src}


@pytest.fixture
def fake_ns(monkeypatch):
    monkeypatch.setitem(code.NAMESPACE_CODE, "fake", ("fake",))
    return "fake"


def test_digest_of_a_fake_namespace(fake_ns):
    d = code.code_digest(fake_ns, _pkg(SRC))
    assert d == code.code_digest(fake_ns, _pkg(SRC_COMMENT))
    assert d != code.code_digest(fake_ns, _pkg(SRC_SEED))
    assert d != code.code_digest(fake_ns, _pkg(SRC_SAME))
    # a constant it reads in a module it imports counts; one it does not read, or one in a
    # module it does not import, does not (tests/unit/support/test_reach_digest.py: the rule)
    reads = SRC.replace("SEED = 0", "SEED = helper.K")
    with_helper = {"__init__.py": "", "fake.py": "from . import helper\n" + reads,
                   "helper.py": "K = 1\nJ = 5\n", "other.py": "K = 2\n"}
    d2 = code.code_digest(fake_ns, with_helper)
    assert d2 != code.code_digest(fake_ns, {**with_helper, "helper.py": "K = 3\nJ = 5\n"})
    assert d2 == code.code_digest(fake_ns, {**with_helper, "helper.py": "K = 1\nJ = 6\n"})
    assert d2 == code.code_digest(fake_ns, {**with_helper, "other.py": "K = 4\n"})


def _module(tmp_path, src, name):
    f = tmp_path / f"{name}.py"
    f.write_text(src)
    spec = importlib.util.spec_from_file_location(name, f)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _record_fake(tmp_path, monkeypatch, ns):
    """Record two entries of the fake namespace under SRC, with a manifest as make record
    writes it (the code digest of SRC, the seconds each took)."""
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "cold"))
    v1 = _module(tmp_path, SRC, "fake_v1")
    for n in (3, 5):
        cache.cached(ns, {"n": n}, lambda: v1.compute(n))
    entries = {f"{ns}/{cache.key(ns, {'n': n})}": {
        "recorded": "2026-12-03", "commit": "c", "bytes": 1, "compute_seconds": float(n),
        "code": code.code_digest(ns, _pkg(SRC)), "read": True} for n in (3, 5)}
    monkeypatch.setenv("POSBIAS_RECORDED_DIR", str(tmp_path / "cold"))
    return {"entries": entries}


def _sampled(tmp_path, monkeypatch, ns, manifest, src, name, budget=100.0, stamps=None):
    """make test's part: plan under ``src`` (with ``stamps``), then the chapter asks for both
    entries; the plan, the error raised (or None) and the run's cache events."""
    p = plan.verification_plan(manifest, {ns: code.code_digest(ns, _pkg(src))}, budget,
                               stamps=stamps)
    keys = tmp_path / f"keys-{name}.txt"
    keys.write_text("".join(k + "\n" for k in p["keys"]))
    log = tmp_path / f"log-{name}.jsonl"
    monkeypatch.setenv("POSBIAS_RECORDED_VERIFY_KEYS", str(keys))
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / f"live-{name}"))
    monkeypatch.setenv("POSBIAS_CACHE_LOG", str(log))
    mod = _module(tmp_path, src, f"fake_{name}")
    err = None
    try:
        for n in (3, 5):
            cache.cached(ns, {"n": n}, lambda: mod.compute(n))
    except verify.RecordedMismatch as e:
        err = e
    return p, err, [json.loads(x) for x in log.read_text().splitlines()]


def _run(tmp_path, monkeypatch, ns, manifest, src, name, budget=100.0):
    """make test's part: plan under ``src``, then the chapter asks for both entries."""
    p, err, events = _sampled(tmp_path, monkeypatch, ns, manifest, src, name, budget)
    return p, err, plan.verification_summary(p, events)


def test_the_guard_on_a_fake_namespace(tmp_path, monkeypatch, fake_ns):
    ns = fake_ns
    man = _record_fake(tmp_path, monkeypatch, ns)
    # only a comment changed: the cheapest entry is re-measured, agrees, the code is unchanged
    p, err, (lines, problems) = _run(tmp_path, monkeypatch, ns, man, SRC_COMMENT, "comment")
    assert err is None and not problems and not p["namespaces"][ns]["changed"]
    assert len(p["keys"]) == 1 and p["keys"][0] == f"{ns}/{cache.key(ns, {'n': 3})}"
    assert "1 re-measured" in lines[0] and "code unchanged" in lines[0]
    # the seed changed: the code changed, the sample grows within the budget, and disagrees
    p, err, (lines, problems) = _run(tmp_path, monkeypatch, ns, man, SRC_SEED, "seed")
    assert p["namespaces"][ns]["changed"] and len(p["keys"]) == 2
    assert err is not None
    msg = str(err)
    assert f"namespace {ns!r}" in msg and cache.key(ns, {"n": 3}) in msg
    assert "differs by" in msg and f"make record-new REMEASURE={ns}" in msg
    assert problems and f"REMEASURE={ns}" in problems[0]
    # the code changed, its numbers did not: passes and says so
    p, err, (lines, problems) = _run(tmp_path, monkeypatch, ns, man, SRC_SAME, "same")
    assert err is None and not problems
    assert "2 re-measured" in lines[0] and "changed since recording, and its sample agrees" in lines[0]
    # a budget that holds only the cheapest entry takes only it
    p, *_ = _run(tmp_path, monkeypatch, ns, man, SRC_SAME, "tight", budget=4.0)
    assert p["keys"] == [f"{ns}/{cache.key(ns, {'n': 3})}"]


def test_a_chosen_entry_no_chapter_asks_for_fails_the_summary():
    p = {"namespaces": {"a": {"entries": 2, "changed": False, "chosen": ["k" * 64]}}}
    lines, problems = plan.verification_summary(p, [{"ns": "a", "event": "recorded", "key": "j" * 16}])
    assert "0 re-measured" in lines[0] and "asked for by no chapter" in problems[0]


def test_plan_rules():
    d = {"a": "A", "b": "B"}
    man = {"entries": {
        "a/1": {"compute_seconds": 5.0, "code": "A"}, "a/2": {"compute_seconds": 1.0, "code": "A"},
        "a/3": {"compute_seconds": 0.5, "code": "A", "read": False},   # not read by make test
        "b/1": {"compute_seconds": 0.0, "code": "old"}, "b/2": {"compute_seconds": 0.0},
    }}
    p = plan.verification_plan(man, d, budget=100)
    assert p["namespaces"]["a"]["chosen"] == ["2"]          # unchanged: the cheapest read one
    assert p["namespaces"]["b"]["chosen"] == ["1"] and p["namespaces"]["b"]["unknown_cost"]
    assert p["namespaces"]["b"]["changed"]
    with pytest.raises(ValueError, match="declare no code"):
        plan.verification_plan({"entries": {"z/1": {"compute_seconds": 1.0}}}, d, 10)
    with pytest.raises(ValueError, match="-1"):
        plan.verification_plan(man, d, -1)


def test_verify_keys_file_is_checked(tmp_path, monkeypatch):
    f = tmp_path / "k.txt"
    f.write_text("no-slash-here\n")
    monkeypatch.setenv("POSBIAS_RECORDED_VERIFY_KEYS", str(f))
    with pytest.raises(ValueError, match="no-slash-here"):
        cache.verify_keys()


def test_backfill_reads_the_code_at_each_entry_commit(monkeypatch, fake_ns):
    srcs = {"c1": _pkg(SRC), "c2": _pkg(SRC_SEED)}
    monkeypatch.setattr(rec, "files_at", lambda c: srcs[c])
    entries = {"fake/k1": {"commit": "c1"}, "fake/k2": {"commit": "c2"},
               "fake/k3": {"commit": "c2", "code": "kept"}}
    assert rec.backfill_code(entries) == 2
    assert entries["fake/k1"]["code"] == code.code_digest("fake", _pkg(SRC))
    assert entries["fake/k2"]["code"] == code.code_digest("fake", _pkg(SRC_SEED))
    assert entries["fake/k3"]["code"] == "kept"


def test_machine_fields_are_present_but_not_compared():
    """Wall seconds and peak memory measure the machine: a re-measurement that differs only
    there agrees; one that lacks them, or differs in a computed number, does not."""
    rec = {"hidden-scaling#seconds": np.array(1.94), "hidden-scaling#peak_mib": np.array(65.2),
           "hidden-scaling#logp": np.array([-1.0, -2.0])}
    fresh = dict(rec, **{"hidden-scaling#seconds": np.array(3.9),
                         "hidden-scaling#peak_mib": np.array(26.4)})
    assert verify.agree(rec, fresh) == []
    moved = dict(fresh, **{"hidden-scaling#logp": np.array([-1.0, -2.5])})
    assert any("logp" in d for d in verify.agree(rec, moved))
    lacking = {k: v for k, v in fresh.items() if not k.endswith("seconds")}
    assert verify.agree(rec, lacking)


def test_json_entries_are_compared_field_by_field():
    import json

    doc = {"meta": {"seconds": 12.0, "n": 3}, "curve": [1.0, 2.0], "verdict": "holds"}
    same = dict(doc, meta={"seconds": 99.0, "n": 3}, curve=[1.0000001, 2.0])
    a = {"json": np.array(json.dumps(doc))}
    assert verify.agree(a, {"json": np.array(json.dumps(same))}) == []
    for bad, what in ((dict(doc, verdict="fails"), "verdict"),
                      (dict(doc, curve=[1.0, 2.1]), "curve[1]"),
                      (dict(doc, meta={"seconds": 12.0, "n": 4}), "meta/n"),
                      (dict(doc, extra=1), "extra")):
        diffs = verify.agree(a, {"json": np.array(json.dumps(bad))})
        assert diffs and what in " ".join(diffs), (what, diffs)


def test_a_json_list_of_numbers_is_compared_as_one_array():
    """An interval's bound near zero is the difference of two larger numbers and keeps their
    rounding: within rtol of the list's largest magnitude it agrees (it failed make test on an
    Intel Xeon against an AMD EPYC's record, 8.19e-05 against 8.20e-05); a move of the list's
    large values, or NaNs moved, still fail, naming the item."""
    import json

    def cmp(x, y):
        return verify.agree({"json": np.array(json.dumps({"low": x}))},
                           {"json": np.array(json.dumps({"low": y}))})

    assert cmp([0.05, 8.19280414940237e-05], [0.05, 8.201447459399783e-05]) == []
    assert verify.agree({"j": np.array(json.dumps({"v": 8.19280414940237e-05}))},
                       {"j": np.array(json.dumps({"v": 8.201447459399783e-05}))})  # alone: itself
    diffs = cmp([0.05, 1e-4], [0.0502, 1e-4])
    assert diffs and "low[0]" in diffs[0], diffs
    assert "NaNs" in cmp([0.05, float("nan")], [0.05, 1e-4])[0]


def test_a_rounding_amplified_namespace_is_re_measured_only_on_its_cpu():
    """Training amplifies float rounding: on another CPU than the one that recorded it, the same
    code gives other numbers, so the plan takes none of its entries there, and says why; on the
    recording CPU it takes the cheapest as everywhere; other namespaces ignore the CPU."""
    ns = next(iter(machine.ROUNDING_AMPLIFIED))
    d = {ns: "A", "other": "B"}
    man = {"entries": {
        f"{ns}/1": {"compute_seconds": 5.0, "code": "A", "machine": {"cpu": "AMD EPYC"}},
        f"{ns}/2": {"compute_seconds": 9.0, "code": "A", "machine": {"cpu": "Intel Xeon"}},
        "other/1": {"compute_seconds": 1.0, "code": "B", "machine": {"cpu": "AMD EPYC"}}}}
    assert plan.verification_plan(man, d, 100, cpu="AMD EPYC")["namespaces"][ns]["chosen"] == ["1"]
    assert plan.verification_plan(man, d, 100, cpu="Intel Xeon")["namespaces"][ns]["chosen"] == ["2"]
    p = plan.verification_plan(man, d, 100, cpu="ARM Neoverse")
    assert p["namespaces"][ns]["chosen"] == [] and "ARM Neoverse" in p["namespaces"][ns]["skipped"]
    assert p["namespaces"]["other"]["chosen"] == ["1"] and "skipped" not in p["namespaces"]["other"]
    assert plan.verification_plan(man, d, 100)["namespaces"][ns]["chosen"] == ["1"]  # no cpu given
    lines, problems = plan.verification_summary(p, [])
    assert any("not re-measured" in x and "ARM Neoverse" in x for x in lines)
    assert not any(x.startswith(ns + ":") for x in problems)


def test_a_rounding_amplified_entry_is_compared_with_this_cpus_reference(tmp_path, monkeypatch,
                                                                         fake_ns):
    """On a CPU other than the recording one, an entry of a rounding-amplified namespace that
    holds a reference made here by the recording's code is re-measured against that reference
    (not the record, which this CPU cannot reproduce): today's code that gives the reference's
    numbers passes and the chapter gets the recorded numbers; a changed seed fails, naming the
    namespace, the key and the reference; without a reference the plan skips it and says how
    to make one."""
    ns = fake_ns
    monkeypatch.setitem(machine.ROUNDING_AMPLIFIED, ns, "it amplifies rounding")
    monkeypatch.setattr(machine, "cpu_model", lambda: "Test CPU")
    v1 = _module(tmp_path, SRC, "fake_ref_v1")
    rec_dir = tmp_path / "rec" / "cache"
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(rec_dir))
    # the recording CPU's numbers: the same code, other rounding (here: shifted)
    cache.cached(ns, {"n": 4}, lambda: {"x": v1.compute(4)["x"] + 0.5})
    k = cache.key(ns, {"n": 4})
    man = {"entries": {f"{ns}/{k}": {"compute_seconds": 2.0, "code": code.code_digest(ns, _pkg(SRC)),
                                     "commit": "c", "machine": {"cpu": "AMD EPYC"}}}}
    monkeypatch.setenv("POSBIAS_RECORDED_DIR", str(rec_dir))
    d = {ns: code.code_digest(ns, _pkg(SRC_COMMENT))}
    p = plan.verification_plan(man, d, 100, cpu="Test CPU")
    assert p["keys"] == [] and "make cpu-reference" in p["namespaces"][ns]["skipped"]
    assert cache.references_dir() == tmp_path / "rec" / "by-cpu"
    # the reference: the recording's code run on this machine, listed in REFERENCES.json
    rel = Path(machine.machine_slug(machine.machine_id())) / ns / f"{k}.npz"
    cache.write_entry(cache.references_dir() / rel, v1.compute(4))
    (tmp_path / "rec" / "MANIFEST.json").write_text(json.dumps(man))
    index = {"entries": {f"{ns}/{k}": {machine.machine_id(): {"commit": "c", "file": str(rel),
                                                             "code": man["entries"][f"{ns}/{k}"]["code"]}}}}
    (cache.references_dir() / "REFERENCES.json").write_text(json.dumps(index))
    assert machine.machine_id().startswith("Test CPU (")
    p = plan.verification_plan(man, d, 100, cpu="Test CPU", references={f"{ns}/{k}"})
    assert p["keys"] == [f"{ns}/{k}"] and "skipped" not in p["namespaces"][ns]
    keys = tmp_path / "keys.txt"
    keys.write_text(p["keys"][0] + "\n")
    monkeypatch.setenv("POSBIAS_RECORDED_VERIFY_KEYS", str(keys))

    def run(src, name):
        monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / f"live-{name}"))
        log = tmp_path / f"log-{name}.jsonl"
        monkeypatch.setenv("POSBIAS_CACHE_LOG", str(log))
        mod = _module(tmp_path, src, f"fake_ref_{name}")
        try:
            out, err = cache.cached(ns, {"n": 4}, lambda: mod.compute(4)), None
        except verify.RecordedMismatch as e:
            out, err = None, e
        events = [json.loads(x) for x in log.read_text().splitlines()]
        return out, err, plan.verification_summary(p, events)

    out, err, (lines, problems) = run(SRC_COMMENT, "comment")
    assert err is None and not problems
    np.testing.assert_array_equal(out["x"], v1.compute(4)["x"] + 0.5)  # the recorded numbers
    assert "1 re-measured" in lines[0] and "against the CPU reference of Test CPU" in lines[0]
    # the live cache holds the recorded entry, so what depends on it is what the book prints
    np.testing.assert_array_equal(cache.load(ns, {"n": 4})["x"], out["x"])
    out, err, (lines, problems) = run(SRC_SEED, "seed")
    assert err is not None and "this CPU's reference" in str(err) and k in str(err)
    assert f"REMEASURE={ns}" in str(err) and "make cpu-reference" in str(err) and problems
    # re-recorded since, on this very CPU: the leftover reference is stale and not read; the
    # entry is compared with its record (here it fails: the record holds the other numbers)
    man["entries"][f"{ns}/{k}"].update(commit="c2", machine={"cpu": "Test CPU"})
    (tmp_path / "rec" / "MANIFEST.json").write_text(json.dumps(man))
    out, err, (lines, problems) = run(SRC_COMMENT, "rerecorded")
    assert err is not None and "this CPU's reference" not in str(err)
    assert "against the CPU reference" not in " ".join(lines)
    # make record drops it
    dropped = machine.prune_references(tmp_path / "rec", man)
    assert len(dropped) == 1 and "stale" in dropped[0]
    assert machine.reference_index(cache.references_dir())["entries"] == {}
    assert not (cache.references_dir() / rel).exists()


def test_reference_holds_only_for_the_recording_it_was_made_for():
    entry = {"commit": "c", "code": "d", "machine": {"cpu": "AMD EPYC"}}
    ref = {"commit": "c", "code": "d"}
    assert machine.reference_holds(entry, ref, "Intel Xeon") is None
    assert machine.reference_holds(entry, ref, "AMD EPYC") == "recorded on this CPU"
    assert "stale" in machine.reference_holds(dict(entry, commit="e"), ref, "Intel Xeon")
    assert "stale" in machine.reference_holds(dict(entry, code="x"), ref, "Intel Xeon")
    assert machine.reference_holds(None, ref, "Intel Xeon") == "no such recorded entry"
    assert machine.reference_holds(entry, None, "Intel Xeon") == "no reference for this machine"


def test_cpu_reference_finds_the_training_call_of_a_key_and_refuses_what_it_cannot_make(
        tmp_path, capsys):
    from posbias_nb.experiments.remedy import lab as r
    from posbias_nb import provenance_cli as cli
    from posbias_nb.provenance import reference

    kw = dict(r.CHAPTER, **r.ARMS["weighted"], seed=4)
    assert reference.find_arguments(cli.FINDERS, "train", cli.train_key(kw)) == kw
    with pytest.raises(ValueError, match="no call of the chapters"):
        reference.find_arguments(cli.FINDERS, "train", "0" * 64)
    with pytest.raises(ValueError, match="no CPU reference can be made"):
        reference.find_arguments(cli.FINDERS, "replay", "0" * 64)
    (tmp_path / "MANIFEST.json").write_text(json.dumps({"entries": {
        "replay/" + "a" * 64: {"commit": "c", "code": "d", "machine": {"cpu": "AMD EPYC"}}}}))
    assert cli.cpu_reference(["--recorded", str(tmp_path), "--key", "replay/" + "a" * 64]) == 2
    assert "does not amplify rounding" in capsys.readouterr().err
    assert cli.cpu_reference(["--recorded", str(tmp_path), "--key", "train/" + "b" * 64]) == 2
    assert "not a recorded entry" in capsys.readouterr().err


def test_seconds_come_from_the_computation_not_the_verification():
    entries = {"a/0123456789abcdef00": {"compute_seconds": 0.0},
               "b/fedcba987654321000": {"compute_seconds": 0.0},
               "c/aaaaaaaaaaaaaaaa00": {"compute_seconds": 7.0}}
    events = [{"event": "computed", "ns": "a", "key": "0123456789abcdef", "seconds": 12.5},
              {"event": "verified", "ns": "a", "key": "0123456789abcdef", "seconds": 0.0},
              # computed but not a re-measurement of a recorded entry: no seconds given
              {"event": "computed", "ns": "b", "key": "fedcba9876543210", "seconds": 3.0},
              {"event": "computed", "ns": "c", "key": "aaaaaaaaaaaaaaaa", "seconds": 9.0},
              {"event": "verified", "ns": "c", "key": "aaaaaaaaaaaaaaaa", "seconds": 0.0}]
    assert rec.fill_seconds(entries, events, "2026-12-04", {"cpus": 2}) == 1
    assert entries["a/0123456789abcdef00"]["compute_seconds"] == 12.5
    assert entries["a/0123456789abcdef00"]["seconds_machine"] == {"cpus": 2}
    assert entries["b/fedcba987654321000"]["compute_seconds"] == 0.0
    assert entries["c/aaaaaaaaaaaaaaaa00"]["compute_seconds"] == 7.0   # measured: kept


def test_an_entry_stored_outside_cached_logs_its_seconds(tmp_path, monkeypatch):
    """capture-* and report store their entries themselves (several from one loaded model): the
    seconds they pass become the entry's ``computed`` event, which make record writes as its
    cost; without them nothing claims a cost."""
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("POSBIAS_CACHE_LOG", str(log))
    cache.store("fake-a", {"n": 1}, {"x": np.zeros(2)}, seconds=2.5)
    cache.store("fake-b", {"n": 1}, {"x": np.zeros(2)})
    ev = [json.loads(x) for x in log.read_text().splitlines()]
    assert [(e["event"], e["ns"], e["seconds"]) for e in ev] == [("computed", "fake-a", 2.5)]
    assert ev[0]["key"] == cache.key("fake-a", {"n": 1})[:16]


def _parts_run(tmp_path, monkeypatch, rows, name, suffix=""):
    """A fake entry of 5 independent parts (part i = rows(i)), recorded whole, then re-measured
    by parts (``suffix`` ":1": by one part): returns (the error or None, the parts computed,
    the events)."""
    ns = "fake-parts"
    params = {"n": 5}
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "rec"))
    good = lambda i: {"x": np.arange(3.0) + i}  # noqa: E731
    whole = lambda: {"x": np.stack([good(i)["x"] for i in range(5)])}  # noqa: E731
    take = lambda a, i: {"x": a["x"][i]}  # noqa: E731
    if not (tmp_path / "rec" / ns).exists():
        cache.cached(ns, params, whole)
    log = as_make_test(monkeypatch, tmp_path, tmp_path / "rec",
                       [f"{ns}/{cache.key(ns, params)}{suffix}"], name)
    asked = []

    def one(i):
        asked.append(i)
        return rows(i)

    err = None
    try:
        got = cache.cached(ns, params, whole, parts=cache.Parts(5, one, take))
        assert np.array_equal(got["x"], whole()["x"])  # the recorded whole, returned
    except verify.RecordedMismatch as e:
        err = e
    return err, asked, [json.loads(x) for x in log.read_text().splitlines()]


def test_an_entry_of_parts_is_re_measured_by_a_sample_of_its_parts(tmp_path, monkeypatch):
    """cache.Parts: a sampled entry computes VERIFY_PARTS of its parts (the first and one the
    code digest chooses), compares each with its part of the recorded whole, logs their seconds
    as computed-part (never as the entry's own cost) and returns the recorded whole; a part
    that differs fails, naming the part and the command that re-records."""
    monkeypatch.setitem(code.NAMESPACE_CODE, "fake-parts", ("experiments.prompt.user_task",))
    err, asked, ev = _parts_run(tmp_path, monkeypatch, lambda i: {"x": np.arange(3.0) + i}, "ok")
    assert err is None and asked == verify.part_sample("fake-parts", cache.key(
        "fake-parts", {"n": 5}), 5) and len(asked) == verify.VERIFY_PARTS and asked[0] == 0
    assert [e["event"] for e in ev].count("computed-part") == 2
    assert "computed" not in [e["event"] for e in ev]
    (v,) = [e for e in ev if e["event"] == "verified"]
    assert v["parts"] == 5 and v["sampled"] == 2
    lines, problems = plan.verification_summary(
        {"namespaces": {"fake-parts": {"entries": 1, "changed": False,
                                       "chosen": [cache.key("fake-parts", {"n": 5})]}}}, ev)
    assert not problems and "by parts: 2 of 5" in lines[0]
    # the counterexample: the second sampled part computes other numbers
    bad = asked[1]
    err, _, ev = _parts_run(tmp_path, monkeypatch,
                            lambda i: {"x": np.arange(3.0) + i + (i == bad)}, "bad")
    assert err is not None and f"part {bad} of 5" in str(err)
    assert "make record-new REMEASURE=fake-parts" in str(err)
    assert [e["event"] for e in ev][-1] == "mismatch"
    with pytest.raises(ValueError, match="0 parts"):
        verify.part_sample("fake-parts", "k", 0)
    # a verified namespace's line (":1"): one part, the one one_part names; it still fails
    err, asked, ev = _parts_run(tmp_path, monkeypatch, lambda i: {"x": np.arange(3.0) + i}, "one",
                                ":1")
    assert err is None and asked == verify.one_part("fake-parts", cache.key(
        "fake-parts", {"n": 5}), 5) and len(asked) == 1
    err, _, _ = _parts_run(tmp_path, monkeypatch,
                           lambda i: {"x": np.arange(3.0) + i + (i == asked[0])}, "one-bad", ":1")
    assert err is not None and f"part {asked[0]} of 5" in str(err)


def _task_like(count_examples=4, slots=5, several=(2,)):
    """The parts of a fake task entry, one a prompt as task_run makes them: every example at
    every gold slot, then closed-book and oracle; only the examples in ``several`` have a gold
    answer of several tokens.  Returns (rows, kinds)."""
    rows = [(e, j) for e in range(count_examples)
            for j in [*range(slots), "closed_book", "oracle"]]
    kinds = [{"slot": j, "several tokens": e in several} for e, j in rows]
    return rows, kinds


def test_a_sample_by_parts_covers_every_declared_kind():
    """issue 56: a sample taken by parts exercises what its namespace computes.  A task entry of
    28 prompts where only the 7 prompts of one example have an answer of several tokens: the
    first part and the digest's choice alone (2 of 28) may miss them all and most slots; with
    the kinds declared (cache.Parts.kinds) the sample holds a part of every slot, the
    closed-book and oracle prompts, and a part with an answer of several tokens and one
    without, and stays small (at most one part a value) and the same for the same code."""
    rows, kinds = _task_like()
    k = "0" * 64
    plain = verify.part_sample("task", k, len(rows))
    assert len(plain) == verify.VERIFY_PARTS == 2
    got = verify.part_sample("task", k, len(rows), kinds)
    assert got[:2] == plain and len(set(got)) == len(got)
    assert {kinds[i]["slot"] for i in got} == {0, 1, 2, 3, 4, "closed_book", "oracle"}
    assert {kinds[i]["several tokens"] for i in got} == {True, False}
    assert len(got) <= 7 + 2
    assert got == verify.part_sample("task", k, len(rows), kinds)  # the same code: the same
    # one kind everywhere: nothing more than the two; numpy values count as their Python value
    assert verify.part_sample("task", k, 28, [{"slot": np.int64(0)}] * 28) == plain
    with pytest.raises(ValueError, match="3 kinds"):
        verify.part_sample("task", k, 28, kinds[:3])


def test_the_kinds_of_parts_come_from_the_record_and_the_declaration():
    """part_kinds: a part's slot is read from its slice of the record (verify.PART_FIELDS: a
    task's prompts, the calibration's records), what the record cannot tell is declared
    (cache.Parts.kinds); an entry whose parts say nothing is sampled as before."""
    rec = {"slot": np.array([0, 1, 2, -1, 0, 1, 2, -1]), "x": np.arange(8.0)}
    take = lambda a, i: {n: a[n][i] for n in a}  # noqa: E731
    plain = cache.Parts(8, None, take)
    assert verify.part_kinds(rec, plain) == [{"slot": s} for s in [0, 1, 2, -1] * 2]
    declared = cache.Parts(8, None, take, lambda: [{"several tokens": i >= 6} for i in range(8)])
    assert verify.part_kinds(rec, declared)[6] == {"slot": 2, "several tokens": True}
    rows = cache.Parts(2, None, lambda a, i: {"row": a["row"][i]})
    assert verify.part_kinds({"row": np.ones((2, 3))}, rows) is None  # nothing tells them apart
    got = verify.part_sample("task", "0" * 64, 8, verify.part_kinds(rec, declared))
    assert {int(rec["slot"][i]) for i in got} == {0, 1, 2, -1} and max(got) >= 6


def test_a_change_that_moves_only_answers_of_several_tokens_is_caught(tmp_path, monkeypatch):
    """The change that failed three chapters but passed make test's sample of the task entry:
    an answer's log p as the mean of its tokens' log p instead of their sum, which moves only
    the prompts whose gold answer takes several tokens.  Recorded under the sum, re-measured
    under the mean: with the kinds declared the sample meets such a prompt and fails, naming
    it; the old sample (the first part and the digest's choice) agreed with it."""
    ns = "fake-answers"
    monkeypatch.setitem(code.NAMESPACE_CODE, ns, ("experiments.prompt.user_task",))
    params = {"n": 28}
    k = cache.key(ns, params)
    count = 28
    plain = verify.part_sample(ns, k, count)
    # one example's prompts have a gold answer of three tokens, and the old sample holds none
    several = next(e for e in range(4) if not {plain[0] // 7, plain[1] // 7} & {e})
    rows, kinds = _task_like(several=(several,))
    token_logps = [np.log([0.5, 0.25, 0.125]) - 0.01 * i if e == several
                   else np.log([0.5]) - 0.01 * i for i, (e, _) in enumerate(rows)]

    def scorer(reduce):  # the record holds the log p alone: what sets parts apart is declared
        return lambda i: {"logprob": np.array(float(reduce(token_logps[i])))}

    def whole(reduce):
        return {"logprob": np.stack([scorer(reduce)(i)["logprob"] for i in range(count)])}

    take = lambda a, i: {n: a[n][i] for n in a}  # noqa: E731
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "rec"))
    cache.cached(ns, params, lambda: whole(np.sum))   # recorded under the sum

    def remeasure(name, declared):
        log = as_make_test(monkeypatch, tmp_path, tmp_path / "rec", [f"{ns}/{k}"], name)
        parts = cache.Parts(count, scorer(np.mean), take, (lambda: kinds) if declared else None)
        try:
            cache.cached(ns, params, lambda: whole(np.mean), parts=parts)
        except verify.RecordedMismatch as e:
            return e, [json.loads(x) for x in log.read_text().splitlines()]
        return None, [json.loads(x) for x in log.read_text().splitlines()]

    err, ev = remeasure("old-rule", declared=False)
    assert err is None  # the old sample of two agreed with the changed code
    assert [e["part"] for e in ev if e["event"] == "computed-part"] == plain
    err, ev = remeasure("kinds", declared=True)
    assert err is not None and "logprob" in str(err)
    bad = int(str(err).split(", part ")[1].split()[0])
    assert rows[bad][0] == several  # the part it names has an answer of several tokens
    assert ev[-1]["event"] == "mismatch" and ev[-1]["parts"] == count


def test_a_cost_never_measured_is_null_not_zero(tmp_path):
    """record_measurements --backfill-code: an entry recorded with 0 s that no run re-measured
    alone reads null with the reason (not 0: it was not free); one that a run re-measured gets
    that run's seconds; the plan treats null as unknown, never as the cheapest."""
    man = {"namespaces": {"a": {}}, "entries": {
        "a/0123456789abcdef00": {"compute_seconds": 0.0, "code": "x", "machine": {"cpus": 2},
                                 "read": True},
        "a/fedcba987654321000": {"compute_seconds": 0.0, "code": "x", "machine": {"cpus": 2},
                                 "read": True},
        "a/aaaaaaaaaaaaaaaa00": {"compute_seconds": 7.0, "code": "x", "machine": {"cpus": 2},
                                 "read": True}}}
    (tmp_path / "MANIFEST.json").write_text(json.dumps(man))
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in [
        {"event": "computed", "ns": "a", "key": "0123456789abcdef", "seconds": 12.5},
        {"event": "verified", "ns": "a", "key": "0123456789abcdef", "seconds": 0.0}]))
    assert rec.main(["--cache", str(tmp_path), "--out", str(tmp_path), "--backfill-code",
                     "--log", str(log)]) == 0
    got = json.loads((tmp_path / "MANIFEST.json").read_text())
    e = got["entries"]
    assert e["a/0123456789abcdef00"]["compute_seconds"] == 12.5
    assert "seconds_note" not in e["a/0123456789abcdef00"]
    assert e["a/fedcba987654321000"]["compute_seconds"] is None
    assert "not measured" in e["a/fedcba987654321000"]["seconds_note"]
    assert got["namespaces"]["a"]["compute_seconds"] == 19.5
    p = plan.verification_plan(got, {"a": "x"})
    assert p["keys"] == ["a/aaaaaaaaaaaaaaaa00"]  # the cheapest measured, not the unknown one


def test_a_cpu_name_alone_does_not_make_an_entry_recorded_on_this_machine():
    """Two generations of "AMD EPYC" trained the same entry to numbers 0.007 apart: an entry that
    records only its CPU's name is not "recorded here" on a machine that gives its full id (CPU,
    generation, instruction set), so a rounding-amplified namespace needs this machine's
    reference there; an entry that records the full id matches it."""
    ns = next(iter(machine.ROUNDING_AMPLIFIED))
    here = "AMD EPYC (25/17/1) / AVX512"
    legacy = {"compute_seconds": 5.0, "code": "A", "commit": "c", "machine": {"cpu": "AMD EPYC"}}
    full = {"compute_seconds": 5.0, "code": "A", "commit": "c",
            "machine": {"cpu": "AMD EPYC", "id": here}}
    assert machine.recorded_machine(legacy) == "AMD EPYC" and machine.recorded_machine(full) == here
    d = {ns: "A"}
    p = plan.verification_plan({"entries": {f"{ns}/1": legacy}}, d, 100, cpu=here)
    assert p["namespaces"][ns]["chosen"] == [] and "skipped" in p["namespaces"][ns]
    p = plan.verification_plan({"entries": {f"{ns}/1": legacy}}, d, 100, cpu=here,
                                references={f"{ns}/1"})
    assert p["namespaces"][ns]["chosen"] == ["1"]
    assert plan.verification_plan({"entries": {f"{ns}/1": full}}, d, 100,
                                   cpu=here)["namespaces"][ns]["chosen"] == ["1"]
    ref = {"commit": "c", "code": "A"}
    assert machine.reference_holds(legacy, ref, here) is None  # the reference stands for it here
    assert machine.reference_holds(full, ref, here) == "recorded on this CPU"


# --------------------------------------------------------------------------------------------
# Issue 63: verification stamps, and a sample that reaches every setting

from posbias_nb.provenance import stamps as stamps_mod  # noqa: E402


def _stamp_run(tmp_path, monkeypatch, ns, man, src, name, stamps=None, budget=100.0):
    """As _run, with the stamps the plan reads; returns the plan, the error, the summary and
    the stamps the run earned."""
    p, err, events = _sampled(tmp_path, monkeypatch, ns, man, src, name, budget, stamps)
    earned = stamps_mod.new_stamps(p, events, man, {ns: code.code_digest(ns, _pkg(src))},
                                   "Test CPU", "2026-12-05", "c0ffee")
    return p, err, plan.verification_summary(p, events), earned


def test_a_stamp_remembers_a_sample_and_a_change_after_it_fails_by_name(tmp_path, monkeypatch,
                                                                       fake_ns):
    ns = fake_ns
    man = _record_fake(tmp_path, monkeypatch, ns)
    # the code changed, its numbers did not: sampled in full, agrees, and earns a stamp
    p, err, (lines, problems), earned = _stamp_run(tmp_path, monkeypatch, ns, man, SRC_SAME, "s1")
    assert err is None and not problems and len(p["keys"]) == 2
    st = earned[ns]
    assert st["code"] == code.code_digest(ns, _pkg(SRC_SAME))
    assert st["manifest"] == stamps_mod.manifest_digest(man, ns)
    assert sorted(st["entries"]) == sorted(k.split("/")[1][:16] for k in p["keys"])
    assert st["machine"] == "Test CPU" and st["commit"] == "c0ffee"
    # the next run under the same code: vouched for, only the cheapest entry, and it says which
    # stamp vouches; it earns no second stamp
    p, err, (lines, problems), earned = _stamp_run(tmp_path, monkeypatch, ns, man, SRC_SAME, "s2",
                                                   stamps={ns: st})
    assert p["keys"] == [f"{ns}/{cache.key(ns, {'n': 3})}"] and p["namespaces"][ns]["vouched"]
    assert err is None and not problems and not earned
    assert "verified under today's code by the stamp of 2026-12-05" in lines[0]
    # sabotage after the stamp: the code changes again and moves the numbers; the stamp no
    # longer vouches, the namespace is sampled in full and fails by name
    p, err, (lines, problems), earned = _stamp_run(tmp_path, monkeypatch, ns, man, SRC_SEED, "s3",
                                                   stamps={ns: st})
    assert "vouched" not in p["namespaces"][ns] and len(p["keys"]) == 2
    assert err is not None and f"namespace {ns!r}" in str(err)
    assert problems and f"REMEASURE={ns}" in problems[0] and not earned


def test_a_stamp_that_cannot_vouch_is_refused():
    man = {"entries": {"a/1": {"commit": "c", "bytes": 1, "code": "A"}}}
    good = {"code": "B", "manifest": stamps_mod.manifest_digest(man, "a"), "commit": "c",
            "date": "2026-12-05"}
    assert stamps_mod.problems({"a": good}, man, lambda c: True) == []
    # the recorded entries moved since the stamp
    man2 = {"entries": {"a/1": {"commit": "d", "bytes": 1, "code": "A"}}}
    (line,) = stamps_mod.problems({"a": good}, man2, lambda c: True)
    assert "stamp of 'a'" in line and "manifest digest" in line
    # another branch's commit
    (line,) = stamps_mod.problems({"a": good}, man, lambda c: False)
    assert "not in this checkout's history" in line
    (line,) = stamps_mod.problems({"z": good}, man, lambda c: True)
    assert "no such namespace" in line
    # a stamp under other code vouches for nothing
    assert stamps_mod.vouching({"a": good}, {"a": "A"}) == {}
    assert stamps_mod.vouching({"a": good}, {"a": "B"}) == {"a": good}


def test_plan_refuses_a_stamp_from_another_branch(tmp_path, capsys):
    ns = "replay"
    man = {"digest_rule": code.DIGEST_RULE,
           "entries": {f"{ns}/{'1' * 64}": {"commit": "c", "bytes": 1, "code": "A",
                                             "compute_seconds": 1.0, "read": True}}}
    (tmp_path / "MANIFEST.json").write_text(json.dumps(man))
    stamps_mod.write(tmp_path, {ns: {"code": "A", "manifest": stamps_mod.manifest_digest(man, ns),
                                     "commit": "0" * 40, "date": "2026-12-05"}})
    out = tmp_path / "plan.json"
    rc = plan.main(["plan", "--recorded", str(tmp_path), "--out", str(out),
                    "--keys", str(tmp_path / "keys.txt")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "stamp of 'replay'" in err[0]
    assert "another branch" in err[0] and not out.exists()


RANKED = '''"""A fake measurement with two rankers, each its own code path."""
import numpy as np


def bm25(x):
    return np.sort(x)


def curve(x):
    return np.sort(x)[::-1]


def compute(n, ranker):
    x = np.random.default_rng(0).standard_normal(n)
    return {"x": {"bm25": bm25, "curve": curve}[ranker](x)}
'''
# one ranker's code changed (its numbers move); the other ranker's did not
RANKED_CURVE = RANKED.replace("np.sort(x)[::-1]", "np.sort(x)[::-1] * 1.5")


def test_entry_setting_names_the_choices_not_the_sizes():
    assert plan.entry_setting({"model": "gemma3-4b@80"}) == {"model": "gemma3-4b"}
    s = plan.entry_setting({"model": "smollm2-135m", "ranker": "bm25", "n": 10, "seed": 0,
                            "data": "data/liu2023/x.jsonl.gz", "sha": "ab12" * 16,
                            "quick": True, "remedy": {"name": "ms-poe", "ratio": 1.5}})
    assert s == {"model": "smollm2-135m", "quick": "True", "ranker": "bm25",
                 "remedy.name": "ms-poe"}


def test_a_change_to_one_rankers_code_is_caught_where_the_sample_reaches_every_setting(
        tmp_path, monkeypatch, fake_ns):
    ns = fake_ns
    log = tmp_path / "record.jsonl"
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "cold"))
    monkeypatch.setenv("POSBIAS_CACHE_LOG", str(log))
    v1 = _module(tmp_path, RANKED, "ranked_v1")
    runs = [(3, "bm25"), (5, "bm25"), (7, "curve")]   # the curve ranker's entry is the dearest
    for n, r in runs:
        cache.cached(ns, {"n": n, "ranker": r}, lambda: v1.compute(n, r))
    entries = {f"{ns}/{cache.key(ns, {'n': n, 'ranker': r})}": {
        "recorded": "2026-12-05", "commit": "c", "bytes": 1, "compute_seconds": float(n),
        "code": code.code_digest(ns, _pkg(RANKED)), "read": True} for n, r in runs}
    events = [json.loads(x) for x in log.read_text().splitlines()]
    assert rec.fill_settings(entries, events) == 3   # make record writes the logged settings
    assert sorted(v["setting"]["ranker"] for v in entries.values()) == ["bm25", "bm25", "curve"]
    man = {"entries": entries}
    monkeypatch.setenv("POSBIAS_RECORDED_DIR", str(tmp_path / "cold"))

    def run(manifest, name, budget):
        p = plan.verification_plan(manifest, {ns: code.code_digest(ns, _pkg(RANKED_CURVE))},
                                   budget)
        keys = tmp_path / f"keys-{name}.txt"
        keys.write_text("".join(k + "\n" for k in p["keys"]))
        monkeypatch.setenv("POSBIAS_RECORDED_VERIFY_KEYS", str(keys))
        monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / f"live-{name}"))
        mod = _module(tmp_path, RANKED_CURVE, f"ranked_{name}")
        for n, r in runs:
            cache.cached(ns, {"n": n, "ranker": r}, lambda: mod.compute(n, r))
        return p

    # the counterexample: without the settings in the manifest and no budget beyond the
    # cheapest entry, the sample holds only a bm25 entry and the changed ranker goes unseen
    bare = {"entries": {k: {f: x for f, x in v.items() if f != "setting"}
                        for k, v in entries.items()}}
    p = run(bare, "bare", budget=0.0)
    assert len(p["keys"]) == 1
    # with them, the changed namespace's sample holds an entry of each ranker (the bm25 entry
    # of 3 s, the curve one of 7 s: a budget of 10 s holds both, passing over the 5 s bm25 one),
    # and the one ranker whose code changed fails the namespace by name
    with pytest.raises(verify.RecordedMismatch, match=f"namespace {ns!r}"):
        run(man, "covered", budget=10.0)
    p = plan.verification_plan(man, {ns: code.code_digest(ns, _pkg(RANKED_CURVE))}, 10.0)
    assert p["namespaces"][ns]["chosen"] == [cache.key(ns, {"n": 3, "ranker": "bm25"}),
                                             cache.key(ns, {"n": 7, "ranker": "curve"})]
    assert "uncovered" not in p["namespaces"][ns]
    # a budget too small for every setting says so, and such a sample earns no stamp
    p = plan.verification_plan(man, {ns: code.code_digest(ns, _pkg(RANKED_CURVE))}, 0.0)
    assert p["namespaces"][ns]["uncovered"] == 1 and len(p["keys"]) == 1
    ev = [{"event": "verified", "ns": ns, "key": p["keys"][0].split("/")[1][:16]}]
    assert stamps_mod.new_stamps(p, ev, man, {ns: "x"}, "m", "d", "c") == {}
    lines, _ = plan.verification_summary(p, ev)
    assert "beyond the budget (7.0 s as recorded), so not stamped" in lines[0]
    assert "VERIFY_BUDGET=SECONDS" in lines[0]
    # an unchanged namespace still re-measures only its cheapest entry
    p = plan.verification_plan(man, {ns: code.code_digest(ns, _pkg(RANKED))}, 0.0)
    assert len(p["keys"]) == 1


def test_a_stamp_this_checkout_cannot_place_vouches_for_nothing(tmp_path):
    # a shallow clone lacking the stamp's commit cannot tell its branch: the stamp is dropped,
    # not trusted, and not an error
    import subprocess

    src = tmp_path / "src"
    src.mkdir()
    for cmd in (["git", "init", "-q"], ["git", "-c", "user.email=a@b", "-c", "user.name=a",
                                       "commit", "-q", "--allow-empty", "-m", "one"],
                ["git", "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q",
                 "--allow-empty", "-m", "two"]):
        subprocess.run(cmd, cwd=src, check=True)
    first = subprocess.run(["git", "rev-parse", "HEAD~1"], cwd=src, capture_output=True,
                           text=True).stdout.strip()
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{src}", str(shallow)],
                   check=True)
    assert stamps_mod.is_ancestor(first, src) is True
    assert stamps_mod.is_ancestor(first, shallow) is None
    assert stamps_mod.is_ancestor("f" * 40, src) is False
    st = {"a": {"commit": first}}
    assert stamps_mod.unverifiable(st, lambda c: stamps_mod.is_ancestor(c, shallow)) == ["a"]
    assert stamps_mod.unverifiable(st, lambda c: stamps_mod.is_ancestor(c, src)) == []


def test_a_sample_costs_what_its_last_re_measurement_took():
    """An entry made of parts costs what its sample's parts took (verify_seconds, from a run's
    cache events), not the whole entry's recording seconds: the plan's cheapest entry and its
    budget follow; an entry never re-measured keeps its recorded seconds."""
    events = [
        {"event": "computed-part", "ns": "a", "key": "k1" * 8, "seconds": 3.0, "part": 0},
        {"event": "computed-part", "ns": "a", "key": "k1" * 8, "seconds": 4.0, "part": 5},
        {"event": "verified", "ns": "a", "key": "k1" * 8, "parts": 40, "sampled": 2},
        {"event": "computed", "ns": "a", "key": "k2" * 8, "seconds": 9.0},
        {"event": "verified", "ns": "a", "key": "k2" * 8},
        {"event": "computed", "ns": "a", "key": "k3" * 8, "seconds": 1.0},  # not a check
    ]
    entries = {f"a/{'k1' * 32}": {"compute_seconds": 100.0, "code": "d"},
               f"a/{'k2' * 32}": {"compute_seconds": 10.0, "code": "d"},
               f"a/{'k3' * 32}": {"compute_seconds": 20.0, "code": "d"}}
    assert rec.fill_verify_seconds(entries, events) == 2
    assert [v.get("verify_seconds") for v in entries.values()] == [7.0, 9.0, None]
    assert entries[f"a/{'k1' * 32}"]["parts"] == 40
    assert entries[f"a/{'k1' * 32}"]["part_seconds"] == 3.5
    assert [plan.entry_cost(v) for v in entries.values()] == [7.0, 9.0, 20.0]
    # changed since recording: its sample costs what the whole sample took
    p = plan.verification_plan({"entries": entries}, {"a": "new"}, 0)
    assert p["keys"][0] == f"a/{'k1' * 32}" and p["namespaces"]["a"]["seconds"] == 7.0
    # unchanged: checked by one part, which costs what one part took
    p = plan.verification_plan({"entries": entries}, {"a": "d"}, 0)
    assert p["keys"] == [f"a/{'k1' * 32}"] and p["namespaces"]["a"]["seconds"] == 3.5
    # the counterexample: by recorded seconds alone the whole-entry k2 would be the cheapest
    for v in entries.values():
        for f in ("verify_seconds", "part_seconds", "parts"):
            v.pop(f, None)
    assert plan.verification_plan({"entries": entries}, {"a": "d"}, 0)["keys"] == [f"a/{'k2' * 32}"]


def test_a_one_part_check_prices_one_part_and_leaves_the_sample_cost():
    """A one-part check (a verified namespace) gives its entry the seconds of one part, and does
    not lower what the namespace's whole sample costs once its code changes: an entry whose one
    part is cheap becomes the verified namespace's cheapest, while a changed namespace is still
    budgeted at its full sample."""
    k1, k2 = "k1" * 32, "k2" * 32
    entries = {f"a/{k1}": {"compute_seconds": 400.0, "verify_seconds": 60.0, "code": "d"},
               f"a/{k2}": {"compute_seconds": 30.0, "code": "d"}}
    events = [
        {"event": "computed-part", "ns": "a", "key": k1[:16], "seconds": 2.0, "part": 7},
        {"event": "verified", "ns": "a", "key": k1[:16], "parts": 64, "sampled": 1},
    ]
    assert rec.fill_verify_seconds(entries, events) == 1
    assert entries[f"a/{k1}"]["verify_seconds"] == 60.0   # one part: the sample's cost stays
    assert entries[f"a/{k1}"]["part_seconds"] == 2.0
    assert plan.entry_cost(entries[f"a/{k1}"], one_part=True) == 2.0
    assert plan.verification_plan({"entries": entries}, {"a": "d"}, 0)["keys"] == [f"a/{k1}"]
    # changed: the whole entry k2 (30 s) is cheaper than k1's sample (60 s)
    assert plan.verification_plan({"entries": entries}, {"a": "new"}, 0)["keys"][0] == f"a/{k2}"


def test_a_verified_namespace_re_measures_one_part_and_a_changed_one_its_whole_sample(
        tmp_path, monkeypatch):
    """An entry of parts in a namespace whose code is unchanged since recording (or stamped) is
    re-measured by one part (the keys file says ``:1``); in a changed namespace by its whole
    sample (the first part, one the digest chooses, one of every kind)."""
    from posbias_nb.provenance import verify as v

    man = {"entries": {"p/aa": {"compute_seconds": 5.0, "code": "d"},
                       "q/bb": {"compute_seconds": 5.0, "code": "old"}}}
    p = plan.verification_plan(man, {"p": "d", "q": "new"}, 100)
    assert p["keys"] == ["p/aa", "q/bb"] and p["one_part"] == ["p/aa"]
    out, keys = tmp_path / "plan.json", tmp_path / "keys.txt"
    (tmp_path / "rec").mkdir()
    (tmp_path / "rec" / "MANIFEST.json").write_text(json.dumps({**man, "digest_rule":
                                                                  code.DIGEST_RULE}))
    monkeypatch.setattr(code, "code_digest", lambda ns, files=None: {"p": "d", "q": "new"}[ns])
    monkeypatch.setattr(code, "NAMESPACE_CODE", {"p": ("x",), "q": ("x",)})
    assert plan.main(["plan", "--recorded", str(tmp_path / "rec"), "--out", str(out),
                      "--keys", str(keys)]) == 0
    assert keys.read_text().split() == ["p/aa:1", "q/bb"]
    monkeypatch.setenv("POSBIAS_RECORDED_VERIFY_KEYS", str(keys))
    assert cache.verify_keys() == {"p/aa", "q/bb"} and cache.verify_one_part() == {"p/aa"}
    assert len(v.one_part("p", "aa", 40)) == 1
    assert len(v.part_sample("p", "aa", 40)) == v.VERIFY_PARTS
    keys.write_text("p/aa:2\n")
    monkeypatch.setenv("POSBIAS_RECORDED_VERIFY_KEYS", str(tmp_path / "other.txt"))
    (tmp_path / "other.txt").write_text("p/aa:2\n")
    with pytest.raises(ValueError, match="namespace/key:1"):
        cache.verify_keys()


def test_an_entry_compared_by_its_own_rule_keeps_its_record(tmp_path, monkeypatch, fake_ns):
    """``cached(..., compare=)``: where a sampled entry is computed whole, its own comparison
    replaces agree(); when it agrees, the recorded value is what the cache holds and returns
    (a ranking right in more than one order: the book prints the record); when it does not,
    RecordedMismatch names the namespace and nothing is written."""
    ns = fake_ns
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "rec"))
    cache.cached(ns, {"n": 1}, lambda: {"order": np.array([0, 1, 2])})
    k = cache.key(ns, {"n": 1})
    monkeypatch.setenv("POSBIAS_RECORDED_DIR", str(tmp_path / "rec"))
    keys = tmp_path / "keys.txt"
    keys.write_text(f"{ns}/{k}\n")
    monkeypatch.setenv("POSBIAS_RECORDED_VERIFY_KEYS", str(keys))
    now = {"order": np.array([1, 0, 2])}  # another order of a tie

    def run(name, compare):
        monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / name))
        log = tmp_path / f"{name}.jsonl"
        monkeypatch.setenv("POSBIAS_CACHE_LOG", str(log))
        try:
            out = cache.cached(ns, {"n": 1}, lambda: now, compare=compare)
        except verify.RecordedMismatch as e:
            out = e
        return out, [json.loads(x)["event"] for x in log.read_text().splitlines()]

    seen = []
    out, events = run("tied", lambda rec, fresh: seen.append((rec, fresh)) or [])
    assert events[-1] == "verified" and seen[0][1]["order"].tolist() == [1, 0, 2]
    assert out["order"].tolist() == [0, 1, 2] == cache.load(ns, {"n": 1})["order"].tolist()
    # the default comparison would have failed it
    out, events = run("default", None)
    assert isinstance(out, verify.RecordedMismatch) and events[-1] == "mismatch"
    out, events = run("refused", lambda rec, fresh: ["order: not a tie"])
    assert isinstance(out, verify.RecordedMismatch) and "order: not a tie" in str(out)
    assert ns in str(out) and cache.load(ns, {"n": 1}) is None
