"""Code identity: the one code hasher, for the cache's namespaces and the design registry.

**A namespace's code.**  Each cached namespace declares the modules that compute it
(:data:`NAMESPACE_CODE`); :func:`code_digest` hashes what they reach: the top-level statements of
the package they lead to by the names they read, at any depth, with the statements that act when
their module runs, and the names that tie them (:mod:`posbias_nb.provenance.reach`), each
statement normalised by the ``ast`` module (:func:`normalised_source`) so that comments,
docstrings and formatting do not count, none keyed by the module it sits in.  So a function moved
to another module, a module renamed, or a page's sentence edited beside a measurement leaves the
digest; any change of a statement the namespace reaches, or of what a name it reads means, moves
it.  The modules that only present, store or check results (:data:`NOT_COMPUTING`) stay out.
``make record`` writes the digest beside every recorded entry; ``make test`` re-measures more of a
namespace whose digest changed since (:mod:`posbias_nb.provenance.plan`).  The rule has a name
(:data:`DIGEST_RULE`) that ``recorded/MANIFEST.json`` carries; the digests stored under an
earlier rule (:func:`file_digest`: every imported module hashed whole) were carried over by
``python -m posbias_nb.provenance migrate-digests`` (:mod:`posbias_nb.provenance.migrate`), each
only where the files of its commit, or today's, digest to it by that rule.

**A study's verdict code.**  :func:`normalised_code` is what counts of one function, class or
constant by the same rule; :func:`posbias_nb.experiments.base.design.code_hash` hashes the verdict
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

from . import reach

__all__ = ["NAMESPACE_CODE", "NOT_COMPUTING", "normalised_source", "normalised_code",
           "package_files", "source_files", "code_modules", "reaches", "narrows", "code_digest", "import_closure",
           "file_digest", "declared_roots", "candidate_roots", "FORMER_ROOTS", "DIGEST_RULE",
           "unresolved"]

#: The modules of ``posbias_nb`` (dotted, relative to the package) that compute each cached
#: namespace: the module that calls the cache, whose imports :func:`code_modules` follows.
#: ``tests/unit/support/test_provenance.py`` checks that every namespace the package caches under is declared
#: and that its calling module is among its roots.  A literal (no names, no expressions): a later
#: commit's roots are read from its files by :func:`declared_roots` (``ast.literal_eval``).
NAMESPACE_CODE: dict[str, tuple[str, ...]] = {
    "capture-influence": ("measure.cached",),
    "capture-win": ("measure.cached",),
    "profile": ("measure.cached",),
    "profile-shared": ("measure.cached",),
    "init-logits": ("measure.logits",),
    "fix-test": ("experiments.remedy.fix.config", "experiments.remedy.fix.parts", "experiments.remedy.fix.scoring",
                 "experiments.remedy.fix.tune", "experiments.remedy.fix.cost", "experiments.remedy.fix.judge",
                 "experiments.remedy.fix.words", "experiments.remedy.fix.run", "experiments.prompt.placement.config",
                 "experiments.prompt.placement.measurements", "experiments.prompt.placement.statistics"),
    "fix-tune": ("experiments.remedy.fix.config", "experiments.remedy.fix.parts", "experiments.remedy.fix.scoring",
                 "experiments.remedy.fix.tune", "experiments.remedy.fix.cost", "experiments.remedy.fix.judge",
                 "experiments.remedy.fix.words", "experiments.remedy.fix.run", "experiments.prompt.placement.config",
                 "experiments.prompt.placement.measurements", "experiments.prompt.placement.statistics"),
    "fix-fast": ("experiments.remedy.fix_fast.config", "experiments.remedy.fix_fast.statistics",
                 "experiments.remedy.fix_fast.measurements", "experiments.remedy.fix_fast.run"),
    "inference-channel": ("experiments.remedy.inference.config", "experiments.remedy.inference.measurements",
                          "experiments.remedy.inference.statistics", "experiments.remedy.inference.commands"),
    "inference-channel-cli": ("experiments.remedy.inference.config", "experiments.remedy.inference.measurements",
                          "experiments.remedy.inference.statistics", "experiments.remedy.inference.commands"),
    "inference-cost": ("experiments.remedy.inference.config", "experiments.remedy.inference.measurements",
                          "experiments.remedy.inference.statistics", "experiments.remedy.inference.commands"),
    "inference-diagnostic": ("experiments.remedy.inference.config", "experiments.remedy.inference.measurements",
                          "experiments.remedy.inference.statistics", "experiments.remedy.inference.commands"),
    "inference-prior": ("experiments.remedy.inference.config", "experiments.remedy.inference.measurements",
                          "experiments.remedy.inference.statistics", "experiments.remedy.inference.commands"),
    "inference-prior-fit": ("experiments.remedy.inference.config", "experiments.remedy.inference.measurements",
                          "experiments.remedy.inference.statistics", "experiments.remedy.inference.commands"),
    "inference-retrieval": ("experiments.remedy.inference.config", "experiments.remedy.inference.measurements",
                          "experiments.remedy.inference.statistics", "experiments.remedy.inference.commands"),
    "inference-task": ("experiments.remedy.inference.config", "experiments.remedy.inference.measurements",
                          "experiments.remedy.inference.statistics", "experiments.remedy.inference.commands"),
    "layouts-ablation": ("experiments.born.born_layouts.config", "experiments.born.born_layouts.measurements",
                         "experiments.born.born_layouts.statistics"),
    "layouts-layout": ("experiments.born.born_layouts.config", "experiments.born.born_layouts.measurements",
                       "experiments.born.born_layouts.statistics"),
    "realqa-jacobian": ("experiments.prompt.realqa.config", "experiments.prompt.realqa.measurements",
                        "experiments.prompt.realqa.statistics"),
    "replay": ("experiments.born.replay.measurements", "experiments.born.replay.statistics"),
    "report": ("experiments.report.run",),
    "report-remedy": ("experiments.report.measurements",),
    "report-spans": ("experiments.report.measurements",),
    "retrieval": ("experiments.prompt.retrieval.config", "experiments.prompt.retrieval.statistics",
                   "experiments.prompt.retrieval.measurements"),
    "retrieval-link": ("experiments.prompt.retrieval.config", "experiments.prompt.retrieval.statistics",
                   "experiments.prompt.retrieval.measurements"),
    "born-scales-arch": ("experiments.born.born_scales.config", "experiments.born.born_scales.measurements",
                         "experiments.born.born_scales.statistics", "experiments.born.born_scales.words",
                         "experiments.born.born_scales.published"),
    "scale-gpu": ("experiments.born.scale.config", "experiments.born.scale.measurements",
                  "experiments.born.scale.statistics", "experiments.born.scale.gpu",
                  "experiments.born.scale.words", "experiments.born.scale.records"),
    "scale-layout": ("experiments.born.scale.config", "experiments.born.scale.measurements",
                  "experiments.born.scale.statistics", "experiments.born.scale.gpu",
                  "experiments.born.scale.words", "experiments.born.scale.records"),
    "confirm": ("experiments.remedy.confirm.config", "experiments.remedy.confirm.measurements",
                "experiments.remedy.confirm.statistics", "experiments.remedy.confirm.words"),
    "pipeline": ("experiments.remedy.pipeline.config", "experiments.remedy.pipeline.measurements",
                 "experiments.remedy.pipeline.statistics", "experiments.remedy.pipeline.words"),
    "pipeline-retrieve": ("experiments.remedy.pipeline.config", "experiments.remedy.pipeline.measurements",
                          "experiments.remedy.pipeline.statistics", "experiments.remedy.pipeline.words"),
    "task": ("experiments.prompt.user_task.config", "experiments.prompt.user_task.statistics",
             "experiments.prompt.user_task.measurements"),
    "train": ("experiments.remedy.lab.config", "experiments.remedy.lab.statistics", "experiments.remedy.lab.measurements", "experiments.remedy.lab.words"),
    "train-init": ("experiments.remedy.lab.config", "experiments.remedy.lab.statistics", "experiments.remedy.lab.measurements", "experiments.remedy.lab.words"),
    "train-twin": ("experiments.remedy.lab.config", "experiments.remedy.lab.statistics", "experiments.remedy.lab.measurements", "experiments.remedy.lab.words"),
}

#: Modules that present, store, register or check results and compute none of them: a change
#: there moves no recorded number, so it does not count as a change of any namespace's code.
#: The provenance room is among them: it hashes, compares and plans, and computes no entry.
NOT_COMPUTING = frozenset({"cache", "plots", "notebook", "cli", "__main__", "experiments.base.design",
                           # the design's own modules: its frozen values, verdict rules, digests, history
                           "experiments.base.frozen", "experiments.base.rules", "experiments.base.digests",
                           "experiments.base.history",
                           "rollout.explorer", "experiments.base.pages",
                           "experiments.report.drawing", "experiments.report.page",
                           "experiments.remedy.fix.page",
                           "provenance", "provenance.code",
                           "provenance.verify", "provenance.machine", "provenance.plan",
                           "provenance.record", "provenance.reference", "provenance_cli",
                           "provenance.entries",
                           "provenance.stamps", "provenance.fanout", "provenance.reach", "provenance.migrate",
                           "provenance.__main__",
                           # their paths before the studies moved to floors (issue 65): an
                           # earlier commit's code is read with them
                           "experiments.design", "experiments.pages", "experiments.fix.page"})

_PKG = Path(__file__).resolve().parents[1]

#: The rule :func:`code_digest` follows; ``recorded/MANIFEST.json`` says which rule its digests
#: follow (``digest_rule``), and ``python -m posbias_nb.provenance migrate-digests`` carries them
#: over to a new one (:mod:`posbias_nb.provenance.migrate`).
DIGEST_RULE = "reach-v3"
#: The rules :func:`code_digest` can still follow, to carry digests from one to the next:
#: ``reach-v1`` hashed every statement by its text; ``reach-v2`` hashes a constant that is plain
#: data by its value (:meth:`posbias_nb.provenance.reach.Index.folded`), and a read of what
#: computes nothing (:data:`NOT_COMPUTING`) by the name read, not the module it lives in;
#: ``reach-v3`` hashes a top-level function by its code, not its name (every read of it is
#: already an edge to its code), unless the package reads a function's name as data
#: (:attr:`posbias_nb.provenance.reach.Index.reflects`): a function renamed with its readers
#: is the same code.
RULES = ("reach-v1", "reach-v2", "reach-v3")


@functools.lru_cache(maxsize=1024)
def normalised_source(source: str) -> str:
    """The source of a module as ``ast`` sees it, docstrings removed: comments, blank lines,
    formatting and docstrings leave it unchanged; any change of what runs changes it."""
    tree = ast.parse(source)
    reach.strip_docstrings(tree)
    return ast.dump(tree, annotate_fields=True, include_attributes=False)


def normalised_code(obj) -> str:
    """What counts of ``obj``: a function's or class's source by :func:`normalised_source`
    (dedented; docstrings and comments dropped), or the ``repr`` of a constant (the design
    registry's verdict code, :func:`posbias_nb.experiments.base.design.code_hash`)."""
    if inspect.isfunction(obj) or inspect.isclass(obj):
        return normalised_source(textwrap.dedent(inspect.getsource(obj)))
    return repr(obj)


def source_files() -> dict[str, str]:
    """``{path relative to the package: source}`` of today's files (the form ``files`` takes)."""
    return {str(p.relative_to(_PKG)): p.read_text() for p in _PKG.rglob("*.py")}


def package_files(files: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{dotted module: source}`` of the package: today's files, or ``files`` (``{path relative
    to the package: source}``, e.g. read from an earlier commit)."""
    if files is None:
        files = source_files()
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


def declared_roots(files: Mapping[str, str]) -> dict[str, tuple[str, ...]] | None:
    """The :data:`NAMESPACE_CODE` that ``files`` (``{path relative to the package: source}``,
    e.g. an earlier commit's) declare themselves, or None where they declare none: the roots
    their own digests were computed from."""
    for rel in ("provenance/code.py", "cache.py"):
        src = files.get(rel)
        if not src:
            continue
        for node in ast.parse(src).body:
            target = node.target if isinstance(node, ast.AnnAssign) else (
                node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1
                else None)
            if isinstance(target, ast.Name) and target.id == "NAMESPACE_CODE" and node.value:
                try:
                    return {k: tuple(v) for k, v in ast.literal_eval(node.value).items()}
                except ValueError:  # not a literal: roots that cannot be read are none known
                    return {}
    return None


#: The roots namespaces had in commits that declared none themselves (before this table lived in
#: the code), where a module has been renamed since: ``experiments/remedies.py`` is today's
#: ``experiments/remedy/lab/``, ``experiments/layouts.py`` today's ``born/born_layouts.py`` (a
#: commit that declares its roots is read with its own); and the roots every namespace had before
#: the studies moved to floors of ``experiments/`` (issue 65).  A digest
#: of such a commit's code is tried from these as well as from today's roots
#: (:func:`candidate_roots`); a wrong guess matches no stored digest, it cannot fake one.
FORMER_ROOTS: dict[str, tuple[tuple[str, ...], ...]] = {
    "train": (("experiments.remedies",), ("experiments.training",), ("experiments.remedy.lab",)),
    "train-init": (("experiments.remedies",), ("experiments.training",), ("experiments.remedy.lab",)),
    "train-twin": (("experiments.remedies",), ("experiments.training",), ("experiments.remedy.lab",)),
    "layouts-ablation": (("experiments.layouts",), ("experiments.born_layouts",),
                         ("experiments.born.born_layouts",)),
    "layouts-layout": (("experiments.layouts",), ("experiments.born_layouts",),
                       ("experiments.born.born_layouts",)),
    "fix-test": (("experiments.fix.config", "experiments.fix.parts", "experiments.fix.scoring", "experiments.fix.tune", "experiments.fix.cost", "experiments.fix.judge", "experiments.fix.words", "experiments.fix.run", "experiments.placement"),
                 ("experiments.remedy.fix.config", "experiments.remedy.fix.parts", "experiments.remedy.fix.scoring", "experiments.remedy.fix.tune", "experiments.remedy.fix.cost", "experiments.remedy.fix.judge", "experiments.remedy.fix.words", "experiments.remedy.fix.run", "experiments.prompt.placement"),),
    "fix-tune": (("experiments.fix.config", "experiments.fix.parts", "experiments.fix.scoring", "experiments.fix.tune", "experiments.fix.cost", "experiments.fix.judge", "experiments.fix.words", "experiments.fix.run", "experiments.placement"),
                 ("experiments.remedy.fix.config", "experiments.remedy.fix.parts", "experiments.remedy.fix.scoring", "experiments.remedy.fix.tune", "experiments.remedy.fix.cost", "experiments.remedy.fix.judge", "experiments.remedy.fix.words", "experiments.remedy.fix.run", "experiments.prompt.placement"),),
    "fix-fast": (("experiments.fix_fast",), ("experiments.remedy.fix_fast",)),
    "inference-channel": (("experiments.inference",), ("experiments.remedy.inference",)),
    "inference-channel-cli": (("experiments.inference",), ("experiments.remedy.inference",)),
    "inference-cost": (("experiments.inference",), ("experiments.remedy.inference",)),
    "inference-diagnostic": (("experiments.inference",), ("experiments.remedy.inference",)),
    "inference-prior": (("experiments.inference",), ("experiments.remedy.inference",)),
    "inference-prior-fit": (("experiments.inference",), ("experiments.remedy.inference",)),
    "inference-retrieval": (("experiments.inference",), ("experiments.remedy.inference",)),
    "inference-task": (("experiments.inference",), ("experiments.remedy.inference",)),
    "realqa-jacobian": (("experiments.realqa",), ("experiments.prompt.realqa",)),
    "replay": (("experiments.replay",), ("experiments.born.replay",)),
    "retrieval": (("experiments.retrieval",), ("experiments.prompt.retrieval",)),
    "retrieval-link": (("experiments.retrieval",), ("experiments.prompt.retrieval",)),
    "born-scales-arch": (("experiments.born_scales",), ("experiments.born.born_scales",)),
    "scale-gpu": (("experiments.scale",), ("experiments.born.scale",)),
    "scale-layout": (("experiments.scale",), ("experiments.born.scale",)),
    "confirm": (("experiments.confirm",), ("experiments.remedy.confirm",)),
    "pipeline": (("experiments.pipeline",), ("experiments.remedy.pipeline",)),
    "pipeline-retrieve": (("experiments.pipeline",), ("experiments.remedy.pipeline",)),
    "task": (("experiments.task",), ("experiments.prompt.user_task",)),
}


def candidate_roots(namespace: str, files: Mapping[str, str]) -> list[tuple[str, ...]]:
    """The roots a stored digest of ``namespace`` over ``files`` (``{path relative to the
    package: source}``) may have been computed from: those the files declare, else today's and
    :data:`FORMER_ROOTS`."""
    own = declared_roots(files)
    if own is not None:
        return [tuple(own[namespace])] if namespace in own else []
    return [tuple(NAMESPACE_CODE[namespace]), *FORMER_ROOTS.get(namespace, ())] \
        if namespace in NAMESPACE_CODE else []


def _roots(namespace: str, roots: tuple[str, ...] | None) -> tuple[str, ...]:
    if roots is not None:
        return tuple(roots)
    if namespace not in NAMESPACE_CODE:
        raise ValueError(f"namespace {namespace!r} declares no code "
                         "(posbias_nb.provenance.code.NAMESPACE_CODE)")
    return NAMESPACE_CODE[namespace]


def import_closure(namespace: str, files: Mapping[str, str] | None = None,
                   roots: tuple[str, ...] | None = None) -> list[str]:
    """The modules the namespace's roots (``roots``, else :data:`NAMESPACE_CODE`'s) import, at
    any depth, with the ``__init__`` of every package on the way, less :data:`NOT_COMPUTING`:
    what :func:`file_digest` hashed whole."""
    roots = _roots(namespace, roots)
    srcs = package_files(files)
    known = set(srcs)
    seen: set[str] = set()
    todo = [m for m in roots if m in known]
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


def file_digest(namespace: str, files: Mapping[str, str] | None = None,
                roots: tuple[str, ...] | None = None) -> str:
    """The code digest as it was until 2026-12-07: SHA-256 of the normalised source
    (:func:`normalised_source`) of every module of :func:`import_closure`, keyed by module name.
    It moved with any edit of those modules and with any move of code between them; kept to
    check that each digest :func:`posbias_nb.provenance.record.migrate_digests` replaced was that
    of its commit's code."""
    roots = _roots(namespace, roots)
    srcs = package_files(files)
    h = hashlib.sha256()
    for m in roots:
        if m not in srcs:
            h.update(f"missing {m}\n".encode())
    for m in import_closure(namespace, files, roots):
        h.update(f"{m}\n".encode())
        h.update(normalised_source(srcs[m]).encode())
    return h.hexdigest()


