"""The ``posbias`` command (also ``python -m posbias_nb``).

Every subcommand parses its flags, calls one function that returns a
:class:`posbias_nb.results.Result`, and writes it in one way: CSV (its ``table()``; a profile is
``position,influence[,stderr]``) or JSON (its ``to_json()``: arrays plus ``meta``), to stdout or
``--out FILE`` (checked writable before any computation; ``posbias report`` writes a page and
its numbers into ``--out DIR``, checked the same way).  Every flag with a sensible value has it
as the default (``--help`` shows them).  Bad input prints one line on stderr and exits with
status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import io
import os
import sys
from typing import Sequence

from . import __version__

__all__ = ["main", "build_parser"]


class UsageError(Exception):
    """A user error: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would print the usage too)
        raise UsageError(message)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=["csv", "json"], default="csv", help="output format")
    p.add_argument("--out", default=None, help="write to FILE instead of stdout")


def _quiet_libraries() -> None:
    """Keep library chatter off stderr (the contract: a progress bar, or one error line)."""
    import os
    import warnings

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    # huggingface_hub's and transformers' own bars ("Loading weights", "Writing model shards")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)


# Each command: parse (argparse), call one function that returns a Result, write it (main).

def parse_params(pairs) -> dict:
    """``["tau=0.5", "scale=-1"]`` (the ``--remedy-param`` flags) as ``{"tau": 0.5, ...}``.

    Examples
    --------
    >>> parse_params(["tau=0.5", "lo=1.2"])
    {'tau': 0.5, 'lo': 1.2}
    """
    out = {}
    for p in pairs or ():
        k, sep, v = str(p).partition("=")
        if not sep or not k:
            raise ValueError(f"--remedy-param must be KEY=VALUE, got {p!r}")
        try:
            out[k.strip()] = float(v)
        except ValueError:
            raise ValueError(f"--remedy-param {k}: a number is needed, got {v!r}") from None
    return out


def _cmd_theory(args):
    from .measure.runs import theory_run

    return theory_run(args.length, args.depth, alpha=args.alpha, exact=args.exact,
                      layout=args.layout)


def _cmd_profile(args):
    if args.remedy_file:
        from .experiments.inference import remedy_run

        if args.remedy or args.remedy_param:
            raise UsageError("--remedy-file carries its remedy and parameters: drop --remedy "
                             "and --remedy-param")
        if args.exact or args.no_rope or args.batch != 1 or args.target != "hidden" \
                or args.source != "text":
            raise UsageError("--remedy-file profiles the last hidden state of one text window "
                             "with 8 probes: drop --exact, --no-rope, --batch, --target, "
                             "--source")
        return remedy_run(args.model, None, weights=args.weights, length=args.length,
                          progress=not args.quiet, file=args.remedy_file)
    if args.remedy:
        from .experiments.inference import remedy_run

        if args.exact or args.no_rope or args.batch != 1 or args.target != "hidden" \
                or args.source != "text":
            raise UsageError("--remedy profiles the last hidden state of one text window with "
                             "8 probes: drop --exact, --no-rope, --batch, --target, --source")
        return remedy_run(args.model, args.remedy, weights=args.weights, length=args.length,
                          params=parse_params(args.remedy_param), progress=not args.quiet)
    if args.remedy_param:
        raise UsageError("--remedy-param needs --remedy")
    from .measure.runs import profile_run

    model = args.model
    if args.width is not None or args.init != "hf":
        from . import models

        if args.width is None:
            raise UsageError("--init needs --width")
        if args.weights != "random":
            raise UsageError("--width rebuilds the architecture at random init: drop --weights "
                             "pretrained")
        model = models.at_width(args.model, args.width, args.init)
    return profile_run(model, weights=args.weights, length=args.length,
                       rope=not args.no_rope, exact=bool(args.exact), probes=args.probes,
                       batch=args.batch, seed=args.seed, target=args.target, source=args.source,
                       device=args.device, dtype=args.dtype, device_map=args.device_map,
                       progress=not args.quiet)


def _cmd_models(args):
    from .measure.runs import models_run

    return models_run()


