"""nemo_cascade/tooling/plan/ and `nemo-cascade plan`: the per-GPU memory estimate of a cascade's
stages.

Hand-computed numbers on a tiny shape, how each parallel dimension moves them, the model-shape
sources (config.json, presets, a size in the folder's name), and the paper's recipes through the CLI
(no model files, no GPU)."""
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade import config
from nemo_cascade.tooling.plan import (CascadePlan, PRESETS, actor_bytes, engine_bytes,
                                       estimate_bytes, head_activation_bytes,
                                       layer_activation_bytes, plan_cascade, rank_params,
                                       resolve_shape)
from nemo_cascade.tooling.plan_table import render
from nemo_cascade.convert.shape import ModelShape
from nemo_cascade.tooling.cli import load_recipe

ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30
ENV = ("NEMO_CASCADE_MODELS", "NEMO_CASCADE_DATA", "NEMO_CASCADE_RM_URL", "NEMO_CASCADE_JUDGE_URL")

# hidden 8, ffn 16, 2 heads / 1 KV head of 4, vocab 32, 2 layers, untied, q/k norms.
TINY = ModelShape("t", hidden_size=8, ffn_hidden_size=16, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=4, vocab_size=32, num_layers=2)
# Per layer: q,k,v 8·(2+2)·4 = 128, o 2·4·8 = 64, MLP 3·8·16 = 384 → 576 split over TP; norms 2·8 +
# 2·4 = 24. Whole model: 2·600 + embedding 256 + head 256 + final norm 8 = 1720.


def one_gpu(**kw) -> config.Parallel:
    return config.Parallel(**{"tp": 1, "pp": 1, "cp": 1, "dp": 1, "micro_batch_size": 1, **kw})


def bytes_of(parallel: config.Parallel, shape: ModelShape = TINY, seq: int = 10, te: bool = False,
             rows: int = 1, **kw) -> dict:
    ranks = [
        actor_bytes(shape, parallel, seq=seq, rows_per_step=rows, rank=r, te=te, dtype_bytes=2,
                    **kw)
        for r in range(parallel.pp)]
    return max(ranks, key=lambda m: m["train"])


