"""The remedies lab in words: the remedies' names and the chapter's verdict rows."""
from __future__ import annotations

import math
from .statistics import decide, effect

__all__ = ["verdict_rows"]


#: The remedies' names in the verdict rows, in the order of the design's ``remedies``.
REMEDY_NAMES = {"weighted": "middle-weighted loss", "oversample": "middle oversampling",
                "curriculum": "middle-first curriculum"}


def verdict_rows(m: dict) -> list:
    """The chapter's verdict rows (:func:`posbias_nb.notebook.verdict_table`), every word by
    :func:`decide`.  ``m`` holds the chapter's measurements: ``g_ratio`` and ``pred_ratio``
    (section 1), ``D`` (:func:`gradient_by_depth`) and ``d_trend``, ``auc_me`` and ``layers``,
    ``dgap`` and ``dmm`` (section 2), ``close``, ``gain`` and ``cost`` per remedy with their
    ``level`` (section 3), ``d_pred`` and ``d_init`` (section 4); intervals are
    ``(estimate, low, high)``.  Chapter :ref:`ch-remedies`.

    Raises
    ------
    ValueError
        A measurement missing from ``m`` (named).
    """
    from ....notebook import interval as iv

    need = ("g_ratio", "pred_ratio", "D", "d_trend", "auc_me", "layers", "dgap", "dmm",
            "close", "gain", "cost", "level", "d_pred", "d_init")
    missing = [k for k in need if k not in m]
    if missing:
        raise ValueError(f"verdict_rows needs the measurements {missing}")
    D, depths = m["D"], sorted(m["D"])
    H = depths[-1]
    fact = D[H]["factorial"]

    def vals(ci):
        return dict(zip(("est", "lo", "hi"), ci))

    def row(key, claim, paper, measured, rule, x, scale=None, **given):
        eff = effect(rule, x, **given)
        if scale is not None:
            eff["scale"] = scale
        return dict(key=key, claim=claim, paper=paper, measured=measured,
                    verdict=decide(rule, x, **given), values=vals(x), effect=eff)

    pred = {"predicted": m["d_pred"][0]}
    return [
        row("grad", "the gradient reaching the middle is smaller at init (2 layers)",
            "factorially smaller in the dead zone",
            f"middle / ends {iv(*m['g_ratio'], '.2f')} (rollout: {m['pred_ratio']:.2f})",
            "grad", m["g_ratio"]),
        row("depth", "the middle's gradient at init falls behind the ends' with depth",
            "a dead zone that deepens with depth",
            f"middle / ends at H = {', '.join(str(h) for h in depths)}: "
            + ", ".join(iv(*D[h]["measured_ci"], ".3f") for h in depths)
            + " (rollout: " + ", ".join(f"{D[h]['predicted_ci'][0]:.3f}" for h in depths)
            + f"); change {depths[0]} to {H} layers {iv(*m['d_trend'], '.3f')}",
            "depth", m["d_trend"], scale=1.0),
        row("factorial", f"... by a factor 1/(H-1)! ({H} layers: 1/{math.factorial(H - 1)})",
            "factorially smaller", f"middle / ends at H = {H}: {iv(*D[H]['measured_ci'], '.3f')}",
            "factorial", D[H]["measured_ci"], factorial=fact),
        row("speed", "so the middle learns slower (effective learning rate)", "factorially slower",
            f"learning speed (area under curve), middle - ends {iv(*m['auc_me'], '.3f')} at "
            f"{m['layers']} layers, where the rollout has no dead zone",
            "speed", m["auc_me"], scale=1.0),
        row("biased", "biased data (answers at the ends) teaches a task U",
            "position bias follows the data (Wu et al.)",
            f"middle - ends gap vs uniform data {iv(*m['dgap'], '.3f')}", "biased", m["dgap"],
            scale=1.0),
        row("influ", "biased data deepens the influence U", "bias learned into the model",
            f"middle share of influence vs uniform data {iv(*m['dmm'], '.3f')}", "influ", m["dmm"],
            scale=1.0),
    ] + [
        row(r, f"remedy: {name} narrows the valley", "helps the middle (proposed, untested)",
            f"vs ends-biased data ({100 * m['level']:.1f}% intervals): gap "
            f"{iv(*m['close'][r], '.3f')}, middle {iv(*m['gain'][r], '.3f')} (faster: "
            f"{decide('faster', m['gain'][r])}), ends {iv(*m['cost'][r], '.3f')} (slower: "
            f"{decide('slower', m['cost'][r])})", "narrows", m["close"][r], scale=1.0)
        for r, name in REMEDY_NAMES.items()
    ] + [
        row("lever", "scaling the residual path at init moves the U as the rollout says",
            "lambda_t decides the U (structural theory)",
            f"middle share at init, alpha 0.5 vs 2: predicted {iv(*m['d_pred'], '+.3f')}, "
            f"measured {iv(*m['d_init'], '+.3f')}", "lever", m["d_init"], scale=1.0, **pred),
    ]
