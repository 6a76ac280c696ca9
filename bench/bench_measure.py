"""Benchmark of posbias_nb.measure (a plain script, not a test).

1. Exact influence profile (one forward, all output directions as batched vector-Jacobian
   products, only the per-position sums of squares kept) against
   ``torch.autograd.functional.jacobian`` (the full (d, L, d) Jacobian materialized), at the same
   lengths on small GPT-2-architecture models (4 layers of width 128, and 1 layer at GPT-2's
   width 768, where the Jacobian itself is 1.2 GB at L = 512): wall time and peak resident
   memory.  ``exact`` uses chunks of 32 output directions per backward pass, ``exact-chunk8``
   of 8 (less memory); ``jacobian-vectorized`` is ``vectorize=True`` (skipped at width 768,
   where it needs tens of GB).  Each
   measurement runs in its own subprocess, so its peak RSS (``resource.getrusage``) is its own;
   the baseline (interpreter, torch, model) is reported separately.
2. The Hutchinson estimator's error against the number of probes K on the real-size GPT-2 at
   initialization: exact norms once, then 2 * K_max probes split into disjoint groups of K; the
   relative error against the exact profile and the delta-method standard error it predicts.
3. The two command-line runs of issue 4's "done" criterion (skipped with ``--quick``).
4. ``floor``: the influence profile with its defaults against a bare-torch floor measured in the
   same process, interleaved (floor, profile, floor, profile, ...): one forward pass and K plain
   backward passes (``torch.autograd.grad`` of ``<z_k, h_L>`` w.r.t. ``inputs_embeds``,
   ``retain_graph=True``) on the same model, fused attention, the same inputs.  The reported
   ratio is the median over rounds of profile time / floor time of the same round, so that a
   neighbour's load shifts both; the batched alternative (8 probes per backward pass
   through vmap, ``chunk=8``) is timed in the same rounds.  Cases: random-init GPT-2 at L = 1024 and pretrained
   SmolLM2-135M at L = 2048, K = 8 (target: ratio <= 1.10).
5. ``memory``: peak resident memory and time, one fresh process each: the command
   ``posbias profile --model smollm2-135m --weights pretrained --length L --probes 8`` in full
   at L = 2048, 4096, 8192 (its defaults; the memory model, GB per 1,000 tokens, is the line
   through these peaks; the 8192 profile is kept for the reproduce page), the whole graph kept
   (``checkpoint=False``) at 2048 and 4096 for comparison, and Gemma-3-270M at L = 16384 up to
   its peak (the first recomputed layer).

Run:  .venv/bin/python bench/bench_measure.py [--quick] [--only jacobian|probes|cli|floor|memory]
Writes bench/results/measure.json and prints tables (``--only`` reruns one section and keeps the
others).  Timings depend on the machine and on whatever else runs on it: the load average at
the start is recorded; peak memory is reliable, wall time under load is not.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "measure.json"
CONFIGS = {  # GPT-2 architecture at two sizes
    "small": dict(n_layer=4, n_embd=128, n_head=4, vocab_size=1000, n_positions=1024,
                  bos_token_id=0, eos_token_id=0),
    # one layer at GPT-2's full width: the (d, L, d) Jacobian is 1.2 GB at L = 512
    "wide": dict(n_layer=1, n_embd=768, n_head=12, vocab_size=1000, n_positions=1024,
                 bos_token_id=0, eos_token_id=0),
}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: kB


def one(method: str, L: int, config: str) -> dict:
    """Run one measurement in this process (called in a subprocess by ``main``)."""
    import torch
    from transformers import GPT2Config, AutoModelForCausalLM

    from posbias_nb import measure

    torch.manual_seed(0)
    cfg = CONFIGS[config]
    model = AutoModelForCausalLM.from_config(GPT2Config(**cfg), attn_implementation="sdpa")
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    ids = measure.text_batch(None, L, 1, seed=0, vocab_size=cfg["vocab_size"])
    base = _rss_mb()
    t0 = time.perf_counter()
    if method.startswith("exact"):
        chunk = int(method.partition("-chunk")[2] or 32)
        norms = measure.influence_profile(model, ids, method="exact", chunk=chunk)["influence"]
    else:
        x = model.get_input_embeddings()(torch.as_tensor(ids))

        def f(e):
            return model.base_model(inputs_embeds=e).last_hidden_state[0, -1]

        J = torch.autograd.functional.jacobian(f, x, vectorize=(method == "jacobian-vectorized"))
        norms = J.double().pow(2).sum((0, 1, 3)).sqrt().numpy()
    dt = time.perf_counter() - t0
    return {"config": config, "method": method, "L": L, "seconds": dt, "baseline_mb": base,
            "peak_mb": _rss_mb(), "norms": norms.tolist()}


def bench_exact_vs_jacobian(cases) -> list[dict]:
    rows = []
    for config, L in cases:
        ref = None
        # the vectorized Jacobian batches all d backward passes at once: at width 768 it needs
        # tens of GB, so the wide case runs the loop version only
        methods = (("exact", "exact-chunk8", "jacobian") if config == "wide"
                   else ("exact", "jacobian", "jacobian-vectorized"))
        for method in methods:
            r = subprocess.run([sys.executable, __file__, "--one", method, str(L), config],
                               capture_output=True, text=True, check=True,
                               env=dict(os.environ, HF_HUB_OFFLINE="1"))
            res = json.loads(r.stdout.strip().splitlines()[-1])
            norms = np.array(res.pop("norms"))
            if ref is None:
                ref = norms
            res["max_rel_diff_vs_exact"] = float(np.max(np.abs(norms - ref) / ref))
            res["extra_mb"] = res["peak_mb"] - res["baseline_mb"]
            rows.append(res)
            print(f"  {config:5s} L={L:5d} {method:20s} {res['seconds']:8.2f} s  peak {res['peak_mb']:7.0f} MB "
                  f"(+{res['extra_mb']:6.0f} over baseline)  max rel diff "
                  f"{res['max_rel_diff_vs_exact']:.1e}", flush=True)
    return rows


def bench_probes(L: int, kmax: int) -> dict:
    from posbias_nb import measure, models

    model, _, _ = models.load("gpt2", seed=0, attn="sdpa")
    ids = measure.text_batch(None, L, 1, seed=0)
    t0 = time.perf_counter()
    exact = measure.influence_profile(model, ids, method="exact", chunk=64)["influence"]
    t_exact = time.perf_counter() - t0
    t0 = time.perf_counter()
    est = measure.influence_profile(model, ids, probes=2 * kmax, chunk=16, seed=0)
    t_probe = (time.perf_counter() - t0) / (2 * kmax)
    samples = est["probe_samples"][0]  # (2 kmax, L)
    rows = []
    K = 2
    while K <= kmax:
        groups = samples.reshape(-1, K, L)
        errs, ses, zs = [], [], []
        for g in groups:
            f, se = measure.hutchinson(g)
            errs.append(np.abs(f - exact) / exact)
            ses.append(se / exact)
            zs.append((f - exact) / se)
        errs, ses, zs = np.array(errs), np.array(ses), np.array(zs)
        rows.append({"K": K, "groups": len(groups),
                     "rms_rel_error": float(np.sqrt(np.mean(errs**2))),
                     "mean_rel_stderr": float(np.mean(ses)),
                     "z_sd": float(np.std(zs)),
                     "frac_abs_z_below_2": float(np.mean(np.abs(zs) < 2))})
        r = rows[-1]
        print(f"  K={K:4d} groups={len(groups):3d}  rms rel error {r['rms_rel_error']:.4f}  "
              f"predicted {r['mean_rel_stderr']:.4f}  sd(z) {r['z_sd']:.2f}  "
              f"|z|<2: {r['frac_abs_z_below_2']:.2f}", flush=True)
        K *= 2
    return {"model": "gpt2", "L": L, "exact_seconds": t_exact, "seconds_per_probe": t_probe,
            "rows": rows}


def cli_once(args) -> dict:
    """Run ``posbias profile ARGS`` in this process; report its CPU time and peak RSS."""
    from posbias_nb import cli

    out = [] if "--out" in args else ["--out", os.devnull]  # a given --out is kept
    rc = cli.main(["profile", *args, "--quiet", *out])
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"rc": rc, "cpu_seconds": ru.ru_utime + ru.ru_stime, "peak_mb": _rss_mb()}


def _cli_process(args) -> dict:
    """``posbias profile ARGS`` in a fresh process (:func:`cli_once`, uncached): wall time
    (interpreter start and imports included), CPU time and peak RSS; raises if it fails."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, __file__, "--cli", *args], capture_output=True,
                       text=True, env=dict(os.environ, HF_HUB_OFFLINE="1", POSBIAS_CACHE_DIR="off"))
    dt = time.perf_counter() - t0
    res = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {"rc": None}
    if res["rc"] != 0:
        raise RuntimeError(f"posbias profile {' '.join(args)} failed: {r.stderr[-3000:]}")
    return {"seconds": dt, "cpu_seconds": res["cpu_seconds"], "peak_mb": res["peak_mb"]}


