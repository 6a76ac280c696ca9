r"""The synthetic training data of the remedies lab: token layout, answer placement, batches.

Chapter :ref:`ch-remedies`; the experiment that trains on it is
:mod:`posbias_nb.experiments.remedy.lab` (its module docstring explains why these settings).  A
sequence of length ``L`` is ``BOS``, a haystack of filler tokens, the answer-bearing token at the
**answer position** ``p`` (``1 <= p <= L - 3``), ``distractors`` look-alike tokens at other random
positions, and a final query token at ``L - 1``; the one trained target is the next token after
the query.

* ``kv`` (key-value recall): each context token of a pair is one *fused* token standing for
  ``(key, value)`` (4 keys x 8 values); the query is a key and the target its value.  The answer
  is the single token at ``p``.
* ``needle``: the needle is a value token, the distractors come from a separate look-alike
  vocabulary; the query is a fixed marker and the target is the needle.

Answer placements (``"uniform"``, ``"start"``, ``"edges"``, and ``"middle"`` for the remedies)
are drawn by :func:`sample_positions`; the middle they refer to is :func:`middle_range`, the
central half of the answer positions ``1..L-3`` (the book's one middle,
:func:`posbias_nb.metrics.regions`).  Pure numpy: no torch.
"""
from __future__ import annotations

import numpy as np

from .._validate import choice, positive_int

__all__ = ["TASKS", "PLACEMENTS", "BOS", "MARKER", "N_KEYS", "N_VALUES", "KEYS", "VALUES",
           "PAIRS", "DISTRACT", "FILLER", "VOCAB", "EDGE_FRAC", "BIAS_P", "eval_positions",
           "answer_range", "middle_range", "sample_positions", "make_batch"]

TASKS = ("kv", "needle")
PLACEMENTS = ("uniform", "edges", "start")

BOS, MARKER = 0, 1
N_KEYS, N_VALUES = 4, 8
KEYS = np.arange(2, 2 + N_KEYS)                              # kv queries
VALUES = np.arange(6, 6 + N_VALUES)                          # the answers of both tasks
PAIRS = np.arange(14, 14 + N_KEYS * N_VALUES)                # kv: one token per (key, value)
DISTRACT = np.arange(46, 54)                                 # needle look-alikes
FILLER = np.arange(54, 64)                                   # the haystack
VOCAB = 64
EDGE_FRAC, BIAS_P = 0.15, 0.8


def answer_range(length: int) -> tuple[int, int]:
    """The positions an answer may take: ``1 .. length - 3`` (inclusive)."""
    return 1, int(length) - 3


def eval_positions(length: int, n: int = 8) -> np.ndarray:
    """``n`` answer positions spread evenly over ``1..length-3`` (chapter :ref:`ch-remedies`)."""
    length = positive_int("length", length, minimum=8)
    n = positive_int("n", n, minimum=2)
    return np.unique(np.round(np.linspace(1, length - 3, n)).astype(int))


def middle_range(L: int) -> tuple[int, int]:
    """The middle of the answer positions ``1..L-3``: ``(first, last)`` inclusive.

    A *task design* parameter: the region where the remedies of chapter :ref:`ch-remedies` act
    (the ``weighted`` loss, ``oversample`` and ``curriculum`` draw or up-weight answers here).  It
    is the book's one middle, :func:`posbias_nb.metrics.regions` (the central half), applied to the
    ``L - 3`` answer positions, so the remedies act where the chapter measures the middle (the
    central half of the evaluated positions,
    :func:`posbias_nb.experiments.remedy.lab.middle_and_edges`).
    Before version ``train-v4`` it was the middle third.

    >>> middle_range(64)
    (16, 46)
    """
    from ..metrics import regions

    hi = int(L) - 3
    mid = regions(hi).middle            # indices into the answer positions 1..hi
    return 1 + mid.start, mid.stop      # (1 + start) .. (1 + stop - 1)


def sample_positions(rng, n: int, length: int, placement: str) -> np.ndarray:
    """Answer positions for ``n`` training examples under a placement (see the module doc)."""
    if placement not in PLACEMENTS + ("middle",):
        raise ValueError(f"placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}")
    hi = length - 3
    if placement == "middle":
        a, b = middle_range(length)
        return rng.integers(a, b + 1, n)
    p = rng.integers(1, hi + 1, n)
    if placement == "uniform":
        return p
    w = max(1, int(round(EDGE_FRAC * hi)))
    biased = rng.random(n) < BIAS_P
    start = rng.integers(1, w + 1, n)
    if placement == "start":
        return np.where(biased, start, p)
    end = rng.integers(hi - w + 1, hi + 1, n)
    which = rng.random(n) < 0.5
    return np.where(biased, np.where(which, start, end), p)


def make_batch(task: str, positions, length: int, rng, distractors: int = 3):
    """Sequences with the queried key at ``positions`` (chapter :ref:`ch-remedies`).

    Parameters
    ----------
    task : {"kv", "needle"}
    positions : array_like of int, shape (B,)
        Answer positions, each in ``1..length-3``.
    length : int
    rng : numpy.random.Generator
    distractors : int
        ``kv``: the other key-value pairs (distinct keys, at most 3); ``needle``: look-alike
        tokens scattered in the haystack.

    Returns
    -------
    (ids, target) : int64 arrays of shape (B, length) and (B,)
        ``ids[:, p]`` holds the answer (the needle, or the queried pair), ``ids[:, -1]`` the
        query; the target is the value token to predict after the query.
    """
    choice("task", task, TASKS)
    pos = np.asarray(positions, dtype=np.int64).reshape(-1)
    L = int(length)
    if pos.size and (pos.min() < 1 or pos.max() > L - 3):
        bad = pos[(pos < 1) | (pos > L - 3)][0]
        raise ValueError(f"answer position {int(bad)} outside 1..{L - 3}")
    B = pos.size
    ids = rng.choice(FILLER, size=(B, L))
    ids[:, 0] = BOS
    target = rng.integers(0, N_VALUES, B)
    d = int(distractors)
    for b in range(B):
        p = int(pos[b])
        free = np.ones(L, bool)
        free[[0, L - 1, p]] = False
        others = rng.choice(np.flatnonzero(free), d, replace=False)
        if task == "needle":
            ids[b, p] = VALUES[target[b]]
            ids[b, others] = rng.choice(DISTRACT, d)
            ids[b, L - 1] = MARKER
        else:
            keys = rng.choice(N_KEYS, d + 1, replace=False)
            vals = np.r_[target[b], rng.integers(0, N_VALUES, d)]
            ids[b, np.r_[p, others]] = PAIRS[keys * N_VALUES + vals]
            ids[b, L - 1] = KEYS[keys[0]]
    target = VALUES[target]
    return ids.astype(np.int64), target
