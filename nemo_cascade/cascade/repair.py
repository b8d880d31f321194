"""Repair on demand (``gate.on_regression = repair``): when the gate flags a regression after a GRPO
stage, a distill stage is inserted right after it. The flagged domains learn from their best earlier
gate rows, the stage's own domains from the stage's export (which keeps what it won), on prompts of
all of them (MOPD, Nemotron-Cascade 2; docs/distill.md, "Repair on demand").

The decision is recorded in the manifest, on the flagged stage's gate verdict (``repair``: the
inserted stage's name and the flagged domains); a re-run rebuilds the same stage list from it
(:func:`with_recorded_repairs`) before it checks or trains anything.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from nemo_cascade import config
from nemo_cascade.evaluate.eval_output import read_eval

log = logging.getLogger(__name__)

SUFFIX = "-repair"


def repair_name(stage: config.Stage) -> str:
    return stage.name + SUFFIX


def inserts_after(cfg: config.Cascade, k: int) -> bool:
    """Whether a flagged stage ``k`` gets a repair stage: a GRPO stage (an SFT, distill or inserted
    stage does not), not already followed by a distill stage the recipe placed, and whose next stage
    does not carry its optimizer (the repair would come between the two)."""
    stage = cfg.stages[k]
    after = [s for s in cfg.stages[k + 1:] if s.name != repair_name(stage)]  # not its own repair
    nxt = after[0] if after else None
    return (cfg.gate.on_regression == "repair" and stage.kind == "grpo"
            and not (nxt and (nxt.kind == "distill" or nxt.boundary.optimizer == "carry")))


def _prompt_source(cfg: config.Cascade, k: int,
                   domain: str) -> tuple[config.Data, config.Stage] | None:
    """The prompts of ``domain`` the recipe trains on: the latest on-policy stage before ``k`` with
    such a source, else the first after it; None when no stage has one."""
    before = list(range(k - 1, -1, -1))
    after = list(range(k + 1, len(cfg.stages)))
    for j in before + after:
        s = cfg.stages[j]
        if config.samples_on_policy(s):
            for data, d in config.prompt_sources(s):
                if d == domain:
                    return replace(data, domain=domain), s
    return None


def repair_stage(cfg: config.Cascade, k: int, flagged: list[str]) -> config.Stage | None:
    """The distill stage that repairs ``flagged`` domains after stage ``k`` (their teachers
    ``best``; the stage's own domains not flagged learn from the stage itself), on its prompts and
    the recipe's prompts of each flagged domain; None when no flagged domain has prompts in the
    recipe.
    Its prompt and response limits are the longest of those stages' (their last length phases);
    every other setting is stage ``k``'s, as its rollouts are the ones being repaired."""
    stage, r = cfg.stages[k], cfg.gate.repair
    own = config.stage_domains(stage)
    sources, teachers, reward, limits = [], [], stage.reward, [stage]
    for domain in dict.fromkeys(flagged):
        found = (None, stage) if domain in own else _prompt_source(cfg, k, domain)
        if found is None:
            log.warning("stage %s: %s regressed, but no stage of the recipe has %s prompts to "
                        "repair it on", stage.name, domain, domain)
            continue
        data, source_stage = found
        if data is not None:
            sources.append(data)
            limits.append(source_stage)
        teachers.append(f"{domain}=best")
        # a domain scored by the cascade's RM (rlhf) brings the RM its stage was scored by
        if not reward.reward_model_stage and not reward.reward_model_url:
            reward = replace(reward, reward_model_stage=source_stage.reward.reward_model_stage,
                             reward_model_url=source_stage.reward.reward_model_url)
    if not teachers:
        return None
    teachers = [f"{d}={stage.name}" for d in own if f"{d}=best" not in teachers] + teachers
    last = config.length_phases(stage)[-1]
    # every domain's prompts and answers fit: the longest limits of the stages they come from
    rollout = replace(config.phase_rollout(stage, last),
                      max_prompt_tokens=max(s.rollout.max_prompt_tokens for s in limits),
                      max_response_tokens=max(config.length_phases(s)[-1].max_response_tokens
                                              for s in limits))
    return replace(
        stage, name=repair_name(stage), kind="distill", steps=r.steps, epochs=0.0,
        extra_data=(*stage.extra_data, *sources), reward=reward,
        distill=config.Distill(teachers=tuple(teachers), reward_weight=r.reward_weight),
        actor=replace(stage.actor, lr=r.lr or stage.actor.lr,
                      warmup_steps=min(stage.actor.warmup_steps, r.steps - 1)),
        rollout=rollout, length_curriculum=(),
        # a distill stage keeps every group: no refill, no epoch-level prompt filter
        grpo=replace(stage.grpo, overlong=last.overlong, refill_max_rounds=0, epoch_filter=False),
        boundary=config.Boundary(),
        evaluate=True, released_after="")


def flagged_domains(row: Path, found: list) -> list[str]:
    """The reward domains of the suites the gate flagged in a row, in the order flagged."""
    suites = read_eval(row / "eval.json")["suites"]
    return list(dict.fromkeys(suites[r.suite]["domain"] for r in found))


def repair_for(cfg: config.Cascade, k: int, domains: list[str],
               started: list[str]) -> tuple[config.Stage | None, str]:
    """``(the repair stage to insert after stage k, "")``, or ``(None, why not)`` when no flagged
    domain has prompts in the recipe or a later stage (``started``: those not pending) has begun."""
    later = [name for name in started if name != repair_name(cfg.stages[k])]
    if later:
        return None, f"later stage(s) {', '.join(later)} already started"
    repair = repair_stage(cfg, k, domains)
    return (repair, "") if repair else (None, f"no prompts of {', '.join(domains)} in the recipe")


def insert(cfg: config.Cascade, k: int, repair: config.Stage | None) -> config.Cascade:
    """``cfg`` with ``repair`` right after stage ``k`` (replacing a repair inserted there before),
    or with none there when ``repair`` is None."""
    stages = list(cfg.stages)
    if k + 1 < len(stages) and stages[k + 1].name == repair_name(stages[k]):
        del stages[k + 1]
    if repair is not None:
        stages.insert(k + 1, repair)
    return replace(cfg, stages=tuple(stages))


def inserted_repairs(manifest: dict) -> dict[str, str]:
    """Flagged stage → the repair stage its gate verdict inserted, from a run's manifest."""
    verdicts = [(name, entry.get("gate")) for name, entry in manifest.get("stages", {}).items()]
    return {name: g["repair"]["stage"] for name, g in verdicts
            if isinstance(g, dict) and isinstance(g.get("repair"), dict)}


def with_recorded_repairs(cfg: config.Cascade, manifest: dict) -> config.Cascade:
    """The recipe's stages with every repair a run's manifest recorded inserted again (after the
    stage the gate flagged, for the domains it flagged then): a re-run trains the same stages."""
    stages = manifest.get("stages", {})
    for flagged in inserted_repairs(manifest):
        names = [s.name for s in cfg.stages]
        if flagged in names:
            k = names.index(flagged)
            domains = stages[flagged]["gate"]["repair"]["domains"]
            cfg = insert(cfg, k, repair_stage(cfg, k, domains))
    return cfg


def with_possible_repairs(cfg: config.Cascade) -> config.Cascade:
    """``cfg`` with the repair stage the gate may insert after each GRPO stage, sized for the worst
    case (every domain the recipe trains flagged, each its own teacher): the stages ``plan``
    sizes."""
    domains = list(dict.fromkeys(d for s in cfg.stages if config.samples_on_policy(s)
                                 for d in config.stage_domains(s)))
    for k in reversed(range(len(cfg.stages))):
        if inserts_after(cfg, k):
            cfg = insert(cfg, k, repair_stage(cfg, k, domains))
    return cfg


__all__ = ["SUFFIX", "repair_name", "inserts_after", "repair_stage", "flagged_domains",
           "repair_for", "insert",
           "inserted_repairs", "with_recorded_repairs", "with_possible_repairs"]
