"""Born at scale (issue 54): the 7B-class configurations, their width ladder, the shape
statistics and the decision rule on counterexamples, the GPU entries' provenance in make test's
plan, and the command line's refusals."""
import subprocess

import numpy as np
import pytest

from posbias_nb import models, theory
from posbias_nb.experiments.born import scale
from posbias_nb.provenance import plan

# published values (the config.json each configs function names)
PUBLISHED = {
    "llama3.1-8b": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                        num_key_value_heads=8, intermediate_size=14336, vocab_size=128256),
    "qwen2.5-7b": dict(hidden_size=3584, num_hidden_layers=28, num_attention_heads=28,
                       num_key_value_heads=4, intermediate_size=18944, vocab_size=152064),
    "mistral-7b": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=8, intermediate_size=14336, vocab_size=32000,
                       sliding_window=4096),
    "gemma3-4b": dict(hidden_size=2560, num_hidden_layers=34, num_attention_heads=8,
                      num_key_value_heads=4, intermediate_size=10240, head_dim=256,
                      sliding_window=1024, vocab_size=262208),
    "gemma3-12b": dict(hidden_size=3840, num_hidden_layers=48, num_attention_heads=16,
                       num_key_value_heads=8, intermediate_size=15360, head_dim=256,
                       sliding_window=1024, vocab_size=262208),
}


@pytest.mark.parametrize("name", models.SCALE_MODELS)
def test_the_configurations_are_the_published_ones(name):
    cfg = models.ZOO[name].build_config()
    for k, v in PUBLISHED[name].items():
        assert getattr(cfg, k) == v, k
    assert models.ZOO[name].pretrained is None  # random init only


def test_layouts_follow_the_published_pattern():
    lay = models.config_layout(models.ZOO["gemma3-12b"].build_config())
    kinds = [x.kind for x in lay.layers]
    assert kinds.count("full") == 8 and kinds[5] == "full" and kinds[0] == "sliding"
    assert str(models.config_layout(models.ZOO["mistral-7b"].build_config())) == \
        "32*sliding:4096"
    assert str(models.config_layout(models.ZOO["qwen2.5-7b"].build_config())) == "28*full"


@pytest.mark.parametrize("name", models.SCALE_MODELS)
def test_every_rung_keeps_depth_heads_and_layout(name):
    full = models.ZOO[name].build_config()
    for w in scale.ladder(name):
        for init in ("hf", "fan-in"):
            cfg = models.at_width(name, w, init).build_config()
            assert cfg.hidden_size == w
            assert cfg.num_hidden_layers == full.num_hidden_layers
            assert (cfg.num_attention_heads, cfg.num_key_value_heads) == \
                (full.num_attention_heads, full.num_key_value_heads)
            assert str(models.config_layout(cfg)) == str(models.config_layout(full))
            hd_full = getattr(full, "head_dim", None) or full.hidden_size // full.num_attention_heads
            assert cfg.head_dim * full.hidden_size == hd_full * w and cfg.head_dim % 2 == 0
            assert cfg.initializer_range == (0.02 if init == "hf" else w ** -0.5)


def test_a_built_rung_has_the_scaled_shapes():
    m, _, _ = models.load(models.at_width("gemma3-4b", 80), weights="random")
    att = m.model.layers[0].self_attn
    assert tuple(att.q_proj.weight.shape) == (8 * 8, 80)  # 8 heads of 8
    assert tuple(att.k_proj.weight.shape) == (4 * 8, 80)  # 4 key-value heads
    assert m.model.layers[0].mlp.up_proj.weight.shape[0] == 320
    assert len(m.model.layers) == 34


@pytest.mark.parametrize("args,match", [
    (("qwen2.5-7b", 128), "does not divide by the 28"),
    (("llama3.1-8b", 96), "not an even integer"),
    (("gemma3-12b", 120), "does not divide by the 16"),
    (("llama3.1-8b", 8192), "larger than the published"),
    (("llama3.1-8b", 0), "positive integer"),
    (("llama3.1-8b", 128, "xavier"), "init must be"),
    (("gemma3-4b-tiny-nothing", 64), "unknown model"),
])
def test_bad_widths_are_refused(args, match):
    with pytest.raises(ValueError, match=match):
        models.at_width(*args)


