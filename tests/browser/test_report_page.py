"""A generated ``posbias report`` page as a reader sees it, in headless Chromium (issue 21).

The page is opened from disk (``file://``), with every network request refused: it must need
none.  No console error or page error; every figure decodes (``naturalWidth > 0``); the headline
numbers shown equal those of ``report.json``.  Skipped unless ``POSBIAS_SITE_TEST=1`` (see
``conftest.py``); the report is made on a tiny zoo model, so no built site is needed.
"""
from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    pytest.importorskip("torch")
    from posbias_nb import cli

    out = tmp_path_factory.mktemp("report")
    assert cli.main(["report", "--model", "gpt2-tiny", "--weights", "random", "--length", "256",
                     "--quick", "--quiet", "--out", str(out)]) == 0
    return out


def test_report_page_opens_from_disk_without_errors(browser, report_dir):
    page = browser.new_page()
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    def route(r):
        if not r.request.url.startswith(("file:", "data:")):
            requests.append(r.request.url)
            return r.abort()
        return r.continue_()

    page.route("**/*", route)
    page.goto((report_dir / "index.html").as_uri())
    page.wait_for_load_state("load")
    assert errors == []
    assert requests == []  # self-contained: nothing fetched from the network
    n = page.eval_on_selector_all("img", "els => els.length")
    broken = page.eval_on_selector_all(
        "img", "els => els.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.alt)")
    assert n >= 4 and broken == []
    shown = page.eval_on_selector_all(
        "[data-key]", "els => els.map(e => [e.dataset.key, e.dataset.value, e.textContent])")
    obj = json.loads((report_dir / "report.json").read_text())
    assert len(shown) >= 12
    for key, value, _text in shown:
        v = obj
        for part in key.split("."):
            v = v[int(part)] if isinstance(v, list) else v[part]
        assert float(value) == float(v), key
    page.close()
