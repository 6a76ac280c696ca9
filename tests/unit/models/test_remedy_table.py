"""The remedy table (posbias_nb/remedy_table.py): every remedy declared once, well formed, and
read by every place that lists remedies -- a toy remedy added to the table alone shows up in
the models floor, the remedy files, the prompt reorders, ``posbias fix``'s search and grids and
the command line's choices and help, and leaves the locked designs that name their own arms
alone."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from posbias_nb import remedy_table
from posbias_nb.remedy_table import KINDS, NEEDS, TABLE

ROOT = Path(__file__).resolve().parents[3]


def problems(table) -> list[str]:
    """What is wrong with a remedy table, one line a problem."""
    out = []
    for n, r in table.items():
        if r.get("kind") not in KINDS:
            out.append(f"{n}: kind {r.get('kind')!r}")
            continue
        if set(r.get("needs", ())) - set(NEEDS):
            out.append(f"{n}: needs {sorted(set(r['needs']) - set(NEEDS))}")
        f = r.get("file")
        if f is not None and set(r["required"]) - set(f):
            out.append(f"{n}: requires what its file does not store")
        if r["kind"] == "network":
            call = set(r["call"])
            if f is not None and set(f) - call - {"dummy"}:
                out.append(f"{n}: a file stores what the remedy does not take")
            if set(r["per_prompt"]) - call:
                out.append(f"{n}: per prompt, what the remedy does not take")
            if any(set(s) - call for s in r["grid"]) or not r["grid"]:
                out.append(f"{n}: a grid setting the remedy does not take")
            if r["rows"] not in ("last", "all"):
                out.append(f"{n}: rows {r['rows']!r}")
        elif {"call", "grid", "rows"} & set(r) or r["per_prompt"]:
            out.append(f"{n}: a prompt remedy with a network remedy's fields")
        if not r.get("help") or not r.get("method"):
            out.append(f"{n}: no help or no method")
    return out


def test_the_table_is_well_formed_and_the_check_rejects_a_bad_row():
    assert problems(TABLE) == []
    bad = {"x": dict(TABLE["ms-poe"], grid=({"scale": 1.0},)),
           "y": dict(TABLE["curve-order"], required=("ranker", "prior")),
           "z": dict(TABLE["query-aware"], kind="weights")}
    assert [p.split(":")[0] for p in problems(bad)] == ["x", "y", "z"]


def test_the_lists_are_the_tables():
    from posbias_nb import models
    from posbias_nb.experiments.remedy import fix, inference
    from posbias_nb.experiments.prompt import placement
    from posbias_nb.models import remedy_file as rf
    from posbias_nb.tasks import reorder

    assert models.REMEDIES == remedy_table.NETWORK
    assert set(rf.FILE_REMEDIES) == {n for n, r in TABLE.items() if r["file"] is not None}
    assert rf.PROMPT_REMEDIES == placement.PROMPT_REMEDIES == remedy_table.PROMPT
    assert set(reorder.PROMPT_REMEDIES) == set(remedy_table.PROMPT) - {"attention-sort"}
    assert fix.REMEDIES == fix.NETWORK_REMEDIES + remedy_table.PROMPT
    assert {a: v["rows"] for a, v in inference.ARMS.items()} == \
        {a: TABLE[a]["rows"] for a in inference.ARMS}
    assert all(inference.GRID[a] == TABLE[a]["grid"] for a in inference.ARMS)


#: Two rows added to the table's source, as a contributor would add them.
ROWS = """    "toy-scale": {
        "kind": "network", "method": "Toy et al. 2026", "ours": False, "call": ("gain", "start"),
        "file": {"gain": "float"}, "required": ("gain",), "per_prompt": ("start",),
        "rows": "last", "grid": ({"gain": 0.5}, {"gain": 2.0}), "needs": (), "help": "a toy"},
    "toy-order": {
        "kind": "prompt", "method": "Toy et al. 2026", "ours": False, "file": {"ranker": "ranker"},
        "required": ("ranker",), "per_prompt": (), "needs": ("ranker",), "help": "a toy order"},
