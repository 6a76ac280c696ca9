"""Every verdict rule under the lock (issue 56, item 4): no chapter decides a claim with a
threshold of its own; the declared rules (experiments.base.claims, the studies' ``rules``) and the
one function that applies them (experiments.base.design.decide_rule)."""
from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

from posbias_nb import stats
from posbias_nb.experiments.born import born_layouts as layouts
from posbias_nb.experiments.base import claims, design
from posbias_nb.experiments.remedy import lab as remedies

BOOK = Path(__file__).resolve().parents[3] / "book"


# --------------------------------------------------------------------------------------------
# the chapters: no stats.decide of their own

def code_cells(text: str):
    """The Python code cells of a MyST chapter, ``[(line, source)]``: the ``{code-cell}``
    blocks as jupytext reads them, IPython magics turned into Python."""
    import jupytext
    from IPython.core.inputtransformer2 import TransformerManager

    nb = jupytext.reads(text, fmt="md:myst")
    tm = TransformerManager()
    return [(i, tm.transform_cell(c.source)) for i, c in enumerate(nb.cells)
            if c.cell_type == "code"]


def _literal_number(node) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, (ast.Tuple, ast.List)):
        return bool(node.elts) and all(_literal_number(e) for e in node.elts)
    return False


def direct_decisions(source: str) -> list:
    """The lines of ``source`` that decide a claim by a rule of their own: a call of
    ``posbias_nb.stats.decide`` (under any name it is imported as), or a call of any
    ``decide`` (a declared rule's) with a literal number as a keyword argument (a threshold or
    given value typed in the chapter).  Literal intervals, the positional counterexamples, are
    allowed; so are ``stats.decide_all`` and ``stats.count_decide``, which take no threshold."""
    tree = ast.parse(source)
    modules, funcs = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                if a.name == "posbias_nb.stats" and a.asname:
                    modules.add(a.asname)
        elif isinstance(n, ast.ImportFrom):
            for a in n.names:
                if n.module == "posbias_nb" and a.name == "stats":
                    modules.add(a.asname or "stats")
                if n.module == "posbias_nb.stats" and a.name == "decide":
                    funcs.add(a.asname or "decide")
    modules.add("stats")  # the chapters' own name for it, imported in an earlier cell
    out = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        direct = (isinstance(f, ast.Name) and f.id in funcs) or (
            isinstance(f, ast.Attribute) and f.attr == "decide"
            and ((isinstance(f.value, ast.Name) and f.value.id in modules)
                 or ast.unparse(f.value) == "posbias_nb.stats"))
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        typed = name == "decide" and any(_literal_number(k.value) for k in n.keywords)
        if direct or typed:
            out.append((n.lineno, ast.unparse(n)))
    return out


def test_the_check_refuses_direct_decisions_and_typed_thresholds():
    bad = ["stats.decide(x, 10.0)",
           "stats.decide(lg(ci), direction='within', band=(1.5, 2.5))",
           "from posbias_nb import stats as s\ns.decide(x)",
           "from posbias_nb.stats import decide as d\nd(x, 1.0)",
           "import posbias_nb.stats\nposbias_nb.stats.decide(x, 1.0)",
           "claims.decide('remedies', 'factorial', ci, factorial=0.0002)",
           "train.decide('lever', ci, predicted=-1)"]
    for src in bad:
        assert direct_decisions(src), src
    good = ["claims.decide('after_training', 'deepen', (12.0, 9.0, 15.0))",
            "stats.decide_all([claims.decide('a', 'b', x) for x in xs])",
            "stats.count_decide(3, 1, 5)",
            "train.decide('factorial', D[8]['measured_ci'], factorial=D[8]['factorial'])"]
    for src in good:
        assert not direct_decisions(src), src


def test_code_cells_reads_a_myst_chapter(tmp_path):
    md = ("---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
          "kernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n\n"
          "# A\n\ntext stats.decide(x, 1.0)\n\n```{code-cell} python\n:tags: [remove-cell]\n"
          "%matplotlib inline\nw = stats.decide(x, 1.0)\n```\n\n```python\nstats.decide(y)\n```\n")
    cells = code_cells(md)
    assert len(cells) == 1  # the prose and the plain code block are not code cells
    assert [line for _, src in cells for line, _ in direct_decisions(src)] == [2]


