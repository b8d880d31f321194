"""ONE stage: the GRPO loop, and the supervised loop of SFT and reward-model stages, reading like
the algorithm."""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Callable

from nemo_cascade import checkpoint, weight_sync
from nemo_cascade.runtime import heartbeat, ranks, stop_request
from nemo_cascade import config
from nemo_cascade.algorithms import distill, group_filter, grpo, packing, reward_model, sft
from nemo_cascade.algorithms.length_curriculum import LengthCurriculum
from nemo_cascade.data.loader import PromptList, PromptStream, sft_batches
from nemo_cascade.errors import CascadeError
from nemo_cascade.runtime.faults import crash_point
from nemo_cascade.interfaces import Actor, Engine, GroupScorer
from nemo_cascade.cascade.metrics import MetricsLog, PhaseTimer
from nemo_cascade.rewards import ScoreAsFinished, reward_metrics, stage_scorer
from nemo_cascade.rewards.http_endpoint import RewardServerError
from nemo_cascade.cascade.saves import Saves
from nemo_cascade.cascade.teachers import Teachers


@dataclass
class StageContext:
    actor: Actor
    engine: Engine | None  # GRPO and distill stages
    pad_id: int
    stage_dir: Path
    log: MetricsLog
    saves: "Saves | None" = None
    data_state: dict | None = None
    """The previous stage's final data position (``boundary.data = continue``)."""


class ServerStop(CascadeError, RuntimeError):
    """A reward or judge server failed after its retries; the stage's state is saved and the run
    stops."""


def _score_on_every_rank(score: Callable[[list], list | None], mine: list | None) -> list | None:
    """Score this rank's groups (``score(mine)``) and gather every rank's; None on every rank when a
    rank's generation or scoring stopped on a stop request (``mine`` or ``score``'s result None
    there), so that all stop together. A reward server that fails on one rank (after its own bounded
    retries) fails the step on every rank, so that all of them stop together instead of waiting in a
    collective for the one that left."""
    try:
        scored, failure = (None if mine is None else score(mine)), ""
    except RewardServerError as e:
        scored, failure = [], str(e)
    parts = ranks.gather_shares([(scored or [], failure, scored is None)])
    failure = next((f for _, f, _ in parts if f), "")
    if failure:
        raise RewardServerError(failure)
    if any(stopped for _, _, stopped in parts):
        return None
    return [group for scored, _, _ in parts for group in scored]


class StopInStep(Exception):
    """A stop became due inside a GRPO step (during generation, or before the update would end too
    late)."""


def _start(ctx: StageContext, restore_data) -> int:
    if ctx.data_state is not None:
        restore_data(ctx.data_state)  # boundary.data = continue: the previous stage's position
    return ctx.saves.resume(ctx.actor, restore_data) if ctx.saves else 0


def _after(ctx: StageContext, step: int, total: int, data_state: dict,
           next_step_seconds: float = 0.0) -> None:
    if ctx.saves:
        try:
            ctx.saves.after(step, total, ctx.actor, data_state, ctx.stage_dir.name,
                            next_step_seconds)
        except stop_request.StopRequested:
            ctx.log.close()
            raise


def sft_loss(logprobs_B_T, mb):
    num, den = sft.sft_loss_terms(logprobs_B_T, mb["loss_mask"])
    return num, den, {}


def _stop_for_server(ctx: StageContext, stage: config.Stage, error: RewardServerError, step: int,
                     start: int,
                     at_start: tuple[dict, dict]) -> ServerStop:
    """Step ``step`` cannot finish (a reward server failed after its retries): save the state it
    began with (``at_start``: data position and RNG, :meth:`Saves.before_stop`), close the log, and
    return the error that ends the run; the same command resumes once the server answers."""
    saved = (ctx.saves.before_stop(step, start, ctx.actor, *at_start) if ctx.saves
             else "no checkpoints")
    ctx.log.close()
    return ServerStop(f"{error}; stopped in step {step} of stage {stage.name}, {saved}; run the "
                      "same command again to resume once the server answers")