def _cmd_rollout(args):
    from .measure.runs import rollout_run

    return rollout_run(args.model, weights=args.weights, length=args.length, mode=args.mode,
                       batch=args.batch, seed=args.seed, lambdas=args.lambdas)


def _cmd_retrieval(args):
    if args.remedy_file:
        from .experiments.inference import retrieval_remedy_run

        if args.remedy or args.remedy_param:
            raise UsageError("--remedy-file carries its remedy and parameters: drop --remedy "
                             "and --remedy-param")
        if args.variant != "hex":
            raise UsageError("--remedy-file scores the hex variant (teacher-forced): drop "
                             "--variant")
        return retrieval_remedy_run(args.model, None, task=args.task, positions=args.positions,
                                    examples=args.examples, length=args.length, seed=args.seed,
                                    weights=args.weights, progress=not args.quiet,
                                    file=args.remedy_file)
    if args.remedy:
        from .experiments.inference import retrieval_remedy_run

        if args.variant != "hex":
            raise UsageError("--remedy scores the hex variant (teacher-forced): drop --variant")
        return retrieval_remedy_run(args.model, args.remedy, parse_params(args.remedy_param),
                                    task=args.task, positions=args.positions,
                                    examples=args.examples, length=args.length, seed=args.seed,
                                    weights=args.weights, progress=not args.quiet)
    if args.remedy_param:
        raise UsageError("--remedy-param needs --remedy")
    from .experiments.retrieval import retrieval_run

    return retrieval_run(args.model, task=args.task, positions=args.positions,
                         examples=args.examples, length=args.length, seed=args.seed,
                         progress=not args.quiet, weights=args.weights, variant=args.variant)


def _cmd_task(args):
    from .experiments.task import task_run

    pos = None
    if args.positions is not None:
        try:
            pos = [int(x) for x in args.positions.split(",") if x.strip()]
        except ValueError:
            raise UsageError(f"--positions must be comma-separated integers, got "
                             f"{args.positions!r}") from None
    if args.examples is not None and args.examples < 0:
        raise UsageError(f"--examples must be >= 0, got {args.examples}")
    return task_run(args.model, args.data, documents=args.documents, positions=pos,
                    examples=args.examples or None, keys=args.keys, seed=args.seed,
                    weights=args.weights, max_new_tokens=args.max_new_tokens,
                    remedy_file=args.remedy_file, progress=not args.quiet)


def _remedy_flags(p) -> None:
    from .models.remedies import REMEDIES

    p.add_argument("--remedy", choices=REMEDIES, default=None,
                   help="apply an inference-time remedy (Llama-like models; ms-poe needs RoPE, "
                        "attention-calibration the kv task's documents); hidden-scaling, "
                        "ms-poe and attention-calibration are the papers' methods, the other "
                        "two variants of ours")
    p.add_argument("--remedy-file", default=None, metavar="FILE",
                   help="a remedy file (remedy.json, written by posbias fix or "
                        "models.remedy_file.write): its remedy with its parameters, refused on "
                        "a model it was not made for")
    p.add_argument("--remedy-param", action="append", default=[], metavar="KEY=VALUE",
                   help="the remedy's free parameter: scale (hidden-scaling[-all], default 0), "
                        "lo and hi (ms-poe, 1.2 and 1.8), temperature (attention-calibration, "
                        "default 5e-5), tau (prior-calibration, default 0.25)")


def _cmd_report(args):
    from .experiments.report import report, write_report

    if args.task_documents is not None and args.task_data is None:
        raise UsageError("--task-documents needs --task-data")
    res = report(args.model, weights=args.weights, length=args.length, quick=args.quick,
                 seed=args.seed, progress=not args.quiet, task_data=args.task_data,
                 task_documents=args.task_documents, remedy_file=args.remedy_file)
    paths = write_report(res, args.out)
    print(f"posbias: wrote {paths['html']} and {paths['json']}", file=sys.stderr)
    return None


