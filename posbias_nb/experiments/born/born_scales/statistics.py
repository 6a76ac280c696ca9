"""The born-scales study's statistics: each part's family of equivalence claims, decided with
Holm's correction and each claim's smallest detectable effect; the cells' scales and means;
the operator model against the measured cells; the logit scale measured against its formula."""
from __future__ import annotations

import math
import numpy as np
from .... import metrics, models, stats
from .config import PARTS, STATS, _checked
from .measurements import architecture, cell, cell_std, factorial_cells, prediction_cell, window_stats

__all__ = ["decisions", "detectable", "update_ratio", "summary", "cell_scales", "cells", "operator_stats", "moved_by_group", "logit_check", "operator_table", "operator_agreement"]


def part_claims(part: str) -> dict:
    d = _checked()
    margins = d["margins"]
    claims = {}

    def add(name, diff):
        for k in STATS:
            m = float(margins[k])
            claims[f"{name}:{k}"] = dict(x=diff(k), direction="within", band=(-m, m))

    if part == "matched":
        for c in d["ladder"]:
            for g in d["matched"]["g"]:
                lo = cell("matched", c, g=g, rung=0)["stats"]
                hi = cell("matched", c, g=g, rung=len(d["ladder"][c]) - 1)["stats"]
                add(f"{c}:g={g:g}", lambda k, lo=lo, hi=hi: hi[k] - lo[k])
    elif part == "factorial":
        for c in d["factorial"]["shapes"]:
            cells = factorial_cells(c)
            st = [cell("factorial", c, k=k)["stats"] for k in range(8)]
            for grp in models.init_scales.GROUPS:
                hi = [i for i, x in enumerate(cells) if x["levels"][grp]]
                lo = [i for i, x in enumerate(cells) if not x["levels"][grp]]
                add(f"{c}:{grp}", lambda k, hi=hi, lo=lo, st=st:
                    np.mean([st[i][k] for i in hi], 0) - np.mean([st[i][k] for i in lo], 0))
    elif part == "control":
        c = d["control"]["model"]
        a = cell("control", c, scaled=False)["stats"]
        b = cell("control", c, scaled=True)["stats"]
        add(c, lambda k: b[k] - a[k])
    elif part == "prediction":
        for c in d["prediction"]["shapes"]:
            full = prediction_cell(c)
            if full is None:
                raise ValueError(f"no full-width GPU entry of {c} at "
                                 f"{d['prediction']['length']} tokens is recorded")
            narrow = cell("prediction", c)["stats"]
            add(c, lambda k, full=full, narrow=narrow: full["stats"][k] - narrow[k])
    else:
        raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    return claims


def detectable(x, m: int, alpha: float, power: float) -> float:
    """The smallest mean difference the paired *t* test of the windows ``x`` detects with
    probability ``power``, two-sided at ``alpha / m`` (Bonferroni over the family's ``m``
    claims: conservative for Holm); NaN where the windows do not vary."""
    x = np.asarray(x, dtype=float)
    sd = float(np.std(x, ddof=1)) if x.size > 1 else float("nan")
    if not (math.isfinite(sd) and sd > 0):
        return float("nan")
    return stats.detectable_effect(sd, x.size, alpha=alpha / m, power=power,
                                   alternative="two-sided")


def decisions(part: str) -> dict:
    """The pre-declared family of ``part`` (module docstring), decided with Holm's correction
    (:func:`posbias_nb.stats.holm_family`), each claim with its smallest detectable effect
    (``detectable``)."""
    d = _checked()
    claims = part_claims(part)
    fam = stats.holm_family(claims, alpha=float(d["family_alpha"]))
    m = len(claims)
    for k, v in fam.items():
        v["detectable"] = detectable(claims[k]["x"], m, float(d["family_alpha"]),
                                     float(d["power"]))
        v["margin"] = float(claims[k]["band"][1])
    return fam


