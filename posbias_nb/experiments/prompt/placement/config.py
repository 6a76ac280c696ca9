"""``posbias fix``'s prompt remedies, their settings: the remedies it searches, the ranked ones,
the priors' constants, the theory's comparisons, the rankers and the grid of a task file's
format, and the key a setting is recorded under."""
from __future__ import annotations

from .... import remedy_table
from ....remedy_table import PROMPT as PROMPT_REMEDIES

__all__ = ["RANKED", "BORN_ALPHA", "MEASURED_PRIOR", "THEORY", "rankers", "grid", "json_key"]


#: (``PROMPT_REMEDIES``: the prompt remedies ``posbias fix`` searches, in the remedy table's order.)
#: The prompt remedies that place the documents by a ranking (they need a ranker): the same
#: passages in another order.
RANKED = tuple(n for n in PROMPT_REMEDIES if "ranker" in remedy_table.TABLE[n]["needs"])

_PRIORS = ("born", "measured")

#: The born prior's residual share, the structural theory's lambda where the attention
#: output's norm equals the stream's (lambda = 1/2): the one value that needs no measurement.
BORN_ALPHA = 0.5

#: The measured prior's profile, from this many Hutchinson ``probes`` and text ``windows``,
#: its length rounded to this ``multiple`` of the tuning prompts' mean length.
MEASURED_PRIOR = {"probes": 8, "windows": 4, "multiple": 64}


def rankers(fmt: str) -> tuple:
    """The rankers searched for a task file of format ``fmt``: BM25 and the question likelihood
    always, the file's own order for a plain file (the others have none)."""
    return ("bm25", "question-likelihood") + (("file",) if fmt == "plain" else ())


def grid(fmt: str) -> dict:
    """The settings of each prompt remedy for a file of format ``fmt`` (module docstring).

    >>> [len(v) for v in grid("liu-qa").values()]
    [2, 2, 1, 2, 4, 1]
    """
    from ....measure.positional import ATTENTION_SORT

    r = rankers(fmt)
    return {"long-context-reorder": [{"ranker": x} for x in r],
            "lost-in-the-middle-ranker": [{"ranker": x} for x in r],
            "query-aware": [{}],
            "curve-order": [{"ranker": x} for x in r],
            "prior-order": [{"ranker": x, "prior": p} for p in _PRIORS for x in r],
            "attention-sort": [dict(ATTENTION_SORT)]}


#: The theory's question, asked on the test part at one ranker fixed in advance (BM25, what a
#: user has without running the model), as a family of its own: does a placement read from the
#: born or the measured prior do as well as one read from the task curve (non-inferiority at
#: ``margin`` nats of the mean all-slot log p), and better than each fixed rule?
THEORY = {"ranker": "bm25", "margin": 0.25,
          "claims": [["prior-order:born", "curve-order", "non-inferior"],
                     ["prior-order:measured", "curve-order", "non-inferior"],
                     ["prior-order:born", "long-context-reorder", "better"],
                     ["prior-order:born", "lost-in-the-middle-ranker", "better"],
                     ["prior-order:measured", "long-context-reorder", "better"],
                     ["prior-order:measured", "lost-in-the-middle-ranker", "better"]]}


def json_key(setting) -> str:
    import json

    return json.dumps(setting, sort_keys=True)
