"""The package's shape: imports flow one way, the numerics load no torch, nothing self-registers.

The import graph is read from the source with :mod:`ast`, counting imports inside functions too
(a lazy import is still a dependency).  ``from . import x`` where ``x`` is a module counts as an
edge to that module; an implicit import of a parent package does not count.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "posbias_nb"
NUMERICS = ("posbias_nb.theory", "posbias_nb.rollout", "posbias_nb.metrics", "posbias_nb.stats")
#: The layers from the top down (DESIGN.md): a module may import only its own layer or lower ones.
#: The provenance room (:mod:`posbias_nb.provenance`) is support, beside the cache, but for its
#: command line, an entry point like ``posbias_nb.cli`` (it alone may import a study).
LAYERS = (
    ("cli", ("posbias_nb.cli", "posbias_nb.__main__", "posbias_nb.integrations",
             "posbias_nb.provenance_cli", "posbias_nb.provenance.__main__")),
    ("experiments", ("posbias_nb.experiments",)),
    ("measure", ("posbias_nb.measure",)),
    ("models/tasks", ("posbias_nb.models", "posbias_nb.tasks", "posbias_nb.remedy_table")),
    ("numerics", ("posbias_nb.theory", "posbias_nb.rollout", "posbias_nb.metrics",
                  "posbias_nb.stats")),
    ("support", ("posbias_nb.cache", "posbias_nb.provenance", "posbias_nb.plots",
                 "posbias_nb.notebook", "posbias_nb.results", "posbias_nb._validate",
                 "posbias_nb._version", "posbias_nb.data")),
)
#: The entry points: nothing below them imports them, and they alone may import anything.
ENTRY = ("posbias_nb.cli", "posbias_nb.__main__", "posbias_nb.integrations",
         "posbias_nb.provenance_cli", "posbias_nb.provenance.__main__")


def _modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        rel = f.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (anywhere in its source)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        here = name if is_pkg else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod
                           for a in node.names]
            for t in targets:
                while t and t not in mods:  # posbias_nb.x.y -> the deepest known module
                    t = t.rpartition(".")[0]
                if t and t != name:
                    graph[name].add(t)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


def test_cycle_finder_rejects_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle():
    assert find_cycle(import_graph()) is None


def _reaches(graph, start: str, prefix: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        todo.extend(graph.get(n, ()))
    return any(n == prefix or n.startswith(prefix + ".") for n in seen - {start})


def _layer_of(module: str) -> int | None:
    for i, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    return None


def layer_violations(graph) -> list[tuple[str, str]]:
    """Edges that go up the table of :data:`LAYERS` (support modules may be used by every layer
    and use the numerics; the package root ``posbias_nb`` is exempt)."""
    bad = []
    for m, deps in graph.items():
        lm = _layer_of(m)
        if lm is None:
            continue
        for d in deps:
            ld = _layer_of(d)
            if ld is None:
                continue
            if ld < lm and not (LAYERS[lm][0] == "support" and LAYERS[ld][0] == "numerics"):
                bad.append((m, d))
    return sorted(bad)


def test_layer_checker_rejects_an_upward_import():
    g = {"posbias_nb.measure.cached": {"posbias_nb.experiments.prompt.retrieval"},
         "posbias_nb.tasks.text": {"posbias_nb.measure.entry"},
         "posbias_nb.experiments.prompt.retrieval": {"posbias_nb.measure.entry"}}
    assert layer_violations(g) == [("posbias_nb.measure.cached", "posbias_nb.experiments.prompt.retrieval"),
                                   ("posbias_nb.tasks.text", "posbias_nb.measure.entry")]


def test_every_module_has_a_layer():
    assert [m for m in import_graph() if m != "posbias_nb" and _layer_of(m) is None] == []


def test_imports_flow_down_the_layers():
    """cli -> experiments -> measure -> models/tasks -> numerics (DESIGN.md)."""
    assert layer_violations(import_graph()) == []


@pytest.mark.parametrize("module", NUMERICS)
def test_pure_numerics_depend_on_nothing_heavy(module):
    g = import_graph()
    for layer in ("posbias_nb.models", "posbias_nb.measure", "posbias_nb.tasks",
                  "posbias_nb.experiments", "posbias_nb.cli"):
        assert not _reaches(g, module, layer), f"{module} reaches {layer}"


def test_one_way_flow():
    g = import_graph()
    assert not any(_reaches(g, m, "posbias_nb.measure") for m in g
                   if m.startswith("posbias_nb.models")), "models must not import measure"
    assert not any("posbias_nb.cli" in deps for m, deps in g.items()
                   if m not in ("posbias_nb.__main__",)), "nothing imports cli"
    assert not any(d.startswith("posbias_nb.integrations") for m, deps in g.items()
                   if not m.startswith("posbias_nb.integrations") for d in deps), \
        "nothing imports the integrations"


def test_graph_reader_sees_lazy_imports(tmp_path):
    """The reader counts an import inside a function (the counterexample a lazy cycle hides in)."""
    g = import_graph()
    # measure.cached imports models at module level; the models loader imports torch lazily:
    # a lazy package import inside a function must show up too
    assert "posbias_nb.models" in g["posbias_nb.measure.cached"]
    src = "def f():\n    from . import b\n"
    tree = ast.parse(src)
    assert any(isinstance(n, ast.ImportFrom) for n in ast.walk(tree))


def test_nothing_below_experiments_imports_it():
    g = import_graph()
    below = [m for m in g if not m.startswith(("posbias_nb.experiments",) + ENTRY)]
    assert not [m for m in below if any(d.startswith("posbias_nb.experiments") for d in g[m])]


def _module_is(m: str, *prefixes: str) -> bool:
    return any(m == p or m.startswith(p + ".") for p in prefixes)


def test_the_provenance_room_floors():
    """The provenance room (``posbias_nb.provenance``) imports nothing of the package but itself
    (issue 65, item 7), so the cache can use it for its one hook for recorded entries and its
    entry files (``provenance.entries``); its command line (``posbias_nb.provenance_cli``, which
    ``provenance/__main__`` only hands over to) sits on the entry floor and alone reaches a
    study.  No module that computes imports the room (its code counts in no namespace's
    digest): the cache, the design registry and that command alone use it."""
    g = import_graph()
    room = [m for m in g if _module_is(m, "posbias_nb.provenance")]
    assert {"posbias_nb.provenance.code", "posbias_nb.provenance.verify",
            "posbias_nb.provenance.machine", "posbias_nb.provenance.plan",
            "posbias_nb.provenance.entries", "posbias_nb.provenance.reference"} <= set(room)
    for m in room:
        if m != "posbias_nb.provenance.__main__":
            assert all(_module_is(d, "posbias_nb.provenance") for d in g[m]), (m, g[m])
    assert g["posbias_nb.provenance.__main__"] == {"posbias_nb.provenance_cli"}
    for m in room:
        if m not in ENTRY:
            for layer in ("posbias_nb.experiments", "posbias_nb.measure", "posbias_nb.models"):
                assert not _reaches(g, m, layer), f"{m} reaches {layer}"
    users = sorted(m for m, deps in g.items() if not _module_is(m, "posbias_nb.provenance")
                   and any(_module_is(d, "posbias_nb.provenance") for d in deps))
    assert users == ["posbias_nb.cache", "posbias_nb.experiments.base.design",
                     "posbias_nb.provenance_cli"], users
    # and the store keeps to its size: the provenance went to its room
    assert len((PKG / "cache.py").read_text().splitlines()) <= 400


_PRIVATE_OWNERS = ("posbias_nb.cache", "posbias_nb.provenance")


def private_uses(src: str) -> list[str]:
    """Underscore names of the cache or the provenance room that ``src`` (a file outside the
    package) imports or reads: ``from posbias_nb.cache import _x``, ``cache._x`` on a name
    bound to one of those modules."""
    bound, out = set(), []
    tree = ast.parse(src)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if _module_is(node.module, *_PRIVATE_OWNERS) and a.name.startswith("_"):
                    out.append(full)
                elif _module_is(full, *_PRIVATE_OWNERS):
                    bound.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if _module_is(a.name, *_PRIVATE_OWNERS) and a.asname:
                    bound.add(a.asname)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__") and isinstance(node.value, ast.Name) \
                and node.value.id in bound:
            out.append(f"{node.value.id}.{node.attr}")
    return out


def test_the_private_use_check_catches_one():
    assert private_uses("from posbias_nb import cache as pc\nwith pc._flock(p): pass\n") == \
        ["pc._flock"]
    assert private_uses("from posbias_nb.provenance.code import _imports\n") == \
        ["posbias_nb.provenance.code._imports"]
    assert private_uses("from posbias_nb import cache\ncache.read_entry(p)\n") == []


def test_nothing_outside_the_package_uses_a_private_name_of_the_cache_or_provenance():
    root = PKG.parent
    files = [*(root / "tests").rglob("*.py"), *(root / "bench").glob("*.py"),
             *(root / "book").glob("*.py")]
    bad = {str(f.relative_to(root)): u for f in files for u in [private_uses(f.read_text())] if u}
    assert not bad, bad


def sibling_private_uses(source: str, siblings) -> list[str]:
    """The private names of sibling modules (``siblings``) that ``source``, a module of the
    same package, uses: ``from .x import _y`` and ``x._y`` where ``x`` is a sibling imported
    by ``from . import x [as a]``."""
    tree = ast.parse(source)
    alias, out = {}, []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.level == 1:
            if n.module is None:
                alias.update({a.asname or a.name: a.name for a in n.names if a.name in siblings})
            elif n.module in siblings:
                out += [f"{n.module}.{a.name}" for a in n.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and \
                n.value.id in alias and n.attr.startswith("_") and not n.attr.startswith("__"):
            out.append(f"{alias[n.value.id]}.{n.attr}")
    return sorted(set(out))


def test_the_sibling_private_check_catches_one():
    sib = {"task", "retrieval"}
    assert sibling_private_uses("from . import task as t\nt._encode(c, x)\n", sib) == \
        ["task._encode"]
    assert sibling_private_uses("from .retrieval import _load, run_params\n", sib) == \
        ["retrieval._load"]
    assert sibling_private_uses("from . import study\nstudy.encode(c, x)\n", sib) == []


def test_no_study_uses_another_studys_private_names():
    """Issue 56: what studies share is public (experiments.base.study and each module's public
    functions); none reaches into another's underscore names."""
    folder = PKG / "experiments"
    sib = {f.stem for f in folder.glob("*.py") if f.stem != "__init__"}
    bad = {f.name: u for f in sorted(folder.glob("*.py"))
           for u in [sibling_private_uses(f.read_text(), sib - {f.stem})] if u}
    assert not bad, bad