def test_window_stats_recover_a_theory_row():
    lay = theory.parse_layout("4*full")
    L = 256
    row = theory.layout_influence(lay, L, 0.3)
    rng = np.random.default_rng(0)
    P = row[None] * np.exp(rng.normal(0, 0.01, (6, L)))  # six noisy windows of the row
    ws = scale.window_stats(P, lay)
    assert np.allclose(ws["alpha"], 0.3, atol=0.01)
    assert np.all(ws["spearman"] > 0.9)
    # a counterexample: flat windows do not look like the row
    flat = scale.window_stats(np.exp(rng.normal(0, 0.01, (6, L))), lay)
    assert np.all(flat["spearman"] < 0.5)
    assert np.allclose(flat["first_middle"], 0, atol=0.05)


def _fake_study(monkeypatch, shift):
    """Every configuration's profiles drawn from its layout row; the widest rung's alpha moved by
    ``shift``."""
    # where the verdict code reads them (the statistics module)
    monkeypatch.setattr(scale.statistics, "layout", lambda c: theory.parse_layout("6*full"))

    def measure(c, w, init):
        a = 0.3 + (shift if w == scale.ladder(c)[-1] else 0.0)
        row = theory.layout_influence(theory.parse_layout("6*full"), 128, a)
        rng = np.random.default_rng([w, 1])
        return row[None] * np.exp(rng.normal(0, 0.02, (8, 128)))

    monkeypatch.setattr(scale.statistics, "measure", measure)


def test_the_rule_finds_a_width_free_shape(monkeypatch):
    _fake_study(monkeypatch, 0.0)
    dec = scale.decisions("hf")
    assert dec["llama3.1-8b:alpha"]["verdict"] == "holds"
    assert dec["gemma3-12b:spearman"]["verdict"] == "holds"


def test_the_rule_rejects_a_shape_that_moves_with_width(monkeypatch):
    _fake_study(monkeypatch, 0.2)  # alpha 0.3 -> 0.5 at the widest rung: beyond the 0.05 margin
    dec = scale.decisions("hf")
    assert dec["llama3.1-8b:alpha"]["verdict"] == "fails"
    assert dec["mistral-7b:last_middle"]["verdict"] == "fails"  # the spike (1-alpha)^H moves


def _gpu_manifest(**over):
    e = {"recorded": "2026-12-04", "commit": "a" * 40, "compute_seconds": 30.0, "code": "c1",
         "peak_bytes": 10, "twin": "profile/t1", "read": True,
         "machine": {"gpu": True, "device": "NVIDIA H200", "torch": "2.11", "transformers": "5",
                     "cuda": "13.0"}}
    e.update(over)
    return {"entries": {"scale-gpu/g1": e,
                        "profile/t1": {"compute_seconds": 20.0, "code": "p", "read": True},
                        "profile/t0": {"compute_seconds": 1.0, "code": "p", "read": True}}}


def test_the_plan_never_remeasures_a_gpu_entry_and_takes_its_twin():
    p = plan.verification_plan(_gpu_manifest(), {"scale-gpu": "c1", "profile": "p"}, 0.0)
    ns = p["namespaces"]
    assert ns["scale-gpu"]["chosen"] == [] and "GPU" in ns["scale-gpu"]["skipped"]
    assert "the code is the GPU run's" in ns["scale-gpu"]["skipped"]
    assert ns["profile"]["chosen"] == ["t0", "t1"]  # its cheapest entry, and the twin
    stale = plan.verification_plan(_gpu_manifest(), {"scale-gpu": "c2", "profile": "p"}, 0.0)
    assert "changed since the GPU run" in stale["namespaces"]["scale-gpu"]["skipped"]


