"""The explorer page (book/explore.md) in headless Chromium, opened from file://.

* the rows the page computes equal the Python rows of ``posbias_nb.rollout.explorer`` (the
  fixture the build writes, ``_build/explorer-fixture.json``): relative error at most 1e-10
  wherever the Python value is above 1e-300, for every setting of the grid (every control,
  L up to 100,000, H up to 128), and so do the numbers printed beside the plot;
* the comparison catches a wrong JavaScript: the page served with a corrupted explorer.js
  (the full-layer path, the log path, the summary) fails it;
* the page makes no request outside the site, reads as a page without JavaScript (a static
  figure and a note), and its controls are labelled, keyboard-usable and written to the URL.
Screenshots at three settings are kept in ``_build/test-artifacts/explorer-*.png``.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from .conftest import ARTIFACTS, ROOT, SITE

PAGE = SITE / "book" / "explore.html"
FIXTURE = ROOT / "_build" / "explorer-fixture.json"
TOL = 1e-10
FLOOR = math.log(1e-300)

READ = """() => { const E = window.posbiasExplorer;
  return {row: Array.from(E.lastRow, x => Number.isFinite(x) ? x : null),
          summary: E.lastSummary, settings: E.settings}; }"""


def row_error(js, py) -> float:
    """Largest relative error of the page's row (natural logs) against the Python row, over
    the positions where the Python value is above 1e-300 (a missing JS value there: inf)."""
    if len(js) != len(py):
        return math.inf
    worst = 0.0
    for a, b in zip(js, py):
        if b is None or b < FLOOR:
            continue
        if a is None:
            return math.inf
        worst = max(worst, abs(math.expm1(a - b)))
    return worst


def summary_error(js: dict, py: dict) -> float:
    """Largest error between the printed numbers, relative where they exceed 1 and absolute
    below (they are logs, shares and positions: an absolute 1e-8 on a log10 is a relative
    2.3e-8 on its number); the valley exact; inf when one side has a number the other does not
    define."""
    worst = 0.0
    for k, b in py.items():
        a = js.get(k)
        a = a if a is not None and math.isfinite(a) else None
        if (a is None) != (b is None):
            return math.inf
        if b is None:
            continue
        if k == "valley":
            if a != b:
                return math.inf
            continue
        worst = max(worst, abs(a - b) / max(abs(b), 1.0))
    return worst


@pytest.fixture(scope="module")
def fixture():
    if not FIXTURE.exists():
        pytest.fail(f"no explorer fixture at {FIXTURE}: `make build-book` writes it")
    return json.loads(FIXTURE.read_text())


def _url(query: str = "") -> str:
    return PAGE.as_uri() + (f"?{query}" if query else "")


def test_the_comparison_rejects_a_counterexample():
    assert row_error([0.0, -1.0], [0.0, -1.0]) == 0.0
    assert row_error([0.0, -1.0 + 1e-9], [0.0, -1.0]) > TOL
    assert row_error([None, 0.0], [-800.0, 0.0]) == 0.0  # below 1e-300: not compared
    assert row_error([None, 0.0], [-5.0, 0.0]) == math.inf
    assert summary_error({"valley": 3, "x": 1.0}, {"valley": 4, "x": 1.0}) == math.inf
    assert summary_error({"x": float("inf")}, {"x": None}) == 0.0
    assert summary_error({"x": 1e-15}, {"x": 0.0}) < 1e-8
    assert summary_error({"x": 2.0 + 1e-6}, {"x": 2.0}) > 1e-8


def test_the_page_rows_equal_the_python_rows(browser, fixture):
    assert len(fixture["query"]) >= 50
    page = browser.new_page()
    errors = []  # errors thrown by the explorer (the theme's own scripts are not ours to test)
    page.on("pageerror", lambda e: errors.append(f"{e}\n{e.stack}")
            if "explorer" in (e.stack or "") else None)
    bad = []
    Ls, Hs = set(), set()
    for q, s, py, sm in zip(fixture["query"], fixture["settings"], fixture["log_rows"],
                            fixture["summary"]):
        page.goto(_url(q))
        got = page.evaluate(READ)
        assert got["settings"]["L"] == s["L"] and got["settings"]["H"] == s["H"], q
        e_row, e_sum = row_error(got["row"], py), summary_error(got["summary"], sm)
        if not (e_row <= TOL and e_sum <= 1e-8):
            bad.append((q, e_row, e_sum))
        Ls.add(s["L"])
        Hs.add(s["H"])
    assert not errors, errors
    assert not bad, bad
    assert 100_000 in Ls and 128 in Hs


CORRUPTIONS = {  # one wrong detail in each path
    "full layers (block floating point)": ("var keep = 1 - a, acc = 0", "var keep = 1 - a * (1 + 1e-7), acc = 0"),
    "any layout (log space)": ("var keep = Math.log1p(-a), mix", "var keep = Math.log1p(-a) + 1e-8, mix"),
    "the window of a sliding layer": ("out[j] = lae(out[j], pre[j + b - 1]);",
                                      "out[j] = lae(out[j], pre[j + b - 2]);"),  # a key short
    "the summary's middle": ("var a = Math.floor((L + 2) / 4);", "var a = Math.floor(L / 4) + 1;"),
}
CHECKS = {"full layers (block floating point)": "full", "any layout (log space)": "hybrid",
          "the window of a sliding layer": "sliding", "the summary's middle": "full"}


def _first(fixture, layout):
    """The fixture's first setting of ``layout`` at L = 1000, without sink, ALiBi or a
    published schedule, and 0 < alpha < 1."""
    for i, s in enumerate(fixture["settings"]):
        if (s["layout"] == layout and s["L"] == 1000 and s["s"] is None and s["m"] == 0
                and s["schedule"] == "constant" and 0 < s["alpha"] < 1 and s["H"] >= 4):
            return i
    raise AssertionError(f"the fixture has no plain {layout} setting at L = 1000")


@pytest.mark.parametrize("what", list(CORRUPTIONS))
def test_a_corrupted_javascript_fails_the_comparison(browser, site_url, fixture, what):
    old, new = CORRUPTIONS[what]
    src = (SITE / "_static" / "explorer.js").read_text()
    assert src.count(old) == 1, f"the corruption target moved: {old!r}"
    bad_src = src.replace(old, new)
    page = browser.new_page()
    page.route("**/_static/explorer.js", lambda route: route.fulfill(
        status=200, content_type="application/javascript", body=bad_src))
    i = _first(fixture, CHECKS[what])
    q = fixture["query"][i]
    page.goto(f"{site_url}/book/explore.html?{q}")
    got = page.evaluate(READ)
    worst = max(row_error(got["row"], fixture["log_rows"][i]),
                summary_error(got["summary"], fixture["summary"][i]))
    assert worst > TOL, f"{what}: a corrupted explorer.js passed the comparison ({worst:.2e})"
    # and the genuine file passes at the same setting
    page.unroute("**/_static/explorer.js")
    page.goto(f"{site_url}/book/explore.html?{q}")
    got = page.evaluate(READ)
    assert row_error(got["row"], fixture["log_rows"][i]) <= TOL


def test_no_request_leaves_the_site_and_the_page_reads_without_javascript(browser):
    page = browser.new_page()
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(_url("L=4096&H=18&alpha=0.5&layout=hybrid&w=64&k=5"))
    page.wait_for_function("() => window.posbiasExplorer && window.posbiasExplorer.lastRow")
    site = SITE.resolve().as_uri()
    outside = [u for u in requests if not (u.startswith(site) or u.startswith("data:"))]
    assert requests and not outside, outside
    assert page.is_visible("#posbias-explorer") and not page.is_visible("#fig-explore-static")
    # without JavaScript: the static figure and the note, the explorer hidden
    ctx = browser.new_context(java_script_enabled=False)
    quiet = ctx.new_page()
    quiet.goto(_url())
    assert quiet.is_visible("#fig-explore-static img")
    assert not quiet.is_visible("#posbias-explorer")
    assert "needs JavaScript" in quiet.content()
    ctx.close()


def test_controls_are_labelled_keyboard_usable_and_in_the_url(browser):
    page = browser.new_page()
    page.goto(_url())
    page.wait_for_function("() => window.posbiasExplorer && window.posbiasExplorer.lastRow")
    ids = page.eval_on_selector_all("#posbias-explorer input, #posbias-explorer select",
                                    "els => els.map(e => e.id)")
    assert len(ids) >= 10
    for i in ids:
        assert page.locator(f"label[for='{i}']").count() == 1, i
    page.focus("#pbx-H")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("() => window.posbiasExplorer.settings.H") == 13
    assert "H=13" in page.url
    assert page.text_content("#pbx-H-value") == "13"
    summary = page.text_content("#pbx-summary")
    assert "13 layers" in summary and page.get_attribute("#pbx-summary", "aria-live") == "polite"
    # powers of ten as a reader writes them ("5.86 × 10³"), never "1e3.768"
    import re
    assert not re.search(r"\b1e-?\d", summary), summary
    # the peak-to-valley ratio: below 1000 a plain number, from 1000 on "d.dd × 10ⁿ"
    m = re.search(r"peak-to-valley (\d+(?:\.\d+)?)( × 10[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)?", summary)
    assert m, summary
    assert m.group(2) or float(m.group(1)) < 1000, summary
    page.select_option("#pbx-layout", "sliding")
    assert "layout=sliding" in page.url


@pytest.mark.parametrize("name,query", [
    ("default", ""),
    ("hybrid", "L=4096&H=18&layout=hybrid&w=64&k=5&x=log"),
    ("deep", "L=100000&H=128&alpha=0.5&x=log"),
])
def test_screenshots(browser, name, query):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1100, "height": 1300})
    page.goto(_url(query))
    page.wait_for_function("() => window.posbiasExplorer && window.posbiasExplorer.lastRow")
    page.locator("#posbias-explorer").screenshot(path=str(ARTIFACTS / f"explorer-{name}.png"))
    assert (ARTIFACTS / f"explorer-{name}.png").stat().st_size > 5000
