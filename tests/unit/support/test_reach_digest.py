"""The code digest by reach (posbias_nb.provenance.reach): the same where only the place of the
code changed, moved where what runs changed, and each skeptic's counterexample caught.

Every case is a fake package of a few modules (``{path: source}``) with one namespace rooted at
``fake``; ``digest(files)`` is its code digest."""
import json

import pytest

from posbias_nb.provenance import code, migrate, stamps


@pytest.fixture
def digest(monkeypatch):
    monkeypatch.setitem(code.NAMESPACE_CODE, "fake", ("fake",))
    return lambda files: code.code_digest("fake", {"__init__.py": "", **files})


HELPERS = '''import numpy as np

SCALE = 2.0


def scaled(x):
    """x times the scale."""
    return np.asarray(x) * SCALE


def page_title(name):
    return f"<h1>{name}</h1>"
'''
FAKE = '''from .helpers import scaled


def compute(n):
    return {"x": scaled(range(n))}
'''


def test_a_move_to_another_module_and_a_rename_leave_the_digest(digest):
    base = digest({"fake.py": FAKE, "helpers.py": HELPERS})
    # scaled and SCALE move to their own module; helpers keeps the page's helper
    moved = {"fake.py": FAKE.replace(".helpers", ".numeric"),
             "numeric.py": HELPERS.split("def page_title")[0],
             "helpers.py": "def page_title(name):\n    return f'<h1>{name}</h1>'\n"}
    assert digest(moved) == base
    # the module renamed, its reader importing it under the old name
    renamed = {"fake.py": "from .numbers import scaled\n" + FAKE.split("\n", 1)[1],
               "numbers.py": HELPERS}
    assert digest(renamed) == base
    # into a sub-package
    sub = {"fake.py": FAKE.replace(".helpers", ".base.numeric"), "base/__init__.py": "",
           "base/numeric.py": HELPERS}
    assert digest(sub) == base


def test_how_a_reader_names_what_it_reads_does_not_count(digest):
    """``helpers.scaled``, ``numeric.scaled``, ``scaled`` imported by name, at the top or inside
    the function: the same code; the reader's own text otherwise still counts."""
    base = digest({"fake.py": FAKE, "helpers.py": HELPERS})
    by_module = ("from . import helpers\n\n\ndef compute(n):\n"
                 "    return {'x': helpers.scaled(range(n))}\n")
    assert digest({"fake.py": by_module, "helpers.py": HELPERS}) == base
    other = by_module.replace("helpers", "numeric")
    assert digest({"fake.py": other, "numeric.py": HELPERS}) == base
    local = ("def compute(n):\n    from .base.numeric import scaled\n"
             "    return {'x': scaled(range(n))}\n")
    assert digest({"fake.py": local, "base/__init__.py": "", "base/numeric.py": HELPERS}) == base
    assert digest({"fake.py": FAKE.replace("range(n)", "range(n + 1)"),
                   "helpers.py": HELPERS}) != base
    # a local variable keeps its name: renaming it is a change of text, counted
    assert digest({"fake.py": FAKE.replace("def compute(n):", "def compute(m):")
                   .replace("range(n)", "range(m)"), "helpers.py": HELPERS}) != base


def test_an_alias_is_the_statement_it_names(digest):
    base = digest({"fake.py": FAKE, "helpers.py": HELPERS})
    alias = HELPERS + "\nscale_it = scaled\n"
    reader = FAKE.replace("import scaled", "import scale_it").replace("scaled(", "scale_it(")
    assert digest({"fake.py": reader, "helpers.py": alias}) == base
    assert digest({"fake.py": reader, "helpers.py": alias.replace("* SCALE", "/ SCALE")}) != base
    # a public alias added beside a private name, in a root module, is not code of its own
    root_alias = FAKE + "\nmeasure = compute\n"
    assert digest({"fake.py": root_alias, "helpers.py": HELPERS}) == base
    # but where code reads the alias, an alias that comes to name another statement moves it
    reads = root_alias + "\n\ndef run(n):\n    return measure(n)\n"
    assert digest({"fake.py": reads, "helpers.py": HELPERS}) != digest(
        {"fake.py": reads.replace("measure = compute", "measure = scaled"), "helpers.py": HELPERS})


