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


def test_theory_takes_a_layout_string_or_a_model(capsys):
    from posbias_nb import cli, theory
    from fractions import Fraction

    assert cli.main(["theory", "--length", "8", "--layout", "2*sliding:3,full", "--alpha",
                     "1/2", "--exact"]) in (0, None)
    out = capsys.readouterr().out.strip().splitlines()[1:]
    want = theory.layout_influence("2*sliding:3,full", 8, "1/2", exact=True)
    assert [Fraction(line.split(",")[1]) for line in out] == want
    assert cli.main(["theory", "--length", "6", "--layout", "gemma3-270m", "--format",
                     "json"]) in (0, None)
    import json
    got = json.loads(capsys.readouterr().out)
    assert got["meta"]["layout"] == "5*sliding:512,full,5*sliding:512,full,5*sliding:512,full"
    assert got["meta"]["depth"] == 18


def test_theory_refuses_a_bad_layout_in_one_line(capsys):
    from posbias_nb import cli

    assert cli.main(["theory", "--length", "6", "--layout", "windowed:3"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown layer kind 'windowed'" in err


@pytest.mark.parametrize("depth", ["0", "-2"])
def test_theory_blames_the_depth_not_the_layout(depth, capsys):
    """A bad --depth with --layout is named as the depth's fault, in one line (issue 34)."""
    from posbias_nb import cli

    assert cli.main(["theory", "--length", "6", "--layout", "sliding:4", "--depth", depth]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--depth must be an integer >= 1 with --layout" in err and f"got {depth}" in err
    assert "neither a layout" not in err
    # without a layout, depth 0 is the identity (the last token alone)
    assert cli.main(["theory", "--length", "3", "--depth", "0"]) == 0


# ------------------------------------------------------------------ the front door (issue 56)
def _subparsers():
    import argparse

    p = cli.build_parser()
    return [a for a in p._actions if isinstance(a, argparse._SubParsersAction)][0].choices


def _default_mismatches(parser, func):
    """The options of ``parser`` whose default differs from ``func``'s for the same name."""
    import inspect

    sig = inspect.signature(func).parameters
    return [(a.dest, a.default, sig[a.dest].default) for a in parser._actions
            if a.dest in sig and sig[a.dest].default is not inspect.Parameter.empty
            and a.default != sig[a.dest].default]


@pytest.mark.parametrize("command", ["profile", "report", "task", "fix"])
def test_every_cli_default_is_the_apis(command):
    """``posbias profile --length`` defaulted to 512 while ``profile_run`` took 1024: each
    subcommand's defaults are now those of the function behind it (posbias_nb.FRONT_DOOR)."""
    import posbias_nb

    func = getattr(posbias_nb, command)
    assert not _default_mismatches(_subparsers()[command], func)


#: The functions behind the other subcommands, and the flags whose default is the CLI's own:
#: ``posbias theory --depth`` defaults to None (12 layers, or a --layout's pattern once),
#: where ``theory_run`` takes 12.
OTHER_COMMANDS = {"theory": ("posbias_nb.measure.runs", "theory_run", {"depth"}),
                  "rollout": ("posbias_nb.measure.runs", "rollout_run", set()),
                  "retrieval": ("posbias_nb.experiments.prompt.retrieval", "retrieval_run", set()),
                  "train": ("posbias_nb.experiments.remedy.lab", "train_run", set())}


@pytest.mark.parametrize("command", sorted(OTHER_COMMANDS))
def test_the_other_subcommands_defaults_are_their_functions(command):
    import importlib

    module, name, own = OTHER_COMMANDS[command]
    func = getattr(importlib.import_module(module), name)
    mismatched = {dest for dest, _, _ in _default_mismatches(_subparsers()[command], func)}
    assert mismatched == own  # and each declared exception is still one


def test_the_default_check_finds_a_mismatch():
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--length", type=int, default=512)

    def f(model, length=1024):
        return model, length

    assert _default_mismatches(p, f) == [("length", 512, 1024)]


def test_the_front_door_is_lazy_and_returns_results():
    """``import posbias_nb`` loads no torch; ``posbias_nb.profile`` etc. are the functions of
    the subcommands, imported on first use; an unknown name is an AttributeError."""
    import subprocess
    import sys

    code = ("import sys, posbias_nb; assert 'torch' not in sys.modules, 'torch'; "
            "f = posbias_nb.fix; assert f.__module__ == 'posbias_nb.experiments.remedy.fix.run'; "
            "print(sorted(n for n in posbias_nb.FRONT_DOOR if n in dir(posbias_nb)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["['fix',", "'profile',", "'report',", "'task']"]
    import posbias_nb

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        posbias_nb.nope  # noqa: B018
    r = posbias_nb.profile("gpt2", length=8, probes=2, seed=0)
    from posbias_nb.results import Result

    assert isinstance(r, Result) and len(r["influence"]) == 8
    assert r.meta["command"] == "profile"
