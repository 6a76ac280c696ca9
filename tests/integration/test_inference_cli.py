"""The --remedy flags of ``posbias profile`` end to end (in process, through ``cli.main``): a
remedy's setting in the result's meta, the same seed giving the same numbers, and one line with
exit 2 for each bad combination.  The remedies themselves: tests/unit/studies/test_inference.py."""
import json

import pytest

from posbias_nb import cli


def test_profile_command_with_a_remedy(tmp_path, capsys):
    out = tmp_path / "p.json"
    args = ["profile", "--model", "smollm2-tiny", "--length", "24", "--quiet", "--format",
            "json", "--out", str(out)]
    assert cli.main(args + ["--remedy", "prior-calibration", "--remedy-param", "tau=1"]) == 0
    a = json.loads(out.read_text())
    assert a["meta"]["remedy"] == "prior-calibration" and a["meta"]["setting"] == {"tau": 1.0}
    assert cli.main(args + ["--remedy", "ms-poe"]) == 0
    b = json.loads(out.read_text())
    assert len(b["influence"]) == 24 and a["influence"] != b["influence"]
    assert cli.main(args + ["--remedy", "prior-calibration", "--remedy-param", "tau=1"]) == 0
    assert json.loads(out.read_text())["influence"] == a["influence"]  # same seed, same numbers


@pytest.mark.parametrize("argv,match", [
    (["profile", "--model", "gpt2-tiny", "--length", "16", "--remedy", "ms-poe"],
     "no rotary"),
    (["profile", "--model", "smollm2-tiny", "--length", "16", "--remedy", "ms-poe",
      "--remedy-param", "tau=1"], "takes the parameters"),
    (["profile", "--model", "smollm2-tiny", "--length", "16", "--remedy-param", "tau=1"],
     "needs --remedy"),
    (["profile", "--model", "smollm2-tiny", "--length", "16", "--remedy", "hidden-scaling",
      "--remedy-param", "scale"], "KEY=VALUE"),
    (["profile", "--model", "smollm2-tiny", "--length", "16", "--remedy",
      "attention-calibration"], "has none"),
    (["profile", "--model", "smollm2-tiny", "--length", "16", "--remedy", "bogus"], "invalid"),
])
def test_remedy_command_errors(argv, match, capsys):
    assert cli.main(argv + ["--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and match in err[0]
