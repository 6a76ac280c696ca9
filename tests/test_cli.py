"""The posbias command: output formats and one-line errors with exit status 2."""
import json
import subprocess
import sys

import pytest

from posbias_nb import cli


def run(*args):
    return subprocess.run([sys.executable, "-m", "posbias_nb", *args],
                          capture_output=True, text=True, timeout=300)


def test_theory_csv(capsys):
    assert cli.main(["theory", "--length", "4", "--depth", "2", "--alpha", "1/2", "--exact"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "position,influence"
    assert out[1:] == ["1,49/192", "2,37/192", "3,31/192", "4,25/64"]


def test_theory_json_to_file(tmp_path):
    f = tmp_path / "o.json"
    assert cli.main(["theory", "--length", "5", "--depth", "3", "--format", "json", "--out", str(f)]) == 0
    obj = json.loads(f.read_text())
    assert obj["position"] == [1, 2, 3, 4, 5]
    assert sum(obj["influence"]) == pytest.approx(1.0)
    assert obj["meta"]["depth"] == 3 and obj["meta"]["command"] == "theory"


@pytest.mark.parametrize("args,needle", [
    (["theory", "--length", "0", "--depth", "3"], "L must be an integer >= 1, got 0"),
    (["theory", "--length", "5", "--depth", "-1"], "depth"),
    (["theory", "--length", "5", "--depth", "2", "--alpha", "1.5"], "alpha"),
    (["theory", "--length", "5", "--depth", "2", "--alpha", "x"], "alpha"),
    (["theory", "--length", "five", "--depth", "2"], "--length"),
    (["theory", "--length", "5", "--depth", "x"], "--depth"),
    (["frobnicate"], "invalid choice"),
    ([], "command is required"),
])
def test_bad_input_one_line_exit_2(args, needle):
    r = run(*args)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("posbias: error:") and needle in lines[0]
    assert "Traceback" not in r.stderr