def test_an_unreached_edit_leaves_it_and_a_reached_one_moves_it(digest):
    base = digest({"fake.py": FAKE, "helpers.py": HELPERS})
    page = HELPERS.replace("<h1>", "<h2>")
    assert digest({"fake.py": FAKE, "helpers.py": page}) == base
    for edit in (HELPERS.replace("SCALE = 2.0", "SCALE = 3.0"),            # a constant read
                 HELPERS.replace("np.asarray(x) * SCALE", "np.asarray(x) + SCALE"),
                 HELPERS.replace("import numpy as np", "import numpy.ma as np")):  # the library
        assert digest({"fake.py": FAKE, "helpers.py": edit}) != base, edit
    # a docstring or a comment is not code
    doc = HELPERS.replace('"""x times the scale."""', '"""Other words."""  # a comment')
    assert digest({"fake.py": FAKE, "helpers.py": doc}) == base


def test_a_name_that_comes_to_mean_another_statement_moves_it(digest):
    """The counterexample to hashing the set of statements alone: two helpers of the same name
    and different bodies, both reached; the reader switches from one to the other."""
    a = "def f(x):\n    return x + 1\n"
    b = "def f(x):\n    return x * 2\n"
    uses_a = ("from .a import f\nfrom . import b\n\n\ndef compute(n):\n"
              "    return {'x': f(n), 'y': b.f(n)}\n")
    uses_b = uses_a.replace("from .a import f\nfrom . import b", "from .b import f\nfrom . import a")
    uses_b = uses_b.replace("b.f(n)", "a.f(n)")
    # the same statements are reached either way; what 'f' means is not
    assert digest({"fake.py": uses_a, "a.py": a, "b.py": b}) != \
        digest({"fake.py": uses_b, "a.py": a, "b.py": b})


def test_what_runs_at_import_counts_though_no_name_leads_to_it(digest):
    """A registration in a module that runs (a registry filled at import), a mutation of a
    read constant, a decorator of the package's own: each counts."""
    reg = "REGISTRY = {}\n\n\ndef register(k, v):\n    REGISTRY[k] = v\n"
    plug = "from .reg import register\n\nregister('scale', 2.0)\n"
    fake = ("from .reg import REGISTRY\nfrom . import plug  # noqa\n\n\ndef compute(n):\n"
            "    return {'x': [REGISTRY['scale'] * i for i in range(n)]}\n")
    files = {"fake.py": fake, "reg.py": reg, "plug.py": plug}
    base = digest(files)
    assert digest({**files, "plug.py": plug.replace("2.0", "3.0")}) != base
    mut = {"fake.py": FAKE, "helpers.py": HELPERS + "\nSCALE *= 1.0\n"}
    assert digest(mut) != digest({"fake.py": FAKE, "helpers.py": HELPERS})
    deco = ("from .reg import register\n\n\n@register_it\ndef g():\n    return 1\n"
            .replace("register_it", "register"))
    assert digest({**files, "plug.py": deco}) != digest(
        {**files, "plug.py": deco.replace("return 1", "return 2")})


@pytest.mark.parametrize("acts", ["setattr(helpers, 'SCALE', 3.0)",
                                  "np.copyto(helpers.TABLE, np.ones(2))",
                                  "dict.update(helpers.OPTS, scale=3.0)"])
def test_a_library_call_at_import_that_can_change_the_packages_objects_counts(digest, acts):
    """A builtin or library call in a module that runs, given one of the package's objects, may
    change it (the skeptic's first try against 'library calls are pure')."""
    helpers = HELPERS + "\nTABLE = np.zeros(2)\nOPTS = {}\n"
    fake = ("from . import helpers, plug  # noqa\n\n\ndef compute(n):\n"
            "    return {'x': helpers.scaled(range(n))}\n")
    plug = f"import numpy as np\nfrom . import helpers\n\nX = {acts}\n"
    files = {"fake.py": fake, "helpers.py": helpers, "plug.py": plug}
    assert digest(files) != digest({**files, "plug.py": plug.replace("X = ", "Y = (0, ")
                                    .rstrip("\n") + ")\n"})
    # a reading builtin given a package object changes nothing: the unit stays out
    reading = "from . import helpers\n\nN = len(helpers.OPTS)\n"
    assert digest({**files, "plug.py": reading}) == digest(
        {**files, "plug.py": reading.replace("N = ", "M = ")})


