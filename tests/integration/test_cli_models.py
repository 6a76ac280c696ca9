"""`posbias profile` and `posbias models`: formats, determinism, one-line errors with exit 2."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from posbias_nb import cli  # noqa: E402


def run(*args, cache="off", timeout=300):
    env = dict(os.environ, HF_HUB_OFFLINE="1", POSBIAS_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-m", "posbias_nb", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.fixture(autouse=True)
def no_cache(monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")


def test_models_lists_the_zoo(capsys):
    assert cli.main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("name,family,layers,width,context,rope,pretrained_installed,"
                        "pretrained_source")
    rows = {ln.split(",")[0]: ln.split(",") for ln in lines[1:]}
    assert rows["gpt2"][1:6] == ["gpt2", "12", "768", "1024", "no"]
    assert rows["qwen2-0.5b"][1:6] == ["qwen2", "24", "896", "32768", "yes"]
    assert rows["gpt2"][6] in ("yes", "no")


def test_models_json(capsys):
    assert cli.main(["models", "--format", "json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert "gpt2" in obj["name"] and obj["meta"]["command"] == "models"


def test_profile_csv_with_stderr(capsys):
    args = ["profile", "--model", "qwen2-tiny", "--length", "9", "--probes", "4", "--quiet"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "position,influence,stderr"
    rows = [ln.split(",") for ln in out[1:]]
    assert [int(r[0]) for r in rows] == list(range(1, 10))
    assert all(float(r[1]) > 0 and float(r[2]) >= 0 for r in rows)
    assert cli.main(args) == 0  # the same seed gives identical output
    assert capsys.readouterr().out.splitlines() == out
    assert cli.main(args + ["--seed", "1"]) == 0
    assert capsys.readouterr().out.splitlines() != out


def test_profile_exact_json(tmp_path):
    f = tmp_path / "p.json"
    assert cli.main(["profile", "--model", "gpt2-tiny", "--length", "6", "--exact", "--batch", "2",
                     "--format", "json", "--out", str(f), "--quiet"]) == 0
    obj = json.loads(f.read_text())
    assert obj["position"] == [1, 2, 3, 4, 5, 6] and len(obj["influence"]) == 6
    assert "stderr" not in obj  # exact: no estimate error
    meta = obj["meta"]
    assert meta["model"] == "gpt2-tiny" and meta["weights"] == "random" and meta["length"] == 6
    assert meta["seed"] == 0 and meta["probes"] is None and meta["method"] == "exact"
    assert meta["version"] and meta["torch"] and len(meta["batch_stderr"]) == 6


def test_profile_json_carries_the_probe_samples(tmp_path):
    """JSON output keeps each probe's squared norms, from which the influence is recomputed and
    intervals over probes follow (metrics.probe_intervals); the CSV stays three columns."""
    import numpy as np

    from posbias_nb import metrics
    from posbias_nb.measure import hutchinson

    f = tmp_path / "p.json"
    assert cli.main(["profile", "--model", "gpt2-tiny", "--length", "12", "--probes", "4",
                     "--batch", "2", "--format", "json", "--out", str(f), "--quiet"]) == 0
    obj = json.loads(f.read_text())
    S = np.array(obj["probe_samples"])
    assert S.shape == (2, 4, 12)
    per_seq = np.array([hutchinson(s)[0] for s in S])
    np.testing.assert_allclose(per_seq.mean(0), obj["influence"], rtol=1e-12)
    assert metrics.probe_intervals(S[0], n_boot=200)["ptv"][0] > 0
    c = tmp_path / "p.csv"
    assert cli.main(["profile", "--model", "gpt2-tiny", "--length", "12", "--probes", "4",
                     "--out", str(c), "--quiet"]) == 0
    assert c.read_text().splitlines()[0] == "position,influence,stderr"


def test_profile_no_rope_and_argmax_target(capsys):
    base = ["profile", "--model", "qwen2-tiny", "--length", "8", "--quiet"]
    assert cli.main(base) == 0
    on = capsys.readouterr().out
    assert cli.main(base + ["--no-rope"]) == 0
    off = capsys.readouterr().out
    assert on != off
    assert cli.main(base + ["--target", "argmax_prob", "--source", "random"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "position,influence"


@pytest.mark.parametrize("args,needle", [
    (["--model", "gpt5", "--length", "8"], "unknown model 'gpt5'"),
    (["--model", "gpt2", "--length", "1"], "length must be an integer >= 2"),
    (["--model", "gpt2", "--length", "4096"], "beyond the context of gpt2 (1024 tokens)"),
    (["--model", "qwen2-tiny", "--length", "300"], "beyond the context"),
    (["--model", "gpt2", "--length", "8", "--no-rope"], "no rotary position embeddings"),
    (["--model", "gpt2", "--length", "8", "--weights", "pretrained"], "not installed"),
    (["--model", "gpt2", "--length", "8", "--probes", "1"], "probes"),
    (["--model", "gpt2", "--length", "8", "--exact", "--probes", "4"], "not allowed"),
    (["--model", "gpt2", "--length", "8", "--weights", "trained"], "--weights"),
    (["--length", "8"], "--model"),
])
def test_profile_bad_input_one_line_exit_2(args, needle, capsys):
    assert cli.main(["profile", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("posbias: error:") and needle in lines[0]


@pytest.mark.parametrize("args,needle", [
    (["--model", "gpt5", "--length", "8"], "unknown model 'gpt5'"),
    (["--model", "gpt2", "--length", "4096"], "beyond the context of gpt2 (1024 tokens)"),
    (["--model", "gpt2", "--length", "8", "--no-rope"], "no rotary position embeddings"),
])
def test_profile_bad_input_subprocess(args, needle):
    r = run("profile", *args)
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("posbias: error:") and needle in lines[0]
    assert "Traceback" not in r.stderr


def test_cuda_without_cuda_exit_2(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    rc = cli.main(["profile", "--model", "gpt2-tiny", "--length", "8", "--device", "cuda"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "CUDA is not available" in err


def test_local_directory_without_weights_exit_2(tmp_path, capsys):
    from posbias_nb import models

    models.build_config("qwen2-tiny").save_pretrained(tmp_path)
    rc = cli.main(["profile", "--model", str(tmp_path), "--length", "8", "--weights",
                   "pretrained"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "no weight files" in err
    rc = cli.main(["profile", "--model", str(tmp_path), "--length", "8", "--quiet"])
    assert rc == 0 and capsys.readouterr().out.startswith("position,influence,stderr")


def test_theory_does_not_import_torch():
    code = ("import sys; from posbias_nb import cli; "
            "assert cli.main(['theory', '--length', '3', '--depth', '1']) == 0; "
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_real_gpt2_smoke(tmp_path):
    """The real-size GPT-2 end to end through the command line, at a small length."""
    r = run("profile", "--model", "gpt2", "--length", "16", "--probes", "2", "--format", "json",
            cache=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert len(obj["influence"]) == 16 and obj["meta"]["n_layers"] == 12
    # the U: first and last positions above the middle
    infl = obj["influence"]
    assert infl[0] > infl[8] and infl[-1] > infl[8]


def test_profile_device_map_and_dtype_flags(tmp_path, capsys):
    from posbias_nb import models

    src, _, _ = models.load("gpt2-tiny", seed=2)
    d = tmp_path / "m"
    src.save_pretrained(d)
    base = ["profile", "--model", str(d), "--weights", "pretrained", "--length", "8",
            "--probes", "2", "--quiet", "--format", "json"]
    assert cli.main(base) == 0
    plain = json.loads(capsys.readouterr().out)
    assert cli.main(base + ["--device-map", "cpu"]) == 0
    mapped = json.loads(capsys.readouterr().out)
    assert mapped["influence"] == plain["influence"] and mapped["meta"]["device_map"] == "cpu"
    assert cli.main(base + ["--dtype", "bfloat16"]) == 0
    assert json.loads(capsys.readouterr().out)["meta"]["dtype"] == "bfloat16"
    assert cli.main(base + ["--dtype", "float16"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "float16" in err[0]


def test_cached_profile_imports_no_torch(tmp_path):
    """A cache hit of `posbias profile` loads neither torch nor transformers nor scipy.stats:
    its start-up is the package's own (issue 20; timed in bench/bench_startup.py)."""
    args = ["profile", "--model", "gpt2-tiny", "--length", "16", "--probes", "2", "--quiet"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", POSBIAS_CACHE_DIR=str(tmp_path))
    first = subprocess.run([sys.executable, "-m", "posbias_nb", *args], env=env,
                           capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    code = ("import sys; from posbias_nb import cli; rc = cli.main(sys.argv[1:]); "
            "print([m for m in ('torch', 'transformers', 'scipy.stats') if m in sys.modules]); "
            "sys.exit(rc)")
    hit = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                         text=True)
    assert hit.returncode == 0, hit.stderr
    lines = hit.stdout.strip().splitlines()
    assert lines[-1] == "[]"
    assert "\n".join(lines[:-1]) + "\n" == first.stdout  # the same CSV
