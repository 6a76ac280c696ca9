"""The real-questions study's measurements: the pilot and test runs of Liu et al.'s files (through
``posbias task``), the prompts of a run, the gold spans, and the content-free and Jacobian
priors (cached, namespace ``realqa-jacobian``)."""
from __future__ import annotations

import numpy as np
from .... import measure, models, theory
from ....models.weights import file_sha256
from ....tasks import qa
from ....tasks.codec import Codec, token_span
from ...base import study
from .. import user_task as task_mod
from .config import JACOBIAN_DEFINITION, _checked, data_path

__all__ = ["pilot", "qa_run", "kv_run", "prior", "gold_spans", "jacobian_prior", "prepared"]


def _run(model, which, select, positions):
    d = _checked()
    if which == "qa":
        return task_mod.task_run(model, data_path("qa"), documents=d["documents"],
                                 positions=list(positions), select=list(select),
                                 max_new_tokens=d["max_new_tokens"], examples=None)
    return task_mod.task_run(model, data_path("kv"), keys=d["kv"]["keys"],
                             positions=list(positions), select=list(select),
                             max_new_tokens=d["max_new_tokens"], examples=None)


def pilot(model):
    """The pilot questions (QA file), every position and both reference lines."""
    d = _checked()
    return _run(model, "qa", d["pilot"], d["positions"])


def qa_run(model):
    """The test questions of the QA file: accuracy and log p per gold position."""
    d = _checked()
    return _run(model, "qa", d["test"], d["positions"])


def kv_run(model):
    """Liu et al.'s 75-key examples, cut to the design's keys, the gold record moved."""
    d = _checked()
    return _run(model, "kv", d["kv"]["test"], d["kv"]["positions"])


def prepared(res) -> dict:
    """The prompts of the QA run ``res`` (:func:`posbias_nb.experiments.base.prompts.prepare`): its
    questions, documents and gold slots, in its order."""
    if res.meta["format"] != "liu-qa":
        raise ValueError(f"a QA run is needed, got a {res.meta['format']!r} run")
    path = data_path("qa")
    _, exs = qa.read_task_file(path)
    where = {int(e.line): i for i, e in enumerate(exs)}
    select = [where[int(line)] for line in res.meta["example_lines"]]
    return task_mod.prepare(path, int(res.meta["documents"]),
                            [int(g) - 1 for g in res.meta["gold_documents"]], None, None, 0,
                            None, select)


def gold_spans(model, res) -> np.ndarray:
    """``(questions, positions, 3)``: for every document prompt of the QA run ``res`` (its
    questions, documents and gold slots, in its order), the gold document's token span
    ``[a, b)`` and the prompt's length in tokens, as the model's tokenizer encodes it."""
    P = prepared(res)
    tok = models.packaged_tokenizer(model)
    codec = Codec(tok, len(tok))
    out = np.zeros((len(P["items"]), len(P["positions"]), 3), dtype=np.int64)
    for i, it in enumerate(P["items"]):
        for j, (p, text) in enumerate(zip(P["positions"], it["prompts"])):
            full, off = codec.render(text)
            ids, offs = codec.encode(full, prompt=True)
            c0 = text.index(f"Document [{p + 1}](Title:")
            nxt = text.find(f"\nDocument [{p + 2}](Title:", c0)
            c1 = nxt if nxt >= 0 else text.index("\n\nQuestion:", c0)
            a, b = token_span(offs, off + c0, off + c1)
            out[i, j] = (a, b, len(ids))
    return out


def prior(model, res) -> np.ndarray:
    """``(questions, positions)``: the content-free rollout prior of the gold document in each
    prompt, per token (the document's share of the row, :func:`posbias_nb.measure.span_profile`,
    over its token count, times the prompt's length: 1 is the prompt's average token)."""
    c = _checked()["prior"]["capture"]
    cap = measure.capture(model, "pretrained", length=c["length"], batch=c["batch"],
                          seed=c["seed"])
    lam = np.asarray(cap["lam"], dtype=np.float64)
    lay = models.config_layout(models.build_config(model))
    if lay.depth != lam.size:
        raise ValueError(f"{model}: a layout of {lay.depth} layers for {lam.size} values of "
                         "lambda")
    S = gold_spans(model, res)
    rows = {}
    out = np.zeros(S.shape[:2])
    for i in range(S.shape[0]):
        for j in range(S.shape[1]):
            a, b, T = (int(v) for v in S[i, j])
            if T not in rows:
                rows[T] = theory.layout_influence(lay, T, lam)
            out[i, j] = measure.span_profile(rows[T], [(a, b)])[0] / (b - a) * T
    return out


