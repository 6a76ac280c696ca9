r"""Where real models are born: the born profile as a function of the scales an initialiser sets.

Chapter :ref:`ch-born-scales`.  The seed's theory assumes uniform attention at initialization.
Without QK-norm a logit's std at init is :math:`g = \sigma_{qk}^2 d`
(:func:`posbias_nb.theory.logit_scale`), so whether the premise holds depends on the scale of
the query/key matrices and the width, not on the architecture alone.  transformers' initialiser
(one std, 0.02, for every matrix) ties three scales together: the query/key matrices (the
logits), the rest of each block (what a block adds to the residual stream) and the embedding
(the residual stream's own scale).  This study separates them, with one std per group of
matrices (:func:`posbias_nb.models.at_width` with ``std=``, the groups decided by behaviour in
:mod:`posbias_nb.models.init_scales`).

The design is one frozen object, :data:`DESIGN`, registered (study ``born-scales``) before any of
its data.  Four parts, each a family of equivalence claims under Holm's correction
(:func:`decisions`), on the same token windows at every cell (paired by window):

* ``matched``: every group at :math:`\sigma = \sqrt{g/d}` on each rung of the width ladder of
  *Born at scale* (Llama, Qwen and Mistral shapes), for each :math:`g` of the design: per shape,
  :math:`g` and statistic, "the widest rung minus the narrowest lies within the margin";
* ``factorial``: at the narrowest rung, each group low (0.02, transformers' std) or high (the
  std with which that group has, at this width, the scale 0.02 gives it at the published width:
  :math:`0.02\sqrt{D/d}`), all eight cells; per shape, group and statistic, "the group's main
  effect (its four high cells minus its four low cells) lies within the margin";
* ``control``: Gemma-3-4B (QK-norm) at its narrowest rung with its query/key matrices ×10
  against ×1: "the change lies within the margin";
* ``prediction``: the narrowest rung at the full-width scales (the factorial's all-high cell)
  at the GPU design's length and windows of *Born at scale*, against the full-width GPU
  entries: "GPU minus narrow lies within the margin".

Five shape statistics per window (:func:`window_stats`): the four of *Born at scale*
(:func:`posbias_nb.experiments.born.scale.window_stats`) and the **scatter** around the layout row, the
root mean square of :math:`\log_{10}` of the window's profile over the row, both normalised over
the reachable positions.  "holds": the statistic does not move beyond its margin; "fails": it
moves beyond it; otherwise inconclusive.  Each claim carries the smallest difference its windows
detect with 80% power (:func:`posbias_nb.stats.detectable_effect`, two-sided, at the family's
level over its number of claims: Bonferroni, conservative for Holm).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ... import cache, metrics, models, stats
from ...measure import cached, entry
from . import scale
from ..base.design import Design, check

__all__ = ["DESIGN", "STATS", "STAT_WORDS", "PARTS", "GROUP_WORDS", "matched_std",
           "full_std", "factorial_cells", "cell_std", "spec", "measure", "window_stats",
           "cell", "decisions", "detectable", "update_ratio", "gpu_windows", "prediction_cell",
           "summary", "verdict_rows", "formula", "recipes", "RECIPE_SHAPE", "cell_scales",
           "cells", "operator_stats", "moved_by_group", "moved_text", "architecture",
           "logit_check", "operator_table", "operator_agreement"]

DEFINITION = "born-scales-v1"  # bump when a definition below changes (the design has its own hash)

#: The five shape statistics of a window (:func:`window_stats`).
STATS = ("spearman", "alpha", "first_middle", "last_middle", "scatter")
#: Each statistic in words.
STAT_WORDS = {**scale.STAT_WORDS, "scatter": "the log10 scatter around the row"}
#: The study's four parts, each one Holm family.
PARTS = ("matched", "factorial", "control", "prediction")
#: The groups of matrices in words.
GROUP_WORDS = {"qk": "query/key matrices", "block": "rest of each block",
               "embed": "embedding"}

#: The study's design, fixed before its data (registry ``born-scales``).
DESIGN = Design("born-scales", dict(
    # the width ladder of Born at scale, for the three shapes without QK-norm
    ladder={"llama3.1-8b": [128, 256, 512], "qwen2.5-7b": [112, 224, 448],
            "mistral-7b": [128, 256, 512]},
    length=1024, windows=8, probes=2, seed=0,
    # matched logit scale: every group at sqrt(g / width) on every rung
    matched=dict(g=[0.05, 0.3, 1.6]),
    # at the narrowest rung, each group at 0.02 (low) or 0.02 * sqrt(published / width) (high)
    factorial=dict(shapes=["llama3.1-8b", "qwen2.5-7b"], low=0.02),
    # Gemma-3-4B (QK-norm) at its narrowest rung: query/key at base * factor against base
    control=dict(model="gemma3-4b", width=80, base=0.02, factor=10),
    # the factorial's all-high cell at the GPU design's length, on its windows
    prediction=dict(shapes=["llama3.1-8b", "qwen2.5-7b"], length=8192),
    margins={"spearman": 0.05, "alpha": 0.05, "first_middle": 0.30103,
             "last_middle": 0.30103, "scatter": 0.1},
    family_alpha=0.05, power=0.8,
))


def _checked():
    check(DESIGN)
    return DESIGN


def matched_std(g: float, width: int) -> float:
    r"""The std that gives a logit scale ``g`` at ``width``: :math:`\sqrt{g/d}`."""
    g, width = float(g), int(width)
    if not (math.isfinite(g) and g > 0) or width < 1:
        raise ValueError(f"need g > 0 and width >= 1, got g={g!r}, width={width!r}")
    return math.sqrt(g / width)


def full_std(config: str, width: int, low: float | None = None) -> float:
    r"""The std with which a group has, at ``width``, the scale transformers' std (``low``,
    the design's 0.02) gives it at the published width :math:`D`: :math:`0.02\sqrt{D/d}`."""
    low = float(_checked()["factorial"]["low"] if low is None else low)
    D = models.describe(config)["hidden_size"]
    return low * math.sqrt(D / int(width))


