"""Per stage: an estimated step time and the checkpoint interval against a job's time limit — the
time half of ``nemo-cascade plan`` (plan.py has the memory half and the shapes this builds on).

A Slurm job is requeued at its time limit and resumes where the job before stopped. The run stops
itself before the job's end (deadline.py: its save plus ``cfg.stop_margin_seconds``), so a job has
for work its time limit less the start-up, the save and the margin. A GRPO step keeps its finished
groups when it stops (step_rollouts.py): a job loses at most the sequences still generating at the
stop, one wave of them, and so makes progress whenever one wave fits — ``(budget − wave) / step``
steps per job, a fraction when a step is longer than a job. An SFT or RM step is saved only when it
ends: a job makes ``⌊budget / step⌋`` steps. A stage that cannot progress in a job (one wave, or one
SFT step, longer than the budget) is refused in one line (:func:`check_progress`). Saves also come
every ``stage.checkpoint_every`` steps or after ``cfg.checkpoint_every_minutes`` (``save every``):
what a node failure, which gives no warning, can cost.

The step time is a model, not a measurement (what each term leaves out is in :data:`ASSUMPTIONS`):

- **tokens per step** — GRPO: prompts × group size × (max prompt + longest response budget); SFT:
  batch × ``sft_max_tokens`` (packed rows); reward model: 2 × batch × ``rm_max_tokens`` (a chosen
  and a rejected row). Every response at its budget: an upper bound, as RL responses grow towards it
  (§4.5's length curriculum).
- **training** — forward + backward ≈ 6 · params · tokens FLOPs (+ 2 · params · tokens for a KL
  reference's forward), on every GPU of the job at ``mfu`` × the peak dense bf16 rate; then the
  optimizer's step, memory-bound (:data:`ADAM_BYTES_PER_PARAM` over the job's GPUs).
- **generation** (GRPO) — per wave a compute-bound prefill (2 · params per prompt token at the same
  ``mfu``; a group's samples share their prompt's, vLLM's prefix cache) and the decode: each
  decode iteration of an engine reads its weights and its sequences' KV cache from HBM once per
  GPU, or runs a token's forward for each of them at ``mfu`` if that is slower (a large batch),
  pays a fixed ``decode_iteration_s`` (scheduling, sampling, launches) and adds a token to every
  running sequence; an engine runs as many sequences at once as its KV cache holds at their
  mean length, prompt + half the response (vLLM's paged KV cache holds what a sequence has so far;
  at most ``max_num_seqs``), in waves, each decoding the longest response budget.

docs/scaling.md checks these terms against steps measured on a CPU (``bench/roofline.py``).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from nemo_cascade import config
from nemo_cascade.tooling.plan import CascadePlan, engine_bytes
from nemo_cascade.evaluate.runner import decoding_for
from nemo_cascade.evaluate.suites import EvalError, get_suite, load_items

DEFAULT_TIME_LIMIT = "04:00:00"
"""The sbatch scripts' ``#SBATCH --time`` (slurm/cascade_*.sh)."""
SIGNAL_LEAD_S = 120.0
"""``--signal=B:USR1@120``: the job stops stepping two minutes before its limit."""
ADAM_BYTES_PER_PARAM = 30
"""What an Adam step moves per parameter (fp32 master weights, bf16 model weights): it reads the
fp32 gradient, master weight and two moments (16 bytes) and writes the last three and the bf16
weight (14)."""
STARTUP_S = 600.0
"""Assumed time from a job's start to its first step: container, imports, loading the checkpoint
into the actor, starting the vLLM engine. Not measured at paper scale."""


