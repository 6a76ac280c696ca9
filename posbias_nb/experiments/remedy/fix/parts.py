"""The two parts of ``posbias fix``: the user's examples split by example into a tuning part
and a test part, the gold positions, the middle and edge slots.
"""
from __future__ import annotations

import numpy as np

from .... import metrics
from ...._validate import positive_int
from .config import DEFAULTS

__all__ = ["split", "fix_positions"]


def split(n: int, test_share: float = DEFAULTS["test_share"], seed: int = 0):
    """The tuning and the test part of ``n`` examples (0-based indices into the chosen
    examples, each part sorted): a permutation seeded by ``seed``, its first
    ``round(test_share * n)`` entries the test part.  Both parts need at least 2 examples.

    >>> split(6, 0.5, seed=0)
    ([2, 3, 4], [0, 1, 5])
    """
    n = positive_int("examples", n, minimum=4)
    if not 0 < float(test_share) < 1:
        raise ValueError(f"test_share must be in (0, 1), got {test_share!r}")
    k = int(round(float(test_share) * n))
    if k < 2 or n - k < 2:
        raise ValueError(f"a split of {n} examples at test share {test_share} leaves "
                         f"{n - k} to tune and {k} to test; each part needs 2 or more")
    perm = np.random.default_rng([int(seed), 0xF1C5]).permutation(n)
    return sorted(int(i) for i in perm[k:]), sorted(int(i) for i in perm[:k])


def fix_positions(k: int) -> list[int]:
    """The gold slots (0-based) of ``k`` documents or records: five evenly spaced, first and
    last included (all of them for ``k <= 5``).

    >>> fix_positions(10), fix_positions(20), fix_positions(4)
    ([0, 2, 4, 7, 9], [0, 5, 10, 14, 19], [0, 1, 2, 3])
    """
    k = positive_int("documents", k, minimum=2)
    if k <= 5:
        return list(range(k))
    return sorted({int(v) for v in np.round(np.linspace(0, k - 1, 5))})


def slot_groups(n_pos: int) -> dict:
    r = metrics.regions(n_pos)
    mid = list(range(n_pos))[r.middle]
    return {"middle": mid, "edges": [0, n_pos - 1]}
