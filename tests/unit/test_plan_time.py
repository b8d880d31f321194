"""tooling/plan_time.py: step time and checkpoint interval against a job's time limit, against
hand-computed numbers."""
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest

from nemo_cascade import config
from nemo_cascade.tooling import plan
from nemo_cascade.tooling import plan_time
from nemo_cascade.tooling.cli import load_recipe, main

ROOT = Path(__file__).resolve().parents[2]
EIGHT_B = "recipes/nemotron_cascade_8b.py"


def test_time_limits_parse_like_sbatch_and_bad_ones_are_one_line():
    assert plan_time.parse_time_limit("04:00:00") == 4 * 3600
    assert plan_time.parse_time_limit("1-02:30:15") == 26 * 3600 + 30 * 60 + 15
    for bad in ("4h", "04:00", "00:61:00", "00:00:00", ""):
        with pytest.raises(config.ConfigError, match="--time-limit") as err:
            plan_time.parse_time_limit(bad)
        assert "\n" not in str(err.value)


def test_the_default_time_limit_is_the_sbatch_scripts():
    for script in ("cascade_8b.sh", "cascade_14b.sh"):
        assert (f"#SBATCH --time={plan_time.DEFAULT_TIME_LIMIT}\n"
                in (ROOT / "slurm" / script).read_text())


def test_train_seconds_is_six_flops_per_param_and_token_at_the_mfu():
    hw = plan_time.Hardware(peak_flops=1e15, mfu=0.5)
    # 6 · 8e9 · 1e6 = 4.8e16 FLOPs over 8 GPUs × 1e15 × 0.5 = 4e15 FLOP/s → 12 s
    assert plan_time.train_seconds(8e9, 1e6, 8, hw) == pytest.approx(12.0)
    # + a KL reference
    assert plan_time.train_seconds(8e9, 1e6, 8, hw, flops_per_token=8.0) == pytest.approx(16.0)


def test_decode_is_memory_bound_in_waves_of_what_the_kv_cache_holds():
    # 1e12 B/s achieved; no fixed cost an iteration and no prefill (next test)
    hw = plan_time.Hardware(hbm_bytes_per_s=2e12, bandwidth_share=0.5, max_seqs=256,
                            decode_iteration_s=0.0)
    # mean context 1000 + 2000/2 = 2000 tokens; 40,000 KV tokens hold 20 sequences → 5 waves for
    # 100; an iteration reads 8e9 B of weights + 20 · 2000 · 1e5 B of KV = 1.2e10 B → 12 ms; 5 ·
    # 2000 · 12 ms = 120 s
    kw = dict(prompt=1000, response=2000, weight_bytes=8e9, kv_bytes_per_token=1e5, hw=hw)
    assert plan_time.decode_seconds(sequences=100, kv_tokens=40_000, **kw) == pytest.approx(120.0)
    # max_num_seqs caps a roomy cache: 10 at once → 10 waves of (8e9 + 10 · 2000 · 1e5 = 1e10 B → 10
    # ms) · 2000
    capped = replace(hw, max_seqs=10)
    assert (plan_time.decode_seconds(sequences=100, kv_tokens=10**9, **{**kw, "hw": capped})
            == pytest.approx(200.0))
    # fewer sequences than room: one wave of 3 → (8e9 + 3 · 2000 · 1e5 = 8.6e9 B → 8.6 ms) · 2000 =
    # 17.2 s
    assert plan_time.decode_seconds(sequences=3, kv_tokens=40_000, **kw) == pytest.approx(17.2)
    assert plan_time.decode_seconds(sequences=0, kv_tokens=40_000, **kw) == 0.0


