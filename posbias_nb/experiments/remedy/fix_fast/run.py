"""``posbias fix --fast`` end to end: split, tune by the landing slot, carry, test, judge."""
from __future__ import annotations

import json
from pathlib import Path
import numpy as np
from ...._validate import positive_int
from ....measure import entry
from ....models.weights import file_sha256
from ....results import Result
from ....tasks import qa
from .. import fix as _fix
from ...base import study
from ...base import prompts
from .config import DEFINITION, RANKED
from .statistics import gold_slot_groups, judged_claims
from .measurements import judge_test_part, tune_settings

__all__ = ["fix"]


def fix(model, data, documents: int | None = None, examples: int | None = None,
        seed: int = prompts.FIX_DEFAULTS["seed"], weights: str = "pretrained", quick: bool = False,
        edge_loss: float = prompts.FIX_DEFAULTS["edge_loss"],
        test_share: float = prompts.FIX_DEFAULTS["test_share"], progress: bool = False,
        remedies=None, force: bool = False) -> Result:
    """:func:`posbias_nb.experiments.remedy.fix.fix` under this design (module docstring): the same
    split, sizes, grids, refusals and result, the ranked prompt remedies alone (``remedies``:
    among :data:`RANKED`, default all four), tuned by the landing slot, the carried remedy
    alone measured on the test part.  The result's ``meta["design"]`` is ``"fix-fast"``."""
    from .... import __version__

    sel = _fix.select_remedies(list(RANKED) if remedies is None else remedies)
    bad = [r for r in sel if r not in RANKED]
    if bad:
        raise ValueError(f"--fast searches the ranked prompt remedies ({', '.join(RANKED)}); "
                         f"{', '.join(bad)} is not one")
    sizes = dict(prompts.FIX_QUICK if quick else prompts.FIX_DEFAULTS)
    path = Path(data)
    E = sizes["examples"] if examples is None else positive_int("examples", examples,
                                                                minimum=4)
    if not np.isfinite(float(edge_loss)) or float(edge_loss) < 0:
        raise ValueError(f"edge_loss must be a non-negative number of nats, got {edge_loss!r}")
    sizes["edge_loss"] = float(edge_loss)
    fmt, exs = qa.read_task_file(path)
    if fmt == "liu-kv":
        raise ValueError(f"{path.name} is a key-value file; --fast places documents: give a "
                         "question-answering file")
    if documents is not None:
        k = positive_int("documents", documents, minimum=2)
    elif fmt == "plain":
        k = None
    else:
        k = prompts.QUICK_DOCUMENTS if quick else sizes["documents"]
    if k is not None:
        sizes["documents"] = k
    chosen = study.draw_examples(len(exs), E, int(seed))
    if len(chosen) < 4:
        raise ValueError(f"{path.name} holds {len(exs)} examples; fix needs 4 or more")
    tune_i, test_i = _fix.split(len(chosen), test_share, seed)
    if len(test_i) < _fix.MIN_TEST and not force:
        raise ValueError(
            f"{path.name}: {len(chosen)} examples give a test part of {len(test_i)}; fix needs "
            f"a test part of at least {_fix.MIN_TEST} (about "
            f"{int(np.ceil(_fix.MIN_TEST / float(test_share)))} examples): give more, or --force")
    tune_idx, test_idx = [int(chosen[i]) for i in tune_i], [int(chosen[i]) for i in test_i]
    n_slots = k if k is not None else min(len(exs[i].records) for i in chosen)
    pos = _fix.fix_positions(n_slots)
    info = entry.checked(model, weights, 2, 1, seed)
    key = entry.run_key(info, weights, 0, None, seed, text=False, definition=DEFINITION,
                        data=file_sha256(path), format=fmt, documents=k, positions=pos,
                        tune=tune_idx, test=test_idx, sizes=sizes)
    tune_part = prompts.prepare(path, k, pos, None, None, seed, fmt, select=tune_idx,
                              pool_exclude=test_idx)
    choice = tune_settings(model, tune_part, sizes, seed, weights, info, key, sel)
    live = [r for r in sel if choice[r]["chosen"] is not None]
    carried = max(live, key=lambda r: choice[r]["all_gain"][choice[r]["chosen"]], default=None)
    judged = {"n_examples": len(test_idx)}
    if carried is not None:
        test_part = prompts.prepare(path, k, pos, None, None, seed, fmt, select=test_idx,
                                  pool_exclude=tune_idx)
        setting = dict(choice[carried]["setting"])
        res = judge_test_part(model, weights, seed, test_part, carried, setting,
                         choice["prompt"]["qualities"], sizes, key)
        judged = judged_claims(res, carried, setting, test_part)
    picked = _fix.select_one(choice, judged, k if k is not None else len(pos))
    if picked["power"] is not None:
        picked["power"]["from"] += " (landing-slot estimate: a lower bound of the spread)"
    picked["words"] = _fix.verdict_words(picked["verdict"], picked["power"])
    winner = picked["carried"] if picked["verdict"] == "holds" else None
    table = {c: [] for c in ("remedy", "gold_slot", "setting", "logprob", "logprob_low",
                             "logprob_high", "change", "change_low", "change_high")}
    if carried is not None:
        for j, p in enumerate(pos):
            iv, dv = judged[carried]["logprob"][j], judged[carried]["logprob_change"][j]
            for c, v in zip(table, (carried, p + 1, json.dumps(choice[carried]["setting"]),
                                    iv["estimate"], iv["low"], iv["high"], dv["estimate"],
                                    dv["low"], dv["high"])):
                table[c].append(v)
    meta = {"command": "fix", "design": "fix-fast", "model": info["name"],
            "model_argument": str(model), "fingerprint": info["fingerprint"],
            "weights": weights, "data": path.name, "data_sha256": file_sha256(path),
            "format": fmt, "documents": k, "gold_slots": [p + 1 for p in pos],
            "middle_slots": [pos[j] + 1 for j in gold_slot_groups(len(pos))["middle"]],
            "seed": int(seed), "quick": bool(quick), "fast": True, "sizes": sizes,
            "edge_loss": float(edge_loss), "test_share": float(test_share),
            "dummy": f"{qa.DUMMY_DOCUMENT.title}: {qa.DUMMY_DOCUMENT.text}",
            "definition": DEFINITION, "level": 0.95, "version": __version__, "remedies": list(sel),
            "scoring": "test part: teacher-forced log p of the file's first gold answer and "
                       "best_subspan_em of a greedy generation (Liu et al.), the carried "
                       "remedy's prompt against the model as it is; tuning part: no rewritten "
                       "prompt scored (landing-slot estimates)",
            "rule_name": "select-one", "power": picked["power"],
            "rule": "the fast path (design fix-fast): on the tuning part each setting's log p "
                    "is estimated by the model as it is with the gold passage at the slot the "
                    "setting puts it in; per remedy the setting with the largest mean estimated "
                    "gain over all gold slots; the remedy with the largest such gain (above 0) "
                    "is carried to the test part alone and scored there: its mean all-slot "
                    "gain per example greater than 0, one-sided Student t at 0.05 over "
                    "examples, a sign-flip permutation test beside it; no other remedy is "
                    "measured on the test part",
            **entry.library_versions()}
    data_out = dict(table, split={"seed": int(seed), "examples": len(chosen),
                                  "tune_lines": [exs[i].line for i in tune_idx],
                                  "test_lines": [exs[i].line for i in test_idx],
                                  "tune": tune_idx, "test": test_idx},
                    tuning=choice, test=judged, winner=winner, selected=picked)
    return Result(data_out, meta=meta, columns=tuple(table))