def _generate_round(ctx: StageContext, stage: config.Stage, scorer: GroupScorer, timer: PhaseTimer,
                    prompts_P: list, rollout: config.Rollout, step: int,
                    round_: int) -> list | None:
    """Round ``round_`` of ``step``: every rank's groups for ``prompts_P``, each rank generating its
    share — only the prompts without a group saved by an earlier, stopped try of the step
    (step_rollouts.py), with the seeds of their places — and scoring each group as it finishes
    (§4.6.2), keeping it for a stop. None (on every rank) when a stop became due while some rank
    generated: what had finished is written first."""
    grpo_cfg, rollouts = stage.grpo, ctx.saves.rollouts if ctx.saves else None
    mine = ranks.my_share(prompts_P)
    saved = rollouts.saved(step, round_, mine, grpo_cfg.group_size) if rollouts else {}
    todo = [i for i in range(len(mine)) if i not in saved]
    keep = (lambda j, group: rollouts.keep(todo[j], group)) if rollouts else None

    def finish(new: list) -> list | None:
        try:
            scoring.finish(new, ctx.saves.stop_due if ctx.saves else None)
        except stop_request.GenerationStopped:  # a stop while slow verifiers (sandbox, RM) score
            return None
        groups = {**saved, **dict(zip(todo, new))}
        if rollouts:
            rollouts.end_round(groups)  # all on disk: a stop in the update redoes only that
        return [groups[i] for i in range(len(mine))]

    scoring = ScoreAsFinished(scorer, stage.reward.score_while_generating, grpo_cfg.group_size,
                              keep)

    def on_group(*finished) -> None:  # a finished group is the generate phase's heartbeat
        heartbeat.advance()
        scoring.on_group(*finished)

    # a stall watchdog's stop writes the groups finished so far, as a stop request does
    with scoring, heartbeat.last_words(rollouts.flush if rollouts else lambda: None):
        with timer("generate"):
            try:
                new = ctx.engine.generate([mine[i] for i in todo], grpo_cfg.group_size, rollout,
                                          step=step + round_ * stage.steps, positions=todo,
                                          on_group=on_group,
                                          should_stop=ctx.saves.stop_due if ctx.saves else None)
            except stop_request.GenerationStopped:
                new = None
        crash_point("generate")
        with timer("score"):
            groups_P = _score_on_every_rank(finish, new)
    if groups_P is None and rollouts:
        rollouts.flush()  # after the scoring threads ended: every group they finished
    return groups_P


def _collect_step(ctx: StageContext, stage: config.Stage, scorer: GroupScorer, timer: PhaseTimer,
                  stream: PromptStream, cfg: config.GRPO, rollout: config.Rollout,
                  step: int) -> tuple[list, dict, int]:
    """Step ``step``'s scored groups, round after round until the refill has them (§4.4.2), each
    round's code-switch penalty applied to the round as a whole (§4.3.2); with the refill's metrics
    and how many samples were code-switched. :class:`StopInStep` when a stop came during a round."""
    refill, switched = group_filter.Refill(cfg), 0
    while count := refill.prompts_wanted():
        groups = _generate_round(ctx, stage, scorer, timer, stream.next_batch(count), rollout, step,
                                 refill.round)
        if groups is None:
            raise StopInStep("during generation")
        switched += scorer.penalize_code_switching(groups)
        refill.add(groups)
    return refill.groups, refill.metrics(), switched


def _stop_agreed(saves: Saves | None, work_seconds: float) -> bool:
    """Whether any rank finds a stop due with ``work_seconds`` of work ahead (collective)."""
    return saves is not None and any(ranks.gather_shares([saves.stop_due(work_seconds)]))


def _stop_in_step(ctx: StageContext, stage: config.Stage, when: str, step: int, start: int,
                  at_start: tuple[dict, dict]) -> stop_request.StopRequested:
    """A stop became due inside step ``step``: save the state it began with
    (:meth:`Saves.before_stop`) beside the groups it finished (runtime/step_rollouts.py), close the
    log, and return the exception that ends the run."""
    saved = ctx.saves.before_stop(step, start, ctx.actor, *at_start)
    ctx.log.close()
    return stop_request.StopRequested(
        f"stopped {ctx.saves.stop_reason()} in step {step} of stage {stage.name}, {when}; "
        f"{saved}, its finished groups in "
        f"{ctx.saves.rollouts.root if ctx.saves.rollouts else 'memory only'}; "
        "run the same command again to continue")


def _data_state(stream: PromptStream, curriculum: LengthCurriculum) -> dict:
    """What a GRPO checkpoint keeps of the data side: the prompt stream's position and the length
    phases."""
    return {**stream.state_dict(), "length_curriculum": curriculum.state_dict()}


def _resume_grpo(ctx: StageContext, stream: PromptStream, curriculum: LengthCurriculum) -> int:
    """Restore the data side (the previous stage's stream under ``boundary.data = continue``, then
    this stage's checkpoint, whose state wins) and return the step to start at."""
    saved: dict = {}

    def restore(state: dict) -> None:
        stream.load_state_dict(state)
        # absent from a boundary's state: derived from the step
        saved["phases"] = state.get("length_curriculum")

    start = _start(ctx, restore)
    curriculum.begin(start, saved.get("phases"))
    if ctx.saves and ctx.saves.rollouts:
        ctx.saves.rollouts.begin(start)  # the groups of the step it stopped in, none of others
    return start


