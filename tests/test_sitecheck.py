"""The site checks of ``tests/sitecheck.py`` (run over the built pages by the browser test)
reject their counterexamples and pass clean pages."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from posbias_nb import notebook

sys.path.insert(0, str(Path(__file__).parent))
import sitecheck as sc  # noqa: E402

CLEAN = ("<html><body><main><p>The link <strong>fails</strong> for SmolLM2 and is "
         "inconclusive for Gemma-3; first over middle holds (+0.70 [+0.23, +1.17]).</p>"
         "<pre>posbias fix --model smollm2-135m --data f.jsonl --out fix/</pre>"
         "<p>Math \\(x^{doc}_k\\) and a hash <code>3f2a</code>.</p>"
         "<script>var s = '{glue:text}`x`';</script></main></body></html>")


def test_a_clean_page_passes():
    p = sc.page_parts(CLEAN)
    assert not sc.raw_roles(p) and not sc.bad_verdict_grammar(p) and not sc.smart_dashes(p)
    assert sc.posbias_commands(p) == ["posbias fix --model smollm2-135m --data f.jsonl --out fix/"]


@pytest.mark.parametrize("html", [
    # a glue role whose closing backtick is a brace: the whole role is shown as text
    "<p>The scores reach {glue:text}`rp_dmax_raw:.0f} in magnitude</p>",
    # a glue role inside a code span: the code span swallows the role
    "<p>(hash <code>{glue:text}</code>rep_hash``)</p>",
    "<p>see {numref}`fig-x` above</p>",
])
def test_an_unrendered_role_is_found(html):
    assert sc.raw_roles(sc.page_parts(html))


def test_a_page_that_documents_the_roles_may_show_them_in_code():
    p = sc.page_parts("<p>for <code>{glue:text}</code> roles</p>")
    assert sc.raw_roles(p) and not sc.raw_roles(p, code_roles_allowed=True)


@pytest.mark.parametrize("text", ["The link is fails for SmolLM2.", "primacy is holds for X",
                                  "the verdict was fails", "first holds fails"])
def test_a_decision_word_after_a_verb_is_found(text):
    assert sc.bad_verdict_grammar(sc.page_parts(f"<p>{text}</p>"))


@pytest.mark.parametrize("word", ["holds", "fails", "inconclusive", "not testable", "exact"])
def test_the_predicate_helper_reads_as_english(word):
    text = f"<p>The link {notebook.verdict_predicate(word)} for SmolLM2.</p>"
    assert not sc.bad_verdict_grammar(sc.page_parts(text))


def test_smart_dashes_in_a_command_are_found():
    assert sc.smart_dashes(sc.page_parts("<p>run posbias fix \u2013model x \u2014out d</p>"))
    assert not sc.smart_dashes(sc.page_parts("<p>slots 1\u20133, a \u2013 b</p>"))


def test_commands_are_taken_from_code_blocks_not_synopses():
    p = sc.page_parts("<pre>$ .venv/bin/posbias profile --model m \\\n    --length 8  # a comment\n"
                      "posbias report --model NAME|PATH [--quick] --out DIR\n</pre>"
                      "<p><code>posbias fix</code> and <code>posbias task --data f --out x"
                      "</code></p>")
    assert sc.posbias_commands(p) == ["posbias profile --model m --length 8",
                                      "posbias task --data f --out x"]


@pytest.mark.parametrize("text, bad", [
    ("Spearman 0.967 [0.960, 0.967] and 0.994 [0.986, 0.993]", 1),  # the landing page's
    ("gain +0.72 [+0.29, +1.14], accuracy 70% [58, 80], 1,697 [1,650, 1,700] s", 0),
    ("\u22120.404 [\u22120.9, \u22120.41]", 1),  # typographic minus signs
    ("a ratio 2.5\u00d7 [2.6\u00d7, 3.1\u00d7]", 1),
    ("positions scaled to [0, 1] and the range [0.2, 0.9]", 0),  # no estimate before them
    ("reference [12] and 4 [5] items", 0),  # not intervals
])
def test_an_interval_that_misses_its_estimate_is_found(text, bad):
    p = sc.page_parts(f"<p>{text}</p>")
    assert len(sc.intervals_missing_estimate(p)) == bad, sc.intervals_missing_estimate(p)