@pytest.mark.parametrize("over", [dict(peak_bytes=None), dict(twin=""),
                                  dict(machine={"gpu": True, "device": "H200"}),
                                  dict(machine={"gpu": False, "device": "x", "torch": "1",
                                                "transformers": "5", "cuda": "1"})])
def test_the_plan_refuses_a_gpu_entry_without_its_provenance(over):
    with pytest.raises(ValueError, match="provenance"):
        plan.verification_plan(_gpu_manifest(**over), {"scale-gpu": "c1", "profile": "p"}, 0.0)


def test_the_gpu_code_runs_on_a_cpu_rung_and_refuses_other_windows():
    ids = scale.gpu_inputs(8192)
    r = scale.gpu_profile("mistral-7b", 16, ids[:, :16], device="cpu", width=128)
    assert r["per_window"].shape == (2, 16) and np.all(r["per_window"] > 0)
    with pytest.raises(ValueError, match="GPU design asks"):
        scale.gpu_profile("mistral-7b", 8192, ids[:1], device="cpu")
    with pytest.raises(ValueError, match="not a configuration of the GPU design"):
        scale.gpu_params("gpt2", 8192)
    assert scale.twin_key("gemma3-4b") == scale.twin_key("gemma3-4b")


@pytest.mark.parametrize("args", [
    ["--model", "qwen2.5-7b", "--width", "128"],
    ["--model", "mistral-7b", "--length", "40000"],
    ["--model", "gemma3-4b", "--width", "80", "--device", "cuda"],
    ["--model", "gemma3-4b", "--init", "fan-in"],
])
def test_the_command_line_refuses_in_one_line(tmp_path, capsys, monkeypatch, args):
    """In process (``cli.main``, as ``posbias`` runs it); that the installed command prints the
    same one line with no traceback is shown by tests/integration/test_cli_models.py's subprocess cases."""
    from posbias_nb import cli

    out = tmp_path / "p.csv"
    if "--device" in args:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is here")
    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")
    rc = cli.main(["profile", *args, "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("posbias: error:")
    assert not out.exists()


def _gpu_born():
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    spec = importlib.util.spec_from_file_location("gpu_born", root / "bench" / "gpu_born.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gpu_import_refuses_a_dry_run_and_code_that_is_not_its_commits(tmp_path, monkeypatch):
    import json

    gb = _gpu_born()
    rec = tmp_path / "recorded"
    rec.mkdir()
    (rec / "MANIFEST.json").write_text(json.dumps({"entries": {}}))
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"dry_run": True, "items": []}))
    assert gb.import_run(run, rec, tmp_path / "r.json") == 2
    head = gb_head()
    (run / "run.json").write_text(json.dumps({"dry_run": False, "code": "0" * 64,
                                              "commit": head, "items": []}))
    assert gb.import_run(run, rec, tmp_path / "r.json") == 2
    assert json.loads((rec / "MANIFEST.json").read_text()) == {"entries": {}}  # nothing written
    assert not (tmp_path / "r.json").exists()


def Path_bench():
    from pathlib import Path

    return Path(__file__).resolve().parents[3] / "bench"


def gb_head():
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path_bench().parent,
                          capture_output=True, text=True, check=True).stdout.strip()


def test_verdict_rows_count_the_family_and_refuse_an_unknown_initialiser():
    from posbias_nb.experiments.born import scale

    s = {"words": {"a:x": "holds", "b:x": "fails", "c:x": "holds"}, "verdict": "fails"}
    rows = scale.verdict_rows({"hf": s, "fan-in": dict(s, verdict="inconclusive")})
    assert [r["key"] for r in rows] == ["ladder_hf", "ladder_fanin"]
    assert [r["verdict"] for r in rows] == ["fails", "inconclusive"]
    assert rows[0]["measured"].startswith("3 equivalence claims")
    assert "std 0.02" in rows[0]["claim"] and "1/√d" in rows[1]["claim"]
    with pytest.raises(ValueError, match="unknown initialiser 'xavier'"):
        scale.verdict_rows({"xavier": s})
