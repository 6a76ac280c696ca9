"""The report's page: ``index.html`` (self-contained) and ``report.json`` of a result (nothing
measured here)."""
from __future__ import annotations

import html
import json


from ...results import Result
from ..base.pages import STYLE, check_out_dir
from .drawing import draw_figures
from .words import RATIO_PARTS, fmt, options_as_code, pct


def code_spans(escaped: str) -> str:
    """Backtick spans of already escaped text as ``<code>`` (the summary's commands)."""
    import re

    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


def headline_items(data: dict) -> list[tuple[str, str, float]]:
    """``(key, label, value)`` of every headline number the page shows, ``key`` the dotted
    path of the value in ``report.json`` (what the page's ``data-key`` attributes carry)."""
    out = []
    bt = data["born_trained"]
    labels = {"ptv": "robust peak-to-valley", "valley": "valley position / L",
              "primacy": "primacy arm (first / middle)", "recency": "recency arm (last / middle)"}
    for who in ("trained", "born", "change"):
        if who not in bt:
            continue
        h = bt[who] if who == "change" else bt[who]["headline"]
        base = f"born_trained.{who}" + ("" if who == "change" else ".headline")
        for k, lab in labels.items():
            for part in ("estimate", "low", "high"):
                out.append((f"{base}.{k}.{part}", f"{who}: {lab} ({part})", h[k][part]))
    st = data["structural"]
    if st["available"]:
        for what in ("spearman", "w1"):
            for m in ("residual", "attention"):
                for part in ("estimate", "low", "high"):
                    out.append((f"structural.{what}.{m}.{part}", f"{what} {m} ({part})",
                                st[what][m][part]))
    return out


def number_span(key: str, v) -> str:
    return (f'<span class="num" data-key="{html.escape(key)}" data-value="{float(v)!r}">'
            f"{fmt(v)}</span>")


def interval_cells(key: str, iv: dict) -> str:
    return (f"<td>{number_span(key + '.estimate', iv['estimate'])}</td><td>["
            f"{number_span(key + '.low', iv['low'])}, {number_span(key + '.high', iv['high'])}]</td>")