def test_no_chapter_decides_with_a_threshold_of_its_own():
    found = []
    for p in sorted(BOOK.glob("*.md")):
        for i, src in code_cells(p.read_text()):
            found += [f"{p.name}, cell {i}: {code}" for _, code in direct_decisions(src)]
    assert not found, ("decide through a declared rule (experiments.base.claims or the study's "
                       "DESIGN['rules']), not stats.decide:\n" + "\n".join(found))


# --------------------------------------------------------------------------------------------
# design.decide_rule: the one function that applies a declared rule

def test_decide_rule_is_stats_decide_with_the_declared_values():
    iv = (0.3, 0.1, 0.5)
    assert design.decide_rule({"direction": "greater", "threshold": 0.2}, iv) == \
        stats.decide(iv, 0.2, "greater") == "inconclusive"
    assert design.decide_rule({"direction": "less", "threshold": 1.0, "testable": False}, iv) \
        == "not testable"
    assert design.decide_rule({"direction": "within", "band": [0.0, 1.0]}, iv) == "holds"
    assert design.decide_rule({"direction": "greater", "threshold": 0.5, "exact": True}, 1.0) \
        == "exact"
    # a log10 scale reads the interval's decimal logarithm
    rule = {"direction": "within", "band": [1.5, 2.5], "scale": "log10"}
    assert design.decide_rule(rule, (100.0, 50.0, 200.0)) == stats.decide(
        tuple(np.log10((100.0, 50.0, 200.0))), direction="within", band=(1.5, 2.5)) == "holds"
    assert design.decide_rule(rule, (150.0, 120.0, 400.0)) == "inconclusive"


def test_decide_rule_takes_exactly_the_values_it_names():
    rule = {"direction": "less", "threshold": {"given": "factorial"}}
    assert design.rule_needs(rule) == ("factorial",)
    assert design.decide_rule(rule, (0.1, 0.05, 0.15), factorial=0.2) == "holds"
    assert design.decide_rule(rule, (0.1, 0.05, 0.15), factorial=0.01) == "fails"
    with pytest.raises(ValueError, match="missing \\['factorial'\\]"):
        design.decide_rule(rule, (0.1, 0.05, 0.15))
    with pytest.raises(ValueError, match="unexpected \\['threshold'\\]"):
        design.decide_rule({"direction": "less", "threshold": 1.0}, (0.1, 0.0, 0.2), threshold=5)
    same = {"direction": {"sign_of": "predicted"}, "threshold": 0.0}
    opposite = {"direction": {"opposite_sign_of": "predicted"}, "threshold": 0.0}
    up = (0.2, 0.1, 0.3)
    assert design.decide_rule(same, up, predicted=0.5) == "holds"
    assert design.decide_rule(same, up, predicted=-0.5) == "fails"
    assert design.decide_rule(opposite, up, predicted=0.5) == "fails"
    assert design.decide_rule(opposite, up, predicted=-0.5) == "holds"


@pytest.mark.parametrize("rule, match", [
    ({"direction": "greater", "treshold": 1.0}, "unknown keys \\['treshold'\\]"),
    ({"direction": "greater"}, "needs a threshold"),
    ({"direction": "greater", "threshold": {"from": "x"}}, "given: NAME"),
    ({"direction": "within", "band": [0, 1], "scale": "ln"}, "scale must be 'log10'"),
    ({"direction": "sideways", "threshold": 0.0}, "direction"),
    ("greater than 1", "must be a mapping"),
])
def test_decide_rule_refuses_a_malformed_rule(rule, match):
    with pytest.raises(ValueError, match=match):
        design.decide_rule(rule, (0.3, 0.1, 0.5))