def test_a_wave_prefills_once_per_group_and_an_iteration_is_the_slower_of_reads_and_compute():
    hw = plan_time.Hardware(peak_flops=1e15, mfu=0.5, hbm_bytes_per_s=2e12, bandwidth_share=0.5,
                            max_seqs=256, decode_iteration_s=0.002)
    kw = dict(prompt=1000, response=2000, weight_bytes=8e9, kv_bytes_per_token=1e5, hw=hw,
              kv_tokens=40_000, token_flops=2 * 4e9)
    # 5 waves of 20 sequences; a wave: 20 / 4 samples a prompt = 5 prompts · 1000 tokens · 8e9
    # FLOPs at 5e14 FLOP/s = 80 ms of prefill, then 2000 iterations of 12 ms (as above) + 2 ms
    assert (plan_time.decode_seconds(sequences=100, samples_per_prompt=4, **kw)
            == pytest.approx(5 * (0.08 + 2000 * 0.014)))
    # without a shared prompt every sequence prefills its own: 20 · 16 ms a wave
    assert (plan_time.decode_seconds(sequences=100, **kw)
            == pytest.approx(5 * (0.32 + 2000 * 0.014)))
    assert (plan_time.decode_seconds(sequences=100, samples_per_prompt=4, one_wave=True, **kw)
            == pytest.approx(0.08 + 2000 * 0.014))
    # at 1 % MFU the batch's forward (20 · 8e9 FLOPs at 1e13 FLOP/s = 16 ms) outlasts its reads
    # (12 ms): decode is compute-bound, and the prefill takes 4 s a wave
    slow = {**kw, "hw": replace(hw, mfu=0.01)}
    assert (plan_time.decode_seconds(sequences=100, samples_per_prompt=4, **slow)
            == pytest.approx(5 * (4.0 + 2000 * (0.002 + 0.016))))


def test_an_adam_step_moves_thirty_bytes_a_parameter_over_the_jobs_gpus():
    hw = plan_time.Hardware(hbm_bytes_per_s=2e12, bandwidth_share=0.5)
    # 30 · 8e9 B over 8 GPUs at 1e12 B/s each = 30 ms
    assert plan_time.optimizer_seconds(8e9, 8, hw) == pytest.approx(0.03)


def test_saves_come_by_steps_or_minutes_whichever_first():
    # 30 min / 60 s = 30 steps > 25
    assert plan_time.save_every(25, 30.0, 60.0, 1000) == (25, "steps")
    assert plan_time.save_every(25, 30.0, 600.0, 1000) == (3, "minutes")     # 1800 / 600 = 3 steps
    # a save needs a step to end: ⌈1800/700⌉
    assert plan_time.save_every(25, 30.0, 700.0, 1000) == (3, "minutes")
    # a 2 h step: every step, still 2 h
    assert plan_time.save_every(25, 30.0, 7200.0, 1000) == (1, "minutes")
    # both off: only the stage's export
    assert plan_time.save_every(0, 0.0, 10.0, 7) == (7, "stage end")
    assert plan_time.save_every(25, 0.0, 10.0, 7) == (7, "stage end")


def test_a_stage_adds_generation_and_training_on_the_plans_layout():
    cfg = load_recipe(f"{ROOT / EIGHT_B}")
    memory = plan.plan_cascade(cfg)
    math_stage = config.stage_by_name(cfg, "math")
    t = plan_time.stage_time(math_stage, memory, 30.0, budget_s=3 * 3600)
    prompt, response = math_stage.rollout.max_prompt_tokens, max(p.max_response_tokens for p in
                                                                 config.length_phases(math_stage))
    rows = math_stage.grpo.prompts_per_step * math_stage.grpo.group_size
    assert t.tokens == rows * (prompt + response)
    params = memory.shape.params()
    assert t.train_s == pytest.approx(6 * params * t.tokens / (8 * 989e12 * 0.35)
                                      + 30 * params / (8 * 3.35e12 * 0.6))
    e = plan.engine_bytes(memory.shape, memory.engine_utilization, memory.gpu, 2, memory.engine_tp)
    engines = 8 // memory.engine_tp
    engine = dict(weight_bytes=e["weights"], kv_bytes_per_token=e["kv_per_token"],
                  kv_tokens=e["kv_tokens"], samples_per_prompt=math_stage.grpo.group_size,
                  token_flops=2 * params / memory.engine_tp)
    assert t.generate_s == pytest.approx(plan_time.decode_seconds(
        sequences=math.ceil(rows / engines), prompt=prompt, response=response, **engine))
    assert t.save_steps == max(1, math.ceil(1800 / t.step_s)) and t.saved_by == "minutes"
    assert t.wave_s == pytest.approx(plan_time.decode_seconds(
        sequences=math.ceil(rows / engines), prompt=prompt, response=response, one_wave=True,
        **engine)) and t.wave_s < t.generate_s
    # a stop inside a step keeps its finished groups: a job moves it forward by what it has less one
    # wave
    assert t.progress_per_job == pytest.approx((3 * 3600 - t.wave_s) / t.step_s)
    assert t.jobs == math.ceil(math_stage.steps / t.progress_per_job)
    assert t.steps == math_stage.steps and t.gpus == memory.world == 8
    assert t.stage_s == pytest.approx(math_stage.steps * t.step_s)
    assert t.gpu_hours == pytest.approx(math_stage.steps * t.step_s * 8 / 3600)
    epochs = plan_time.stage_time(config.Stage(name="sft", kind="sft", steps=0, epochs=1.0),
                                  memory, 30.0, 3600)
    # its steps are known once its data is loaded
    assert epochs.stage_s is None and epochs.gpu_hours is None


