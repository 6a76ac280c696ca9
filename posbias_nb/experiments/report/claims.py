"""The report's pre-declared claims, each decided by :func:`posbias_nb.stats.decide` on its
interval."""
from __future__ import annotations

import math


from ... import stats
from .config import DESIGN
from .statistics import as_tuple
from .words import ZERO_REASON


def decide_claims(data: dict) -> list[dict]:
    """The pre-declared claims, each with its interval and :func:`stats.decide` verdict."""
    bt = data["born_trained"]
    out = []

    def add(key, text, iv, threshold):
        if not all(math.isfinite(v) for v in as_tuple(iv)):
            untestable(key, text, iv, iv.get("reason", ZERO_REASON))
            return
        out.append({"key": key, "claim": text, "interval": iv, "level": 0.95,
                    "threshold": threshold, "verdict": stats.decide(as_tuple(iv), threshold)})

    def untestable(key, text, iv, why):
        out.append({"key": key, "claim": text, "interval": iv, "level": 0.95,
                    "threshold": 0.0, "verdict": "not testable", "reason": why})

    b = bt["born"]["headline"]
    add("born_primacy", "At initialization the first token outweighs the middle "
        "(first / middle median > 1)", b["primacy"], 1.0)
    add("born_recency", "At initialization the last token outweighs the middle "
        "(last / middle median > 1)", b["recency"], 1.0)
    if "trained" in bt:
        t = bt["trained"]["headline"]
        add("trained_primacy", "The trained model's first token outweighs the middle",
            t["primacy"], 1.0)
        add("trained_recency", "The trained model's last token outweighs the middle",
            t["recency"], 1.0)
        add("change_ptv", "Pretraining deepens the valley (peak-to-valley trained / born > 1)",
            bt["change"]["ptv"], 1.0)
    st = data["structural"]
    if st["available"]:
        r = DESIGN["rank_threshold"]
        add("rollout_spearman", "The residual-aware rollout ranks positions like the measured "
            f"profile (Spearman > {r:g})", st["spearman"]["residual"], r)
    tk = data["task"]
    if tk["available"] and "contrasts" in tk:
        E = int(tk["examples"])
        p_min = 2.0 ** (1 - E)  # the smallest two-sided p of a sign-flip test of E examples
        first_level = DESIGN["alpha"] / 2  # Holm's first step over the two contrasts
        for k, what in (("first", "first"), ("last", "last")):
            c = tk["contrasts"][k]
            text = (f"Retrieval log-probability is higher with the gold "
                    f"{tk.get('unit', 'pair')} {what} than in the middle (Holm-adjusted)")
            if p_min >= first_level:
                untestable(f"task_{k}", text, c["adjusted"],
                           f"not testable with {E} examples: the smallest p a sign-flip test "
                           f"of {E} examples can give is {p_min:.3g}, not below Holm's first "
                           f"level {first_level:g} (run without --quick for more examples)")
                continue
            out.append({"key": f"task_{k}", "claim": text,
                        "interval": c["adjusted"], "level": c["level"], "threshold": 0.0,
                        "verdict": c["verdict"]})
    return out