"""

PROBE = """
import contextlib, io, json
from posbias_nb import cli, models
from posbias_nb.models import remedy_file as rf
from posbias_nb.tasks import reorder
from posbias_nb.experiments.remedy import fix, inference
from posbias_nb.experiments.prompt import placement
assert models.__file__.startswith(%r), models.__file__
out = {"models": list(models.REMEDIES), "file": sorted(rf.FILE_REMEDIES),
       "per_prompt": sorted(rf.PER_PROMPT), "prompt": list(rf.PROMPT_REMEDIES),
       "reorder": list(reorder.PROMPT_REMEDIES), "fixed": list(reorder.FIXED_RULES),
       "placement": list(placement.PROMPT_REMEDIES), "ranked": list(placement.RANKED),
       "fix": list(fix.REMEDIES), "fix_network": list(fix.NETWORK_REMEDIES),
       "fix_grid": {k: list(v) for k, v in fix.GRID.items()},
       "inference_arms": list(inference.ARMS),
       "inference_design": inference.DESIGN.hash, "fix_design": fix.DESIGN.hash, "help": {}}
for cmd in ("fix", "task", "profile"):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
        cli.main([cmd, "--help"])
    out["help"][cmd] = " ".join(buf.getvalue().split())
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The package copied, the toy rows added to its table's source, and what it then lists."""
    import shutil

    where = tmp_path_factory.mktemp("toy")
    pkg = where / "posbias_nb"
    shutil.copytree(ROOT / "posbias_nb", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    src = (pkg / "remedy_table.py").read_text()
    head, sep, tail = src.partition("\nTABLE = {\n")
    body, close, rest = tail.partition("\n}\n")
    (pkg / "remedy_table.py").write_text(head + sep + body + "\n" + ROWS + "}\n" + rest)
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONHASHSEED="0", COLUMNS="200",
               PYTHONPATH=str(where))
    r = subprocess.run([sys.executable, "-c", PROBE % str(pkg)], env=env, capture_output=True,
                       text=True, cwd=where, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_toy_remedy_added_to_the_table_alone_is_found_everywhere(toy):
    for where in ("models", "fix_network", "fix"):
        assert "toy-scale" in toy[where], where
    for where in ("file", "per_prompt"):
        assert {"toy-scale", "toy-order"} <= set(toy[where]), where
    for where in ("prompt", "reorder", "fixed", "placement", "ranked", "fix"):
        assert "toy-order" in toy[where], where
    assert toy["fix_grid"]["toy-scale"] == [{"gain": 0.5}, {"gain": 2.0}]
    assert "toy-scale" in toy["help"]["profile"]  # --remedy's choices and help
    assert "toy-scale" in toy["help"]["fix"] and "toy-order" in toy["help"]["fix"]
    assert "toy-order" in toy["help"]["task"]


def test_a_toy_remedy_leaves_a_design_that_names_its_arms_and_moves_fix_s_search(toy):
    from posbias_nb.experiments.remedy import fix, inference

    assert "toy-scale" not in toy["inference_arms"]
    assert toy["inference_design"] == inference.DESIGN.hash
    # posbias fix searches every remedy of the table: its design (the book's run) records the
    # remedies searched, so a new one is a design change (a registry entry, docs/contributing.md)
    assert toy["fix_design"] != fix.DESIGN.hash


def test_the_walk_in_contributing_names_every_file_a_remedy_touches():
    text = (ROOT / "docs" / "contributing.md").read_text()
    walk = text[text.index("## Add a remedy"):]
    walk = walk[:walk.index("\n## ", 4)]
    for item in ("posbias_nb/remedy_table.py", "posbias_nb/models/remedies.py",
                 "posbias_nb/tasks/reorder.py", "tests/unit/models/test_remedy_oracles.py",
                 "posbias_nb/data/designs.json", "tests/data/cli_options.json",
                 "tests/unit/models/test_remedy_table.py",
                 "posbias_nb/experiments/remedy/fix/tune.py"):
        assert item in walk, item
        assert (ROOT / item).exists(), item
