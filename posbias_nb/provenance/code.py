"""Code identity: the one code hasher, for the cache's namespaces and the design registry.

**A namespace's code.**  Each cached namespace declares the modules that compute it
(:data:`NAMESPACE_CODE`); :func:`code_digest` hashes their source and that of every module of the
package they import (at any depth, inside functions too, package ``__init__`` files included),
normalised by the ``ast`` module (:func:`normalised_source`) so that comments, docstrings and
formatting do not count.  The modules that only present, store or check results
(:data:`NOT_COMPUTING`) stay out.  ``make record`` writes the digest beside every recorded
entry; ``make test`` re-measures more of a namespace whose digest changed since
(:mod:`posbias_nb.provenance.plan`).

**A study's verdict code.**  :func:`normalised_code` is what counts of one function, class or
constant by the same rule; :func:`posbias_nb.experiments.design.code_hash` hashes the verdict
code of a study with it.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import textwrap
from pathlib import Path
from typing import Mapping

__all__ = ["NAMESPACE_CODE", "NOT_COMPUTING", "normalised_source", "normalised_code",
           "package_files", "code_modules", "code_digest"]

#: The modules of ``posbias_nb`` (dotted, relative to the package) that compute each cached
#: namespace: the module that calls the cache, whose imports :func:`code_modules` follows.
#: ``tests/unit/support/test_provenance.py`` checks that every namespace the package caches under is declared
#: and that its calling module is among its roots.
NAMESPACE_CODE: dict[str, tuple[str, ...]] = {
    "capture-influence": ("measure.cached",),
    "capture-win": ("measure.cached",),
    "profile": ("measure.cached",),
    "profile-shared": ("measure.cached",),
    "init-logits": ("measure.logits",),
    "fix-test": ("experiments.fix", "experiments.placement"),
    "fix-tune": ("experiments.fix", "experiments.placement"),
    "fix-fast": ("experiments.fix_fast",),
    "inference-channel": ("experiments.inference",),
    "inference-channel-cli": ("experiments.inference",),
    "inference-cost": ("experiments.inference",),
    "inference-diagnostic": ("experiments.inference",),
    "inference-prior": ("experiments.inference",),
    "inference-prior-fit": ("experiments.inference",),
    "inference-retrieval": ("experiments.inference",),
    "inference-task": ("experiments.inference",),
    "layouts-ablation": ("experiments.born_layouts",),
    "layouts-layout": ("experiments.born_layouts",),
    "realqa-jacobian": ("experiments.realqa",),
    "replay": ("experiments.replay",),
    "report": ("experiments.report.run",),
    "report-remedy": ("experiments.report.measurements",),
    "report-spans": ("experiments.report.measurements",),
    "retrieval": ("experiments.retrieval",),
    "retrieval-link": ("experiments.retrieval",),
    "born-scales-arch": ("experiments.born_scales",),
    "scale-gpu": ("experiments.scale",),
    "scale-layout": ("experiments.scale",),
    "confirm": ("experiments.confirm",),
    "pipeline": ("experiments.pipeline",),
    "pipeline-retrieve": ("experiments.pipeline",),
    "task": ("experiments.task",),
    "train": ("experiments.training",),
    "train-init": ("experiments.training",),
    "train-twin": ("experiments.training",),
}

#: Modules that present, store, register or check results and compute none of them: a change
#: there moves no recorded number, so it does not count as a change of any namespace's code.
#: The provenance room is among them: it hashes, compares and plans, and computes no entry.
NOT_COMPUTING = frozenset({"cache", "plots", "notebook", "cli", "__main__", "experiments.design",
                           "rollout.explorer", "experiments.pages",
                           "experiments.report.drawing", "experiments.report.page",
                           "provenance", "provenance.code",
                           "provenance.verify", "provenance.machine", "provenance.plan",
                           "provenance.record", "provenance.reference", "provenance_cli",
                           "provenance.entries",
                           "provenance.stamps", "provenance.fanout",
                           "provenance.__main__"})

_PKG = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=1024)
def normalised_source(source: str) -> str:
    """The source of a module as ``ast`` sees it, docstrings removed: comments, blank lines,
    formatting and docstrings leave it unchanged; any change of what runs changes it."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=True, include_attributes=False)