def jacobian_prior(model, res, progress: bool = False, weights: str = "pretrained") -> np.ndarray:
    """``(questions, positions)``: the measured influence of the gold document in each prompt of
    the QA run ``res``, per token (the design's ``prior_jacobian``: the Jacobian profile of the
    prompt's last hidden state, :func:`posbias_nb.measure.jacobian.influence_profile`, its share
    on the document by :func:`posbias_nb.measure.span_profile`, over the document's token count,
    times the prompt's length: 1 is the prompt's average token).  Cached, one profile per
    prompt; the probes of prompt ``k`` (question-major) are seeded ``seed + k``.
    ``weights="random"``: the random-init twin (the design's ``born`` initialisation seed) read
    on the same prompts, a description beside the trained one that decides nothing."""
    from .... import cache
    from ....measure import entry

    c = _checked()["prior_jacobian"]
    S = gold_spans(model, res)
    if weights not in ("pretrained", "random"):
        raise ValueError(f"weights must be 'pretrained' or 'random', got {weights!r}")
    init = int(c["born"]["init_seed"]) if weights == "random" else 0
    info = entry.checked(model, weights, 2, 1, init)
    params = {"model": info["name"], "fingerprint": info["fingerprint"],
              "data": file_sha256(data_path("qa")), "lines": [int(x) for x in
                                                         res.meta["example_lines"]],
              "documents": int(res.meta["documents"]),
              "gold": [int(g) for g in res.meta["gold_documents"]],
              "probes": int(c["probes"]), "seed": int(c["seed"]), "def": JACOBIAN_DEFINITION,
              **({} if weights == "pretrained" else {"weights": weights, "init_seed": init}),
              **entry.library_versions()}

    P = prepared(res)
    texts = [t for it in P["items"] for t in it["prompts"]]
    loaded: dict = {}

    def one(k: int) -> dict:
        """Prompt ``k``'s profile alone (its probes seeded ``seed + k``): the whole entry is
        these rows end to end, so a re-measurement can sample prompts (cache.Parts)."""
        from ....measure.jacobian import influence_profile

        if not loaded:
            m, tok, _ = study.load(model, weights, init)
            loaded.update(m=m, codec=Codec(tok, m.get_input_embeddings().num_embeddings))
        ids = study.encode(loaded["codec"], texts[k])
        r = influence_profile(loaded["m"], np.asarray(ids)[None], target="hidden",
                              method="probes", probes=int(c["probes"]), seed=int(c["seed"]) + k)
        return {"row": np.asarray(r["per_sequence"][0], dtype=np.float64)}

    def compute():
        import sys

        from tqdm import tqdm

        rows = [one(k)["row"] for k in tqdm(range(len(texts)), disable=not progress,
                                            file=sys.stderr, leave=False, desc="jacobian",
                                            unit="prompt")]
        return {"flat": np.concatenate(rows), "lens": np.array([len(r) for r in rows])}

    def take(arrays, k: int) -> dict:
        ends = np.cumsum(arrays["lens"])
        return {"row": np.asarray(arrays["flat"][ends[k] - arrays["lens"][k]:ends[k]])}

    got = cache.cached("realqa-jacobian", params, compute,
                       parts=cache.Parts(len(texts), one, take))
    ends = np.cumsum(got["lens"])
    out = np.zeros(S.shape[:2])
    for k, (e, n) in enumerate(zip(ends, got["lens"])):
        i, j = divmod(k, S.shape[1])
        a, b, T = (int(v) for v in S[i, j])
        if int(n) != T:
            raise RuntimeError(f"prompt {k}: a profile of {int(n)} tokens for a prompt of {T}")
        row = np.asarray(got["flat"][e - n:e], dtype=np.float64)
        out[i, j] = measure.span_profile(row, [(a, b)])[0] / (b - a) * T
    return out
