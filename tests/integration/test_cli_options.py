"""The ``posbias`` command's options, pinned (issue 56: the CLI's behaviour stays).

Every subcommand's flags (names, order, defaults, choices, required, type, metavar and help
text), its one-line summary and the values it sets are compared with a committed snapshot,
``tests/data/cli_options.json``.  ``--help`` is made of these; its line wrapping depends on the
terminal, so the snapshot holds the parts, not the wrapped text.

A deliberate change to the command regenerates the snapshot, and its diff shows in review::

    python tests/integration/test_cli_options.py --write
"""
import argparse
import json
import sys
from pathlib import Path

from posbias_nb import cli

SNAPSHOT = Path(__file__).resolve().parents[1] / "data" / "cli_options.json"


def _option(a: argparse.Action) -> dict:
    return {"flags": list(a.option_strings), "dest": a.dest,
            "action": type(a).__name__.strip("_").removesuffix("Action"),
            "default": a.default, "type": getattr(a.type, "__name__", a.type),
            "choices": None if a.choices is None else list(a.choices),
            "required": a.required, "nargs": a.nargs, "metavar": a.metavar, "help": a.help}


def _flags(parser) -> dict:
    return {"order": [a.option_strings[0] for a in parser._actions if a.option_strings],
            "options": {a.option_strings[0]: _option(a) for a in parser._actions
                        if a.option_strings}}


def options(parser: argparse.ArgumentParser) -> dict:
    """``parser`` (the ``posbias`` parser) as plain JSON data: the command and each
    subcommand, with its flags in order, its summary, help formatter, mutually exclusive
    groups and the values it sets (``func`` by name)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    summary = {c.dest: c.help for c in sub._choices_actions}
    out = {"posbias": {"commands": list(sub.choices), **_flags(parser)}}
    for name, p in sub.choices.items():
        out[name] = {"help": summary[name], "formatter": p.formatter_class.__name__,
                     "sets": {k: getattr(v, "__name__", v) for k, v in p._defaults.items()},
                     "exclusive": [[a.option_strings[0] for a in g._group_actions]
                                   for g in p._mutually_exclusive_groups],
                     **_flags(p)}
    return json.loads(json.dumps(out))  # tuples as lists, as the snapshot reads back


def differences(want: dict, got: dict) -> list[str]:
    """What differs between two :func:`options` dicts, one line each, e.g.
    ``"profile --length default: 512 -> 1024"`` or ``"task --extra: new"``."""
    out = []
    for cmd in sorted(want.keys() | got.keys()):
        if cmd not in got or cmd not in want:
            out.append(f"{cmd}: {'missing' if cmd not in got else 'new'}")
            continue
        w, g = want[cmd], got[cmd]
        for key in sorted(w.keys() | g.keys()):
            if key != "options":
                if w.get(key) != g.get(key):
                    out.append(f"{cmd} {key}: {w.get(key)!r} -> {g.get(key)!r}")
                continue
            for flag in sorted(w[key].keys() | g[key].keys()):
                wo, go = w[key].get(flag), g[key].get(flag)
                if wo is None or go is None:
                    out.append(f"{cmd} {flag}: {'new' if wo is None else 'missing'}")
                    continue
                out += [f"{cmd} {flag} {f}: {wo.get(f)!r} -> {go.get(f)!r}"
                        for f in sorted(wo.keys() | go.keys()) if wo.get(f) != go.get(f)]
    return out


def test_every_option_is_the_snapshots():
    want = json.loads(SNAPSHOT.read_text())
    got = options(cli.build_parser())
    assert differences(want, got) == [], (
        "the posbias command changed; if deliberate: python tests/integration/test_cli_options.py --write")
    assert set(got) == {"posbias", *got["posbias"]["commands"]}  # every subcommand is pinned


def test_the_snapshot_check_finds_a_change():
    """Counterexamples: a changed default, a new flag, a lost choice and a reordered flag
    are each named."""
    want = json.loads(SNAPSHOT.read_text())
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    length = next(a for a in sub.choices["profile"]._actions if a.dest == "length")
    length.default = 1024
    sub.choices["task"].add_argument("--extra", default=None)
    weights = next(a for a in sub.choices["fix"]._actions if a.dest == "weights")
    weights.choices = ["pretrained"]
    train = sub.choices["train"]._actions
    i, j = [k for k, a in enumerate(train) if a.dest in ("layers", "width")]
    train[i], train[j] = train[j], train[i]
    got = differences(want, options(parser))
    assert "profile --length default: 512 -> 1024" in got
    assert "task --extra: new" in got and any(d.startswith("task order:") for d in got)
    assert "fix --weights choices: ['pretrained', 'random'] -> ['pretrained']" in got
    assert any(d.startswith("train order:") for d in got)
    assert len(got) == 5, got


def _write() -> None:
    """The snapshot, one line an option (so that a change reads as one line in a diff)."""
    o, d = options(cli.build_parser()), lambda v: json.dumps(v, ensure_ascii=False)
    parts = []
    for cmd, body in o.items():
        keys = [f"  {d(k)}: {d(v)}" for k, v in body.items() if k != "options"]
        keys.append('  "options": {\n' + ",\n".join(f"   {d(f)}: {d(v)}" for f, v
                                                     in body["options"].items()) + "\n  }")
        parts.append(f" {d(cmd)}: {{\n" + ",\n".join(keys) + "\n }")
    SNAPSHOT.write_text("{\n" + ",\n".join(parts) + "\n}\n")
    assert json.loads(SNAPSHOT.read_text()) == o
    print(f"wrote {SNAPSHOT}")


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    _write()