def test_a_module_passed_on_counts_whole_and_a_local_import_counts(digest):
    helpers = {"helpers.py": HELPERS}
    by_name = ("from . import helpers\n\n\ndef compute(n, name='scaled'):\n"
               "    return {'x': getattr(helpers, name)(range(n))}\n")
    base = digest({"fake.py": by_name, **helpers})
    # getattr by a string: the whole module counts, the page's helper too
    assert digest({"fake.py": by_name, "helpers.py": HELPERS.replace("<h1>", "<h2>")}) != base
    local = "def compute(n):\n    from .helpers import scaled\n    return {'x': scaled(range(n))}\n"
    base = digest({"fake.py": local, **helpers})
    assert digest({"fake.py": local,
                   "helpers.py": HELPERS.replace("SCALE = 2.0", "SCALE = 5.0")}) != base


def test_where_the_code_lives_counts_where_it_reads_its_own_file(digest):
    src = ("from pathlib import Path\n\nROOT = Path(__file__).parent\n\n\n"
           "def compute(n):\n    return {'x': str(ROOT)}\n")
    assert digest({"fake.py": "from .where import compute  # noqa\n", "where.py": src}) != \
        digest({"fake.py": "from .there import compute  # noqa\n", "there.py": src})


def test_a_star_import_and_a_re_export_are_followed(digest):
    inner = "K = 1\n\n\ndef k():\n    return K\n"
    files = {"fake.py": "from .pkg import k\n\n\ndef compute(n):\n    return {'x': k()}\n",
             "pkg/__init__.py": "from .inner import *  # noqa\n", "pkg/inner.py": inner}
    assert digest(files) != digest({**files, "pkg/inner.py": inner.replace("K = 1", "K = 2")})
    reexp = {"fake.py": files["fake.py"], "pkg/__init__.py": "from .inner import k  # noqa\n",
             "pkg/inner.py": inner}
    assert digest(reexp) == digest(files)
    assert digest(reexp) != digest({**reexp, "pkg/inner.py": inner.replace("K = 1", "K = 3")})


def test_a_missing_root_counts(digest, monkeypatch):
    monkeypatch.setitem(code.NAMESPACE_CODE, "fake", ("fake", "gone"))
    assert code.code_digest("fake", {"__init__.py": "", "fake.py": FAKE, "helpers.py": HELPERS}) \
        != code.code_digest("fake", {"__init__.py": "", "fake.py": FAKE, "helpers.py": HELPERS,
                                     "gone.py": ""})


def test_the_books_namespaces_are_told_apart_by_what_they_reach():
    """On the package itself: a page of the fix study is outside every namespace, and the
    report's page module computes nothing; the inference study's code is inside its
    namespaces and not inside the born profile's."""
    mods = code.code_modules("inference-task")
    assert "experiments.remedy.inference.measurements" in mods and "experiments.report.page" not in mods
    assert "experiments.remedy.inference.measurements" not in code.code_modules("profile")
    assert code.code_digest("inference-task") == code.code_digest("inference-cost")
    assert code.code_digest("inference-task") != code.code_digest("profile")


def _old_and_new(monkeypatch, files):
    monkeypatch.setitem(code.NAMESPACE_CODE, "fake", ("fake",))
    return code.file_digest("fake", files), code.code_digest("fake", files)


def test_the_migration_carries_only_digests_it_can_show(monkeypatch):
    then = {"__init__.py": "", "fake.py": FAKE, "helpers.py": HELPERS}
    today = {**then, "helpers.py": HELPERS.replace("<h1>", "<h2>")}  # a page edit since
    old_then, new_then = _old_and_new(monkeypatch, then)
    manifest = {"entries": {
        "fake/k1": {"commit": "c1", "code": old_then},
        "fake/k2": {"commit": "c2", "code": "f" * 64},       # no files digest to it
    }}
    st = {"fake": {"code": old_then, "commit": "c1",
                   "manifest": stamps.manifest_digest(manifest, "fake")},
          "other": {"code": "e" * 64, "commit": "c1", "manifest": "x"}}
    refs = {"fake/k1": {"CPU": {"code": old_then, "commit": "c1"}}}
    got = migrate.carry(manifest, st, refs, {"c1": then}.get, today=today)
    assert manifest["entries"]["fake/k1"]["code"] == new_then
    # the page edit moved the old rule's digest, not the new one's: k1 is unchanged today
    assert code.code_digest("fake", today) == new_then != code.file_digest("fake", today)
    assert manifest["entries"]["fake/k2"]["code"] == "f" * 64 and got["kept"] == ["fake/k2"]
    assert refs["fake/k1"]["CPU"]["code"] == new_then and got["references"] == 1
    assert st["fake"]["code"] == new_then
    assert st["fake"]["manifest"] == stamps.manifest_digest(manifest, "fake")
    assert "other" not in st and "other" in got["dropped"]
    assert manifest["digest_rule"] == code.DIGEST_RULE


