"""The site checks of ``tests/sitecheck.py`` (run over the built pages by the browser test)
reject their counterexamples and pass clean pages."""
from __future__ import annotations

import pytest

from posbias_nb import notebook
from tests import sitecheck as sc

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


def _output(kind, text):
    """A cell output as myst-nb renders it (``kind``: ``text_plain`` or ``stream``)."""
    from html import escape
    return (f'<div class="cell docutils container"><div class="cell_output docutils container">'
            f'<div class="output {kind} highlight-myst-ansi notranslate"><div class="highlight">'
            f'<pre><span></span>{escape(text)}\n</pre></div>\n</div>\n</div>\n</div>')


@pytest.mark.parametrize("kind, text", [
    # the older site's own: a list of dicts, a tuple of NumPy scalars, a SymPy tuple, a bare
    # float, a tuple of booleans, a printed check and printed dicts
    ("text_plain", "[{'name': 'gpt2', 'n_layers': 12},\n {'name': 'qwen2-0.5b'}]"),
    ("text_plain", "(np.float64(2.7755575615628914e-17), np.float64(3.3306690738754696e-16))"),
    ("text_plain", "(-x/(x - 1), x/(x - 1)**2)"),
    ("text_plain", "2.4288586266815387e-15"),
    ("text_plain", "(True, True, True)"),
    ("text_plain", "{'pearson': array([0.9996, 0.999 , 0.9995])}"),
    ("stream", "closed form = exact product at j >= w: True\nreach 90 ; zero beyond it: True"),
    ("stream", "B by window w: {1: 1.0, 8: 6.97, 64: 24.27, 512: 79.12} ; globals: 9.93"),
    ("stream", "5*sliding:512,full\n{0.1: 'middle per token: 0.462', 0.5: 'middle: 156'}"),
])
def test_a_bare_repr_is_found(kind, text):
    page = f"<html><body><main><p>Before.</p>{_output(kind, text)}<p>After.</p></main></body></html>"
    found = sc.bare_reprs(page)
    assert len(found) == 1 and len(found[0]) <= 80, found


@pytest.mark.parametrize("kind, text", [
    # a printed prompt: its JSON has double-quoted keys
    ("stream", 'Extract the value corresponding to the specified key in the JSON object below.\n\n'
               'JSON data:\n{"1bdc0c54": "2f13aa2c",\n "ea3b33b5": "3181433b"}\n\n'
               'Key: "1bdc0c54"\nCorresponding value:'),
    ("stream", "The floor is 0.031 for the uniform kernel and 0.020 for ALiBi."),
    ("text_plain", "Figure(640x480) drawn: the profile of gpt2 at 1,024 tokens."),
])
def test_a_prompt_or_a_sentence_is_not_a_repr(kind, text):
    assert sc.bare_reprs(f"<main>{_output(kind, text)}</main>") == []


def test_only_text_outputs_are_read():
    """A table, math or HTML output, and code in the cell's input, are not outputs to read."""
    page = ('<div class="cell_input"><pre>x = {1: 2}\n(True, True)</pre></div>'
            '<div class="output text_html"><div>{1: 2}</div></div>'
            '<div class="output text_latex math">\\((1, 2)\\)</div>'
            '<table><tr><td>[0.1, 0.2]</td></tr></table>')
    assert sc.bare_reprs(page) == []
    # nested divs inside an output do not end it early
    assert sc.bare_reprs('<div class="output stream"><div><div>x</div></div>(True, 1)</div>')


@pytest.mark.parametrize("text, what", [
    ("in 70% [58, 80]% of SmolLM2's prompts", "a unit inside and after an interval"),
    ("the gain +0.20 [-0.00, +0.40] nats", "a signed zero"),
    ("a slope of \u22120.000 per token", "a signed zero"),
    ("+0.72 nats, one-sided 95% bounds [+0.29, +1.14]; detectable", "a one-sided bound with two ends"),
    ("the layout sliding:16@0.014936589462354138 keeps", "a float in full"),
])
def test_a_hand_formatted_number_is_found(text, what):
    found = sc.hand_formatted(sc.page_parts(f"<main><p>{text}</p></main>"))
    assert len(found) == 1 and found[0].startswith(what), found


def test_what_the_formatter_prints_passes():
    """The formatter's own output of the same numbers, and numbers that only look alike."""
    texts = [f"in {notebook.interval(0.70, 0.58, 0.80, '.0%')} of SmolLM2's prompts",
             f"the gain {notebook.interval(0.20, -0.001, 0.40, '+.2f', unit='nats')}",
             notebook.interval(0.72, 0.29, 1.14, "+.2f", kind="one-sided", unit="nats"),
             "version 2026-01-05, L+0 and x - 0.5, 10.0 and 0.25, a hash 0x3f",
             "<code>-0.0 and 0.014936589462354138 in code</code>"]
    for t in texts:
        assert sc.hand_formatted(sc.page_parts(f"<main><p>{t}</p></main>")) == [], t


def test_an_asterisk_read_as_emphasis_is_found():
    assert sc.broken_emphasis("<td><p>5<em>sliding:512,full,5</em>sliding:512</p></td>")
    md = notebook.markdown_table(["layout"], [["5*sliding:512,full"]]).data
    assert "5\\*sliding" in md
    assert not sc.broken_emphasis("<p>a <em>hybrid</em> layout, 5\u00d7 faster</p>")


def test_a_caption_that_does_not_say_what_to_see_is_found():
    page = ("<figure><img src='a.png'><figcaption><p>Fig. 3 Profiles at three depths, log "
            "scale.</p></figcaption></figure>"
            "<figure><img src='b.png'><figcaption><p>Fig. 4 The same, exact. <em>What to "
            "see:</em> the tail grows with depth.</p></figcaption></figure>")
    assert sc.captions_without_what_to_see(page) == ["Fig. 3 Profiles at three depths, log scale."]
    assert sc.captions_without_what_to_see(page.split("<figure>", 2)[2]) == []
