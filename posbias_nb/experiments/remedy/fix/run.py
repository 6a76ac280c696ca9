"""``posbias fix``'s run (:func:`fix`): the split, the choice, the judgement and the cost in
order, and the remedy file written where a remedy holds.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .... import stats
from ...._validate import positive_int
from ....measure import entry
from ....models.weights import file_sha256
from ....results import Result
from ....tasks import qa
from ...prompt import placement
from ...base import study
from ...base import prompts
from .config import DEFAULTS, DEFAULT_RULE, GRID, MIN_TEST, NETWORK_REMEDIES, QUICK, QUICK_DOCUMENTS, REMEDIES, RULES, select_remedies, DEFINITION, PROMPT_ONLY
from .judge import evaluate, select_one
from .scoring import _key
from .parts import fix_positions, split, slot_groups
from .tune import tune_settings
from .words import verdict_words

__all__ = ["fix"]


def fix(model, data, documents: int | None = None, examples: int | None = None,
        seed: int = DEFAULTS["seed"], weights: str = "pretrained", quick: bool = False,
        edge_loss: float = DEFAULTS["edge_loss"], test_share: float = DEFAULTS["test_share"],
        progress: bool = False, remedies=None, rule: str = DEFAULT_RULE,
        force: bool = False) -> Result:
    """Choose and judge a remedy for ``model`` on the task file ``data`` (module docstring).

    Parameters
    ----------
    model : str or path
        A zoo name, a local model directory or a hub id (from the local hub cache).
    data : path
        A task file (:data:`posbias_nb.tasks.qa.FORMATS`).
    documents : int or None
        Documents per prompt of a QA file (default: :data:`DEFAULTS`, or
        :data:`QUICK_DOCUMENTS`, an even count, with ``quick``); a plain file keeps its own
        count; a key-value file uses all its records.
    examples : int or None
        How many examples (drawn by ``seed``; default as ``documents``), split into the two
        parts.
    edge_loss : float
        The largest mean loss of log p (nats) at the edge slots a chosen setting may cost on
        the tuning part.
    quick : bool
        :data:`QUICK` sizes (fewer, shorter prompts; a smaller channel search and cost).
    remedies : sequence of str or None
        The remedies searched and judged (default all of :data:`REMEDIES`); Holm's family is
        the remedies judged.  The calibration costs one extra pass per document and prompt,
        so leaving it out is the quick way to try the other two.  Hidden scaling and Ms-PoE
        are measured together, in one entry whose key is the first design's (so its recorded
        measurements serve): naming one of them measures both, and judges and returns only the
        one named.  The prompt remedies (:mod:`posbias_nb.experiments.prompt.placement`) need a
        question-answering file.
    rule : str
        :data:`RULES`: ``select-one`` (the default, :func:`select_one`) ranks the remedies on
        the tuning part and tests the best alone on the test part, one-sided, with the power
        of that test; ``all-slots`` (the third design's) judges every remedy with a tuning
        gain, Holm across them; ``middle`` is the first design's rule (middle-slot gain, the
        edge loss), for the remedies inside the network only.
    force : bool
        Run even when the test part has fewer than :data:`MIN_TEST` examples (its t test
        could not detect a gain of one standard deviation of the per-question gain).

    Returns
    -------
    Result
        ``split``, ``tuning`` (:func:`tune_settings`), ``test`` (:func:`evaluate`), ``winner`` (the
        remedy file's remedy, or None) and ``meta``; the CSV columns are one row per remedy and
        gold slot.

    Raises
    ------
    ValueError
        Every refusal of :func:`posbias_nb.experiments.base.prompts.prepare`, a split that leaves fewer
        than 2 examples in a part, a test part below :data:`MIN_TEST` without ``force``,
        prompts beyond the model's context, a negative edge loss, an unknown or repeated
        remedy.
    """
    from .... import __version__

    sel = select_remedies(remedies)
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    # the fifth design selects among what the third design's rule measures and chooses
    measured = "all-slots" if rule == "select-one" else rule
    if rule == "middle" and set(sel) - set(NETWORK_REMEDIES):
        raise ValueError("the middle rule is the first design's, for the remedies inside the "
                         f"network ({', '.join(NETWORK_REMEDIES)}); the prompt remedies are "
                         "judged over all gold slots")
    sizes = dict(QUICK if quick else DEFAULTS)
    path = Path(data)
    E = sizes["examples"] if examples is None else positive_int("examples", examples,
                                                                minimum=4)
    if not np.isfinite(float(edge_loss)) or float(edge_loss) < 0:
        raise ValueError(f"edge_loss must be a non-negative number of nats, got {edge_loss!r}")
    fmt, exs = qa.read_task_file(path)
    if fmt == "liu-kv" and documents is not None:
        raise ValueError("--documents is for question-answering files; a key-value file uses "
                         "all its records")
    if fmt == "liu-kv" and set(sel) & set(placement.PROMPT_REMEDIES):
        raise ValueError(f"{path.name} is a key-value file; the prompt remedies "
                         f"({', '.join(r for r in sel if r in placement.PROMPT_REMEDIES)}) "
                         "place documents: name the remedies inside the network with "
                         "--remedies, or give a question-answering file")
    if fmt == "liu-kv":
        k = None
    elif documents is not None:
        k = positive_int("documents", documents, minimum=2)
    elif fmt == "plain":  # a user's own file keeps its count (prepare: the fewest a question)
        k = None
    else:
        k = QUICK_DOCUMENTS if quick else sizes["documents"]
    if k is not None:
        sizes["documents"] = k
    chosen = study.draw_examples(len(exs), E, int(seed))
    if len(chosen) < 4:
        raise ValueError(f"{path.name} holds {len(exs)} examples; fix needs 4 or more")
    tune_i, test_i = split(len(chosen), test_share, seed)
    if len(test_i) < MIN_TEST and not force:
        d1 = stats.detectable_effect(1.0, len(test_i))
        raise ValueError(
            f"{path.name}: {len(chosen)} examples give a test part of {len(test_i)}, whose "
            f"t test detects (80% power) only gains of {d1:.1f} times the spread of the "
            f"per-question gain; fix needs a test part of at least {MIN_TEST} (about "
            f"{int(np.ceil(MIN_TEST / float(test_share)))} examples): give more, or --force")
    tune_idx, test_idx = [int(chosen[i]) for i in tune_i], [int(chosen[i]) for i in test_i]
    n_slots = k if k is not None else min(len(exs[i].records) for i in chosen)
    pos = fix_positions(n_slots)
    info = entry.checked(model, weights, 2, 1, seed)
    key = _key(info, weights, seed, data=file_sha256(path), format=fmt, documents=k,
               positions=pos, tune=tune_idx, test=test_idx, sizes=sizes,
               grid={r: [dict(s) for s in GRID[r]] for r in PROMPT_ONLY},
               edge_loss=float(edge_loss))
    import sys

    from tqdm import tqdm

    bar = tqdm(total=2, disable=not progress, file=sys.stderr, leave=False, unit="stage")
    try:
        # the tuning part alone is read here; the test part's prompts are built after the choice
        bar.set_description("fix: tuning part")
        tune_part = prompts.prepare(path, k, pos, None, None, seed, fmt, select=tune_idx,
                                  pool_exclude=test_idx)
        choice = tune_settings(model, tune_part, sizes, edge_loss, seed, weights, info, key, sel,
                        measured)
        bar.update()
        bar.set_description("fix: test part")
        test_part = prompts.prepare(path, k, pos, None, None, seed, fmt, select=test_idx,
                                  pool_exclude=tune_idx)
        judged = evaluate(model, test_part, choice, sizes, seed, weights, info, key, sel,
                          measured)
        bar.update()
    finally:
        bar.close()
    picked = None
    if rule == "select-one":
        picked = select_one(choice, judged, k if k is not None else len(pos))
        picked["words"] = verdict_words(picked["verdict"], picked["power"])
        winner = picked["carried"] if picked["verdict"] == "holds" else None
    else:
        holds = [r for r in REMEDIES if r in judged and judged[r]["verdict"] == "holds"]
        gain = "all_gain" if measured == "all-slots" else "middle_gain"
        winner = max(holds, key=lambda r: judged[r][gain]["estimate"]) if holds else None
    table = {c: [] for c in ("remedy", "gold_slot", "setting", "logprob", "logprob_low",
                             "logprob_high", "change", "change_low", "change_high")}
    for r in REMEDIES:
        if r not in judged:
            continue
        for j, p in enumerate(pos):
            iv, dv = judged[r]["logprob"][j], judged[r]["logprob_change"][j]
            for c, v in zip(table, (r, p + 1, json.dumps(choice[r]["setting"]), iv["estimate"],
                                    iv["low"], iv["high"], dv["estimate"], dv["low"],
                                    dv["high"])):
                table[c].append(v)
    meta = {"command": "fix", "model": info["name"], "model_argument": str(model),
            "fingerprint": info["fingerprint"], "weights": weights, "data": path.name,
            "data_sha256": file_sha256(path), "format": fmt, "documents": k,
            "gold_slots": [p + 1 for p in pos], "middle_slots":
            [pos[j] + 1 for j in slot_groups(len(pos))["middle"]],
            "seed": int(seed), "quick": bool(quick), "sizes": sizes,
            "edge_loss": float(edge_loss), "test_share": float(test_share),
            "dummy": f"{qa.DUMMY_DOCUMENT.title}: {qa.DUMMY_DOCUMENT.text}" if fmt != "liu-kv"
            else '"{}": "{}"'.format(*qa.DUMMY_RECORD),
            "definition": DEFINITION, "level": 0.95, "version": __version__, "remedies": list(sel),
            "scoring": "teacher-forced log p of the file's first gold answer; accuracy: its "
                       "greedy match token by token (not best_subspan_em of a free generation)",
            "rule_name": rule,
            "power": None if picked is None else picked["power"],
            "rule": "tuning: per remedy, the setting with the largest mean change of log p "
                    "over all gold slots; the remedy with the largest such gain (above 0) is "
                    "carried to the test part alone: its mean all-slot gain per example "
                    "greater than 0, one-sided Student t at 0.05 over examples, a sign-flip "
                    "permutation test beside it; the others' test-part changes are "
                    "exploratory" if rule == "select-one" else
                    "tuning: the largest mean middle-slot gain among the settings whose mean "
                    "edge-slot change is at least -edge_loss; test: the mean middle-slot gain "
                    "per example greater than 0, Student t over examples, Holm across the "
                    "remedies" if rule == "middle" else
                    "tuning: per remedy, the largest mean change of log p over all gold slots, "
                    "judged only where it is above 0; test: the mean all-slot change per "
                    "example greater than 0, Student t over examples, Holm across the "
                    "remedies judged",
            **entry.library_versions()}
    data_out = dict(table, split={"seed": int(seed), "examples": len(chosen),
                                  "tune_lines": [exs[i].line for i in tune_idx],
                                  "test_lines": [exs[i].line for i in test_idx],
                                  "tune": tune_idx, "test": test_idx},
                    tuning=choice, test=judged, winner=winner, selected=picked)
    return Result(data_out, meta=meta, columns=tuple(table))
