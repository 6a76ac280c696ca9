"""Every study passes one contract (issue 65, item 4), as scikit-learn checks every estimator
against one (``parametrize_with_checks``).

A study is a module of ``posbias_nb.experiments`` that declares a frozen design (a module-level
``DESIGN``, :class:`posbias_nb.experiments.base.design.Design`); the studies are found by that, not
listed here, so a new one is checked the moment it exists.  Each must have:

1. its design as the latest entry of the registry (``posbias_nb/data/designs.json``);
2. its verdict code declared (``design.VERDICT_CODE``), every name resolving, and public (no
   underscore name: the private names each study had, 2026-12-07, were renamed with a code-only
   registry entry once the code digest stopped counting a function's name, rule ``reach-v3``);
3. the namespaces it caches under, with the module among their code roots
   (``posbias_nb.provenance.code.NAMESPACE_CODE``), or a reason it caches nothing
   (``design.NO_NAMESPACE``);
4. a committed digest of its verdicts (``bench/results/digests/<study>.json``) or a reason it has
   none (``digests.NO_DIGEST``);
5. a test file of its own: one under ``tests/`` that imports the module.

``docs/contributing.md`` walks "add a study" through the same items; the last test checks that
the walk names each of them.
"""
from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

from posbias_nb import experiments
from posbias_nb.experiments.base import design
from posbias_nb.experiments.base import digests as dg
from posbias_nb.provenance import code

ROOT = Path(__file__).resolve().parents[2]

#: The floors of ``experiments`` (sub-packages of studies, not studies).
FLOORS = ("base", "born", "prompt", "remedy")


def declared_studies(package=experiments) -> dict[str, str]:
    """``{study: module}``: every module of ``package`` (and of its floors) with a module-level
    ``DESIGN``."""
    out: dict[str, str] = {}
    for info in pkgutil.iter_modules(package.__path__):
        name = f"{package.__name__}.{info.name}"
        found = {}
        if getattr(info, "ispkg", False) and info.name in FLOORS:
            found = declared_studies(importlib.import_module(name))
        else:
            d = getattr(importlib.import_module(name), "DESIGN", None)
            if isinstance(d, design.Design):
                found = {d.study: name}
        for study_name, where in found.items():
            if study_name in out:
                raise ValueError(f"two modules declare the study {study_name!r}: "
                                 f"{out[study_name]} and {where}")
            out[study_name] = where
    return out


def _test_files() -> dict[Path, str]:
    return {p: p.read_text() for p in (ROOT / "tests").rglob("test_*.py")}


def contract_problems(study: str, module: str, *, verdict_code=None, namespace_code=None,
                      registry=None, no_namespace=None, no_digest=None, digests=None,
                      test_files=None) -> list[str]:
    """The items of the contract that ``study`` (declared in ``module``) misses, each named;
    empty when it passes.  The keywords replace, for a test, what is read from the package and
    the repository (the verdict code, the namespaces' code roots, the registry, the reasons, the
    digests folder, the test files)."""
    verdict_code = design.VERDICT_CODE if verdict_code is None else verdict_code
    namespace_code = code.NAMESPACE_CODE if namespace_code is None else namespace_code
    no_namespace = design.NO_NAMESPACE if no_namespace is None else no_namespace
    no_digest = dg.NO_DIGEST if no_digest is None else no_digest
    digests = ROOT / dg.DIGESTS if digests is None else digests
    test_files = _test_files() if test_files is None else test_files
    out = []
    mod = importlib.import_module(module)
    # 1. the registry's latest entry
    try:
        design.check(mod.DESIGN, registry)
    except ValueError as e:
        out.append(f"registry: {str(e).splitlines()[0]}")
    # 2. verdict code: declared, resolving, public
    names = verdict_code.get(study)
    if not names:
        out.append(f"verdict code: {study!r} is not in design.VERDICT_CODE")
    else:
        for n in names:
            try:
                design._resolve(n)
            except (ImportError, AttributeError) as e:
                out.append(f"verdict code: {n} does not resolve ({type(e).__name__})")
        private = {n for n in names if n.rsplit(".", 1)[1].startswith("_")}
        out += [f"verdict code: {n} is private (name it publicly)" for n in sorted(private)]
    # 3. the namespaces it caches under, with the module (or, for a study that is a package,
    # one of its modules) among their code roots
    rel = module.removeprefix("posbias_nb.")
    spaces = sorted(ns for ns, roots in namespace_code.items()
                    if any(r == rel or r.startswith(rel + ".") for r in roots))
    if not spaces and study not in no_namespace:
        out.append(f"namespaces: no namespace of provenance.code.NAMESPACE_CODE has {rel} among "
                   f"its code roots, and design.NO_NAMESPACE gives no reason")
    if spaces and study in no_namespace:
        out.append(f"namespaces: {study!r} caches under {spaces} but design.NO_NAMESPACE says it "
                   f"caches nothing")
    # 4. a digest, or the reason for none
    has_digest = (Path(digests) / f"{study}.json").exists()
    if not has_digest and study not in no_digest:
        out.append(f"digest: no {dg.DIGESTS}/{study}.json and no digests.NO_DIGEST reason")
    if has_digest and study in no_digest:
        out.append(f"digest: {study}.json exists but digests.NO_DIGEST gives a reason for none")
    # 5. a test file of its own
    parent, short = module.rsplit(".", 1)
    pat = re.compile(rf"(from {re.escape(parent)} import [^\n]*\b{short}\b"
                     rf"|{re.escape(module)}\b)")
    if not any(pat.search(src) for src in test_files.values()):
        out.append(f"tests: no file under tests/ imports {module}")
    return out


