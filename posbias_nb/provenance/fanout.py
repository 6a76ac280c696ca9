"""The record fanned out over Dask distributed: units of measurement (a chapter, or any call
that fills the cache) run on a cluster's workers instead of one machine's two processes.

``make record ENGINE=dask`` (and ``make record-new``, ``make notebooks``) hands every chapter to
a Dask cluster: a ``LocalCluster`` of ``NB_WORKERS`` processes by default, or the scheduler at
``SCHEDULER=tcp://host:8786`` (start one with ``dask scheduler`` and ``dask worker ADDRESS
--nthreads 1`` on each machine).  Each chapter runs as ``make notebooks`` runs it (the same
pytest-nbval command, one chapter per task, in a process of its own); the verdict overview runs
after every other chapter (a Dask dependency).  Dask schedules, retries nothing and keeps no
state of ours: this module only says what to run.

What makes a fan-out give the serial run's entries:

* **The same keys and provenance.**  A unit computes through :func:`posbias_nb.cache.cached`,
  as it would alone: the key is the parameters', the cache event log (``$POSBIAS_CACHE_LOG``)
  and the code digest are written by the same code.  The environment each unit needs (cache
  folder, log, recorded folder) travels with the task (:func:`run`'s ``env``), so a worker on
  another machine uses the shared folders it names.
* **Each entry computed once.**  Two units that need the same entry meet at the cache's lock on
  its key (:func:`posbias_nb.cache.lock`): the second waits and reads what the first wrote.  On
  a real cluster the cache folder must be one shared filesystem with working ``flock``.
* **Written atomically**, as the cache always writes (:func:`posbias_nb.cache.write_entry`).

``tests/integration/test_fanout.py`` runs units on a two-worker ``LocalCluster`` and checks that the
entries are byte-identical to a serial run's and that a shared entry is computed once.

Bad input: a scheduler address that does not answer within :data:`CONNECT_TIMEOUT` seconds is a
:class:`ValueError` naming it (``python -m posbias_nb.provenance fanout``: one line, exit 2,
nothing run).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

__all__ = ["Unit", "CONNECT_TIMEOUT", "client", "run", "chapter_unit", "run_chapter", "main"]

#: Seconds a scheduler address has to answer.
CONNECT_TIMEOUT = 10

ROOT = Path(__file__).resolve().parents[2]

#: The environment variables a chapter unit takes along to its worker (the cache, the recorded
#: folder, the verification sample, the threads, the offline hub, the hash seed).
ENV_PREFIXES = ("POSBIAS_", "OMP_", "MKL_", "HF_", "TRANSFORMERS_", "PYTHONHASHSEED", "JUPYTER",
                "PYDEVD_", "CI")


@dataclass(frozen=True)
class Unit:
    """One unit of measurement: ``func`` (``"module:function"``, importable on every worker)
    called with ``kwargs``; ``after``: names of units that must finish first."""

    name: str
    func: str
    kwargs: Mapping = field(default_factory=dict)
    after: tuple[str, ...] = ()

    def __post_init__(self):
        if ":" not in self.func:
            raise ValueError(f"a unit's func is 'module:function', got {self.func!r}")


def _resolve(func: str):
    mod, _, name = func.partition(":")
    return getattr(importlib.import_module(mod), name)


def _call(func: str, kwargs: Mapping, env: Mapping[str, str], *_after) -> dict:
    """Run one unit on a worker, under ``env`` (restored afterwards); its seconds and result."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update({k: str(v) for k, v in env.items()})
    t0 = time.perf_counter()
    try:
        out = _resolve(func)(**kwargs)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    import socket

    return {"seconds": time.perf_counter() - t0, "worker": f"{socket.gethostname()}:{os.getpid()}",
            "result": out if isinstance(out, (dict, int, float, str, type(None))) else None}


def client(scheduler: str | None = None, workers: int = 2, timeout: float | None = None):
    """A ``distributed.Client``: on a ``LocalCluster`` of ``workers`` single-threaded processes
    where ``scheduler`` is None, ``""`` or ``"local"``, else connected to the scheduler at that
    address (ValueError naming it where it does not answer within ``timeout`` seconds, default
    :data:`CONNECT_TIMEOUT`)."""
    timeout = CONNECT_TIMEOUT if timeout is None else timeout
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not timeout > 0:
        raise ValueError(f"the connect timeout must be a number of seconds > 0, got {timeout!r}")
    from distributed import Client, LocalCluster

    if scheduler in (None, "", "local"):
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise ValueError(f"workers must be a positive integer, got {workers!r}")
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=40)
        return Client(cluster)
    try:
        return Client(str(scheduler), timeout=timeout)
    except (OSError, TimeoutError, ValueError) as e:
        raise ValueError(f"the Dask scheduler at {scheduler!r} does not answer within "
                         f"{timeout:g} s ({type(e).__name__})") from None


