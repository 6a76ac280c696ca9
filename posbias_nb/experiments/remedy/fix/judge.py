"""The judgement of ``posbias fix``, on the test part (:func:`evaluate`): each chosen setting
against the model as it is, paired by example, the families and their statistics, and the
fifth design's carried remedy (:func:`select_one`).
"""
from __future__ import annotations

import numpy as np

from .... import cache
from .... import stats
from ...._validate import positive_int
from ...prompt import placement
from ...base import study
from .config import NETWORK_REMEDIES, REMEDIES, RULES, PROMPT_ONLY
from .cost import _cost, _timed, _timed_calibration
from .scoring import _cal_key, _calibration_scores, _check_context, _iv, _matrix, _records
from .parts import slot_groups

__all__ = ["evaluate", "coinciding", "arm_name", "select_one"]


def evaluate(model, test_part, chosen, sizes, seed=0, weights="pretrained", info=None,
             key=None, remedies=REMEDIES, rule: str = "all-slots") -> dict:
    """Steps 3 and 4 of the module docstring on the prepared test part, for the remedies of
    ``chosen`` (:func:`~posbias_nb.experiments.remedy.fix.tune.tune_settings`) that have a setting.  Cached, the timings included (they are
    measured once, with the scores they belong to).  Each remedy's claim is its ``rule``'s
    (:data:`RULES`): the mean all-slot change per example above 0, or the middle-slot gain.
    A prompt remedy is paired with the model as it is on its own entry's passes, its accuracy
    Liu et al.'s best_subspan_em of a greedy generation."""
    n_pos = len(test_part["positions"])
    sl = slot_groups(n_pos)
    names = [r for r in remedies if chosen[r]["chosen"] is not None]
    plain = {r: chosen[r]["params"] for r in names if r in PROMPT_ONLY}
    prompt = [r for r in names if r in placement.PROMPT_REMEDIES]
    network = [r for r in names if r in NETWORK_REMEDIES]
    cal_name = "attention-calibration"
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")

    def compute():
        m, tok, codec, rec = _records(model, weights, seed, test_part)
        _check_context(info, rec, "test")
        out = {"example": rec["example"], "slot": rec["slot"]}
        # the model as it is, with the hidden-scaling setting on the same recorded passes
        first = "hidden-scaling" if "hidden-scaling" in names else "ms-poe"
        kws = [plain[first]] if first in names else []
        lp, ok = study.score_remedy(m, rec["prompts"], rec["answers"], first, kws)
        out["base#logprob"], out["base#correct"] = lp[0], ok[0]
        if kws:
            out[f"{first}#logprob"], out[f"{first}#correct"] = lp[1], ok[1]
        mid_rows = [i for i, s in enumerate(rec["slot"]) if int(s) in set(sl["middle"])]
        timing = mid_rows[:int(sizes["timing_prompts"])]
        for name in plain:
            if f"{name}#logprob" not in out:
                lp, ok = study.score_remedy(m, rec["prompts"], rec["answers"], name,
                                                [plain[name]], base=False)
                out[f"{name}#logprob"], out[f"{name}#correct"] = lp[0], ok[0]
            b_nll, r_nll = _cost(m, tok, name, plain[name], sizes, seed)
            out[f"{name}#nll_base"], out[f"{name}#nll"] = b_nll, r_nll
            T = np.zeros((len(timing), 2)), np.zeros((len(timing), 2))
            for q, i in enumerate(timing):  # interleaved, the order alternating
                order = (None, name) if q % 2 == 0 else (name, None)
                for who in order:
                    dt, mem = _timed(m, rec["prompts"][i], rec["answers"][i], who,
                                     plain[name])
                    c = 0 if who is None else 1
                    T[0][q, c], T[1][q, c] = dt, mem
            out[f"{name}#seconds"], out[f"{name}#peak_mib"] = T
        return out

    theory = placement.theory_settings(remedies) if rule == "all-slots" else []
    if prompt or theory:
        pset = [(r, dict(chosen[r]["setting"])) for r in prompt]
        pset += [t for t in theory if t not in pset]
        pt = placement.on_test(model, weights, seed, test_part, test_part["format"], pset,
                               chosen["prompt"]["qualities"], sizes, key)
    if network or not (prompt or theory):
        res = dict(cache.cached("fix-test", dict(key, part="test", chosen=plain), compute))
    else:  # the prompt remedies alone: the model as it is from their own entry
        res = {"example": pt["example"], "slot": pt["slot"], "base#logprob": pt["base_logprob"],
               "base#correct": pt["base_correct"]}
    if prompt or theory:
        if not (np.array_equal(np.asarray(pt["example"]), np.asarray(res["example"])) and
                np.array_equal(np.asarray(pt["slot"]), np.asarray(res["slot"]))):
            raise ValueError("the prompt remedies' test records are not the other remedies'")
        for r in prompt:
            i = pt["settings"].index((r, dict(chosen[r]["setting"])))
            res.update({f"{r}#logprob": pt["logprob"][i], f"{r}#correct": pt["correct"][i],
                        f"{r}#base_logprob": pt["base_logprob"],
                        f"{r}#base_correct": pt["base_correct"],
                        f"{r}#gold_slot": pt["gold_slot"][i],
                        f"{r}#seconds": pt["seconds"][:, i, :]})

    def compute_cal():
        m, tok, codec, rec = _records(model, weights, seed, test_part)
        kw = chosen[cal_name]["params"]
        lp, ok, rel = _calibration_scores(m, codec, test_part, rec, [kw])
        mid_rows = [i for i, s in enumerate(rec["slot"]) if int(s) in set(sl["middle"])]
        timing = mid_rows[:int(sizes["timing_prompts"])]
        T = np.zeros((len(timing), 2)), np.zeros((len(timing), 2))
        for q, i in enumerate(timing):  # interleaved, the order alternating
            for who in ((None, cal_name) if q % 2 == 0 else (cal_name, None)):
                dt, mem = _timed_calibration(m, codec, test_part, rec, i, who, kw)
                c = 0 if who is None else 1
                T[0][q, c], T[1][q, c] = dt, mem
        return {"example": rec["example"], "slot": rec["slot"], "logprob": lp[0],
                "correct": ok[0], "relevance": rel, "seconds": T[0], "peak_mib": T[1]}

    if cal_name in names:
        cal = cache.cached("fix-test", _cal_key(key, "test-calibration",
                                                chosen=chosen[cal_name]["params"]), compute_cal)
        if not (np.array_equal(np.asarray(cal["example"]), np.asarray(res["example"])) and
                np.array_equal(np.asarray(cal["slot"]), np.asarray(res["slot"]))):
            raise ValueError("the calibration's test records are not the other remedies'")
        res.update({f"{cal_name}#logprob": cal["logprob"], f"{cal_name}#correct": cal["correct"],
                    f"{cal_name}#seconds": cal["seconds"], f"{cal_name}#peak_mib":
                    cal["peak_mib"]})
    n_ex = len(test_part["items"])
    rec = {"example": np.asarray(res["example"]), "slot": np.asarray(res["slot"])}
    base = _matrix(np.asarray(res["base#logprob"]), rec, n_ex, n_pos)
    base_ok = _matrix(np.asarray(res["base#correct"], dtype=float), rec, n_ex, n_pos)
    out = {"base": {"logprob": [_iv(stats.mean_interval(base[:, j])) for j in range(n_pos)],
                    "accuracy": [_iv(stats.proportion_interval(int(base_ok[:, j].sum()), n_ex))
                                 for j in range(n_pos)]},
           "claims": {}, "n_examples": n_ex}
    for name in names:
        lp = _matrix(np.asarray(res[f"{name}#logprob"]), rec, n_ex, n_pos)
        ok = _matrix(np.asarray(res[f"{name}#correct"], dtype=float), rec, n_ex, n_pos)
        is_prompt = name in placement.PROMPT_REMEDIES
        b_lp, b_ok = (base, base_ok) if not is_prompt else (
            _matrix(np.asarray(res[f"{name}#base_logprob"]), rec, n_ex, n_pos),
            _matrix(np.asarray(res[f"{name}#base_correct"], dtype=float), rec, n_ex, n_pos))
        d = lp - b_lp
        mid = d[:, sl["middle"]].mean(1)
        every = d.mean(1)
        sec = np.asarray(res[f"{name}#seconds"])
        mem = np.asarray(res[f"{name}#peak_mib"]) if not is_prompt else None
        ratio = np.log(sec[:, 1] / sec[:, 0])
        if name == cal_name or is_prompt:  # nothing on text without documents can move
            nll, nll_base = None, None
        else:
            nll_base = np.asarray(res[f"{name}#nll_base"])
            nll = np.asarray(res[f"{name}#nll"]) - nll_base
        out[name] = {
            "logprob": [_iv(stats.mean_interval(lp[:, j])) for j in range(n_pos)],
            "logprob_change": [_iv(stats.mean_interval(d[:, j])) for j in range(n_pos)],
            "accuracy": [_iv(stats.proportion_interval(int(ok[:, j].sum()), n_ex))
                         for j in range(n_pos)],
            "middle_gain_per_example": [float(v) for v in mid],
            "middle_gain": _iv(stats.mean_interval(mid)),
            "all_gain_per_example": [float(v) for v in every],
            "all_gain": _iv(stats.mean_interval(every)),
            "edge_change": _iv(stats.mean_interval(d[:, sl["edges"]].mean(1))),
            "accuracy_change": [_iv(stats.paired_proportion_interval(ok[:, j], b_ok[:, j]))
                                for j in range(n_pos)],
            **({} if not is_prompt else {
                "base_logprob": [_iv(stats.mean_interval(b_lp[:, j])) for j in range(n_pos)],
                "base_accuracy": [_iv(stats.proportion_interval(int(b_ok[:, j].sum()), n_ex))
                                  for j in range(n_pos)],
                "accuracy_kind": "best_subspan_em of a greedy generation (Liu et al.)",
                "gold_slot": [int(v) + 1 for v in np.asarray(res[f"{name}#gold_slot"])]}),
            "cost": {"nll_change": None if nll is None else _iv(stats.mean_interval(nll)),
                     "nll_base": None if nll is None else _iv(stats.mean_interval(nll_base)),
                     "nll_reason": None if nll is not None else
                     "not measured: a prompt remedy leaves the model as it is, so its "
                     "next-token loss on text cannot move" if is_prompt else
                     "not measured: offline text has no documents, which the calibration "
                     "alone reweights, so its next-token loss cannot move",
                     "passes": _passes(name, chosen[name]["setting"], test_part["documents"]),
                     "latency_ratio": _iv(tuple(np.exp(v) for v in
                                                stats.mean_interval(ratio))),
                     "seconds_base": float(np.median(sec[:, 0])),
                     "seconds": float(np.median(sec[:, 1])),
                     "peak_mib_change": _iv(stats.mean_interval(mem[:, 1] - mem[:, 0]))
                     if mem is not None and np.all(np.isfinite(mem)) else None,
                     "windows": 0 if nll is None else int(len(nll)), "prompts": int(len(sec)),
                     "latency_includes": "the relevance's extra passes (one per document) and "
                                         "the scoring pass" if name == cal_name else
                                         "the ranking, the placement and the scoring pass"
                                         if is_prompt else "the scoring pass"}}
        out["claims"][name] = dict(x=every if rule == "all-slots" else mid, threshold=0.0,
                                   direction="greater")
    fam = stats.holm_family(out.pop("claims"), alpha=0.05) if names else {}
    if theory:  # the theory's comparisons, a family of their own (placement.THEORY)
        change = []
        for r, st in theory:
            i = pt["settings"].index((r, st))
            d = _matrix(np.asarray(pt["logprob"][i]), rec, n_ex, n_pos) - \
                _matrix(np.asarray(pt["base_logprob"]), rec, n_ex, n_pos)
            change.append(d.mean(1))
        out["theory"] = {"ranker": placement.THEORY["ranker"],
                         "margin": placement.THEORY["margin"],
                         "all_gain": {f"{r}:{placement.json_key(st)}":
                                      _iv(stats.mean_interval(c)) for (r, st), c in
                                      zip(theory, change)},
                         "claims": placement.theory_family(change, theory)}
    for name in names:
        v = fam[name]
        out[name]["verdict"] = v["verdict"]
        out[name]["adjusted"] = _iv(v["adjusted"]) if "adjusted" in v else None
        out[name]["p_holm"] = float(v["p_holm"]) if "p_holm" in v else None
        out[name]["level"] = float(v["level"]) if "level" in v else None
    return out