def test_a_manifest_of_another_rule_is_refused_by_the_plan(tmp_path, capsys):
    from posbias_nb.provenance import plan

    (tmp_path / "MANIFEST.json").write_text(json.dumps({"entries": {}}))
    rc = plan.main(["plan", "--recorded", str(tmp_path), "--out", str(tmp_path / "p.json"),
                    "--keys", str(tmp_path / "k.txt")])
    err = capsys.readouterr().err
    assert rc == 2 and "migrate-digests" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "p.json").exists()


def test_the_recorded_manifest_follows_todays_rule():
    from pathlib import Path

    man = json.loads((Path(__file__).resolve().parents[3] / "recorded" / "MANIFEST.json")
                     .read_text())
    assert man.get("digest_rule") == code.DIGEST_RULE


PAGE = "\n\ndef page_title(name):\n    return f'<h1>{name}</h1>'\n"


@pytest.fixture
def page_out(monkeypatch):
    """A namespace rooted at ``fake``, and a module ``page`` that computes nothing."""
    monkeypatch.setitem(code.NAMESPACE_CODE, "fake", ("fake",))
    monkeypatch.setattr(code, "NOT_COMPUTING", code.NOT_COMPUTING | {"page"})
    then = {"__init__.py": "", "fake.py": FAKE + PAGE, "helpers.py": HELPERS}
    return then


def test_a_page_moved_out_narrows_the_code(page_out):
    then = page_out
    now = {"__init__.py": "", "fake.py": FAKE, "page.py": PAGE, "helpers.py": HELPERS}
    assert code.code_digest("fake", now) != code.code_digest("fake", then)
    assert code.narrows("fake", then, now)


@pytest.mark.parametrize("change", ["reads more", "a read means another statement",
                                    "a registration is gone", "a statement changed"])
def test_what_is_not_a_narrowing(page_out, change):
    then = {**page_out, "reg.py": "REG = {}\n", "plug.py": "from .reg import REG\n\nREG['k'] = 1\n",
            "fake.py": "from . import plug  # noqa\n" + page_out["fake.py"]}
    now = {**then, "fake.py": then["fake.py"].replace(PAGE, ""), "page.py": PAGE}
    assert code.narrows("fake", then, now)      # the page alone moved out: a narrowing
    if change == "reads more":
        now["fake.py"] = now["fake.py"].replace("scaled(range(n))", "scaled(range(n)) + 0")
    elif change == "a read means another statement":
        now["helpers.py"] = HELPERS.replace("SCALE = 2.0", "SCALE = 2.5")
    elif change == "a registration is gone":
        now["fake.py"] = now["fake.py"].replace("from . import plug  # noqa\n", "")
    else:
        now["helpers.py"] = HELPERS.replace("* SCALE", "/ SCALE")
    assert not code.narrows("fake", then, now), change


def test_a_narrowed_stamp_vouches_only_for_the_code_of_its_commit(page_out, monkeypatch):
    then = page_out
    now = {"__init__.py": "", "fake.py": FAKE, "page.py": PAGE, "helpers.py": HELPERS}
    today = code.code_digest("fake", now)
    monkeypatch.setattr(code, "source_files", lambda: now)
    real_narrows = code.narrows
    monkeypatch.setattr(code, "narrows",
                        lambda ns, t, files=None, roots_then=None: real_narrows(ns, t, now, roots_then))
    stamp = {"code": code.code_digest("fake", then), "commit": "c1", "date": "d"}
    got = stamps.narrowed({"fake": stamp}, {"fake": today}, {"c1": then}.get)
    assert got["fake"]["code"] == today and got["fake"]["narrowed"]["from"] == stamp["code"]
    # a stamp whose digest is not that of its commit's files vouches for nothing
    forged = {**stamp, "code": "f" * 64}
    assert stamps.narrowed({"fake": forged}, {"fake": today}, {"c1": then}.get) == {}
    # nor where its commit cannot be read
    assert stamps.narrowed({"fake": stamp}, {"fake": today}, lambda c: None) == {}


