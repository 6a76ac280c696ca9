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


def _quiet_libraries() -> None:
    """Keep library chatter off stderr (the contract: a progress bar, or one error line)."""
    import os
    import warnings

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)


def _cmd_profile(args) -> tuple[dict, dict]:
    _quiet_libraries()
    from . import measure, models

    exact = bool(args.exact)
    try:
        info = models.describe(args.model)
        res = measure.profile(
            args.model, weights=args.weights, length=args.length, rope=not args.no_rope,
            method="exact" if exact else "probes", probes=args.probes, batch=args.batch,
            seed=args.seed, target=args.target, source=args.source, device=args.device,
            progress=not args.quiet, dtype=args.dtype, device_map=args.device_map)
    except OSError as e:  # unreadable local directory, broken weight files: one line, exit 2
        raise ValueError(f"cannot load {args.model!r}: {str(e).strip().splitlines()[0]}") from None
    L = args.length
    columns = {"position": list(range(1, L + 1)),
               "influence": [float(v) for v in res["influence"]]}
    estimate = not exact and args.target == "hidden"
    if estimate:
        columns["stderr"] = [float(v) for v in res["stderr"]]
    meta = {
        "command": "profile", "model": info["name"], "family": info["family"],
        "n_layers": info["n_layers"], "weights": args.weights, "rope": not args.no_rope,
        "length": L, "seed": args.seed, "batch": args.batch, "target": args.target,
        "method": "probes" if estimate else "exact", "probes": args.probes if estimate else None,
        "source": args.source, "device": args.device, "dtype": args.dtype,
        "device_map": args.device_map,
        "output": "last token, final hidden state after the final norm"
        if args.target == "hidden" else "probability of the argmax next token",
        "version": __version__, **measure.library_versions(),
    }
    if args.batch > 1:
        meta["batch_stderr"] = [float(v) for v in res["batch_stderr"]]
    return columns, meta


def _cmd_models(args) -> tuple[dict, dict]:
    _quiet_libraries()
    from . import models

    rows = models.zoo_table()
    columns = {
        "name": [r["name"] for r in rows],
        "family": [r["family"] for r in rows],
        "layers": [r["n_layers"] for r in rows],
        "width": [r["hidden_size"] for r in rows],
        "context": [r["max_length"] for r in rows],
        "rope": ["yes" if r["has_rope"] else "no" for r in rows],
        "pretrained_installed": ["yes" if r["pretrained_available"] else "no" for r in rows],
        # free text: commas would split a CSV field (write_profile does not quote)
        "pretrained_source": [r["pretrained_source"].replace(",", ";") for r in rows],
    }
    return columns, {"command": "models", "version": __version__}


def _cmd_rollout(args) -> tuple[dict, dict]:
    _quiet_libraries()
    from . import measure

    try:
        cap = measure.capture(args.model, weights=args.weights, length=args.length, batch=args.batch,
                      seed=args.seed)
    except OSError as e:
        raise ValueError(f"cannot load {args.model!r}: {str(e).strip().splitlines()[0]}") from None
    lam = [float(v) for v in cap["lam"]]
    meta = {"command": "rollout", "model": cap["model"], "family": cap["family"],
            "weights": args.weights, "length": args.length, "seed": args.seed,
            "batch": args.batch, "mode": args.mode, "n_layers": len(lam),
            "sum_lambda": float(sum(lam)),
            "lambda_definition": "mean over tokens and sequences of |Attn(Norm x)| / "
                                 "(|x| + |Attn(Norm x)|), x the residual stream entering the layer",
            "version": __version__, **measure.library_versions()}
    if args.lambdas:
        return {"layer": list(range(1, len(lam) + 1)), "lambda": lam}, meta
    row = measure.predict(cap, args.mode)
    columns = {"position": list(range(1, args.length + 1)),
               "influence": [float(v) for v in row]}
    if args.format == "json":  # JSON arrays need not share a length: one lambda per layer
        columns["lambda"] = lam
    return columns, meta


def _load_errors_one_line(model: str, call):
    """Run ``call()``; an unreadable model directory becomes one ValueError line."""
    try:
        return call()
    except OSError as e:  # unreadable local directory, broken weight files: one line, exit 2
        raise ValueError(f"cannot load {model!r}: {str(e).strip().splitlines()[0]}") from None


def _cmd_retrieval(args):
    _quiet_libraries()
    from .measure import retrieval

    res = _load_errors_one_line(args.model, lambda: retrieval.retrieval_run(
        args.model, task=args.task, positions=args.positions, examples=args.examples,
        length=args.length, seed=args.seed, progress=not args.quiet, weights=args.weights))
    columns = {c: list(res[c]) for c in retrieval.CSV_COLUMNS}
    return columns, res["meta"], res