def coinciding(k: int) -> list[tuple]:
    """The prompt remedies that give the same prompt at ``k`` documents (at one ranker): LangChain's
    ``LongContextReorder`` and Haystack's ``LostInTheMiddleRanker`` at an odd count (the top
    document first in both), none at an even one.

    >>> coinciding(5), coinciding(6)
    ([('long-context-reorder', 'lost-in-the-middle-ranker')], [])
    """
    k = positive_int("documents", k, minimum=1)
    from ....tasks import reorder

    same = reorder.long_context_reorder(k) == reorder.lost_in_the_middle(k)
    return [("long-context-reorder", "lost-in-the-middle-ranker")] if same else []


def arm_name(name: str, k: int | None) -> str:
    """A remedy's name, or both names where two remedies coincide at ``k`` documents."""
    for pair in coinciding(k) if k else []:
        if name in pair:
            return " = ".join(pair)
    return name


def select_one(tuning: dict, test: dict, k: int | None, alpha: float = 0.05,
               power: float = 0.8) -> dict:
    r"""The fifth design's rule (issue 53): select on the tuning part, confirm on the test part.

    Among the remedies with a chosen setting (:func:`pick` under ``all-slots``: a setting whose
    mean all-slot gain on the tuning part is above 0), the one with the largest tuning gain is
    **carried** to the test part and tested alone: its claim "the mean all-slot gain in log p
    per test question is above 0" is declared one-sided, Student *t* at ``alpha``
    (:func:`posbias_nb.stats.one_sided_bounds`), with a sign-flip permutation test beside it
    (:func:`posbias_nb.stats.paired_test`).  The other remedies' test-part gains are reported
    with their two-sided 95% *t* intervals as exploratory, with no verdict.  Two remedies that
    give the same prompt at ``k`` documents (:func:`coinciding`) are one arm, named for both.

    The power (from the tuning part's spread of the carried remedy's per-question gain; the
    remedy with the largest tuning gain when none gains): the smallest gain the test part
    detects with probability ``power`` (:func:`posbias_nb.stats.detectable_effect`, the
    test's own one-sided level), and the questions that would detect 0.5 and 1.0 nats.

    Returns ``{"carried", "arm", "verdict", "interval", "two_sided", "p_perm", "power",
    "exploratory", "reason"}``.
    """
    names = [r for r in REMEDIES if r in tuning and isinstance(tuning[r], dict)
             and "all_gain" in tuning[r]]
    seen, arms = set(), []
    for r in names:
        a = arm_name(r, k) if r in placement.PROMPT_REMEDIES else r
        if a in seen:
            continue
        if " = " in a:  # one arm: its settings must be the same to give the same prompt
            other = [x for x in a.split(" = ") if x != r][0]
            if other in tuning and tuning[other].get("setting") != tuning[r].get("setting"):
                a = r
        seen.add(a)
        arms.append((a, r))

    def tuned(r):
        j = tuning[r]["chosen"]
        return None if j is None else float(tuning[r]["all_gain"][j])

    live = [(a, r) for a, r in arms if tuned(r) is not None and r in test]
    best_any = max((x for x in arms if tuning[x[1]]["all_gain"]),
                   key=lambda x: max(tuning[x[1]]["all_gain"]), default=None)
    carried = max(live, key=lambda x: tuned(x[1]), default=None)
    n_test = int(test.get("n_examples", 0))
    pw = None
    src = carried or best_any
    if src is not None and n_test >= 2:
        r = src[1]
        j = tuning[r]["chosen"]
        if j is None:
            j = int(np.argmax(tuning[r]["all_gain"]))
        per = np.asarray(tuning[r]["all_gain_by_example"][j], dtype=float) \
            if tuning[r].get("all_gain_by_example") else np.array([])
        sd = float(per.std(ddof=1)) if per.size >= 2 else float("nan")
        if np.isfinite(sd) and sd > 0:
            pw = {"from": src[0], "sd_tuning": sd, "n_tuning": int(per.size),
                  "n_test": n_test, "alpha": alpha, "power": power, "sided": "one-sided",
                  "detectable": stats.detectable_effect(sd, n_test, alpha, power),
                  "needed": {str(e): stats.units_needed(e, sd, alpha, power)
                             for e in (0.5, 1.0)}}
    out = {"carried": None if carried is None else carried[1],
           "arm": None if carried is None else carried[0], "power": pw,
           "verdict": None, "interval": None, "two_sided": None, "p_perm": None,
           "exploratory": {}, "alpha": alpha,
           "reason": None if carried else "no remedy raises the mean log p over all gold "
                                          "slots on the tuning part: none is carried"}
    if carried is not None:
        x = np.asarray(test[carried[1]]["all_gain_per_example"], dtype=float)
        iv = stats.one_sided_bounds(x, 1 - alpha)
        out.update(interval=_iv(iv), two_sided=_iv(stats.mean_interval(x)),
                   verdict=stats.decide(iv),
                   p_perm=float(stats.paired_test(x, np.zeros_like(x), "greater").pvalue),
                   tuning_gain=tuned(carried[1]), setting=tuning[carried[1]]["setting"])
    for a, r in arms:
        if carried is not None and a == carried[0] or r not in test:
            continue
        out["exploratory"][a] = {"all_gain": test[r]["all_gain"],
                                 "tuning_gain": tuned(r), "setting": tuning[r]["setting"]}
    return out


def _passes(name, setting, k) -> int | None:
    """Forward passes per prompt of a remedy with ``k`` documents, the scoring pass included:
    one for a fixed rule, the curve, the prior or the template; one per document more for the
    question likelihood (short passes, each document alone); the rounds of attention sorting
    (the last round's order is scored); one per document more for the calibration."""
    if name == "attention-calibration":
        return 1 + int(k)
    if name == "attention-sort":
        return int(setting["rounds"]) + 1
    if name in placement.PROMPT_REMEDIES:
        return 1 + (int(k) if (setting or {}).get("ranker") == "question-likelihood" else 0)
    return 1
