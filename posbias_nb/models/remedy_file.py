r"""A remedy file: one inference-time remedy, its parameters and the model it was chosen for,
applied anywhere with :func:`posbias_nb.models.remedy` (``models.remedy(model,
"fix/remedy.json")``) or ``--remedy-file`` on the command line.

``posbias fix`` writes one (chapter :ref:`ch-documents`); :func:`write` writes one by
hand.  The JSON object holds:

* ``format`` (:data:`FORMAT`), ``remedy`` (a name of :data:`FILE_REMEDIES`), ``params`` (its
  prompt-independent parameters, :data:`FILE_REMEDIES`; a row that depends on the prompt, such
  as where the prefill ends, is found when it runs, as in :func:`~posbias_nb.models.remedies.remedy`);
* ``model``: ``name`` and ``fingerprint`` (:func:`posbias_nb.models.describe`, the same one
  the report prints), and ``digest`` (:func:`weights_digest` of the loaded model);
* ``library``: the ``posbias_nb`` version that wrote it; ``evidence``: whatever the writer
  measured (``posbias fix``: the test-part gains with intervals and the cost).

A file is refused (ValueError, one line) when its JSON is malformed, its remedy or a parameter is
unknown or of the wrong type, or when it is applied to a model whose digest (in Python) or
fingerprint (on the command line, by name) differs from the recorded one.  A file of Hsieh et
al.'s attention calibration carries its temperature and layers; the documents' spans and their
calibrated attention belong to each prompt, so the caller gives them where it applies the file
(``models.remedy(model, "remedy.json", spans=..., relevance=...)``; for the shared normaliser,
``attention=`` too).  A file of one of our variants (``posbias fix``'s fourth design) names its
``normaliser`` and its ``dummy`` (``length-matched``: the relevance is measured with
:func:`posbias_nb.tasks.qa.length_matched_dummies`, as ``posbias task`` does).  Its temperature was
chosen on relevances measured with the dummy document of ``posbias fix``
(:data:`posbias_nb.tasks.qa.DUMMY_DOCUMENT`, or :data:`~posbias_nb.tasks.qa.DUMMY_RECORD` for a
key-value file; ``posbias task`` uses the same), while ``posbias retrieval`` and ``report``
measure their synthetic key-value prompts with that task's own dummy pair
(:data:`posbias_nb.tasks.kv_needle.DUMMY_PAIR`): the relevance's scale, and so what a
temperature does, can differ between the two.  Our prior calibration reads a fitted prior
array and is not applied from a file.

A **prompt remedy** (:data:`PROMPT_REMEDIES`, :mod:`posbias_nb.tasks.reorder`) changes the
prompt, not the model: where each document goes (by a ranker, :data:`RANKERS`, and a fixed
rule or the slot quality it learnt, one number a slot) or the template (``query-aware``).  Its
file carries the same model block, so it is refused on another model; ``posbias task
--remedy-file`` applies it to every prompt, and
:func:`posbias_nb.experiments.base.prompts.reorder_documents` to the caller's own question and
documents.  :func:`posbias_nb.models.remedy` and the commands without documents refuse it.
"""
from __future__ import annotations

import hashlib
import json
import math
import numbers
from pathlib import Path

from ..remedy_table import PROMPT as PROMPT_REMEDIES
from ..remedy_table import TABLE as _TABLE

__all__ = ["FORMAT", "FILE_REMEDIES", "PROMPT_REMEDIES", "RANKERS", "NORMALISERS", "PER_PROMPT",
           "weights_digest",
           "write", "read", "check_model", "is_remedy_file"]

FORMAT = "posbias-remedy/1"
#: The remedies a file can carry, each with its parameters and their types.
#: (The remedy table's ``file``, :mod:`posbias_nb.remedy_table`; the prompt remedies change
#: where the documents go, not the model.)
FILE_REMEDIES = {n: dict(r["file"]) for n, r in _TABLE.items() if r["file"] is not None}
#: What "descending relevance" means for a prompt remedy that orders by it: BM25 of the question
#: against the prompt's documents, the order a plain task file gives them (its retriever's), or
#: LongLLMLingua's question likelihood (:func:`posbias_nb.measure.positional.question_likelihood_ranking`).
RANKERS = ("bm25", "file", "question-likelihood")
#: The readings of eq. 5's normaliser of Hsieh et al.'s attention calibration
#: (:func:`posbias_nb.models.remedy`'s ``normaliser``): the paper's, per head and row
#: (``per-head``), and ours, the layer-and-head mean attention to the document (``shared``).
NORMALISERS = ("per-head", "shared")
_REQUIRED = {n: set(r["required"]) for n, r in _TABLE.items() if r["file"] is not None}
#: What a caller adds to a file's parameters where it applies it: the row where the prompt
#: ends and hidden scaling's recorded context for all; each prompt's documents for the
#: calibration.
PER_PROMPT = {n: set(r["per_prompt"]) for n, r in _TABLE.items() if r["file"] is not None}


def is_remedy_file(name) -> bool:
    """Whether ``name`` (the second argument of :func:`posbias_nb.models.remedy`) names a file:
    a :class:`~pathlib.Path`, or a string ending in ``.json``."""
    return isinstance(name, Path) or (isinstance(name, str) and name.endswith(".json"))


