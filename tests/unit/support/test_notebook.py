import pytest

from posbias_nb import notebook


def test_interval_format():
    assert notebook.interval(1, 0.5, 2.25, ".1f") == "1.0 [0.5, 2.2]"
    with pytest.raises(ValueError, match="non-finite"):
        notebook.interval(1, float("nan"), 2)


def test_verdict_markdown_rows_and_escaping():
    md = notebook.verdict_markdown([
        dict(claim="a | b", paper="x", measured="1 [0, 2]", verdict="holds"),
        dict(claim="c", paper="y", measured="3", verdict="fails"),
    ])
    lines = md.splitlines()
    assert len(lines) == 4 and lines[0].count("|") == 5
    assert "a \\| b" in lines[2]
    with pytest.raises(ValueError, match="at least one row"):
        notebook.verdict_markdown([])
    with pytest.raises(ValueError, match="'verdict'"):
        notebook.verdict_markdown([dict(claim="c", paper="y", measured="3", verdict=" ")])


def test_verdict_table_glues_every_cell(monkeypatch):
    got = {}
    monkeypatch.setattr(notebook, "glue", lambda k, v, display=False: got.__setitem__(k, v))
    rows = [dict(key="u", claim="U", paper="yes", measured="9 [8, 10]", verdict="holds",
                 values={"est": 9.0})]
    out = notebook.verdict_table(rows, "v_x")
    assert "| U | yes | 9 [8, 10] | holds |" in out.data
    badge = got.pop("v_x_u_badge")
    found = got.pop("v_x_found").data  # the chapter's "What we found" list
    assert found.startswith("- <span") and "**U**: 9 [8, 10]" in found
    assert got == {"v_x_u_claim": "U", "v_x_u_paper": "yes", "v_x_u_measured": "9 [8, 10]",
                   "v_x_u_verdict": "holds", "v_x_u_explanation": "", "v_x_u_est": 9.0}
    assert badge.word == "holds" and "posbias-verdict-holds" in badge._repr_html_()
    with pytest.raises(ValueError, match="distinct keys"):
        notebook.verdict_table(rows + rows, "v_x")


def test_interval_takes_a_tuple():
    t = (12.0, 9.4, 15.2)
    assert notebook.interval(t, ".0f") == notebook.interval(*t, ".0f") == "12 [9, 15]"
    assert notebook.interval(t, fmt=".1f") == "12.0 [9.4, 15.2]"
    assert notebook.interval(list(t)) == "12.000 [9.400, 15.200]"
    import numpy as np
    assert notebook.interval(np.array(t), ".0f") == "12 [9, 15]"
    with pytest.raises(ValueError, match="tuple of three"):
        notebook.interval((1.0, 2.0), ".1f")
    with pytest.raises(ValueError, match="non-finite"):
        notebook.interval((1.0, float("inf"), 2.0))


def test_bold_best_and_markdown_table():
    assert notebook.bold_best([0.3, 0.1, 0.2]) == ["0.300", "**0.100**", "0.200"]
    assert notebook.bold_best([1, 3, 3], ".0f", best=max) == ["1", "**3**", "**3**"]
    with pytest.raises(ValueError):
        notebook.bold_best([])
    md = notebook.markdown_table(["a", "b"], [[1, "x|y"], ["z", 2.5]]).data.splitlines()
    assert md == ["| a | b |", "|---|---|", "| 1 | x\\|y |", "| z | 2.5 |"]
    # the counterexample: a row with a missing cell is refused, not shifted
    with pytest.raises(ValueError, match="row 1 has 1 cells"):
        notebook.markdown_table(["a", "b"], [[1, 2], [3]])
    with pytest.raises(ValueError, match="column"):
        notebook.markdown_table([], [])


def _literal_glue_names(text: str) -> list[str]:
    import re

    return re.findall(r"""\bglue\(\s*["']([A-Za-z0-9_]+)["']""", text)


def test_every_chapter_glues_each_literal_key_once():
    """A key glued twice makes the book build warn ("glue key ... duplicate"), and with -W fail;
    the later value silently replaces the earlier one in the prose."""
    from collections import Counter
    from pathlib import Path

    book = Path(__file__).resolve().parents[3] / "book"
    for f in sorted(book.glob("*.md")):
        dup = [k for k, n in Counter(_literal_glue_names(f.read_text())).items() if n > 1]
        assert not dup, f"{f.name} glues {dup} more than once"
    # the check can fail: a chapter text with a repeated key
    assert Counter(_literal_glue_names('glue("a", 1)\nglue("a", 2)'))["a"] == 2


