"""``python -m posbias_nb.provenance``: the provenance of ``recorded/`` from the command line.

Its commands::

    python -m posbias_nb.provenance plan --recorded recorded --out PLAN.json --keys KEYS.txt \\
        [--budget SECONDS]                        # make test's sample (before the chapters)
    python -m posbias_nb.provenance summary --plan PLAN.json --log EVENTS.jsonl   # (after)
    python -m posbias_nb.provenance cost MODULE... [--budget SECONDS]   # what an edit would cost
    python -m posbias_nb.provenance record --cache DIR --log LOG --times TIMES --out recorded \\
        [--merge] [--replace NS,...] [--backfill-code]   # make record, make record-new
    python -m posbias_nb.provenance cpu-reference [--recorded recorded] [--key NS/KEY]
    python -m posbias_nb.provenance migrate-digests [--recorded recorded]   # a new digest rule
    python -m posbias_nb.provenance fanout [--scheduler ADDRESS] [--workers N] \\
        [--pytest ARGS] [--last CHAPTER] [--times FILE] CHAPTER...   # make ... ENGINE=dask

``plan``, ``summary`` and ``cost`` are :func:`posbias_nb.provenance.plan.main`, ``record``
:func:`posbias_nb.provenance.record.main`, ``cpu-reference``
:func:`posbias_nb.provenance.reference.main` with :data:`FINDERS`, ``migrate-digests``
:func:`posbias_nb.provenance.migrate.main`, ``fanout``
:func:`posbias_nb.provenance.fanout.main`; ``bench/verify_plan.py``,
``bench/record_measurements.py`` and ``bench/cpu_reference.py`` are the same commands.

An entry point on the entry floor, beside :mod:`posbias_nb.cli` (``posbias_nb/provenance/__main__.py``
only hands ``python -m posbias_nb.provenance`` to it): it alone of the provenance commands imports
a study (:data:`FINDERS`: which calls of the chapters make a training entry), so the provenance
room itself imports nothing above it.
"""
from __future__ import annotations

import itertools
import sys

from . import cache
from .provenance import plan, record, reference

__all__ = ["FINDERS", "train_arguments", "train_key", "cpu_reference", "main"]


def train_arguments():
    """Every ``train_run`` call the chapters make: the chapter's configuration with each arm
    (residual scales among them), seed and depth of its design."""
    from .experiments.remedy import lab as r

    d = r.DESIGN.spec
    for arm, seed, layers in itertools.product(r.ARMS, range(max(d["seeds"], 10)),
                                               d["depths"]):
        yield dict(r.CHAPTER, **r.ARMS[arm], seed=seed, layers=layers)


def train_key(kw) -> str:
    """The cache key of the ``train_run`` call ``kw`` (today's code)."""
    from .experiments.remedy import lab as r

    return cache.key("train", r.run_params(**kw))


#: For each namespace of :data:`~posbias_nb.provenance.machine.ROUNDING_AMPLIFIED`: the calls
#: that may have made an entry, the key a call gives (today's code: a key ``make test`` reads is
#: today's key), and the statement that computes it in the recording commit's code (``kw``: the
#: call's keyword arguments); :data:`posbias_nb.provenance.reference.Finder`.
FINDERS: dict[str, reference.Finder] = {
    "train": (train_arguments, train_key,
              "from posbias_nb.experiments.remedy.lab import train_run; train_run(**kw)"),
}


def cpu_reference(argv=None, prog: str | None = None) -> int:
    """``cpu-reference``: :func:`posbias_nb.provenance.reference.main` with :data:`FINDERS`."""
    return reference.main(argv, FINDERS, prog=prog)


PROG = "python -m posbias_nb.provenance"


def main(argv=None) -> int:
    """Run one command (the module docstring); its exit status (2 on a command not known)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = argv[0] if argv else None
    if cmd in ("plan", "summary", "cost"):
        return plan.main(argv, prog=PROG)
    if cmd == "record":
        return record.main(argv[1:], prog=f"{PROG} record")
    if cmd == "cpu-reference":
        return cpu_reference(argv[1:], prog=f"{PROG} cpu-reference")
    if cmd == "migrate-digests":
        from .provenance import migrate

        return migrate.main(argv[1:], prog=f"{PROG} migrate-digests")
    if cmd == "fanout":
        from .provenance import fanout

        return fanout.main(argv[1:], prog=f"{PROG} fanout")
    if cmd in ("-h", "--help"):
        print(__doc__)
        return 0
    print(f"usage: {PROG} {{plan,summary,cost,record,cpu-reference,migrate-digests,fanout}} ...",
          file=sys.stderr)
    return 2
