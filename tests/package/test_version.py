"""The version lives in one place, a module that imports nothing (issue 65, item 7)."""
import ast
import tomllib
from pathlib import Path

import posbias_nb
from posbias_nb import _version

ROOT = Path(__file__).resolve().parents[2]


def imports_of(src: str) -> list[str]:
    return [ast.dump(n) for n in ast.walk(ast.parse(src)) if isinstance(n, (ast.Import,
                                                                              ast.ImportFrom))]


def test_the_version_module_imports_nothing_and_is_the_packages_and_the_builds():
    assert imports_of((ROOT / "posbias_nb" / "_version.py").read_text()) == []
    assert posbias_nb.__version__ == _version.__version__
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in meta["project"] and "version" in meta["project"]["dynamic"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "posbias_nb._version.__version__"}


def test_the_import_check_sees_one():
    assert imports_of("import os\n__version__ = '1'\n") != []
