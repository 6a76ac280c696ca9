"""Born at scale in words: the configurations' table, each family's summary and the verdict
rows."""
from __future__ import annotations

from .... import models, stats, theory
from .config import DESIGN, STAT_WORDS
from .measurements import ladder
from .statistics import decisions

__all__ = ["configurations", "ladder_summary", "verdict_rows", "INIT_WORDS"]


def _layout_words(lay: theory.Layout) -> str:
    """A layout in a few words: each layer kind (with its window) and its count."""
    from collections import Counter

    n = Counter(f"{x.kind} {x.size}" if x.size else x.kind for x in lay.layers)
    return ", ".join(f"{k} ×{v}" for k, v in sorted(n.items(), key=lambda kv: -kv[1]))


def configurations() -> list[dict]:
    """One row per configuration of the design: its published sizes, layout and context, and
    the ``config.json`` its function copies (:mod:`posbias_nb.models.configs`)."""
    rows = []
    for c in DESIGN["ladder"]:
        spec_ = models.ZOO[c]
        cfg = spec_.build_config()
        hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        rope = cfg.rope_parameters
        bases = sorted({float(v["rope_theta"]) for v in rope.values()}) \
            if all(isinstance(v, dict) for v in rope.values()) else [float(rope["rope_theta"])]
        doc = (spec_.config.__doc__ or "").split("``")
        rows.append(dict(name=c, layers=cfg.num_hidden_layers, width=cfg.hidden_size,
                         heads=f"{cfg.num_attention_heads}/{cfg.num_key_value_heads}",
                         head_dim=hd, mlp=cfg.intermediate_size,
                         rope="/".join(f"{b:.0e}".replace("e+0", "e") for b in bases),
                         layout=_layout_words(models.config_layout(cfg)),
                         context=spec_.max_length,
                         source=doc[1] if len(doc) > 1 else "", ladder=ladder(c)))
    return rows


def ladder_summary(init: str) -> dict:
    """The family of ``init`` in words: the verdict of "the shape does not depend on width" over
    all its claims (:func:`posbias_nb.stats.decide_all`), the claims by verdict, and for each
    statistic the configurations where it moved beyond its margin, with the difference
    (``moved``, and in words, ``moved_text``)."""
    dec = decisions(init)
    words = {k: v["verdict"] for k, v in dec.items()}
    by = {w: sorted(k for k, x in words.items() if x == w) for w in set(words.values())}
    moved = {}
    for k, v in dec.items():
        c, s = k.split(":")
        if v["verdict"] == "fails":
            moved.setdefault(s, []).append((c, float(v["interval"][0])))
    text = "; ".join(f"{STAT_WORDS[s]} ({', '.join(f'{c} {e:+.2f}' for c, e in lst)})"
                     for s, lst in moved.items()) or "no statistic moved beyond its margin"
    return dict(verdict=stats.decide_all(list(words.values())), words=words, by_verdict=by,
                moved=moved, moved_text=text, decisions=dec)


#: The initialisers in the words of the chapter's verdict rows.
INIT_WORDS = {"hf": "transformers' initialiser, std 0.02",
              "fan-in": "width-aware initialiser, std 1/√d"}


def verdict_rows(summaries: dict) -> list[dict]:
    """The verdict rows of chapter *Born at scale* (:func:`posbias_nb.notebook.verdict_table`),
    one per initialiser of ``summaries`` (``{init: ladder_summary(init)}``, in the design's
    order): the claim "the born profile's shape does not depend on width", its family's claims
    counted by verdict, and the family's verdict (:func:`ladder_summary`)."""
    from .... import notebook

    rows = []
    for init, s in summaries.items():
        if init not in INIT_WORDS:
            raise ValueError(f"unknown initialiser {init!r}; expected one of "
                             f"{', '.join(INIT_WORDS)}")
        counts = notebook.decision_counts([dict(decision=w) for w in s["words"].values()])
        rows.append(dict(key="ladder_" + init.replace("-", ""),
                         claim="the born profile's shape does not depend on width "
                               f"({INIT_WORDS[init]})",
                         paper="(not treated: measured at widths 768 and 896)",
                         measured=f"{len(s['words'])} equivalence claims, widest − "
                                  f"narrowest rung: {counts}",
                         verdict=s["verdict"]))
    return rows