def factorial_cells(config: str) -> list[dict]:
    """The factorial's eight cells of ``config``: ``{"levels": {group: 0|1}, "std": {...}}``,
    in the order (qk, block, embed) = 000, 001, ..., 111."""
    d = _checked()
    w = int(d["ladder"][config][0])
    lo, hi = float(d["factorial"]["low"]), full_std(config, w)
    out = []
    for k in range(8):
        lev = {g: (k >> (2 - i)) & 1 for i, g in enumerate(models.init_scales.GROUPS)}
        out.append(dict(levels=lev, std={g: (hi if v else lo) for g, v in lev.items()}))
    return out


def cell_std(part: str, config: str, **kw) -> tuple[int, dict]:
    """``(width, std)`` of one cell: ``matched`` (``g``, ``rung``), ``factorial`` (``k``, the
    index of :func:`factorial_cells`), ``control`` (``scaled``: bool), ``prediction``."""
    d = _checked()
    if part == "matched":
        w = int(d["ladder"][config][int(kw["rung"])])
        s = matched_std(kw["g"], w)
        return w, {g: s for g in models.init_scales.GROUPS}
    if part == "factorial":
        return int(d["ladder"][config][0]), factorial_cells(config)[int(kw["k"])]["std"]
    if part == "control":
        c = d["control"]
        f = float(c["factor"]) if kw.get("scaled") else 1.0
        return int(c["width"]), {"qk": float(c["base"]) * f}
    if part == "prediction":
        return int(d["ladder"][config][0]), factorial_cells(config)[7]["std"]
    raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")


def spec(config: str, width: int, std: dict) -> models.ModelSpec:
    """The random-init model of one cell (:func:`posbias_nb.models.at_width`, ``std=``)."""
    return models.at_width(config, int(width), "hf", std=dict(std))


def gpu_windows() -> int:
    """The number of token windows of the GPU design at the prediction's length."""
    d = _checked()
    return int(scale.DESIGN["gpu"]["windows"][str(int(d["prediction"]["length"]))])


def measure(config: str, width: int, std: dict, *, long: bool = False) -> np.ndarray:
    """The cell's profiles, ``(windows, L)``: hidden-state influence of the last token at random
    init through the cache (namespace ``profile``).  ``long``: the prediction's length and the
    GPU design's windows (the same token windows: :func:`posbias_nb.experiments.born.scale.gpu_inputs`
    and :func:`posbias_nb.tasks.text.text_batch` draw the same bytes)."""
    d = _checked()
    L, B = (int(d["prediction"]["length"]), gpu_windows()) if long else \
        (int(d["length"]), int(d["windows"]))
    res = cached.profile(spec(config, width, std), "random", length=L, probes=int(d["probes"]),
                         batch=B, seed=int(d["seed"]), progress=False)
    return np.asarray(res["per_sequence"], dtype=np.float64)