def test_glue_refuses_a_key_glued_twice(monkeypatch):
    from posbias_nb import notebook

    monkeypatch.setattr(notebook, "_GLUED", {})
    monkeypatch.delenv("POSBIAS_STRICT_GLUE", raising=False)
    notebook.glue("k_twice", 1.0)
    notebook.glue("k_twice", 1.0)  # a cell re-run interactively: same value, allowed
    with pytest.raises(ValueError, match="glued twice"):
        notebook.glue("k_twice", 2.0)
    monkeypatch.setenv("POSBIAS_STRICT_GLUE", "1")
    with pytest.raises(ValueError, match="glued twice"):
        notebook.glue("k_twice", 1.0)


# --- the badges and the overview of the verdicts (intro table, chapter verdicts) -------------
@pytest.mark.parametrize("verdict, word, why", [
    ("holds", "holds", ""),
    ("holds; the valley sits late, not in the middle", "holds",
     "the valley sits late, not in the middle"),
    ("fails at L = 512: the spike is late", "fails", "at L = 512: the spike is late"),
    ("not testable: flat by construction", "not testable", "flat by construction"),
    ("inconclusive", "inconclusive", ""),
    ("exact", "exact", ""),
    ("in part: both ends stay above the middle", None, "in part: both ends stay above the middle"),
    ("reproduced", None, "reproduced"),
    ("not reproduced", None, "not reproduced"),     # "not" alone is no word
    ("holdsworth", None, "holdsworth"),             # a word, not a prefix
    ("Gemma-3-270M: holds; SmolLM2: fails", None, "Gemma-3-270M: holds; SmolLM2: fails"),
])
def test_decision_word_is_the_leading_verdict_word(verdict, word, why):
    assert notebook.decision(dict(verdict=verdict)) == (word, why)


def test_decision_field_is_validated():
    r = dict(key="k", verdict="in part: the ends stay", decision="inconclusive")
    assert notebook.decision(r) == ("inconclusive", "in part: the ends stay")
    with pytest.raises(ValueError, match="decision must be one of"):
        notebook.decision(dict(r, decision="partly"))
    with pytest.raises(ValueError, match="decision must be one of"):
        notebook.decision(dict(r, decision="Holds"))
    # a decision that contradicts the verdict's own leading word is refused
    with pytest.raises(ValueError, match="contradicts"):
        notebook.decision(dict(key="k", verdict="holds; mostly", decision="fails"))
    assert notebook.decision(dict(verdict="holds; mostly", decision="holds")) == ("holds", "mostly")


def test_badge_html_and_text():
    b = notebook.Badge("not testable")
    assert repr(b) == "not testable"
    assert b._repr_html_() == ('<span class="sd-badge posbias-verdict '
                               'posbias-verdict-not-testable">not testable</span>')
    none = notebook.Badge(None)
    assert repr(none) == notebook.NO_DECISION and "posbias-verdict-none" in none._repr_html_()
    with pytest.raises(ValueError):
        notebook.Badge("partly")


def _row(**kw):
    base = dict(key="a", claim="C", paper="P", measured="0.3 [0.1, 0.5]", verdict="holds; wide")
    base.update(kw)
    return base


@pytest.fixture
def glued(monkeypatch, tmp_path):
    got = {}
    monkeypatch.setattr(notebook, "glue", lambda k, v, display=False: got.__setitem__(k, v))
    monkeypatch.setenv("POSBIAS_VERDICTS_DIR", str(tmp_path / "verdicts"))
    return got