def render_page(data: dict, meta: dict, figs: dict) -> str:
    e = html.escape
    bt, st, tk = data["born_trained"], data["structural"], data["task"]
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>posbias report: {e(meta['model'])}</title>", f"<style>{STYLE}</style>",
           "</head><body>", f"<h1>Position bias of <code>{e(meta['model_argument'])}</code></h1>",
           f'<p class="meta">{e(meta["family"])}, {meta["n_layers"]} layers, width '
           f'{meta["hidden_size"]}; {e(meta["weights"])} weights; L = {meta["length"]}; seed '
           f'{meta["seed"]}; {"quick" if meta["quick"] else "full"} sizes; fingerprint '
           f'{e(str(meta["fingerprint"]))}; posbias_nb {e(meta["versions"]["posbias_nb"])}</p>',
           *([f'<p class="meta" id="remedy">Patched by <code>{e(meta["remedy"]["file"])}</code>: '
              f'{e(meta["remedy"]["remedy"])} {e(json.dumps(meta["remedy"]["params"]))}</p>']
             if meta.get("remedy") else []),
           "<h2>Summary</h2>", f'<p id="summary">{code_spans(e(data["summary"]))}</p>',
           "<table><tr><th>claim</th><th>estimate</th><th>interval</th><th>level</th>"
           "<th>verdict</th></tr>"]
    for i, c in enumerate(data["claims"]):
        out.append(f"<tr><td>{e(c['claim'])}</td>{interval_cells(f'claims.{i}.interval', c['interval'])}"
                   f"<td>{pct(c['level'])}</td>"
                   f'<td class="v-{e(c["verdict"].replace(" ", "-"))}">{e(c["verdict"])}'
                   + (' <span class="meta">('
                      + code_spans(e(options_as_code(c["reason"]))) + ")</span>"
                      if c.get("reason") else "") + "</td></tr>")
    out.append("</table>")
    out.append("<h2>1. Born vs trained</h2>")
    out.append(f"<p>Influence of each input position on the last token's final hidden state "
               f"(Jacobian, {bt['probes']} Hutchinson probes), each of {bt['windows']} text "
               "windows normalized to sum 1; the band is the per-position t 95% interval over "
               "windows (not drawn where its lower end is not above 0: the axis is "
               "logarithmic); dashed: the theory row with H and alpha fitted.</p>")
    out.append(f'<img alt="influence profiles" src="{figs["profile"]}">')
    out.append("<table><tr><th>number</th><th>estimate</th><th>95% interval</th></tr>")
    for key, label, _ in headline_items(data):
        if key.endswith(".estimate") and key.startswith("born_trained"):
            base = key[: -len(".estimate")]
            node = data
            for part in base.split("."):
                node = node[part]
            out.append(f"<tr><td>{e(label.rsplit(' (', 1)[0])}</td>{interval_cells(base, node)}</tr>")
    out.append("</table>")
    for who in ("trained", "born", "change"):  # the ratios that could not be formed, and why
        h = bt.get(who, {}) if who == "change" else bt.get(who, {}).get("headline", {})
        for k, v in h.items():
            if v.get("reason"):
                out.append(f"<p>{who}, {e(RATIO_PARTS.get(k, (k,))[0])}: no interval: "
                           f"{e(v['reason'])}.</p>")
    for who in ("trained", "born"):
        if who in bt:
            th = bt[who]["theory"]
            if not th.get("available", True):
                out.append(f"<p>Theory fit ({who}): not made: {e(th['reason'])}.</p>")
                continue
            out.append(f"<p>Theory fit ({who}): H = {number_span(f'born_trained.{who}.theory.H', th['H'])}"
                       f", alpha = {number_span(f'born_trained.{who}.theory.alpha', th['alpha'])}, "
                       f"rms log error {number_span(f'born_trained.{who}.theory.rms_log', th['rms_log'])}"
                       "</p>")
    lay = bt.get("layout", {})
    if lay.get("available"):
        unv = lay.get("unverified_layers", [])
        note = (f"; {len(unv)} layers have a window or chunk of {lay['checked_at']} tokens or "
                "more, which the check cannot see at its length: those are as the config says"
                if unv else "")
        out.append(f"<p>Attention layout (checked by behaviour on the random-init twin, at "
                   f"{lay.get('checked_at')} tokens{note}): "
                   f"<code>{e(lay['layout'])}</code>.</p>")
    else:
        out.append(f"<p>Attention layout: not known: {e(lay.get('reason', 'not decided'))}.</p>")
    for who in ("trained", "born"):
        lt = bt.get(who, {}).get("layout_theory")
        if lt is None:
            continue
        if lt.get("available"):
            out.append(f"<p>Layout theory row ({who}): alpha = "
                       f"{number_span(f'born_trained.{who}.layout_theory.alpha', lt['alpha'])}, rms log "
                       f"error {number_span(f'born_trained.{who}.layout_theory.rms_log', lt['rms_log'])}"
                       f" over the {lt['reachable']} positions the layout reaches</p>")
        else:
            out.append(f"<p>Layout theory row ({who}): not made: {e(lt['reason'])}.</p>")
    if "paired_ids" in bt:
        out.append(f"<p>Change = trained / born per window (valley: difference); the twin read "
                   f"{'the same' if bt['paired_ids'] else 'different'} token ids.</p>")
    out.append("<h2>2. Structural prediction</h2>")
    if st["available"]:
        out.append(f"<p>Attention shares lambda_t measured by hooks on {st['batch']} windows of "
                   f"{st['length']} tokens; the rollout rows against the measured profile "
                   "(Spearman and W1 on positions scaled to [0, 1]; bootstrap 95% intervals over "
                   "windows).</p>")
        out.append(f'<img alt="lambda and rollout" src="{figs["structural"]}">')
        out.append("<table><tr><th>prediction</th><th>Spearman</th><th>95%</th><th>W1</th>"
                   "<th>95%</th></tr>")
        for m in ("residual", "attention"):
            out.append(f"<tr><td>{m} rollout</td>{interval_cells(f'structural.spearman.{m}', st['spearman'][m])}"
                       f"{interval_cells(f'structural.w1.{m}', st['w1'][m])}</tr>")
        out.append("</table>")
    else:
        out.append(f'<p id="structural-unavailable">Not available for this architecture: '
                   f"{e(st['reason'])}</p>")
    if tk.get("kind") == "file":
        out.append(f"<h2>3. The task: {e(tk['file'])}</h2>")
        if tk["available"]:
            refs = "; ".join(
                f"{name}: accuracy {fmt(r['accuracy'])} [{fmt(r['accuracy_low'])}, "
                f"{fmt(r['accuracy_high'])}], log p {fmt(r['logprob'])} "
                f"[{fmt(r['logprob_low'])}, {fmt(r['logprob_high'])}]"
                for name, r in tk["references"].items())
            out.append(f"<p>{tk['examples']} examples of {e(tk['file'])} ({e(tk['format'])}), "
                       f"{tk['documents']} {tk['unit']}s a prompt, the gold {tk['unit']} at "
                       f"{', '.join(map(str, tk['gold_documents']))} (1-based), prompts of up "
                       f"to {tk['prompt_tokens_max']} tokens (posbias task). Accuracy: greedy "
                       "generation, Liu et al.'s best_subspan_em, Wilson 95%; log-probability "
                       "of the gold answer: t 95% over examples."
                       + (f" Reference lines: {e(refs)}." if refs else "") + "</p>")
            out.append(f'<img alt="task accuracy by gold position" src="{figs["task"]}">')
        else:
            out.append(f"<p>Not run: {e(tk['reason'])}</p>")
        out.append("<h2>4. Span view</h2><p>Not drawn for a task file: it reads the pairs of "
                   "the synthetic key-value prompts.</p>")
        out.append('<p class="meta">Every number: report.json.</p></body></html>')
        return "\n".join(out)
    out.append("<h2>3. The task: key-value retrieval</h2>")
    if tk["available"]:
        fewer = tk.get("requested_positions", tk["positions"]) != tk["positions"]
        out.append(f"<p>{tk['examples']} examples x {tk['positions']} gold positions, prompts "
                   f"of about {tk['prompt_tokens_mean']:.0f} tokens ({tk['n_items']} pairs). "
                   "Accuracy: Wilson 95%; log-probability: t 95% over examples."
                   + (f" The settings ask for {tk['requested_positions']} gold positions; "
                      f"prompts of {tk['length']} tokens hold too few pairs for them, so "
                      f"{tk['positions']} are used." if fewer else "") + "</p>")
        out.append(f'<img alt="retrieval by gold position" src="{figs["task"]}">')
        if "heatmap" in figs:
            out.append(f'<img alt="depth x length heatmap" src="{figs["heatmap"]}">')
            out.append(f"<p>Each heatmap cell is the mean of {tk['heatmap']['examples']} "
                       "examples, shown without an interval: a sketch, not a measurement "
                       "the summary relies on.</p>")
        for sk in tk["heatmap"]["skipped"]:
            out.append(f"<p>Length {sk['length']} skipped: {e(sk['reason'])}</p>")
        if "spans" in figs:
            out.append("<h2>4. Span view</h2><p>Influence on the answer position summed over "
                       "each key-value pair (measure.span_profile), gold pair at the middle "
                       "slot (left) and the gold pair's share by its position (right).</p>")
            out.append(f'<img alt="span view" src="{figs["spans"]}">')
        else:
            out.append("<h2>4. Span view</h2><p>Left out under a remedy: it reads the "
                       "unpatched model's influence on the task's prompts.</p>")
    else:
        out.append(f"<p>Not run: {e(tk['reason'])}</p>")
        out.append("<h2>4. Span view</h2><p>Not run: it reads the influence over the pairs of "
                   "the task's prompts, and the task did not run (above).</p>")
    out.append('<p class="meta">Every number: report.json.</p></body></html>')
    return "\n".join(out)


def write_report(result: Result, directory) -> dict:
    """Write ``index.html`` (self-contained) and ``report.json`` of a :func:`report` result into
    ``directory`` (created if missing).  Returns ``{"html": path, "json": path}``."""
    d = check_out_dir(directory)
    obj = result.to_json()
    data = {k: v for k, v in obj.items() if k != "meta"}
    figs = draw_figures({**data, "meta": obj["meta"]})
    page = render_page(data, obj["meta"], figs)
    jp, hp = d / "report.json", d / "index.html"
    jp.write_text(json.dumps(obj, indent=1, allow_nan=True) + "\n")
    hp.write_text(page, encoding="utf-8")
    return {"html": str(hp), "json": str(jp)}