def run(units: Sequence[Unit], scheduler: str | None = None, workers: int = 2,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None) -> dict[str, dict]:
    """Run ``units`` on Dask (:func:`client`; ``timeout``: its connect timeout), each after the
    units it names in ``after``; ``{name: {"seconds", "worker", "result"}}``.  ``env``:
    environment variables every unit runs under.  The first unit that raises is re-raised once
    every unit has finished or failed."""
    names = [u.name for u in units]
    if len(set(names)) != len(names):
        raise ValueError(f"unit names repeat: {sorted({n for n in names if names.count(n) > 1})}")
    for u in units:
        missing = [a for a in u.after if a not in names]
        if missing:
            raise ValueError(f"unit {u.name!r} waits for units not given: {missing}")
    env = {k: str(v) for k, v in (env or {}).items()}
    from distributed import wait

    with client(scheduler, workers, timeout) as c:
        futures: dict = {}
        pending = list(units)
        while pending:  # submit in an order where every unit's predecessors are already in
            ready = [u for u in pending if all(a in futures for a in u.after)]
            if not ready:
                raise ValueError(f"units wait for each other: {[u.name for u in pending]}")
            for u in ready:
                futures[u.name] = c.submit(_call, u.func, dict(u.kwargs), env,
                                           *[futures[a] for a in u.after],
                                           key=f"posbias-{u.name}", pure=False, retries=0)
                pending.remove(u)
        wait(list(futures.values()))
        out, errors = {}, []
        for name, f in futures.items():
            if f.status == "finished":
                out[name] = f.result()
            else:
                errors.append((name, f.exception()))
        if errors:
            name, e = errors[0]
            raise RuntimeError(f"unit {name!r} failed on its worker: {e}") from e
        return out


def run_chapter(chapter: str, pytest_args: Sequence[str], times: str) -> dict:
    """Execute one chapter as ``make notebooks`` does (pytest-nbval, in a process of its own,
    from the repository root), its seconds into ``times`` (``--chapter-times``); the return
    code and the last lines of its output.  A chapter that fails raises, naming it."""
    cmd = [sys.executable, "-m", "pytest", *pytest_args, "--chapter-times", times, chapter]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    tail = (r.stdout + r.stderr)[-4000:]
    if r.returncode != 0:
        raise RuntimeError(f"chapter {chapter} failed (exit {r.returncode}):\n{tail}")
    return {"rc": r.returncode, "tail": tail[-800:]}


def chapter_unit(chapter: str, pytest_args: Sequence[str], times_dir: str,
                 after: Sequence[str] = ()) -> Unit:
    """The :class:`Unit` that executes ``chapter`` (``book/NAME.md``), its times into
    ``times_dir/NAME.json``."""
    name = Path(chapter).stem
    return Unit(name, "posbias_nb.provenance.fanout:run_chapter",
                dict(chapter=str(chapter), pytest_args=list(pytest_args),
                     times=str(Path(times_dir) / f"{name}.json")), tuple(after))


def merge_times(parts: Sequence[Path], out: Path, wall: float, workers: int,
                scheduler: str | None) -> dict:
    """One ``chapter-times.json`` from the chapters' own: their seconds and failures, the
    fan-out's wall time and workers."""
    data: dict = {}
    for p in parts:
        d = json.loads(Path(p).read_text())
        if not data:
            data = dict(d, seconds={}, failed=[])
        data["seconds"].update(d["seconds"])
        data["failed"] = sorted(set(data["failed"]) | set(d["failed"]))
    data.update(wall=round(wall, 1), workers=workers,
                engine=f"dask {'LocalCluster' if scheduler in (None, '', 'local') else scheduler}")
    data["seconds"] = dict(sorted(data.get("seconds", {}).items()))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(data, indent=2) + "\n")
    return data


def main(argv=None, prog: str | None = None) -> int:
    """``python -m posbias_nb.provenance fanout``: the chapters on Dask (module docstring)."""
    ap = argparse.ArgumentParser(prog=prog, description="execute chapters on a Dask cluster")
    ap.add_argument("chapters", nargs="+", help="book/NAME.md files")
    ap.add_argument("--scheduler", default=None,
                    help="a Dask scheduler's address (default: a LocalCluster)")
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster processes")
    ap.add_argument("--pytest", default="", help="the pytest arguments of one chapter's run")
    ap.add_argument("--last", action="append", default=[],
                    help="a chapter that runs after every other (the verdict overview)")
    ap.add_argument("--times", default="_build/chapter-times.json")
    ap.add_argument("--connect-timeout", type=float, default=CONNECT_TIMEOUT,
                    help="seconds to wait for --scheduler to answer")
    a = ap.parse_args(argv)
    args = shlex.split(a.pytest)
    tdir = Path(a.times).parent / "fanout-times"
    tdir.mkdir(parents=True, exist_ok=True)
    for f in tdir.glob("*.json"):
        f.unlink()
    first = [chapter_unit(ch, args, str(tdir)) for ch in a.chapters if ch not in a.last]
    units = first + [chapter_unit(ch, args, str(tdir), after=[u.name for u in first])
                     for ch in a.last]
    # what a unit needs of this environment travels with it (a remote worker has its own)
    env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)}
    t0 = time.perf_counter()
    try:
        got = run(units, a.scheduler, a.workers, env, a.connect_timeout)
    except ValueError as e:
        print(f"fanout: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:
        print(f"fanout: {e}", file=sys.stderr)
        return 1
    finally:
        parts = sorted(tdir.glob("*.json"))
        if parts:
            merge_times(parts, Path(a.times), time.perf_counter() - t0, a.workers, a.scheduler)
    for name, r in got.items():
        print(f"{name}: {r['seconds']:.0f} s on {r['worker']}")
    return 0
