"""Functions that the chapters use and that had no test of their own (issue 17): the attention
logits at init (chapter *The U at birth*), the shape maps (chapter *Residuals*), the figures."""
from __future__ import annotations

import numpy as np
import pytest

from posbias_nb import theory


# ------------------------------------------------------------------ measure.logits
def test_key_spread_ratio_known_values_and_shape_errors():
    from posbias_nb.measure import key_spread_ratio

    on = np.zeros((2, 3, 4, 5))
    on[..., :] = np.arange(5.0)  # std over keys sqrt(2) in every head
    off = 2 * on
    r = key_spread_ratio(on, off)
    assert r.shape == (2, 3) and np.allclose(r, 2.0)
    with pytest.raises(ValueError, match="one shape"):
        key_spread_ratio(on, off[..., :4])
    with pytest.raises(ValueError, match="one shape"):
        key_spread_ratio(on[0], off[0])


@pytest.mark.slow
def test_init_logits_rope_on_off_cached_and_validated(monkeypatch):
    pytest.importorskip("torch")
    from posbias_nb import measure, models

    a = measure.init_logits("qwen2-tiny", length=10, batch=2, seed=1)
    assert a["on"].shape == a["off"].shape == (2, 2, 4, 10)
    assert a["input_ids"].shape == (2, 10)
    assert not np.allclose(a["on"], a["off"])  # switching RoPE off changes the logits
    monkeypatch.setattr(models, "load", lambda *x, **k: pytest.fail("cache miss"))
    b = measure.init_logits("qwen2-tiny", length=10, batch=2, seed=1)
    assert np.array_equal(a["on"], b["on"]) and np.array_equal(a["off"], b["off"])
    with pytest.raises(ValueError, match="rotary"):
        measure.init_logits("gpt2-tiny", length=10, batch=1)  # learned positions: nothing to switch


# ------------------------------------------------------------------ theory.shape_map
def test_shape_map_against_direct_rows():
    L, H, alphas = 40, 5, (1.0, 0.5)
    m = theory.shape_map(L, H, alphas)
    assert m["log10_peak_to_valley"].shape == (2, H)
    for ia, a in enumerate(alphas):
        for h in range(1, H + 1):
            row = theory.influence(L, h, alpha=a)
            assert m["log10_peak_to_valley"][ia, h - 1] == pytest.approx(
                np.log10(row.max() / row.min()), rel=1e-9)
            assert m["argmin"][ia, h - 1] == int(np.argmin(row)) + 1
            u = np.log10(min(row[0], row[-1]) / row.min())
            assert m["log10_u_depth"][ia, h - 1] == pytest.approx(u, abs=1e-9)
    # without residuals (alpha = 1) the last token is not a second arm: one arm, no U at depth 1
    assert m["log10_u_depth"][0, 0] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="alpha"):
        theory.shape_map(L, H, (0.0,))
    with pytest.raises(ValueError):
        theory.shape_map(1, H, (0.5,))


# ------------------------------------------------------------------ plots
def test_figures_have_labelled_axes():
    import matplotlib

    matplotlib.use("Agg")
    from posbias_nb import plots

    L = 64
    t = theory.influence(L, 3, 0.2)
    real = {"m": dict(slots=np.array([1, 5, 10]), diff=np.array([1.0, 0.0, 0.5]),
                      low=np.array([0.5, 0.0, -0.5]), high=np.array([1.5, 0.0, 1.5]), n=7)}
    fig, axes = plots.headline_figure(dict(
        born=dict(model="m", L=L, H=3, alpha=0.2, measured=t, theory=t,
                  jmin=int(np.argmin(t)) + 1), real=real))
    for ax in axes:
        assert ax.get_xlabel() and ax.get_ylabel()
    assert axes[0].get_yscale() == "log" and axes[2].get_yscale() == "log"
    # the valley is marked where the theory row is lowest: at L - 1 here, not in the middle
    marker = [ln for ln in axes[2].lines if ln.get_marker() == "v"][0]
    assert marker.get_xdata()[0] == -1  # j - L
    assert plots.check_readable(fig) >= plots.MIN_TEXT_PX  # the inset too, as shown
    L = 32
    rows = {"a": theory.influence(L, 3, 0.5), "b": theory.influence(L, 3, 1.0)}
    fig, (ax, ax2) = plots.force_figure(L, rows, [0.5, 1.0], [0.4, 0.3], "alpha")
    assert ax.get_xlabel() and ax.get_ylabel() and ax2.get_xlabel() == "alpha"
    assert len(ax.get_lines()) == 2
    plots.check_readable(fig)


def test_the_readability_check_finds_small_text():
    """A legend at 5 pt in a figure 12 inches wide, shown shrunk to the column, is refused;
    the same figure at the column's width and the style's sizes is not."""
    import matplotlib

    matplotlib.use("Agg")
    from posbias_nb import plots

    fig, ax = plots.figure(width=12.0)
    ax.plot([1, 2], [3, 4], label="series")
    ax.legend(fontsize=5)
    sizes = plots.text_sizes(fig)
    assert sizes[0][1] == "series" and sizes[0][0] < 5 * 110 / 72
    with pytest.raises(ValueError, match="below 9 px.*'series'"):
        plots.check_readable(fig)
    fig, ax = plots.figure(width=6.0)
    ax.plot([1, 2], [3, 4], label="series")
    ax.legend()
    assert plots.check_readable(fig) == pytest.approx(8.5 * 110 / 72)  # not shrunk: 6 in fits
    with pytest.raises(ValueError, match="column_px"):
        plots.text_sizes(fig, column_px=0)


def test_headline_data_fits_the_born_row_and_pairs_the_real_curves(monkeypatch):
    """The headline's data from fake measurements: the theory row is refitted to the measured
    profile (its alpha recovered), its minimum is at L - 1 (the valley the figure marks), and
    each model's real curve is realqa.paired_by_slot of its run."""
    from posbias_nb import measure
    from posbias_nb.experiments.prompt import headline, realqa

    L, H = 64, 12
    row = theory.influence(L, H, 0.2)
    rng = np.random.default_rng(0)
    per = row * np.exp(0.01 * rng.standard_normal((4, L)))
    seen = {}
    monkeypatch.setattr(measure, "profile",
                        lambda model, **kw: seen.update(model=model, **kw) or
                        {"per_sequence": per})
    monkeypatch.setattr(realqa, "qa_run", lambda m: m)
    monkeypatch.setattr(realqa, "paired_by_slot", lambda res: {"run": res})
    d = headline.headline_data()
    assert seen == dict(model="gpt2", length=1024, probes=8, batch=8, seed=0, progress=False)
    b = d["born"]
    assert b["H"] == H and abs(b["alpha"] - 0.2) < 0.02 and b["jmin"] == L - 1
    assert np.isclose(b["theory"].sum(), 1) and np.isclose(b["measured"].sum(), 1)
    assert d["real"] == {m: {"run": m} for m in realqa.DESIGN.as_dict()["models"]}
