"""The pieces of ``posbias report`` on made-up numbers: the span view (``measure.span_profile``),
the theory fit, the window statistics, ratios that cannot be formed and their reasons, and the
summary's words and command.  The runs on tiny models are in tests/integration/test_report.py."""
from __future__ import annotations

import numpy as np
import pytest

from posbias_nb import metrics, theory
from posbias_nb.experiments.prompt import retrieval as _ret
from posbias_nb.experiments.report import statistics as RS, words as RW
from posbias_nb.measure import span_profile


def test_span_profile_sums_and_shares():
    p = np.array([1.0, 1.0, 2.0, 4.0, 2.0])
    assert span_profile(p, [(0, 2), (2, 4)], normalize=False).tolist() == [2.0, 6.0]
    assert span_profile(p, [(0, 2), (2, 4)]).tolist() == [0.2, 0.6]  # gaps belong to no unit
    assert span_profile(p, [(3, 5), (0, 1)]).tolist() == [0.6, 0.1]  # in the order given
    # summing is not averaging: a long unit of small tokens can outweigh a short heavy one
    q = np.array([5.0, 1, 1, 1, 1, 1, 1])
    per_token = [q[0:1].mean(), q[1:7].mean()]
    shares = span_profile(q, [(0, 1), (1, 7)])
    assert per_token[0] > per_token[1] and shares[0] < shares[1]


@pytest.mark.parametrize("spans, match", [
    ([], "empty"), ([(0, 6)], "not a range"), ([(2, 2)], "not a range"), ([(-1, 2)], "not a range"),
    ([(0, 3), (2, 4)], "overlap"), ([(0.5, 2)], "not a range"), (["ab"], "not a range|pairs"),
    ([(0,)], "pairs"),
])
def test_span_profile_rejects_bad_spans(spans, match):
    with pytest.raises(ValueError, match=match):
        span_profile([1.0, 1, 1, 1, 1], spans)


def test_span_profile_rejects_bad_profiles():
    for bad in ([1.0, -1.0], [[1.0, 2.0]], [np.nan, 1.0]):
        with pytest.raises(ValueError, match="profile"):
            span_profile(bad, [(0, 1)])
    with pytest.raises(ValueError, match="sums to 0"):
        span_profile([0.0, 0.0], [(0, 1)])


def test_fit_theory_recovers_depth_and_alpha_and_not_a_wrong_depth():
    row = theory.influence(96, 5, 0.35)
    f = metrics.fit_theory(row, range(1, 13))
    assert f["H"] == 5 and abs(f["alpha"] - 0.35) < 1e-4 and f["rms_log"] < 1e-6
    # counterexample: with the true depth excluded the fit is worse, and says so
    g = metrics.fit_theory(row, [2, 3])
    assert g["H"] in (2, 3) and g["rms_log"] > 1e-3
    with pytest.raises(ValueError):
        metrics.fit_theory(row, [])
    with pytest.raises(ValueError):
        metrics.fit_theory(np.r_[0.0, row[1:]], [5])


def test_window_statistics_read_the_declared_regions():
    L = 100
    p = np.ones(L)
    p[0], p[-1] = 4.0, 8.0
    p[60:70] = 0.5  # the valley
    ws = RS.window_stats(np.vstack([p / p.sum()] * 3))
    assert np.allclose(ws["primacy"], 4.0) and np.allclose(ws["recency"], 8.0)
    assert np.all((ws["valley"] >= 0.6) & (ws["valley"] <= 0.7))
    # a flat window has no arms: the counterexample the claims must not call a U
    flat = RS.window_stats(np.full((3, L), 1.0 / L))
    assert np.allclose(flat["primacy"], 1.0) and np.allclose(flat["recency"], 1.0)


def test_ratio_forms_zero_infinity_and_no_ratio_without_a_warning():
    import warnings


    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy RuntimeWarning would fail here
        assert RS.safe_ratio(2.0, 4.0) == 0.5
        assert RS.safe_ratio(0.0, 4.0) == 0.0
        assert RS.safe_ratio(1.0, 0.0) == float("inf")
        assert np.isnan(RS.safe_ratio(0.0, 0.0))