@pytest.fixture(autouse=True)
def _default_environment(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


# ---- hand-computed numbers -----------------------------------------------------------------------

def test_tiny_shape_by_hand():
    assert TINY.layer_params() == (576, 24)
    assert TINY.params() == 1720
    assert rank_params(TINY, 1, 1, 0) == 1720
    # TP splits all but the norms
    assert rank_params(TINY, 2, 1, 0) == 2 * (288 + 24) + 128 + 8 + 128
    assert TINY.kv_bytes_per_token() == 2 * 2 * 1 * 4 * 2
    # per layer and row at S = 10: S·(10·16 + 16·8 + 8·4) = 3200, S·20·8 = 1600, 6·2·S² = 1200
    assert layer_activation_bytes(TINY, 10) == 6000
    assert layer_activation_bytes(TINY, 10, quadratic=False) == 4800
    # norms stay whole without SP
    assert layer_activation_bytes(TINY, 10, tp=2) == 1600 + 1600 + 600
    assert layer_activation_bytes(TINY, 10, tp=2, sp=True) == 1600 + 800 + 600
    assert head_activation_bytes(TINY, 10) == 16 * 10 * 32 + 10 * 10 * 8


def test_one_gpu_train_step_by_hand():
    m = bytes_of(one_gpu())
    assert m["state"] == 1720 * (2 + 4 + 12)                  # 18 B/param
    assert m["activations"] == pytest.approx(1.05 * (2 * 6000 + 5920))
    assert m["fixed"] == 2 * GIB + 2 * 2 * 10 * 10            # + the local spec's baddbmm buffer
    assert m["train"] == pytest.approx(m["state"] + m["activations"] + m["fixed"])
    # the same formula as bench/gpu_step.py's single-GPU estimate
    e = estimate_bytes(TINY, 2, 1, 10)
    assert (e["params"], e["state"]) == (1720, m["state"])
    assert e["activations"] == pytest.approx(m["activations"])
    assert e["total"] == pytest.approx(m["train"])


def test_gpu_step_estimate_matches_its_h200_calibration():
    """12 Qwen3-8B-shaped layers at 4096 tokens (local spec, no recompute): 123.8 GiB estimated,
    112–116 measured."""
    shape = replace(PRESETS["qwen3-8b"], num_layers=12)
    assert estimate_bytes(shape, 12, 1, 4096)["total"] / GIB == pytest.approx(123.77, abs=0.01)


def test_engine_by_hand():
    shape = PRESETS["qwen3-8b"]
    e = engine_bytes(shape, 0.45, 80 * GIB, 2)
    assert shape.kv_bytes_per_token() == 2 * 36 * 8 * 128 * 2
    assert e["weights"] == 2 * shape.params() and e["budget"] == 0.45 * 80 * GIB
    assert e["kv"] == 0.45 * 80 * GIB - e["weights"]
    assert e["kv_tokens"] == int(e["kv"] // (2 * 36 * 8 * 128 * 2))
    # weights alone exceed the budget
    assert engine_bytes(shape, 0.1, 80 * GIB, 2)["kv_tokens"] == 0


def test_engine_tensor_parallel_by_hand():
    """rollout.tensor_parallel_size: each GPU holds 1/t of the weights and kv_heads / t of each
    token's KV (8 KV heads: replicated past t = 8, so a token costs one head per GPU)."""
    shape = PRESETS["qwen3-14b"]
    one, four = engine_bytes(shape, 0.5, 80 * GIB, 2), engine_bytes(shape, 0.5, 80 * GIB, 2, tp=4)
    assert four["weights"] == one["weights"] / 4
    assert four["kv_per_token"] == shape.kv_bytes_per_token() / 4
    assert four["kv_tokens"] == int(
        (0.5 * 80 * GIB - one["weights"] / 4) // (shape.kv_bytes_per_token() / 4))
    assert four["kv_tokens"] > 4 * one["kv_tokens"]  # a quarter of the cost per token and more room
    assert (engine_bytes(shape, 0.5, 80 * GIB, 2, tp=16)["kv_per_token"]
            == shape.kv_bytes_per_token() / 8)


def test_plan_reads_the_engine_tensor_parallel_size():
    cfg = load_recipe(f"{ROOT / 'recipes/nemotron_cascade_14b_thinking.py'}:single_node")
    cfg = apply_overrides(cfg, ["stages.*.rollout.tensor_parallel_size=4"])
    text = render(plan_cascade(cfg))
    assert "engine: vLLM TP 4, 2 engines of 4 ranks (6.9 GiB of weights per GPU)" in text, text
    with pytest.raises(config.ConfigError, match="rollout.tensor_parallel_size=3"):
        plan_cascade(apply_overrides(cfg, ["parallel.tp=2", "parallel.dp=12",
                                                  "stages.*.rollout.tensor_parallel_size=3"]))


# ---- how the layout moves the numbers ------------------------------------------------------------

def test_tp_halves_the_parameter_part():
    shape = PRESETS["qwen3-8b"]
    one, two = bytes_of(one_gpu(), shape, te=True), bytes_of(one_gpu(tp=2), shape, te=True)
    # only the norms are replicated
    assert two["params"] == pytest.approx(one["params"] / 2, rel=1e-3)
    assert two["state"] == pytest.approx(one["state"] / 2, rel=1e-3)
    split, rep = TINY.layer_params()
    replicated = TINY.num_layers * rep + TINY.hidden_size
    assert rank_params(TINY, 2, 1, 0) - replicated == (TINY.params() - replicated) / 2


def test_dp_shards_only_the_optimizer():
    one, four = bytes_of(one_gpu()), bytes_of(one_gpu(dp=4))
    assert four["state"] == 1720 * 6 + 1720 * 12 / 4
    assert four["activations"] == one["activations"]
    assert bytes_of(one_gpu(dp=4, distributed_optimizer=False))["state"] == one["state"]
    # Megatron shards over DP × CP
    assert bytes_of(one_gpu(cp=4), te=True)["state"] == bytes_of(one_gpu(dp=4), te=True)["state"]


def test_full_recompute_lowers_activations():
    shape = PRESETS["qwen3-8b"]
    acts = {
        r: bytes_of(one_gpu(tp=2, sequence_parallel=True, recompute=r), shape,
                    seq=8192)["activations"]
        for r in ("none", "selective", "full")}
    # selective drops the local spec's S² attention part
    assert acts["full"] < acts["selective"] < acts["none"]
    te = {r: bytes_of(one_gpu(recompute=r), shape, seq=8192, te=True)["activations"]
          for r in ("none", "full")}
    assert te["full"] < te["none"] / 3
    # full: one bf16 input per layer + one layer's activations + the head
    S = 8192
    expected = 1.05 * (36 * 2 * S * shape.hidden_size
                       + layer_activation_bytes(shape, S, quadratic=False)
                       + head_activation_bytes(shape, S))
    assert te["full"] == pytest.approx(expected)


def test_cp_splits_the_sequence():
    shape = PRESETS["qwen3-14b"]
    whole = bytes_of(one_gpu(tp=8, sequence_parallel=True), shape, seq=30 * 1024, te=True)
    split = bytes_of(one_gpu(tp=8, sequence_parallel=True, cp=2), shape, seq=60 * 1024, te=True)
    assert split["activations"] == pytest.approx(whole["activations"])
    doubled = bytes_of(one_gpu(tp=8, sequence_parallel=True), shape, seq=60 * 1024, te=True)
    # linear in S without the S² term
    assert doubled["activations"] == pytest.approx(2 * whole["activations"])


def test_pipeline_first_rank_holds_pp_microbatches():
    shape = PRESETS["qwen3-8b"]
    p = one_gpu(pp=4)
    first = actor_bytes(shape, p, seq=4096, rows_per_step=64, rank=0, te=True, dtype_bytes=2)
    last = actor_bytes(shape, p, seq=4096, rows_per_step=64, rank=3, te=True, dtype_bytes=2)
    per_layer = layer_activation_bytes(shape, 4096, quadratic=False)
    assert first["activations"] == pytest.approx(1.05 * 4 * 9 * per_layer)  # 4 in flight × 9 layers
    assert last["activations"] == pytest.approx(
        1.05 * (9 * per_layer + head_activation_bytes(shape, 4096)))
    few = actor_bytes(shape, p, seq=4096, rows_per_step=2, rank=0, te=True, dtype_bytes=2)
    # only 2 microbatches exist
    assert few["activations"] == pytest.approx(1.05 * 2 * 9 * per_layer)


# ---- model shapes --------------------------------------------------------------------------------

def test_presets_are_the_public_configs():
    shapes = {name: (shape.hidden_size, shape.num_layers, shape.num_attention_heads,
                     shape.num_key_value_heads, shape.head_dim, shape.ffn_hidden_size,
                     shape.vocab_size)
              for name, shape in PRESETS.items()}
    assert shapes["qwen3-8b"] == (4096, 36, 32, 8, 128, 12288, 151936)
    assert shapes["qwen3-14b"] == (5120, 40, 40, 8, 128, 17408, 151936)
    assert shapes["qwen2.5-72b"] == (8192, 80, 64, 8, 128, 29568, 152064)
    assert PRESETS["qwen3-8b"].params() / 1e9 == pytest.approx(8.19, abs=0.01)
    assert PRESETS["qwen3-14b"].params() / 1e9 == pytest.approx(14.77, abs=0.01)
    assert PRESETS["qwen2.5-72b"].params() / 1e9 == pytest.approx(72.71, abs=0.01)


@pytest.mark.parametrize("path,preset", [
    ("models/Nemotron-Cascade-8B-SFT", "qwen3-8b"), ("/x/Qwen3-8B-Base", "qwen3-8b"),
    ("models/Nemotron-Cascade-14B-Thinking-SFT", "qwen3-14b"),
    ("models/Qwen2.5-72B-Instruct", "qwen2.5-72b")])
def test_absent_folder_names_its_preset(path, preset):
    shape, source = resolve_shape(config.Model(hf_path=path))
    assert shape == PRESETS[preset]
    assert "no such folder here" in source and preset in source
    assert "not an architecture the actor loads" not in source


def test_config_json_wins_over_the_name(tmp_path):
    folder = tmp_path / "Qwen3-8B-lookalike"
    folder.mkdir()
    raw = {
        "architectures": ["Qwen3ForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
        "vocab_size": 100, "tie_word_embeddings": True}
    (folder / "config.json").write_text(json.dumps(raw))
    shape, source = resolve_shape(config.Model(hf_path=str(folder)))
    assert (shape.hidden_size, shape.num_layers, shape.vocab_size, shape.tied_embeddings,
            shape.qk_norm) == (64, 2, 100, True, True)
    assert source.endswith("config.json")
    # --shape wins
    assert resolve_shape(config.Model(hf_path=str(folder)), "qwen3-14b")[0] == PRESETS["qwen3-14b"]


def test_qwen2_folder_is_planned_with_its_biases(tmp_path):
    folder = tmp_path / "Qwen2.5-72B-Instruct"
    folder.mkdir()
    raw = {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 8192,
        "intermediate_size": 29568, "num_hidden_layers": 80, "num_attention_heads": 64,
        "num_key_value_heads": 8, "vocab_size": 152064, "tie_word_embeddings": False}
    (folder / "config.json").write_text(json.dumps(raw))
    shape, source = resolve_shape(config.Model(hf_path=str(folder)))
    assert replace(shape, name="") == replace(PRESETS["qwen2.5-72b"], name="") and shape.qkv_bias
    assert source.endswith("config.json")


def test_architecture_the_actor_does_not_load_is_planned_with_a_note(tmp_path):
    folder = tmp_path / "Mistral-7B"
    folder.mkdir()
    raw = {
        "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
        "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "vocab_size": 32000, "tie_word_embeddings": False}
    (folder / "config.json").write_text(json.dumps(raw))
    shape, source = resolve_shape(config.Model(hf_path=str(folder)))
    assert (shape.hidden_size, shape.num_layers, shape.num_key_value_heads, shape.head_dim,
            shape.qk_norm) == (4096, 32, 8, 128, False)
    assert "MistralForCausalLM is not an architecture the actor loads" in source
    (folder / "config.json").write_text("{")
    with pytest.raises(ValueError, match="config.json: not valid JSON"):
        resolve_shape(config.Model(hf_path=str(folder)))


def test_unknown_shapes_are_one_line_errors(tmp_path):
    with pytest.raises(config.ConfigError, match="--shape nope: unknown shape"):
        resolve_shape(config.Model(hf_path="models/Qwen3-8B"), "nope")
    with pytest.raises(config.ConfigError, match="no size in its name"):
        resolve_shape(config.Model(hf_path=str(tmp_path / "my-model")))
    with pytest.raises(config.ConfigError, match="pass --shape"):
        resolve_shape(config.Model(hf_path=str(tmp_path / "Qwen3-32B")))  # a size without a preset


# ---- cascades ------------------------------------------------------------------------------------

RECIPES = {
    "8b": "recipes/nemotron_cascade_8b.py",
    "8b_thinking": "recipes/nemotron_cascade_8b_thinking.py",
    "14b_thinking": "recipes/nemotron_cascade_14b_thinking.py",
    "rm_72b": "recipes/reward_model_72b.py"}
def plan_of(path: str, fn: str = "recipe") -> CascadePlan:
    return plan_cascade(load_recipe(f"{ROOT / path}:{fn}"))


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ENV}
    return subprocess.run([sys.executable, "-m", "nemo_cascade.tooling.cli", "plan", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", RECIPES)
def test_paper_recipe_plans_through_the_cli(name):
    proc = cli(RECIPES[name])
    assert proc.returncode == 0, proc.stderr[-2000:]
    cfg = load_recipe(str(ROOT / RECIPES[name]))
    # the memory plan, then the step times (test_plan_time.py)
    memory, _, times = proc.stdout.partition("\ntime: ")
    rows = [line for line in memory.splitlines()
            if line.startswith("| ") and "| stage |" not in line]
    assert [r.split("|")[1].strip() for r in rows] == [s.name for s in cfg.stages]
    assert "assumptions:" in memory and "GPUs of 80 GiB" in memory and times
    assert ("WARNING" in memory) == (not plan_of(RECIPES[name]).fits)


@pytest.mark.parametrize("name,fn", [("8b", "recipe"), ("8b_thinking", "recipe"),
                                     ("14b_thinking", "recipe"), ("14b_thinking", "single_node"),
                                     ("rm_72b", "recipe")])
def test_paper_recipes_fit_on_h100_80gb(name, fn):
    plan = plan_of(RECIPES[name], fn)
    over = [f"{s.name}: {s.verdict()} ({s.total / GIB:.1f} GiB)" for s in plan.stages if not s.fits]
    assert not over, over
    # one engine (of rollout.tensor_parallel_size ranks) holds a whole request
    if plan.engine_utilization is not None:
        engine = engine_bytes(plan.shape, plan.engine_utilization, plan.gpu, 2, plan.engine_tp)
        assert engine["kv_tokens"] >= plan.engine_context


def test_14b_plan_numbers():
    """TP 8 × CP 2 on 16 GPUs with the engine sharded over pairs of ranks: ≈ 20.6 GiB of actor
    state, 13.8 GiB of engine weights per GPU (half the 27.5 GiB copy), ≈ 449K tokens of KV cache
    per engine (134K unsharded)."""
    plan = plan_of(RECIPES["14b_thinking"])
    assert plan.engine_tp == 2
    code = next(s for s in plan.stages if s.name == "code")
    assert code.seq == 4 * 1024 + 56 * 1024
    assert code.actor_state / GIB == pytest.approx(20.6, abs=0.1)
    assert code.engine_weights / GIB == pytest.approx(27.5 / 2, abs=0.1)
    assert code.kv_tokens == pytest.approx(449_000, rel=0.01)
    assert code.rollout == pytest.approx(code.actor_state + 0.6 * 80 * GIB + 2 * GIB)
    one = plan_of(RECIPES["14b_thinking"], "single_node")  # one node: the engine over 4 ranks
    assert one.engine_tp == 4 and one.fits
    code = next(s for s in one.stages if s.name == "code")
    assert code.engine_weights / GIB == pytest.approx(27.5 / 4, abs=0.1)
    assert code.kv_tokens == pytest.approx(868_000, rel=0.01)
    assert max(s.total for s in one.stages) / GIB == pytest.approx(73.0, abs=0.1)


@pytest.mark.parametrize("name", ["8b", "8b_thinking", "14b_thinking"])
def test_docs_show_the_plans(name):
    """docs/recipes.md's "Memory plan" section: each policy recipe's header and table as the command
    prints them."""
    doc = (ROOT / "docs" / "recipes.md").read_text()
    section = doc[doc.index("## Memory plan (nemo-cascade plan)"):]
    head, table = render(plan_of(RECIPES[name])).split("\n\n")[:2]
    assert f"### `{RECIPES[name]}`\n\n```text\n{head}\n```\n\n{table}\n" in section, (
        "docs/recipes.md is out of date: paste `nemo-cascade plan " + RECIPES[name]
        + "`'s header and table")


def test_sft_after_the_gate_trains_beside_the_sleeping_engine():
    """with_sft(): the gate after sft_16k builds the engine and puts it to sleep, so sft_32k trains
    without it."""
    plan = plan_of(RECIPES["8b"], "with_sft")
    first, second = plan.stages[:2]
    assert first.engine_weights is None and second.engine_weights is None
    assert any("engine sleeps" in n for n in second.notes)
    assert second.train == pytest.approx(second.actor_state + second.activations + 2 * GIB)


def test_reward_model_stage_keeps_the_policy_actor():
    plan = plan_of(RECIPES["rm_72b"])
    (rm,) = plan.stages
    assert rm.engine_weights is None and rm.rollout is None  # no gate, no GRPO stage: no engine
    assert any("policy actor resident" in n for n in rm.notes)


def test_plan_command_errors_are_one_line(tmp_path):
    for args in ((RECIPES["8b"], "--shape", "nope"),
                 (RECIPES["8b"], f"model.hf_path={tmp_path / 'no-size'}")):
        proc = cli(*args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert (len(proc.stderr.strip().splitlines()) == 1
                and proc.stderr.startswith("nemo-cascade: error:")), args


@pytest.mark.parametrize("args,message", [
    (("recipes/missing.py",), "recipe recipes/missing.py: no such file"),
    ((RECIPES["8b"], "parallel.tp=3", "parallel.dp=1"),
     "parallel.tp=3 must divide the model's num_key_value_heads=8"),
    ((RECIPES["8b"], "--shape", "qwen3-14b", "parallel.pp=3"),
     "parallel.pp=3 must divide the model's num_hidden_layers=40"),
])
def test_plan_command_errors_in_process(args, message, capsys, monkeypatch):
    from nemo_cascade.tooling.cli import main

    monkeypatch.chdir(ROOT)
    assert main(["plan", *args]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert (len(lines) == 1 and lines[0].startswith("nemo-cascade: error:")
            and message in lines[0]), lines


def test_plan_overrides_and_gpu_memory():
    proc = cli(RECIPES["14b_thinking"], "--gpu-memory-gib", "40", "parallel.recompute=none")
    assert proc.returncode == 0, proc.stderr  # over is a warning, not a failure
    assert "GPUs of 40 GiB" in proc.stdout and "recompute" not in proc.stdout.splitlines()[0]
    assert "WARNING: stage" in proc.stdout


def test_plan_imports_no_torch():
    code = ("import sys; import nemo_cascade.tooling.plan; "
            "assert not {'torch', 'megatron', 'vllm'} & set(sys.modules), "
            "'nemo_cascade.tooling.plan imports torch'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
