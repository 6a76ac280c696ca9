"""What an edit would cost ``make test`` before its stamps are earned
(:func:`posbias_nb.provenance.plan.edit_cost`, ``python -m posbias_nb.provenance cost``), on a
made-up manifest whose answer is known, and through the command."""
from __future__ import annotations

import pytest

from posbias_nb import provenance_cli
from posbias_nb.provenance import code, plan

NS = "layouts-ablation"   # computed by experiments.born.born_layouts (its measurements module), with layouts-layout


def _manifest():
    """Three entries of one namespace, one per switch (a setting), 400 s each, recorded under
    code "old"; today's digest differs, so the namespace counts as changed."""
    return {"entries": {f"{NS}/{k}": {"compute_seconds": 400.0, "code": "old",
                                      "setting": {"switch": s}}
                        for k, s in (("1", "a"), ("2", "b"), ("3", "c"))}}


def _digests():
    return {ns: f"today-{ns}" for ns in code.NAMESPACE_CODE}


def test_an_edit_names_the_namespaces_it_moves_and_the_budget_that_covers_them():
    c = plan.edit_cost(_manifest(), _digests(), ["experiments.born.born_layouts.measurements"], budget=600)
    assert c["moved"] == [ns for ns in code.NAMESPACE_CODE
                          if "experiments.born.born_layouts.measurements" in code.code_modules(ns)]
    assert NS in c["moved"] and "layouts-layout" in c["moved"]
    # every switch is a setting: the cheapest entry plus two more (800 s) exceed 600 s, so the
    # namespace stays uncovered and could not be stamped; 1,000 s covers it, at 1,200 s
    assert c["budget"]["uncovered"] == [NS]
    assert c["cover"]["budget"] == 1000 and c["cover"]["seconds"] == 1200
    assert c["cover"]["namespaces"][NS] == {"seconds": 1200.0, "chosen": 3, "entries": 3,
                                            "uncovered": 0}


def test_an_edit_is_not_vouched_for_by_todays_stamps():
    d = _digests()
    stamps = {NS: {"code": d[NS]}}   # today's code stamped: make test takes the cheapest only
    today = plan.verification_plan(_manifest(), d, 600, stamps=stamps)
    assert len(today["namespaces"][NS]["chosen"]) == 1
    c = plan.edit_cost(_manifest(), d, ["experiments.born.born_layouts.measurements"], budget=2000, stamps=stamps)
    assert c["budget"]["namespaces"][NS]["chosen"] == 3


def test_an_edit_of_a_page_moves_nothing_and_an_unknown_module_is_refused():
    c = plan.edit_cost(_manifest(), _digests(), ["experiments.base.pages"], budget=600)
    assert c["moved"] == [] and c["budget"]["seconds"] == 0 and c["cover"] is c["budget"]
    with pytest.raises(ValueError, match="experiments.nope"):
        plan.edit_cost(_manifest(), _digests(), ["experiments.nope"])
    with pytest.raises(ValueError, match="none given"):
        plan.edit_cost(_manifest(), _digests(), [])


def test_the_lines_name_the_uncovered_and_the_covering_budget():
    text = plan.cost_lines(plan.edit_cost(_manifest(), _digests(), ["experiments.born.born_layouts.measurements"],
                                          budget=600))
    assert text.startswith("moves 2 namespaces: layouts-ablation, layouts-layout")
    assert "left uncovered, so not stamped: layouts-ablation" in text
    assert text.endswith("every setting covered at a budget of 1000 s: 1200 s of recorded compute")


def test_the_command_refuses_an_unknown_module_in_one_line(capsys):
    assert provenance_cli.main(["cost", "experiments.born.born_layouts.measurements", "experiments.nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "experiments.nope" in err[0] and "born_layouts" not in err[0]


@pytest.mark.slow
def test_the_command_prints_the_cost_on_the_recorded_manifest(capsys):
    """On recorded/ itself (today's digests of every namespace: seconds): an edit of a page
    moves nothing; an edit of born_layouts moves its two namespaces."""
    assert provenance_cli.main(["cost", "experiments.base.pages"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("moves 0 namespaces: none") and "covered at a budget of 600 s" in out
    assert provenance_cli.main(["cost", "experiments.born.born_layouts.measurements"]) == 0
    assert capsys.readouterr().out.startswith("moves 2 namespaces: layouts-ablation, layouts-layout")
