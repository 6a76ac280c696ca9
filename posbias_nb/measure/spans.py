r"""Influence read at the unit a task uses: summed over token spans (documents, key-value pairs).

Chapter *From prior to behaviour* reads the prior per token of the gold value (eq.
``eq-ret-share``); a practitioner's task retrieves whole units (a key-value pair, a document), so
the report (:mod:`posbias_nb.experiments.report`) reads the same profile summed over each unit:

.. math::
    s_u = \sum_{j \in S_u} I_j \Big/ \sum_{i=1}^{T} I_i

for spans :math:`S_u = [a_u, b_u)` of token positions (0-indexed, end excluded).  Pure numpy.
"""
from __future__ import annotations

import numpy as np

__all__ = ["span_profile"]


def span_profile(profile, spans, normalize: bool = True) -> np.ndarray:
    r"""Influence summed over each token span: ``out[u] = sum(profile[a_u:b_u])``, divided by
    ``sum(profile)`` when ``normalize`` (the share of the whole context's influence that each
    unit receives).  Chapter *From prior to behaviour*, eq. ``eq-ret-share`` summed over a unit.

    Parameters
    ----------
    profile : array_like, 1-D
        Nonnegative, finite influence per position (length ``T``).
    spans : sequence of (a, b)
        Token ranges ``0 <= a < b <= T``, end excluded.  Spans may leave gaps (the instruction
        and the question belong to no unit); they must not overlap, so that the shares add up
        to at most 1.
    normalize : bool
        Divide by the total influence of the profile (default) or return raw sums.

    Returns
    -------
    numpy.ndarray
        One value per span, in the order given.

    Raises
    ------
    ValueError
        A profile that is not 1-D, nonnegative and finite (or sums to 0 with ``normalize``);
        no spans; a span that is not two integers ``0 <= a < b <= T``; overlapping spans.

    Examples
    --------
    >>> span_profile([1.0, 1.0, 2.0, 4.0], [(0, 2), (2, 4)]).tolist()
    [0.25, 0.75]
    >>> span_profile([1.0, 1.0, 2.0, 4.0], [(3, 4)], normalize=False).tolist()
    [4.0]
    """
    p = np.asarray(profile, dtype=np.float64)
    if p.ndim != 1 or p.size < 1:
        raise ValueError(f"profile must be a non-empty 1-D array, got shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError("profile must be nonnegative and finite")
    try:
        S = [(int(a), int(b)) for a, b in spans]
        raw = [tuple(s) for s in spans]
    except (TypeError, ValueError):
        raise ValueError(f"spans must be pairs (a, b) of integers, got {spans!r}") from None
    if not S:
        raise ValueError("spans is empty: give at least one (a, b)")
    T = p.size
    for (a, b), r in zip(S, raw):
        if any(float(x) != int(x) for x in r) or not 0 <= a < b <= T:
            raise ValueError(f"span {r!r} is not a range 0 <= a < b <= {T}")
    order = sorted(S)
    for (a0, b0), (a1, b1) in zip(order, order[1:]):
        if a1 < b0:
            raise ValueError(f"spans {(a0, b0)} and {(a1, b1)} overlap")
    c = np.concatenate([[0.0], np.cumsum(p)])
    out = np.array([c[b] - c[a] for a, b in S])
    if normalize:
        if c[-1] <= 0:
            raise ValueError("profile sums to 0: shares are undefined")
        out = out / c[-1]
    return out