def test_todays_roots_can_be_read_from_the_files():
    """A later plan reads this commit's roots from its files (a stamp's commit, a recording's):
    NAMESPACE_CODE must stay a literal; one that is not reads as no roots, not as a crash."""
    assert code.declared_roots(code.source_files()) == code.NAMESPACE_CODE
    assert code.declared_roots({"provenance/code.py": "X = ('a',)\nNAMESPACE_CODE = {'n': X}\n"}) == {}


def _cache_calls(src: str) -> list[str]:
    """The calls of the cache's computing functions in ``src`` (``cache.cached(...)``,
    ``cache.store(...)``, ``cached(...)`` imported by name)."""
    import ast

    out = []
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            base = getattr(getattr(f, "value", None), "id", "")
            if name in ("cached", "store") and (base in ("cache", "_cache") or
                                                isinstance(f, ast.Name)):
                out.append(f"{base + '.' if base else ''}{name}")
    return out


def test_what_computes_nothing_calls_no_cache_and_roots_nothing():
    """The reach digest leaves NOT_COMPUTING modules out (a page's sentence moves no number):
    sound only while none of them computes a cached entry and none is a namespace's root."""
    files = code.package_files()
    for mod in code.NOT_COMPUTING:
        if mod in files and mod not in ("cache", "provenance_cli") \
                and not mod.startswith("provenance"):
            assert _cache_calls(files[mod]) == [], mod
    roots = {r for rs in code.NAMESPACE_CODE.values() for r in rs}
    assert not roots & code.NOT_COMPUTING
    # the check sees a call it should refuse
    assert _cache_calls("from .. import cache\ndef f():\n    return cache.cached('ns', {}, g)\n") \
        == ["cache.cached"]


# ---- constants by value (reach-v2) ------------------------------------------------------------
TABLE = '''TABLE = {
    "scale": {"kind": "network", "grid": ({"s": 0.0}, {"s": 0.5}), "help": "scales a channel"},
    "sort": {"kind": "prompt", "grid": ({},), "help": "sorts the documents"},
}
'''
BY_NAME = '''NETWORK = ("scale",)
GRID = {"scale": ({"s": 0.0}, {"s": 0.5})}
'''
FROM_TABLE = '''from .table import TABLE

NETWORK = tuple(n for n, r in TABLE.items() if r["kind"] == "network")
GRID = {n: r["grid"] for n, r in TABLE.items() if n in NETWORK}
'''
READER = '''from .remedies import GRID, NETWORK


def compute():
    return [(n, s) for n in NETWORK for s in GRID[n]]
'''


def test_a_constant_counts_by_its_value_not_by_how_it_is_written(digest):
    base = digest({"fake.py": READER, "remedies.py": BY_NAME})
    derived = {"fake.py": READER, "remedies.py": FROM_TABLE, "table.py": TABLE}
    assert digest(derived) == base
    # a field no value read depends on (the help, a prompt remedy's grid): the same
    assert digest({**derived, "table.py": TABLE.replace("sorts the", "sorts its")}) == base
    assert digest({**derived, "table.py": TABLE.replace('"grid": ({},)', '"grid": ({}, {})')}) \
        == base
    # a value read moves: a grid point, a kind, and the order (the order the code runs them)
    assert digest({**derived, "table.py": TABLE.replace('"s": 0.5', '"s": 0.25')}) != base
    assert digest({**derived, "table.py": TABLE.replace('"kind": "prompt"', '"kind": "network"')}) \
        != base
    assert digest({"fake.py": READER, "remedies.py": BY_NAME.replace(
        '({"s": 0.0}, {"s": 0.5})', '({"s": 0.5}, {"s": 0.0})')}) != base
    # by text, as the rule before it, the two ways of writing differ
    v1 = code.code_digest("fake", {"__init__.py": "", "fake.py": READER, "remedies.py": BY_NAME},
                          rule="reach-v1")
    assert v1 != code.code_digest("fake", {"__init__.py": "", **derived}, rule="reach-v1")


