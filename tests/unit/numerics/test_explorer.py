"""The explorer's Python side (posbias_nb.rollout.explorer); the page itself is tested in
tests/browser/test_explorer.py against the fixture these functions write."""
import numpy as np
import pytest

from posbias_nb import metrics, rollout, theory
from posbias_nb.rollout import explorer as E


def test_a_setting_means_the_layout_and_schedule_it_names():
    assert str(E.layout_of(dict(H=18, layout="hybrid", w=512, k=5))) == \
        "5*sliding:512,full,5*sliding:512,full,5*sliding:512,full"
    assert str(E.layout_of(dict(H=3, s=1.5))) == "3*full@1.5"
    s = E.normalize_settings(dict(schedule="mpt-7b"))
    assert s["H"] == 32 and np.array_equal(E.lambdas_of(s), rollout.published_schedules()["mpt-7b"][1])
    assert np.allclose(np.exp(E.log_row(dict(L=300, H=7, alpha=0.4))),
                       theory.influence(300, 7, 0.4), rtol=1e-12)


def test_the_summary_is_the_metrics_of_the_row():
    for st in (dict(L=1000, H=12, alpha=0.5), dict(L=5000, H=12, layout="hybrid", w=50),
               dict(L=999, H=6, alpha=0.8, m=0.1)):
        p = np.exp(E.log_row(st))
        sm = E.summary(st)
        ptv, valley = metrics.robust_peak_to_valley(p / p.sum())
        assert np.isclose(10 ** sm["log10_ptv"], ptv, rtol=1e-9) and sm["valley"] == valley
        assert np.isclose(sm["middle_share"], metrics.middle_share(p), rtol=1e-12)
        mid = metrics.regions(p.size).middle
        assert np.isclose(10 ** sm["log10_first_arm"], p[0] / np.median(p[mid]), rtol=1e-9)
    deep = E.summary(dict(L=20000, H=128, alpha=0.9, layout="sliding", w=32))
    assert deep["log10_first_arm"] is None and deep["log10_ptv"] is None  # zero influence there


@pytest.mark.parametrize("bad,match", [(dict(L=10), "L must lie"), (dict(H=200), "H must lie"),
                                       (dict(alpha=2), "alpha"), (dict(layout="ring"), "layout"),
                                       (dict(schedule="gpt5"), "schedule"), (dict(m=-1), "m must"),
                                       (dict(s=99), "s must"), (dict(x="polar"), "x must")])
def test_bad_settings_are_named(bad, match):
    with pytest.raises(ValueError, match=match):
        E.normalize_settings(bad)


def test_the_grid_covers_every_control_and_the_schedules_file_is_current():
    from pathlib import Path

    grid = [E.normalize_settings(g) for g in E.GRID]
    assert len(grid) >= 50
    assert {g["layout"] for g in grid} == set(E.LAYOUTS)
    assert max(g["L"] for g in grid) == 100_000 and max(g["H"] for g in grid) == 128
    assert any(g["s"] is not None for g in grid) and any(g["m"] > 0 for g in grid)
    assert {g["schedule"] for g in grid} >= set(rollout.published_schedules()) | {"constant"}
    assert any(g["alpha"] == 0 for g in grid) and any(g["alpha"] == 1 for g in grid)
    js = Path(__file__).resolve().parents[3] / "_assets" / "explorer-schedules.js"
    assert js.read_text() == E.schedules_js(), "regenerate _assets/explorer-schedules.js"


def test_links_carry_their_settings():
    h = E.link(L=4096, H=18, layout="hybrid", x="log")._repr_html_()
    assert 'href="explore.html?L=4096&amp;H=18&amp;layout=hybrid&amp;x=log"' in h
    with pytest.raises(ValueError):
        E.link(L=3)