def test_verdict_table_checks_the_effect_against_decide(glued):
    ok = _row(effect=dict(interval=(0.3, 0.1, 0.5), threshold=0.2, direction="greater"))
    with pytest.raises(ValueError, match="stats.decide on its effect says 'inconclusive'"):
        notebook.verdict_table([ok], "v_t")   # low 0.1 < 0.2: decide says inconclusive
    assert glued == {}                        # nothing glued from a refused table
    notebook.verdict_table([_row(effect=dict(interval=(0.3, 0.1, 0.5), threshold=0.05,
                                             direction="greater"))], "v_t")
    assert glued["v_t_a_explanation"] == "wide" and glued["v_t_a_badge"].word == "holds"
    # the counterexample: a row typed "holds" whose interval says it fails
    bad = _row(key="b", effect=dict(interval=(-0.2, -0.4, -0.1), threshold=0.0, scale=1.0))
    with pytest.raises(ValueError, match="'holds' but stats.decide on its effect says 'fails'"):
        notebook.verdict_table([bad], "v_t2")
    # a row without a decision word cannot carry an effect
    with pytest.raises(ValueError, match="decision is None"):
        notebook.verdict_table([_row(verdict="reproduced", effect=dict(
            interval=(0.3, 0.1, 0.5), threshold=0.05))], "v_t3")
    with pytest.raises(ValueError, match="unknown keys"):
        notebook.verdict_table([_row(effect=dict(interval=(0.3, 0.1, 0.5), threshold=0.05,
                                                 thresh=1))], "v_t4")
    # exact results: a scalar with exact=True is decided "exact"
    notebook.verdict_table([_row(key="e", verdict="exact", effect=dict(
        interval=0.25, threshold=0.0, direction="greater", exact=True, scale=1.0))], "v_t5")
    rec = notebook.read_verdict_records(["v_t5"])["v_t5"][0]
    assert rec["effect"]["interval"] == [0.25] * 3 and rec["effect"]["margin"] == [0.25] * 3


def test_verdict_record_round_trip(glued, tmp_path):
    import numpy as np

    rows = [_row(effect=dict(interval=np.array([0.3, 0.1, 0.5]), threshold=np.float64(0.05))),
            _row(key="b", verdict="in part: the ends", values=dict(est=1.5)),
            _row(key="c", verdict="in part: the ends", decision="inconclusive",
                 effect=dict(interval=(0.0, -0.01, 0.06), direction="within",
                             band=(-0.05, 0.05)))]
    notebook.verdict_table(rows, "v_rt")
    got = notebook.read_verdict_records(["v_rt"])["v_rt"]
    assert [r["key"] for r in got] == ["a", "b", "c"]
    assert [r["decision"] for r in got] == ["holds", None, "inconclusive"]
    assert got[1]["effect"] is None and got[1]["explanation"] == "in part: the ends"
    a = got[0]["effect"]
    assert a["interval"] == [0.3, 0.1, 0.5] and a["threshold"] == 0.05
    assert a["margin"] == pytest.approx([5.0, 1.0, 9.0])
    assert got[2]["effect"]["margin"] == pytest.approx([1.0, -0.2, 1.0])
    assert glued["v_rt_b_badge"].word is None and glued["v_rt_c_badge"].word == "inconclusive"
    with pytest.raises(FileNotFoundError, match="execute the chapter"):
        notebook.read_verdict_records(["v_rt", "v_missing"])
    # a record older than its chapter's source is stale
    import os
    src = tmp_path / "chapter.md"
    src.write_text("x")
    path = notebook.verdict_dir() / "v_rt.json"
    os.utime(src, (path.stat().st_mtime + 10,) * 2)
    with pytest.raises(FileNotFoundError, match="older than"):
        notebook.read_verdict_records(["v_rt"], sources={"v_rt": src})


def test_verdict_dir_follows_the_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("POSBIAS_VERDICTS_DIR", raising=False)
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path))
    assert notebook.verdict_dir() == tmp_path / "verdicts"
    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")
    assert notebook.verdict_dir().name == "verdicts"
    monkeypatch.setenv("POSBIAS_VERDICTS_DIR", str(tmp_path / "v"))
    assert notebook.verdict_dir() == tmp_path / "v"