def test_tasks_reach_no_model_code():
    g = import_graph()
    for m in [m for m in g if m.startswith("posbias_nb.tasks")]:
        for layer in ("posbias_nb.models", "posbias_nb.measure", "posbias_nb.experiments"):
            assert not _reaches(g, m, layer), f"{m} reaches {layer}"


def test_tasks_import_no_torch():
    code = ("import sys; import posbias_nb.tasks, posbias_nb.tasks.text, "
            "posbias_nb.tasks.kv_needle, posbias_nb.tasks.synthetic, posbias_nb.tasks.qa; "
            "bad = [m for m in ('torch', 'transformers') if m in sys.modules]; "
            "print(','.join(bad)); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, f"importing tasks loaded: {r.stdout.strip()} {r.stderr}"


def test_numerics_import_no_torch():
    code = ("import sys; import posbias_nb.theory, posbias_nb.rollout, posbias_nb.metrics; "
            "bad = [m for m in ('torch', 'transformers') if m in sys.modules]; "
            "print(','.join(bad)); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, f"importing the numerics loaded: {r.stdout.strip()} {r.stderr}"


def test_package_imports_load_no_torch_and_register_nothing():
    code = ("import sys; from posbias_nb import models, measure, experiments, tasks, cli; "
            "print('torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"

#: Files that still edit sys.path, being rewritten by another change.
SYS_PATH_PENDING: set[str] = set()


def sys_path_edits(src: str) -> list[int]:
    """The lines of ``src`` that edit the import path: a call of ``<x>.path.insert``,
    ``.append`` or ``.extend``, pytest's ``syspath_prepend``, or such a call in a string of code
    run elsewhere (a subprocess, a kernel's startup file)."""
    import re

    out = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr == "syspath_prepend"
                or (node.func.attr in ("insert", "append", "extend")
                    and isinstance(node.func.value, ast.Attribute)
                    and node.func.value.attr == "path")):
            out.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                re.search(r"\bpath\.(insert|append|extend)\(", node.value):
            out.append(node.lineno)
    return out


def test_the_sys_path_check_catches_an_edit():
    assert sys_path_edits("import sys\nsys.path.insert(0, 'x')\n") == [2]
    assert sys_path_edits("def t(monkeypatch):\n    monkeypatch.syspath_prepend('x')\n") == [2]
    assert sys_path_edits("code = 'import sys; sys.path.insert(0, d)'\n") == [1]
    assert sys_path_edits("import os\nos.path.join('a', 'b')\n") == []


def test_no_sys_path_edits_in_tests_bench_or_book():
    """tests/, bench/ and book/ import what they share as modules of the repository (pytest's
    ``pythonpath``, a script's own folder), or load a file by its path: none edits sys.path."""
    root = PKG.parent
    files = [*(root / "tests").rglob("*.py"), *(root / "bench").glob("*.py"),
             *(root / "book").glob("*.py")]
    bad = {str(f.relative_to(root)): n for f in files for n in [sys_path_edits(f.read_text())]
           if n and f.name != "test_layering.py"}
    assert set(bad) <= SYS_PATH_PENDING, {k: v for k, v in bad.items()
                                          if k not in SYS_PATH_PENDING}


#: The floors inside ``experiments``, from the top down (issue 65): a study imports only its own
#: floor or lower ones; ``born`` and ``prompt`` stand side by side on the same level and import
#: neither each other nor anything above the base.
FLOORS = (("report", ("posbias_nb.experiments.report",)),
          ("remedy", ("posbias_nb.experiments.remedy",)),
          ("born/prompt", ("posbias_nb.experiments.born", "posbias_nb.experiments.prompt")),
          ("base", ("posbias_nb.experiments.base",)))


def _floor_of(module: str):
    for i, (_, prefixes) in enumerate(FLOORS):
        for p in prefixes:
            if module == p or module.startswith(p + "."):
                return i, p
    return None


def floor_violations(graph) -> list[tuple[str, str]]:
    """Edges between studies that go up the floors of :data:`FLOORS`, or across from ``born``
    to ``prompt`` (or back)."""
    bad = []
    for m, deps in graph.items():
        fm = _floor_of(m)
        if fm is None:
            continue
        for d in deps:
            fd = _floor_of(d)
            if fd is None:
                continue
            if fd[0] < fm[0] or (fd[0] == fm[0] and fd[1] != fm[1]):
                bad.append((m, d))
    return sorted(bad)


def test_floor_checker_rejects_an_upward_and_a_sideways_import():
    g = {"posbias_nb.experiments.base.study": {"posbias_nb.experiments.prompt.retrieval"},
         "posbias_nb.experiments.born.scale": {"posbias_nb.experiments.prompt.realqa",
                                              "posbias_nb.experiments.base.design"},
         "posbias_nb.experiments.remedy.fix.run": {"posbias_nb.experiments.prompt.placement"}}
    assert floor_violations(g) == [
        ("posbias_nb.experiments.base.study", "posbias_nb.experiments.prompt.retrieval"),
        ("posbias_nb.experiments.born.scale", "posbias_nb.experiments.prompt.realqa")]


def test_every_study_sits_on_a_floor_and_imports_flow_down_them():
    g = import_graph()
    loose = [m for m in g if m.startswith("posbias_nb.experiments.")
             and _floor_of(m) is None]
    assert loose == [], loose
    assert floor_violations(g) == []
