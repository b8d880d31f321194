"""Per stage: an estimated step time and the checkpoint interval against a job's time limit — the time half of
``nemo-cascade plan`` (plan.py has the memory half and the shapes this builds on).

A Slurm job is requeued at its time limit and resumes from the stage's newest checkpoint; a job that cannot
reach a checkpoint before its limit is requeued without progress, forever. Saves happen every
``stage.checkpoint_every`` steps or at the end of the first step after ``cfg.checkpoint_every_minutes`` of wall
time since the last save, whichever comes first — so the interval is ``min(checkpoint_every, ⌈minutes / step⌉)``
steps (never less than one step: saves happen between steps). It must fit in what the job has for steps: the
time limit less the start-up and the time-limit signal's lead (``--signal=B:USR1@120``).

The step time is a model, not a measurement (what each term leaves out is in :data:`ASSUMPTIONS`):

- **tokens per step** — GRPO: prompts × group size × (max prompt + longest response budget); SFT: batch ×
  ``sft_max_tokens`` (packed rows); reward model: 2 × batch × ``rm_max_tokens`` (a chosen and a rejected row).
  Every response at its budget: an upper bound, as RL responses grow towards it (§4.5's length curriculum).
- **training** — forward + backward ≈ 6 · params · tokens FLOPs (+ 2 · params · tokens for a KL reference's
  forward), on every GPU of the job at ``mfu`` × the peak dense bf16 rate.
- **generation** (GRPO) — memory-bound decode: each decode iteration of an engine reads its weights and its
  sequences' KV cache from HBM once per GPU and adds a token to every running sequence; an engine runs as many
  sequences at once as its KV cache holds at their mean length, prompt + half the response (vLLM's paged KV
  cache holds what a sequence has so far; at most ``max_num_seqs``), in waves, each decoding the longest
  response budget.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from nemo_cascade import config
from nemo_cascade.plan import CascadePlan, engine_bytes

DEFAULT_TIME_LIMIT = "04:00:00"
"""The sbatch scripts' ``#SBATCH --time`` (slurm/cascade_*.sh)."""
SIGNAL_LEAD_S = 120.0
"""``--signal=B:USR1@120``: the job stops stepping two minutes before its limit."""
STARTUP_S = 600.0
"""Assumed time from a job's start to its first step: container, imports, loading the checkpoint into the actor,
starting the vLLM engine. Not measured at paper scale."""


@dataclass(frozen=True)
class Hardware:
    """What the estimate assumes of a GPU (defaults: H100 SXM, NVIDIA's datasheet numbers)."""

    name: str = "H100 SXM"
    peak_flops: float = 989e12
    """Dense bf16 tensor-core FLOP/s (no sparsity)."""
    hbm_bytes_per_s: float = 3.35e12
    mfu: float = 0.35
    """Assumed share of the peak the actor's train step achieves (variable-length RL batches, recompute, PP
    bubbles): an assumption, not a measurement."""
    bandwidth_share: float = 0.6
    """Assumed share of the HBM bandwidth decode achieves."""
    max_seqs: int = 256
    """Sequences an engine runs at once at most (vLLM's ``max_num_seqs``)."""


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
    """What triggers that save first: ``steps`` (checkpoint_every), ``minutes`` (checkpoint_every_minutes) or
    ``stage end`` (the stage's export)."""
    budget_s: float
    """What one job has for steps: time limit − start-up − the signal's lead."""
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
    def reaches_checkpoint(self) -> bool:
        return self.interval_s <= self.budget_s

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
        raise config.ConfigError(f"--time-limit {text!r}: expected HH:MM:SS or D-HH:MM:SS (as sbatch --time)")
    days, hours, minutes, seconds = (int(g or 0) for g in m.groups())
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if total <= 0:
        raise config.ConfigError(f"--time-limit {text}: expected a positive time")
    return float(total)


def train_seconds(params: float, tokens: float, gpus: int, hw: Hardware = H100, flops_per_token: float = 6.0
                  ) -> float:
    """``flops_per_token`` · params · tokens FLOPs over ``gpus`` GPUs at ``hw.mfu`` × peak."""
    return flops_per_token * params * tokens / (gpus * hw.peak_flops * hw.mfu)