def _reached(namespace: str, files: Mapping[str, str] | None, roots: tuple[str, ...] | None,
             rule: str = DIGEST_RULE):
    if rule not in RULES:
        raise ValueError(f"unknown digest rule {rule!r}; one of {', '.join(RULES)}")
    roots = _roots(namespace, roots)
    srcs = package_files(files)
    ix = reach.index(srcs, NOT_COMPUTING, fold=rule != "reach-v1",
                     names=rule in ("reach-v1", "reach-v2"))
    return roots, srcs, ix, ix.reach(m for m in roots if m in srcs)


def code_modules(namespace: str, files: Mapping[str, str] | None = None) -> list[str]:
    """The modules holding code the namespace reaches (:mod:`posbias_nb.provenance.reach`):
    an edit of that code moves its digest, an edit elsewhere in them or in other modules does
    not -- unless it adds a statement that acts when its module runs (a registration) to a
    module that runs with the namespace's code.  Less :data:`NOT_COMPUTING` (dotted, relative to
    the package; ``""`` is the package's own ``__init__``)."""
    _, _, _, (units, _, _) = _reached(namespace, files, None)
    return sorted({m for m, _ in units})


def reaches(namespace: str, module: str, name: str,
            files: Mapping[str, str] | None = None) -> bool:
    """Whether ``namespace`` reaches the top-level statement(s) of ``module`` that bind
    ``name`` (a function, a class, a constant): an edit of them moves its digest.  A constant it
    reads only through another constant computed by value (``NETWORK = tuple(r for r in TABLE
    ...)``) counts: an edit of it moves the digest where it moves a value read.

    Raises
    ------
    ValueError
        ``module`` computes nothing or is not in the package, or binds no ``name``.
    """
    roots, srcs, ix, (units, _, _) = _reached(namespace, files, None)
    units = units | ix.read_by_value.get(tuple(sorted(m for m in roots if m in srcs)), set())
    if module not in ix.mods:
        raise ValueError(f"{module!r} is not a computing module of posbias_nb")
    idx = ix.mods[module].bindings.get(name)
    if not idx:
        raise ValueError(f"{module} binds no {name!r} at its top level")
    return any((module, i) in units for i in idx)