def normalised_code(obj) -> str:
    """What counts of ``obj``: a function's or class's source by :func:`normalised_source`
    (dedented; docstrings and comments dropped), or the ``repr`` of a constant (the design
    registry's verdict code, :func:`posbias_nb.experiments.design.code_hash`)."""
    if inspect.isfunction(obj) or inspect.isclass(obj):
        return normalised_source(textwrap.dedent(inspect.getsource(obj)))
    return repr(obj)


def package_files(files: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{dotted module: source}`` of the package: today's files, or ``files`` (``{path relative
    to the package: source}``, e.g. read from an earlier commit)."""
    if files is None:
        files = {str(p.relative_to(_PKG)): p.read_text() for p in _PKG.rglob("*.py")}
    out = {}
    for rel, src in files.items():
        parts = rel[:-3].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = src
    return out


@functools.lru_cache(maxsize=1024)
def _parsed(src: str) -> ast.Module:
    return ast.parse(src)


def _imports(mod: str, src: str, known: set[str]) -> set[str]:
    """The package modules that ``mod`` imports (relative or absolute, at any depth of its code)."""
    out = set()
    pkg_parts = mod.split(".") if mod else []

    def resolve(base: list[str], name: str | None) -> None:
        dotted = ".".join(base + ([name] if name else []))
        if name and dotted in known:
            out.add(dotted)
        elif ".".join(base) in known:
            out.add(".".join(base))

    tree = _parsed(src)
    # a package's own ``from . import x`` resolves against itself
    is_pkg = mod == "" or any(k.startswith(mod + ".") for k in known)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                here = pkg_parts if is_pkg else pkg_parts[:-1]
                base = here[:len(here) - (node.level - 1)] if node.level > 1 else here
                base = base + (node.module.split(".") if node.module else [])
            elif node.module and (node.module == "posbias_nb"
                                  or node.module.startswith("posbias_nb.")):
                base = node.module.split(".")[1:]
            else:
                continue
            for a in node.names:
                resolve(base, a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("posbias_nb."):
                    resolve(a.name.split(".")[1:], None)
    return out


def code_modules(namespace: str, files: Mapping[str, str] | None = None) -> list[str]:
    """The modules whose code computes ``namespace``: its declared roots and every package module
    they import, with the ``__init__`` of every package on the way (its own source, not what it
    imports for others), less :data:`NOT_COMPUTING`
    (dotted, relative to the package; ``""`` is the package's own ``__init__``)."""
    if namespace not in NAMESPACE_CODE:
        raise ValueError(f"namespace {namespace!r} declares no code "
                         "(posbias_nb.provenance.code.NAMESPACE_CODE)")
    srcs = package_files(files)
    known = set(srcs)
    seen: set[str] = set()
    todo = [m for m in NAMESPACE_CODE[namespace] if m in known]
    while todo:
        m = todo.pop()
        if m in seen or m in NOT_COMPUTING:
            continue
        seen.add(m)
        todo += sorted(_imports(m, srcs[m], known))
    # the __init__ of each package on the way runs too: its own code counts, not what it imports
    # for others (a package that imports all its modules would otherwise tie every one of them
    # to every namespace under it)
    for m in list(seen):
        parts = m.split(".") if m else []
        seen |= {".".join(parts[:i]) for i in range(len(parts))
                 if ".".join(parts[:i]) in known and ".".join(parts[:i]) not in NOT_COMPUTING}
    return sorted(seen)


def code_digest(namespace: str, files: Mapping[str, str] | None = None) -> str:
    """SHA-256 (hex) of the normalised source (:func:`normalised_source`) of
    :func:`code_modules` of ``namespace``: today's, or of ``files`` (an earlier commit's). A
    declared root missing from the files counts as part of the code (its absence changes the
    digest)."""
    srcs = package_files(files)
    h = hashlib.sha256()
    for m in NAMESPACE_CODE.get(namespace, ()):
        if m not in srcs:
            h.update(f"missing {m}\n".encode())
    for m in code_modules(namespace, files):
        h.update(f"{m}\n".encode())
        h.update(normalised_source(srcs[m]).encode())
    return h.hexdigest()