def test_verdict_overview_draws_every_row():
    import matplotlib

    matplotlib.use("Agg")
    from posbias_nb import plots

    rows = [dict(chapter="A", claim="one", decision="holds", margin=(2.0, 0.5, 30.0)),
            dict(chapter="A", claim="two", decision="fails", margin=(-0.3, -0.5, -0.001)),
            dict(chapter="B", claim="three", decision="inconclusive", margin=(0.0, -1.0, 1.0)),
            dict(chapter="B", claim="four " * 30, decision=None, margin=None)]
    fig, ax = plots.verdict_overview(rows)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    # every label whole: a long claim is wrapped over lines, never cut
    assert labels[0] == "A: one" and len(labels) == 4
    assert labels[-1].replace("\n", " ").split() == ("B: " + "four " * 30).split()
    assert "\u2026" not in labels[-1] and labels[-1].count("\n") >= 2
    assert ax.get_xscale() == "symlog" and ax.get_xlabel() and ax.get_ylabel() == "claim"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "holds", "fails", "inconclusive", "no decision word"]
    assert any(t.get_text() == "no single interval" for t in ax.texts)
    plots.check_readable(fig)  # every label at least 9 px as the verdicts page shows it
    matplotlib.pyplot.close(fig)
    with pytest.raises(ValueError, match="low <= estimate"):
        plots.verdict_overview([dict(chapter="A", claim="x", decision="holds",
                                     margin=(1.0, 2.0, 3.0))])
    with pytest.raises(ValueError, match="at least one"):
        plots.verdict_overview([])


def test_badge_colours_are_the_figures_and_the_css_is_served():
    """Every badge class has its colour in _assets/posbias.css, the same as the word's colour in
    the overview figure, and the book's configuration serves that file."""
    import re
    from pathlib import Path

    from posbias_nb import plots, stats

    root = Path(__file__).resolve().parents[3]
    css = (root / "_assets" / "posbias.css").read_text()
    assert re.search(r'html_css_files:\s*\["posbias.css"\]', (root / "_config.yml").read_text())
    assert set(notebook.BADGE_STYLE) == set(stats.VERDICTS)
    for word in stats.VERDICTS:
        rule = re.search(r"\." + notebook.BADGE_STYLE[word] + r"\s*{([^}]*)}", css)
        assert rule, word
        assert plots.VERDICT_COLORS[word] in rule.group(1), word
    assert re.search(r"\.posbias-verdict-none\s*{", css)


def test_overview_page_is_read_again_after_any_change():
    """The Sphinx hook (_ext/posbias_sphinx.py) marks book/verdicts and book/intro outdated
    whenever another page is read again, and only then; the overview is last in sorted order
    (read after every chapter) and, for the reader, first in the table of contents, right after
    the introduction whose findings it lists in full."""
    import importlib.util
    from pathlib import Path
    from types import SimpleNamespace

    root = Path(__file__).resolve().parents[3]
    spec = importlib.util.spec_from_file_location("posbias_sphinx",
                                                  root / "_ext" / "posbias_sphinx.py")
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    env = SimpleNamespace(found_docs={"book/intro", "book/cesaro", ext.OVERVIEW})
    both = ["book/intro", ext.OVERVIEW]
    assert ext._reread_overview(None, env, set(), {"book/cesaro"}, set()) == both
    assert ext._reread_overview(None, env, set(), set(), {"book/old"}) == both
    assert ext._reread_overview(None, env, set(), set(), set()) == []
    assert ext._reread_overview(None, env, set(), {ext.OVERVIEW, "book/intro"}, set()) == []
    docs = sorted(p.stem for p in (root / "book").glob("*.md"))
    assert "book/" + docs[-1] == ext.OVERVIEW
    toc = [line.split("file:")[1].strip() for line in (root / "_toc.yml").read_text().splitlines()
           if "file:" in line]
    assert toc[0] == ext.OVERVIEW


def test_interval_shows_a_width_it_has():
    from posbias_nb.notebook import interval
    assert interval(0.48312, 0.48301, 0.48342, ".3f") == "0.4831 [0.4830, 0.4834]"
    s = interval(-0.0008, -0.00081, -0.00079, ".4f")
    lo, hi = s.split("[")[1].rstrip("]").split(", ")
    assert lo != hi
    assert interval(0.5, 0.5, 0.5, ".3f") == "0.500 [0.500, 0.500]"  # a true point stays one


