"""Every inference-time remedy, declared once: the table models, tasks, studies, ``posbias fix``
and the command line read.

Chapters :ref:`ch-inference` (the remedies inside the network) and :ref:`ch-documents` (the
remedies in the prompt, and ``posbias fix``, which searches both).

A row of :data:`TABLE`, by remedy name:

``kind``
    ``"network"``: :func:`posbias_nb.models.remedy` patches the model (hidden states,
    position ids or attention); ``"prompt"``: the documents' order or the template changes
    (:mod:`posbias_nb.tasks.reorder`), the model is left as it is.
``method``, ``ours``
    whose method it is (a paper's, tested against an oracle from its equations), or ours
    (named apart, after the method it varies).
``call``
    the parameters :func:`posbias_nb.models.remedy` takes (network remedies).
``file``
    the parameters a remedy file stores and their types
    (:mod:`posbias_nb.models.remedy_file`); ``None``: a file cannot carry it.
``required``
    the file parameters a file must give.
``per_prompt``
    what a caller adds to a file's parameters where it applies it, prompt by prompt (the row
    where the prompt ends, the documents' spans).
``rows``
    which rows of a prompt the remedy changes: ``"last"`` (the last prompt token and the answer:
    the prompt is computed once for every setting) or ``"all"``.
``grid``
    the remedy's own settings: the published ones and those the inference chapter tunes over
    (``posbias fix`` widens some of them, :data:`posbias_nb.experiments.remedy.fix.GRID`).
``needs``
    what applying it needs beyond the documents: ``"channel"`` (a searched hidden channel),
    ``"spans"`` (where each document is), ``"prior"`` (an influence prior), ``"ranker"`` (a
    relevance order), ``"slot_quality"`` (a measured quality per slot), ``"model"`` (the model's
    own attention, in the prompt).
``help``
    one line for the command line's help.

The lists the rest of the package keeps (:data:`posbias_nb.models.REMEDIES`,
:data:`posbias_nb.models.remedy_file.FILE_REMEDIES`, ``PROMPT_REMEDIES``, ``posbias fix``'s
search and grids, the inference chapter's arms) are computed from this table; a locked study
design names the remedies it measured and reads what they are from here.  This module imports
nothing: it is plain data, and the code digests count what is computed from it by value
(:mod:`posbias_nb.provenance.reach`), so an edit moves only the measurements that read a value
it changed.
"""
from __future__ import annotations

__all__ = ["TABLE", "KINDS", "NEEDS", "NETWORK", "OURS", "PROMPT"]

#: The kinds of remedy.
KINDS = ("network", "prompt")
#: What a remedy may need beyond the documents.
NEEDS = ("channel", "spans", "prior", "ranker", "slot_quality", "model")