def window_stats(P: np.ndarray, lay) -> dict:
    """The five shape statistics (:data:`STATS`) of each window of ``P``: those of
    :func:`posbias_nb.experiments.born.scale.window_stats`, and the scatter: the RMS over the
    reachable positions of log10 of the window's profile over the layout row (both normalised
    there)."""
    P = np.asarray(P, dtype=np.float64)
    out = dict(scale.window_stats(P, lay))
    r = scale.row(lay, P)
    m = r["mask"]
    W = P[:, m] / P[:, m].sum(1, keepdims=True)
    out["scatter"] = np.sqrt(np.mean(np.log10(W / r["row"][m]) ** 2, axis=1))
    return out


def cell_stats(config: str, width: int, std_items: tuple, long: bool) -> dict:
    P = measure(config, width, dict(std_items), long=long)
    lay = scale.layout(config)
    return dict(P=P, layout=lay, **scale.row(lay, P), stats=window_stats(P, lay))


_stats = functools.lru_cache(maxsize=256)(cell_stats)  # the figure and the claims read the same cells


def cell(part: str, config: str, **kw) -> dict:
    """One cell: profiles ``P``, the layout row at the mean's fitted α, and each statistic per
    window (``stats``); memoised (the arrays are not to be written to)."""
    w, std = cell_std(part, config, **kw)
    return _stats(config, w, tuple(sorted(std.items())), part == "prediction")


def prediction_cell(config: str) -> dict | None:
    """The full-width GPU entry of ``config`` at the prediction's length, with the same five
    statistics per window (:func:`window_stats`), or None where none is recorded."""
    L = int(_checked()["prediction"]["length"])
    x = scale.gpu_cell(config, L)
    if x is None:
        return None
    return dict(P=x["P"], layout=x["layout"], **scale.row(x["layout"], x["P"]),
                stats=window_stats(x["P"], x["layout"]))


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


#: Each part's claim in words, for the verdict rows.
_PART_CLAIMS = {
    "matched": "At a fixed logit scale g, the born shape does not depend on width",
    "factorial": "Each group of matrices leaves each shape statistic within its margin",
    "control": "With QK-norm (Gemma-3), query/key matrices ×10 change nothing",
    "prediction": "A narrow model at the full-width scales predicts the full-width shape",
}


def verdict_rows(summaries: dict, notes: dict | None = None) -> list[dict]:
    """The chapter's verdict rows (:func:`posbias_nb.notebook.verdict_table`), one per part of
    ``summaries`` (``{part: summary(part)}``): the part's claim, its family's claims counted by
    verdict (and ``notes[part]``, a sentence of what was measured, where given), and the
    family's verdict (:func:`summary`)."""
    notes = notes or {}
    from ... import notebook

    rows = []
    for part, s in summaries.items():
        if part not in _PART_CLAIMS:
            raise ValueError(f"unknown part {part!r}; expected one of {', '.join(PARTS)}")
        counts = notebook.decision_counts([dict(decision=w) for w in s["words"].values()])
        rows.append(dict(key=f"born_scales_{part}", claim=_PART_CLAIMS[part],
                         paper="(beyond both papers: the seed assumes uniform attention, "
                               "the limit g → 0)",
                         measured=f"{len(s['words'])} equivalence claims: {counts}"
                                  + (f"; {notes[part]}" if part in notes else ""),
                         verdict=s["verdict"]))
    return rows


# --------------------------------------------------------------------------------------------
# Where real recipes are born (posbias_nb/data/init-recipes.json, each value read from its code)

_NAMES = ("d", "d_h", "n_layers", "layer")


def formula(text, **names) -> float | None:
    """A recipe's formula (``"0.02/(2*n_layers)**0.5"``) evaluated on ``names`` (d, d_h,
    n_layers, layer): numbers, those names, + - * / ** and parentheses only; None for None.

    Raises
    ------
    ValueError
        Anything else in the text (naming it), or a name not given.
    """
    import ast
    import operator as op

    if text is None:
        return None
    ops = {ast.Add: op.add, ast.Sub: op.sub, ast.Mult: op.mul, ast.Div: op.truediv,
           ast.Pow: op.pow, ast.USub: op.neg, ast.UAdd: op.pos}

    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) \
                and not isinstance(n.value, bool):
            return float(n.value)
        if isinstance(n, ast.Name) and n.id in _NAMES:
            if n.id not in names:
                raise ValueError(f"formula {text!r} needs {n.id}")
            return float(names[n.id])
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            return ops[type(n.op)](ev(n.left), ev(n.right))
        if isinstance(n, ast.UnaryOp) and type(n.op) in ops:
            return ops[type(n.op)](ev(n.operand))
        raise ValueError(f"formula {text!r}: {ast.dump(n)[:40]} is not allowed")

    try:
        tree = ast.parse(str(text), mode="eval")
    except SyntaxError:
        raise ValueError(f"formula {text!r} is not an expression") from None
    return ev(tree)