STUDIES = declared_studies()


def test_the_studies_are_found_by_their_design():
    """Every registered study is declared by a module, and every declared one is registered."""
    assert set(STUDIES) == set(design.registry())
    assert set(STUDIES) == set(design.VERDICT_CODE)


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_every_study_passes_the_contract(study):
    assert contract_problems(study, STUDIES[study]) == []


def test_the_contract_names_what_a_toy_study_misses(tmp_path, monkeypatch):
    """The counterexample: a study that declares a design and nothing else fails every item,
    each by name; given each item, it passes."""
    import sys
    import types

    toy = types.ModuleType("posbias_nb.experiments.toy_study")
    toy.DESIGN = design.Design("toy", {"examples": 3})
    toy._decide = lambda: None
    toy.decide = lambda: None
    monkeypatch.setitem(sys.modules, "posbias_nb.experiments.toy_study", toy)
    monkeypatch.setattr(experiments, "toy_study", toy, raising=False)
    got = contract_problems("toy", "posbias_nb.experiments.toy_study", verdict_code={},
                            namespace_code={}, no_namespace={}, no_digest={}, digests=tmp_path,
                            test_files={})
    assert [p.split(":")[0] for p in got] == ["registry", "verdict code", "namespaces", "digest",
                                             "tests"], got
    # each item given: the toy passes (and a private verdict name is named)
    reg = tmp_path / "designs.json"
    import json

    vc = {"toy": ("posbias_nb.experiments.toy_study.decide",)}
    reg.write_text(json.dumps({"toy": [{"hash": toy.DESIGN.hash, "date": "2026-12-07",
                                        "reason": "x" * 50, "code": "0" * 64}]}))
    monkeypatch.setitem(design.VERDICT_CODE, "toy", vc["toy"])
    reg.write_text(json.dumps({"toy": [{"hash": toy.DESIGN.hash, "date": "2026-12-07",
                                        "reason": "x" * 50, "code": design.code_hash("toy")}]}))
    (tmp_path / "toy.json").write_text("{}")
    ok = dict(verdict_code=vc, namespace_code={"toy-ns": ("experiments.toy_study",)},
              registry=reg, no_namespace={}, no_digest={}, digests=tmp_path,
              test_files={Path("t.py"): "from posbias_nb.experiments import toy_study\n"})
    assert contract_problems("toy", "posbias_nb.experiments.toy_study", **ok) == []
    bad = dict(ok, verdict_code={"toy": ("posbias_nb.experiments.toy_study._decide",)})
    assert contract_problems("toy", "posbias_nb.experiments.toy_study", **bad) == [
        "verdict code: posbias_nb.experiments.toy_study._decide is private (name it publicly)"]
    # a study that is a package: a module of it among the roots counts, a sibling's does not
    pkg = dict(ok, namespace_code={"toy-ns": ("experiments.toy_study.run",)})
    assert contract_problems("toy", "posbias_nb.experiments.toy_study", **pkg) == []
    near = dict(ok, namespace_code={"toy-ns": ("experiments.toy_study_other.run",)})
    assert contract_problems("toy", "posbias_nb.experiments.toy_study", **near)[0].startswith(
        "namespaces: no namespace")


def test_two_modules_declaring_one_study_are_refused(monkeypatch):
    import sys
    import types

    pkg = types.ModuleType("fakepkg")
    pkg.__path__ = []
    a, b = types.ModuleType("fakepkg.a"), types.ModuleType("fakepkg.b")
    a.DESIGN = b.DESIGN = design.Design("same", {})
    for m in (pkg, a, b):
        monkeypatch.setitem(sys.modules, m.__name__, m)
    monkeypatch.setattr(pkgutil, "iter_modules",
                        lambda path: [types.SimpleNamespace(name="a")])
    assert declared_studies(pkg) == {"same": "fakepkg.a"}
    monkeypatch.setattr(pkgutil, "iter_modules",
                        lambda path: [types.SimpleNamespace(name=n) for n in "ab"])
    with pytest.raises(ValueError, match="two modules declare the study 'same'"):
        declared_studies(pkg)


def test_the_walk_in_contributing_names_every_item():
    """docs/contributing.md's "Add a study" names each item of the contract by where it lives."""
    text = (ROOT / "docs" / "contributing.md").read_text()
    walk = text[text.index("## Add a study"):]
    walk = walk[:walk.find("\n## ", 4)] if "\n## " in walk[4:] else walk
    for item in ("DESIGN", "posbias_nb/data/designs.json", "design.VERDICT_CODE",
                 "NAMESPACE_CODE", "design.NO_NAMESPACE", "bench/results/digests",
                 "digests.NO_DIGEST", "tests/unit/studies", "tests/package/test_study_contract.py"):
        assert item in walk, item
