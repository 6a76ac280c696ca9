"""How far another CPU's rounding moves a training run, float32 and its float64 twin, and how far a
changed training step moves the twin: the measurement behind the ``train-twin`` tolerance
(issue 63, item 3; :data:`posbias_nb.provenance.verify.NAMESPACE_RTOL`).

Another CPU is emulated on this one by the kernels it would get: torch's CPU dispatch
(``ATEN_CPU_CAPABILITY``: ``avx2``, ``default`` = no vector unit) and MKL's
(``MKL_ENABLE_INSTRUCTIONS``: ``AVX2``, ``SSE4_2``), and MKL's reproducible code path
(``MKL_CBWR=COMPATIBLE``).  Each variant runs in its own process:

* the recorded float32 run of the remedies chapter's cheapest entry (the ``weighted`` arm, seed 4,
  200 steps) -- how far rounding carries a float32 run (held-out answers flip);
* its float64 twin (:func:`posbias_nb.experiments.remedy.lab.train_twin`) at 10, 25, 50 and 100
  steps -- how the twin's deviation grows with the steps.

Deliberate changes of the training step (:data:`CHANGES`: the learning rate, the remedy's middle
weight, the weight decay, the clipping threshold, one batch's answers drawn again) are run
natively, on the float32 run as recorded (is it caught by the recording CPU's own check,
:func:`posbias_nb.provenance.verify.agree` at its default tolerance?) and on the twin at each
length.  The deviation of a run is what ``agree`` compares: per array, the largest absolute
difference over the array's largest magnitude; the run's is the largest over its arrays.

At each length, the tolerance (:func:`tolerance`) is 100 times the largest rounding deviation of
any variant, rounded up to a power of ten; the twin *catches* a change that moves it by at least
10 times that, and the length *holds* where the twin catches every change the float32 check
catches.  The twin runs the most steps that hold (the more steps, the more of training it
exercises); the script exits 1 where none holds or where
:data:`~posbias_nb.experiments.remedy.lab.TWIN_STEPS` is not that length.  Results:
``posbias_nb/data/twin_rounding.json`` (the package reads its tolerance from there; a unit test
recomputes it) and a copy in ``bench/results/``.

    python bench/bench_twin_rounding.py          # about 12 minutes on 2 cores
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from posbias_nb.experiments.remedy import lab as T
from posbias_nb.experiments.remedy.lab import TWIN_STEPS
from posbias_nb.provenance.verify import rounding_tolerance

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "posbias_nb" / "data" / "twin_rounding.json"
#: the emulated CPUs: name -> environment of the process
VARIANTS = {
    "avx2 (torch and MKL)": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "no vector unit (torch default, MKL SSE4.2)": {"ATEN_CPU_CAPABILITY": "default",
                                                   "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
    "MKL reproducible path (CBWR=COMPATIBLE)": {"MKL_CBWR": "COMPATIBLE"},
}
GROWTH_STEPS = (10, 25, 50, 100)
#: the headroom of the tolerance over the largest rounding deviation, and of the smallest
#: change's deviation over the tolerance
HEADROOM, MARGIN = 100.0, 10.0


def config():
    return dict(T.CHAPTER, **T.ARMS["weighted"], seed=4)


def deviation(a: dict, b: dict) -> float:
    """The largest, over the arrays of ``a``, of max |a - b| / max |a| (what ``agree`` bounds)."""
    out = 0.0
    for n in a:
        x, y = np.asarray(a[n], float), np.asarray(b[n], float)
        scale = float(np.max(np.abs(x))) or 1.0
        out = max(out, float(np.max(np.abs(x - y))) / scale)
    return out


def worker(path: str) -> None:
    cfg = config()
    got = {}
    f32 = T.train_run(**cfg, cache=False)
    for n in ("accuracy", "loss", "correct", "influence", "lambda", "curve_loss"):
        got[f"f32/{n}"] = np.asarray(f32[n])
    for s in GROWTH_STEPS:
        tw = T.train_twin(**dict(cfg, steps=s), cache=False)
        for n, v in tw.items():
            got[f"twin{s}/{n}"] = np.asarray(v)
    np.savez(path, **got)


F32_KEYS = ("accuracy", "loss", "influence", "lambda", "curve_loss")


def _changed(name: str, steps: int | None) -> dict:
    """The twin at ``steps`` steps with one deliberate change of its training step; with
    ``steps`` None, the float32 run as recorded (200 steps) with the same change."""
    import torch

    from posbias_nb.tasks import synthetic

    cfg = dict(config(), **({} if steps is None else {"steps": steps}))
    n_steps = cfg["steps"]
    # the training step reads these where it lives (the lab's measurements module)
    saved = (torch.optim.AdamW, torch.nn.utils.clip_grad_norm_, T.measurements.MIDDLE_WEIGHT,
             T.measurements.sample_positions)
    try:
        if name == "learning rate x 1.01":
            cfg["lr"] = 3e-3 * 1.01
        elif name == "middle weight x 1.01":
            T.measurements.MIDDLE_WEIGHT = saved[2] * 1.01
        elif name == "weight decay x 2":
            torch.optim.AdamW = lambda *a, **k: saved[0](*a, **{**k, "weight_decay":
                                                              k["weight_decay"] * 2})
        elif name == "clipping threshold x 0.9":
            torch.nn.utils.clip_grad_norm_ = lambda params, c: saved[1](params, c * 0.9)
        elif name == "one batch's answers drawn again":
            calls = [0]

            def once(rng, n, L, placement):
                calls[0] += 1
                if calls[0] == max(1, n_steps // 2):
                    synthetic.sample_positions(rng, n, L, placement)  # one extra draw
                return synthetic.sample_positions(rng, n, L, placement)
            T.measurements.sample_positions = once
        else:
            raise ValueError(name)
        if steps is None:
            out = T.train_run(**cfg, cache=False)
            return {k: np.asarray(out[k]) for k in F32_KEYS}
        return T.train_twin(**cfg, cache=False)
    finally:
        (torch.optim.AdamW, torch.nn.utils.clip_grad_norm_, T.measurements.MIDDLE_WEIGHT,
         T.measurements.sample_positions) = saved


#: Changes of the training step a reviewer could make by mistake, each a percent or more (the
#: learning rate, the remedy's weight, the weight decay, the clipping, the data order)
CHANGES = ("learning rate x 1.01", "middle weight x 1.01", "weight decay x 2",
           "clipping threshold x 0.9", "one batch's answers drawn again")


def tolerance(rounding: float) -> float:
    """``HEADROOM`` times the largest rounding deviation, rounded up to a power of ten
    (:func:`posbias_nb.provenance.verify.rounding_tolerance`)."""
    return rounding_tolerance(rounding, HEADROOM)


def _run(env_extra: dict) -> dict:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "out.npz")
        env = {**os.environ, **env_extra, "OMP_NUM_THREADS": "1"}
        subprocess.run([sys.executable, __file__, "--worker", path], env=env, check=True,
                       cwd=ROOT)
        with np.load(path) as z:
            return {k: z[k] for k in z.files}


def main() -> int:
    t0 = time.perf_counter()
    runs = {"native": _run({})}
    for name, env in VARIANTS.items():
        runs[name] = _run(env)
    nat = runs["native"]

    def part(run, prefix):
        return {k.split("/", 1)[1]: v for k, v in run.items() if k.startswith(prefix + "/")}
    variants = {}
    for name in VARIANTS:
        r = runs[name]
        f32a, f32b = part(nat, "f32"), part(r, "f32")
        variants[name] = {
            "env": VARIANTS[name],
            "float32": {"deviation": deviation({k: v for k, v in f32a.items() if k != "correct"},
                                               f32b),
                        "answers flipped": int(np.sum(f32a["correct"] != f32b["correct"])),
                        "answers": int(f32a["correct"].size)},
            "twin by steps": {str(s): deviation(part(nat, f"twin{s}"), part(r, f"twin{s}"))
                              for s in GROWTH_STEPS}}
    from posbias_nb.provenance import verify

    base32 = {k: v for k, v in part(nat, "f32").items() if k in F32_KEYS}
    float32_check = {}
    for c in CHANGES:
        moved = _changed(c, None)
        float32_check[c] = {"deviation": deviation(base32, moved),
                            "caught": bool(verify.agree(base32, moved))}
    by_steps = {}
    for s in GROWTH_STEPS:
        rounding = max(v["twin by steps"][str(s)] for v in variants.values())
        tol = tolerance(rounding)
        base = part(nat, f"twin{s}")
        changes = {c: deviation(base, _changed(c, s)) for c in CHANGES}
        caught = {c: d >= MARGIN * tol for c, d in changes.items()}
        by_steps[str(s)] = {"largest_rounding": rounding, "tolerance": tol, "changes": changes,
                            "smallest_change": min(changes.values()), "caught": caught,
                            "holds": all(caught[c] for c in CHANGES
                                         if float32_check[c]["caught"])}
    held = [s for s in GROWTH_STEPS if by_steps[str(s)]["holds"]]
    chosen = max(held) if held else None
    result = {
        "what": "deviation (max |a - b| / max |a| over a run's arrays) of the remedies chapter's "
                "cheapest training entry (weighted arm, seed 4): float32 at 200 steps and its "
                "float64 twin at several lengths, under other CPUs' kernels (emulated), and of "
                "the twin under deliberate changes of the training step; the twin's steps are "
                "the most at which the smallest change still moves it by MARGIN x the tolerance",
        "config": config(), "growth_steps": list(GROWTH_STEPS), "variants": variants,
        "by_steps": by_steps, "headroom": HEADROOM, "margin": MARGIN,
        "float32_check": float32_check, "float32_rtol": verify.RTOL,
        "twin_steps": chosen, "holds": chosen is not None,
        **({k: by_steps[str(chosen)][k] for k in ("largest_rounding", "tolerance", "changes",
                                                  "smallest_change", "caught")}
           if chosen else {}),
        "machine": {"cpu": platform.processor() or platform.machine(), "python":
                    platform.python_version()},
        "date": time.strftime("%Y-%m-%d"), "seconds": round(time.perf_counter() - t0, 1)}
    from posbias_nb.provenance.machine import machine_id

    result["machine"]["id"] = machine_id()
    text = json.dumps(result, indent=1, sort_keys=True) + "\n"
    (ROOT / "bench" / "results" / "twin-rounding.json").write_text(text)
    print(text)
    if chosen is None:
        print("at no length does the twin catch every change the float32 check on the "
              "recording CPU catches (by MARGIN x its tolerance)")
        return 1
    OUT.write_text(text)
    if chosen != TWIN_STEPS:
        print(f"the twin should run {chosen} steps (TWIN_STEPS is {TWIN_STEPS}): set it in "
              f"posbias_nb/experiments/remedy/lab.py and re-record the train-twin namespace")
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
    else:
        sys.exit(main())