def _cmd_fix(args):
    from .experiments.fix import fix, write_fix

    res = fix(args.model, args.data, documents=args.documents, examples=args.examples,
              seed=args.seed, weights=args.weights, quick=args.quick, edge_loss=args.edge_loss,
              progress=not args.quiet, remedies=args.remedies, rule=args.rule,
              force=args.force)
    paths = write_fix(res, args.out)
    got, sel = res["winner"], res["selected"]
    if sel:
        what = f"{sel['arm']}: {sel['words']}" if sel["arm"] else sel["words"]
        pw = sel["power"]
        if pw and sel["verdict"] != "inconclusive":  # the inconclusive words carry it already
            what += (f"; the test part detects gains of {pw['detectable']:.2f} nats (80% "
                     f"power), about {pw['needed']['0.5']} questions would detect 0.5")
    else:
        what = f"{got} holds on the test part" if got else "no remedy holds on the test part"
    print(f"posbias: wrote {', '.join(paths.values())} ({what}"
          + ("" if got else ": no remedy.json") + ")", file=sys.stderr)
    return None


def _cmd_train(args):
    from .experiments.remedies import train_run

    return train_run(args.task, args.layers, args.width, args.length, args.steps,
                     seed=args.seed, answer_positions=args.answer_positions, remedy=args.remedy,
                     residual_scale=args.residual_scale, device=args.device,
                     progress=not args.quiet)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="posbias", description=__doc__.splitlines()[0],
                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--version", action="version", version=f"posbias {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    _add = sub.add_parser

    def add_parser(name, **kw):  # every subcommand shows its defaults in --help
        return _add(name, formatter_class=argparse.ArgumentDefaultsHelpFormatter, **kw)
    sub.add_parser = add_parser

    t = sub.add_parser("theory", help="last row of ((1-alpha) I + alpha M)^depth (Cesàro theory), "
                                      "or of a layout's layers")
    t.add_argument("--length", type=int, default=1024, help="sequence length L >= 1")
    t.add_argument("--depth", type=int, default=None,
                   help="number of layers H: H >= 0 without --layout (default 12; 0 is the "
                        "identity), H >= 1 with a layout string (its pattern repeated to H "
                        "layers; default: the pattern once)")
    t.add_argument("--layout", default=None,
                   help="a layout, comma-separated [N*]kind[:size][@sink] with kind full, "
                        "sliding (size = window) or chunked (size = chunk), e.g. "
                        "'5*sliding:512,full'; or a model (zoo name, directory, hub id) whose "
                        "config gives it")
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
    p.add_argument("--length", type=int, default=512, help="sequence length L >= 2")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--probes", type=int, default=8,
                   help="Hutchinson probes K >= 2; output has a stderr column")
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
    p.add_argument("--width", type=int, default=None, metavar="D",
                   help="a zoo architecture rebuilt at hidden size D (depth, head counts and "
                        "layout kept; random init only), e.g. llama3.1-8b at 256")
    p.add_argument("--init", choices=["hf", "fan-in"], default="hf",
                   help="with --width: transformers' initialiser (std 0.02) or a width-aware "
                        "one (std D^-1/2)")
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    _remedy_flags(p)
    _common(p)
    p.set_defaults(func=_cmd_profile)

    m = sub.add_parser("models", help="the model zoo, and whether each one's weights are installed")
    _common(m)
    m.set_defaults(func=_cmd_models)

    p = sub.add_parser("rollout", help="influence profile predicted by the rollout of the "
                                       "model's measured attention kernels and shares")
    p.add_argument("--model", required=True, help="zoo name (see `posbias models`), local Hugging "
                   "Face directory, or hub id org/name (read from the local hub cache)")
    p.add_argument("--weights", choices=["random", "pretrained"], default="random",
                   help="random initialization (seeded) or installed pretrained weights")
    p.add_argument("--length", type=int, default=128, help="sequence length L >= 2")
    p.add_argument("--mode", choices=["attention", "residual", "positional", "content"], default="residual",
                   help="residual (measured lambda and kernels), attention (lambda = 1), "
                        "positional (measured lambda, content-free kernel), content")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and the text windows")
    p.add_argument("--batch", type=int, default=2, help="sequences averaged")
    p.add_argument("--lambdas", action="store_true",
                   help="print the measured lambda per layer instead of the profile")
    _common(p)
    p.set_defaults(func=_cmd_rollout)

    r = sub.add_parser("retrieval", help="retrieval accuracy and answer log-probability per "
                                         "gold position (key-value or needle in a haystack)")
    r.add_argument("--model", required=True, help="zoo name or local Hugging Face directory")
    r.add_argument("--weights", choices=["pretrained", "random"], default="pretrained",
                   help="installed pretrained weights or random initialization")
    r.add_argument("--task", choices=["kv", "needle"], default="kv",
                   help="key-value retrieval (Liu et al. 2023) or a needle in stdlib prose")
    r.add_argument("--positions", type=int, default=7,
                   help="gold positions P >= 2, first and last included")
    r.add_argument("--examples", type=int, default=10,
                   help="examples E >= 1, each asked at every position")
    r.add_argument("--length", type=int, default=350,
                   help="approximate prompt length in tokens")
    r.add_argument("--seed", type=int, default=0, help="seed of pairs, haystacks and needles")
    r.add_argument("--variant", choices=["hex", "liu"], default="hex",
                   help="hex: 8-hex-digit pairs, forced opening quote, teacher-forced exact "
                        "match; liu (kv only): Liu et al.'s UUID pairs, no lead, greedy "
                        "generation scored by substring match")
    r.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    _remedy_flags(r)
    _common(r)
    r.set_defaults(func=_cmd_retrieval)

    from .experiments.task import DEFAULTS as TASK

    k = sub.add_parser("task", help="accuracy and answer log-probability per gold position on "
                                    "real questions or your own task file (Liu et al.'s QA or "
                                    "key-value format, or the plain one)")
    k.add_argument("--model", required=True, help="zoo name, local Hugging Face directory, or "
                   "hub id org/name (read from the local hub cache)")
    k.add_argument("--data", required=True, metavar="FILE",
                   help="JSON lines (.gz or plain): Liu et al.'s QA (question, answers, ctxs "
                        "with isgold), their key-value (ordered_kv_records, key, value), or "
                        "plain (question, answers, documents, gold: 0-based index)")
    k.add_argument("--documents", type=int, default=None,
                   help=f"documents per prompt, QA files (default: a plain file's own count, "
                        f"the fewest of its examples'; {TASK['documents']} for Liu et al.'s): "
                        "the file's own passages, then BM25 distractors from its other gold "
                        "passages, none with an answer")
    k.add_argument("--keys", type=int, default=None,
                   help="records per prompt, key-value files (default: all)")
    k.add_argument("--positions", default=None, metavar="P,P,...",
                   help="0-based gold slots (default: Liu et al.'s 0,4,9,... where that gives "
                        "five or more, else every slot)")
    k.add_argument("--examples", type=int, default=TASK["examples"],
                   help="examples drawn by --seed (0: all of the file)")
    k.add_argument("--max-new-tokens", type=int, default=TASK["max_new_tokens"],
                   help="greedy generation budget (the first line is scored)")
    k.add_argument("--weights", choices=["pretrained", "random"], default="pretrained",
                   help="installed pretrained weights or random initialization")
    k.add_argument("--seed", type=int, default=TASK["seed"],
                   help="seed of the examples drawn (and of a random init)")
    k.add_argument("--remedy-file", default=None, metavar="FILE",
                   help="a remedy file (remedy.json, written by posbias fix or "
                        "models.remedy_file.write): every prompt scored and generated under its "
                        "remedy, or, for a prompt remedy (a reorder, curve-order, prior-order, "
                        "query-aware, attention-sort), with its documents placed by it; refused "
                        "on a model it was not made for")
    k.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    _common(k)
    k.set_defaults(func=_cmd_task)

    r = sub.add_parser("report", help="one model's position bias, born and trained: a "
                                      "self-contained HTML page and report.json in --out DIR")
    r.add_argument("--model", required=True, help="zoo name, local Hugging Face directory, or "
                   "hub id org/name (read from the local hub cache when HF_HUB_OFFLINE=1)")
    r.add_argument("--weights", choices=["pretrained", "random"], default="pretrained",
                   help="the weights reported on (the random-init twin is always measured)")
    r.add_argument("--length", type=int, default=512,
                   help="context length L of the profiles, up to the model's context")
    r.add_argument("--quick", action="store_true",
                   help="small sizes (8 windows, 2 probes, 5 gold positions x 4 examples)")
    r.add_argument("--seed", type=int, default=0,
                   help="seed of windows, probes, random twin, prompts and bootstrap")
    r.add_argument("--task-data", default=None, metavar="FILE",
                   help="your task file (the formats of `posbias task`): section 3 sweeps its "
                        "gold passage in place of the synthetic key-value task")
    r.add_argument("--task-documents", type=int, default=None, metavar="K",
                   help="documents per prompt of a QA task file (default: a plain file's own "
                        "count, the fewest of its examples'; 10 for Liu et al.'s)")
    r.add_argument("--remedy-file", default=None, metavar="FILE",
                   help="report the model patched by a remedy file (remedy.json of posbias "
                        "fix), refused on a model it was not made for")
    r.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    r.add_argument("--out", required=True, metavar="DIR",
                   help="directory for index.html and report.json (checked before any work)")
    r.set_defaults(func=_cmd_report, format=None, out_dir=True)

    from .experiments.fix import DEFAULT_RULE, DEFAULTS as FIX, MIN_TEST, NETWORK_REMEDIES, \
        QUICK, RULES
    from .experiments.placement import PROMPT_REMEDIES as PLACE

    f = sub.add_parser("fix", help="choose an inference-time remedy on one part of your task "
                                   "file and judge it on another: index.html, fix.json and, if "
                                   "one holds, remedy.json in --out DIR")
    f.add_argument("--model", required=True, help="zoo name, local Hugging Face directory, or "
                   "hub id org/name (read from the local hub cache)")
    f.add_argument("--data", required=True, metavar="FILE",
                   help="a task file in a format of `posbias task`")
    f.add_argument("--documents", type=int, default=None,
                   help=f"documents per prompt, QA files (default {FIX['documents']}, "
                        f"{QUICK['documents']} with --quick; a plain file keeps its own "
                        f"count)")
    f.add_argument("--examples", type=int, default=None,
                   help=f"examples drawn by --seed, split into a tuning and a test part "
                        f"(default {FIX['examples']}, {QUICK['examples']} with --quick)")
    f.add_argument("--edge-loss", type=float, default=FIX["edge_loss"],
                   help="with --rule middle: the largest mean log-p loss (nats) at the first "
                        "and last gold slots a chosen setting may cost on the tuning part")
    f.add_argument("--rule", choices=RULES, default=DEFAULT_RULE,
                   help="select-one (default): rank the remedies on the tuning part and test "
                        "the best one alone on the test part (one-sided t, with the smallest "
                        "gain the test part can detect); all-slots: judge every remedy, Holm "
                        "across them; middle: the first design's middle-slot rule, for the "
                        "remedies inside the network only")
    f.add_argument("--force", action="store_true",
                   help=f"run even when the test part has fewer than {MIN_TEST} examples "
                        "(too few to detect a gain of one standard deviation)")
    f.add_argument("--weights", choices=["pretrained", "random"], default="pretrained",
                   help="installed pretrained weights or random initialization")
    f.add_argument("--seed", type=int, default=FIX["seed"],
                   help="seed of the examples drawn and of the split")
    f.add_argument("--quick", action="store_true",
                   help="fewer and shorter prompts, a smaller channel search and cost "
                        "measurement (the same grids and rules)")
    f.add_argument("--remedies", default=None, metavar="A,B",
                   help=f"the remedies searched, comma-separated (default all: inside the "
                        f"network {', '.join(NETWORK_REMEDIES)}; in the prompt "
                        f"{', '.join(PLACE)}; the calibration costs one extra pass per "
                        f"document and prompt; hidden scaling and Ms-PoE are measured "
                        f"together, so naming one still measures both; the fast path: "
                        f"long-context-reorder,curve-order,prior-order)")
    f.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    f.add_argument("--out", required=True, metavar="DIR",
                   help="directory for index.html, fix.json and remedy.json (checked before "
                        "any work)")
    f.set_defaults(func=_cmd_fix, format=None, out_dir=True)

    t = sub.add_parser("train", help="train a small causal transformer on a synthetic task and "
                                     "measure accuracy, influence and lambda per position")
    from .experiments.remedies import CHAPTER  # the remedies chapter's configuration

    t.add_argument("--task", choices=["kv", "needle"], default=CHAPTER["task"],
                   help="key-value associative recall or a needle among look-alikes")
    t.add_argument("--layers", type=int, default=CHAPTER["layers"], help="layers, 2..8")
    t.add_argument("--width", type=int, default=CHAPTER["width"],
                   help="width, 32..128 (multiple of 16)")
    t.add_argument("--length", type=int, default=CHAPTER["length"],
                   help="context length, 32..256")
    t.add_argument("--steps", type=int, default=CHAPTER["steps"], help="AdamW steps >= 1")
    t.add_argument("--seed", type=int, default=0, help="seed of init, data and evaluation")
    t.add_argument("--answer-positions", choices=["uniform", "edges", "start"],
                   default="uniform", help="where the training answers sit")
    t.add_argument("--remedy", choices=["none", "weighted", "oversample", "curriculum"],
                   default="none", help="the seed paper's remedies")
    t.add_argument("--residual-scale", type=float, default=1.0,
                   help="attention output projections divided by X at init")
    t.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="cpu or cuda")
    t.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    _common(t)
    t.set_defaults(func=_cmd_train)
    return parser


