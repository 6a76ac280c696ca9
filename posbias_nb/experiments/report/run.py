"""``posbias report``: the entry point that measures the four sections, decides the claims and
caches the whole (:func:`report`)."""
from __future__ import annotations

import json
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np

from ... import __version__, cache, models
from ...measure import entry
from ...results import Result, plain
from .claims import decide_claims
from .config import DEFINITION, DESIGN, SETTINGS
from .measurements import born_trained, file_task, kv_task, remedy_key, structural
from .words import REMEDY_STRUCTURAL, summary


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:  # pragma: no cover
        return "absent"


def report(model, weights: str = "pretrained", length: int = 512, quick: bool = False,
           seed: int = 0, progress: bool = False, task_data=None,
           task_documents: int | None = None, remedy_file=None) -> Result:
    r"""The position-bias report of one model (the sections and statistics:
    :mod:`posbias_nb.experiments.report`).

    Parameters
    ----------
    model : str or path
        A zoo name, a local Hugging Face model directory, or a hub id ``org/name`` (read from
        the local hub cache when ``HF_HUB_OFFLINE=1``, :func:`posbias_nb.models.hub_snapshot`).
    weights : {"pretrained", "random"}
        The weights reported on.  ``"random"``: the model *is* its random-init twin, so section
        1 has no trained profile and no change.
    length : int
        Context length ``L`` of the profiles (up to the model's context); the retrieval prompts
        are about ``0.85 L`` tokens.
    quick : bool
        The :data:`SETTINGS` ``"quick"`` sizes (8 windows, 2 probes, 5 gold positions x 4
        examples) instead of ``"full"``.
    seed : int
        Seeds the windows, the probes, the random twin, the prompts and the bootstrap.
    progress : bool
        A bar per stage on stderr.
    task_data : path or None
        A task file (:func:`posbias_nb.tasks.qa.read_task_file`: Liu et al.'s QA or key-value
        format, or the plain one): section 3 is then :func:`posbias_nb.experiments.prompt.user_task.task_run`
        on it (the settings' number of examples, ``task_documents`` documents) in place of the
        synthetic key-value task, with the same claims.  Checked before anything is measured.
    remedy_file : path or None
        A remedy file (``posbias fix``, :mod:`posbias_nb.models.remedy_file`): the report of the
        pretrained model patched by it.  Section 1's trained profile is measured under the
        remedy on the same windows (the unpatched profile shown beside it), section 3's
        prompts are scored under it
        (:func:`~posbias_nb.experiments.remedy.inference.retrieval_remedy_run`); the structural
        prediction and the span view describe the unpatched model and are left out.  Refused
        before any measurement on a model whose
        fingerprint differs, after loading on other weights.

    Returns
    -------
    Result
        ``born_trained``, ``structural``, ``task``, ``claims``, ``summary`` (nested dicts, all
        JSON), the CSV columns ``position``, ``influence`` (the reported model's mean profile,
        normalized) with ``influence_low``/``influence_high``, and ``meta``.  Same arguments,
        same numbers.

    Raises
    ------
    ValueError
        Unknown model or hub id not cached offline, a directory without ``config.json``,
        pretrained weights not installed, a length < 16 or beyond the model's context, a
        negative seed.
    """
    from tqdm import tqdm

    s = dict(SETTINGS["quick" if quick else "full"])
    info = entry.checked(model, weights, length, s["windows"], seed)
    if int(length) < 16:
        raise ValueError(f"length must be at least 16 for a report, got {length!r}")
    length = int(length)
    extra = {}
    spec = None
    if remedy_file is not None:
        from ...models import remedy_file as _rf

        if weights != "pretrained":
            raise ValueError("--remedy-file reports the pretrained model the remedy was chosen "
                             f"for, not weights={weights!r}")
        if task_data is not None:
            raise ValueError("--remedy-file with --task-data is not supported: posbias fix "
                             "already scores the remedy on your file (its index.html)")
        spec = _rf.read(remedy_file)
        if spec["remedy"] in _rf.PROMPT_REMEDIES:
            from ...models.remedies import prompt_remedy_refused

            raise ValueError(prompt_remedy_refused(remedy_file, spec["remedy"]))
        _rf.check_model(spec, remedy_file, name=model)  # by fingerprint, before any load
        spec["_path"] = str(remedy_file)
        extra["remedy"] = remedy_key(spec)
    if task_data is not None:
        from ...models.weights import file_sha256
        from ..base import prompts

        prompts.prepare(task_data, task_documents, None, s["examples"], None, seed)  # checks
        extra = {"task_data": file_sha256(Path(task_data)),
                 "task_documents": task_documents}
    key = entry.run_key(info, weights, length, s["windows"], seed, definition=DEFINITION,
                        quick=bool(quick), settings=s, **extra)
    hit = cache.load("report", key)
    if hit is not None:
        data = json.loads(str(hit["json"]))
    else:
        t0 = time.perf_counter()
        bar = tqdm(total=4, disable=not progress, file=sys.stderr, leave=False, unit="stage")
        try:
            bar.set_description("report: born vs trained")
            bt, W = born_trained(model, weights, length, s, seed, info["n_layers"], progress,
                                 spec)
            bar.update()
            bar.set_description("report: structural prediction")
            measured = W["pretrained"] if weights == "pretrained" else W["random"]
            st = structural(model, weights, length, s, seed, measured, progress) \
                if spec is None else {"available": False, "reason": REMEDY_STRUCTURAL}
            bar.update()
            bar.set_description("report: retrieval task and spans")
            tk = kv_task(model, weights, length, s, seed, progress,
                         None if spec is None else spec["_path"]) if task_data is None else \
                file_task(model, weights, task_data, task_documents, s, seed)
            bar.update()
        finally:
            bar.close()
        entry.forget()
        meta = {
            "command": "report", "model": info["name"], "model_argument": str(model),
            "hub_id": str(model) if models.is_hub_id(str(model)) and str(model) not in models.ZOO
            and not Path(str(model)).exists() else None,
            "family": info["family"], "n_layers": info["n_layers"],
            "hidden_size": info["hidden_size"], "context": info["max_length"],
            "fingerprint": info["fingerprint"], "weights": weights,
            "twin": "the same configuration, weights='random', torch.manual_seed(seed)",
            "length": length, "seed": int(seed), "quick": bool(quick), "sizes": s,
            "definition": DEFINITION, "design": DESIGN.hash, "level": 0.95,
            "layout": bt["layout"].get("layout"),
            "remedy": None if spec is None else {"file": Path(spec["_path"]).name,
                                                 **remedy_key(spec)},
            "warnings": [w for k, w in models.weights.LOAD_WARNINGS.items()
                         if k in (str(model), info.get("pretrained_source"))],
            "intervals": "per position and headline: Student t over windows (ratios on the "
                         "log scale); retrieval accuracy: Wilson; log-probability: t over "
                         "examples; Spearman and W1: bootstrap over windows",
            "versions": {"posbias_nb": __version__, **entry.library_versions(),
                         **{p: _version(p) for p in ("numpy", "scipy", "matplotlib",
                                                      "huggingface_hub")}},
        }
        data = {"meta": meta, "born_trained": bt, "structural": st, "task": tk}
        data["claims"] = decide_claims(data)
        data["summary"] = summary(data, data["claims"])
        data = plain(data)
        cache.store("report", key, {"json": np.array(json.dumps(data))},
                    seconds=time.perf_counter() - t0)
    data["summary"] = summary(data, data["claims"])
    meta = data.pop("meta")
    who = "trained" if "trained" in data["born_trained"] else "born"
    c = data["born_trained"][who]["curve"]
    data.update(position=list(range(1, length + 1)), influence=c["mean"],
                influence_low=c["low"], influence_high=c["high"])
    return Result(data, meta=meta, columns=("position", "influence", "influence_low",
                                            "influence_high"))
