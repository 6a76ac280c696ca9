"""The page of ``posbias fix`` (:func:`write_fix`): its figures and its HTML.  It draws and
writes what :func:`posbias_nb.experiments.remedy.fix.fix` measured and measures nothing
(``posbias_nb.provenance.code.NOT_COMPUTING``).
"""
from __future__ import annotations

import json
import os

import numpy as np

from ....measure import entry
from ....results import Result
from ...prompt import placement
from .config import REMEDIES
from .judge import arm_name, coinciding

__all__ = ["PROMPT_LABELS", "slot_figure", "write_fix"]


def _figure(obj):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from .... import plots

    meta, test = obj["meta"], obj["test"]
    x = meta["gold_slots"]
    names = [r for r in REMEDIES if r in test]
    cols = min(max(len(names), 1), 3)
    rows_ = -(-max(len(names), 1) // cols)
    fig, axes = plots.figure(nrows=rows_, ncols=cols, width=7.5, height=3.0 * rows_,
                             squeeze=False, sharey=True, layout="constrained")
    for ax in axes.reshape(-1)[max(len(names), 1):]:
        ax.set_visible(False)
    axes = axes.reshape(1, -1)
    for ax, r in zip(axes[0], names or [None]):
        b = test["base"]["logprob"] if r is None else test[r].get("base_logprob",
                                                                   test["base"]["logprob"])
        ax.errorbar(x, [v["estimate"] for v in b],
                    yerr=_yerr(b), marker="o", capsize=3, color=plots.COLORS[0],
                    label="as it is")
        if r is not None:
            v = test[r]["logprob"]
            ax.errorbar([xx + 0.15 for xx in x], [t["estimate"] for t in v], yerr=_yerr(v),
                        marker="s", capsize=3, color=plots.COLORS[1], label=r)
        ax.set_xlabel("gold document (slot)")
        ax.set_ylabel("log p of the gold answer")
        ax.set_xticks(x)
        ax.legend(fontsize=8)
    return fig


#: Short labels of the prompt remedies (figures, tables).
PROMPT_LABELS = {"long-context-reorder": "LangChain's reorder",
                 "lost-in-the-middle-ranker": "Haystack's ranker",
                 "query-aware": "query-aware (Liu et al.)",
                 "curve-order": "curve order (ours)", "prior-order": "prior order (ours)",
                 "attention-sort": "attention sorting (P. and L.)"}


def slot_figure(results: dict):
    """Chapter :ref:`ch-documents`, section "Where the documents go": for each model
    (``{label: fix result}``, one column), the gold answer's log p (top) and its accuracy,
    Liu et al.'s best_subspan_em (bottom), by the gold passage's original slot on the test
    part, the model as it is and under each prompt remedy judged there (its chosen setting),
    with 95% intervals (t over examples; Wilson)."""
    from .... import plots

    fig, axes = plots.figure(ncols=len(results), nrows=2, width=7.5, height=5.6,
                             squeeze=False, sharex=True, layout="constrained")
    for c, (label, r) in enumerate(results.items()):
        test, x = r["test"], [p for p in r.meta["gold_slots"]]
        names = [n for n in placement.PROMPT_REMEDIES if n in test]
        base = test[names[0]] if names else None
        for row, what in enumerate(("logprob", "accuracy")):
            ax = axes[row][c]
            series = ([("as it is", base[f"base_{what}"])] if base else []) + \
                [(PROMPT_LABELS[n], test[n][what]) for n in names]
            for i, (lab, ivs) in enumerate(_merge_identical(series)):
                off = (i - (len(series) - 1) / 2) * 0.08
                ax.errorbar([v + off for v in x], [v["estimate"] for v in ivs], yerr=_yerr(ivs),
                            marker="os^vDP<>"[i % 8], capsize=2, ms=4,
                            color=plots.COLORS[i % len(plots.COLORS)], label=lab,
                            ls="-" if i == 0 else "--", lw=1.2 if i == 0 else 0.9)
            ax.set_xticks(x)
            if row == 0:
                ax.set_title(label)
                ax.set_ylabel("log p of the gold answer (nats)")
            else:
                ax.set_xlabel("slot of the gold passage before the remedy")
                ax.set_ylabel("accuracy (best_subspan_em)")
                ax.set_ylim(-0.05, 1.05)
            if not names:
                ax.text(0.5, 0.5, "no prompt remedy gained on the tuning part",
                        transform=ax.transAxes, ha="center", va="center", fontsize=9)
    handles, labels = {}, []
    for ax in axes.reshape(-1):
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside lower center",
                   ncols=min(2, len(handles)), fontsize=9)
    return fig


