"""The results of the measurement-level ``posbias`` commands, as :class:`~posbias_nb.results.Result`.

``posbias theory``, ``profile``, ``rollout`` and ``models`` each call one function here and write
what it returns (``table()`` as CSV, ``to_json()`` as JSON); the experiments
(:mod:`posbias_nb.experiments`) build their own results the same way.  The formats:

* a profile: columns ``position`` (1..L) and ``influence`` (plus ``stderr`` for an estimate);
  JSON adds ``lambda`` (one per layer) for a rollout;
* ``meta``: what was run (model, weights, sizes, seed, versions).
"""
from __future__ import annotations

import numpy as np

from .. import __version__, models, theory
from ..results import Result
from .cached import capture, predict, profile
from .entry import library_versions

__all__ = ["theory_run", "profile_run", "rollout_run", "models_run", "retrieve_run"]


def layout_of(spec, depth: int | None = None) -> "theory.Layout":
    """A layout from ``posbias theory --layout``: a compact layout string
    (:func:`posbias_nb.theory.parse_layout`, repeated to ``depth`` layers when given) or a model
    (zoo name, local directory, hub id), whose config's layout is read
    (:func:`posbias_nb.models.config_layout`; sinks are decided by behaviour, on a loaded model
    only, so a config gives none).

    Raises
    ------
    ValueError
        A ``depth`` below 1, neither a layout nor a model (both reasons given), or a model
        layer kind the theory does not cover.
    """
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int)
                              or depth < 1):
        raise ValueError(f"--depth must be an integer >= 1 with --layout (a layout has at least "
                         f"one layer), got {depth!r}")
    try:
        return theory.parse_layout(spec, depth)
    except ValueError as e:
        layout_error = str(e)
    try:
        cfg = models.build_config(spec)
    except ValueError as e:
        raise ValueError(f"--layout {spec!r} is neither a layout ({layout_error}) nor a model "
                         f"({e})") from None
    lay = models.config_layout(cfg)
    if depth is not None and depth != lay.depth:
        raise ValueError(f"--depth {depth} differs from the {lay.depth} layers of {spec!r}")
    return lay


def theory_run(length: int, depth: int | None = 12, alpha="1", exact: bool = False,
               layout=None) -> Result:
    r"""The last row of :math:`((1-\alpha) I + \alpha M)^H` (:func:`posbias_nb.theory.influence`)
    as a result, or with ``layout`` (a layout string or a model, :func:`layout_of`) the born row
    of that layout (:func:`posbias_nb.theory.layout_influence`); exact rationals are written as
    ``p/q`` strings."""
    lay = None
    if layout is not None:
        lay = layout_of(layout, depth)
        depth = lay.depth
    elif depth is None:
        depth = 12
    if lay is None:
        row = theory.influence(length, depth, alpha=alpha, exact=exact)
    else:
        row = theory.layout_influence(lay, length, alpha=alpha, exact=exact)
    if exact:
        values = [f"{q.numerator}/{q.denominator}" if q.denominator != 1 else str(q.numerator)
                  for q in row]
    else:
        values = [float(v) for v in row]
    meta = {"command": "theory", "length": length, "depth": depth, "alpha": alpha,
            "exact": bool(exact), "version": __version__}
    if lay is not None:
        meta["layout"] = str(lay)
    return Result({"position": list(range(1, length + 1)), "influence": values}, meta=meta,
                  columns=("position", "influence"))


def _one_line_load_errors(model, call):
    try:
        return call()
    except OSError as e:  # unreadable local directory, broken weight files
        raise ValueError(f"cannot load {model!r}: {str(e).strip().splitlines()[0]}") from None


def profile_run(model, weights: str = "random", length: int = 512, *, rope: bool = True,
                exact: bool = False, probes: int = 8, batch: int = 1, seed: int = 0,
                target: str = "hidden", source: str = "text", device: str = "cpu",
                dtype: str = "float32", device_map=None, progress: bool = False) -> Result:
    """:func:`posbias_nb.measure.profile` as the result of ``posbias profile`` (and of
    ``posbias_nb.profile``): the same defaults as the command (512 positions here, where the
    cached :func:`~posbias_nb.measure.profile` of the chapters takes 1024)."""
    info = models.describe(model)
    res = _one_line_load_errors(model, lambda: profile(
        model, weights=weights, length=length, rope=rope,
        method="exact" if exact else "probes", probes=probes, batch=batch, seed=seed,
        target=target, source=source, device=device, progress=progress, dtype=dtype,
        device_map=device_map))
    estimate = not exact and target == "hidden"
    data = {"position": list(range(1, length + 1)),
            "influence": [float(v) for v in res["influence"]]}
    columns = ["position", "influence"]
    if estimate:
        data["stderr"] = [float(v) for v in res["stderr"]]
        columns.append("stderr")
        # JSON only: the squared norm of each probe (batch, probes, length), from which an
        # interval over probes follows for any reading (metrics.probe_readings)
        data["probe_samples"] = np.asarray(res["probe_samples"]).tolist()
    meta = {
        "command": "profile", "model": info["name"], "family": info["family"],
        "n_layers": info["n_layers"], "weights": weights, "rope": bool(rope),
        "length": length, "seed": seed, "batch": batch, "target": target,
        "method": "probes" if estimate else "exact", "probes": probes if estimate else None,
        "source": source, "device": device, "dtype": dtype, "device_map": device_map,
        "output": "last token, final hidden state after the final norm"
        if target == "hidden" else "probability of the argmax next token",
        "version": __version__, **library_versions(),
    }
    if batch > 1:
        meta["batch_stderr"] = [float(v) for v in res["batch_stderr"]]
    return Result(data, meta=meta, columns=columns)


