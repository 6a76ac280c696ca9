"""The report's figures, drawn from a result (nothing measured here)."""
from __future__ import annotations

import base64

import numpy as np

from ..base.pages import png


def draw_figures(data: dict) -> dict:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from ... import plots

    bt = data["born_trained"]
    L = data["meta"]["length"]
    x = np.arange(1, L + 1)
    figs = {}
    fig, ax = plots.figure(width=7.5, height=3.6)
    for i, who in enumerate(("trained", "born")):
        if who not in bt:
            continue
        c = bt[who]["curve"]
        lab = "trained" if who == "trained" else "random-init twin"
        ax.plot(x, c["mean"], color=plots.COLORS[i], label=f"{lab} (mean of "
                f"{bt['windows']} windows)")
        lo = np.asarray(c["low"])
        ax.fill_between(x, np.where(lo > 0, lo, np.nan), c["high"], where=lo > 0,
                        color=plots.COLORS[i], alpha=0.2, lw=0)  # log axis: no band below 0
        th = bt[who]["theory"]
        if th.get("available", True):
            ax.plot(x, th["row"], color=plots.COLORS[i], ls="--", lw=1,
                    label=rf"$N^H$ row, fitted depth H = {th['H']} (the model has "
                          rf"{data['meta']['n_layers']} layers), $\alpha$ = {th['alpha']:.2f} "
                          f"({lab})")
        lt = bt[who].get("layout_theory", {})
        if lt.get("available"):
            r = np.asarray(lt["row"])
            ax.plot(x, np.where(r > 0, r, np.nan), color=plots.COLORS[i], ls=":", lw=1.4,
                    label=rf"layout theory row, $\alpha$ = {lt['alpha']:.2f} ({lab})")
    plots.profile_axes(ax, L, ylabel="influence (share)")
    ax.legend()
    figs["profile"] = png(fig)
    st = data["structural"]
    if st["available"]:
        fig, (a1, a2) = plots.figure(ncols=2, width=8.5, height=3.3)
        lam = st["lambda"]
        a1.plot(range(1, len(lam) + 1), lam, "o-")
        a1.set_xlabel("layer t")
        a1.set_ylabel("lambda_t (attention share)")
        a1.set_ylim(0, 1)
        xs = np.arange(1, st["length"] + 1)
        if st["length"] == L:
            c = bt["trained" if "trained" in bt else "born"]["curve"]
            a2.plot(xs, c["mean"], label="measured")
        a2.plot(xs, st["prediction"]["residual"], label="residual-aware rollout")
        a2.plot(xs, st["prediction"]["attention"], ls=":", label="attention-only rollout")
        plots.profile_axes(a2, st["length"], ylabel="influence (share)")
        r = np.asarray(st["prediction"]["residual"])
        if np.any(r > 0):  # the attention-only row may fall by dozens of decades: clip
            a2.set_ylim(float(r[r > 0].min()) / 100, 2.0 * max(float(r.max()), 1e-300))
        a2.legend()
        figs["structural"] = png(fig)
    tk = data["task"]
    if tk["available"]:
        fig, (a1, a2) = plots.figure(ncols=2, width=8.5, height=3.3)
        d = np.asarray(tk["depth"])
        acc = np.asarray(tk["accuracy"])
        a1.errorbar(d, acc, yerr=[acc - np.asarray(tk["accuracy_low"]),
                                  np.asarray(tk["accuracy_high"]) - acc], fmt="o-", capsize=3)
        a1.set_ylim(-0.02, 1.02)
        a1.set_xlabel("gold position (depth in the prompt)")
        a1.set_ylabel("accuracy (Wilson 95%)")
        lp = np.asarray(tk["logprob"])
        a2.errorbar(d, lp, yerr=[lp - np.asarray(tk["logprob_low"]),
                                 np.asarray(tk["logprob_high"]) - lp], fmt="o-", capsize=3)
        a2.set_xlabel("gold position (depth in the prompt)")
        a2.set_ylabel("answer log-probability (t 95%)")
        figs["task"] = png(fig)
        h = tk.get("heatmap", {"lengths": []})
        if h["lengths"]:
            fig, axes = plots.figure(ncols=2, width=8.5, height=3.3)
            for ax, what, cmap in ((axes[0], "accuracy", "RdYlGn"),
                                   (axes[1], "logprob", "viridis")):
                M = np.asarray(h[what], dtype=float).T  # depth x length
                kw = dict(vmin=0, vmax=1) if what == "accuracy" else {}
                im = ax.imshow(M, aspect="auto", origin="upper", cmap=cmap, **kw)
                ax.set_xticks(range(len(h["lengths"])), [str(n) for n in h["lengths"]])
                ax.set_yticks(range(len(d)), [f"{v:.0%}" for v in d])
                ax.set_xlabel("prompt length (tokens)")
                ax.set_ylabel("gold depth")
                ax.set_title(f"{what}: mean of n = {h['examples']} examples per cell, "
                             "no interval", fontsize=8)
                for (i, j), v in np.ndenumerate(M):
                    ax.text(j, i, f"n={h['examples']}", ha="center", va="center", fontsize=6)
                ax.grid(False)
                fig.colorbar(im, ax=ax)
            figs["heatmap"] = png(fig)
    if tk["available"] and "spans" in tk:
        sp = tk["spans"]
        fig, (a1, a2) = plots.figure(ncols=2, width=8.5, height=3.3)
        mid = len(sp["shares"]) // 2
        sh = np.asarray(sp["shares"][mid])
        cols = [plots.COLORS[1] if j == sp["gold_item"][mid] else plots.COLORS[0]
                for j in range(sh.size)]
        a1.bar(np.arange(1, sh.size + 1), sh, color=cols)
        a1.set_xlabel("key-value pair (gold in red)")
        a1.set_ylabel("share of influence")
        a2.plot(np.asarray(sp["gold_item"]) + 1, sp["gold_share"], "o-")
        a2.set_xlabel("position of the gold pair")
        a2.set_ylabel("gold pair's share")
        figs["spans"] = png(fig)
    return figs


def figures(result) -> dict:
    """The report's figures as PNG bytes, by name (``profile``, ``structural``, ``task``,
    ``heatmap``, ``spans``; those the result has): what the page embeds, for a notebook to show
    (chapter *Measure your own model*)."""
    obj = result.to_json()
    data = {k: v for k, v in obj.items() if k != "meta"}
    return {k: base64.b64decode(v.split(",", 1)[1])
            for k, v in draw_figures({**data, "meta": obj["meta"]}).items()}