def test_progress_per_job_fractions_of_a_grpo_step_whole_supervised_steps():
    grpo = plan_time.StageTime("code", "grpo", 1e6, train_s=600, generate_s=5 * 3600, save_steps=1,
                               saved_by="minutes", budget_s=3 * 3600, wave_s=1800, steps=90, gpus=8)
    # 0.48 of a step
    assert grpo.progress_per_job == pytest.approx((3 * 3600 - 1800) / (5 * 3600 + 600))
    assert grpo.jobs == math.ceil(90 / grpo.progress_per_job)
    sft = plan_time.StageTime("sft", "sft", 1e6, train_s=700, generate_s=0, save_steps=25,
                              saved_by="steps", budget_s=3600, steps=100, gpus=8)
    # ⌊3600 / 700⌋ whole steps: a step saves only when done
    assert sft.progress_per_job == 5 and sft.jobs == 20
    slow = replace(sft, train_s=4000)
    assert slow.progress_per_job == 0 and slow.jobs is None
    with pytest.raises(config.ConfigError,
                       match=r"stages.sft: one sft step takes ≈ 1.1 h, more than the ≈ 1.0 h "
                             r"a 01:30:00 job has for work: lower stages.sft.sft_batch_size"):
        plan_time.check_progress([grpo, slow], "01:30:00")
    plan_time.check_progress([grpo, sft], "01:30:00")


def test_the_job_budget_leaves_the_start_up_the_save_and_the_stop_margin():
    cfg = load_recipe(f"{ROOT / EIGHT_B}")
    memory = plan.plan_cascade(cfg)
    save = 14 * memory.shape.params() / (memory.world * 1e9)
    assert plan_time.job_budget(cfg, memory, 4 * 3600) == pytest.approx(4 * 3600 - 600 - save - 180)
    assert (plan_time.job_budget(replace(cfg, stop_margin_seconds=30), memory, 4 * 3600)
            == pytest.approx(4 * 3600 - 600 - save - 120)), (
        "never less than the time-limit signal's lead")


def test_the_cli_prints_progress_per_job_and_refuses_a_job_that_cannot_progress(capsys):
    assert main(["plan", EIGHT_B, "--time-limit", "04:00:00"]) == 0
    out = capsys.readouterr().out
    assert "time: a job of 04:00:00 has ≈ 3.8 h for work" in out and "time assumptions:" in out
    assert "| progress per job | jobs | steps | stage time | GPU-hours |" in out
    assert re.search(r"^\| code \| grpo \| .* \| 0\.\d\d step \| \d+ \| 90 \|", out, re.M), \
        "the code-RL step is longer than a job, and still progresses"
    assert re.search(r"^total: \d+ jobs of 04:00:00 for the 7 stages", out, re.M)
    assert main(["plan", EIGHT_B, "--time-limit", "00:20:00"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (len(err) == 1
            and "stages.math: one wave of responses at its longest budget takes" in err[0]
            and "lower stages.math.rollout.max_response_tokens" in err[0]), err
    assert main(["plan", EIGHT_B, "--time-limit", "4h"]) == 2
    assert "--time-limit '4h': expected HH:MM:SS" in capsys.readouterr().err


def test_the_gate_s_rows_are_planned_and_progress_by_waves():
    cfg = load_recipe(f"{ROOT / EIGHT_B}")
    memory = plan.plan_cascade(cfg)
    g = plan_time.gate_time(cfg, memory, 3 * 3600)
    assert g.rows == int(cfg.gate.evaluate_base) + sum(s.evaluate for s in cfg.stages)
    assert 0 < g.wave_s < g.row_s and g.sequences > 0
    assert g.rows_per_job == pytest.approx((3 * 3600 - g.wave_s) / g.row_s)
    assert g.jobs == math.ceil(g.rows / g.rows_per_job)
    assert "gate: " in plan_time.render_gate(g, "04:00:00") and plan_time.gate_time(
        replace(cfg, gate=replace(cfg.gate, suites=())), memory, 3600) is None
    stuck = replace(g, budget_s=g.wave_s / 2)
    with pytest.raises(config.ConfigError, match="gate: one wave of a suite's samples takes"):
        plan_time.check_progress([], "00:10:00", stuck)
