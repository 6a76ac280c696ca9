"""The rules of ``posbias fix`` on made-up numbers (posbias_nb.experiments.remedy.fix): the seeded
split, the slots, the choice of the one remedy carried to the test part and its verdict words,
the test part's power, the slot figure.  The runs on a tiny model are in
tests/integration/test_fix.py."""
import numpy as np
import pytest

from posbias_nb import stats
from posbias_nb.experiments.remedy import fix as fix_mod
from posbias_nb.experiments.remedy.fix import parts as fix_parts


def test_split_is_seeded_disjoint_and_complete():
    for n in (6, 7, 24):
        for seed in (0, 1):
            a, b = fix_mod.split(n, seed=seed)
            assert sorted(a + b) == list(range(n)) and not set(a) & set(b)
            assert len(b) == round(2 / 3 * n) and len(a) >= 2 and len(b) >= 2
            assert fix_mod.split(n, seed=seed) == (a, b)
    assert fix_mod.split(24, seed=0) != fix_mod.split(24, seed=1)
    with pytest.raises(ValueError, match="each part needs 2"):
        fix_mod.split(5, test_share=0.9)
    with pytest.raises(ValueError, match="test_share"):
        fix_mod.split(8, test_share=1.0)


def test_middle_and_edge_slots():
    assert fix_parts.slot_groups(5) == {"middle": [1, 2, 3], "edges": [0, 4]}
    assert fix_parts.slot_groups(4) == {"middle": [1, 2], "edges": [0, 3]}


def _tuning(gains_by_remedy, per=None):
    """A tuning result: each remedy with one setting whose all-slot gain is the given one."""
    out = {}
    for r, g in gains_by_remedy.items():
        out[r] = {"grid": [{"ranker": "bm25"}], "all_gain": [g], "middle_gain": [g],
                  "edge_change": [0.0], "chosen": 0 if g > 0 else None,
                  "setting": {"ranker": "bm25"},
                  "all_gain_by_example": [list(per if per is not None else
                                               np.linspace(g - 1, g + 1, 8))]}
    return out


def _test(gains_by_remedy, n=16, seed=0):
    rng = np.random.default_rng(seed)
    out = {"n_examples": n}
    for r, g in gains_by_remedy.items():
        x = rng.normal(g, 1.0, n)
        out[r] = {"all_gain_per_example": x.tolist(),
                  "all_gain": dict(zip(("estimate", "low", "high"),
                                       stats.mean_interval(x)))}
    return out


def test_select_one_carries_the_best_tuning_gain_and_tests_it_alone():
    tune = _tuning({"hidden-scaling": 0.2, "curve-order": 0.9, "prior-order": -0.3})
    test = _test({"hidden-scaling": 0.0, "curve-order": 1.5})
    got = fix_mod.select_one(tune, test, 6)
    assert got["carried"] == "curve-order" and got["verdict"] == "holds"
    x = np.asarray(test["curve-order"]["all_gain_per_example"])
    assert got["interval"]["low"] == pytest.approx(stats.one_sided_bounds(x)[1])
    assert 0 < got["p_perm"] < 0.05
    # the others measured on the test part: exploratory, no verdict word (prior-order did
    # not gain on the tuning part, so it was not measured there)
    assert set(got["exploratory"]) == {"hidden-scaling"}
    assert all("verdict" not in v for v in got["exploratory"].values())
    # the power from the tuning part's spread of the carried remedy
    sd = float(np.std(np.linspace(-0.1, 1.9, 8), ddof=1))
    assert got["power"]["detectable"] == pytest.approx(stats.detectable_effect(sd, 16))
    assert got["power"]["needed"]["0.5"] == stats.units_needed(0.5, sd)


def test_select_one_says_inconclusive_with_its_power_and_fails_only_on_harm():
    tune = _tuning({"curve-order": 0.9})
    flat = fix_mod.select_one(tune, _test({"curve-order": 0.0}, seed=3), 6)
    assert flat["verdict"] == "inconclusive"
    words = fix_mod.verdict_words(flat["verdict"], flat["power"])
    assert words.startswith("not shown to help at this size") and "does not help" not in words
    harm = fix_mod.select_one(tune, _test({"curve-order": -2.0}), 6)
    assert harm["verdict"] == "fails"
    assert fix_mod.verdict_words("fails", harm["power"]) == "does not help on the test part"
    # nothing gains on the tuning part: nothing carried, and the power still told
    none = fix_mod.select_one(_tuning({"curve-order": -0.5}), _test({}), 6)
    assert none["carried"] is None and none["verdict"] is None
    assert none["power"]["from"] == "curve-order"


def test_coinciding_rules_are_one_arm_at_an_odd_count():
    tune = _tuning({"long-context-reorder": 0.5, "lost-in-the-middle-ranker": 0.5})
    test = _test({"long-context-reorder": 0.1, "lost-in-the-middle-ranker": 0.1})
    odd = fix_mod.select_one(tune, test, 5)
    assert odd["arm"] == "long-context-reorder = lost-in-the-middle-ranker"
    assert odd["exploratory"] == {}
    even = fix_mod.select_one(tune, test, 6)
    assert even["arm"] == "long-context-reorder"
    assert set(even["exploratory"]) == {"lost-in-the-middle-ranker"}
    assert fix_mod.coinciding(7) and not fix_mod.coinciding(10)


def test_min_test_detects_one_standard_deviation():
    n = fix_mod.MIN_TEST
    assert stats.detectable_effect(1.0, n) <= 1.0 < stats.detectable_effect(1.0, n - 1)


def test_slot_figure_draws_identical_series_once_labelled_for_both():
    """At an odd count LangChain's and Haystack's rules give one prompt: the figure draws that
    series once, labelled for both (it drew two, one hidden under the other), and its text
    is readable as shown."""
    import matplotlib

    matplotlib.use("Agg")
    from posbias_nb import plots
    from posbias_nb.experiments.remedy import fix
    from posbias_nb.results import Result

    def ivs(e):
        return [dict(estimate=v, low=v - 0.1, high=v + 0.1) for v in e]

    same = dict(logprob=ivs([-1.0, -1.2, -0.9]), accuracy=ivs([0.5, 0.4, 0.6]))
    test = {"long-context-reorder": dict(same, base_logprob=ivs([-1.1, -1.5, -1.0]),
                                         base_accuracy=ivs([0.5, 0.3, 0.6])),
            "lost-in-the-middle-ranker": dict(same),
            "query-aware": dict(logprob=ivs([-1.3, -1.4, -1.2]),
                                accuracy=ivs([0.4, 0.4, 0.5]))}
    r = Result({"test": test}, meta={"gold_slots": [1, 3, 5]}, columns=[])
    fig = fix.slot_figure({"m": r})
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["as it is", "LangChain's reorder = Haystack's ranker",
                      "query-aware (Liu et al.)"]
    assert len(fig.axes[0].containers) == 3
    plots.check_readable(fig)
