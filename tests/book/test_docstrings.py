"""Docstrings feed the API page: a backslash escape in a non-raw docstring (``\\a`` in
``:math:`\\alpha``` is a BEL character) breaks its math silently, so none may hold one."""
import importlib
import importlib.util
import inspect
import pkgutil
import sys

import posbias_nb

CONTROL = "\x07\x08\x0b\x0c\r"


def _control_chars(doc: str) -> bool:
    return any(c in (doc or "") for c in CONTROL)


def test_the_check_catches_an_escape():
    def f():
        """The share :math:`\alpha`."""  # noqa: the counterexample: \a is BEL here

    def g():
        r"""The share :math:`\alpha`."""

    assert _control_chars(f.__doc__) and not _control_chars(g.__doc__)


def test_no_docstring_of_the_package_holds_a_control_character():
    bad = []
    for m in pkgutil.walk_packages(posbias_nb.__path__, "posbias_nb."):
        if m.name.endswith("__main__"):
            continue
        mod = importlib.import_module(m.name)
        objs = [("(module)", mod)] + [
            (n, o) for n, o in vars(mod).items()
            if (inspect.isfunction(o) or inspect.isclass(o)) and o.__module__ == m.name]
        for n, o in objs:
            if _control_chars(o.__doc__):
                bad.append(f"{m.name}.{n}")
            if inspect.isclass(o):
                bad += [f"{m.name}.{n}.{k}" for k, v in vars(o).items()
                        if inspect.isfunction(v) and _control_chars(v.__doc__)]
    assert not bad, bad


import re  # noqa: E402
from pathlib import Path  # noqa: E402

# a cross-reference role whose target runs onto the next line: Sphinx reads the target with the
# line break in it and finds nothing (the book build's -W then fails on the API page)
_BROKEN_ROLE = re.compile(r":(?:func|mod|class|meth|data|attr|ref):`[^`\n]*\n")


def test_the_role_check_catches_a_target_broken_across_lines():
    assert _BROKEN_ROLE.search("scored under it (:func:`posbias_nb.experiments.remedy.inference.\n"
                               "        retrieval_remedy_run`)")
    assert not _BROKEN_ROLE.search("scored under it\n"
                                   "(:func:`~posbias_nb.experiments.remedy.inference.x`); next line")


def test_no_cross_reference_of_the_package_breaks_across_lines():
    root = Path(posbias_nb.__file__).resolve().parent
    bad = [f"{p.relative_to(root)}:{src[:m.start()].count(chr(10)) + 1}"
           for p in sorted(root.rglob("*.py")) for src in [p.read_text()]
           for m in _BROKEN_ROLE.finditer(src)]
    assert not bad, bad


def _api_modules(text: str) -> set[str]:
    import re
    return set(re.findall(r"^\.\. automodule:: (\S+)", text, flags=re.M))


def _public_modules() -> set[str]:
    return {m.name for m in pkgutil.walk_packages(posbias_nb.__path__, "posbias_nb.")
            if not any(part.startswith("_") for part in m.name.split("."))}


def test_every_public_module_is_on_an_api_page():
    """The API reference (``book/api/``, one page per subpackage) documents every public
    module of the package: a new module missing from it fails here."""
    from pathlib import Path

    pages = sorted((Path(__file__).resolve().parents[2] / "book" / "api").glob("*.md"))
    assert len(pages) >= 8, pages
    shown = set().union(*(_api_modules(p.read_text()) for p in pages))
    assert not _public_modules() - shown, sorted(_public_modules() - shown)
    assert not shown - _public_modules() - {"posbias_nb"}, sorted(shown - _public_modules())


def test_the_api_check_finds_a_missing_module():
    page = ".. automodule:: posbias_nb.stats\n   :members:\n\n.. automodule:: posbias_nb.cli\n"
    assert _api_modules(page) == {"posbias_nb.stats", "posbias_nb.cli"}
    assert "posbias_nb.metrics" in _public_modules() - _api_modules(page)


