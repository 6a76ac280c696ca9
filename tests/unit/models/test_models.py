"""The model zoo: real configurations, seeded initialization, the RoPE switch, local directories."""
import os

import numpy as np

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from posbias_nb import models  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def test_zoo_has_the_real_sizes():
    g = models.build_config("gpt2")
    sizes = (g.n_layer, g.n_embd, g.n_head, g.n_positions, g.vocab_size)
    assert sizes == (12, 768, 12, 1024, 50257)
    assert g.activation_function == "gelu_new" and g.tie_word_embeddings
    q = models.build_config("qwen2-0.5b")
    assert (q.num_hidden_layers, q.hidden_size, q.intermediate_size) == (24, 896, 4864)
    assert (q.num_attention_heads, q.num_key_value_heads, q.vocab_size) == (14, 2, 151936)
    assert q.rope_parameters["rope_theta"] == 1e6 and q.rms_norm_eps == 1e-6
    assert q.tie_word_embeddings
    assert models.ZOO["gpt2"].max_length == 1024 and models.ZOO["qwen2-0.5b"].max_length == 32768
    d = models.describe("qwen2-0.5b")
    assert d["n_layers"] == 24 and d["has_rope"] and not models.describe("gpt2")["has_rope"]


def test_tiny_twins_share_the_family():
    for big, tiny in [("gpt2", "gpt2-tiny"), ("qwen2-0.5b", "qwen2-tiny")]:
        a, b = models.build_config(big), models.build_config(tiny)
        assert type(a) is type(b)
        assert models.describe(tiny)["n_layers"] == 2


def test_unknown_model_lists_the_zoo(tmp_path):
    with pytest.raises(ValueError, match="unknown model 'nope'.*gpt2.*qwen2-0.5b"):
        models.resolve("nope")
    with pytest.raises(ValueError, match="without config.json"):
        models.load(str(tmp_path))


@pytest.mark.parametrize("kw,needle", [
    (dict(weights="trained"), "weights"),
    (dict(seed=-1), "seed"),
    (dict(attn="flash"), "attn"),
    (dict(device="tpu"), "device"),
    (dict(weights="pretrained"), "not installed"),
])
def test_load_rejects_bad_arguments(kw, needle):
    with pytest.raises(ValueError, match=needle):
        models.load("gpt2-tiny", **kw)


def test_cuda_without_cuda_is_a_value_error():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="CUDA is not available"):
        models.load("gpt2-tiny", device="cuda")


@pytest.mark.parametrize("name", ["gpt2-tiny", "qwen2-tiny"])
def test_same_seed_same_weights(name):
    a, tok, info = models.load(name, seed=5)
    b, _, _ = models.load(name, seed=5)
    c, _, _ = models.load(name, seed=6)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)
    assert tok is None
    assert not a.training and all(not p.requires_grad for p in a.parameters())
    assert next(a.parameters()).dtype == torch.float32
    assert info["n_layers"] == 2 and info["weights"] == "random" and info["seed"] == 5


