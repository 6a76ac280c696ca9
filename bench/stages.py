"""The stages of ``make test``, each timed (issue 63): one table at the end, also written to
``bench/results/make-test-stages.json``.

Standard library only (it times the pip stage, before the virtual environment exists)::

    python3 bench/stages.py run NAME -- COMMAND...   # run COMMAND, append its seconds to the log
    python3 bench/stages.py table [--out FILE]       # the table of the logged stages
    python3 bench/stages.py weights-dir CACHE_DIR    # where the de-quantized weights go (or "")

``run`` exits with the command's status; a failed stage is logged too (``rc``), so the table of
a red run says where it stopped.  The chapters' line also says how many seconds of compute the
run spent re-measuring recorded entries (the ``computed`` and ``computed-part`` events of
``_build/cache-events.jsonl``, summed over the parallel kernels, so it can exceed the wall).
Each stage also logs the disk space left after it (``disk_free_gib``): a CI run once failed
when the disk filled up (safetensors' "No space left on device" while saving the de-quantized
weights), and the table says so.  ``weights-dir`` is the Makefile's answer to that: on a disk
with too little room left, the de-quantized weights (:data:`WEIGHTS_GIB`) go to RAM
(``/dev/shm``) where that has the room; the numbers are the same, they are only kept elsewhere.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOG = ROOT / "_build" / "stages.jsonl"
EVENTS = ROOT / "_build" / "cache-events.jsonl"


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                flags = Path("/proc/cpuinfo").read_text()
                isa = "AVX512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "other"
                return f"{name} / {isa}"
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _commit() -> str | None:
    """The commit the stages ran at (None outside a git checkout)."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.strip() or None
    except (OSError, subprocess.CalledProcessError):
        return None


def run(name: str, cmd: list[str]) -> int:
    if not cmd:
        print("stages.py run: no command", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    rc = subprocess.call(cmd)
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with open(LOG, "a") as f:
        f.write(json.dumps({"stage": name, "seconds": round(time.perf_counter() - t0, 1),
                            "rc": rc, "disk_free_gib": disk_free_gib()}) + "\n")
    return rc


def disk_free_gib() -> float | None:
    """Space left on the checkout's disk, GiB."""
    return _free_gib(ROOT)


#: The de-quantized packaged weights (SmolLM2 0.5 GiB, Gemma 3 1.0 GiB) and Gemma's assembled GGUF
#: file (0.24 GiB), with room to spare; and what the disk must keep free besides them (the
#: measurements the chapters cache, the book build, Chromium).
WEIGHTS_GIB = 2.0
MARGIN_GIB = 2.0
SHM = Path("/dev/shm")


def weights_dir(cache: Path, disk_free: float, shm_free: float | None,
                shm: Path = SHM) -> Path | None:
    """Where the de-quantized weights go: ``None`` for the default (``weights/`` in the cache
    folder), or a folder in RAM (under ``shm``) when the disk has less than
    ``WEIGHTS_GIB + MARGIN_GIB`` free, RAM has that much, and the cache folder holds no weights
    yet.  Once chosen, the RAM folder is kept for every later stage of the run (it exists).

    >>> import tempfile; c = Path(tempfile.mkdtemp())
    >>> weights_dir(c, disk_free=50.0, shm_free=20.0) is None
    True
    >>> weights_dir(c, disk_free=1.5, shm_free=20.0, shm=c / "shm").name.startswith("posbias-weights-")
    True
    >>> weights_dir(c, disk_free=1.5, shm_free=1.0, shm=c / "shm") is None
    True
    """
    import hashlib

    ram = shm / f"posbias-weights-{hashlib.sha256(str(cache).encode()).hexdigest()[:12]}"
    if ram.is_dir():
        return ram
    if any((cache / "weights").glob("*-dequantized-*/config.json")):
        return None
    need = WEIGHTS_GIB + MARGIN_GIB
    if disk_free >= need or shm_free is None or shm_free < need:
        return None
    return ram


def _free_gib(path: Path) -> float | None:
    """Space left on the disk that holds ``path``, GiB (None where it cannot be read)."""
    try:
        return round(shutil.disk_usage(path).free / 2**30, 2)
    except OSError:
        return None


def remeasured_seconds() -> float | None:
    if not EVENTS.exists():
        return None
    tot = 0.0
    for line in EVENTS.read_text().splitlines():
        e = json.loads(line) if line.strip() else {}
        if e.get("event") in ("computed", "computed-part"):
            tot += float(e.get("seconds") or 0.0)
    return round(tot, 1)


def table(out: Path | None) -> int:
    rows = [json.loads(x) for x in LOG.read_text().splitlines() if x.strip()] \
        if LOG.exists() else []
    total = round(sum(r["seconds"] for r in rows), 1)
    rem = remeasured_seconds()
    print("make test, stage by stage (seconds of wall clock; disk space left after it, GiB):")
    for r in rows:
        note = ""
        if r["stage"] == "chapters" and rem is not None:
            note = f"  (of which re-measuring recorded entries: {rem:.0f} s of compute, all kernels)"
        free = r.get("disk_free_gib")
        disk = f"{free:7.1f}" if free is not None else " " * 7
        if r["rc"] != 0 and free is not None and free < 1.0:
            note += "  (the disk is all but full: a write may have failed for want of room)"
        print(f"  {r['stage']:14s} {r['seconds']:8.1f} {disk}"
              f"{'' if r['rc'] == 0 else '  FAILED'}{note}")
    print(f"  {'total':14s} {total:8.1f}")
    if os.environ.get("POSBIAS_WEIGHTS_DIR", "").startswith(str(SHM)):
        print(f"  the de-quantized weights were kept in RAM ({os.environ['POSBIAS_WEIGHTS_DIR']}): "
              f"the disk had less than {WEIGHTS_GIB + MARGIN_GIB:.0f} GiB free")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({
            "what": "make test's stages on a fresh clone (bench/stages.py)",
            "date": time.strftime("%Y-%m-%d"), "commit": _commit(), "cpu": _cpu(),
            "cpus": os.cpu_count(),
            "stages": rows, "remeasured_compute_seconds": rem, "total_seconds": total,
            "weights_dir": os.environ.get("POSBIAS_WEIGHTS_DIR") or None},
            indent=1) + "\n")
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"] and len(argv) >= 2:
        cmd = argv[2:]
        if cmd[:1] == ["--"]:
            cmd = cmd[1:]
        return run(argv[1], cmd)
    if argv[:1] == ["table"]:
        out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else None
        return table(out)
    if argv[:1] == ["weights-dir"] and len(argv) == 2:
        cache = Path(argv[1])
        got = weights_dir(cache, disk_free=disk_free_gib() or 0.0, shm_free=_free_gib(SHM))
        if got is not None:
            got.mkdir(mode=0o700, parents=True, exist_ok=True)
            print(got)
        return 0
    print("usage: stages.py run NAME -- COMMAND... | table [--out FILE] | weights-dir CACHE_DIR",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