def _merge_identical(series):
    """``[(label, values)]`` with the series whose values are identical drawn once, under
    their labels joined by " = " (LangChain's and Haystack's rules at an odd count give one
    prompt, hence one series).

    >>> _merge_identical([("a", [1.0]), ("b", [2.0]), ("c", [1.0])])
    [('a = c', [1.0]), ('b', [2.0])]
    """
    out = []
    for lab, vals in series:
        for m in out:
            if m[1] == vals:
                m[0] = f"{m[0]} = {lab}"
                break
        else:
            out.append([lab, vals])
    return [tuple(m) for m in out]


def _yerr(ivs):
    e = np.array([v["estimate"] for v in ivs])
    return np.array([e - [v["low"] for v in ivs], [v["high"] for v in ivs] - e])


def _page(obj, png) -> str:
    import html

    from ...base.pages import STYLE

    meta, t, c = obj["meta"], obj["test"], obj["tuning"]

    def f(v, d=3):
        return "—" if v is None or not np.isfinite(v) else f"{v:+.{d}f}"

    def ivs(iv, d=3):
        return "—" if iv is None else f"{f(iv['estimate'], d)} [{f(iv['low'], d)}, " \
                                      f"{f(iv['high'], d)}]"

    sel = obj.get("selected")
    carried = None if not sel else sel["carried"]
    rows, sents = [], []
    for r in [r for r in REMEDIES if r in c]:
        ch = c[r]
        grid = "; ".join(f"{json.dumps(s)}: all slots {f(a)}, middle {f(m)}, edges {f(e)}"
                         for s, a, m, e in zip(ch["grid"], ch.get("all_gain") or
                                               [float("nan")] * len(ch["grid"]),
                                               ch["middle_gain"], ch["edge_change"]))
        if r not in t:
            sents.append(f"<li><b>{r}</b>: not judged on the test part: "
                         f"{html.escape(str(ch['reason']))} (tuning grid: "
                         f"{html.escape(grid) or 'not scored'}).</li>")
            continue
        v = t[r]
        cost = v["cost"]
        nll = ivs(cost["nll_change"], 4) if cost["nll_change"] is not None else \
            html.escape(cost["nll_reason"])
        setting = {k: x for k, x in ch["setting"].items() if k != "slot_quality"}
        word = v["verdict"] if not sel else (f"carried: {sel['verdict']}" if r == carried
                                             else "exploratory")
        rows.append(f"<tr><td>{r}</td><td>{html.escape(json.dumps(setting))}</td>"
                    f"<td>{ivs(v.get('all_gain'))}</td>"
                    f"<td>{ivs(v['middle_gain'])}</td><td>{ivs(v['edge_change'])}</td>"
                    f"<td>{nll}</td>"
                    f"<td>{ivs(cost['latency_ratio'], 2).replace('+', '')}</td>"
                    f"<td>{ivs(cost['peak_mib_change'], 1)}</td><td>{word}</td></tr>")
        claim = "middle-slot gain" if meta.get("rule_name") == "middle" else \
            "change over all gold slots"
        est = v["middle_gain"] if meta.get("rule_name") == "middle" else v["all_gain"]
        if sel and r != carried:
            sents.append(f"<li><b>{html.escape(arm_name(r, meta.get('documents')))}</b> at "
                         f"{html.escape(json.dumps(setting))} (exploratory, no verdict): the "
                         f"mean {claim} of log p on the {t['n_examples']} test examples is "
                         f"{ivs(est)} (two-sided 95% t). Tuning grid: {html.escape(grid)}."
                         "</li>")
        elif sel:
            sents.append(f"<li><b>{html.escape(sel['arm'])}</b> at "
                         f"{html.escape(json.dumps(setting))}, carried from the tuning part "
                         f"(tuning gain {f(sel['tuning_gain'])}): the mean {claim} of log p on "
                         f"the {t['n_examples']} test examples is {f(sel['interval']['estimate'])}"
                         f", one-sided 95% lower bound {f(sel['interval']['low'])} (two-sided "
                         f"95% t {ivs(sel['two_sided'])}; sign-flip permutation p = "
                         f"{sel['p_perm']:.3g}): <b>{sel['verdict']}</b>. Tuning grid: "
                         f"{html.escape(grid)}.</li>")
        else:
            sents.append(f"<li><b>{r}</b> at {html.escape(json.dumps(setting))}: the mean "
                         f"{claim} of log p on the {t['n_examples']} test examples is "
                         f"{ivs(est)} (95% t; Holm level {v['level']}): "
                         f"<b>{v['verdict']}</b>. Tuning grid: {html.escape(grid)}.</li>")
    win = obj["winner"]
    call = ("models.remedy(model, \"remedy.json\", spans=..., relevance=..., start=...)</code> "
            "with each prompt's document spans and their relevance (measure.positional."
            "calibrated_attention), or <code>--remedy-file remedy.json</code> for posbias "
            "task, retrieval and report") if win == "attention-calibration" else \
        ("experiments.base.prompts.reorder_documents(\"remedy.json\", question, documents, model)"
         "</code> on a pipeline's own documents, or <code>--remedy-file remedy.json</code> for "
         "posbias task") if win in placement.PROMPT_REMEDIES else \
        "models.remedy(model, \"remedy.json\")</code>, or <code>--remedy-file remedy.json</code>"
    pw = (sel or {}).get("power")
    power = "" if not pw else (
        f"<p><b>What this test part can see.</b> From the tuning part's spread of "
        f"{html.escape(pw['from'])}'s per-question gain (SD {pw['sd_tuning']:.2f} nats over "
        f"{pw['n_tuning']} questions), the one-sided t test on the {pw['n_test']} test questions "
        f"detects a gain of {pw['detectable']:.2f} nats with 80% power; about "
        f"{pw['needed']['0.5']} test questions would detect 0.5 nats, "
        f"{pw['needed']['1.0']} would detect 1.0.</p>")
    if win:
        verdict = (f"<p><b>{win}</b> holds on the test part: <code>remedy.json</code> applies "
                   f"it (<code>{call}).</p>")
    elif sel:
        verdict = (f"<p><b>{html.escape(sel['arm'] or 'No remedy')}: "
                   f"{html.escape(sel['words'])}.</b> No remedy file is written.</p>")
    else:
        verdict = ("<p><b>No remedy holds on the test part</b> (an inconclusive verdict is "
                   "not evidence against a remedy: see each verdict below). No remedy file is "
                   "written.</p>")
    k_docs = meta.get("documents")
    if sel and k_docs and {"long-context-reorder", "lost-in-the-middle-ranker"} <= set(c):
        same = bool(coinciding(k_docs))
        verdict += (f"<p>LangChain's and Haystack's rules give the same prompt at an odd count of "
                    f"documents (the top one first in both) and different prompts at an even "
                    f"one; at this run's {k_docs} they "
                    + ("coincide and are one arm." if same else "differ.") + "</p>")
    verdict += power
    sp = obj["split"]
    hs_text = f"Yu et al.'s channel: {c['channel']['channel']}. " if "hidden-scaling" in c else ""
    cal_text = "" if "attention-calibration" not in c else (
        "Hsieh et al.'s calibration: the relevance of each prompt's documents measured on that "
        "prompt, each document replaced in turn by the dummy document "
        f"\"{html.escape(meta['dummy'])}\" (one extra pass per document, counted in its "
        "latency); the remedy file carries the temperature, and the caller gives each "
        "prompt's spans and relevance. ")
    top = (c.get("prompt") or {}).get("top1") or {}
    cal_text += "".join(
        f"The {html.escape(r)} ranker puts the gold passage first in {v['hits']} of "
        f"{v['n']} tuning prompts ({100 * v['share']['estimate']:.0f}%, 95% Wilson "
        f"{100 * v['share']['low']:.0f} to {100 * v['share']['high']:.0f}% over "
        f"{v['units']} questions). " for r, v in top.items())
    rc = c.get("attention-calibration", {}).get("recall")
    cal_text += "" if not rc else (
        f"Its calibrated attention ranks the gold passage first in {rc['hits']} of the "
        f"{rc['n']} tuning prompts ({100 * rc['share']['estimate']:.0f}%, 95% Wilson "
        f"{100 * rc['share']['low']:.0f} to {100 * rc['share']['high']:.0f}% over its "
        f"{rc['units']} questions; "
        f"chance {100 * rc['chance']:.0f}%): eq. 5 moves the attention towards the passages it "
        f"ranks high.")
    return f"""<!doctype html><html><head><meta charset="utf-8">
<title>posbias fix: {html.escape(meta['model'])}</title>
<style>{STYLE}</style>
</head><body>
<h1>posbias fix: {html.escape(meta['model'])}</h1>
{verdict}
<ul>{''.join(sents)}</ul>
<img alt="log p of the gold answer by gold slot, as it is and with each chosen remedy, on the
test part, with 95% t intervals over examples" src="{png}" style="max-width:100%">
<p>What to see: where the remedy's curve sits above the unpatched one at the middle slots
({', '.join(map(str, meta['middle_slots']))}) without falling at the edges.</p>
<h2>Cost</h2>
<table><tr><th>remedy</th><th>setting</th><th>all-slot change (nats)</th>
<th>middle gain</th><th>edge change</th>
<th>next-token loss change (nats)</th><th>latency ratio</th><th>peak memory change (MiB)</th>
<th>verdict</th></tr>{''.join(rows)}</table>
<h2>What was tuned on what</h2>
<p>{sp['examples']} examples of <code>{html.escape(meta['data'])}</code> (format
{meta['format']}), split by example with seed {sp['seed']}: {len(sp['tune'])} to tune (file
lines {', '.join(map(str, sp['tune_lines']))}), {len(sp['test'])} to test (file lines
{', '.join(map(str, sp['test_lines']))}). The test part was not read before the choice.
Rule: {html.escape(meta['rule'])}; edge loss {meta['edge_loss']} nats. Scoring:
{html.escape(meta['scoring'])}. {hs_text}{cal_text}</p>
<p>posbias_nb {html.escape(meta['version'])}, definition {meta['definition']}, model
fingerprint {html.escape(meta['fingerprint'])}.</p>
</body></html>
"""