def test_rope_switch_changes_nothing_but_the_rotation(monkeypatch):
    on, _, i_on = models.load("qwen2-tiny", seed=2)
    off, _, i_off = models.load("qwen2-tiny", seed=2, rope=False)
    assert i_on["rope"] and not i_off["rope"] and i_off["has_rope"]
    # every parameter and buffer identical
    s_on, s_off = on.state_dict(), off.state_dict()
    assert s_on.keys() == s_off.keys() and all(torch.equal(s_on[k], s_off[k]) for k in s_on)
    b_on, b_off = dict(on.named_buffers()), dict(off.named_buffers())
    assert all(torch.equal(b_on[k], b_off[k]) for k in b_on)
    ids = torch.randint(0, 300, (2, 17), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        y_on, y_off = on(ids).logits, off(ids).logits
    assert not torch.allclose(y_on, y_off)  # RoPE does something...
    # ... and switching it off is exactly "no rotation": same output as a model whose rotary
    # application is replaced by the identity
    import transformers.models.qwen2.modeling_qwen2 as q2

    monkeypatch.setattr(q2, "apply_rotary_pos_emb", lambda q, k, cos, sin, *a, **kw: (q, k))
    with torch.no_grad():
        y_id = on(ids).logits
    assert torch.equal(y_id, y_off)
    monkeypatch.undo()
    # the switch is reversible
    models.set_rope(off, True)
    with torch.no_grad():
        assert torch.equal(off(ids).logits, y_on)


def test_rope_off_for_a_model_without_rope():
    m, _, info = models.load("gpt2-tiny")
    assert not info["has_rope"] and not models.has_rope(m)
    with pytest.raises(ValueError, match="no rotary position embeddings"):
        models.load("gpt2-tiny", rope=False)
    with pytest.raises(ValueError, match="no rotary position embeddings"):
        models.set_rope(m, False)


def test_local_directory(tmp_path):
    src, _, _ = models.load("qwen2-tiny", seed=9)
    cfg_only = tmp_path / "cfg"
    src.config.save_pretrained(cfg_only)
    m, tok, info = models.load(str(cfg_only), weights="random", seed=9)
    assert info["family"] == "qwen2" and info["n_layers"] == 2 and tok is None
    assert all(torch.equal(a, b) for a, b in zip(m.state_dict().values(),
                                                 src.state_dict().values()))
    with pytest.raises(ValueError, match="no weight files"):
        models.load(str(cfg_only), weights="pretrained")
    full = tmp_path / "full"
    src.save_pretrained(full)
    p, _, pinfo = models.load(str(full), weights="pretrained")
    assert pinfo["weights"] == "pretrained" and pinfo["seed"] is None
    sp, ss = p.state_dict(), src.state_dict()
    assert all(torch.equal(sp[k], ss[k]) for k in ss)
    d = models.describe(str(full))
    assert d["pretrained_available"] and d["max_length"] == src.config.max_position_embeddings
    assert models.describe(str(full))["fingerprint"] == d["fingerprint"]


def test_a_spec_loads_without_registering_and_the_table_rejects_duplicates():
    """The zoo is an explicit table: a spec loads as it is, and a table with a repeated name
    (here: an entry whose twin takes an existing name) is refused."""
    from transformers import GPT2Config

    from posbias_nb.models import zoo

    spec = models.ModelSpec("test-gpt2-mini", "gpt2", "a 1-layer GPT-2 for this test",
                            lambda **o: GPT2Config(**{**dict(n_layer=1, n_embd=16, n_head=2,
                                                             vocab_size=50), **o}),
                            max_length=64)
    m, _, info = models.load(spec)
    assert info["n_layers"] == 1 and "test-gpt2-mini" not in models.names()
    clash = models.ModelSpec("x", "gpt2", "", spec.config, 64, tiny=dict(n_layer=1, n_embd=8),
                             tiny_name="gpt2-tiny")
    with pytest.raises(ValueError, match="twice"):
        zoo._table((*zoo._ENTRIES, clash))
    assert set(zoo._table(zoo._ENTRIES)) == set(models.ZOO)


# ------------------------------------------------------------------ models larger than a device
def _saved_tiny(tmp_path, name="qwen2-tiny"):
    src, _, _ = models.load(name, seed=3)
    d = tmp_path / name
    src.save_pretrained(d)
    return d


def test_dtype_and_device_map_reach_from_pretrained(tmp_path, monkeypatch):
    """--device-map auto cannot be tried on several GPUs here: check that it reaches
    ``from_pretrained`` (where accelerate shards the model), with the dtype."""
    import transformers

    d = _saved_tiny(tmp_path)
    seen = {}
    real = transformers.AutoModelForCausalLM.from_pretrained

    def spy(*a, **kw):
        seen.update(kw)
        kw = {k: v for k, v in kw.items() if k != "device_map"}  # no accelerator here
        return real(*a, **kw)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", spy)
    m, _, info = models.load(str(d), weights="pretrained", dtype="bfloat16", device_map="auto")
    assert seen["device_map"] == "auto" and seen["dtype"] is torch.bfloat16
    assert info["dtype"] == "bfloat16" and info["device_map"] == "auto"
    assert next(m.parameters()).dtype is torch.bfloat16
    seen.clear()
    models.load(str(d), weights="pretrained")
    assert "device_map" not in seen and seen["dtype"] is torch.float32


@pytest.mark.parametrize("bad", [dict(dtype="float16"), dict(device_map=3)])
def test_bad_dtype_or_device_map(bad):
    with pytest.raises(ValueError, match="dtype|device_map"):
        models.load("gpt2-tiny", **bad)


def test_device_map_cpu_gives_todays_numbers(tmp_path, monkeypatch):
    from posbias_nb import measure

    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")
    d = _saved_tiny(tmp_path)
    kw = dict(weights="pretrained", length=16, probes=4, batch=2, seed=1, progress=False)
    today = measure.profile(str(d), **kw)
    mapped = measure.profile(str(d), device_map="cpu", **kw)
    assert np.array_equal(today["influence"], mapped["influence"])
    half = measure.profile(str(d), dtype="bfloat16", **kw)
    assert not np.array_equal(today["influence"], half["influence"])  # the switch does act


def test_describe_memo_needs_no_transformers_on_a_hit(tmp_path):
    """A second describe() of a zoo model reads the on-disk memo: no transformers, no torch, the
    same answer (the start-up of a cached `posbias profile`)."""
    import json
    import subprocess
    import sys

    code = ("import json, sys; from posbias_nb import models; d = models.describe('gpt2'); "
            "print(json.dumps([d, 'transformers' in sys.modules, 'torch' in sys.modules]))")
    env = dict(os.environ, POSBIAS_CACHE_DIR=str(tmp_path))
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                      text=True, check=True).stdout) for _ in range(2)]
    assert runs[0][1] is True          # the first call built the config
    assert runs[1][1:] == [False, False]  # the hit imported neither
    assert runs[0][0] == runs[1][0]
    env["POSBIAS_CACHE_DIR"] = "off"  # no cache: computed every time, the same answer
    off = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                    text=True, check=True).stdout)
    assert off[0] == runs[0][0]


def test_importing_the_package_sets_no_environment_variable_and_a_users_setting_wins():
    """Issue 56: ``import posbias_nb.models`` (and the measure and experiments layers above it)
    leaves the environment as it was; loading a model sets offline mode only where the user
    did not choose, so HF_HUB_OFFLINE=0 stays 0."""
    import subprocess
    import sys

    code = ("import os, json; before = dict(os.environ); import posbias_nb.models, "
            "posbias_nb.measure, posbias_nb.experiments; "
            "print(json.dumps(sorted(set(os.environ.items()) ^ set(before.items()))))")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE",
                                                            "TRANSFORMERS_OFFLINE")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout
    code = ("import os; from posbias_nb import models; models.load('gpt2', seed=0); "
            "print(os.environ['HF_HUB_OFFLINE'], os.environ['TRANSFORMERS_OFFLINE'])")
    out = subprocess.run([sys.executable, "-c", code], env=dict(env, HF_HUB_OFFLINE="0"),
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "1"], out.stdout