@dataclass(frozen=True)
class Hardware:
    """What the estimate assumes of a GPU (defaults: H100 SXM, NVIDIA's datasheet numbers)."""

    name: str = "H100 SXM"
    peak_flops: float = 989e12
    """Dense bf16 tensor-core FLOP/s (no sparsity)."""
    hbm_bytes_per_s: float = 3.35e12
    mfu: float = 0.35
    """Assumed share of the peak the actor's train step achieves (variable-length RL batches,
    recompute, PP bubbles): an assumption, not a measurement."""
    bandwidth_share: float = 0.6
    """Assumed share of the HBM bandwidth decode achieves."""
    write_bytes_per_s: float = 1e9
    """Assumed checkpoint write rate per GPU to the shared filesystem (an assumption, not a
    measurement)."""
    max_seqs: int = 256
    """Sequences an engine runs at once at most (vLLM's ``max_num_seqs``)."""
    decode_iteration_s: float = 0.003
    """Assumed fixed time of one decode iteration beside its memory reads: the engine's scheduler,
    sampling and kernel launches (a few milliseconds for vLLM with CUDA graphs; not measured on a
    GPU here)."""


H100 = Hardware()


@dataclass(frozen=True)
class StageTime:
    name: str
    kind: str
    tokens: float
    """Tokens the actor trains on per step."""
    train_s: float
    generate_s: float
    save_steps: int
    """Steps from one save to the next."""
    saved_by: str
    """What triggers that save first: ``steps`` (checkpoint_every), ``minutes``
    (checkpoint_every_minutes) or ``stage end`` (the stage's export)."""
    budget_s: float
    """What one job has for work: time limit − start-up − the save − the stop margin."""
    wave_s: float = 0.0
    """One wave of generation (GRPO): the most a stop inside a step loses."""
    steps: int = 0
    """The stage's optimizer steps (0: given in epochs, known only once its data is loaded)."""
    gpus: int = 0
    """GPUs the stage runs on (the plan's world size)."""

    @property
    def step_s(self) -> float:
        return self.train_s + self.generate_s

    @property
    def interval_s(self) -> float:
        return self.save_steps * self.step_s

    @property
    def progress_per_job(self) -> float:
        """Steps one job moves the stage forward: a fraction of a step for a GRPO step longer than a
        job."""
        if self.kind in config.ON_POLICY_KINDS:
            return (max(0.0, self.budget_s - self.wave_s) / self.step_s if self.step_s > 0
                    else math.inf)
        return math.floor(self.budget_s / self.step_s) if self.step_s > 0 else math.inf

    @property
    def jobs(self) -> int | None:
        """Jobs the whole stage takes (None: steps unknown, or no progress in a job)."""
        if not self.steps or self.progress_per_job <= 0:
            return None
        return max(1, math.ceil(self.steps / self.progress_per_job - 1e-9))

    @property
    def stage_s(self) -> float | None:
        """The whole stage's steps (None for a stage given in epochs)."""
        return self.steps * self.step_s if self.steps else None

    @property
    def gpu_hours(self) -> float | None:
        return None if self.stage_s is None else self.stage_s * self.gpus / 3600


def parse_time_limit(text: str) -> float:
    """Seconds in a Slurm time limit ``[D-]HH:MM:SS``; ConfigError (one line) otherwise."""
    m = re.fullmatch(r"(?:(\d+)-)?(\d+):([0-5]\d):([0-5]\d)", str(text).strip())
    if not m:
        raise config.ConfigError(
            f"--time-limit {text!r}: expected HH:MM:SS or D-HH:MM:SS (as sbatch --time)")
    days, hours, minutes, seconds = (int(g or 0) for g in m.groups())
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if total <= 0:
        raise config.ConfigError(f"--time-limit {text}: expected a positive time")
    return float(total)


def train_seconds(params: float, tokens: float, gpus: int, hw: Hardware = H100,
                  flops_per_token: float = 6.0) -> float:
    """``flops_per_token`` · params · tokens FLOPs over ``gpus`` GPUs at ``hw.mfu`` × peak."""
    return flops_per_token * params * tokens / (gpus * hw.peak_flops * hw.mfu)