def write_fix(result: Result, directory, model_obj=None) -> dict:
    """Write ``index.html``, ``fix.json`` and, when a remedy holds, ``remedy.json`` into
    ``directory``.  Returns the paths written."""
    from ....models import remedy_file
    from ...base.pages import check_out_dir, png

    d = check_out_dir(directory)
    obj = result.to_json()
    obj = {**{k: v for k, v in obj.items()}, "meta": obj["meta"]}
    png_url = png(_figure(obj))
    paths = {}
    jp = d / "fix.json"
    jp.write_text(json.dumps(obj, indent=1, allow_nan=True) + "\n")
    paths["json"] = str(jp)
    hp = d / "index.html"
    hp.write_text(_page(obj, png_url), encoding="utf-8")
    paths["html"] = str(hp)
    rp = d / "remedy.json"
    if obj["winner"]:
        r = obj["winner"]
        if model_obj is None:
            model_obj = entry.loaded(obj["meta"]["model_argument"], weights=obj["meta"]["weights"],
                                     seed=obj["meta"]["seed"])[0]
        ev = {"test": obj["test"][r], "split": obj["split"], "data_sha256":
              obj["meta"]["data_sha256"], "rule": obj["meta"]["rule"]}
        remedy_file.write(rp, r, obj["tuning"][r]["params"], model_obj,
                          obj["meta"]["model_argument"], evidence=ev)
        paths["remedy"] = str(rp)
    elif rp.exists():
        os.remove(rp)  # a stale file from an earlier run would claim what this run refutes
    return paths
