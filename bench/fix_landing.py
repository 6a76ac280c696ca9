"""How well the fast path's landing-slot estimate (design ``fix-fast``,
:func:`posbias_nb.experiments.remedy.fix_fast.landing_check`) tracks the gains the full path scored, on
one run of the full path (``posbias fix --quick --remedies ... --out DIR``, without ``--fast``):

    python bench/fix_landing.py DIR/fix.json [FAST/fix.json]   # -> bench/results/fix-landing.json

The full path's ``fix.json`` holds, per ranked setting, the scored gain of every tuning
question and where each scored prompt put the gold passage; this script rebuilds the same tuning
part (its split and sizes from that file), computes the model as it is on it under the fast
path's own code (:func:`posbias_nb.experiments.remedy.fix_fast.tune_settings`, in the measurement cache of
``$POSBIAS_CACHE_DIR``) and compares.  Given the fast path's own ``fix.json`` of the same file,
seed and sizes too, it also records what each path carried and its test-part gain (the same
test questions).  A description, not a claim: one model, one file, the tuning part's few
questions.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (1, 2):
        raise SystemExit("usage: python bench/fix_landing.py FULL_PATH_FIX_JSON [FAST_FIX_JSON]")
    from posbias_nb.experiments.remedy import fix_fast as ff
    from posbias_nb.experiments.prompt import user_task as T
    from posbias_nb.measure import entry
    from posbias_nb.models.weights import file_sha256
    from posbias_nb.tasks import qa

    full = json.loads(Path(argv[0]).read_text())
    meta, sp = full["meta"], full["split"]
    if meta.get("design") == "fix-fast":
        raise SystemExit("give the full path's fix.json (a run without --fast)")
    data = ROOT / "data" / "liu2023" / meta["data"]
    if file_sha256(data) != meta["data_sha256"]:
        raise SystemExit(f"{data} is not the file of that run")
    fmt, _ = qa.read_task_file(data)
    pos = [p - 1 for p in meta["gold_slots"]]
    k = meta["documents"]
    part = T.prepare(data, k, pos, None, None, meta["seed"], fmt, select=sp["tune"],
                     pool_exclude=sp["test"])
    info = entry.checked(meta["model_argument"], meta["weights"], 2, 1, meta["seed"])
    key = entry.run_key(info, meta["weights"], 0, None, meta["seed"], text=False,
                        definition="fix-landing", tune=sp["tune"], positions=pos, documents=k)
    sizes = dict(meta["sizes"], edge_loss=meta["edge_loss"])
    remedies = [r for r in ff.RANKED if r in full["tuning"]]
    est = ff.tune_settings(meta["model_argument"], part, sizes, meta["seed"], meta["weights"], info,
                    key, remedies)
    chk = ff.landing_check(full["tuning"], est["base_logprob"], pos, k)
    out = {"what": "the fast path's landing-slot estimate of each ranked setting's mean "
                   "all-slot gain on the tuning part, against the gain the full path scored on "
                   "the same prompts (bench/fix_landing.py)",
           "model": meta["model"], "data": meta["data"], "documents": k,
           "tuning_questions": len(sp["tune"]), "remedies": remedies,
           "full_path_rule": meta["rule_name"], **chk,
           "date": time.strftime("%Y-%m-%d")}
    runs = {"full": full}
    if len(argv) == 2:
        fast = json.loads(Path(argv[1]).read_text())
        if fast["meta"].get("design") != "fix-fast" or fast["split"] != sp:
            raise SystemExit("give the fast path's fix.json of the same file, seed and sizes")
        runs["fast"] = fast
    out["test_part"] = {
        k: {"carried": r["selected"]["carried"], "setting": r["selected"]["setting"],
            "gain": r["selected"]["two_sided"],  # the mean all-slot gain, 95% two-sided t
            "one_sided_bound": r["selected"]["interval"]["low"],  # the test's 95% lower bound
            "verdict": r["selected"]["verdict"],
            "questions": len(sp["test"])} for k, r in runs.items()}
    dest = ROOT / "bench" / "results" / "fix-landing.json"
    dest.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