def rollout_run(model, weights: str = "random", length: int = 128, *, mode: str = "residual",
                batch: int = 2, seed: int = 0, lambdas: bool = False) -> Result:
    """The rollout prediction of ``posbias rollout`` (:func:`posbias_nb.measure.predict` of the
    measured :func:`posbias_nb.measure.capture`), or with ``lambdas`` the measured
    :math:`\\lambda_t` per layer."""
    cap = _one_line_load_errors(model, lambda: capture(model, weights=weights, length=length,
                                                       batch=batch, seed=seed))
    lam = [float(v) for v in cap["lam"]]
    meta = {"command": "rollout", "model": cap["model"], "family": cap["family"],
            "weights": weights, "length": length, "seed": seed, "batch": batch, "mode": mode,
            "n_layers": len(lam), "sum_lambda": float(sum(lam)),
            "lambda_definition": "mean over tokens and sequences of |Attn(Norm x)| / "
                                 "(|x| + |Attn(Norm x)|), x the residual stream entering the layer",
            "version": __version__, **library_versions()}
    if lambdas:
        return Result({"layer": list(range(1, len(lam) + 1)), "lambda": lam}, meta=meta,
                      columns=("layer", "lambda"))
    row = predict(cap, mode)
    data = {"position": list(range(1, length + 1)), "influence": [float(v) for v in row],
            "lambda": lam}  # JSON arrays need not share a length: one lambda per layer
    return Result(data, meta=meta, columns=("position", "influence"))


def models_run() -> Result:
    """The zoo (:func:`posbias_nb.models.zoo_table`) as the result of ``posbias models``."""
    rows = models.zoo_table()
    data = {
        "name": [r["name"] for r in rows],
        "family": [r["family"] for r in rows],
        "layers": [r["n_layers"] for r in rows],
        "width": [r["hidden_size"] for r in rows],
        "context": [r["max_length"] for r in rows],
        "rope": ["yes" if r["has_rope"] else "no" for r in rows],
        "pretrained_installed": ["yes" if r["pretrained_available"] else "no" for r in rows],
        # free text: a comma would split a CSV field
        "pretrained_source": [r["pretrained_source"].replace(",", ";") for r in rows],
    }
    return Result(data, meta={"command": "models", "version": __version__}, columns=tuple(data))


def retrieve_run(data, corpus=None, retriever: str = "bm25", k: int = 10) -> Result:
    """``posbias retrieve``: rank a corpus for every question of a QA task file and say where
    each question's gold passage lands (chapter :ref:`ch-practice`, the pipeline study's
    retrievers: :class:`posbias_nb.tasks.corpus.BM25Index`,
    :class:`posbias_nb.measure.dense.DenseIndex`).

    ``data``: a QA task file (Liu et al.'s or the plain format,
    :func:`posbias_nb.tasks.qa.read_task_file`); ``corpus``: a corpus file
    (:func:`posbias_nb.tasks.corpus.read_corpus`), default every distinct passage of ``data``
    itself.  Columns ``line``, ``gold_rank`` (1-based; 0 where the gold passage is not in the
    top ``k``) and ``retrieved`` (the top ``k`` corpus indices, 0-based, best first, joined by
    ``;``); ``meta`` holds recall@k with its Wilson 95% interval.

    ValueError (the CLI: one line, exit 2) for a file that is not a QA task file, a corpus file
    that is not one (line and field named), an unknown retriever, ``k`` larger than the corpus,
    and a question whose gold passage is not in the corpus (recall cannot be measured).
    """
    from .. import stats
    from ..tasks import corpus as _corpus
    from ..tasks import qa

    if retriever not in _corpus.RETRIEVERS:
        raise ValueError(f"unknown retriever {retriever!r}; one of "
                         f"{', '.join(_corpus.RETRIEVERS)}")
    fmt, examples = qa.read_task_file(data)
    if fmt == "liu-kv":
        raise ValueError(f"{data}: a key-value file has no passages to retrieve; a QA file "
                         "(liu-qa or plain) is needed")
    if corpus is None:
        seen: dict = {}
        for e in examples:
            for d in e.documents:
                seen.setdefault((d.title, d.text), d)
        passages = list(seen.values())
    else:
        passages = _corpus.read_corpus(corpus)
    k = _corpus.check_k(k, len(passages))
    where = {}
    for i, d in enumerate(passages):
        where.setdefault((d.title, d.text), i)
    gold = []
    for e in examples:
        g = e.gold_document
        if (g.title, g.text) not in where:
            raise ValueError(f"{data}, line {e.line}: the question's gold passage "
                             f"({g.title!r}) is not in the corpus")
        gold.append(where[(g.title, g.text)])
    if retriever == "bm25":
        index = _corpus.BM25Index(passages)
    else:
        from .dense import DenseIndex
        index = DenseIndex(passages)
    got = index.search([e.question for e in examples], k)
    ranks = _corpus.gold_ranks(got, gold)
    hit = int((ranks >= 0).sum())
    share, lo, hi = stats.proportion_interval(hit, len(examples))
    data_ = {"line": [int(e.line) for e in examples],
             "gold_rank": [int(r) + 1 for r in ranks],
             "retrieved": [";".join(str(int(i)) for i in row) for row in got]}
    meta = {"command": "retrieve", "data": str(data),
            "corpus": "the file's own passages" if corpus is None else str(corpus),
            "passages": len(passages), "retriever": retriever, "k": k,
            "recall_at_k": share, "recall_interval": [lo, hi], "interval": "Wilson 95%",
            "version": __version__}
    return Result(data_, meta=meta, columns=("line", "gold_rank", "retrieved"))
