"""The architecture matrix (issue 27): for every tiny decoder of ``tests/archs.py``, the block
description decided by behaviour is the expected one; where lambda is measured, the residual
identity holds for the module the hooks read; where it is refused, the reason says why; the
influence profile runs on every causal attention model and is refused on the others."""
import numpy as np
import pytest
import torch

from tests import archs
from posbias_nb import measure, models
from posbias_nb.measure.jacobian import influence_profile
from posbias_nb.models.blocks import describe_blocks, require_causal_attention

pytestmark = pytest.mark.slow

TYPES = sorted(archs.EXPECT)


def _kind(d):
    if d.lambda_ok:
        return archs.M, d.residual[0][0]
    if not d.causal:
        return archs.R, "not causal"
    if not d.attention:
        return archs.R, "not attention"
    return archs.R, "parallel" if d.layout == "parallel" else "unverified"


def _ids(m, L=8, B=2, seed=3):
    V = m.get_input_embeddings().num_embeddings
    return torch.as_tensor(np.random.default_rng(seed).integers(3, V, size=(B, L)))


def test_the_matrix_covers_forty_architectures():
    assert len(TYPES) >= 40
    assert sum(1 for v in archs.EXPECT.values() if v[0] == archs.M) >= 30


@pytest.mark.parametrize("model_type", TYPES)
def test_block_description_and_lambda(model_type):
    m = archs.build(model_type, attn="eager")
    d = describe_blocks(m)
    assert _kind(d) == archs.EXPECT[model_type], d.reason
    if d.lambda_ok:
        # the residual identity, read with hooks of this test: x + c a equals the input of the
        # module that reads the residual stream after the attention add, in every layer
        layers = models.decoder_layers(m)
        got = {}
        hooks = []
        for t, layer in enumerate(layers):
            name, c = d.residual[t]
            mid = d.details[t]
            hooks.append(layer.register_forward_pre_hook(
                lambda mod, a, k, t=t: got.__setitem__(("x", t), (a[0] if a else
                                                                  k["hidden_states"])),
                with_kwargs=True))
            hooks.append(layer.get_submodule(name).register_forward_hook(
                lambda mod, a, o, t=t: got.__setitem__(("a", t), o[0] if isinstance(
                    o, (tuple, list)) else o)))
            hooks.append(layer.get_submodule(mid).register_forward_pre_hook(
                lambda mod, a, k, t=t: got.__setitem__(("r", t), (a[0] if a else
                                                                  k["hidden_states"])),
                with_kwargs=True))
        try:
            with torch.no_grad():
                m.base_model(input_ids=_ids(m), use_cache=False)
        finally:
            for h in hooks:
                h.remove()
        for t in range(len(layers)):
            x, a, r = (got[k, t].double() for k in ("x", "a", "r"))
            c = d.residual[t][1]
            scale = float(max(x.abs().max(), r.abs().max()))
            assert float((x + c * a - r.reshape(x.shape)).abs().max()) <= 1e-5 * scale
        cap = measure.capture_model(m, _ids(m, L=8, B=1))
        assert np.all((cap["lam"] > 0) & (cap["lam"] < 1)), cap["lam"]
    else:
        with pytest.raises(ValueError) as e:
            measure.capture_model(m, _ids(m, L=8, B=1))
        assert str(e.value) == d.reason and "\n" not in d.reason
    _profile_runs_or_is_refused(model_type, m, d)


def _profile_runs_or_is_refused(model_type, m, d):
    if not (d.causal and d.attention):
        with pytest.raises(ValueError, match="not causal|not an attention model"):
            require_causal_attention(m)
        return
    if model_type == "llama4_text":  # its base_model is the causal LM itself
        with pytest.raises(AttributeError):  # known: a hidden-state profile cannot be read
            influence_profile(m, _ids(m, L=8, B=1), probes=2, seed=0)
        return
    prof = influence_profile(m, _ids(m, L=8, B=1), probes=2, seed=0)
    assert prof["influence"].shape == (8,) and np.all(np.isfinite(prof["influence"]))
    assert np.all(prof["influence"] >= 0)