def weights_digest(model) -> str:
    """SHA-256 (16 hex digits) of a loaded model's configuration and every parameter and buffer
    (name, dtype, shape, bytes): equal for the same weights, different for any change."""
    import torch

    h = hashlib.sha256(model.config.to_json_string(use_diff=False).encode())
    with torch.no_grad():
        for name, t in sorted(model.state_dict().items()):
            t = t.detach().cpu().contiguous()
            h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
            h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:16]


def _choices() -> dict:
    """The values a calibration file's ``normaliser`` and ``dummy`` may take
    (:data:`NORMALISERS`, :data:`posbias_nb.tasks.qa.DUMMIES`)."""
    from ..tasks.qa import DUMMIES

    return {"normaliser": NORMALISERS, "dummy": DUMMIES}


def _check_param(path, remedy, k, v):
    kind = FILE_REMEDIES[remedy].get(k)
    if kind is None:
        raise ValueError(f"{path}: {remedy} takes {', '.join(sorted(FILE_REMEDIES[remedy]))}; "
                         f"got parameter {k!r}")
    real = lambda x: isinstance(x, numbers.Real) and not isinstance(x, bool)  # noqa: E731
    ok = {"int": isinstance(v, int) and not isinstance(v, bool),
          "float": real(v),
          "str": isinstance(v, str),
          "bool": isinstance(v, bool),
          "ranker": isinstance(v, str),
          "floats": isinstance(v, list) and len(v) > 0 and all(real(x) and math.isfinite(x)
                                                               for x in v),
          "ints": isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool)
                                               for x in v)}[kind]
    if not ok:
        what = {"floats": "a non-empty list of finite numbers", "ranker": "a ranker name"}
        raise ValueError(f"{path}: parameter {k!r} of {remedy} must be {what.get(kind, kind)}, "
                         f"got {v!r}")
    if kind == "ranker" and v not in RANKERS:
        raise ValueError(f"{path}: unknown ranker {v!r}; one of {', '.join(RANKERS)}")
    if k == "rounds" and v < 1:
        raise ValueError(f"{path}: rounds of {remedy} must be at least 1, got {v!r}")
    if k == "prior" and v not in ("born", "jacobian"):
        raise ValueError(f"{path}: the prior of {remedy} is 'born' or 'jacobian', got {v!r}")
    if k in ("normaliser", "dummy") and v not in _choices()[k]:
        raise ValueError(f"{path}: the {k} of {remedy} is one of "
                         f"{', '.join(map(repr, _choices()[k]))}, got {v!r}")
    if k == "temperature" and not (math.isfinite(v) and v > 0):
        raise ValueError(f"{path}: the temperature of {remedy} must be a positive number, "
                         f"got {v!r}")


def _validate(obj, path) -> dict:
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: a remedy file is a JSON object, got {type(obj).__name__}")
    if obj.get("format") != FORMAT:
        raise ValueError(f"{path}: not a remedy file of format {FORMAT!r} "
                         f"(format {obj.get('format')!r})")
    name = obj.get("remedy")
    if name not in FILE_REMEDIES:
        raise ValueError(f"{path}: unknown remedy {name!r}; a file carries one of "
                         f"{', '.join(FILE_REMEDIES)}")
    params = obj.get("params")
    if not isinstance(params, dict):
        raise ValueError(f"{path}: 'params' must be an object, got {params!r}")
    for k, v in params.items():
        _check_param(path, name, k, v)
    missing = _REQUIRED[name] - set(params)
    if missing:
        raise ValueError(f"{path}: {name} needs {', '.join(sorted(missing))}")
    m = obj.get("model")
    if not isinstance(m, dict) or not all(isinstance(m.get(k), str)
                                          for k in ("name", "fingerprint", "digest")):
        raise ValueError(f"{path}: 'model' must give name, fingerprint and digest")
    return obj


def read(path) -> dict:
    """The checked content of a remedy file (module docstring); ValueError naming the file and
    what is wrong."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"cannot read remedy file {str(path)!r} ({type(e).__name__})") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{p.name}: malformed JSON (line {e.lineno}: {e.msg})") from None
    return _validate(obj, p.name)


def write(path, remedy: str, params: dict, model, name: str, evidence: dict | None = None) -> Path:
    """Write a remedy file for the loaded ``model`` (zoo name, directory or hub id ``name``)."""
    from .. import __version__
    from .zoo import describe

    obj = {"format": FORMAT, "remedy": remedy, "params": dict(params),
           "model": {"name": describe(name)["name"], "fingerprint": describe(name)["fingerprint"],
                     "digest": weights_digest(model)},
           "library": {"posbias_nb": __version__}, "evidence": evidence or {}}
    _validate(json.loads(json.dumps(obj)), Path(path).name)
    p = Path(path)
    p.write_text(json.dumps(obj, indent=2) + "\n")
    return p


def check_model(spec: dict, path, *, model=None, name=None) -> None:
    """ValueError unless the remedy file ``spec`` (:func:`read`) was made for this model: by the
    loaded ``model``'s :func:`weights_digest`, or by ``name``'s fingerprint
    (:func:`posbias_nb.models.describe`)."""
    rec = spec["model"]
    if model is not None:
        d = weights_digest(model)
        if d != rec["digest"]:
            raise ValueError(f"{Path(path).name} was chosen for {rec['name']} (weights digest "
                             f"{rec['digest']}); this model's digest is {d}")
    if name is not None:
        from .zoo import describe

        f = describe(name)["fingerprint"]
        if f != rec["fingerprint"]:
            raise ValueError(f"{Path(path).name} was chosen for {rec['name']} (fingerprint "
                             f"{rec['fingerprint']}); {name} has fingerprint {f}")