def test_a_function_that_reads_the_table_itself_moves_with_any_edit_of_it(digest):
    reader = "from .table import TABLE\n\n\ndef compute():\n    return sorted(TABLE)\n"
    base = digest({"fake.py": reader, "table.py": TABLE})
    assert digest({"fake.py": reader, "table.py": TABLE.replace("sorts the", "sorts its")}) != base


def test_what_is_not_folded_counts_by_its_text(digest):
    from posbias_nb.provenance import reach

    def folds(src, name):
        ix = reach.index({"": "", "m": src}, frozenset())
        m = ix.mods["m"]
        return ix.folded(("m", m.bindings[name][0])) is not None

    assert folds("A = (1, 2)\nB = A + (3,)\n", "B")
    assert folds("S = {'a', 'b'}\nT = {k: S for k in ('x',)}\nU = 'a' in S\n", "T")
    assert folds("S = {'a', 'b'}\nU = 'a' in S and len(S) == 2\n", "U")
    # iterating a set (its order is the hash seed's), a package function, a library, a lambda,
    # two statements binding the name, a mutation at import
    assert not folds("S = {'a', 'b'}\nT = tuple(S)\n", "T")
    assert not folds("S = {'a', 'b'}\nT = sorted(S | {'c'})\n", "T")
    assert not folds("def f():\n    return 1\n\n\nB = f()\n", "B")
    assert not folds("import numpy as np\n\nB = np.pi\n", "B")
    assert not folds("B = (lambda: 1)()\n", "B")
    assert not folds("if True:\n    B = 1\nelse:\n    B = 2\n", "B")
    assert not folds("A = [1]\nB = A.pop()\n", "B")
    assert not folds("B = __file__\n", "B")
    # what a folded constant was computed from still runs: a change of it at import counts by
    # its text, and so does an edit of that change
    files = {"fake.py": READER, "remedies.py": FROM_TABLE, "table.py": TABLE}
    base = digest(files)
    acted = {**files, "table.py": TABLE + '\nTABLE["scale"]["grid"] += ({"s": 1.0},)\n'}
    assert digest(acted) != base
    assert digest({**files, "table.py": TABLE + '\nTABLE["scale"]["grid"] += ({"s": 2.0},)\n'}) \
        != digest(acted)
    appended = {**files, "remedies.py": FROM_TABLE + "\nNETWORK += ('sort',)\n"}
    assert digest(appended) != base
    assert digest({**files, "remedies.py": FROM_TABLE + "\nNETWORK += ('other',)\n"}) \
        != digest(appended)


def test_plain_data_is_told_apart_by_type_and_order():
    from posbias_nb.provenance.reach import plain

    assert len({plain(x) for x in [(1,), [1], 1, 1.0, True, "1", None]}) == 7
    assert plain({"a", "b", "c"}) == plain({"c", "b", "a"}) != plain(frozenset("abc"))
    assert plain({"a": 1, "b": 2}) != plain({"b": 2, "a": 1})
    with pytest.raises(TypeError):
        plain(object())


def test_an_edit_of_a_table_read_by_value_is_priced(monkeypatch):
    monkeypatch.setitem(code.NAMESPACE_CODE, "fake", ("fake",))
    files = {"__init__.py": "", "fake.py": READER, "remedies.py": FROM_TABLE, "table.py": TABLE}
    assert code.reaches("fake", "table", "TABLE", files)


def test_what_computes_nothing_counts_by_the_name_read_not_where_it_lives(monkeypatch):
    """A reader of a module that computes nothing (a page's, a design's helper) keeps its digest
    when that module moves (the floors of issue 65); reading another of its names moves it."""
    monkeypatch.setitem(code.NAMESPACE_CODE, "fake", ("fake",))
    monkeypatch.setattr(code, "NOT_COMPUTING", code.NOT_COMPUTING | {"page", "base.page"})
    reader = "from .page import title\n\n\ndef compute(n):\n    return {'t': title(n), 'n': n}\n"
    then = {"__init__.py": "", "fake.py": reader, "page.py": PAGE.replace("page_title", "title")}
    moved = {"__init__.py": "", "base/__init__.py": "", "base/page.py": then["page.py"],
             "fake.py": reader.replace(".page", ".base.page")}
    assert code.code_digest("fake", moved) == code.code_digest("fake", then)
    other = {**then, "fake.py": reader.replace("import title", "import title as _t, heading")
             .replace("title(n)", "heading(n)")}
    assert code.code_digest("fake", other) != code.code_digest("fake", then)


