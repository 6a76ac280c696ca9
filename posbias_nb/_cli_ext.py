"""Subcommands that need the heavy stack (torch, transformers), registered lazily.

``register`` only adds argument parsers; torch and transformers are imported when one of these
subcommands runs, so ``posbias theory`` never loads them.
"""
from __future__ import annotations


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
    from . import __version__, measure, models

    exact = bool(args.exact)
    try:
        info = models.describe(args.model)
        res = measure.profile(
            args.model, weights=args.weights, length=args.length, rope=not args.no_rope,
            method="exact" if exact else "probes", probes=args.probes, batch=args.batch,
            seed=args.seed, target=args.target, source=args.source, device=args.device,
            progress=not args.quiet)
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
        "source": args.source, "device": args.device,
        "output": "last token, final hidden state after the final norm"
        if args.target == "hidden" else "probability of the argmax next token",
        "version": __version__, "torch": measure._version("torch"),
        "transformers": measure._version("transformers"),
    }
    if args.batch > 1:
        meta["batch_stderr"] = [float(v) for v in res["batch_stderr"]]
    return columns, meta


def _cmd_models(args) -> tuple[dict, dict]:
    _quiet_libraries()
    from . import __version__, models

    rows = models.zoo_table()
    columns = {
        "name": [r["name"] for r in rows],
        "family": [r["family"] for r in rows],
        "layers": [r["n_layers"] for r in rows],
        "width": [r["hidden_size"] for r in rows],
        "context": [r["max_length"] for r in rows],
        "rope": ["yes" if models.describe(r["name"])["has_rope"] else "no" for r in rows],
        "pretrained_installed": ["yes" if r["pretrained_available"] else "no" for r in rows],
        # free text: commas would split a CSV field (write_profile does not quote)
        "pretrained_source": [r["pretrained_source"].replace(",", ";") for r in rows],
    }
    return columns, {"command": "models", "version": __version__}


def register(sub, common) -> None:
    """Add ``profile`` and ``models`` to the ``posbias`` parser."""
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
    p.add_argument("--target", choices=["hidden", "argmax_prob"], default="hidden",
                   help="last token's final hidden state (Frobenius norm of the Jacobian) or "
                        "the probability of the argmax next token (gradient norm)")
    p.add_argument("--source", choices=["text", "random"], default="text",
                   help="input tokens: standard-library documentation text, or random tokens")
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    common(p)
    p.set_defaults(func=_cmd_profile)

    m = sub.add_parser("models", help="the model zoo, and whether each one's weights are installed")
    common(m)
    m.set_defaults(func=_cmd_models)

    from . import capture  # imports no torch at module level

    capture.register_cli(sub, common)
