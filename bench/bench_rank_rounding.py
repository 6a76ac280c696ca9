"""How far another CPU's rounding moves the dense retriever's scores of the pipeline corpus, and
how far deliberate changes of the retriever move its recorded ranking: the measurement behind
:func:`posbias_nb.measure.dense.rank_tolerance`, the tolerance at which ``pipeline-retrieve``'s
rankings are checked against their record (:func:`posbias_nb.tasks.corpus.ranking_agrees`).

Why a tolerance at all: the corpus holds near-duplicate passages whose cosines to a question tie
or nearly tie, and which of two such passages ranks first is decided by float rounding.  The
entry recorded on an AMD EPYC (25/17/1) AVX-512 came back on an Intel Xeon (6/167/1) AVX-512,
same code, with 107 retrieved ranks (4 gold ranks) in another order.  A ranking is therefore
checked by its scores: each recorded passage must score within the tolerance of what its rank
calls for (:func:`~posbias_nb.tasks.corpus.ranking_gaps`).

Another CPU is emulated on this one by the kernels it would get, as
``bench/bench_twin_rounding.py`` does: torch's CPU dispatch (``ATEN_CPU_CAPABILITY``: ``avx2``,
``default`` = no vector unit), MKL's (``MKL_ENABLE_INSTRUCTIONS``) and MKL's reproducible path
(``MKL_CBWR=COMPATIBLE``); and by another batch size (8 for 32: other padding, other matrix
shapes).  Each variant runs in its own process and computes the full score matrix
(2,655 questions x 2,600 passages).  A variant's *rounding* is the largest |score - this
machine's native score|.  The tolerance is 100 times the largest rounding, rounded up to a power
of ten (the rule of the twins' tolerance).

Deliberate changes of the retriever (:data:`CHANGES`: truncation at 128 tokens, the first token
for mean pooling, passages without their title, no L2 normalisation) are run natively; each is
*caught* when the recorded ranking, checked against its scores, has a rank at least 10 times the
tolerance from what that rank calls for.  The script exits 1 where the recorded ranking fails
its check under any rounding variant (the tolerance would not hold) or any change goes uncaught.
Results: ``posbias_nb/data/rank_rounding.json`` (the package reads its tolerance from there; a
unit test recomputes it) and a copy in ``bench/results/``.

    python bench/bench_rank_rounding.py          # about 12 minutes on 2 cores
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

from posbias_nb.provenance.verify import rounding_tolerance

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "posbias_nb" / "data" / "rank_rounding.json"
#: the emulated CPUs and batch size: name -> (environment of the process, batch size)
VARIANTS = {
    "avx2 (torch and MKL)": ({"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
                             None),
    "no vector unit (torch default, MKL SSE4.2)": ({"ATEN_CPU_CAPABILITY": "default",
                                                    "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}, None),
    "MKL reproducible path (CBWR=COMPATIBLE)": ({"MKL_CBWR": "COMPATIBLE"}, None),
    "batches of 8 (other padding)": ({}, 8),
}
#: deliberate changes of the retriever, run natively
CHANGES = ("truncation at 128 tokens", "first token, not the mean", "passages without title",
           "no L2 normalisation")
HEADROOM, MARGIN = 100.0, 10.0
RETRIEVE_KEY = "5ed582bae3defacc0af04123f0240a935c90cf7bbe7e3be49b9135ee348b135b"


def _apply_change(name: str | None) -> None:
    import torch

    from posbias_nb.measure import dense
    from posbias_nb.tasks import corpus

    if name is None:
        return
    if name == "truncation at 128 tokens":
        dense._load()
        dense._LOADED["max_len"] = 128
    elif name == "passages without title":
        corpus.passage_text = lambda d: d.text
    elif name in ("first token, not the mean", "no L2 normalisation"):
        def embed(texts, batch=dense._BATCH):
            m, tok, max_len = dense._load()
            out = []
            with torch.inference_mode():
                for i in range(0, len(texts), batch):
                    enc = tok(list(texts[i:i + batch]), padding=True, truncation=True,
                              max_length=max_len, return_tensors="pt")
                    h = m(**enc).last_hidden_state
                    if name == "first token, not the mean":
                        e = torch.nn.functional.normalize(h[:, 0], p=2, dim=1)
                    else:
                        mask = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
                        e = (h * mask).sum(1) / mask.sum(1)
                    out.append(e.numpy())
            return np.concatenate(out).astype(np.float32)
        dense.embed = embed
    else:
        raise ValueError(f"unknown change {name!r}")


def worker(out: str, change: str | None, batch: int | None) -> None:
    from posbias_nb.experiments.remedy import pipeline
    from posbias_nb.measure import dense

    passages, gold, examples = pipeline.corpus()  # checks the design before any change
    _apply_change(change)
    if batch is not None:
        dense.embed.__defaults__ = (batch,)
    t0 = time.perf_counter()
    s = dense.DenseIndex(passages).scores([e.question for e in examples])
    np.save(out, s)
    print(json.dumps({"seconds": time.perf_counter() - t0}))


def _run(tmp: Path, name: str, env: dict, change: str | None, batch: int | None) -> np.ndarray:
    path = tmp / f"{abs(hash(name))}.npy"
    args = [sys.executable, __file__, "--worker", str(path), change or "", str(batch or "")]
    t0 = time.perf_counter()
    subprocess.run(args, check=True, env={**os.environ, **env}, cwd=ROOT)
    print(f"  {name}: {time.perf_counter() - t0:.0f} s", flush=True)
    return np.load(path)


def main() -> int:
    from posbias_nb.cache import read_entry
    from posbias_nb.experiments.remedy import pipeline
    from posbias_nb.provenance.machine import machine_id
    from posbias_nb.tasks.corpus import ranking_agrees, ranking_gaps

    rec_path = ROOT / "recorded" / "cache" / "pipeline-retrieve" / f"{RETRIEVE_KEY}.npz"
    rec = read_entry(rec_path)
    _, gold, _ = pipeline.corpus()
    manifest = json.loads((ROOT / "recorded" / "MANIFEST.json").read_text())
    recorded_on = manifest["entries"][f"pipeline-retrieve/{RETRIEVE_KEY}"]["machine"]["id"]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        native = _run(tmp, "native", {}, None, None)
        rounding, gaps, agrees = {}, {}, {}
        for name, (env, batch) in VARIANTS.items():
            s = _run(tmp, name, env, None, batch)
            rounding[name] = float(np.max(np.abs(s - native)))
            gaps[name] = float(ranking_gaps(rec["retrieved"], s).max())
            agrees[name] = s
        changed = {name: _run(tmp, name, {}, name, None) for name in CHANGES}
    largest = max(rounding.values())
    tol = rounding_tolerance(largest, HEADROOM)
    native_gap = float(ranking_gaps(rec["retrieved"], native).max())
    recorded_vs_native = ranking_agrees(rec, native, gold, tol)
    agrees = {name: not ranking_agrees(rec, s, gold, tol) for name, s in agrees.items()}
    change_gap = {name: float(ranking_gaps(rec["retrieved"], s).max())
                  for name, s in changed.items()}
    change_share = {name: float((ranking_gaps(rec["retrieved"], s) > tol).mean())
                    for name, s in changed.items()}
    caught = {name: change_gap[name] >= MARGIN * tol
              and bool(ranking_agrees(rec, s, gold, tol)) for name, s in changed.items()}
    result = {
        "what": "the dense retriever's scores of the pipeline corpus under other CPUs' kernels "
                "and another batch size, the tolerance of pipeline-retrieve's ranking check, and "
                "how far deliberate changes of the retriever move the recorded ranking",
        "machine": machine_id(), "platform": platform.platform(),
        "recorded_entry": f"pipeline-retrieve/{RETRIEVE_KEY}", "recorded_on": recorded_on,
        "rounding": rounding, "largest_rounding": largest,
        "headroom": HEADROOM, "margin": MARGIN, "tolerance": tol,
        "recorded_gap_native": native_gap,
        "recorded_gap_by_variant": gaps,
        "recorded_agrees_native": not recorded_vs_native,
        "recorded_agrees_by_variant": agrees,
        "change_gap": change_gap, "change_share_beyond_tolerance": change_share,
        "caught": caught,
    }
    text = json.dumps(result, indent=1, sort_keys=True) + "\n"
    OUT.write_text(text)
    (ROOT / "bench" / "results" / "rank-rounding.json").write_text(text)
    print(text)
    ok = result["recorded_agrees_native"] and all(result["recorded_agrees_by_variant"].values()) \
        and all(caught.values())
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3] or None, int(sys.argv[4]) if sys.argv[4] else None)
    else:
        sys.exit(main())
