"""``posbias task``'s statistics: a run's table, accuracy with its Wilson interval and mean log p
with its t interval per gold position (the example the unit), the reference lines, the
outputs classified and counted, and the Result that carries them."""
from __future__ import annotations

import numpy as np
from ....measure import entry
from ....results import Result
from ....tasks import qa
from .config import CSV_COLUMNS, OUTCOMES

__all__ = []


def _result(res, P, info, weights, seed, max_new_tokens, model) -> Result:
    from .... import __version__, stats

    ex, slot = np.asarray(res["example"]), np.asarray(res["slot"])
    outs = [str(o) for o in res["output"]]
    outcome = [qa.classify_output(o, P["items"][e]["answers"], P["items"][e]["wrong_answers"])
               for o, e in zip(outs, ex)]
    correct = np.array([o == "answer" for o in outcome], dtype=float)
    lp = np.asarray(res["logprob"], dtype=float)
    pos = P["positions"]
    docs = slot >= 0
    acc = stats.summarize(slot[docs], ex[docs], correct[docs], len(pos), kind="proportion")
    lps = stats.summarize(slot[docs], ex[docs], lp[docs], len(pos))
    table = {c: [] for c in CSV_COLUMNS}

    def row(setting, gold, n, a, l):
        for c, v in zip(CSV_COLUMNS, (setting, gold, n, *a, *l)):
            table[c].append(v)

    for j, p in enumerate(pos):
        row("documents", p + 1, int(np.sum(slot == j)),
            (acc["mean"][j], acc["low"][j], acc["high"][j]),
            (lps["mean"][j], lps["low"][j], lps["high"][j]))
    for name, code in (("closed-book", -1), ("oracle", -2)):
        sel = slot == code
        if sel.any():
            k = int(correct[sel].sum())
            a = stats.proportion_interval(k, int(sel.sum()))
            l = stats.mean_interval(lp[sel]) if sel.sum() >= 2 else (lp[sel][0],) * 3
            row(name, "", int(sel.sum()), a, l)
    counts = {o: [int(sum(1 for s, x in zip(slot, outcome) if s == j and x == o))
                  for j in range(len(pos))] for o in OUTCOMES}
    records = [{"example_line": P["chosen"][int(e)],
                "setting": "documents" if s >= 0 else ("closed-book" if s == -1 else "oracle"),
                "gold_document": int(pos[s]) + 1 if s >= 0 else None,
                "output": o, "outcome": oc, "logprob": float(v)}
               for e, s, o, oc, v in zip(ex, slot, outs, outcome, lp)]
    meta = {"command": "task", "model": info["name"], "model_argument": str(model),
            "weights": weights, "format": P["format"], "examples": len(P["chosen"]),
            "examples_in_file": P["n_file"], "example_lines": P["chosen"],
            "documents" if P["format"] != "liu-kv" else "keys": P["documents"],
            "gold_documents": [p + 1 for p in pos], "seed": seed,
            "max_new_tokens": max_new_tokens, "level": 0.95,
            "prompt_tokens_max": int(np.max(res["prompt_len"])),
            "interval": "accuracy: Wilson over examples (one prompt per example and position); "
                        "log p: Student t over examples",
            "scoring": "greedy generation to the first newline or the token budget, Liu et "
                       "al.'s best_subspan_em on the first line; teacher-forced log p of the "
                       "best gold answer after 'Answer:'",
            "distractors": "the file's own passages, then BM25 (bm25s) over the file's other "
                           "gold passages, none holding a gold answer as whole words",
            "version": __version__, **entry.library_versions()}
    data = dict(table, outcomes=counts, examples=records)
    return Result(data, meta=meta, columns=CSV_COLUMNS)