def test_rule_effect_redecides_to_the_same_word():
    for rule, iv, given in [
        ({"direction": "less", "threshold": {"given": "t"}}, (0.1, 0.05, 0.15), {"t": 0.2}),
        ({"direction": "within", "band": [1.5, 2.5], "scale": "log10"}, (90.0, 60.0, 120.0), {}),
        ({"direction": "less", "threshold": 0.0, "testable": False}, (-1.0, -2.0, -0.5), {}),
        ({"direction": {"sign_of": "p"}, "threshold": 0.0}, (0.2, 0.1, 0.3), {"p": -1.0}),
    ]:
        eff = design.rule_effect(rule, iv, **given)
        args = {k: v for k, v in eff.items() if k != "interval"}
        assert stats.decide(eff["interval"], **args) == design.decide_rule(rule, iv, **given)
    assert design.rule_effect({"direction": "greater", "threshold": 0.99}, (1.0,) * 3) == dict(
        interval=(1.0,) * 3, threshold=0.99, direction="greater")


# --------------------------------------------------------------------------------------------
# experiments.base.claims: the chapters' table

def _cases():
    for chapter, rules in claims.DESIGN.as_dict().items():
        for claim in rules:
            yield chapter, claim


@pytest.mark.parametrize("chapter, claim", list(_cases()))
def test_every_declared_claim_can_hold_and_fail(chapter, claim):
    """Each rule decides both ways: an interval wholly on the claimed side holds (or is
    "exact"), one wholly on the other side fails; an untestable rule says so."""
    r = claims.rule(chapter, claim)
    assert set(r) <= set(design.RULE_KEYS) and r["says"]
    if r["direction"] == "within":
        lo, hi = r["band"]
        inside, outside = (lo + hi) / 2, hi + (hi - lo)
    else:
        t, eps = r["threshold"], 0.01
        up, down = t + eps, t - eps
        inside, outside = (up, down) if r["direction"] == "greater" else (down, up)
    if r.get("scale") == "log10":
        inside, outside = 10 ** inside, 10 ** outside
    iv = (lambda x: x) if r.get("exact") else (lambda x: (x, x * 0.999999, x * 1.000001)
                                               if x > 0 else (x, x * 1.000001, x * 0.999999))
    good = claims.decide(chapter, claim, iv(inside))
    assert good == ("exact" if r.get("exact") else "holds"), (chapter, claim, good)
    assert claims.decide(chapter, claim, iv(outside)) == "fails", (chapter, claim)


def test_claims_refuse_an_unknown_chapter_or_claim():
    with pytest.raises(ValueError, match="no claims declared for chapter 'nowhere'"):
        claims.decide("nowhere", "u_ptv", (1.0, 0.5, 2.0))
    with pytest.raises(ValueError, match="declares no claim 'u_peak'.*u_ptv"):
        claims.decide("measure_init", "u_peak", (1.0, 0.5, 2.0))
    with pytest.raises(ValueError, match="unexpected \\['threshold'\\]"):
        claims.decide("measure_init", "u_ptv", (11.0, 10.5, 12.0), threshold=1.0)


def test_claims_hold_the_values_the_chapters_typed_before():
    """The thresholds moved under the lock unchanged (registry entry of 2026-12-05)."""
    assert claims.rule("measure_init", "u_ptv")["threshold"] == 10.0
    assert claims.rule("measure_init", "rope_same")["band"] == [-0.01, 0.01]
    assert claims.rule("after_training", "init")["band"] == [1.5, 2.5]
    assert claims.rule("infinite_depth", "totals")["band"] == [3.5, 5.4]
    assert claims.decide("after_training", "deepen", (12.0, 9.0, 15.0)) == "inconclusive"
    eff = claims.effect("infinite_depth", "control", (0.03,) * 3)
    assert eff == dict(interval=(0.03,) * 3, threshold=0.05, direction="less")


def test_claims_are_locked(monkeypatch):
    moved = design.Design("claims", dict(claims.DESIGN.as_dict(), extra={}))
    monkeypatch.setattr(claims, "DESIGN", moved)
    with pytest.raises(ValueError, match="add an entry"):
        claims.decide("measure_init", "u_ptv", (11.0, 10.5, 12.0))


# --------------------------------------------------------------------------------------------
# the studies' own rules: remedies, layouts

