"""What a config implies, read by the stages and tools: an engine's dtype and mode, a gate's
tolerances, a stage's prompt sources and domains, its length phases and the phase at a step, its
length in steps from its rows, a stage by name."""
from __future__ import annotations

import math
from dataclasses import replace

from .gate import Gate
from .data import Data
from .schema import ON_POLICY_KINDS, Cascade, ConfigError, LengthPhase, Model, Rollout, Stage


def engine_eager(rollout: Rollout, on_cpu: bool) -> bool:
    """vLLM's ``enforce_eager`` for ``rollout.compile`` (``auto``: eager on CPU only)."""
    return rollout.compile == "off" or (rollout.compile == "auto" and on_cpu)


def engine_dtype(model: Model, rollout: Rollout) -> str:
    """The rollout engine's dtype: ``rollout.dtype``, with ``auto`` meaning the actor's
    (``model.dtype``)."""
    return model.dtype if rollout.dtype == "auto" else rollout.dtype


def tolerances(g: Gate) -> dict[str, float]:
    """Per-suite ``min_drop``: gate.tolerance overrides, else gate.min_drop."""
    custom = {k: float(v) for k, _, v in (t.partition("=") for t in g.tolerance)}
    return {suite: custom.get(suite, g.min_drop) for suite in g.suites}


def prompt_sources(stage: Stage) -> list[tuple[Data, str]]:
    """Each prompt source of a stage (``data``, then ``extra_data``) with the reward domain of its
    prompts: its own ``Data.domain``, else the stage's ``domain``."""
    return [(d, d.domain or stage.domain) for d in (stage.data, *stage.extra_data)]


def samples_on_policy(stage: Stage) -> bool:
    """Whether the stage generates from its own policy and learns from the samples: GRPO and
    on-policy distillation; an SFT or reward-model stage learns from given rows."""
    return stage.kind in ON_POLICY_KINDS


def teacher_sources(stage: Stage) -> dict[str, str]:
    """A distill stage's ``Distill.teachers`` as domain → SOURCE (checked by config validation)."""
    return {domain: source for domain, _, source in
            (item.partition("=") for item in stage.distill.teachers)}


def frozen_copies(stage: Stage) -> int:
    """Copies of the parameters the actor holds beside the trained ones in this stage: the KL
    reference, and a distill stage's teachers (one per distinct source; ``best`` counted per domain,
    as two domains' best rows may differ). Each also costs a forward per step."""
    sources = list(teacher_sources(stage).values()) if stage.kind == "distill" else []
    teachers = len(set(sources) - {"best"}) + sources.count("best")
    reference = samples_on_policy(stage) and stage.grpo.kl_coef > 0
    return teachers + int(reference)


def stage_domains(stage: Stage) -> tuple[str, ...]:
    """The reward domains a GRPO stage scores (one, unless it mixes sources of several), in source
    order."""
    return tuple(dict.fromkeys(domain for _, domain in prompt_sources(stage)))


def length_phases(stage: Stage) -> tuple[LengthPhase, ...]:
    """The stage's response-length phases (§4.5.2); without a curriculum, one phase of rollout/grpo
    settings."""
    return stage.length_curriculum or (
        LengthPhase(stage.steps, stage.rollout.max_response_tokens, stage.grpo.overlong),)


def longest_response(stage: Stage) -> int:
    """The longest response the stage samples: its longest length phase's budget (§4.5.2)."""
    return max(phase.max_response_tokens for phase in length_phases(stage))


def phase_rollout(stage: Stage, phase: LengthPhase) -> Rollout:
    """The stage's sampling settings during ``phase``: its response budget and, if it sets one, its
    temperature (T17–T19 lower the temperature as responses grow)."""
    temperature = stage.rollout.temperature if phase.temperature is None else phase.temperature
    return replace(stage.rollout, max_response_tokens=phase.max_response_tokens,
                   temperature=temperature)


def with_epoch_steps(stage: Stage, rows: int) -> Stage:
    """The stage with ``steps`` resolved from ``epochs`` over the ``rows`` it loaded (SFT sequences,
    RM pairs): ⌈epochs × rows ÷ batch size⌉, at least 1 (T14, §4.2: one epoch). Unchanged when given
    in steps."""
    if not stage.epochs:
        return stage
    batch = stage.rm_batch_size if stage.kind == "reward_model" else stage.sft_batch_size
    # -1e-9: 0.1 × 30 ÷ 3 is 1.0000000000000002 in floats, which is one step, not two.
    return replace(stage, steps=max(1, math.ceil(stage.epochs * rows / batch - 1e-9)))


def epochs_line(stage: Stage, rows: int) -> str:
    """How a supervised stage's steps (resolved: :func:`with_epoch_steps`) cover its ``rows``, for
    the log at its start: T14 gives SFT both 1 epoch and a step count, which agree only for some row
    count (docs/recipes.md, "Ambiguities, decided"), so the line shows one beside the other."""
    batch = stage.rm_batch_size if stage.kind == "reward_model" else stage.sft_batch_size
    one_epoch = max(1, math.ceil(rows / batch - 1e-9))
    given = f"{stage.epochs:g} epoch{'s' * (stage.epochs != 1)}, " if stage.epochs else ""
    seen = stage.steps * batch
    return (f"{stage.name}: {given}{stage.steps:,} steps × {batch} = {seen:,} sequences = "
            f"{seen / rows:.2f} epochs of its {rows:,} rows (1 epoch = {one_epoch:,} steps)")


def phase_at(stage: Stage, step: int) -> tuple[int, LengthPhase]:
    """``(index, phase)`` in force at ``step`` (phases run back to back in declaration order)."""
    end = 0
    for k, phase in enumerate(length_phases(stage)):
        end += phase.steps
        if step < end:
            return k, phase
    raise ValueError(f"step {step} is past the stage's {end} steps")


def stage_by_name(cfg: Cascade, name: str) -> Stage:
    for s in cfg.stages:
        if s.name == name:
            return s
    raise ConfigError(f"--stage: no stage {name!r}; stages are {[s.name for s in cfg.stages]}")
