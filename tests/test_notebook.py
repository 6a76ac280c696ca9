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
