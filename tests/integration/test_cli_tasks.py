"""``posbias retrieval`` and ``posbias train`` through the command: output, errors, determinism."""
import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from posbias_nb import cli  # noqa: E402


@pytest.fixture(autouse=True)
def no_cache(monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE_DIR", "off")


TRAIN = ["train", "--task", "kv", "--layers", "2", "--width", "32", "--length", "32",
         "--steps", "3", "--quiet"]


def test_train_csv_json_and_same_seed_same_output(capsys):
    assert cli.main(TRAIN) == 0
    csv = capsys.readouterr().out.splitlines()
    assert csv[0] == "position,accuracy,loss,steps_to_half,grad_init" and len(csv) >= 5
    assert cli.main(TRAIN + ["--format", "json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    for k in ("position", "accuracy", "influence", "lambda", "curve", "meta"):
        assert k in obj, k
    assert len(obj["position"]) >= 4 and len(obj["lambda"]) == 2 and len(obj["influence"]) == 32
    assert cli.main(TRAIN + ["--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == obj


@pytest.mark.parametrize("argv, word", [
    (["--layers", "1"], "layers"), (["--width", "20"], "width"), (["--length", "8"], "length"),
    (["--steps", "0"], "steps"), (["--residual-scale", "0"], "residual_scale"),
    (["--remedy", "magic"], "remedy"), (["--device", "tpu"], "device"),
])
def test_train_bad_input_is_one_line_exit_2(argv, word, capsys):
    base = dict(zip(TRAIN[1::2], TRAIN[2::2]))
    for k, v in zip(argv[::2], argv[1::2]):
        base[k] = v
    args = ["train", "--quiet"] + [x for kv in base.items() for x in kv if x != "--quiet"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("posbias: error:") and word in err[0], err


RET = ["retrieval", "--model", "qwen2-tiny", "--weights", "random", "--task", "kv",
       "--positions", "3", "--examples", "2", "--length", "200", "--quiet"]


def test_retrieval_json_has_the_contract(capsys):
    assert cli.main(RET + ["--format", "json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["position"] == [0, 1, 2]
    for k in ("accuracy", "accuracy_low", "accuracy_high", "logprob", "logprob_low",
              "logprob_high"):
        assert len(obj[k]) == 3, k
    assert len(obj["examples"]) == 6
    rec = obj["examples"][0]
    assert {"gold_index", "prompt_ids", "answer_ids", "logprob", "correct"} <= set(rec)
    assert "meta" in obj
    assert cli.main(RET + ["--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == obj
    assert cli.main(RET) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("position,")


@pytest.mark.parametrize("argv, word", [
    (["--positions", "1"], "positions"), (["--examples", "0"], "examples"),
    (["--length", "10"], "length"), (["--model", "nope"], "unknown model"),
    (["--task", "maze"], "task"), (["--length", "100000"], "length"),
    (["--model", "gpt2-tiny", "--length", "250"], "beyond the context"),  # bytes: > 256 tokens
])
def test_retrieval_bad_input_is_one_line_exit_2(argv, word, capsys):
    base = dict(zip(RET[1::2], RET[2::2]))
    for k, v in zip(argv[::2], argv[1::2]):
        base[k] = v
    args = ["retrieval", "--quiet"] + [x for kv in base.items() for x in kv if x != "--quiet"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("posbias: error:") and word in err[0], err


@pytest.fixture(scope="module")
def long_tiny(tmp_path_factory):
    """A 2-layer GPT-2 reading bytes with a 1024-token context: UUID prompts need > 256 bytes."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    m = GPT2LMHeadModel(GPT2Config(vocab_size=300, n_positions=1024, n_embd=32, n_layer=2,
                                   n_head=2))
    path = tmp_path_factory.mktemp("clitiny") / "gpt2-long-tiny"
    m.save_pretrained(path)
    return str(path)


def test_retrieval_liu_variant_through_the_command(capsys, long_tiny):
    argv = ["retrieval", "--model", long_tiny, "--weights", "pretrained", "--variant", "liu",
            "--positions", "3", "--examples", "2", "--length", "400", "--quiet"]
    assert cli.main(argv + ["--format", "json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["meta"]["variant"] == "liu" and "substring" in obj["meta"]["scoring"]
    assert len(obj["examples"]) == 6 and all("output" in r for r in obj["examples"])
    assert "logprob" not in obj
    assert cli.main(argv) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head == "position,depth,item,accuracy,accuracy_low,accuracy_high"
    assert cli.main(argv + ["--task", "needle"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "variant" in err[0], err
    assert cli.main(argv[:-1] + ["--variant", "uuid", "--quiet"]) == 2
    assert "variant" in capsys.readouterr().err
