"""bench/stages.py: make test's stage table, and where the de-quantized weights go on a disk
with too little room (the CI run of 2026-12-08 failed with "No space left on device" while
safetensors saved them)."""
import importlib.util
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("make_stages", ROOT / "bench" / "stages.py")
stages = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stages)


def test_weights_stay_in_the_cache_folder_on_a_roomy_disk(tmp_path):
    assert stages.weights_dir(tmp_path, disk_free=50.0, shm_free=20.0, shm=tmp_path / "shm") is None


def test_a_full_disk_sends_the_weights_to_ram_where_ram_has_room(tmp_path):
    shm = tmp_path / "shm"
    got = stages.weights_dir(tmp_path / "cache", disk_free=1.0, shm_free=20.0, shm=shm)
    assert got is not None and got.parent == shm
    # RAM without the room: the default (the run may still fail, and the table says why)
    assert stages.weights_dir(tmp_path / "cache", disk_free=1.0, shm_free=3.9, shm=shm) is None
    assert stages.weights_dir(tmp_path / "cache", disk_free=1.0, shm_free=None, shm=shm) is None
    # two checkouts do not share a RAM folder
    other = stages.weights_dir(tmp_path / "other", disk_free=1.0, shm_free=20.0, shm=shm)
    assert other != got


def test_once_chosen_every_later_stage_keeps_the_ram_folder(tmp_path):
    shm = tmp_path / "shm"
    got = stages.weights_dir(tmp_path / "cache", disk_free=1.0, shm_free=20.0, shm=shm)
    got.mkdir(parents=True)
    # a later stage on a roomier disk (pip's downloads gone) still finds the weights there
    assert stages.weights_dir(tmp_path / "cache", disk_free=50.0, shm_free=20.0, shm=shm) == got


def test_weights_already_saved_on_the_disk_stay_there(tmp_path):
    saved = tmp_path / "cache" / "weights" / "smollm2-135m-dequantized-0123"
    saved.mkdir(parents=True)
    (saved / "config.json").write_text("{}")
    assert stages.weights_dir(tmp_path / "cache", disk_free=1.0, shm_free=20.0,
                              shm=tmp_path / "shm") is None


def test_the_makefile_exports_the_folder_weights_dir_names(tmp_path):
    """The Makefile reads bench/stages.py weights-dir once per make and exports what it prints
    as POSBIAS_WEIGHTS_DIR (nothing printed: nothing exported); a value given by the caller wins."""
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\n[ \"$2\" = weights-dir ] && echo /dev/shm/posbias-weights-test\n")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items()  # not the make that runs the tests
           if k not in ("POSBIAS_WEIGHTS_DIR", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}

    def exported(extra=()):
        out = subprocess.run(["make", "-C", str(ROOT), "-pn", f"PYTHON={fake}", *extra, "setup"],
                             capture_output=True, text=True, env=env).stdout
        return [ln for ln in out.splitlines() if ln.startswith("POSBIAS_WEIGHTS_DIR")]

    assert exported() == ["POSBIAS_WEIGHTS_DIR := /dev/shm/posbias-weights-test"]
    assert exported(["POSBIAS_WEIGHTS_DIR=/elsewhere"]) == ["POSBIAS_WEIGHTS_DIR = /elsewhere"]
    fake.write_text("#!/bin/sh\nexit 0\n")
    assert exported() == []


def test_the_table_flags_a_failed_stage_on_a_full_disk(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(stages, "LOG", tmp_path / "stages.jsonl")
    monkeypatch.setattr(stages, "EVENTS", tmp_path / "none.jsonl")
    stages.LOG.write_text('{"stage": "pip", "seconds": 50.0, "rc": 0, "disk_free_gib": 3.0}\n'
                          '{"stage": "chapters", "seconds": 500.0, "rc": 1, "disk_free_gib": 0.2}\n')
    stages.table(None)
    out = capsys.readouterr().out
    assert "FAILED  (the disk is all but full" in out and out.count("all but full") == 1
    stages.LOG.write_text('{"stage": "chapters", "seconds": 500.0, "rc": 1, "disk_free_gib": 30}\n')
    stages.table(None)
    assert "all but full" not in capsys.readouterr().out


