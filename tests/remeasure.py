"""What the tests of the per-entry re-measurement share: a run as make test makes it, reading a
recorded folder and re-measuring the listed entries into a fresh live cache, with its cache log."""
from __future__ import annotations

import json
from pathlib import Path


def as_make_test(monkeypatch, tmp_path: Path, recorded: Path, entries, name: str) -> Path:
    """Point the cache at ``recorded`` (read-only), re-measure ``entries`` (``namespace/key``
    strings) into the live cache ``tmp_path/live-NAME``, log its events; returns the log."""
    keys = tmp_path / f"keys-{name}.txt"
    keys.write_text("".join(f"{e}\n" for e in entries))
    log = tmp_path / f"{name}.jsonl"
    for k, v in {"POSBIAS_RECORDED_DIR": recorded, "POSBIAS_RECORDED_VERIFY_KEYS": keys,
                 "POSBIAS_CACHE_DIR": tmp_path / f"live-{name}", "POSBIAS_CACHE_LOG": log}.items():
        monkeypatch.setenv(k, str(v))
    return log


def events(log: Path) -> list[dict]:
    return [json.loads(x) for x in Path(log).read_text().splitlines()]