def run_grpo(ctx: StageContext, stage: config.Stage, prompts: PromptList,
             teachers: Teachers | None = None) -> dict:
    """A GRPO stage, or with ``teachers`` a distill stage: the same loop, each token's advantage
    from its domain's teacher (algorithms/distill.py)."""
    # TE: whole sequences
    grpo_cfg = replace(stage.grpo, share_prompts=stage.grpo.share_prompts and not ctx.actor.te)
    if teachers is not None:  # every sample carries the teacher's signal, whatever its rewards
        grpo_cfg = replace(grpo_cfg, drop_zero_variance_groups=False, refill_max_rounds=0)
    readmit = ((grpo_cfg.readmit_unsolved, grpo_cfg.readmit_solved) if grpo_cfg.epoch_filter
               else None)
    stream = PromptStream(prompts, stage.data.seed, alternate=prompts.alternate,  # half-half §4.3.2
                          epoch_filter=readmit)
    scorer = stage_scorer(config.stage_domains(stage), stage.reward)  # one domain, or several
    curriculum = LengthCurriculum(stage)  # response-length phases (§4.5.2, T17–T19)
    if grpo_cfg.kl_coef > 0:
        # KL reference = the stage's starting policy (§6.3), even on resume
        ctx.actor.snapshot_reference()
    start, update_seconds = _resume_grpo(ctx, stream, curriculum), 0.0
    # the engine serves this stage's starting (or resumed) weights
    weight_sync.push(ctx.actor, ctx.engine)
    for step in range(start, stage.steps):
        if curriculum.finished:
            break  # the last phase ended early, at its clip ratio (LengthPhase.until_clip_ratio)
        timer = PhaseTimer()
        # what a stop in this step saves
        at_start = _data_state(stream, curriculum), checkpoint.rng_state()
        phase_index, phase = curriculum.at()
        # + T (T17–T19)
        cfg, rollout = (replace(grpo_cfg, overlong=phase.overlong),
                        config.phase_rollout(stage, phase))
        # the actor's log-probs are the sampling policy's (rollout/vllm.py)
        temperature = rollout.temperature

        try:
            groups_P, refill, switched = _collect_step(ctx, stage, scorer, timer, stream, cfg,
                                                       rollout, step)
            if _stop_agreed(ctx.saves, update_seconds):  # the update would end too late to save
                raise StopInStep("before its update")
        except RewardServerError as e:
            raise _stop_for_server(ctx, stage, e, step, start, at_start) from None
        except StopInStep as e:
            raise _stop_in_step(ctx, stage, str(e), step, start, at_start) from None
        stream.record(groups_P, cfg.overlong)  # epoch filter (§4.5.2)
        batch = grpo.make_batch(groups_P, cfg, ctx.pad_id)  # advantages, masks, filters
        curriculum.record(step, batch.metrics["truncation_rate"])  # may end the phase (§4.5.2)
        result, sync = None, None
        if batch.num_sequences:
            result, sync = _update(ctx, batch, cfg, temperature, timer, teachers, stage.distill)
        update_seconds = sum(timer.seconds.get(p, 0.0)
                             for p in ("teacher", "logprobs", "train", "sync"))
        metrics = {**_grpo_metrics(batch, result, sync, timer, groups_P),
                   **reward_metrics(groups_P), **refill, **stream.metrics(), "phase": phase_index,
                   "temperature": temperature, "max_response_tokens": phase.max_response_tokens,
                   "code_switched": switched / max(sum(x.group_size for x in groups_P), 1)}
        ctx.log.log(step, metrics, progress={
            "reward": batch.metrics["reward_mean"], "len": batch.metrics["response_len_mean"]})
        _after(ctx, step, stage.steps, _data_state(stream, curriculum))
    ctx.log.close()
    return stream.state_dict()


def _update(ctx: StageContext, batch, cfg: config.GRPO, temperature: float, timer: PhaseTimer,
            teachers: Teachers | None = None, d: config.Distill | None = None):
    """A step's update of the actor from its scored batch (packed rows unless
    grpo.sequence_packing=false), then the push of the new weights to the engine: (result, sync)."""
    tensors = batch.tensors()
    with timer("train"):  # first: the KL reference and teacher forwards use the engine's memory too
        ctx.engine.sleep()
    if cfg.kl_coef > 0:
        with timer("logprobs"), ctx.actor.reference_weights():
            tensors["ref_logprobs"] = ctx.actor.logprobs(batch.tokens_B_T, temperature,
                                                         batch.layout())
    loss = partial(grpo.actor_loss, cfg)
    if teachers is not None:
        with timer("teacher"):
            tensors["teacher_logprobs"] = teachers.logprobs(batch, temperature)
        loss = partial(distill.distill_loss, cfg, d)
    with timer("train"):
        result = ctx.actor.train_step(tensors, loss, temperature)
    with timer("sync"):
        sync = weight_sync.push(ctx.actor, ctx.engine)
    return result, sync


