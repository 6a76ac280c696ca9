"""What ``posbias fix`` scores a setting with, on either part: the records of a part, the
matrix of per-example log-probabilities, the attention calibration's relevance (one extra pass
per document), the cache keys of its entries.
"""
from __future__ import annotations

import numpy as np

from ....measure import entry
from ....tasks import qa
from ...base import study
from .config import CAL_DEFINITION, DEFINITION

__all__ = []


def _records(model, weights, seed, part):
    """Prompt and answer ids of a prepared part, one per (example, slot), example-major."""
    m, tok, _ = study.load(model, weights, seed)
    from ....tasks.codec import Codec

    codec = Codec(tok, m.get_input_embeddings().num_embeddings)
    P, A, ex, sl = [], [], [], []
    for e, it in enumerate(part["items"]):
        a = study.answer_ids(codec, it["answers"][0])
        for j, t in enumerate(it["prompts"]):
            P.append(study.encode(codec, t)), A.append(a), ex.append(e), sl.append(j)
    return m, tok, codec, {"prompts": P, "answers": A, "example": np.array(ex),
                           "slot": np.array(sl)}


def _matrix(values, rec, n_ex, n_pos):
    M = np.full((n_ex, n_pos), np.nan)
    M[rec["example"], rec["slot"]] = values
    return M


def _check_context(info, rec, name):
    longest = max(len(p) + len(a) for p, a in zip(rec["prompts"], rec["answers"]))
    if info["max_length"] is not None and longest > info["max_length"]:
        raise ValueError(f"the {name} prompts are too long for {info['name']} (context "
                         f"{info['max_length']} tokens, the longest takes {longest}): fewer "
                         f"--documents")


def _settings_params(name, settings, channel=None):
    if name == "hidden-scaling":
        return [{"channel": int(channel), "scale": float(s["scale"])} for s in settings]
    if name == "attention-calibration":  # a variant names its dummy and normaliser
        return [dict({"temperature": float(s["temperature"])},
                     **{k: str(s[k]) for k in ("dummy", "normaliser") if k in s})
                for s in settings]
    return [{"lo": float(s["lo"]), "hi": float(s["hi"])} for s in settings]


def _documents(codec, part, rec, dummy: str = "paper") -> list:
    """For each record of ``part`` (:func:`_records`' order): the token spans of its documents
    and Hsieh et al.'s dummy prompts with ``dummy``
    (:func:`posbias_nb.experiments.base.study.prompt_documents`)."""
    texts = [t for it in part["items"] for t in it["prompts"]]
    if len(texts) != len(rec["prompts"]):
        raise ValueError(f"{len(texts)} prompt texts for {len(rec['prompts'])} records")
    out = [study.prompt_documents(codec, t, want, dummy)
           for t, want in zip(texts, rec["prompts"])]
    k = part.get("documents")
    bad = [len(sp) for sp, _ in out if k is not None and len(sp) != k]
    if bad:
        raise ValueError(f"a prompt of {k} documents was read as {bad[0]}: its text holds "
                         f"another document header or record")
    return out


def _dummies_of(settings) -> list:
    """The dummies that ``settings`` of the calibration read (the paper's where none is named),
    in :data:`posbias_nb.experiments.base.study.DUMMIES`' order."""
    want = {s.get("dummy", "paper") for s in settings}
    return [d for d in study.DUMMIES if d in want]


def _calibration_scores(m, codec, part, rec, settings):
    """Log p and greedy match of every record under each of ``settings`` of the attention
    calibration (``(len(settings), n)`` each), and the relevance of its documents ``(n, K)``
    (measured with the dummy of the first setting)."""
    ds = _dummies_of(settings)
    docs = {d: _documents(codec, part, rec, d) for d in ds}
    n = len(rec["prompts"])
    lp, ok = np.zeros((len(settings), n)), np.zeros((len(settings), n), dtype=bool)
    rel = []
    for i in range(n):
        lp[:, i], ok[:, i], cal = _calibration_record(m, rec, {d: docs[d][i] for d in ds}, i,
                                                      settings)
        rel.append(cal[settings[0].get("dummy", "paper")]["relevance"])
    return lp, ok, np.array(rel)


def _calibration_one(m, rec, docs_i, i, settings):
    """Record ``i`` alone under the paper's reading: its documents' relevance (eq. 4) and its
    log p and greedy match under each setting."""
    lp, ok, cal = _calibration_record(m, rec, {"paper": docs_i}, i, settings)
    return lp, ok, cal["paper"]["relevance"]


def _calibration_record(m, rec, docs, i, settings):
    """Record ``i`` alone: for each dummy of ``docs`` (``{dummy: (spans, dummy prompts)}``), its
    documents' calibrated attention (eq. 4: :func:`~posbias_nb.measure.positional.calibrated_attention`'s
    ``attention``, ``dummy`` and ``relevance``), from one recorded pass of the prompt; and its log
    p and greedy match under each setting (``(len(settings),)`` each), each read with its own
    dummy's relevance and, for the shared normaliser, its documents' mean attention."""
    from ....measure.prefix import Prefix

    pre = Prefix(m, rec["prompts"][i])
    cal = {d: study.calibrated_relevance(m, pre, docs[d], full=True)[1] for d in docs}
    lp, ok = np.zeros(len(settings)), np.zeros(len(settings), dtype=bool)
    groups: dict = {}
    for j, s in enumerate(settings):
        groups.setdefault((s.get("dummy", "paper"), s.get("normaliser", "per-head")),
                          []).append(j)
    for (d, norm), js in groups.items():
        kws = [{k: v for k, v in settings[j].items() if k != "dummy"} for j in js]
        if norm == "shared":
            kws = [dict(kw, attention=list(cal[d]["attention"])) for kw in kws]
        got = study.score_remedy(
            m, [rec["prompts"][i]], [rec["answers"][i]], "attention-calibration", kws,
            base=False, spans=[docs[d][0]], relevance=[cal[d]["relevance"]], prefixes=[pre])
        lp[js], ok[js] = got[0][:, 0], got[1][:, 0]
    return lp, ok, cal


def _cal_key(key, part, **extra):
    return dict(key, part=part, calibration={
        "definition": CAL_DEFINITION, "dummy": [qa.DUMMY_DOCUMENT.title, qa.DUMMY_DOCUMENT.text],
        "dummy_record": list(qa.DUMMY_RECORD), "layers": "later half"}, **extra)


def _key(info, weights, seed, **extra):
    return entry.run_key(info, weights, 0, None, seed, text=False, definition=DEFINITION, **extra)


def _fits_prefix(m, rec) -> bool:
    from ....measure.prefix import smallest_window

    w = smallest_window(m)
    return w is None or max(len(p) + len(a) for p, a in zip(rec["prompts"], rec["answers"])) <= w


def prompt_params(name, setting, prompt) -> dict:
    """A prompt remedy's file parameters: its setting, and for a quality order the slot quality
    it learnt (the curve, or the prior named by the setting)."""
    p = dict(setting)
    if name == "curve-order":
        p["slot_quality"] = list(prompt["qualities"]["curve"])
    elif name == "prior-order":
        p["slot_quality"] = list(prompt["qualities"][setting["prior"]])
    return p


def _iv(t) -> dict:
    e, lo, hi = (float(v) for v in t)
    return {"estimate": e, "low": lo, "high": hi}
