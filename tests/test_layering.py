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

PKG = Path(__file__).resolve().parents[1] / "posbias_nb"
NUMERICS = ("posbias_nb.theory", "posbias_nb.rollout", "posbias_nb.metrics", "posbias_nb.stats")
#: The layers from the top down (DESIGN.md): a module may import only its own layer or lower ones.
LAYERS = (
    ("cli", ("posbias_nb.cli", "posbias_nb.__main__", "posbias_nb.integrations")),
    ("experiments", ("posbias_nb.experiments",)),
    ("measure", ("posbias_nb.measure",)),
    ("models/tasks", ("posbias_nb.models", "posbias_nb.tasks")),
    ("numerics", ("posbias_nb.theory", "posbias_nb.rollout", "posbias_nb.metrics",
                  "posbias_nb.stats")),
    ("support", ("posbias_nb.cache", "posbias_nb.plots", "posbias_nb.notebook",
                 "posbias_nb.results", "posbias_nb._validate", "posbias_nb.data")),
)


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
    g = {"posbias_nb.measure.cached": {"posbias_nb.experiments.retrieval"},
         "posbias_nb.tasks.text": {"posbias_nb.measure.entry"},
         "posbias_nb.experiments.retrieval": {"posbias_nb.measure.entry"}}
    assert layer_violations(g) == [("posbias_nb.measure.cached", "posbias_nb.experiments.retrieval"),
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
    below = [m for m in g if not m.startswith(("posbias_nb.experiments", "posbias_nb.cli",
                                               "posbias_nb.__main__", "posbias_nb.integrations"))]
    assert not [m for m in below if any(d.startswith("posbias_nb.experiments") for d in g[m])]


def test_tasks_reach_no_model_code():
    g = import_graph()
    for m in [m for m in g if m.startswith("posbias_nb.tasks")]:
        for layer in ("posbias_nb.models", "posbias_nb.measure", "posbias_nb.experiments"):
            assert not _reaches(g, m, layer), f"{m} reaches {layer}"


def test_tasks_import_no_torch():
    code = ("import sys; import posbias_nb.tasks, posbias_nb.tasks.text, "
            "posbias_nb.tasks.retrieval, posbias_nb.tasks.synthetic, posbias_nb.tasks.qa; "
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