def _check_writable(path: str) -> None:
    """ValueError (one line) unless ``path`` can be created or overwritten."""
    folder = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise ValueError(f"--out {path!r} is a directory")
    if not os.path.isdir(folder):
        raise ValueError(f"--out {path!r}: folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise ValueError(f"--out {path!r} is not writable")
    # os.access answers yes to root everywhere (even in /proc): try it, leaving no trace
    existed = os.path.exists(path)
    try:
        with open(path, "a"):
            pass
    except OSError as e:
        raise ValueError(f"--out {path!r} is not writable ({e.strerror})") from None
    if not existed:
        os.remove(path)


def _first_missing(path):
    """The outermost folder of ``path`` that does not exist yet (None if it does)."""
    from pathlib import Path

    p = Path(path).absolute()
    if p.exists():
        return None
    while not p.parent.exists():
        p = p.parent
    return p


def _remove_created(top) -> None:
    """After a failed run: remove the folders the run created under ``top``, if they hold
    nothing (a failed report leaves nothing behind that was not there before)."""
    import shutil

    if top is None or not top.is_dir():
        return
    if all(f.is_dir() for f in top.rglob("*")):
        shutil.rmtree(top, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    from .results import write

    try:
        args = parser.parse_args(argv)
        if args.command is None:
            raise UsageError("a command is required: " + ", ".join(
                sorted(parser._subparsers._group_actions[0].choices)))
        if getattr(args, "out_dir", False):
            from .experiments.pages import check_out_dir

            created = _first_missing(args.out)
            check_out_dir(args.out)  # a directory, before any computation
        elif args.out:
            _check_writable(args.out)  # before any computation, not after it
        _quiet_libraries()
        result = args.func(args)
        if result is None:  # the command wrote its own files
            return 0
        buf = io.StringIO()
        write(result, args.format, buf)
        if args.out:
            with open(args.out, "w") as f:
                f.write(buf.getvalue())
        else:
            sys.stdout.write(buf.getvalue())
    except (UsageError, ValueError, OSError, ModuleNotFoundError) as e:
        _remove_created(locals().get("created"))
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"posbias: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        _remove_created(locals().get("created"))
        print("posbias: interrupted", file=sys.stderr)
        return 130
    except Exception:
        _remove_created(locals().get("created"))
        raise
    return 0
