"""Where real models are born (issue 61): one std per group of matrices, decided by behaviour;
the study's cells, claims and recipes; the command line's refusals."""
import math

import numpy as np
import pytest

from posbias_nb import cli, models, theory
from posbias_nb.experiments.born import born_scales as bs
from posbias_nb.models import init_scales


# --------------------------------------------------------------------------------------------
# the stds and their checks

def test_check_stds_number_sets_every_group_and_a_dict_some():
    assert init_scales.check_stds(0.1) == {"qk": 0.1, "block": 0.1, "embed": 0.1}
    assert init_scales.check_stds({"embed": 1, "qk": 0.5}) == {"qk": 0.5, "embed": 1.0}


@pytest.mark.parametrize("bad, word", [({"qkv": 0.1}, "qkv"), ({"qk": 0}, "0"),
                                       ({"qk": -0.1}, "-0.1"), ({"qk": float("nan")}, "nan"),
                                       ({"qk": float("inf")}, "inf"), ({"qk": True}, "True"),
                                       ({"qk": "0.1"}, "0.1"), ({}, "no group"), (0.0, "0.0")])
def test_check_stds_refuses_by_name(bad, word):
    with pytest.raises(ValueError, match=word):
        init_scales.check_stds(bad)


def test_width_overrides_carry_the_stds_into_the_fingerprint_and_the_name():
    a = models.at_width("llama3.1-8b", 128)
    b = models.at_width("llama3.1-8b", 128, std={"qk": 0.1})
    c = models.at_width("llama3.1-8b", 128, std={"qk": 0.1000001})
    assert "posbias_init" not in a.overrides and b.overrides["posbias_init"] == {"qk": 0.1}
    assert b.name == "llama3.1-8b@128/qk=0.1"
    fp = {s.name + str(i): models.describe(s)["fingerprint"] for i, s in enumerate((a, b, c))}
    assert len(set(fp.values())) == 3  # the same printed name, another std: another key
    with pytest.raises(ValueError, match="unknown group"):
        models.at_width("llama3.1-8b", 128, std={"mlp": 0.1})


@pytest.mark.slow
def test_groups_are_found_by_behaviour_and_redrawn_reproducibly():
    s = models.at_width("llama3.1-8b", 64, std={"qk": 0.3, "embed": 0.05})
    m, _, _ = models.load(s, "random", seed=0)
    g = init_scales.weight_groups(m)
    assert g["layers"] == [2] * 32  # query and key, in every layer
    assert all(n.endswith(("q_proj.weight", "k_proj.weight")) for n in g["qk"])
    assert len(g["block"]) == 5 * 32 and g["embed"] == ["model.embed_tokens.weight"]
    p = dict(m.named_parameters())
    assert abs(float(p[g["qk"][0]].std()) - 0.3) < 0.03
    assert abs(float(p[g["embed"][0]].std()) - 0.05) < 0.005
    assert abs(float(p[g["block"][0]].std()) - 0.02) < 0.003  # transformers' std kept
    m2, _, _ = models.load(s, "random", seed=0)
    assert all(bool((a == b).all()) for a, b in zip(m.parameters(), m2.parameters()))
    # another qk std, same seed: the same directions, scaled; every other weight unchanged
    m3, _, _ = models.load(models.at_width("llama3.1-8b", 64, std={"qk": 0.6, "embed": 0.05}),
                           "random", seed=0)
    p3 = dict(m3.named_parameters())
    for n in g["qk"][:4]:
        assert np.allclose(p3[n].detach().numpy(), 2 * p[n].detach().numpy(), rtol=1e-6)
    for n in g["block"][:4] + g["embed"]:
        assert bool((p3[n] == p[n]).all())


