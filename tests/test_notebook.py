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
    assert got == {"v_x_u_claim": "U", "v_x_u_paper": "yes", "v_x_u_measured": "9 [8, 10]",
                   "v_x_u_verdict": "holds", "v_x_u_est": 9.0}
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

    book = Path(__file__).resolve().parents[1] / "book"
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
