"""Shared test set-up: derandomized property tests on CI, and one isolated cache per test.

Hypothesis profiles (select with ``HYPOTHESIS_PROFILE``; the Makefile's ``unit`` target selects
``ci``):

* ``ci``  -- ``derandomize=True`` and no example database, so a run is the same every time and a
  failure found once is not replayed from a local ``.hypothesis`` folder: CI cannot fail by chance.
* ``dev`` -- random exploration with more examples (``make unit-explore``), for local bug hunting.

Without ``HYPOTHESIS_PROFILE`` the ``ci`` profile is loaded: a plain ``pytest`` run cannot fail
by chance either (hypothesis's own default draws new examples every run, with a 200 ms
deadline per example that a busy machine can miss).

Every test runs with ``POSBIAS_CACHE_DIR`` pointing at its own temporary folder, so no test reads
or writes the user's cache and no test sees another's results.  De-quantized pretrained weights
are not measurements: they stay where the chapters put them (``POSBIAS_WEIGHTS_DIR``), so the
tests of packaged weights reuse them instead of de-quantizing again.
"""
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True,
                          deadline=None,  # a slow or busy machine must not fail an example
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=500, deadline=None)
# unset: "ci", so that any run of the suite (make, CI, a reviewer's plain pytest) is derandomized
# and has no deadline; exploring is asked for by name (HYPOTHESIS_PROFILE=dev, make unit-explore)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def _shared_weights_dir() -> str:
    if os.environ.get("POSBIAS_WEIGHTS_DIR"):
        return os.environ["POSBIAS_WEIGHTS_DIR"]
    d = os.environ.get("POSBIAS_CACHE_DIR", "")
    if d.lower() == "off":
        return str(Path(os.environ.get("TMPDIR", "/tmp")) / "posbias_nb" / "weights")
    return str((Path(d) if d else Path.home() / ".cache" / "posbias_nb") / "weights")


_WEIGHTS = _shared_weights_dir()


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Each test gets a fresh, empty measurement cache; shared de-quantized weights stay visible."""
    monkeypatch.setenv("POSBIAS_WEIGHTS_DIR", _WEIGHTS)
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path_factory.mktemp("posbias-cache")))
    yield


def _tiny_llama(tmp_path_factory, layers: int) -> str:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=64,
                      num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=2,
                      max_position_embeddings=4096)
    d = tmp_path_factory.mktemp(f"llama-{layers}x-4k")
    LlamaForCausalLM(cfg).save_pretrained(str(d))
    return str(d)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny Llama with a 4096-token context and no tokenizer (its prompts read as UTF-8
    bytes): long task-file prompts fit (tests of posbias task and report --task-data)."""
    return _tiny_llama(tmp_path_factory, 2)


@pytest.fixture(scope="module")
def llama4_dir(tmp_path_factory):
    """The same with four layers (Ms-PoE patches layers 2 to T-1: two of them here; the
    calibration the later half): the tests of posbias fix."""
    return _tiny_llama(tmp_path_factory, 4)