@pytest.mark.parametrize("model_type", ["olmo2", "exaone4", "glm4"])
def test_post_norm_blocks_get_the_added_modules_lambda(model_type):
    """The corrected lambda: the norm after attention, not self_attn, is what the residual
    receives; lambda read from self_attn (the old hook) differs, so this fails if it returns."""
    m = archs.build(model_type, attn="eager")
    d = describe_blocks(m)
    assert d.residual[0][0] != "self_attn"
    ids = _ids(m, L=8, B=1)
    cap = measure.capture_model(m, ids)
    layers = models.decoder_layers(m)
    seen = {}
    hooks = []
    for t, layer in enumerate(layers):
        hooks.append(layer.register_forward_pre_hook(
            lambda mod, a, k, t=t: seen.__setitem__(("x", t), a[0] if a else k["hidden_states"]),
            with_kwargs=True))
        for n in (d.residual[t][0], "self_attn"):
            hooks.append(layer.get_submodule(n).register_forward_hook(
                lambda mod, a, o, t=t, n=n: seen.__setitem__((n, t), o[0] if isinstance(o, tuple)
                                                             else o)))
    try:
        with torch.no_grad():
            m.base_model(input_ids=ids, use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    for t in range(len(layers)):
        x = seen["x", t].double().norm(dim=-1)
        for n, want_equal in ((d.residual[t][0], True), ("self_attn", False)):
            a = seen[n, t].double().norm(dim=-1)
            lam = float((a / (x + a)).mean())
            assert (abs(lam - cap["lam"][t]) < 1e-6) == want_equal, (n, lam, cap["lam"][t])


def test_parallel_blocks_are_refused_alike():
    reasons = []
    for t in ("gptj", "codegen", "phi", "cohere", "gpt_neox", "falcon"):
        d = describe_blocks(archs.build(t))
        assert d.layout == "parallel" and not d.lambda_ok
        reasons.append(d.reason.split(" adds attention")[1].split(")")[1])
    assert len(set(reasons)) == 1  # one sentence for all of them, after the names


def test_docs_table_is_the_matrix():
    """The table of architectures (docs/architectures.md, linked from the README) says what
    tests/archs.py expects, row by row."""
    import re
    from pathlib import Path

    text = Path(__file__).resolve().parents[3].joinpath("docs", "architectures.md").read_text()
    sec = text.split("# Which architectures are measured", 1)[1].split("\n## ", 1)[0]
    listed = {}
    for line in sec.splitlines():
        if not line.startswith("| measured") and not line.startswith("| refused"):
            continue
        kind = "measured" if line.startswith("| measured") else "refused"
        cell = line.rstrip(" |").split(" | ")[-1]
        for t in re.findall(r"([a-z0-9_\-]+)(?=[,;(]|$| \()", cell):
            listed[t] = kind
    assert set(listed) == set(archs.EXPECT), set(listed) ^ set(archs.EXPECT)
    for t, (kind, _) in archs.EXPECT.items():
        assert listed[t] == kind, t


def test_hybrids_follow_one_rule():
    """LFM2 (convolution layers beside attention layers) and Falcon-H1 (a Mamba mixer beside
    attention in every layer) are decided by the same behaviour: some position mixing is not
    attention. Both are refused by every command, with the same kind of reason; a parallel
    attention + MLP block (GPT-J), whose only position mixer is attention, is not."""
    from posbias_nb.models.blocks import require_causal_attention

    for t in ("lfm2", "falcon_h1"):
        m = archs.build(t)
        d = describe_blocks(m)
        assert not d.attention and d.reason.startswith(f"{t} is not an attention model"), d.reason
        with pytest.raises(ValueError, match="not an attention model"):
            require_causal_attention(m)
    assert "mixes positions through mamba" in describe_blocks(archs.build("falcon_h1")).reason
    g = describe_blocks(archs.build("gptj"))
    assert g.attention and g.layout == "parallel"
    require_causal_attention(archs.build("gptj"))
