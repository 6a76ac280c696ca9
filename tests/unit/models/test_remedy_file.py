"""A remedy file (models/remedy_file.py): written, read back, applied with models.remedy(model,
file) as the remedy itself is, the model restored bit for bit; refused when malformed, unknown
or made for other weights."""
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from posbias_nb import models  # noqa: E402
from posbias_nb.models import remedy_file as rf  # noqa: E402

IDS = torch.randint(0, 200, (2, 24), generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def tiny():
    m, _, _ = models.load("smollm2-tiny", weights="random", seed=0)
    return m


@pytest.mark.parametrize("name, params", [
    ("hidden-scaling", {"channel": 3, "scale": -1.0}),
    ("hidden-scaling-all", {"channel": 3, "scale": 0.0, "layers": [0, 1]}),
    ("ms-poe", {"lo": 1.2, "hi": 1.8}),
])
def test_round_trip_applies_the_same_remedy_and_restores(tmp_path, tiny, name, params):
    path = rf.write(tmp_path / "remedy.json", name, params, tiny, "smollm2-tiny",
                    evidence={"gain": [0.1, 0.0, 0.2]})
    spec = rf.read(path)
    assert spec["remedy"] == name and spec["params"] == params
    assert spec["model"]["fingerprint"] == models.describe("smollm2-tiny")["fingerprint"]
    assert spec["evidence"] == {"gain": [0.1, 0.0, 0.2]}
    with torch.no_grad():
        before = tiny(IDS).logits.clone()
        with models.remedy(tiny, name, **params):
            direct = tiny(IDS).logits.clone()
        with models.remedy(tiny, str(path)):
            from_file = tiny(IDS).logits.clone()
        after = tiny(IDS).logits
    assert torch.equal(from_file, direct)
    assert not torch.equal(from_file, before)
    assert torch.equal(after, before)  # bit for bit after the block


def _bad(tmp_path, obj=None, raw=None):
    p = tmp_path / "r.json"
    p.write_text(raw if raw is not None else json.dumps(obj))
    return p


def _good(tiny):
    return {"format": rf.FORMAT, "remedy": "hidden-scaling",
            "params": {"channel": 3, "scale": -1.0},
            "model": {"name": "smollm2-tiny", "fingerprint": "x", "digest": rf.weights_digest(tiny)}}


@pytest.mark.parametrize("change, words", [
    (lambda o: None, "malformed JSON"),
    (lambda o: o.update(format="other/1"), "not a remedy file"),
    (lambda o: o.update(remedy="magic"), "unknown remedy 'magic'"),
    (lambda o: o.update(remedy="prior-calibration"), "unknown remedy"),
    (lambda o: o.update(remedy="attention-calibration"), "got parameter .channel."),
    (lambda o: o.update(remedy="attention-calibration", params={"temperature": 0.0}),
     "temperature of attention-calibration must be a positive number"),
    (lambda o: o["params"].update(tau=1.0), "got parameter 'tau'"),
    (lambda o: o["params"].update(channel="3"), "must be int"),
    (lambda o: o["params"].pop("channel"), "needs channel"),
    (lambda o: o.pop("model"), "'model' must give"),
    (lambda o: o["model"].update(digest="0" * 16), "this model's digest is"),
])
def test_refusals(tmp_path, tiny, change, words):
    o = _good(tiny)
    raw = "{not json" if change(o) is None and words == "malformed JSON" else None
    p = _bad(tmp_path, o, raw)
    with pytest.raises(ValueError, match=words):
        with models.remedy(tiny, str(p)):
            pass


def test_other_weights_and_extra_parameters_refused(tmp_path, tiny):
    path = rf.write(tmp_path / "remedy.json", "ms-poe", {"lo": 1.2, "hi": 1.8}, tiny,
                    "smollm2-tiny")
    other, _, _ = models.load("smollm2-tiny", weights="random", seed=1)
    with pytest.raises(ValueError, match="was chosen for smollm2-tiny"):
        with models.remedy(other, str(path)):
            pass
    with pytest.raises(ValueError, match="to a file of ms-poe a caller may add start, got \\['lo'\\]"):
        with models.remedy(tiny, str(path), lo=1.5):
            pass
    spec = rf.read(path)
    rf.check_model(spec, path, name="smollm2-tiny")
    with pytest.raises(ValueError, match="has fingerprint"):
        rf.check_model(spec, path, name="qwen2-tiny")


def test_command_line_remedy_file(tmp_path, tiny, capsys, monkeypatch):
    from posbias_nb import cli

    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")
    path = rf.write(tmp_path / "remedy.json", "ms-poe", {"lo": 1.2, "hi": 1.8}, tiny,
                    "smollm2-tiny")
    base = ["--model", "smollm2-tiny", "--weights", "random", "--quiet", "--format", "json"]
    assert cli.main(["profile", *base, "--length", "32", "--remedy-file", str(path)]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["meta"]["remedy"] == "ms-poe" and obj["meta"]["remedy_file"] == str(path)
    assert len(obj["influence"]) == 32
    assert cli.main(["retrieval", *base, "--positions", "3", "--examples", "1", "--length",
                     "240", "--remedy-file", str(path)]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["meta"]["remedy"] == "ms-poe" and len(obj["logprob"]) == 3
    # a file made for another model; a file and --remedy at once: one line, exit 2
    for argv, words in (
            (["profile", "--model", "qwen2-tiny", "--weights", "random", "--remedy-file",
              str(path)], "has fingerprint"),
            (["profile", *base, "--remedy-file", str(path), "--remedy", "ms-poe"],
             "drop --remedy"),
            (["retrieval", *base, "--remedy-file", str(tmp_path / "none.json")],
             "cannot read remedy file")):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], err


def test_command_line_calibration_file(tmp_path, tiny, capsys, monkeypatch):
    """A calibration file on the command line: posbias retrieval measures each kv prompt's
    spans and relevance and scores as --remedy attention-calibration at the file's temperature;
    profile (text windows, no documents) refuses it in one line, exit 2."""
    from posbias_nb import cli

    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")
    path = rf.write(tmp_path / "remedy.json", "attention-calibration", {"temperature": 5e-4},
                    tiny, "smollm2-tiny")
    base = ["--model", "smollm2-tiny", "--weights", "random", "--quiet", "--format", "json"]
    run = ["retrieval", *base, "--positions", "3", "--examples", "1", "--length", "240"]
    assert cli.main([*run, "--remedy-file", str(path)]) == 0
    via_file = json.loads(capsys.readouterr().out)
    assert cli.main([*run, "--remedy", "attention-calibration", "--remedy-param",
                     "temperature=5e-4"]) == 0
    direct = json.loads(capsys.readouterr().out)
    assert via_file["meta"]["remedy"] == "attention-calibration"
    assert via_file["logprob"] == direct["logprob"]
    assert cli.main([*run]) == 0
    assert json.loads(capsys.readouterr().out)["logprob"] != direct["logprob"]
    assert cli.main(["profile", *base, "--length", "32", "--remedy-file", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a text window has none" in err[0], err