@pytest.mark.slow
def test_qk_norm_query_key_matrices_are_still_found():
    m, _, _ = models.load(models.at_width("gemma3-4b", 80, std={"qk": 0.2}), "random", seed=0)
    g = init_scales.weight_groups(m)
    assert g["layers"] == [2] * 34
    assert all(n.endswith(("q_proj.weight", "k_proj.weight")) for n in g["qk"])
    a = init_scales.attention_scales(m, groups=g)  # QK-norm and sqrt(d), found by behaviour
    assert a["qk_norm"] and math.isclose(a["embed_multiplier"], math.sqrt(80), rel_tol=1e-5)


def test_no_qk_norm_and_no_multiplier_by_behaviour():
    """The counterexample of the QK-norm check: a Qwen2 block's attention moves with its
    query/key scale, and its embedding enters the residual stream as it is."""
    m, _, _ = models.load("qwen2-tiny", "random", seed=0)
    a = init_scales.attention_scales(m)
    assert not a["qk_norm"] and a["moved"] > 1e-2
    assert math.isclose(a["embed_multiplier"], 1.0, rel_tol=1e-6)


def test_a_layer_whose_attention_nothing_moves_is_refused(monkeypatch):
    """The counterexample: attention probabilities that no matrix changes (stubbed)."""
    import torch

    m, _, _ = models.load("qwen2-tiny", "random", seed=0)
    const = [torch.ones(1, 4, 8, 8, dtype=torch.float64) for _ in range(2)]
    monkeypatch.setattr(init_scales, "_attentions", lambda model, ids: const)
    with pytest.raises(ValueError, match="no matrix of layer 1"):
        init_scales.weight_groups(m)


def test_tiny_model_groups():
    m, _, _ = models.load("qwen2-tiny", "random", seed=0)
    g = init_scales.weight_groups(m)
    assert g["layers"] == [2, 2]
    assert sorted(n.rsplit(".", 2)[-2] for n in g["qk"]) == ["k_proj", "k_proj", "q_proj",
                                                              "q_proj"]


# --------------------------------------------------------------------------------------------
# the design's cells, the statistics, the recipes

def test_matched_std_gives_the_logit_scale():
    for g in bs.DESIGN["matched"]["g"]:
        for w in (112, 128, 512):
            s = bs.matched_std(g, w)
            assert math.isclose(theory.logit_scale(s, s, w, 16), g)
    with pytest.raises(ValueError):
        bs.matched_std(0, 128)


def test_factorial_cells_cross_the_three_groups():
    cells = bs.factorial_cells("llama3.1-8b")
    assert len(cells) == 8
    assert len({tuple(c["levels"].values()) for c in cells}) == 8
    hi = bs.full_std("llama3.1-8b", 128)
    assert math.isclose(hi, 0.02 * math.sqrt(4096 / 128))
    # the all-high cell has, at width 128, transformers' logit scale at the published width
    assert math.isclose(theory.logit_scale(hi, hi, 128, 4), 0.02 ** 2 * 4096)
    assert cells[7]["std"] == {"qk": hi, "block": hi, "embed": hi}
    assert cells[0]["std"] == {"qk": 0.02, "block": 0.02, "embed": 0.02}


def test_update_ratio():
    assert math.isclose(bs.update_ratio({"block": 0.02, "embed": 0.02}, 4096), 81.92)
    s = 4096 ** -0.5
    assert math.isclose(bs.update_ratio({"block": s, "embed": s}, 4096), 64.0)


def test_scatter_is_zero_on_the_row_and_grows_off_it():
    lay = theory.parse_layout("32*full")
    row = theory.layout_influence(lay, 256, 0.5)
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 1, (2, 256))
    sc = [float(bs.window_stats(row * np.exp(a * noise), lay)["scatter"].mean())
          for a in (0.0, 0.1, 0.5)]
    assert sc[0] < 1e-6 < sc[1] < sc[2]


@pytest.mark.parametrize("text, want", [("0.02", 0.02), ("0.02/(2*n_layers)**0.5", 0.0025),
                                        ("d**-0.5", 1 / 64), ("-1 + d_h", 127.0)])
def test_formula(text, want):
    assert math.isclose(bs.formula(text, d=4096, d_h=128, n_layers=32, layer=1), want)