def test_overview_table_badges_mean_what_the_legend_says():
    """An exact row carries the exact badge (beside its word where it holds or fails, never the
    note "decided from several intervals"); a row decided from several intervals is marked,
    and the legend of the mark is written once, under the table (issue 64, item 4)."""
    rows = [dict(label="ch-a", claim="x_1 is *big*", paper="p", decision="holds",
                 explanation="", measured="0.5 [0.4, 0.6]",
                 effect=dict(interval=[0.5, 0.4, 0.6], margin=[1, 0.5, 2])),
            dict(label="ch-a", claim="exact", paper="p", decision="exact", explanation="",
                 measured="1/2", effect=None),
            dict(label="ch-b", claim="two models", paper="p", decision="fails",
                 explanation="both", measured="a; b", effect=None),
            dict(label="ch-b", claim="words", paper="p", decision=None,
                 explanation="in part", measured="m", effect=None),
            dict(label="ch-c", claim="proved", paper="p", decision="holds", explanation="",
                 measured="exact: proved for symbolic H", effect=None),
            dict(label="ch-c", claim="again", paper="p", decision="fails", explanation="",
                 measured="exact: 3 of 4", effect=None)]
    md = notebook.verdict_overview_markdown(rows)
    lines = md.splitlines()
    table, legend = lines[2:8], lines[8:]
    mark = notebook.SEVERAL_MARK
    assert "x\\_1 is \\*big\\*" in table[0] and "{ref}`ch-a`" in table[0]
    assert [mark in t for t in table] == [False, False, True, False, False, False]
    exact = 'posbias-verdict-exact">exact</span>'
    assert [exact in t for t in table] == [False, True, False, False, True, True]
    assert "posbias-verdict-holds" in table[4] and "posbias-verdict-fails" in table[5]
    assert "see text" in table[3]
    assert md.count("several intervals") == 1 and legend == ["", notebook.SEVERAL_LEGEND]
    assert notebook.no_interval_reason(rows[4]).startswith("an exact result")
    # the counterexample: a table without a marked row has no legend
    assert "several intervals" not in notebook.verdict_overview_markdown(rows[:2])
    assert notebook.decision_counts(rows[:4]) == (
        "1 holds, 1 fails, 1 is exact and 1 has a verdict in words")
    assert notebook.decision_counts(rows[:1] * 3) == "3 hold"
    assert notebook.Badge("holds", exact=True).text == "holds (exact)"
    assert notebook.Badge("exact", exact=True).text == "exact"


def test_interval_refuses_an_interval_that_misses_its_estimate():
    """The landing page printed 0.994 [0.986, 0.993]: the one formatter now refuses it."""
    with pytest.raises(ValueError, match="outside its interval"):
        notebook.interval(0.994, 0.986, 0.993)
    with pytest.raises(ValueError, match="outside its interval"):
        notebook.interval((1.0, 2.0, 3.0))
    assert notebook.interval(0.993, 0.986, 0.993) == "0.993 [0.986, 0.993]"  # a bound may be it


def test_significant_shows_what_a_reader_reads():
    import numpy as np
    s = notebook.significant
    assert [s(v) for v in (512.0, np.float64(20.783), 0.0, -0.2143, 1299.3, 12345.6)] == \
        ["512", "20.8", "0", "-0.214", "1299", "12346"]
    assert [s(v) for v in (2.4288586266815387e-15, 462123.5, 0.00091515, 462000.0)] == \
        ["2.43e-15", "4.62e+05", "9.15e-04", "462000"]
    assert [s(True), s(np.bool_(False)), s(float("nan")), s(None), s("llama")] == \
        ["yes", "no", "\u2014", "\u2014", "llama"]
    assert s(0.123456, 2) == "0.12"


def test_value_table_shapes_and_cells():
    import numpy as np
    flat = notebook.value_table({100: np.float64(0.0465), 1000: 0.0157}, "L", "TV").data
    assert flat.splitlines() == ["| L | TV |", "|---|---|", "| 100 | 0.0465 |", "| 1000 | 0.0157 |"]
    nested = {"pretrained": dict(ptv=20.783, ci=np.array([20.783, 13.807, 37.933])),
              "random": dict(ptv=57.263, near_right=np.nan)}
    rows = notebook.value_table(nested, "weights").data.splitlines()
    assert rows[0] == "| weights | ptv | ci | near_right |"
    assert rows[2] == "| pretrained | 20.8 | 20.8 [13.8, 37.9] |  |"
    assert rows[3] == "| random | 57.3 |  | \u2014 |"
    cols = notebook.value_table(nested, transpose=True).data.splitlines()
    assert cols[0] == "|  | pretrained | random |" and cols[2] == "| ptv | 20.8 | 57.3 |"
    # three numbers that are not an interval, or intervals=False: listed, never refused
    assert "| 0.125, 0, 0 |" in notebook.value_table({"acc": [0.125, 0.0, 0.0]}).data
    assert "| 1, 2, 3 |" in notebook.value_table({"x": (1, 2, 3)}, intervals=False).data
    assert "| 5, 1, 2 |" in notebook.value_table({"x": (5, 1, 2)}).data
    # a tuple key is joined; a missing or undefined bound is a dash
    assert "| G curve | 0.500, \u2014, \u2014 |" in notebook.value_table(
        {("G", "curve"): (0.5, None, None)}).data
    with pytest.raises(ValueError, match="non-empty dict"):
        notebook.value_table({})
    with pytest.raises(ValueError, match="dict of dicts"):
        notebook.value_table({"a": 1}, transpose=True)