def update_ratio(std: dict, width: int, embed_multiplier: float = 1.0) -> float:
    r"""The first block's update over the residual stream at init, :math:`\rho =
    \sigma_{block}^2 d / (\sigma_{embed} m)` (:math:`m` the embedding's multiplier: Gemma's
    :math:`\sqrt d`): the attention output's norm :math:`\sigma_{block}^2 d\sqrt d` (value and
    output matrices on an input of norm :math:`\sqrt d`) over the embedding's
    :math:`\sigma_{embed} m \sqrt d`.  Derived for one token (no averaging over keys)."""
    b, e = float(std["block"]), float(std["embed"])
    return b * b * int(width) / (e * float(embed_multiplier))


def summary(part: str) -> dict:
    """The family of ``part`` in words: the verdict over all its claims
    (:func:`posbias_nb.stats.decide_all`), the counts by verdict, the claims that moved beyond
    their margin (``moved``: name -> estimate) and the decisions."""
    dec = decisions(part)
    words = {k: v["verdict"] for k, v in dec.items()}
    moved = {k: float(v["interval"][0]) for k, v in dec.items() if v["verdict"] == "fails"}
    held = sorted(k for k, w in words.items() if w == "holds")
    return dict(verdict=stats.decide_all(list(words.values())), words=words, moved=moved,
                held=held, decisions=dec)


