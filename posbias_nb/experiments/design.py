r"""Designs locked before their data: one frozen object per study, its hash in a registry.

Every study that decides verdicts declares its design (examples, grids, windows, probes,
thresholds, the families of comparisons) as one :class:`Design`.  Its :attr:`~Design.hash` is
the SHA-256 of its canonical JSON.  The registry, ``posbias_nb/data/designs.json``, holds for
each study the list of its designs, each with the date and the reason of the change; a change
of design is committed, with its entry, before the measurement it governs.  :func:`check`
raises when a study's design is not the registry's latest entry, so a design that moves
without a dated reason fails the tests (``tests/test_design.py``) and every chapter that
reads it.  The chapters print the hash and the history (:func:`history_markdown`), so "fixed
before the data" can be checked from the record: the registry's dates and the git log of this
file against those of the measurements.

Entries recorded after the fact (before this lock existed) carry ``"hash": null`` and say so.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType

__all__ = ["Design", "freeze", "registry", "check", "history", "history_markdown",
           "REGISTRY"]

#: The registry file inside the package.
REGISTRY = "designs.json"


def freeze(value):
    """A deep, read-only copy of ``value``: dicts become read-only mappings, lists and tuples
    tuples.  Only JSON-like values (str, int, finite float, bool, None) are accepted."""
    if isinstance(value, dict):
        for k in value:
            if not isinstance(k, str):
                raise ValueError(f"design keys must be strings, got {k!r}")
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, MappingProxyType):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"design values must be finite, got {value!r}")
        return value
    raise ValueError(f"design values must be JSON-like, got {type(value).__name__}: {value!r}")


def _plain(value):
    if isinstance(value, MappingProxyType):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class Design:
    """The frozen design of one study: ``study`` (its name in the registry) and ``spec`` (a
    JSON-like dict, frozen deeply).  ``design.spec["test"]`` reads it; nothing writes it."""

    study: str
    spec: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self):
        if not isinstance(self.study, str) or not self.study:
            raise ValueError(f"study must be a non-empty string, got {self.study!r}")
        object.__setattr__(self, "spec", freeze(dict(self.spec)))

    def __getitem__(self, key):
        return self.spec[key]

    def to_json(self) -> str:
        """Canonical JSON: sorted keys, no spaces (what is hashed)."""
        return json.dumps(_plain(self.spec), sort_keys=True, separators=(",", ":"))

    @property
    def hash(self) -> str:
        """SHA-256 of :meth:`to_json`, hex."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    def as_dict(self) -> dict:
        """A plain (mutable) copy of the spec."""
        return _plain(self.spec)


def registry(path=None) -> dict:
    """The registry: ``{study: [{"hash", "date", "reason"}, ...]}``, oldest first."""
    if path is None:
        text = (resources.files("posbias_nb") / "data" / REGISTRY).read_text(encoding="utf-8")
    else:
        with open(path) as f:
            text = f.read()
    reg = json.loads(text)
    if not isinstance(reg, dict):
        raise ValueError("the design registry must be an object of studies")
    for study, entries in reg.items():
        if not isinstance(entries, list) or not entries:
            raise ValueError(f"registry: study {study!r} has no entries")
        for e in entries:
            if not {"hash", "date", "reason"} <= set(e):
                raise ValueError(f"registry: an entry of {study!r} lacks hash, date or reason")
    return reg


def history(study: str, path=None) -> list:
    """The registry's entries of ``study``, oldest first (ValueError if it has none)."""
    reg = registry(path)
    if study not in reg:
        raise ValueError(f"study {study!r} is not in the design registry")
    return list(reg[study])


def check(design: Design, path=None) -> dict:
    """The registry's latest entry for ``design.study``; ValueError unless its hash is
    ``design.hash`` (the design changed without a dated entry, or the entry was not updated)."""
    entries = history(design.study, path)
    last = entries[-1]
    if last["hash"] != design.hash:
        raise ValueError(
            f"the design of study {design.study!r} has hash {design.hash[:12]}, but the "
            f"registry's latest entry ({last['date']}) records "
            f"{str(last['hash'])[:12]}: add an entry with the date and the reason of the change "
            f"to posbias_nb/data/{REGISTRY}, and commit it before measuring")
    return last


def history_markdown(design: Design, path=None) -> str:
    """The study's design history as a Markdown table (date, hash, reason), its current hash
    checked first (:func:`check`)."""
    check(design, path)
    rows = ["| date | design hash | change |", "|---|---|---|"]
    for e in history(design.study, path):
        h = f"`{e['hash'][:12]}`" if e["hash"] else "(not recorded)"
        rows.append(f"| {e['date']} | {h} | {e['reason']} |")
    return "\n".join(rows)