def test_paired_difference_prints_a_width_zero_interval_as_one_number():
    """Chapter *Prediction*'s table of scores: an interval, or an exact value, or a value with
    the share of resamples at it."""
    s = {("drho", "p", "q"): (0.25, 0.1, 0.4), ("drho_exact", "p", "q"): False,
         ("drho_atom", "p", "q"): 0.0}
    assert notebook.paired_difference(s, "drho", "p", "q", "+.2f") == \
        notebook.interval((0.25, 0.1, 0.4), "+.2f")
    s[("drho", "p", "q")] = (0.25, 0.25, 0.25)
    s[("drho_atom", "p", "q")] = 0.5
    assert notebook.paired_difference(s, "drho", "p", "q", "+.2f") == \
        "+0.25 (in 50.0% of resamples)"
    s[("drho_exact", "p", "q")] = True
    assert notebook.paired_difference(s, "drho", "p", "q", "+.2f") == "+0.25 (exact)"
    with pytest.raises(KeyError):
        notebook.paired_difference(s, "dw1", "p", "q")



def test_no_printed_zero_carries_a_sign():
    from posbias_nb import notebook as nb

    assert [nb.number(v, "+.2f") for v in (-0.004, 0.004, -0.0, 0.0)] == ["0.00"] * 4
    assert nb.number(-0.006, "+.2f") == "-0.01" and nb.number(0.006, "+.2f") == "+0.01"
    assert nb.number(-1e-9, ".1e") == "-1.0e-09"   # not a zero: its sign stays
    assert nb.interval(0.2, -0.001, 0.4, "+.2f") == "+0.20 [0.00, +0.40]"
    # the counterexample: Python's own formatting signs the zero
    assert format(-0.001, "+.2f") == "-0.00"
    assert nb.significant(-0.00001) == "-1.00e-05"


def test_interval_kinds_and_units():
    from posbias_nb import notebook as nb

    one = nb.interval((0.72, 0.29, 1.14), "+.2f", kind="one-sided", unit="nats", level=0.95)
    assert one == "+0.72 [+0.29, +1.14] nats (a 90% interval: each end a one-sided 95% bound)"
    assert nb.interval(2.0, 2.0, 2.0, ".1f", kind="exact", unit="nats") == "2.0 nats (exact)"
    with pytest.raises(ValueError, match="kind must be one of"):
        nb.interval(1.0, 0.0, 2.0, kind="two sided")
    with pytest.raises(ValueError, match="exact number has no width"):
        nb.interval(1.0, 0.0, 2.0, kind="exact")
    with pytest.raises(ValueError, match="one-sided level"):
        nb.interval(1.0, 0.0, 2.0, kind="one-sided", level=0.3)


def test_model_label_names_every_zoo_model_as_its_description_does():
    """plots.model_label: the head of each zoo entry's description, and a clear refusal of an
    object without one (the counterexample)."""
    from types import SimpleNamespace

    from posbias_nb import models, plots

    got = {n: plots.model_label(s) for n, s in models.ZOO.items()}
    assert got["gpt2"] == "GPT-2 small" and got["smollm2-135m"] == "SmolLM2-135M"
    assert got["gemma3-4b"] == "Gemma-3-4B text" and got["llama3.1-8b"] == "Llama-3.1-8B"
    assert all(v and ":" not in v and "(" not in v for v in got.values()), got
    for bad in (SimpleNamespace(description=""), SimpleNamespace(), None):
        with pytest.raises(ValueError, match="model_label needs a zoo entry"):
            plots.model_label(bad)
    assert set(plots.PUBLISHED_LABELS) == set(__import__(
        "posbias_nb.rollout", fromlist=["PUBLISHED_MODELS"]).PUBLISHED_MODELS)
