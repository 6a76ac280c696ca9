"""The result of a run: what every ``posbias`` subcommand writes, in one format.

A :class:`Result` is a dict of the run's numbers (so ``res["influence"]`` works as before) with
three more things: :meth:`Result.table` (the named, equal-length columns that the CSV output
writes), :attr:`Result.meta` (what was run: model, sizes, seeds, versions) and
:meth:`Result.to_json` (the JSON object).  The command line only writes them
(:func:`write`); every experiment and measurement builds its own.
"""
from __future__ import annotations

import json

import numpy as np

__all__ = ["Result", "write", "plain"]


def plain(v):
    """JSON-able copy of ``v``: numpy arrays and scalars become lists, floats and ints."""
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return plain(v.tolist())
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


class Result(dict):
    """A run's numbers (a dict), its CSV ``columns`` and its ``meta``.

    Parameters
    ----------
    data : mapping
        The numbers, as the run returns them.
    meta : dict
        What was run.
    columns : sequence of str
        The keys of ``data`` that :meth:`table` writes, in order; each an equal-length 1-D array
        or list.
    json_keys : sequence of str or None
        The keys :meth:`to_json` writes besides ``meta`` (default: every key of ``data``).

    Examples
    --------
    >>> r = Result({"position": [1, 2], "influence": [0.25, 0.75]}, meta={"model": "x"},
    ...            columns=("position", "influence"))
    >>> r.table()
    {'position': [1, 2], 'influence': [0.25, 0.75]}
    >>> r.to_json()["meta"]
    {'model': 'x'}
    """

    def __init__(self, data, *, meta: dict, columns, json_keys=None):
        super().__init__(data)
        self.meta = dict(meta)
        self["meta"] = self.meta
        self.columns = tuple(columns)
        missing = [c for c in self.columns if c not in self]
        if missing:
            raise ValueError(f"columns {missing} are not in the result")
        n = {len(self[c]) for c in self.columns}
        if len(n) > 1:
            raise ValueError(f"table columns differ in length: {sorted(n)}")
        self.json_keys = tuple(json_keys) if json_keys is not None else None

    def table(self) -> dict:
        """The rows of the CSV output: ``{column: list}``, equal lengths."""
        return {c: plain(self[c]) for c in self.columns}

    def to_json(self) -> dict:
        """The JSON object: the numbers (lists) and ``meta``."""
        keys = self.json_keys if self.json_keys is not None else [k for k in self if k != "meta"]
        out = {k: plain(self[k]) for k in keys}
        out["meta"] = plain(self.meta)
        return out


def _cell(v) -> str:
    return repr(v) if isinstance(v, float) else str(v)


def write(result: Result, fmt: str, out) -> None:
    """Write ``result`` to the text stream ``out``: ``"csv"`` (its :meth:`~Result.table`, a
    header line then one line per row) or ``"json"`` (its :meth:`~Result.to_json`, one line)."""
    if fmt == "json":
        out.write(json.dumps(result.to_json()) + "\n")
        return
    if fmt != "csv":
        raise ValueError(f"format must be 'csv' or 'json', got {fmt!r}")
    cols = result.table()
    out.write(",".join(cols) + "\n")
    for row in zip(*cols.values()):
        out.write(",".join(_cell(v) for v in row) + "\n")
