"""`nemo-cascade eval` on a node's GPUs: the engine's tensor-parallel size, data-parallel engines
and GPU memory share travel from the command line to the engine's constructor (no vLLM started: the
engine is a stand-in)."""
from __future__ import annotations

import json

import pytest

from nemo_cascade import evaluate
from nemo_cascade.tooling.cli import main
from nemo_cascade.evaluate import EvalError
from nemo_cascade.tooling import standalone


class _Stop(Exception):
    pass


def test_the_layout_reaches_the_engine_constructor(monkeypatch, hf_folder):
    made = {}

    def fake_engine(model_path, rollout, dtype, seed=0, **kw):
        made.update(model=model_path, rollout=rollout, dtype=dtype, **kw)
        return "engine"

    monkeypatch.setattr(standalone, "RolloutEngine", fake_engine)
    assert standalone.build_engine(hf_folder, 4096, dtype="bfloat16", tensor_parallel_size=4,
                                   gpu_memory_utilization=0.85) == "engine"
    r = made["rollout"]
    assert ((r.tensor_parallel_size, r.gpu_memory_utilization, r.max_prompt_tokens)
            == (4, 0.85, 4096))
    assert (made["max_model_len"] == 4096
            and made["distributed"] is False), "one process: no torchrun world"
    standalone.build_engine(hf_folder, 512, dtype="float32")
    assert ((made["rollout"].tensor_parallel_size, made["rollout"].gpu_memory_utilization)
            == (1, 0.9))


@pytest.mark.parametrize("layout, expected", [
    ((0, 1, 0.9), "--tensor-parallel-size: expected an integer >= 1, got 0"),
    ((1, -2, 0.9), "--data-parallel: expected an integer >= 1, got -2"),
    ((1, 1, 1.5), "--gpu-memory-utilization: expected a share in (0, 1], got 1.5"),
])
def test_bad_layouts_are_one_line(layout, expected):
    with pytest.raises(EvalError) as err:
        standalone.check_layout(*layout)
    assert str(err.value) == expected
    assert standalone.check_layout(2, 4, 0.8) == 8


def test_a_world_that_does_not_match_the_engines_is_refused(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(
            EvalError,
            match=r"need tensor-parallel size × data-parallel = 4 processes, but 2 were"):
        standalone.init_ranks(4)


def test_evaluate_checkpoint_builds_its_engine_with_the_layout(monkeypatch, hf_folder):
    class Tokenizer:
        def encode(self, text, add_special_tokens=False):
            return [1] * 8

    seen = {}

    def fake_build(model_dir, context, seed, dtype, kv, **layout):
        seen.update(layout, model_dir=model_dir)
        raise _Stop

    monkeypatch.setattr(standalone, "load_tokenizer", lambda _: Tokenizer())
    monkeypatch.setattr(standalone, "build_engine", fake_build)
    (hf_folder / "config.json").write_text(json.dumps({"max_position_embeddings": 32768}))
    with pytest.raises(_Stop):
        standalone.evaluate_checkpoint(hf_folder, ["gsm8k"], evaluate.EvalSettings(limit=2),
                                       out_dir=hf_folder / "out", tensor_parallel_size=1,
                                       data_parallel=1, gpu_memory_utilization=0.7)
    assert seen == {"tensor_parallel_size": 1, "gpu_memory_utilization": 0.7,
                    "model_dir": hf_folder, "yarn_factor": 2.0}, "App. B: GSM8K at YaRN 2"


def test_several_gpus_relaunch_the_command_under_torchrun(monkeypatch, hf_folder):
    import nemo_cascade.tooling.cli as cli

    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    launched = []
    launcher = "run_torchrun"
    monkeypatch.setattr(cli, launcher, lambda argv, **_: launched.append(argv) or 0)
    argv = ["eval", str(hf_folder), "--suite", "gsm8k", "--tensor-parallel-size", "2",
            "--data-parallel", "4", "--gpu-memory-utilization", "0.8"]
    assert main(argv) == 0
    (cmd,) = launched
    assert cmd[0] == "--nproc_per_node=8" and cmd[2:5] == ["-m", "nemo_cascade.tooling.cli", "eval"]
    assert cmd[4:] == argv, "each rank runs the same command"


def test_under_torchrun_each_rank_evaluates_with_the_layout(monkeypatch, hf_folder, capsys):
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "x")
    monkeypatch.setenv("RANK", "1")
    seen = {}

    def fake_evaluate(checkpoint, names, settings, **kw):
        seen.update(kw)
        path = hf_folder / "eval.json"
        path.write_text(json.dumps({"suites": {}}))
        return {}, path

    monkeypatch.setattr(standalone, "evaluate_checkpoint", fake_evaluate)
    assert main(["eval", str(hf_folder), "--suite", "gsm8k", "--tensor-parallel-size", "2",
                 "--data-parallel", "2"]) == 0
    assert ((seen["tensor_parallel_size"], seen["data_parallel"], seen["gpu_memory_utilization"])
            == (2, 2, 0.9))
    assert capsys.readouterr().out == "", "rank 0 prints for all"