def _recipe_file():
    import json
    from importlib import resources

    return json.loads((resources.files("posbias_nb") / "data" / "init-recipes.json")
                      .read_text(encoding="utf-8"))


#: The shape at which a recipe that applies to any model is evaluated: Llama-3.1-8B's.
RECIPE_SHAPE = "llama3.1-8b"


def recipes() -> list[dict]:
    r"""Each published initialiser of ``init-recipes.json`` at the width it is used at (its
    configuration, or :data:`RECIPE_SHAPE`'s for a codebase's recipe), layer 1: the logit scale
    :math:`g` (:func:`posbias_nb.theory.logit_scale` from its query, key and softmax scales and
    QK-norm), the first block's update ratio (:func:`update_ratio`, value times output
    projection over the embedding's effective std), the large-:math:`n` participation
    :math:`e^{-g^2}` and KL :math:`g^2/2`, and its source."""
    from ... import theory

    data = _recipe_file()
    confs = {c["name"]: c for c in data["configs"]}
    out = []
    for r in data["recipes"]:
        names = [n.strip() for n in str(r["applies_to"]).split(",")]
        shape = next((n for n in names if n in confs), RECIPE_SHAPE)
        c = confs[shape]
        env = dict(d=c["hidden_size"], d_h=c["head_dim"], n_layers=c["layers"], layer=1)
        sq, sk = formula(r["sigma_q"], **env), formula(r["sigma_k"], **env)
        sc = formula(r["softmax_scale"], **env)
        g = theory.logit_scale(sq, sk, env["d"], env["d_h"], scale=sc,
                               qk_norm=bool(r["qk_norm"])) if sq and sk else 0.0
        b, o = formula(r["sigma_block"], **env), formula(r["sigma_out"], **env)
        e = formula(r["sigma_embed_effective"], **env)
        out.append(dict(name=r["name"], kind=r["kind"], shape=shape, width=env["d"],
                        g=float(g), g_recipe=formula(r["g"], **env),
                        rho=b * o * env["d"] / e, qk_norm=bool(r["qk_norm"]),
                        participation=theory.participation_limit(g), kl=theory.kl_limit(g),
                        source=r["source"], citation=r["citation"], notes=r.get("notes", "")))
    return out


# --------------------------------------------------------------------------------------------
# What the chapter shows (no verdict is decided below)

def architecture(config: str, width: int) -> dict:
    """Whether a rung's logit scale is free of the query/key std (QK-norm) and its embedding's
    multiplier, decided by behaviour (:func:`posbias_nb.models.init_scales.attention_scales` on
    the random-init model), cached (namespace ``born-scales-arch``)."""
    s = models.at_width(config, int(width))
    params = {"model": s.name, "fingerprint": models.describe(s)["fingerprint"], "def": DEFINITION,
              **entry.library_versions()}

    def compute():
        m, _, _ = models.load(s, "random", seed=0)
        return {k: np.asarray(v) for k, v in models.init_scales.attention_scales(m).items()}

    out = cache.cached("born-scales-arch", params, compute)
    return {"qk_norm": bool(out["qk_norm"]), "embed_multiplier": float(out["embed_multiplier"])}


def cell_scales(config: str, width: int, std: dict) -> dict:
    r"""A cell's scales at birth: the logit scale :math:`g` of its query/key std
    (:func:`posbias_nb.theory.logit_scale`, the configuration's head width and softmax scale,
    QK-norm as :func:`architecture` finds it; 0.02 where the group keeps transformers' std)
    and the update ratio :math:`\rho` (:func:`update_ratio`, the embedding's multiplier as
    :func:`architecture` measures it)."""
    from ... import theory

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
    from ... import theory

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


def moved_text(by_group: dict) -> str:
    """:func:`moved_by_group` in words, one clause per group."""
    parts = []
    for grp, x in by_group.items():
        if x["moved"]:
            what = "; ".join(f"{STAT_WORDS[k]} ({', '.join(f'{c} {e:+.2f}' for c, e in v.items())})"
                             for k, v in x["moved"].items())
        else:
            what = "no statistic beyond its margin"
        parts.append(f"the {GROUP_WORDS[grp]}: {what}")
    return "; ".join(parts)


def logit_check(rows, length: int, batch: int) -> list[dict]:
    """The logit scale measured against :func:`cell_scales`' :math:`g`: for each ``(config,
    width, qk_std)`` of ``rows``, the standard deviation over the keys 2..L of the last query's
    logits (:func:`posbias_nb.measure.init_logits`, RoPE on and off), per head averaged over
    the ``batch`` windows, at layer 1 (mean and 95% t interval over the heads) and at the last
    layer (mean)."""
    from ... import measure

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