#: The remedies, in the order the package lists them: each kind's papers' methods, then ours.
TABLE = {
    "hidden-scaling": {
        "kind": "network", "method": "Yu et al. 2024", "ours": False,
        "call": ("channel", "scale", "layers", "start", "context"),
        "file": {"channel": "int", "scale": "float", "layers": "ints"},
        "required": ("channel", "scale"), "per_prompt": ("start", "context"), "rows": "last",
        "grid": ({"scale": 0.0}, {"scale": -1.0}),  # the factors of Yu et al.'s configs
        "needs": ("channel",),
        "help": "scale one positional hidden channel at the last prompt row (Yu et al. 2024)"},
    "hidden-scaling-all": {
        "kind": "network", "method": "ours, after Yu et al.", "ours": True,
        "call": ("channel", "scale", "layers"),
        "file": {"channel": "int", "scale": "float", "layers": "ints"},
        "required": ("channel", "scale"), "per_prompt": (), "rows": "all",
        "grid": ({"scale": 0.0}, {"scale": -1.0}),
        "needs": ("channel",),
        "help": "ours: the same channel scaled at every row"},
    "ms-poe": {
        "kind": "network", "method": "Zhang et al. 2024", "ours": False,
        "call": ("lo", "hi", "layers", "start", "assign", "ratios"),
        "file": {"lo": "float", "hi": "float", "layers": "ints", "assign": "str"},
        "required": (), "per_prompt": ("start",), "rows": "all",
        "grid": ({"lo": 1.2, "hi": 1.8},),  # the published setting, not tuned
        "needs": (),
        "help": "Ms-PoE: rescaled position ids, one ratio per head (Zhang et al. 2024)"},
    "attention-calibration": {
        "kind": "network", "method": "Hsieh et al. 2024", "ours": False,
        "call": ("spans", "relevance", "temperature", "layers", "start", "normaliser",
                 "attention"),
        "file": {"temperature": "float", "layers": "ints", "normaliser": "str", "dummy": "str"},
        "required": ("temperature",), "per_prompt": ("start", "spans", "relevance", "attention"),
        "rows": "last",
        # the paper's t = 5e-5 (its prompts: ~3000 tokens), and one and two decades above it
        "grid": ({"temperature": 5e-5}, {"temperature": 5e-4}, {"temperature": 5e-3}),
        "needs": ("spans",),
        "help": "found in the middle: attention to each document recalibrated by its "
                "relevance (Hsieh et al. 2024; one extra pass per document)"},
    "prior-calibration": {
        "kind": "network", "method": "ours, after Hsieh et al.", "ours": True,
        "call": ("prior", "row0", "tau", "start", "layers"),
        "file": None, "required": (), "per_prompt": (), "rows": "last",
        "grid": ({"tau": 0.25}, {"tau": 0.5}, {"tau": 1.0}),
        "needs": ("prior",),
        "help": "ours: attention divided by a measured positional prior"},
    "long-context-reorder": {
        "kind": "prompt", "method": "LangChain's LongContextReorder", "ours": False,
        "file": {"ranker": "ranker"}, "required": ("ranker",), "per_prompt": (),
        "needs": ("ranker",),
        "help": "the most relevant at the ends, the least in the middle (LangChain)"},
    "lost-in-the-middle-ranker": {
        "kind": "prompt", "method": "Haystack's LostInTheMiddleRanker", "ours": False,
        "file": {"ranker": "ranker"}, "required": ("ranker",), "per_prompt": (),
        "needs": ("ranker",),
        "help": "the most relevant first, the second last, ... (Haystack)"},
    "query-aware": {
        "kind": "prompt", "method": "Liu et al. 2023, section 4.2", "ours": False,
        "file": {}, "required": (), "per_prompt": (),
        "needs": (),
        "help": "the question before and after the documents (Liu et al. 2023)"},
    "curve-order": {
        "kind": "prompt", "method": "ours, after AttnRank", "ours": True,
        "file": {"ranker": "ranker", "slot_quality": "floats"},
        "required": ("ranker", "slot_quality"), "per_prompt": (),
        "needs": ("ranker", "slot_quality"),
        "help": "ours: the most relevant where the measured slot quality is highest"},
    "prior-order": {
        "kind": "prompt", "method": "ours, after AttnRank", "ours": True,
        "file": {"ranker": "ranker", "slot_quality": "floats", "prior": "str"},
        "required": ("ranker", "slot_quality", "prior"), "per_prompt": (),
        "needs": ("ranker", "slot_quality", "prior"),
        "help": "ours: the same, the slot quality read from an influence prior"},
    "attention-sort": {
        "kind": "prompt", "method": "Peysakhovich and Lerer 2023", "ours": False,
        "file": {"rounds": "int", "best_last": "bool"}, "required": (), "per_prompt": (),
        "needs": ("model",),
        "help": "attention sorting: documents re-sorted by the model's own attention to them"},
}

#: Our variants inside the network (named apart from the papers' methods).
OURS = tuple(n for n, r in TABLE.items() if r["kind"] == "network" and r["ours"])
#: The remedies inside the network, the papers' methods first, then ours
#: (:data:`posbias_nb.models.REMEDIES`: what :func:`posbias_nb.models.remedy` applies).
NETWORK = tuple(n for n, r in TABLE.items() if r["kind"] == "network" and not r["ours"]) + OURS
#: The remedies in the prompt.
PROMPT = tuple(n for n, r in TABLE.items() if r["kind"] == "prompt")