def decode_seconds(*, sequences: int, prompt: int, response: int, weight_bytes: float, kv_bytes_per_token: float,
                   kv_tokens: int, hw: Hardware = H100) -> float:
    """One engine generating ``response`` tokens for each of ``sequences`` (memory-bound; module docstring).
    ``weight_bytes`` and ``kv_bytes_per_token`` are per GPU of the engine, ``kv_tokens`` the engine's KV cache."""
    if sequences <= 0 or response <= 0:
        return 0.0
    mean_context = prompt + response / 2
    at_once = max(1, min(hw.max_seqs, int(kv_tokens // mean_context), sequences))
    waves = math.ceil(sequences / at_once)
    per_iteration = (weight_bytes + at_once * mean_context * kv_bytes_per_token) / (
        hw.hbm_bytes_per_s * hw.bandwidth_share)
    return waves * response * per_iteration


def save_every(checkpoint_every: int, minutes: float, step_s: float, stage_steps: int) -> tuple[int, str]:
    """``(steps between saves, what triggers the save)``: the first of checkpoint_every steps, the first step
    ending after ``minutes`` of wall time, and the stage's end (0 turns either setting off)."""
    options = [(stage_steps, "stage end")]
    if checkpoint_every > 0:
        options.append((checkpoint_every, "steps"))
    if minutes > 0:
        options.append((max(1, math.ceil(minutes * 60 / step_s)) if step_s > 0 else 1, "minutes"))
    return min(options, key=lambda o: o[0])


def _tokens_per_step(stage: config.Stage) -> tuple[float, int, int]:
    """``(tokens trained per step, prompt tokens, response tokens)`` (the last two for GRPO only)."""
    if stage.kind == "grpo":
        prompt = stage.rollout.max_prompt_tokens
        response = max(p.max_response_tokens for p in config.length_phases(stage))
        return stage.grpo.prompts_per_step * stage.grpo.group_size * (prompt + response), prompt, response
    if stage.kind == "sft":
        return stage.sft_batch_size * stage.sft_max_tokens, 0, 0
    return 2 * stage.rm_batch_size * stage.rm_max_tokens, 0, 0


def stage_time(stage: config.Stage, plan: CascadePlan, minutes: float, budget_s: float, hw: Hardware = H100
               ) -> StageTime:
    """One stage's step time and save interval on the plan's layout (its shape, world, engine)."""
    d = plan.shape
    tokens, prompt, response = _tokens_per_step(stage)
    params = d.params(lm_head=stage.kind != "reward_model")
    kl = stage.kind == "grpo" and stage.grpo.kl_coef > 0
    train = train_seconds(params, tokens, plan.world, hw, 6.0 + (2.0 if kl else 0.0))
    generate = 0.0
    if stage.kind == "grpo" and plan.engine_utilization is not None:
        e = engine_bytes(d, plan.engine_utilization, plan.gpu, plan.dtype_bytes, plan.engine_tp)
        engines = max(1, plan.world // plan.engine_tp)
        sequences = math.ceil(stage.grpo.prompts_per_step * stage.grpo.group_size / engines)
        generate = decode_seconds(sequences=sequences, prompt=prompt, response=response, weight_bytes=e["weights"],
                                  kv_bytes_per_token=e["kv_per_token"], kv_tokens=e["kv_tokens"], hw=hw)
    steps, by = save_every(stage.checkpoint_every, minutes, train + generate, stage.steps)
    return StageTime(stage.name, stage.kind, tokens, train, generate, steps, by, budget_s, stage.steps, plan.world)


def time_plan(cfg: config.Cascade, plan: CascadePlan, time_limit_s: float, hw: Hardware = H100) -> list[StageTime]:
    budget = time_limit_s - STARTUP_S - SIGNAL_LEAD_S
    return [stage_time(s, plan, cfg.checkpoint_every_minutes, budget, hw) for s in cfg.stages]


# --------------------------------------------------------------------------------------------- output

ASSUMPTIONS = (
    "time assumptions: {gpu} GPUs, {peak:g} TFLOP/s dense bf16 at {mfu:.0%} MFU for the actor "
    "(6·params·tokens per step, +2·params·tokens with a KL reference; attention FLOPs left out); decode reads each "
    "engine GPU's weights and KV cache once per token at {bw:.0%} of {hbm:g} TB/s, up to {seqs} sequences per "
    "engine at once (as many as its KV cache holds at prompt + half the response); every response at its budget "
    "(an upper bound); prefill, weight sync, rewards (they "
    "overlap generation), the gate's evaluations and saving left out; {startup:.0f} min start-up per job; "
    "the job stops stepping {lead:.0f} s before its limit. Estimates, not measurements.")


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


def render_times(times: list[StageTime], time_limit: str, minutes: float, hw: Hardware = H100) -> str:
    """The table, the assumptions and a WARNING line per stage whose job cannot reach a checkpoint."""
    budget = times[0].budget_s if times else 0.0
    lines = [f"time: a job of {time_limit} has ≈ {_duration(budget)} for steps; saves every "
             f"checkpoint_every steps or after {minutes:g} min (checkpoint_every_minutes), whichever comes first",
             "", "| stage | kind | tokens / step | generate | train | step | save every | interval | verdict | steps "
             "| stage time | GPU-hours |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for t in times:
        verdict = "reaches a checkpoint" if t.reaches_checkpoint else "NO CHECKPOINT in a job"
        gen = _duration(t.generate_s) if t.kind == "grpo" else "—"
        lines.append(f"| {t.name} | {t.kind} | {_count(t.tokens)} | {gen} | {_duration(t.train_s)} | "
                     f"{_duration(t.step_s)} | {t.save_steps} step{'s' * (t.save_steps != 1)} ({t.saved_by}) | "
                     f"{_duration(t.interval_s)} | {verdict} | {t.steps or 'epochs'} | "
                     f"{'—' if t.stage_s is None else _duration(t.stage_s)} | "
                     f"{'—' if t.gpu_hours is None else f'{t.gpu_hours:,.0f}'} |")
    lines += ["", ASSUMPTIONS.format(gpu=hw.name, peak=hw.peak_flops / 1e12, mfu=hw.mfu, bw=hw.bandwidth_share,
                                     hbm=hw.hbm_bytes_per_s / 1e12, seqs=hw.max_seqs, startup=STARTUP_S / 60,
                                     lead=SIGNAL_LEAD_S)]
    for t in times:
        if not t.reaches_checkpoint:
            lines.append(f"WARNING: stage {t.name}: its first save comes after {_duration(t.interval_s)} "
                         f"({t.save_steps} step{'s' * (t.save_steps != 1)} of ≈ {_duration(t.step_s)}), beyond the "
                         f"≈ {_duration(t.budget_s)} a {time_limit} job has for steps: each job would be requeued "
                         f"without progress; lower checkpoint_every / checkpoint_every_minutes, shorten the step, "
                         f"or raise --time-limit (sbatch --time)")
    return "\n".join(lines)


__all__ = ["Hardware", "H100", "StageTime", "parse_time_limit", "train_seconds", "decode_seconds", "save_every",
           "stage_time", "time_plan", "render_times", "DEFAULT_TIME_LIMIT", "STARTUP_S", "SIGNAL_LEAD_S"]