def unresolved(namespace: str, files: Mapping[str, str] | None = None) -> list[str]:
    """The reads of ``namespace``'s code that lead to no module or statement of the package
    (``missing:<where>``), e.g. an import left one level too shallow when a module moved deeper:
    it fails only when it runs, and a test holds the list empty."""
    _, _, _, (_, edges, _) = _reached(namespace, files, None)
    return sorted({c for _, _, c in edges if c.startswith("missing:")})


def _footprint(namespace, files, roots):
    """``(units, impure units, edges)`` of what the namespace reaches, by content."""
    _, _, ix, (units, edges, _) = _reached(namespace, files, roots)
    hashes = {ix.unit(k).hash for k in units}
    impure = {ix.unit(k).hash for k in units if not ix.unit(k).pure}
    return hashes, impure, set(edges)


def narrows(namespace: str, then: Mapping[str, str], files: Mapping[str, str] | None = None,
            roots_then: tuple[str, ...] | None = None) -> bool:
    """Whether today's code of ``namespace`` (or ``files``) is its code in ``then`` (an earlier
    commit's files, digested from ``roots_then``) less statements nothing it runs needs: every
    statement it reaches today, and what every name read there means, it reached then; the
    statements that act when their module runs are the same; what is gone is definitions and
    assignments that no statement it reaches reads any more (a page's helper moved to a module
    that computes nothing, :data:`NOT_COMPUTING`).  Such code computes what that code computed,
    so a stamp made under it still vouches (:func:`posbias_nb.provenance.stamps.narrowed`)."""
    u0, i0, e0 = _footprint(namespace, then, roots_then)
    u1, i1, e1 = _footprint(namespace, files, None)
    return u1 <= u0 and e1 <= e0 and i1 == i0


