"""Born at scale, what was recorded on a GPU: the runs' logs (``bench/results/gpu-born.json``),
each item's status, and the GPU entries' provenance against today's code."""
from __future__ import annotations

from .... import cache
from .gpu import gpu_cell, gpu_plan

__all__ = ["gpu_runs", "gpu_status", "gpu_provenance"]


def _results_file():
    from pathlib import Path

    root = Path(__file__).resolve().parents[4]
    return root / "bench" / "results" / "gpu-born.json"


def gpu_runs(path=None) -> list[dict]:
    """The GPU runs' logs (``bench/results/gpu-born.json``, written by ``bench/gpu_born.py
    import``), oldest first; empty where none was recorded."""
    import json
    from pathlib import Path

    p = Path(path) if path is not None else _results_file()
    return json.loads(p.read_text())["runs"] if p.is_file() else []


def gpu_status() -> list[dict]:
    """Per item of the GPU design: the entry if one is recorded, else what the runs say of it
    (out of memory, not started under the time rule, or never run)."""
    last = {}
    for r in gpu_runs():
        for it in r["items"]:
            last[(it["model"], int(it["length"]))] = it
    out = []
    for c, L in gpu_plan():
        x = gpu_cell(c, L)
        st = "measured" if x is not None else last.get((c, L), {}).get("status", "never run")
        out.append(dict(model=c, length=L, status=st, cell=x))
    return out


def gpu_provenance(manifest=None) -> dict:
    """The recorded GPU entries' provenance (``recorded/MANIFEST.json`` beside the recorded
    folder): their number, commits, and whether today's code digest of namespace ``scale-gpu``
    is the one that measured them (``current``), as ``make test``'s plan says."""
    import json

    if manifest is None:
        d = cache.recorded_dir()
        f = None if d is None else d.parent / "MANIFEST.json"
        manifest = json.loads(f.read_text()) if f is not None and f.is_file() else {}
    ents = {k: v for k, v in manifest.get("entries", {}).items() if k.startswith("scale-gpu/")}
    today = cache.code_digest("scale-gpu")
    return dict(n=len(ents), commits=sorted({v["commit"][:12] for v in ents.values()}),
                current=bool(ents) and all(v.get("code") == today for v in ents.values()))
