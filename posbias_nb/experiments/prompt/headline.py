"""The book's headline figure: the influence profile at birth beside the U on real questions.

The introduction (chapter :ref:`ch-intro`) and the README show one figure,
:func:`posbias_nb.plots.headline_figure`, of the data :func:`headline_data` gathers from two
chapters' own measurements (read from the cache, so the figure costs nothing after them):

- **at birth**: GPT-2 small at random initialization, the seed paper's length, the Jacobian
  influence of each input position on the last hidden state, mean over text windows (chapter
  :ref:`ch-init`, :data:`BORN`), beside the last row of :math:`N^H` with :math:`H` the number
  of layers and :math:`\\alpha` fitted to it (:func:`posbias_nb.metrics.profile_summary`): a
  realistic :math:`\\alpha`, not a chosen one;
- **on real questions**: the trained zoo models' teacher-forced log p of the gold answer at each
  slot of the gold passage among ten minus at the middle slot, paired by question (the
  chapter's verdicts are paired), with its t interval over questions (chapter
  :ref:`ch-realqa`, :func:`posbias_nb.experiments.prompt.realqa.qa_run`).
"""
from __future__ import annotations

import numpy as np

__all__ = ["BORN", "headline_data"]

#: The at-birth measurement of chapter :ref:`ch-init` that the headline shows: GPT-2 small at
#: L = 1024 (the seed paper's length), 8 Hutchinson probes, 8 text windows, seed 0.
BORN = dict(model="gpt2", length=1024, probes=8, batch=8, seed=0)


def headline_data() -> dict:
    """The two panels' data, from the cached measurements of chapters :ref:`ch-init` and
    :ref:`ch-realqa`.

    Returns a dict with ``born`` (``model``, ``L``, ``H``, ``alpha``, ``measured`` and
    ``theory``: the mean measured profile and the theory's row, each normalised to sum 1,
    ``jmin`` the position of the theory row's minimum, 1-based) and ``real`` (model name ->
    :func:`posbias_nb.experiments.prompt.realqa.paired_by_slot` of its test questions).
    """
    from ... import measure, metrics, models
    from . import realqa

    b = BORN
    prof = measure.profile(b["model"], length=b["length"], probes=b["probes"],
                           batch=b["batch"], seed=b["seed"], progress=False)
    H = next(r["n_layers"] for r in models.zoo_table() if r["name"] == b["model"])
    s = metrics.profile_summary(prof["per_sequence"], H)
    t = np.asarray(s["t"], dtype=float)
    born = dict(model=b["model"], L=int(s["L"]), H=int(H), alpha=float(s["alpha"]),
                measured=np.asarray(s["p"], dtype=float), theory=t,
                jmin=int(np.argmin(t)) + 1)
    real = {m: realqa.paired_by_slot(realqa.qa_run(m))
            for m in realqa.DESIGN.as_dict()["models"]}
    return dict(born=born, real=real)
