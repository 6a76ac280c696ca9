"""The inference-time remedies study's statistics: each model's summary, the control, the
pre-declared families decided (:func:`decisions`), a verdict row's effect."""
from __future__ import annotations

from .... import stats
from .config import ARMS, CHAPTER, FAMILIES, _PRIOR_ARMS, _VERSUS, _checked
from .measurements import channel, cost_arms, prior_arms, task_arms

__all__ = ["summary", "decisions", "verdict_effect"]


def summary(model) -> dict:
    """Task, channel, prior (pretrained and at initialization) and cost of every arm on
    ``model``, with the tuned settings: the chapter's measurements for one model."""
    _checked()
    task = task_arms(model)
    settings = {a: task[a]["setting"] for a in ARMS}
    pre = prior_arms(model, "pretrained", settings)
    controls = [a for a in _PRIOR_ARMS if control_moved(pre[a])]
    return {"task": task, "settings": settings, "channel": channel(model),
            "cost": cost_arms(model, settings), "controls": controls,
            "prior": {"pretrained": pre, "random": prior_arms(model, "random", settings,
                                                              controls)}}

def control_moved(arm_prior) -> bool:
    """The init claim's positive control: the same remedy moved the pretrained prior outside
    the band (its relative change's 95% interval lies outside)."""
    band = tuple(CHAPTER["rules"]["init"]["band"])
    return stats.decide(arm_prior["relative_change"], direction="within", band=band) == "fails"

def decisions(summaries: dict) -> dict:
    """The verdicts of the chapter: each pre-declared family of :data:`FAMILIES` decided with
    Holm's correction (:func:`posbias_nb.stats.holm_family`), ``{family: {"model/arm":
    result}}``.  The init claims are testable only where the pretrained prior moved outside the
    band (the positive control)."""
    R = CHAPTER["rules"]
    claims = {f: {} for f in FAMILIES}
    for name in FAMILIES["task"]:
        m, a = name.split("/")
        claims["task"][name] = dict(x=summaries[m]["task"][a]["logprob_diffs"],
                                    threshold=R["task"]["threshold"],
                                    direction=R["task"]["direction"])
    for name in FAMILIES["prior"]:
        m, a = name.split("/")
        claims["prior"][name] = dict(x=summaries[m]["prior"]["pretrained"][a]["diffs"],
                                     threshold=R["prior"]["threshold"],
                                     direction=R["prior"]["direction"])
    band = tuple(R["init"]["band"])
    for name in FAMILIES["init"]:
        m, a = name.split("/")
        moved = control_moved(summaries[m]["prior"]["pretrained"][a])
        rnd = summaries[m]["prior"]["random"].get(a)
        claims["init"][name] = dict(x=None if rnd is None else rnd["relative"], band=band,
                                    direction="within", testable=moved and rnd is not None)
    for name in FAMILIES["cost"]:
        m, a = name.split("/")
        claims["cost"][name] = dict(x=summaries[m]["cost"][a]["diffs"],
                                    threshold=R["cost"]["threshold"],
                                    direction=R["cost"]["direction"])
    for name in FAMILIES["versus"]:
        m, a = name.split("/")
        T = summaries[m]["task"]
        claims["versus"][name] = dict(x=T[a]["logprob_diffs"] - T[_VERSUS[a]]["logprob_diffs"],
                                      threshold=R["versus"]["threshold"],
                                      direction=R["versus"]["direction"])
    return {f: stats.holm_family(c, alpha=CHAPTER["alpha"]) for f, c in claims.items()}

def verdict_effect(claim: dict) -> dict:
    """The effect of one claim of :func:`decisions` for a verdict row
    (:func:`posbias_nb.notebook.verdict_table`): its Holm-adjusted interval against its
    declared threshold (or band, for ``within``) and direction; an untestable claim has no
    interval (zeros, marked ``testable=False``)."""
    c = claim["claim"]
    kw = {"band": tuple(c["band"])} if c["direction"] == "within" else \
        {"threshold": c["threshold"], "scale": 1.0}
    ci = claim["adjusted"] if claim["testable"] else (0.0, 0.0, 0.0)
    return dict(interval=ci, direction=c["direction"], testable=claim["testable"], **kw)