def cell_scales(config: str, width: int, std: dict) -> dict:
    r"""A cell's scales at birth: the logit scale :math:`g` of its query/key std
    (:func:`posbias_nb.theory.logit_scale`, the configuration's head width and softmax scale,
    QK-norm as :func:`architecture` finds it; 0.02 where the group keeps transformers' std)
    and the update ratio :math:`\rho` (:func:`update_ratio`, the embedding's multiplier as
    :func:`architecture` measures it)."""
    from .... import theory

    cfg = models.at_width(config, int(width)).build_config()
    d_h = int(getattr(cfg, "head_dim", None) or int(width) // int(cfg.num_attention_heads))
    full = {"qk": 0.02, "block": 0.02, "embed": 0.02, **dict(std)}
    arch = architecture(config, width)
    qk_norm, mult = arch["qk_norm"], arch["embed_multiplier"]
    scale_ = float(getattr(cfg, "query_pre_attn_scalar", None) or d_h) ** -0.5
    g = theory.logit_scale(full["qk"], full["qk"], int(width), d_h, scale=scale_, qk_norm=qk_norm)
    return dict(g=float(g), rho=update_ratio(full, width, mult), d_h=d_h, qk_norm=qk_norm)


def cells() -> list[dict]:
    """Every cell of the design measured at the design's length: part, configuration, width,
    stds, its scales (:func:`cell_scales`) and each statistic's mean and 95% t interval over
    the windows."""
    d = _checked()
    out = []

    def add(part, c, **kw):
        w, std = cell_std(part, c, **kw)
        st = cell(part, c, **kw)["stats"]
        out.append(dict(part=part, config=c, width=w, std=std, kw=kw, **cell_scales(c, w, std),
                        **{k: stats.mean_interval(st[k]) for k in STATS}))

    for c in d["ladder"]:
        for g in d["matched"]["g"]:
            for r in range(len(d["ladder"][c])):
                add("matched", c, g=g, rung=r)
    for c in d["factorial"]["shapes"]:
        for k in range(8):
            add("factorial", c, k=k)
    for s in (False, True):
        add("control", d["control"]["model"], scaled=s)
    return out


def operator_stats(config: str, g: float, rung: int, draws: int | None = None,
                   seed: int = 0) -> dict:
    r"""The operator model's shape statistics for a matched cell: ``draws`` (the design's
    windows) random stacks of the configuration's depth at logit scale ``g``
    (:func:`posbias_nb.theory.random_rollout`, iid logits) with the :math:`\alpha` **fitted**
    on the measured cell's mean profile, each draw's last row taken as one window
    (:func:`window_stats`).  Returns the statistics per draw and the :math:`\alpha` used."""
    from .... import theory

    d = _checked()
    x = cell("matched", config, g=g, rung=rung)
    depth = x["layout"].depth
    rows = theory.random_rollout(int(d["length"]), depth, float(g), float(x["alpha"]),
                                 draws=int(draws or d["windows"]), seed=seed)
    return dict(alpha=float(x["alpha"]), stats=window_stats(rows, x["layout"]))


def moved_by_group(summary_: dict) -> dict:
    """From the factorial's :func:`summary`: per group, the statistics it moved beyond their
    margin (verdict "fails"), each with its estimate per shape, and those it left within
    (verdict "holds") in every shape."""
    out = {}
    dec = summary_["decisions"]
    for grp in models.init_scales.GROUPS:
        moved, kept = {}, []
        for k in STATS:
            keys = [n for n in dec if n.split(":")[1:] == [grp, k]]
            fails = {n.split(":")[0]: float(dec[n]["interval"][0]) for n in keys
                     if dec[n]["verdict"] == "fails"}
            if fails:
                moved[k] = fails
            elif keys and all(dec[n]["verdict"] == "holds" for n in keys):
                kept.append(k)
        out[grp] = dict(moved=moved, kept=kept)
    return out


def logit_check(rows, length: int, batch: int) -> list[dict]:
    """The logit scale measured against :func:`cell_scales`' :math:`g`: for each ``(config,
    width, qk_std)`` of ``rows``, the standard deviation over the keys 2..L of the last query's
    logits (:func:`posbias_nb.measure.init_logits`, RoPE on and off), per head averaged over
    the ``batch`` windows, at layer 1 (mean and 95% t interval over the heads) and at the last
    layer (mean)."""
    from .... import measure

    out = []
    for c, w, sq in rows:
        x = measure.init_logits(models.at_width(c, int(w), std={"qk": float(sq)}),
                                length=int(length), batch=int(batch))
        sc = cell_scales(c, w, {"qk": float(sq)})
        r = dict(config=c, width=int(w), std=float(sq), g=sc["g"], qk_norm=sc["qk_norm"])
        for k in ("on", "off"):
            per_head = x[k][..., 1:].std(-1).mean(0)  # (layers, heads)
            r[f"{k}_first"] = stats.mean_interval(per_head[0])
            r[f"{k}_last"] = float(per_head[-1].mean())
        out.append(r)
    return out


def operator_table() -> list[dict]:
    """Per configuration and matched :math:`g`, at the widest rung: the operator model's
    (:func:`operator_stats`) and the measured mean over the windows of the Spearman
    correlation with the row and of the scatter."""
    d = _checked()
    rows = []
    for c in d["ladder"]:
        r = len(d["ladder"][c]) - 1
        for g in d["matched"]["g"]:
            op = operator_stats(c, g, r)
            meas = cell("matched", c, g=g, rung=r)["stats"]
            rows.append(dict(config=c, g=g, alpha=op["alpha"],
                             **{f"{k}_pred": float(np.mean(op["stats"][k]))
                                for k in ("spearman", "scatter")},
                             **{f"{k}_meas": float(np.mean(meas[k]))
                                for k in ("spearman", "scatter")}))
    return rows


def operator_agreement(rows: list[dict], stat: str) -> dict:
    """How the operator model's ``stat`` agrees with the measured one over the cells of
    :func:`operator_table` (the cells are the units): the Spearman correlation of the two,
    with its delete-one jackknife interval on Fisher's scale
    (:func:`posbias_nb.stats.jackknife_interval`), and the geometric mean of model over
    measured, with the t interval of the mean log ratio."""
    x = np.array([[r[f"{stat}_meas"], r[f"{stat}_pred"]] for r in rows], dtype=float)
    rank = stats.jackknife_interval(lambda a: metrics.spearman(a[:, 0], a[:, 1]), x,
                                    transform="fisher")
    lr = stats.mean_interval(np.log(x[:, 1] / x[:, 0]))
    return dict(rank=rank, ratio=tuple(float(np.exp(v)) for v in lr))