def bench_cli() -> list[dict]:
    runs = [["--model", "gpt2", "--weights", "random", "--length", "1024", "--probes", "8"],
            ["--model", "qwen2-0.5b", "--weights", "random", "--length", "512", "--probes", "8"]]
    rows = []
    for args in runs:
        rows.append({"args": " ".join(args), **_cli_process(args)})
        print(f"  posbias profile {' '.join(args)}: {rows[-1]['seconds']:.1f} s wall, "
              f"{rows[-1]['cpu_seconds']:.1f} s CPU, peak {rows[-1]['peak_mb']:.0f} MB", flush=True)
    return rows


def _floor_time(model, x, Z) -> float:
    """The bare-torch floor: one forward, K plain backward passes with ``retain_graph``."""
    import torch

    t0 = time.perf_counter()
    with torch.enable_grad():
        h = model.base_model(inputs_embeds=x, use_cache=False).last_hidden_state[0, -1]
        for z in Z:
            (g,) = torch.autograd.grad(h, x, grad_outputs=z, retain_graph=True)
            g[0].double().pow(2).sum(-1)
    del h, g
    return time.perf_counter() - t0


def floor_case(name: str, weights: str, L: int, K: int, rounds: int) -> dict:
    """Profile time over the floor's, interleaved in one process (section 4)."""
    import torch

    from posbias_nb import measure, models

    model, tok, info = models.load(name, weights=weights, seed=0)
    ids = measure.text_batch(tok, L, 1, seed=0,
                             vocab_size=model.get_input_embeddings().num_embeddings)
    x = model.get_input_embeddings()(torch.as_tensor(ids)).detach().requires_grad_(True)
    gen = torch.Generator().manual_seed(0)
    Z = torch.randint(0, 2, (K, x.shape[-1]), generator=gen, dtype=torch.float32) * 2 - 1
    # the default (plain backward passes on the CPU) and the batched alternative it was chosen
    # over (8 probes per backward pass through vmap, jacobian.default_chunk)
    variants = {"default": {}, "batched_chunk8": dict(chunk=8)}
    times: dict = {"floor": []}
    for r in range(rounds):
        for v, kw in variants.items():
            times["floor"].append(_floor_time(model, x, Z))
            t0 = time.perf_counter()
            measure.influence_profile(model, ids, probes=K, seed=0, **kw)
            times.setdefault(v, []).append(time.perf_counter() - t0)
            print(f"    round {r} {v:30s} {times[v][-1]:7.2f} s  floor {times['floor'][-1]:7.2f} s",
                  flush=True)
    fl = np.array(times["floor"]).reshape(rounds, len(variants))
    out = {"model": name, "weights": weights, "attn": info["attn"], "L": L, "K": K,
           "rounds": rounds, "floor_seconds": times["floor"]}
    for j, v in enumerate(variants):
        t = np.array(times[v])
        out[v] = {"seconds": t.tolist(), "ratio_median": float(np.median(t / fl[:, j])),
                  "ratio_min_over_min": float(t.min() / fl.min())}
    return out


