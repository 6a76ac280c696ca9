"""The replays' statistics: the interval of the measured sum of attention shares over text
windows."""
from __future__ import annotations

import numpy as np
from .... import stats

__all__ = ["sum_lambda"]


def sum_lambda(cap: dict, level: float = 0.95) -> tuple:
    r"""The sum over layers of the measured attention shares, :math:`\sum_t \lambda_t`, with a
    Student *t* interval over the **text windows** (:func:`posbias_nb.stats.mean_interval`):
    ``(estimate, low, high)``.

    ``cap`` is a :func:`posbias_nb.measure.capture` result; its ``lam_win`` (T, B) holds each
    layer's share per window.  The sum over layers of the per-layer means over windows equals
    the mean over windows of the per-window sums, so the estimate is ``cap["lam"].sum()`` (up to
    float rounding) and the windows -- independent draws of text, the unit of replication --
    are what the interval is over (not positions, which share their window).  Chapter
    :ref:`ch-replay`, two readings of the attention share.

    Raises
    ------
    ValueError
        ``cap`` without a ``lam_win`` of shape (layers, windows >= 2).

    Examples
    --------
    >>> cap = {"lam_win": np.array([[0.1, 0.2, 0.3], [0.2, 0.2, 0.2]])}
    >>> [round(v, 3) for v in sum_lambda(cap)]
    [0.4, 0.152, 0.648]
    """
    if not isinstance(cap, dict) or "lam_win" not in cap:
        raise ValueError("sum_lambda needs a capture result with 'lam_win' (per-window lambda); "
                         f"got keys {sorted(cap) if isinstance(cap, dict) else type(cap).__name__}")
    w = np.asarray(cap["lam_win"], dtype=float)
    if w.ndim != 2 or w.shape[1] < 2:
        raise ValueError(f"lam_win must be (layers, windows >= 2), got shape {w.shape}")
    return tuple(float(v) for v in stats.mean_interval(w.sum(axis=0), level=level))
