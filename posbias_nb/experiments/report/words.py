"""The report's words: the reasons a number has no interval, the summary's sentences and the
``posbias fix`` advice. The summary is stored with the report's numbers, so these words are part
of its recorded entry."""
from __future__ import annotations


import numpy as np


#: Why a report under a calibration file shows the unpatched profile in section 1.
CALIBRATION_TEXT = ("the attention calibration reweights the attention on a prompt's documents "
                    "only; the offline text windows of this section have none, so their "
                    "profile under it is the unpatched one, exactly (not measured again)")


#: Why a report under a remedy has no structural section.
REMEDY_STRUCTURAL = ("the residual-aware rollout models the unpatched attention, so under a "
                     "remedy it is not computed")


#: Why a headline ratio has no interval, when no finer reason is known.
ZERO_REASON = ("the influence is exactly 0 over part of the context (beyond the reach of "
               "sliding-window or chunked layers), so this ratio cannot be formed")


#: The two influences of each headline ratio, for the reason a ratio cannot be formed.
RATIO_PARTS = {"ptv": ("the peak-to-valley ratio", "the peak", "the valley"),
          "primacy": ("first / middle", "the first token", "the middle's median"),
          "recency": ("last / middle", "the last token", "the middle's median")}


def unformed_reason(k: str, values) -> str | None:
    """Why the ratio ``k`` (``"ptv"``, ``"primacy"``, ``"recency"``) has no log-scale interval
    over ``values`` (its per-window values, as :func:`safe_ratio` forms them), or None if every
    value is positive and finite.  Counts the windows where the numerator is exactly 0 (ratio
    0), the denominator (infinite) or both (0 / 0).

    Examples
    --------
    >>> unformed_reason("primacy", [0.0, 0.0, 2.0]).split(":")[0]
    'first / middle cannot be formed'
    >>> unformed_reason("primacy", [1.5, 2.0]) is None
    True
    """
    v = np.asarray(values, dtype=float).ravel()
    zero, inf, nan = int(np.sum(v == 0)), int(np.sum(np.isposinf(v))), int(np.sum(np.isnan(v)))
    if zero + inf + nan == 0:
        return None
    name, num, den = RATIO_PARTS[k]
    n = v.size
    parts = []
    if zero:
        parts.append(f"{num} has influence exactly 0 in {zero} of {n} windows (a ratio of 0, "
                     "which has no logarithm)")
    if inf:
        parts.append(f"{den} is exactly 0 in {inf} of {n} (an infinite ratio)")
    if nan:
        parts.append(f"both are exactly 0 in {nan} of {n} (0 / 0, no ratio at all)")
    return (f"{name} cannot be formed: " + "; ".join(parts) + ". Positions beyond the reach "
            "of sliding-window or chunked layers have no influence; a shorter --length, within "
            "the layers' reach, gives the ratio")


def fmt(v) -> str:
    return f"{v:.3g}"


def pct(level) -> str:
    return f"{100 * level:.4g}%"


def summary(data: dict, claims: list) -> str:
    """One sentence per claim: the claim, its verdict word from :func:`stats.decide` and its
    numbers; then what could not be measured.  Nothing here is typed about the results."""
    m = data["meta"]
    parts = [f"{m['model']}, {m['weights']} weights, L = {m['length']}."]
    for c in claims:
        iv = c["interval"]
        if c["verdict"] == "not testable" and c.get("reason"):
            parts.append(f"{c['claim']}: {options_as_code(c['reason'])}.")
            continue
        parts.append(f"{c['claim']}: {c['verdict']} ({fmt(iv['estimate'])}, "
                     f"{pct(c['level'])} interval {fmt(iv['low'])} to {fmt(iv['high'])}).")
    if "twins" in data["born_trained"].get("born", {}):
        parts.append(f"Born is the mean of {data['born_trained']['born']['twins']} random "
                     "initialisations; its intervals take the spread across them and across "
                     "windows.")
    st = data["structural"]
    if not st["available"]:
        parts.append(f"The structural prediction is not available for this architecture: "
                     f"{st['reason']}." if st["reason"] != REMEDY_STRUCTURAL else
                     f"The structural prediction is left out: {st['reason']}.")
    rem = m.get("remedy")
    if rem:
        parts.append(f"Everything trained above is measured under the remedy {rem['remedy']} "
                     f"of {rem['file']} ({', '.join(f'{k}={v}' for k, v in rem['params'].items())})"
                     "." + (f" In section 1, {CALIBRATION_TEXT}." if rem["remedy"] ==
                            "attention-calibration" else ""))
    if not rem:
        parts.append(fix_advice(claims, m["model_argument"]))
    if not data["task"]["available"]:
        what = (f"The task on {data['task']['file']}" if data["task"].get("kind") == "file"
                else "The retrieval task")
        parts.append(f"{what} did not run: {data['task']['reason']}.")
    return " ".join(parts)


def options_as_code(text: str) -> str:
    """Command options in prose (``--quick``) as code spans, so that a page's smart quotes do
    not turn their hyphens into a dash; options already in a code span are left alone."""
    import re

    parts = re.split(r"(`[^`]*`)", str(text))
    return "".join(p if p.startswith("`") else re.sub(r"(?<![\w`-])(--[a-z][\w-]*)", r"`\1`", p)
                   for p in parts)


def fix_command(model_argument: str) -> str:
    """The ``posbias fix`` command the summary suggests, as one would type it (ASCII hyphens,
    the model argument quoted for a POSIX shell where it needs quoting)."""
    import shlex

    return (f"posbias fix --model {shlex.quote(str(model_argument))} --data YOUR_FILE "
            "--out DIR")


def fix_advice(claims: list, model_argument: str) -> str:
    """The summary's last sentence: what the claims say about the middle, and the command that
    searches a remedy.  It says the middle is lost only where a task claim holds (the task is
    what loses answers); an influence profile that favours the ends, with the task claims not
    testable or not run, says only that."""
    by = {c["key"]: c["verdict"] for c in claims}
    cmd = f"`{fix_command(model_argument)}`"
    task = [k for k in ("task_first", "task_last") if by.get(k) == "holds"]
    ends = [k for k in ("trained_primacy", "trained_recency") if by.get(k) == "holds"]
    if task:
        which = " and ".join({"task_first": "first", "task_last": "last"}[k] for k in task)
        return (f"The retrieval task loses the middle here (its {which} position beats the "
                f"middle): {cmd} chooses an inference-time remedy on part of your own examples "
                "and judges it on the rest.")
    if ends:
        which = " and ".join({"trained_primacy": "first", "trained_recency": "last"}[k]
                             for k in ends)
        tested = [k for k in ("task_first", "task_last") if k in by]
        why = ("its retrieval tests did not show the middle lost" if tested and all(
            by[k] not in ("not testable",) for k in tested) else
            "whether answers in the middle are lost was not tested here")
        return (f"The trained influence favours the {which} token over the middle, but {why}; "
                f"{cmd} measures that on your own examples and searches a remedy.")
    return (f"Nothing above shows the middle lost; {cmd} measures it on your own examples and "
            "searches a remedy if it is.")