#: A small package whose digest by each earlier rule is kept as a literal: ``reach-v1`` by the
#: code that introduced it (commit 0a00c8d, before constants by value and what computes nothing
#: by its name), ``reach-v2`` by the code of commit 103b855, the last that followed it.
ORACLE_FILES = {"__init__.py": "", "page.py": "def title(n):\n    return f'<h1>{n}</h1>'\n",
                "table.py": "TABLE = {'a': {'kind': 'n'}, 'b': {'kind': 'p'}}\n"
                            "NETWORK = tuple(k for k, r in TABLE.items() if r['kind'] == 'n')\n",
                "fake.py": "import numpy as np\nfrom .page import title\nfrom .table import NETWORK"
                           "\n\n\ndef compute(n):\n    return {'t': title(n), 'x': np.arange(n), "
                           "'r': NETWORK}\n"}
ORACLES = {"reach-v1": "ffe64d974b706083f2166eb06e56a7d070260cb46599a3822b4e5153a9eaef5a",
           "reach-v2": "28ba921dfaf6dba1ca55097c91d8477431d3708598c421b209dd3966752cdddf"}


@pytest.mark.parametrize("rule", sorted(ORACLES))
def test_the_older_rules_are_computed_as_they_were(monkeypatch, rule):
    """Each earlier rule stays computable exactly (migrate-digests matches stored digests by it
    and carries them to today's): the oracle package's digest equals its literal, and today's
    rule gives another."""
    monkeypatch.setitem(code.NAMESPACE_CODE, "fake", ("fake",))
    monkeypatch.setattr(code, "NOT_COMPUTING", code.NOT_COMPUTING | {"page"})
    assert code.code_digest("fake", ORACLE_FILES, rule=rule) == ORACLES[rule]
    assert code.code_digest("fake", ORACLE_FILES) != code.code_digest("fake", ORACLE_FILES, rule=rule)


# ---- a function by its code, not its name (reach-v3) ------------------------------------------
def _renamed(files: dict, old: str, new: str) -> dict:
    """Every module of ``files`` with the identifier ``old`` written ``new`` (a rename done by
    an editor: the definition and every reader)."""
    import re

    return {k: re.sub(rf"\b{old}\b", new, v) for k, v in files.items()}


def test_a_function_renamed_with_its_readers_is_the_same_code(digest):
    """The renames issue 65 asks for (``study.choose`` drew examples, now ``study.draw_examples``; ``fix.choose`` tuned, now
    ``fix.tune.tune_settings``)
    move no digest: a read of a function is an edge to its code, so its name adds nothing
    (under ``reach-v2`` it moved the digest of every namespace reaching it)."""
    base = {"fake.py": FAKE, "helpers.py": HELPERS}
    renamed = _renamed(base, "scaled", "times_scale")
    assert digest(renamed) == digest(base)
    assert code.code_digest("fake", {"__init__.py": "", **renamed}, rule="reach-v2") != \
        code.code_digest("fake", {"__init__.py": "", **base}, rule="reach-v2")
    # the root's own function renamed too
    assert digest(_renamed(renamed, "compute", "measure")) == digest(base)


@pytest.mark.parametrize("change", ["swap", "body", "class", "constant", "reflect", "keyword",
                                    "getattr", "globals"])