@pytest.mark.parametrize("text", ["__import__('os')", "d.real", "[1]", "layer if d else 1",
                                  "abs(d)", "1 +"])
def test_formula_refuses_anything_but_arithmetic(text):
    with pytest.raises(ValueError):
        bs.formula(text, d=4096, d_h=128, n_layers=32, layer=1)


def test_formula_needs_its_names():
    with pytest.raises(ValueError, match="needs layer"):
        bs.formula("0.02/layer", d=4096)


def test_recipes_agree_with_their_own_g_and_cite_a_source():
    rs = bs.recipes()
    assert len(rs) >= 8
    by = {r["name"]: r for r in rs}
    assert math.isclose(by["hf-llama"]["g"], 0.02 ** 2 * 4096)
    assert by["mup"]["g"] == 0.0 and math.isclose(by["hf-gemma3"]["g"], 1.0)
    for r in rs:
        assert math.isclose(r["g"], r["g_recipe"], rel_tol=1e-9, abs_tol=1e-12), r["name"]
        assert r["source"]["repo"] and r["source"]["path"] and r["source"]["ref"], r["name"]
        assert r["rho"] > 0


def test_claims_decide_within_and_beyond_the_margin(monkeypatch):
    """The verdict code on counterexamples: a statistic that does not move holds, one that
    moves by 10 margins fails (stubbed cells, the design's own families and margins)."""
    rng = np.random.default_rng(0)
    n = int(bs.DESIGN["windows"])

    def fake(part, config, **kw):
        base = {k: rng.normal(0, 1e-4, n) for k in bs.STATS}
        moved = part == "control" and kw.get("scaled")
        if moved:
            base["spearman"] = base["spearman"] + 10 * bs.DESIGN["margins"]["spearman"]
        return {"stats": base}

    # the verdict code reads the cells where it lives (the statistics module)
    monkeypatch.setattr(bs.statistics, "cell", fake)
    monkeypatch.setattr(bs.statistics, "_checked", lambda: bs.DESIGN)  # the stub is not locked
    out = bs.decisions("control")
    assert out["gemma3-4b:spearman"]["verdict"] == "fails"
    assert all(v["verdict"] == "holds" for k, v in out.items() if k != "gemma3-4b:spearman")
    assert all(v["detectable"] > 0 for v in out.values())
    with pytest.raises(ValueError, match="part must be one of"):
        bs.decisions("ladder")


# --------------------------------------------------------------------------------------------
# the command line

@pytest.mark.parametrize("items, want", [(None, None), (["0.1"], 0.1),
                                         (["qk=0.1", "embed=1"], {"qk": 0.1, "embed": 1.0})])
def test_parse_stds(items, want):
    assert cli.parse_stds(items) == want


@pytest.mark.parametrize("args, msg", [
    (["--std", "qk=0.1"], "need --width"),
    (["--width", "64", "--std", "qk=-1"], "must be finite and > 0, got -1.0"),
    (["--width", "64", "--std", "nope=1"], "unknown group of matrices 'nope'"),
    (["--width", "64", "--std", "qk=x"], "expected GROUP=S"),
    (["--width", "64", "--std", "0.1", "--std", "qk=1"], "give it alone"),
    (["--width", "64", "--std", "qk=1", "--std", "qk=2"], "twice"),
    (["--width", "64", "--std", "nan"], "finite"),
])
def test_cli_refuses_bad_stds(tmp_path, capsys, args, msg):
    """In process (``cli.main``, as ``posbias`` runs it); that the installed command prints the
    same one line with no traceback is shown by tests/integration/test_cli_models.py's subprocess cases."""
    out = tmp_path / "x.csv"
    rc = cli.main(["profile", "--model", "llama3.1-8b", "--length", "8", "--out", str(out), *args])
    err = capsys.readouterr().err
    assert rc == 2 and msg in err, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("posbias: error:")
    assert not out.exists()