def code_digest(namespace: str, files: Mapping[str, str] | None = None,
                roots: tuple[str, ...] | None = None, rule: str = DIGEST_RULE) -> str:
    """SHA-256 (hex) of what computes ``namespace`` (today's code, or ``files``: an earlier
    commit's): the top-level statements its root modules reach and the names that tie them
    (:mod:`posbias_nb.provenance.reach`), each statement normalised as
    :func:`normalised_source` does, none keyed by the module it sits in.  A declared root missing
    from the files counts (its absence changes the digest).  ``roots``: the root modules, where
    not :data:`NAMESPACE_CODE`'s (an earlier commit's own, :func:`declared_roots`).  ``rule``:
    one of :data:`RULES` (an older one to carry digests over, :mod:`.migrate`).  A constant that
    is plain data counts by its value (:meth:`posbias_nb.provenance.reach.Index.folded`)."""
    roots, srcs, ix, (units, edges, _) = _reached(namespace, files, roots, rule)
    lines = [f"missing {m}" for m in roots if m not in srcs]
    lines += sorted({f"unit {ix.unit(k).hash}" for k in units})
    lines += sorted(f"edge {a} {b} {c}" for a, b, c in edges)
    return hashlib.sha256((rule + "\n" + "\n".join(lines)).encode()).hexdigest()
