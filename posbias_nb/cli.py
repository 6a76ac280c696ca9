"""The ``posbias`` command (also ``python -m posbias_nb``).

Every subcommand writes a profile as CSV (``position,influence[,stderr]``) or JSON (arrays
``position`` and ``influence`` plus ``meta``) to stdout or ``--out FILE``.  Bad input prints one
line on stderr and exits with status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import io
import json
import sys
from typing import Sequence

from . import __version__

__all__ = ["main", "write_profile"]


class UsageError(Exception):
    """A user error: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would print the usage too)
        raise UsageError(message)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=["csv", "json"], default="csv", help="output format")
    p.add_argument("--out", default=None, help="write to FILE instead of stdout")


def _fmt(v) -> str:
    if isinstance(v, float):
        return repr(v)
    return str(v)


def write_profile(columns: dict, meta: dict, fmt: str, out) -> None:
    """Write named equal-length columns (first ``position``) as CSV or JSON, with metadata."""
    if fmt == "json":
        obj = {k: [v if isinstance(v, (int, float)) else str(v) for v in col]
               for k, col in columns.items()}
        obj["meta"] = meta
        out.write(json.dumps(obj) + "\n")
        return
    names = list(columns)
    out.write(",".join(names) + "\n")
    for row in zip(*columns.values()):
        out.write(",".join(_fmt(v) for v in row) + "\n")


def _cmd_theory(args) -> tuple[dict, dict]:
    from . import theory

    alpha = args.alpha
    if args.exact:
        row = theory.influence(args.length, args.depth, alpha=alpha, exact=True)
        values = [f"{q.numerator}/{q.denominator}" if q.denominator != 1 else str(q.numerator)
                  for q in row]
    else:
        values = [float(v) for v in theory.influence(args.length, args.depth, alpha=alpha)]
    meta = {"command": "theory", "length": args.length, "depth": args.depth, "alpha": alpha,
            "exact": bool(args.exact), "version": __version__}
    return {"position": list(range(1, args.length + 1)), "influence": values}, meta


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="posbias", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"posbias {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    t = sub.add_parser("theory", help="last row of ((1-alpha) I + alpha M)^depth (Cesàro theory)")
    t.add_argument("--length", type=int, required=True, help="sequence length L >= 1")
    t.add_argument("--depth", type=int, required=True, help="number of layers H >= 0")
    t.add_argument("--alpha", default="1", help="attention share in [0, 1] (e.g. 0.5 or 1/2)")
    t.add_argument("--exact", action="store_true", help="exact rationals (p/q strings)")
    _common(t)
    t.set_defaults(func=_cmd_theory)

    from . import _cli_ext

    _cli_ext.register(sub, _common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            raise UsageError("a command is required: " + ", ".join(
                sorted(parser._subparsers._group_actions[0].choices)))
        columns, meta = args.func(args)
        buf = io.StringIO()
        write_profile(columns, meta, args.format, buf)
        if args.out:
            with open(args.out, "w") as f:
                f.write(buf.getvalue())
        else:
            sys.stdout.write(buf.getvalue())
    except (UsageError, ValueError, FileNotFoundError, ModuleNotFoundError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"posbias: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("posbias: interrupted", file=sys.stderr)
        return 130
    return 0