def test_unformed_reason_counts_each_kind_and_passes_positive_ratios():

    assert RW.unformed_reason("primacy", [1.5, 2.0, 0.3]) is None
    why = RW.unformed_reason("primacy", [0.0, 0.0, 2.0, np.inf, np.nan])
    assert why.startswith("first / middle cannot be formed")
    assert "exactly 0 in 2 of 5" in why and "infinite" in why and "0 / 0" in why
    # 0 / 0 is not called infinite
    only_nan = RW.unformed_reason("recency", [np.nan, np.nan])
    assert "0 / 0" in only_nan and "infinite" not in only_nan
    # the headline refuses an interval and carries the reason, never raising
    iv = RS.finite_interval(_ret.ratio_interval, [0.0, 1.0, 2.0], "primacy")
    assert np.isnan(iv["estimate"]) and "cannot be formed" in iv["reason"]
    iv = RS.two_way(np.array([[0.0, 1.0], [1.0, 2.0]]), True, "primacy")
    assert np.isnan(iv["estimate"]) and "cannot be formed" in iv["reason"]
    ok = RS.two_way(np.array([[1.0, 2.0], [1.5, 2.5]]), True, "primacy")
    assert np.isfinite(ok["estimate"]) and "reason" not in ok


def test_change_of_a_ratio_not_formed_names_which_side():

    a = {"primacy": np.array([0.0, 0.0])}
    b = {"primacy": np.array([2.0, 3.0])}
    c = RS.change(a, [b], "primacy")
    assert np.isnan(c["estimate"]) and c["reason"].startswith("the trained first / middle")
    c = RS.change(b, [a], "primacy")
    assert c["reason"].startswith("the born first / middle")


def _claim(key, verdict):
    return {"key": key, "claim": key, "verdict": verdict}


@pytest.mark.parametrize("claims, says, never", [
    # the task loses the middle: the advice says so
    ([_claim("trained_primacy", "holds"), _claim("task_first", "holds"),
      _claim("task_last", "fails")], "loses the middle", "not tested"),
    # the profile favours the ends but the task was not testable: never "the middle is lost"
    ([_claim("trained_primacy", "holds"), _claim("trained_recency", "holds"),
      _claim("task_first", "not testable"), _claim("task_last", "not testable")],
     "was not tested here", "loses the middle"),
    # tested, and the middle not lost
    ([_claim("trained_recency", "holds"), _claim("task_first", "fails"),
      _claim("task_last", "inconclusive")], "did not show the middle lost", "loses the middle"),
    ([_claim("trained_primacy", "fails")], "Nothing above shows the middle lost",
     "loses the middle"),
])
def test_the_summary_says_the_middle_is_lost_only_where_a_task_claim_holds(claims, says, never):

    text = RW.fix_advice(claims, "smollm2-135m")
    assert says in text and never not in text


@pytest.mark.parametrize("model", ["smollm2-135m", "/tmp/my model", "org/name"])
def test_the_summarys_command_parses_with_the_cli_parser(model):
    """The command the summary prints is one a reader can paste: ASCII hyphens, quoted where
    the shell needs it, and accepted by the CLI's own parser."""
    import re
    import shlex

    from posbias_nb import cli

    text = RW.fix_advice([_claim("task_first", "holds")], model)
    cmd = re.search(r"`(posbias [^`]+)`", text).group(1)
    assert "\u2013" not in cmd and "\u2014" not in cmd
    args = cli.build_parser().parse_args(shlex.split(cmd)[1:])
    assert args.model == model
    # the check rejects a counterexample: an en-dash where the hyphens were
    with pytest.raises(cli.UsageError):
        cli.build_parser().parse_args(shlex.split(cmd.replace("--model", "\u2013model"))[1:])