def test_what_a_rename_cannot_hide(digest, change):
    """Counterexamples a skeptic tries: two functions swapping names (the reader now runs the
    other code), a renamed function whose body changed, a class (its name is data:
    ``type(x).__name__``, a dataclass's ``repr``), a constant bound by text, a keyword a caller
    passes by name, a function looked up by a string (``getattr(module, s)``, ``globals()[s]``),
    and a package that reads a function's name (``f.__name__``), where every function's name
    counts again."""
    helpers = HELPERS + "\n\ndef doubled(x):\n    return np.asarray(x) * 2\n"
    base = {"fake.py": FAKE, "helpers.py": helpers}
    if change == "swap":
        other = _renamed(_renamed(_renamed(base, "scaled", "TMP"), "doubled", "scaled"),
                         "TMP", "doubled")
        # the reader still reads "scaled", which is now the doubling code
        assert other["fake.py"] == FAKE.replace("scaled", "doubled")
        other["fake.py"] = FAKE
    elif change == "body":
        other = _renamed(base, "scaled", "times_scale")
        other["helpers.py"] = other["helpers.py"].replace("* SCALE", "* SCALE + 0")
    elif change == "class":
        base = {"fake.py": "from .helpers import Scaler\n\n\ndef compute(n):\n"
                           "    return {'x': repr(Scaler(n))}\n",
                "helpers.py": "import dataclasses\n\n\n@dataclasses.dataclass\nclass Scaler:\n"
                              "    n: int\n"}
        other = _renamed(base, "Scaler", "Times")
    elif change == "constant":
        base = {"fake.py": "from .helpers import SCALER\n\n\ndef compute(n):\n"
                           "    return {'x': SCALER(n)}\n",
                "helpers.py": "import numpy as np\n\nSCALER = np.float32\n"}
        other = _renamed(base, "SCALER", "TIMES")
    elif change == "keyword":
        base = {"fake.py": "from .helpers import scaled\n\n\ndef compute(n):\n"
                           "    return {'x': scaled(x=n)}\n", "helpers.py": helpers}
        other = _renamed(base, "x", "y")
    elif change == "getattr":
        # a function looked up by a string in a module handed to getattr: the module is reached
        # whole, and its functions count with their names (a swap would run the other one)
        base = {"fake.py": "from . import helpers\n\n\ndef compute(n, how='scaled'):\n"
                           "    return {'x': getattr(helpers, how)(range(n))}\n",
                "helpers.py": helpers}
        other = _renamed(base, "doubled", "twice")
        other["fake.py"] = base["fake.py"]
    elif change == "globals":
        base = {"fake.py": FAKE + "\n\ndef by_name(s, n):\n    return globals()[s](n)\n",
                "helpers.py": helpers}
        other = _renamed(base, "compute", "measure")
        ix = __import__("posbias_nb.provenance.reach", fromlist=["index"]).index(
            code.package_files({"__init__.py": "", **base}), code.NOT_COMPUTING)
        assert ix.reflects == [("fake", 9)] and ix.names
    else:  # reflect
        base = {"fake.py": FAKE.replace("{\"x\": scaled(range(n))}",
                                        "{\"x\": scaled(range(n)), \"f\": scaled.__name__}"),
                "helpers.py": helpers}
        assert "__name__" in base["fake.py"]
        other = _renamed(base, "scaled", "times_scale")
        ix = __import__("posbias_nb.provenance.reach", fromlist=["index"]).index(
            code.package_files({"__init__.py": "", **base}), code.NOT_COMPUTING)
        assert ix.reflects == [("fake", 5)] and ix.names
    assert digest(other) != digest(base)


def test_every_read_of_the_books_code_resolves():
    """A study moved one floor deeper whose inner ``from ...measure.scoring import ...`` kept its
    old depth imports nothing until it runs; the digest's reach sees it (issue 65: the pipeline
    package caught one before it ran).  Every namespace of the book reads only what exists."""
    assert {ns: code.unresolved(ns) for ns in code.NAMESPACE_CODE if code.unresolved(ns)} == {}


def test_an_import_one_level_too_shallow_is_unresolved(monkeypatch):
    monkeypatch.setitem(code.NAMESPACE_CODE, "fake", ("study.run",))
    files = {"__init__.py": "", "helpers.py": HELPERS, "study/__init__.py": "",
             "study/run.py": "def compute(n):\n    from ..helpers import scaled\n"
                             "    return {'x': scaled(range(n))}\n"}
    assert code.unresolved("fake", files) == []
    shallow = {**files, "study/run.py": files["study/run.py"].replace("..helpers", ".helpers")}
    assert code.unresolved("fake", shallow) == ["missing:study.helpers.scaled"]