def _unlisted(pkg) -> list[str]:
    """The public modules of package ``pkg`` that its docstring does not name."""
    import re

    subs = [s.name for s in pkgutil.iter_modules(pkg.__path__) if not s.name.startswith("_")]
    return [s for s in subs if not re.search(rf"(\.|`|\b){s}\b", pkg.__doc__ or "")]


def test_every_package_docstring_lists_what_is_there():
    """Issue 56: a package's ``__init__`` says what each of its modules is for; a module added
    without a line there fails here."""
    bad = {}
    for m in pkgutil.walk_packages(posbias_nb.__path__, "posbias_nb."):
        if m.ispkg:
            missing = _unlisted(importlib.import_module(m.name))
            if missing:
                bad[m.name] = missing
    assert not bad, bad


def test_the_listing_check_finds_an_unlisted_module():
    import types

    import posbias_nb.experiments.remedy as ex

    pkg = types.SimpleNamespace(__path__=ex.__path__, __doc__=":mod:`.fix` only")
    assert "confirm" in _unlisted(pkg) and "fix" not in _unlisted(pkg)


#: Where a test file may be named for a reader: the package, the docs, the README, the bench
#: scripts and the Makefile (the design registry's reasons are history, kept as written).
_NAMING = ("posbias_nb/**/*.py", "docs/**/*.md", "README.md", "bench/*.py", "Makefile",
           "book/*.md")
_TEST_PATH = re.compile(r"\btests/[A-Za-z0-9_/]+\.py\b")


def _stale_test_paths(root: Path) -> list[str]:
    out = []
    for pattern in _NAMING:
        for f in sorted(root.glob(pattern)):
            for path in sorted(set(_TEST_PATH.findall(f.read_text(encoding="utf-8")))):
                if not (root / path).is_file():
                    out.append(f"{f.relative_to(root)} names {path}, which does not exist")
    return out


def test_every_test_file_named_for_a_reader_exists():
    """A docstring or page that says which test checks a claim names a file that is there
    (the tests moved into rooms once; two docstrings kept naming the old flat paths)."""
    assert _stale_test_paths(Path(__file__).resolve().parents[2]) == []


def test_the_test_path_check_finds_a_stale_name(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_here.py").write_text("")
    (tmp_path / "README.md").write_text("see tests/test_here.py and tests/test_gone.py\n")
    assert _stale_test_paths(tmp_path) == ["README.md names tests/test_gone.py, which does not "
                                           "exist"]


def shadowed(package) -> list[str]:
    """The submodules of ``package`` (at any depth) whose dotted name its package binds to
    something else (a function ``recipes`` re-exported beside a module ``recipes``): the API
    pages would then describe two objects under one name, which fails the book build."""
    out = []
    for m in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if m.name.endswith("__main__"):  # a command line: importing it runs it
            continue
        parent, _, leaf = m.name.rpartition(".")
        mod = importlib.import_module(m.name)
        if getattr(importlib.import_module(parent), leaf, None) is not mod:
            out.append(m.name)
    return out


def test_the_shadow_check_catches_a_name_bound_over_a_submodule(tmp_path, monkeypatch):
    pkg = tmp_path / "toypkg_shadow"
    pkg.mkdir()
    (pkg / "recipes.py").write_text("def recipes():\n    return 1\n")
    (pkg / "other.py").write_text("X = 1\n")
    (pkg / "__init__.py").write_text("from .recipes import recipes\nfrom . import other\n")
    # loaded by its path (tests edit no sys.path), its submodules found through __path__
    spec = importlib.util.spec_from_file_location("toypkg_shadow", pkg / "__init__.py",
                                                  submodule_search_locations=[str(pkg)])
    toy = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "toypkg_shadow", toy)
    try:
        spec.loader.exec_module(toy)
        assert shadowed(toy) == ["toypkg_shadow.recipes"]
    finally:
        for name in [n for n in sys.modules if n.startswith("toypkg_shadow.")]:
            del sys.modules[name]


def test_no_submodule_of_the_package_is_shadowed_by_a_name_of_its_package():
    assert shadowed(posbias_nb) == []
