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

Run:  .venv/bin/python bench/bench_measure.py [--quick] [--only jacobian|probes|cli]
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

    rc = cli.main(["profile", *args, "--quiet", "--out", os.devnull])
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"rc": rc, "cpu_seconds": ru.ru_utime + ru.ru_stime, "peak_mb": _rss_mb()}


def bench_cli() -> list[dict]:
    runs = [["--model", "gpt2", "--weights", "random", "--length", "1024", "--probes", "8"],
            ["--model", "qwen2-0.5b", "--weights", "random", "--length", "512", "--probes", "8"]]
    rows = []
    for args in runs:
        t0 = time.perf_counter()  # wall time includes interpreter start and imports
        r = subprocess.run([sys.executable, __file__, "--cli", *args], capture_output=True,
                           text=True, check=True,
                           env=dict(os.environ, HF_HUB_OFFLINE="1", POSBIAS_CACHE_DIR="off"))
        dt = time.perf_counter() - t0
        res = json.loads(r.stdout.strip().splitlines()[-1])
        if res["rc"] != 0:
            raise RuntimeError(f"posbias profile {' '.join(args)} failed: {r.stderr}")
        rows.append({"args": " ".join(args), "seconds": dt, "cpu_seconds": res["cpu_seconds"],
                     "peak_mb": res["peak_mb"]})
        print(f"  posbias profile {' '.join(args)}: {dt:.1f} s wall, "
              f"{rows[-1]['cpu_seconds']:.1f} s CPU, peak {rows[-1]['peak_mb']:.0f} MB", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, no command-line runs")
    ap.add_argument("--only", choices=["jacobian", "probes", "cli"],
                    help="run one section and update it in the existing results file")
    ap.add_argument("--one", nargs=3, metavar=("METHOD", "L", "CONFIG"), help=argparse.SUPPRESS)
    ap.add_argument("--cli", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one[0], int(a.one[1]), a.one[2])))
        return
    if a.cli:
        print(json.dumps(cli_once(a.cli)))
        return
    import torch

    result = json.loads(OUT.read_text()) if a.only and OUT.exists() else {}
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
    OUT.parent.mkdir(parents=True, exist_ok=True)
    tmp = OUT.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(OUT)
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