def _save_section(key: str, value) -> None:
    """Update one section of the results file now (re-read first: sections run concurrently)."""
    cur = json.loads(OUT.read_text()) if OUT.exists() else {}
    cur[key] = value
    OUT.parent.mkdir(parents=True, exist_ok=True)
    tmp = OUT.with_suffix(f".json.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(cur, indent=2) + "\n")
    tmp.replace(OUT)


def bench_floor(quick: bool, rounds: int = 3) -> list[dict]:
    cases = [("gpt2", "random", 1024, 8)] if not quick else [("gpt2-tiny", "random", 256, 8)]
    if not quick:
        cases.append(("smollm2-135m", "pretrained", 2048, 8))
    rows = []
    for name, weights, L, K in cases:
        r = subprocess.run([sys.executable, __file__, "--floor", name, weights, str(L), str(K),
                            str(rounds)], capture_output=True, text=True,
                           env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"))
        if r.returncode:
            raise RuntimeError(r.stderr[-3000:])
        row = json.loads(r.stdout.strip().splitlines()[-1])
        row["load_average_at_end"] = os.getloadavg()
        rows.append(row)
        _save_section("floor", rows)
        print(f"  {name} L={L} K={K}: " + ", ".join(
            f"{v} ratio {row[v]['ratio_median']:.3f}" for v in
            ("default", "batched_chunk8")), flush=True)
    return rows


class _Stop(Exception):
    pass


def memory_case(name: str, weights: str, L: int, K: int, checkpoint: str,
                stop_after: int = 0) -> dict:
    """One profile in this (fresh) process: baseline and peak RSS, wall time (section 5).

    ``stop_after > 0``: stop once that many layers have been recomputed in the first sweep
    down the stack (layer-by-layer paths only).  By then the forward pass, the kept graph, the
    stored layer inputs, the cotangents and one recomputed layer's graph have all been held at
    once: the peak of the whole run, whose remaining layers and probes repeat the same
    allocations (``partial: true``, ``seconds`` is the time to that point).
    """
    import torch

    from posbias_nb import measure, models
    from posbias_nb.measure import jacobian

    model, tok, info = models.load(name, weights=weights, seed=0)
    ids = measure.text_batch(tok, L, 1, seed=0,
                             vocab_size=model.get_input_embeddings().num_embeddings)
    cp = {"auto": None, "layers": True, "one-graph": False}[checkpoint]
    # the baseline is the loaded model with every weight paged in (from_pretrained maps the
    # weights file: untouched pages are not resident) and the kernels warmed up
    with torch.no_grad():
        float(sum(p.double().sum() for p in model.parameters()))
    measure.influence_profile(model, ids[:, :64], probes=2, seed=0, checkpoint=cp)
    base = _rss_mb()
    partial = False
    if stop_after:
        orig, calls = jacobian._Layerwise._layer, [0]

        def layer(self, i):
            calls[0] += 1
            if calls[0] > stop_after:
                raise _Stop
            return orig(self, i)

        jacobian._Layerwise._layer = layer
    kept = jacobian._kept_layers(model, L) if cp is None else (0 if cp else None)
    t0 = time.perf_counter()
    try:
        measure.influence_profile(model, ids, probes=K, seed=0, checkpoint=cp)
    except _Stop:
        partial = True
    dt = time.perf_counter() - t0
    return {"model": name, "weights": weights, "attn": info["attn"], "L": L, "K": K,
            "checkpoint": checkpoint, "kept_layers": kept, "n_layers": info["n_layers"],
            "partial": partial, "stopped_after_layers": stop_after or None,
            "seconds": dt, "seconds_per_probe_approx": None if partial else dt / (K + 1.5),
            "baseline_mb": base, "peak_mb": _rss_mb(), "extra_mb": _rss_mb() - base,
            "n_params": info["n_params"], "threads": torch.get_num_threads()}


#: Section 5, full runs of the command itself: ``posbias profile --model smollm2-135m
#: --weights pretrained --length L --probes 8`` (defaults: fused attention, plain passes, the
#: graph budget), one fresh process each.  The longest one's profile is kept for the reproduce
#: page's long-context view (LONG_PROFILE).
CLI_LENGTHS = (2048, 4096, 8192)
LONG_PROFILE = ROOT / "bench" / "results" / "smollm2-135m-8192.json"

MEMORY_CASES = [  # (model, weights, L, K, checkpoint[, stop after N recomputed layers])
    # the whole graph kept (the old path), for the memory model's "per 1,000 tokens of graph"
    ("smollm2-135m", "pretrained", 2048, 2, "one-graph"),
    ("smollm2-135m", "pretrained", 4096, 2, "one-graph"),
    # Gemma-3-270M at 16k: the peak of a long run is reached early (see memory_case), so the
    # run stops after the first recomputed layer (a full run was not measured)
    ("gemma3-270m", "pretrained", 16384, 8, "auto", 1),
]


def cli_memory_case(L: int) -> dict:
    """``posbias profile`` on pretrained SmolLM2-135M at length ``L`` with 8 probes, in a fresh
    process: wall time (imports and loading included), CPU time, peak resident memory."""
    out = LONG_PROFILE if L == max(CLI_LENGTHS) else Path(os.devnull)
    args = ["--model", "smollm2-135m", "--weights", "pretrained", "--length", str(L),
            "--probes", "8", "--format", "json"]
    return {"model": "smollm2-135m", "weights": "pretrained", "L": L, "K": 8,
            "command": "posbias profile " + " ".join(args),
            **_cli_process([*args, "--out", str(out)]),
            "profile": str(out.relative_to(ROOT)) if out != Path(os.devnull) else None,
            "load_average_at_end": os.getloadavg()}


def memory_model(rows) -> dict:
    """Peak memory against length, from the full command runs: a least-squares line
    ``peak = a + b L`` (``b`` in GB per 1,000 tokens) and its largest residual."""
    L = np.array([r["L"] for r in rows], float)
    pk = np.array([r["peak_mb"] for r in rows], float) / 1024
    b, a = np.polyfit(L / 1000, pk, 1)
    return {"gb_at_zero": float(a), "gb_per_1000_tokens": float(b),
            "max_residual_gb": float(np.abs(pk - (a + b * L / 1000)).max()),
            "lengths": L.astype(int).tolist(), "peak_gb": pk.tolist()}


def bench_memory(quick: bool, cases=None) -> dict:
    if quick:
        cases = cases or [("smollm2-tiny", "random", L, 2, cp) for L in (512, 1024)
                          for cp in ("one-graph", "layers")]
    cases = cases or MEMORY_CASES
    out: dict = {"cli": [], "cases": []}
    for L in () if quick else CLI_LENGTHS:
        row = cli_memory_case(L)
        out["cli"].append(row)
        _save_section("memory", out)
        print(f"  posbias profile smollm2-135m L={L:6d} K=8 {row['seconds']:8.1f} s  peak "
              f"{row['peak_mb']:7.0f} MB", flush=True)
    if len(out["cli"]) > 1:
        out["model"] = memory_model(out["cli"])
        print(f"  memory model: {out['model']['gb_at_zero']:.2f} GB + "
              f"{out['model']['gb_per_1000_tokens']:.3f} GB per 1,000 tokens", flush=True)
    for name, weights, L, K, cp, *stop in cases:
        r = subprocess.run([sys.executable, __file__, "--memory", name, weights, str(L), str(K),
                            cp, str(stop[0] if stop else 0)], capture_output=True, text=True,
                           env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"))
        if r.returncode:
            out["cases"].append({"model": name, "L": L, "K": K, "checkpoint": cp,
                                 "error": r.stderr.strip().splitlines()[-1:]})
            _save_section("memory", out)
            print(f"  {name} L={L} K={K} {cp}: failed {out['cases'][-1]['error']}", flush=True)
            continue
        row = json.loads(r.stdout.strip().splitlines()[-1])
        row["load_average_at_end"] = os.getloadavg()
        out["cases"].append(row)
        _save_section("memory", out)
        print(f"  {name} L={L:6d} K={K} {cp:9s} {row['seconds']:8.1f} s  peak "
              f"{row['peak_mb']:7.0f} MB (+{row['extra_mb']:6.0f} over the loaded model)",
              flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, no command-line runs")
    ap.add_argument("--only", choices=["jacobian", "probes", "cli", "floor", "memory"],
                    help="run one section and update it in the existing results file")
    ap.add_argument("--one", nargs=3, metavar=("METHOD", "L", "CONFIG"), help=argparse.SUPPRESS)
    ap.add_argument("--cli", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of section 4")
    ap.add_argument("--floor", nargs=5, help=argparse.SUPPRESS)
    ap.add_argument("--memory", nargs=6, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.floor:
        n, w, L, K, R = a.floor
        print(json.dumps(floor_case(n, w, int(L), int(K), int(R))))
        return
    if a.memory:
        n, w, L, K, cp, stop = a.memory
        print(json.dumps(memory_case(n, w, int(L), int(K), cp, int(stop))))
        return
    if a.one:
        print(json.dumps(one(a.one[0], int(a.one[1]), a.one[2])))
        return
    if a.cli:
        print(json.dumps(cli_once(a.cli)))
        return
    import torch

    result: dict = {}  # sections are merged into the results file one by one (_save_section)
    result["machine"] = {"platform": platform.platform(), "cpus": os.cpu_count(),
                         "torch_threads": torch.get_num_threads(),
                         "torch": torch.__version__, "python": platform.python_version(),
                         "load_average_at_start": os.getloadavg()}
    if a.only in (None, "jacobian"):
        bench_section_1(a.quick, result)
    if a.only in (None, "probes"):
        bench_section_2(a.quick, result)
    if a.only in (None, "cli") and not a.quick:
        print("3. the command-line runs of the done criterion")
        result["cli"] = bench_cli()
    if a.only in (None, "floor"):
        print("4. profile time / bare-torch floor (interleaved, same process)")
        result["floor"] = bench_floor(a.quick, a.rounds)
    if a.only in (None, "memory"):
        print("5. peak memory and time by length (a fresh process per case)")
        result["memory"] = bench_memory(a.quick)
    for k, v in result.items():  # section by section: another section may be running
        _save_section(k, v)
    print(f"wrote {OUT.relative_to(ROOT)}")


def bench_section_1(quick: bool, result: dict) -> None:
    print("1. exact profile vs torch.autograd.functional.jacobian (GPT-2 architecture: "
          + "; ".join(f"{k} = {c['n_layer']} layers, width {c['n_embd']}"
                      for k, c in CONFIGS.items()) + ")")
    cases = [("small", 32), ("small", 128)]
    if not quick:
        cases += [("small", 512), ("wide", 512)]
    result["exact_vs_jacobian"] = bench_exact_vs_jacobian(cases)


def bench_section_2(quick: bool, result: dict) -> None:
    L = 16 if quick else 32
    kmax = 16 if quick else 64
    print(f"2. Hutchinson error vs probes (GPT-2 small at init, L={L})")
    result["probes"] = bench_probes(L, kmax)


if __name__ == "__main__":
    main()