def _cmd_train(args):
    _quiet_libraries()
    from .measure import train

    res = train.train_run(args.task, args.layers, args.width, args.length, args.steps,
                          seed=args.seed, answer_positions=args.answer_positions,
                          remedy=args.remedy, residual_scale=args.residual_scale,
                          device=args.device, progress=not args.quiet)
    obj = train.to_json(res)
    half = train.steps_to_threshold(res["curve"], res["curve_steps"], 0.5)
    columns = {"position": [int(p) for p in obj["position"]], "accuracy": obj["accuracy"],
               "loss": obj["loss"], "steps_to_half": [float(v) for v in half],
               "grad_init": obj["grad_init"]}
    return columns, obj["meta"], obj


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

    p = sub.add_parser(
        "profile", help="Jacobian influence profile of a model (zoo name or local directory)")
    p.add_argument("--model", required=True, help="zoo name (see `posbias models`) or a local "
                   "Hugging Face model directory")
    p.add_argument("--weights", choices=["random", "pretrained"], default="random",
                   help="random initialization (seeded) or installed pretrained weights")
    p.add_argument("--no-rope", action="store_true",
                   help="rotate every position by angle 0 (RoPE models only)")
    p.add_argument("--length", type=int, required=True, help="sequence length L >= 2")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--probes", type=int, default=8,
                   help="Hutchinson probes K >= 2 (default 8); output has a stderr column")
    g.add_argument("--exact", action="store_true",
                   help="exact Jacobian norms (all hidden-size output directions; slow)")
    p.add_argument("--seed", type=int, default=0, help="seed of weights, text and probes")
    p.add_argument("--batch", type=int, default=1, help="number of input sequences averaged")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="cpu or cuda")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                   help="parameter dtype (bfloat16 halves the memory of a large model)")
    p.add_argument("--device-map", default=None, metavar="MAP",
                   help="passed to from_pretrained (pretrained weights): 'auto' shards a model "
                        "that outgrows one accelerator across all devices (accelerate); "
                        "'cpu' loads on the CPU")
    p.add_argument("--target", choices=["hidden", "argmax_prob"], default="hidden",
                   help="last token's final hidden state (Frobenius norm of the Jacobian) or "
                        "the probability of the argmax next token (gradient norm)")
    p.add_argument("--source", choices=["text", "random"], default="text",
                   help="input tokens: standard-library documentation text, or random tokens")
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    _common(p)
    p.set_defaults(func=_cmd_profile)

    m = sub.add_parser("models", help="the model zoo, and whether each one's weights are installed")
    _common(m)
    m.set_defaults(func=_cmd_models)

    p = sub.add_parser("rollout", help="influence profile predicted by the rollout of the "
                                       "model's measured attention kernels and shares")
    p.add_argument("--model", required=True, help="zoo name (see `posbias models`)")
    p.add_argument("--weights", choices=["random", "pretrained"], default="random")
    p.add_argument("--length", type=int, required=True, help="sequence length L >= 2")
    p.add_argument("--mode", choices=["attention", "residual", "positional", "content"], default="residual",
                   help="residual (measured lambda and kernels; default), attention (lambda = 1), "
                        "positional (measured lambda, content-free kernel), content")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and the text windows")
    p.add_argument("--batch", type=int, default=2, help="sequences averaged (default 2)")
    p.add_argument("--lambdas", action="store_true",
                   help="print the measured lambda per layer instead of the profile")
    _common(p)
    p.set_defaults(func=_cmd_rollout)

    r = sub.add_parser("retrieval", help="retrieval accuracy and answer log-probability per "
                                         "gold position (key-value or needle in a haystack)")
    r.add_argument("--model", required=True, help="zoo name or local Hugging Face directory")
    r.add_argument("--weights", choices=["pretrained", "random"], default="pretrained",
                   help="installed pretrained weights (default) or random initialization")
    r.add_argument("--task", choices=["kv", "needle"], default="kv",
                   help="key-value retrieval (Liu et al. 2023) or a needle in stdlib prose")
    r.add_argument("--positions", type=int, default=7,
                   help="gold positions P >= 2, first and last included (default 7)")
    r.add_argument("--examples", type=int, default=10,
                   help="examples E >= 1, each asked at every position (default 10)")
    r.add_argument("--length", type=int, required=True,
                   help="approximate prompt length in tokens")
    r.add_argument("--seed", type=int, default=0, help="seed of pairs, haystacks and needles")
    r.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    _common(r)
    r.set_defaults(func=_cmd_retrieval)

    t = sub.add_parser("train", help="train a small causal transformer on a synthetic task and "
                                     "measure accuracy, influence and lambda per position")
    t.add_argument("--task", choices=["kv", "needle"], required=True,
                   help="key-value associative recall or a needle among look-alikes")
    t.add_argument("--layers", type=int, required=True, help="layers, 2..8")
    t.add_argument("--width", type=int, required=True, help="width, 32..128 (multiple of 16)")
    t.add_argument("--length", type=int, required=True, help="context length, 32..256")
    t.add_argument("--steps", type=int, required=True, help="AdamW steps >= 1")
    t.add_argument("--seed", type=int, default=0, help="seed of init, data and evaluation")
    t.add_argument("--answer-positions", choices=["uniform", "edges", "start"],
                   default="uniform", help="where the training answers sit (default uniform)")
    t.add_argument("--remedy", choices=["none", "weighted", "oversample", "curriculum"],
                   default="none", help="the seed paper's remedies (default none)")
    t.add_argument("--residual-scale", type=float, default=1.0,
                   help="attention output projections divided by X at init (default 1)")
    t.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="cpu or cuda")
    t.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    _common(t)
    t.set_defaults(func=_cmd_train)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            raise UsageError("a command is required: " + ", ".join(
                sorted(parser._subparsers._group_actions[0].choices)))
        out = args.func(args)
        buf = io.StringIO()
        if len(out) == 3 and args.format == "json":  # (columns, meta, the full JSON object)
            buf.write(json.dumps(out[2]) + "\n")
        else:
            write_profile(out[0], out[1], args.format, buf)
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
