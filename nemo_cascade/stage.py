"""ONE stage: the GRPO loop of DESIGN.md (and its SFT and reward-model siblings), reading like the algorithm."""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from nemo_cascade import config as C
from nemo_cascade import ranks, weight_sync
from nemo_cascade.algorithms import grpo, reward_model, sft
from nemo_cascade.data.loader import PromptList, PromptStream, sft_batches
from nemo_cascade.metrics import MetricsLog, PhaseTimer
from nemo_cascade.rewards import Scorer, apply_code_switch_penalty, resolve_code_switch_penalty, reward_metrics


@dataclass
class StageContext:
    actor: object          # actor.megatron.MegatronActor
    engine: object | None  # rollout.vllm.RolloutEngine (GRPO stages)
    pad_id: int
    stage_dir: Path
    log: MetricsLog


def sft_loss(logprobs_B_T, mb):
    num, den = sft.sft_loss_terms(logprobs_B_T, mb["loss_mask"])
    return num, den, {}


def run_grpo(ctx: StageContext, stage: C.Stage, prompts: PromptList) -> None:
    g = stage.grpo
    stream = PromptStream(prompts, stage.data.seed, alternate=prompts.alternate,  # half-half modes (§4.3.2)
                          epoch_filter=(g.readmit_unsolved, g.readmit_solved) if g.epoch_filter else None)
    scorer, temperature = Scorer(stage.domain, stage.reward), stage.rollout.temperature
    penalty = resolve_code_switch_penalty(stage.domain, stage.reward.code_switch_penalty)
    weight_sync.push(ctx.actor, ctx.engine)  # the engine serves this stage's starting weights
    if g.kl_coef > 0:
        ctx.actor.snapshot_reference()  # KL reference = the stage's starting policy (§6.3)
    for step in range(stage.steps):
        timer, switched = PhaseTimer(), []
        phase, length = C.phase_at(stage, step)                              # length curriculum (§4.5.2)
        cfg = replace(g, overlong=length.overlong)
        rollout = replace(stage.rollout, max_response_tokens=length.max_response_tokens)

        def sample(prompts_P, round_):  # one generation round; seeds keyed per (step, round)
            with timer("generate"):
                mine = ctx.engine.generate(ranks.my_share(prompts_P), g.group_size, rollout,
                                           step=step + round_ * stage.steps)
            with timer("score"):
                groups = ranks.gather_shares(scorer.score(mine))
                switched.append(apply_code_switch_penalty(groups, penalty))  # over the round's batch (§4.3.2)
            return groups

        groups_P, refill = grpo.collect_groups(stream.next_batch, sample, cfg)  # + refill (§4.4.2)
        stream.record(groups_P)                                                 # epoch filter (§4.5.2)
        batch = grpo.make_batch(groups_P, cfg, ctx.pad_id)                   # advantages, masks, filters
        tensors = {"tokens": batch.tokens_B_T, "loss_mask": batch.loss_mask_B_T,
                   "advantages": batch.advantages_B, "rollout_logprobs": batch.rollout_logprobs_B_T}
        result = sync = None
        if batch.num_sequences:
            if g.kl_coef > 0:
                with timer("logprobs"), ctx.actor.reference_weights():
                    tensors["ref_logprobs"] = ctx.actor.logprobs(batch.tokens_B_T, temperature)
            with timer("train"):
                ctx.engine.sleep()
                result = ctx.actor.train_step(tensors, partial(grpo.actor_loss, cfg), temperature)
            with timer("sync"):
                sync = weight_sync.push(ctx.actor, ctx.engine)
        metrics = {**_grpo_metrics(batch, result, sync, timer, groups_P), **reward_metrics(groups_P), **refill,
                   **stream.metrics(), "phase": phase, "max_response_tokens": length.max_response_tokens,
                   "code_switched": sum(switched) / max(sum(x.group_size for x in groups_P), 1)}
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


def rm_loss(scores_B_T, mb):
    return reward_model.bt_loss_terms(scores_B_T, mb["last"], mb["pair_valid"])


def run_reward_model(ctx: StageContext, stage: C.Stage, pairs: list) -> None:
    """Bradley–Terry RM training (§4.2); ``ctx.actor`` is an ``actor.reward_model.RewardModelActor``."""
    batches = sft_batches(pairs, stage.rm_batch_size, stage.data.seed)  # shuffled epochs of pairs
    for step in range(stage.steps):
        timer = PhaseTimer()
        batch = reward_model.make_pair_batch(next(batches), stage.rm_max_tokens, ctx.pad_id)
        with timer("train"):
            result = ctx.actor.train_step(batch.tensors(), rm_loss)
        acc, margin = result.metrics["accuracy"], result.metrics["margin"]
        ctx.log.log(step, {"loss": result.loss, "accuracy": acc, "margin_mean": margin, "grad_norm": result.grad_norm,
                           "lr": result.lr, "pairs": result.tokens, "truncated": batch.num_truncated,
                           **timer.as_metrics()}, progress={"loss": result.loss, "acc": acc})
    ctx.log.close()
