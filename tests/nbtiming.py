"""pytest plugin: record how long each chapter notebook takes to execute (used by `make notebooks`).

Writes ``$POSBIAS_NB_TIMES`` (JSON): for each notebook, the summed wall time of its cells, with
the machine it ran on and whether the measurement cache was cold.  The "Reproduce and extend"
page of the book shows this table.
"""
from __future__ import annotations

import json
import os
import platform
import time
from collections import defaultdict
from pathlib import Path

_times: dict[str, float] = defaultdict(float)
_failed: set[str] = set()
_start = time.time()


def pytest_runtest_logreport(report):
    if report.when == "call":
        nb = report.nodeid.split("::")[0]
        _times[Path(nb).stem] += report.duration
        if report.failed:
            _failed.add(Path(nb).stem)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def pytest_sessionfinish(session, exitstatus):
    out = os.environ.get("POSBIAS_NB_TIMES")
    if not out or not _times:
        return
    data = {
        "machine": {"cpus": os.cpu_count(), "cpu": _cpu_model(), "python": platform.python_version(),
                    "gpu": False},
        "cache": os.environ.get("POSBIAS_CACHE_STATE", "unknown"),
        "date": time.strftime("%Y-%m-%d"),
        "seconds": {k: round(v, 1) for k, v in sorted(_times.items())},
        "failed": sorted(_failed),
    }
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(data, indent=2) + "\n")
