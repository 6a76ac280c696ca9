"""The born U at full width on a GPU (chapter *Born at scale*, issue 54): one prepared run.

    python bench/gpu_born.py prepare --out .gpu          # here: the token windows, the code digest
    python bench/gpu_born.py run --inputs .gpu --out $OUT   # on the GPU: the design's items
    python bench/gpu_born.py run --inputs .gpu --out /tmp/x --dry-run   # the same code on a CPU
    python bench/gpu_born.py import DIR                 # here: checked, into recorded/

``make gpu-born`` prepares and prints the command for the device.  The run follows
``experiments.born.scale.DESIGN["gpu"]``: each (configuration, length) item in order, at the
published width, float32 with TF32 off, no item started after ``start_by`` seconds nor one whose
predicted end falls after ``end_by``; the floor timing after ``floor_after`` items.  After every
item it rewrites ``gpu-<L>.npz`` (every entry of that length so far) and ``run.json`` (the
environment, each item's status, seconds and peak memory, the floor), so a run cut short still
returns what it measured.  An item that runs out of GPU memory is recorded as such and the run
goes on.

``import`` refuses a run whose code digest (namespace ``scale-gpu``) is not that of the commit it
was prepared on (the entry keeps that digest: where today's differs, ``make test`` says the GPU
numbers were made by earlier code), or an entry whose configuration (the architectural keys) differs from this machine's; it writes each
entry into ``recorded/cache/scale-gpu/`` with its provenance in ``recorded/MANIFEST.json``
(device, torch, transformers, CUDA, seconds, peak memory, the commit, its reduced-width twin)
and the run's log into ``bench/results/gpu-born.json`` (one item of its ``runs`` per run).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _source_sha() -> str:
    """SHA-256 of the raw source of the modules that compute ``scale-gpu``
    (:func:`posbias_nb.provenance.code.code_modules`): the same on any Python, where the ``ast``
    dump behind :func:`posbias_nb.provenance.code.code_digest` differs between Python versions."""
    import hashlib

    from posbias_nb.provenance import code

    h = hashlib.sha256()
    for m in code.code_modules("scale-gpu"):
        base = ROOT / "posbias_nb" / Path(*m.split(".")) if m else ROOT / "posbias_nb"
        f = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        h.update(m.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def prepare(out: Path) -> None:
    from posbias_nb.experiments.born import scale
    from posbias_nb.provenance import code

    out.mkdir(parents=True, exist_ok=True)
    lengths = sorted({L for _, L in scale.gpu_plan()})
    np.savez(out / "inputs.npz", **{str(L): scale.gpu_inputs(L) for L in lengths})
    from posbias_nb.provenance.record import head_commit

    expect = {"code": code.code_digest("scale-gpu"), "source": _source_sha(),
              "commit": head_commit(),
              "params": {f"{c}/{L}": scale.gpu_params(c, L) for c, L in scale.gpu_plan()}}
    (out / "expect.json").write_text(json.dumps(expect, indent=1) + "\n")
    print(f"{out}: token windows for {lengths}, code {expect['code'][:12]}, commit "
          f"{expect['commit'][:12]}")


def _save(out: Path, results: dict, log: dict) -> None:
    by_len: dict = {}
    for (c, L), arrays in results.items():
        for k, v in arrays.items():
            by_len.setdefault(L, {})[f"{c}/{k}"] = v
    for L, arrays in by_len.items():
        tmp = out / f"gpu-{L}.tmp.npz"
        np.savez(tmp, **arrays)
        tmp.replace(out / f"gpu-{L}.npz")
    (out / "run.json").write_text(json.dumps(log, indent=1, default=str) + "\n")


def run(inputs: Path, out: Path, dry: bool, only=()) -> int:
    t_start = time.perf_counter()
    import torch

    from posbias_nb import cache
    from posbias_nb.experiments.born import scale

    from posbias_nb.experiments.base import design

    # the design by its hash (JSON, the same on any Python); the verdict code's hash is an ast
    # dump, which differs between Pythons: the raw-source check below stands for it here
    if design.history("scale")[-1]["hash"] != scale.DESIGN.hash:
        print("gpu_born: the design is not the registry's latest", file=sys.stderr)
        return 2
    # every module of the study that checks the design reads it as is here (split into
    # modules, each holds its own reference to _checked)
    for mod in (scale.config, scale.measurements, scale.statistics, scale.gpu):
        mod._checked = lambda: scale.DESIGN
    g = scale.DESIGN["gpu"]
    device = "cpu" if dry else "cuda"
    if not dry and not torch.cuda.is_available():
        print("gpu_born: no CUDA device here (use --dry-run to try the script on a CPU)",
              file=sys.stderr)
        return 2
    ids = dict(np.load(inputs / "inputs.npz"))
    expect = json.loads((inputs / "expect.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    log = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "dry_run": dry, "device": device,
           "code": expect["code"], "source": _source_sha(),
           "commit": expect["commit"], "python": sys.version.split()[0], "items": [],
           "design": scale.DESIGN.hash}
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        p = torch.cuda.get_device_properties(0)
        log["gpu"] = {"name": p.name, "memory_bytes": int(p.total_memory),
                      "torch": torch.__version__, "cuda": str(torch.version.cuda),
                      "tf32": bool(torch.backends.cuda.matmul.allow_tf32)}
    if log["source"] != expect["source"]:  # the code digest of the prepared tree, if the same
        print(f"gpu_born: the code here ({log['source'][:12]}) is not the prepared one "
              f"({expect['source'][:12]})", file=sys.stderr)
        return 2
    # a dry run: the narrowest rung, windows cut to 128 and 256 tokens
    short = {8192: 128, 32768: 256}
    results, seen = {}, {}
    plan = scale.gpu_plan()
    if only:
        unknown = set(only) - {f"{c}/{L}" for c, L in plan}
        if unknown:
            print(f"gpu_born: {sorted(unknown)} are not items of the design", file=sys.stderr)
            return 2
        plan = [(c, L) for c, L in plan if f"{c}/{L}" in only]
        log["only"] = sorted(only)
    for i, (c, L) in enumerate(plan):
        if i == int(g["floor_after"]) and not only:
            f = g["floor"]
            fl = int(f["length"])
            try:
                log["floor"] = scale.floor_seconds(
                    f["model"], short[fl] if dry else fl, ids[str(fl)][:, :short[fl]] if dry
                    else ids[str(fl)], device=device,
                    width=scale.ladder(f["model"])[0] if dry else None)
            except Exception as e:  # noqa: BLE001  (out of memory too: recorded, the run goes on)
                log["floor"] = {"status": "error", "error": f"{type(e).__name__}: {e}"[:500]}
                scale.gpu._free(device)
            _save(out, results, log)
        now = time.perf_counter() - t_start
        item = {"model": c, "length": L, "at": round(now, 1)}
        known = [s for (c2, L2), s in seen.items() if c2 == c and L2 < L]
        predicted = now + known[0] * float(g["long_factor"]) if known else None
        if now > float(g["start_by"]):
            item["status"] = f"not started: {now:.0f} s > start_by {g['start_by']} s"
        elif predicted is not None and predicted > float(g["end_by"]):
            item["status"] = (f"not started: predicted end {predicted:.0f} s > end_by "
                              f"{g['end_by']} s")
        else:
            x = ids[str(L)]
            try:
                if dry:
                    r = scale.gpu_profile(c, short[L], x[:, :short[L]], device="cpu",
                                          width=scale.ladder(c)[0])
                else:
                    r = scale.gpu_profile(c, L, x, device=device)
                results[(c, L)] = r
                seen[(c, L)] = float(r["profile_seconds"]) + float(r["build_seconds"])
                item.update(status="measured", seconds=round(float(r["profile_seconds"]), 2),
                            build_seconds=round(float(r["build_seconds"]), 2),
                            peak_bytes=int(r["peak_bytes"]))
            except torch.cuda.OutOfMemoryError as e:
                item.update(status="out of memory", error=str(e).splitlines()[0][:300])
            except Exception as e:  # noqa: BLE001  (recorded, and the run goes on)
                import traceback

                item.update(status="error", error=f"{type(e).__name__}: {e}"[:500],
                            where=traceback.format_exc().splitlines()[-4:])
            # freed once the exception (whose traceback holds the failed item's tensors) is gone
            scale.gpu._free(device)
        item["done_at"] = round(time.perf_counter() - t_start, 1)
        log["items"].append(item)
        print(json.dumps(item), flush=True)
        _save(out, results, log)
    log["seconds"] = round(time.perf_counter() - t_start, 1)
    _save(out, results, log)
    print(f"gpu_born: {sum(i['status'] == 'measured' for i in log['items'])} of {len(plan)} "
          f"items measured in {log['seconds']} s", flush=True)
    return 0


def import_run(folder: Path, recorded: Path, results: Path) -> int:
    from posbias_nb import cache, models
    from posbias_nb.experiments.born import scale
    from posbias_nb.models.configs import ARCH_KEYS
    from posbias_nb.provenance import code

    log = json.loads((folder / "run.json").read_text())
    if log.get("dry_run"):
        print("gpu_born import: a dry run is never recorded", file=sys.stderr)
        return 2
    from posbias_nb.provenance.record import files_at

    # the digest of the code that ran: the prepared commit's, which the run checked its tree
    # against (by raw source); today's may differ, and make test says so
    then = code.code_digest("scale-gpu", files_at(log["commit"]))
    if log["code"] != then:
        print(f"gpu_born import: the run's code ({log['code'][:12]}) is not that of its commit "
              f"{log['commit'][:12]} ({then[:12]}): the tree was not committed when prepared",
              file=sys.stderr)
        return 2
    man_path = recorded / "MANIFEST.json"
    man = json.loads(man_path.read_text())
    n = 0
    for item in log["items"]:
        if item["status"] != "measured":
            continue
        c, L = item["model"], int(item["length"])
        z = dict(np.load(folder / f"gpu-{L}.npz"))
        arrays = {k.split("/", 1)[1]: v for k, v in z.items() if k.startswith(f"{c}/")}
        there = json.loads(str(arrays["config_json"]))
        here = models.ZOO[c].build_config().to_dict()
        diff = [k for k in ARCH_KEYS if k in here
                and json.dumps(here.get(k), sort_keys=True, default=str)
                != json.dumps(there.get(k), sort_keys=True, default=str)]
        if diff:
            print(f"gpu_born import: {c}: the GPU's configuration differs in {diff}",
                  file=sys.stderr)
            return 2
        params = scale.gpu_params(c, L)
        k = cache.key("scale-gpu", params)
        path = recorded / "cache" / "scale-gpu" / f"{k}.npz"
        cache.write_entry(path, arrays)
        man["entries"][f"scale-gpu/{k}"] = {
            "recorded": log["started"][:10], "commit": log["commit"],
            "bytes": path.stat().st_size, "compute_seconds": float(arrays["profile_seconds"]),
            "code": log["code"], "read": True,
            "machine": {"gpu": True, "device": str(arrays["device_name"]),
                        "torch": str(arrays["torch"]),
                        "transformers": str(arrays["transformers"]),
                        "cuda": str(arrays["cuda"]), "python": log.get("python")},
            "peak_bytes": int(arrays["peak_bytes"]),
            "twin": f"profile/{scale.twin_key(c)}",
        }
        n += 1
    ns = man.setdefault("namespaces", {}).setdefault("scale-gpu", {})
    ents = {k: v for k, v in man["entries"].items() if k.startswith("scale-gpu/")}
    ns.update(entries=len(ents), bytes=sum(v["bytes"] for v in ents.values()),
              compute_seconds=round(sum(v["compute_seconds"] for v in ents.values()), 1))
    man_path.write_text(json.dumps(man, indent=1) + "\n")
    runs = json.loads(results.read_text())["runs"] if results.is_file() else []
    runs = [r for r in runs if r["started"] != log["started"]] + [log]
    results.write_text(json.dumps({"runs": sorted(runs, key=lambda r: r["started"])}, indent=1)
                       + "\n")
    print(f"gpu_born import: {n} entries into {recorded}/cache/scale-gpu, the run's log in "
          f"{results}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--out", default=".gpu")
    r = sub.add_parser("run")
    r.add_argument("--inputs", default=".gpu")
    r.add_argument("--out", required=True)
    r.add_argument("--dry-run", action="store_true")
    r.add_argument("--graph-budget", type=float, default=None, metavar="GIB",
                   help="bytes of autograd graph kept before layers are recomputed, in GiB "
                   "(default experiments.born.scale.GPU_GRAPH_BUDGET; changes only float rounding)")
    r.add_argument("--only", default="", help="items CONFIG/LENGTH,... of the design (a rerun "
                   "of items a run lost), in the design's order and time rule")
    i = sub.add_parser("import")
    i.add_argument("folder")
    i.add_argument("--recorded", default=str(ROOT / "recorded"))
    i.add_argument("--results", default=str(ROOT / "bench" / "results" / "gpu-born.json"))
    a = ap.parse_args(argv)
    if a.cmd == "prepare":
        prepare(Path(a.out))
        return 0
    if a.cmd == "run":
        if a.graph_budget is not None:
            from posbias_nb.experiments.born import scale

            scale.GPU_GRAPH_BUDGET = int(a.graph_budget * 2**30)
        return run(Path(a.inputs), Path(a.out), a.dry_run,
                   tuple(x for x in a.only.split(",") if x))
    return import_run(Path(a.folder), Path(a.recorded), Path(a.results))


if __name__ == "__main__":
    sys.exit(main())