def test_remedies_decide_by_its_declared_rules():
    assert remedies.decide("grad", (0.5, 0.4, 0.6)) == "holds"
    assert remedies.decide("speed", (-0.5, -0.6, -0.4)) == "not testable"
    assert remedies.decide("factorial", (0.01, 0.005, 0.02), factorial=1 / 5040) == "fails"
    assert remedies.decide("lever", (0.1, 0.05, 0.2), predicted=0.3) == "holds"
    assert remedies.decide("lever", (0.1, 0.05, 0.2), predicted=-0.3) == "fails"
    assert remedies.decide("size", (0.1, 0.05, 0.2), predicted=-0.3) == "holds"
    with pytest.raises(ValueError, match="declares no rule 'gradient'"):
        remedies.decide("gradient", (0.5, 0.4, 0.6))
    with pytest.raises(ValueError, match="missing \\['factorial'\\]"):
        remedies.decide("factorial", (0.01, 0.005, 0.02))


def _remedy_measurements(sign=1.0):
    ci = lambda e: (e, e - 0.01, e + 0.01)  # noqa: E731
    D = {H: dict(measured_ci=ci(0.5 / H), predicted_ci=ci(0.6 / H),
                 factorial=1 / math.factorial(H - 1)) for H in (2, 4, 8)}
    rem = ("weighted", "oversample", "curriculum")
    return dict(g_ratio=ci(0.8), pred_ratio=0.9, D=D, d_trend=ci(-0.2), auc_me=ci(-0.011),
                layers=2, dgap=ci(-0.05), dmm=ci(0.02), close={m: ci(0.05) for m in rem},
                gain={m: ci(0.0) for m in rem}, cost={m: ci(-0.03) for m in rem},
                level=1 - 0.05 / 3, d_pred=ci(sign * 0.1), d_init=ci(0.04))


def test_remedies_verdict_rows_decide_every_row_by_its_rule():
    rows = remedies.verdict_rows(_remedy_measurements())
    assert [r["key"] for r in rows] == ["grad", "depth", "factorial", "speed", "biased", "influ",
                                        "weighted", "oversample", "curriculum", "lever"]
    words = {r["key"]: r["verdict"] for r in rows}
    assert words == dict(grad="holds", depth="holds", factorial="fails", speed="not testable",
                         biased="holds", influ="fails", weighted="holds", oversample="holds",
                         curriculum="holds", lever="holds")
    for r in rows:  # the verdict table re-decides each effect: the same word
        eff = r["effect"]
        args = {k: v for k, v in eff.items() if k not in ("interval", "scale")}
        assert stats.decide(eff["interval"], **args) == r["verdict"]
    assert rows[2]["claim"] == "... by a factor 1/(H-1)! (8 layers: 1/5040)"
    assert "(faster: inconclusive)" in rows[6]["measured"]
    assert "(slower: holds)" in rows[6]["measured"]
    # the lever's direction is the prediction's sign: predicted down, measured up, fails
    flipped = {r["key"]: r for r in remedies.verdict_rows(_remedy_measurements(-1.0))}
    assert flipped["lever"]["verdict"] == "fails"
    assert flipped["lever"]["effect"]["direction"] == "less"
    m = _remedy_measurements()
    del m["dmm"]
    with pytest.raises(ValueError, match="\\['dmm'\\]"):
        remedies.verdict_rows(m)


def test_layouts_decide_by_its_declared_rules():
    assert layouts.decide("exact", 1.0) == "exact"
    assert layouts.decide("exact", 0.0) == "fails"
    sides = layouts.ablation_sides({"a": {"gap_ci": (0.1, 0.05, 0.2)},
                                    "b": {"gap_ci": (-0.1, -0.2, -0.05)},
                                    "c": {"gap_ci": (0.0, -0.1, 0.1)}})
    assert sides == {"a": "holds", "b": "fails", "c": "inconclusive"}
    assert layouts.effect("exact", (1.0,) * 3) == dict(interval=(1.0,) * 3, threshold=0.5,
                                                       direction="greater", exact=True)
    with pytest.raises(ValueError, match="declares no rule 'ablations'"):
        layouts.decide("ablations", (0.1, 0.05, 0.2))