def optimizer_seconds(params: float, gpus: int, hw: Hardware = H100) -> float:
    """One Adam step over ``params`` sharded across ``gpus`` (the distributed optimizer), moving
    :data:`ADAM_BYTES_PER_PARAM` a parameter at ``hw.bandwidth_share`` of the memory's rate."""
    return ADAM_BYTES_PER_PARAM * params / (gpus * hw.hbm_bytes_per_s * hw.bandwidth_share)


def decode_seconds(*, sequences: int, prompt: int, response: int, weight_bytes: float,
                   kv_bytes_per_token: float, kv_tokens: int, hw: Hardware = H100,
                   one_wave: bool = False, samples_per_prompt: int = 1,
                   token_flops: float = 0.0) -> float:
    """One engine generating ``response`` tokens for each of ``sequences``, ``samples_per_prompt``
    of them sharing a prompt (module docstring). ``weight_bytes``, ``kv_bytes_per_token`` and
    ``token_flops`` (a token's forward: 2 · the parameters) are per GPU of the engine,
    ``kv_tokens`` the engine's KV cache. ``one_wave``: the time of one wave only (the sequences the
    cache holds at once)."""
    if sequences <= 0 or response <= 0:
        return 0.0
    mean_context = prompt + response / 2
    at_once = max(1, min(hw.max_seqs, int(kv_tokens // mean_context), sequences))
    waves = 1 if one_wave else math.ceil(sequences / at_once)
    compute = hw.peak_flops * hw.mfu
    prefill = math.ceil(at_once / samples_per_prompt) * prompt * token_flops / compute
    reads = (weight_bytes + at_once * mean_context * kv_bytes_per_token) / (
        hw.hbm_bytes_per_s * hw.bandwidth_share)
    # a large batch makes decode compute-bound: a token's forward for every running sequence
    per_iteration = hw.decode_iteration_s + max(reads, at_once * token_flops / compute)
    return waves * (prefill + response * per_iteration)


def save_seconds(params: float, gpus: int, hw: Hardware = H100) -> float:
    """A checkpoint's write: bf16 weights, fp32 master weights and two Adam moments (14 bytes a
    parameter), spread over the job's GPUs at ``hw.write_bytes_per_s`` each."""
    return 14 * params / (gpus * hw.write_bytes_per_s)


def save_every(checkpoint_every: int, minutes: float, step_s: float,
               stage_steps: int) -> tuple[int, str]:
    """``(steps between saves, what triggers the save)``: the first of checkpoint_every steps, the
    first step ending after ``minutes`` of wall time, and the stage's end (0 turns either setting
    off)."""
    options = [(stage_steps, "stage end")]
    if checkpoint_every > 0:
        options.append((checkpoint_every, "steps"))
    if minutes > 0:
        options.append((max(1, math.ceil(minutes * 60 / step_s)) if step_s > 0 else 1, "minutes"))
    return min(options, key=lambda o: o[0])


def _tokens_per_step(stage: config.Stage) -> tuple[float, int, int]:
    """``(tokens trained per step, prompt tokens, response tokens)`` (the last two for GRPO
    only)."""
    if config.samples_on_policy(stage):
        prompt = stage.rollout.max_prompt_tokens
        response = config.longest_response(stage)
        return (stage.grpo.prompts_per_step * stage.grpo.group_size * (prompt + response),
                prompt, response)
    if stage.kind == "sft":
        return stage.sft_batch_size * stage.sft_max_tokens, 0, 0
    return 2 * stage.rm_batch_size * stage.rm_max_tokens, 0, 0


def stage_time(stage: config.Stage, plan: CascadePlan, minutes: float, budget_s: float,
               hw: Hardware = H100) -> StageTime:
    """One stage's step time and save interval on the plan's layout (its shape, world, engine);
    ``budget_s`` what a job has for work."""
    shape = plan.shape
    tokens, prompt, response = _tokens_per_step(stage)
    params = shape.params(lm_head=stage.kind != "reward_model")
    # 6 FLOPs per parameter and token to train, 2 per frozen copy's forward (reference, teachers)
    train = (train_seconds(params, tokens, plan.world, hw, 6.0 + 2.0 * config.frozen_copies(stage))
             + optimizer_seconds(params, plan.world, hw))
    generate = wave = 0.0
    if config.samples_on_policy(stage) and plan.engine_utilization is not None:
        e = engine_bytes(shape, plan.engine_utilization, plan.gpu, plan.dtype_bytes, plan.engine_tp)
        engines = max(1, plan.world // plan.engine_tp)
        sequences = math.ceil(stage.grpo.prompts_per_step * stage.grpo.group_size / engines)
        kw = dict(sequences=sequences, prompt=prompt, response=response, weight_bytes=e["weights"],
                  kv_bytes_per_token=e["kv_per_token"], kv_tokens=e["kv_tokens"], hw=hw,
                  samples_per_prompt=stage.grpo.group_size,
                  token_flops=2 * shape.params() / plan.engine_tp)
        generate, wave = decode_seconds(**kw), decode_seconds(**kw, one_wave=True)
    steps, by = save_every(stage.checkpoint_every, minutes, train + generate, stage.steps)
    return StageTime(stage.name, stage.kind, tokens, train, generate, steps, by, budget_s, wave,
                     stage.steps, plan.world)


def job_budget(cfg: config.Cascade, plan: CascadePlan, time_limit_s: float,
               hw: Hardware = H100) -> float:
    """What a job has for work: its time limit less the start-up, the save and the stop margin (the
    run stops itself that long before the end; the time-limit signal's lead, if longer, instead)."""
    save = save_seconds(plan.shape.params(), plan.world, hw)
    return time_limit_s - STARTUP_S - save - max(cfg.stop_margin_seconds, SIGNAL_LEAD_S)


def time_plan(cfg: config.Cascade, plan: CascadePlan, time_limit_s: float,
              hw: Hardware = H100) -> list[StageTime]:
    budget = job_budget(cfg, plan, time_limit_s, hw)
    return [stage_time(s, plan, cfg.checkpoint_every_minutes, budget, hw) for s in cfg.stages]


@dataclass(frozen=True)
class GateTime:
    """One forgetting-gate row (every suite of ``cfg.gate``) on the plan's engines."""

    rows: int
    """Rows the cascade evaluates: the starting model's (``gate.evaluate_base``) and every gated
    stage's."""
    sequences: int
    """Samples one row generates (items × K over the suites whose data is here)."""
    row_s: float
    wave_s: float
    """One wave of a suite's samples (items are kept as they finish): the most a stop inside a row
    loses."""
    budget_s: float
    unknown: tuple[str, ...] = ()
    """Suites left out: their data file is not on this machine."""

    @property
    def rows_per_job(self) -> float:
        return max(0.0, self.budget_s - self.wave_s) / self.row_s if self.row_s > 0 else math.inf

    @property
    def jobs(self) -> int:
        """Jobs every row of the cascade takes together (0: no gate)."""
        if not self.rows or self.row_s <= 0:
            return 0
        return math.ceil(self.rows / self.rows_per_job - 1e-9) if self.rows_per_job > 0 else 0


def gate_time(cfg: config.Cascade, plan: CascadePlan, budget_s: float,
              hw: Hardware = H100) -> GateTime | None:
    """Each gate suite's items (its data file, ``gate.limit``) × K samples decoded to the suite's
    response budget from a prompt of its input limit (1K tokens without one), on the plan's engines;
    None without a gate."""
    from nemo_cascade.cascade.forgetting import Gate

    if not cfg.gate.suites or plan.engine_utilization is None:
        return None
    settings = Gate.settings_for(cfg)
    e = engine_bytes(plan.shape, plan.engine_utilization, plan.gpu, plan.dtype_bytes,
                     plan.engine_tp)
    engines = max(1, plan.world // plan.engine_tp)
    token_flops = 2 * plan.shape.params() / plan.engine_tp
    row = wave = 0.0
    sequences, unknown = 0, []
    for name in cfg.gate.suites:
        suite = get_suite(name)
        try:
            items = len(load_items(suite, None, cfg.gate.limit)[0])
        except EvalError:
            unknown.append(name)
            continue
        decoding = decoding_for(suite, settings)
        kw = dict(prompt=decoding.max_input_tokens or 1024, response=decoding.max_tokens,
                  weight_bytes=e["weights"], kv_bytes_per_token=e["kv_per_token"],
                  kv_tokens=e["kv_tokens"], hw=hw, samples_per_prompt=decoding.samples,
                  token_flops=token_flops)
        row += decode_seconds(sequences=math.ceil(items * decoding.samples / engines), **kw)
        share = math.ceil(items / plan.world)  # a rank's contiguous share of the suite
        wave = max(wave, decode_seconds(sequences=share * decoding.samples, one_wave=True, **kw))
        sequences += items * decoding.samples
    rows = int(cfg.gate.evaluate_base) + sum(s.evaluate for s in cfg.stages)
    return GateTime(rows, sequences, row, wave, budget_s, tuple(unknown))


def render_gate(g: GateTime | None, time_limit: str) -> str:
    if g is None:
        return "gate: none (gate.suites is empty)"
    left = f"; left out (no data file here): {', '.join(g.unknown)}" if g.unknown else ""
    return (f"gate: {g.rows} rows of {_count(g.sequences)} samples, ≈ {_duration(g.row_s)} each "
            f"(one wave ≈ {_duration(g.wave_s)}: the most a stop loses); {g.rows_per_job:.2f} rows "
            f"per {time_limit} job, {g.jobs} jobs for every row{left}")


def check_progress(times: list[StageTime], time_limit: str, gate: GateTime | None = None) -> None:
    """One ConfigError line for the first stage that cannot move forward in a job of
    ``time_limit``."""
    for t in times:
        if t.progress_per_job > 0:
            continue
        if t.kind in config.ON_POLICY_KINDS:
            raise config.ConfigError(
                f"stages.{t.name}: one wave of responses at its longest budget takes ≈ "
                f"{_duration(t.wave_s)} to generate, more than the ≈ {_duration(t.budget_s)} a "
                f"{time_limit} job has for work: lower "
                f"stages.{t.name}.rollout.max_response_tokens (or its length_curriculum), give it "
                f"more engines (parallel / rollout.tensor_parallel_size), or raise --time-limit")
        raise config.ConfigError(
            f"stages.{t.name}: one {t.kind} step takes ≈ {_duration(t.step_s)}, more than the "
            f"≈ {_duration(t.budget_s)} a {time_limit} job has for work: lower stages.{t.name}."
            f"{'sft_batch_size' if t.kind == 'sft' else 'rm_batch_size'} or raise --time-limit")
    if gate is not None and gate.rows and gate.rows_per_job <= 0:
        raise config.ConfigError(
            f"gate: one wave of a suite's samples takes ≈ {_duration(gate.wave_s)} to generate, "
            f"more than the ≈ {_duration(gate.budget_s)} a {time_limit} job has for work: lower "
            f"gate.max_tokens or raise --time-limit")


# ------------------------------------------------------------------------------------------- output

ASSUMPTIONS = (
    "time assumptions: {gpu} GPUs, {peak:g} TFLOP/s dense bf16 at {mfu:.0%} MFU for the actor "
    "(6·params·tokens per step, +2·params·tokens per frozen copy: KL reference, distill teachers; "
    "attention FLOPs left out) and for the engine (2·params a token: prefill once per group, "
    "decode), an Adam step moving {adam} bytes a parameter; decode reads each "
    "engine GPU's weights and KV cache once per token at {bw:.0%} of {hbm:g} TB/s (or computes, if "
    "slower) plus {iteration:g} ms an iteration, up to {seqs} "
    "sequences per engine at once (as many as its KV cache holds at prompt + half the response); "
    "every response at its budget (an upper bound); weight sync and rewards (they "
    "overlap generation) left out; {startup:.0f} min start-up per job; a save writes "
    "14 bytes a parameter at {write:g} GB/s per GPU; a stop loses at most one wave of generation. "
    "Estimates, not measurements.")


def _duration(seconds: float) -> str:
    if seconds >= 3 * 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.1f} s"


def _count(n: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:.0f}"


def _progress(t: StageTime) -> str:
    p = t.progress_per_job
    if t.kind not in config.ON_POLICY_KINDS:
        return f"{p:.0f} steps"
    return f"{p:.2f} step" if p < 1 else f"{p:.1f} steps"


def render_times(times: list[StageTime], time_limit: str, minutes: float, hw: Hardware = H100,
                 time_limit_s: float = 0.0, gate: GateTime | None = None) -> str:
    """The table (a row per stage: its step, what a job moves it forward, the jobs it takes) and the
    assumptions; the total: jobs and wall time of the whole cascade at ``time_limit_s`` per job."""
    budget = times[0].budget_s if times else 0.0
    lines = [f"time: a job of {time_limit} has ≈ {_duration(budget)} for work (less start-up, save "
             f"and stop margin); a GRPO step stopped by the job's end keeps its finished groups; "
             f"saves also every checkpoint_every steps or after {minutes:g} min "
             f"(checkpoint_every_minutes), whichever comes first",
             "", "| stage | kind | tokens / step | generate | one wave | train | step | save every "
                 "| progress per job | jobs | steps | stage time | GPU-hours |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for t in times:
        on_policy = t.kind in config.ON_POLICY_KINDS
        gen, wave = (_duration(t.generate_s), _duration(t.wave_s)) if on_policy else ("—", "—")
        lines.append(f"| {t.name} | {t.kind} | {_count(t.tokens)} | {gen} | {wave} | "
                     f"{_duration(t.train_s)} | {_duration(t.step_s)} | "
                     f"{t.save_steps} step{'s' * (t.save_steps != 1)} ({t.saved_by}) | "
                     f"{_progress(t)} | {t.jobs or '—'} | {t.steps or 'epochs'} | "
                     f"{'—' if t.stage_s is None else _duration(t.stage_s)} | "
                     f"{'—' if t.gpu_hours is None else f'{t.gpu_hours:,.0f}'} |")
    known = [t.jobs for t in times if t.jobs]
    gate_jobs = gate.jobs if gate is not None else 0
    lines += ["", render_gate(gate, time_limit)]
    if time_limit_s and known:
        jobs = sum(known) + gate_jobs
        lines += ["", f"total: {jobs} jobs of {time_limit} for the {len(known)} stages with known "
                      f"steps and the gate's rows, ≈ {_duration(jobs * time_limit_s)} of wall time "
                      f"if each job starts as the one before ends (queue waits not included)"]
    lines += ["", ASSUMPTIONS.format(gpu=hw.name, peak=hw.peak_flops / 1e12, mfu=hw.mfu,
                                     bw=hw.bandwidth_share, hbm=hw.hbm_bytes_per_s / 1e12,
                                     adam=ADAM_BYTES_PER_PARAM,
                                     iteration=hw.decode_iteration_s * 1e3, seqs=hw.max_seqs,
                                     startup=STARTUP_S / 60,
                                     write=hw.write_bytes_per_s / 1e9)]
    return "\n".join(lines)


__all__ = ["Hardware", "H100", "StageTime", "parse_time_limit", "train_seconds", "decode_seconds",
           "optimizer_seconds", "ADAM_BYTES_PER_PARAM",
           "save_every", "stage_time", "time_plan", "render_times", "check_progress", "job_budget",
           "save_seconds", "GateTime", "gate_time", "render_gate", "DEFAULT_TIME_LIMIT",
           "STARTUP_S", "SIGNAL_LEAD_S"]