def _grpo_metrics(batch, result, sync, timer: PhaseTimer, groups_P) -> dict:
    generated = sum(len(t) for g in groups_P for t in g.response_tokens_G_T)
    out = {**batch.metrics, **timer.as_metrics(),
           "tokens_per_s": generated / max(timer.seconds["generate"], 1e-9)}
    if result is not None:
        out.update(loss=result.loss, grad_norm=result.grad_norm, lr=result.lr,
                   train_tokens=result.tokens,
                   sync_mb=sync.bytes / 1e6, sync_mb_per_s=sync.mb_per_s, **result.metrics)
        # what the actor ran (microbatches cut to their longest row)
        if result.metrics.get("computed_tokens"):
            real = float((batch.segment_ids_B_T > 0).sum())
            out["pad_share"] = 1.0 - real / result.metrics["computed_tokens"]
    return out


class _Drawn:
    """A batch generator's position: batches drawn so far (its order is a pure function of seed and
    count)."""

    def __init__(self, batches):
        self.batches, self.count = batches, 0

    def __next__(self):
        self.count += 1
        return next(self.batches)

    def state_dict(self) -> dict:
        return {"batches": self.count}

    def load_state_dict(self, state: dict) -> None:
        while self.count < state["batches"]:
            next(self)


def run_supervised(ctx: StageContext, stage: config.Stage, rows: list, batch_size: int,
                   step_fn: Callable[[list, PhaseTimer], tuple[dict, dict]]) -> dict:
    """The loop of the supervised stages (SFT, reward model): shuffled epochs of ``rows`` in batches
    of ``batch_size`` (``sft_batches``, seeded by ``stage.data.seed``), one actor step per batch,
    its metrics logged, checkpoints / resume / stop requests (:class:`Saves`). ``step_fn(batch,
    timer)`` trains on one batch (timing ``train`` in ``timer``) and returns its metrics and the
    progress bar's. Returns the data position (batches drawn)."""
    batches = _Drawn(sft_batches(rows, batch_size, stage.data.seed))
    start = _start(ctx, batches.load_state_dict)
    for step in range(start, stage.steps):
        timer = PhaseTimer()
        metrics, progress = step_fn(next(batches), timer)
        ctx.log.log(step, {**metrics, **timer.as_metrics()}, progress=progress)
        # a supervised step cannot stop midway: the next one must end before the time to save
        # (runtime/deadline.py)
        _after(ctx, step, stage.steps, batches.state_dict(), sum(timer.seconds.values()))
    ctx.log.close()
    return batches.state_dict()


def _sft_step(ctx: StageContext, stage: config.Stage, examples: list,
              timer: PhaseTimer) -> tuple[dict, dict]:
    batch = packing.pack_sft_batch(examples, stage.sft_max_tokens, ctx.pad_id)  # sequence packing
    with timer("train"):
        result = ctx.actor.train_step(batch.tensors(), sft_loss)
    fill = float((batch.segment_ids_B_T > 0).float().mean())
    return ({"loss": result.loss, "grad_norm": result.grad_norm, "lr": result.lr,
             "train_tokens": result.tokens,
             "truncated": batch.num_truncated, "packed_rows": batch.num_sequences,
             "packing_fill": fill},
            {"loss": result.loss})


def run_sft(ctx: StageContext, stage: config.Stage, examples: list) -> dict:
    return run_supervised(ctx, stage, examples, stage.sft_batch_size,
                          partial(_sft_step, ctx, stage))


def rm_loss(scores_B_T, mb):
    return reward_model.bt_loss_terms(scores_B_T, mb["last"], mb["pair_valid"])


def _rm_step(ctx: StageContext, stage: config.Stage, pairs: list,
             timer: PhaseTimer) -> tuple[dict, dict]:
    batch = reward_model.make_pair_batch(pairs, stage.rm_max_tokens, ctx.pad_id)
    with timer("train"):
        result = ctx.actor.train_step(batch.tensors(), rm_loss)
    acc, margin = result.metrics["accuracy"], result.metrics["margin"]
    return ({"loss": result.loss, "accuracy": acc, "margin_mean": margin,
             "grad_norm": result.grad_norm,
             "lr": result.lr, "pairs": result.tokens, "truncated": batch.num_truncated},
            {"loss": result.loss, "acc": acc})


def run_reward_model(ctx: StageContext, stage: config.Stage, pairs: list) -> None:
    """Bradley–Terry RM training (§4.2); ``ctx.actor`` is an
    ``actor.reward_model.RewardModelActor``."""
    # shuffled epochs of pairs
    run_supervised(ctx, stage, pairs, stage.rm_batch_size, partial(_rm_step, ctx, stage))
