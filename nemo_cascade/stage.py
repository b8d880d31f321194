"""ONE stage: the GRPO loop of DESIGN.md (and its SFT sibling), reading like the algorithm."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch

from nemo_cascade import config as C
from nemo_cascade import ranks, weight_sync
from nemo_cascade.algorithms import grpo, sft
from nemo_cascade.data.loader import PromptStream, sft_batches
from nemo_cascade.metrics import MetricsLog, PhaseTimer
from nemo_cascade.rewards import Scorer, apply_code_switch_penalty, resolve_code_switch_penalty, reward_metrics


@dataclass
class StageContext:
    actor: object          # actor.megatron.MegatronActor
    engine: object | None  # rollout.vllm.RolloutEngine (GRPO stages)
    pad_id: int
    stage_dir: Path
    log: MetricsLog


def grpo_loss(cfg: C.GRPO, logprobs_B_T, mb):
    """GRPO terms, plus the |actor − rollout| log-prob gap on the trained tokens (a sync/precision check)."""
    num, den, metrics = grpo.policy_loss_terms(logprobs_B_T, logprobs_B_T.detach(), mb["advantages"],
                                               mb["loss_mask"], cfg, mb.get("ref_logprobs"))
    mask = mb["loss_mask"] > 0
    gap = torch.where(mask, (logprobs_B_T.detach() - mb["rollout_logprobs"]).abs(), torch.zeros(()))
    metrics["logprob_gap"] = torch.stack([gap.sum(), mask.sum().float()])
    return num, den, metrics


def sft_loss(logprobs_B_T, mb):
    num, den = sft.sft_loss_terms(logprobs_B_T, mb["loss_mask"])
    return num, den, {}


def run_grpo(ctx: StageContext, stage: C.Stage, prompts: list) -> None:
    stream = PromptStream(prompts, seed=stage.data.seed)
    scorer, temperature = Scorer(stage.domain, stage.reward), stage.rollout.temperature
    penalty = resolve_code_switch_penalty(stage.domain, stage.reward.code_switch_penalty)
    weight_sync.push(ctx.actor, ctx.engine)  # the engine serves this stage's starting weights
    if stage.grpo.kl_coef > 0:
        ctx.actor.snapshot_reference()  # KL reference = the stage's starting policy (§6.3)
    for step in range(stage.steps):
        timer = PhaseTimer()
        prompts_P = stream.next_batch(stage.grpo.prompts_per_step)           # deterministic, resumable
        with timer("generate"):
            mine = ctx.engine.generate(ranks.my_share(prompts_P), stage.grpo.group_size, stage.rollout, step=step)
        with timer("score"):
            groups_P = ranks.gather_shares(scorer.score(mine))
            code_switched = apply_code_switch_penalty(groups_P, penalty)  # over the whole batch (§4.3.2)
        batch = grpo.make_batch(groups_P, stage.grpo, ctx.pad_id)           # advantages, masks, filters
        tensors = {"tokens": batch.tokens_B_T, "loss_mask": batch.loss_mask_B_T,
                   "advantages": batch.advantages_B, "rollout_logprobs": batch.rollout_logprobs_B_T}
        result = sync = None
        if batch.num_sequences:
            if stage.grpo.kl_coef > 0:
                with timer("logprobs"), ctx.actor.reference_weights():
                    tensors["ref_logprobs"] = ctx.actor.logprobs(batch.tokens_B_T, temperature)
            with timer("train"):
                ctx.engine.sleep()
                result = ctx.actor.train_step(tensors, partial(grpo_loss, stage.grpo), temperature)
            with timer("sync"):
                sync = weight_sync.push(ctx.actor, ctx.engine)
        metrics = {**_grpo_metrics(batch, result, sync, timer, groups_P), **reward_metrics(groups_P),
                   "code_switched": code_switched / max(sum(g.group_size for g in groups_P), 1)}
        ctx.log.log(step, metrics, progress={
            "reward": batch.metrics["reward_mean"], "len": batch.metrics["response_len_mean"]})
    ctx.log.close()


def _grpo_metrics(batch, result, sync, timer: PhaseTimer, groups_P) -> dict:
    generated = sum(len(t) for g in groups_P for t in g.response_tokens_G_T)
    out = {**batch.metrics, **timer.as_metrics(), "tokens_per_s": generated / max(timer.seconds["generate"], 1e-9)}
    if result is not None:
        out.update(loss=result.loss, grad_norm=result.grad_norm, lr=result.lr, train_tokens=result.tokens,
                   sync_mb=sync.bytes / 1e6, sync_mb_per_s=sync.mb_per_s, **result.metrics)
    return out


def run_sft(ctx: StageContext, stage: C.Stage, examples: list) -> None:
    batches = sft_batches(examples, stage.sft_batch_size, stage.data.seed)
    for step in range(stage.steps):
        timer = PhaseTimer()
        batch = sft.make_sft_batch(next(batches), stage.sft_max_tokens, ctx.pad_id)
        with timer("train"):
            result = ctx.actor.train_step({"tokens": batch.tokens_B_T, "loss_mask": batch.loss_mask_B_T}, sft_loss)
        ctx.log.log(step, {"loss": result.loss, "grad_norm": result.grad_norm, "lr": result.lr,
                           "train_tokens": result.tokens, "truncated": batch.num_truncated, **timer.as_metrics()},
                    progress={"loss": result.loss})
    ctx.log.close()
