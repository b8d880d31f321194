"""ONE stage: the GRPO loop, and the supervised loop of SFT and reward-model stages, reading like the algorithm."""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Callable

from nemo_cascade import checkpoint, ranks, stop_request, weight_sync
from nemo_cascade import config
from nemo_cascade.algorithms import grpo, packing, reward_model, sft
from nemo_cascade.algorithms.length_curriculum import LengthCurriculum
from nemo_cascade.data.loader import PromptList, PromptStream, sft_batches
from nemo_cascade.errors import CascadeError
from nemo_cascade.faults import crash_point
from nemo_cascade.metrics import MetricsLog, PhaseTimer
from nemo_cascade.rewards import ScoreAsFinished, penalize_code_switching, reward_metrics, stage_scorer
from nemo_cascade.rewards.remote import RewardServerError


@dataclass
class StageContext:
    actor: object          # actor.megatron.MegatronActor
    engine: object | None  # rollout.vllm.RolloutEngine (GRPO stages)
    pad_id: int
    stage_dir: Path
    log: MetricsLog
    saves: "Saves | None" = None
    data_state: dict | None = None
    """The previous stage's final data position (``boundary.data = continue``)."""


@dataclass
class Saves:
    """A stage's resumable checkpoints (checkpoint.py) under ``root``, the newest ``keep`` kept: every ``every``
    steps, once ``every_minutes`` of wall time have passed since the last save, and when a stop is requested
    (stop_request.py: the run then ends after the save)."""
    root: Path
    every: int
    keep: int
    resume_from: Path | None = None
    every_minutes: float = 0.0
    run_dir: Path | None = None
    """Where a stop request appears (None: requests are not watched)."""
    saved_at: float = field(default_factory=lambda: time.monotonic())  # looked up at call time: tests set the clock
    saved_step: int = -1

    def resume(self, actor, restore_data) -> int:
        """Load the newest checkpoint (weights, optimizer, scheduler, RNG; the data position through
        ``restore_data``); returns the step to continue from (0 without one)."""
        if self.resume_from is None:
            return 0
        step, state = checkpoint.load(self.resume_from, actor)
        restore_data(state["data"])
        self.saved_step = step
        return step + 1

    def after(self, step: int, total: int, actor, data_state: dict, stage: str = "") -> None:
        """After step ``step``: save if a save is due; raise StopRequested (after saving) on a stop request.
        Every rank calls it and all take the same decision: the wall clock is rank 0's, a request any rank's."""
        timed = bool(self.every_minutes) and time.monotonic() - self.saved_at >= 60 * self.every_minutes
        parts = ranks.gather_shares([(timed, bool(self.run_dir) and stop_request.requested(self.run_dir))])
        timed, stop = parts[0][0], any(p[1] for p in parts)
        by_steps = bool(self.every) and (step + 1) % self.every == 0
        # The last step's state is the stage's export: a save there only serves a stop before the export.
        if stop or ((by_steps or timed) and step + 1 < total):
            self._save(step, actor, data_state)
        if stop:
            raise stop_request.StopRequested(
                f"stopped on request ({stop_request.reason(self.run_dir)}) after step {step} of stage {stage}; "
                f"state saved in {self.root / f'step_{step:06d}'}; run the same command again to continue")

    def _save(self, step: int, actor, data_state: dict, rng: dict | None = None) -> Path:
        path = checkpoint.save(self.root, step, actor, {"data": data_state}, keep=self.keep, rng=rng)
        self.saved_at, self.saved_step = time.monotonic(), step
        return path

    def before_stop(self, step: int, start: int, actor, data_state: dict, rng: dict) -> str:
        """Step ``step`` cannot finish (its reward server is gone): save the state after step ``step - 1`` —
        ``data_state`` and ``rng`` as they were when ``step`` began — unless a checkpoint of it exists already.
        A resume then repeats ``step`` exactly; the stop loses no finished step. Returns where the state is."""
        if step == start:  # nothing finished since the checkpoint this run resumed from (or since the start)
            return f"resumes from {self.resume_from}" if self.resume_from else "nothing to save before step 0"
        path = self.root / f"step_{step - 1:06d}"
        if self.saved_step != step - 1:  # no save after step - 1 happened
            path = self._save(step - 1, actor, data_state, rng)
        return f"state after step {step - 1} saved in {path}"


class ServerStop(CascadeError, RuntimeError):
    """A reward or judge server failed after its retries; the stage's state is saved and the run stops."""


def _score_on_every_rank(score: Callable[[list], list], mine: list) -> list:
    """Score this rank's groups (``score(mine)``) and gather every rank's. A reward server that fails on one rank
    (after its own bounded retries) fails the step on every rank, so that all of them stop together instead of
    waiting in a collective for the one that left."""
    try:
        scored, failure = score(mine), ""
    except RewardServerError as e:
        scored, failure = [], str(e)
    parts = ranks.gather_shares([(scored, failure)])
    failure = next((f for _, f in parts if f), "")
    if failure:
        raise RewardServerError(failure)
    return [group for scored, _ in parts for group in scored]


def _start(ctx: StageContext, restore_data) -> int:
    if ctx.data_state is not None:
        restore_data(ctx.data_state)  # boundary.data = continue: the previous stage's position
    return ctx.saves.resume(ctx.actor, restore_data) if ctx.saves else 0


def _after(ctx: StageContext, step: int, total: int, data_state: dict) -> None:
    if ctx.saves:
        try:
            ctx.saves.after(step, total, ctx.actor, data_state, ctx.stage_dir.name)
        except stop_request.StopRequested:
            ctx.log.close()
            raise


def sft_loss(logprobs_B_T, mb):
    num, den = sft.sft_loss_terms(logprobs_B_T, mb["loss_mask"])
    return num, den, {}


def _stop_for_server(ctx: StageContext, stage: config.Stage, error: RewardServerError, step: int, start: int,
                     at_start: tuple[dict, dict]) -> ServerStop:
    """Step ``step`` cannot finish (a reward server failed after its retries): save the state it began with
    (``at_start``: data position and RNG, :meth:`Saves.before_stop`), close the log, and return the error that
    ends the run; the same command resumes once the server answers."""
    saved = ctx.saves.before_stop(step, start, ctx.actor, *at_start) if ctx.saves else "no checkpoints"
    ctx.log.close()
    return ServerStop(f"{error}; stopped in step {step} of stage {stage.name}, {saved}; run the same command "
                      "again to resume once the server answers")


def _data_state(stream: PromptStream, curriculum: LengthCurriculum) -> dict:
    """What a GRPO checkpoint keeps of the data side: the prompt stream's position and the length phases."""
    return {**stream.state_dict(), "length_curriculum": curriculum.state_dict()}


def _resume_grpo(ctx: StageContext, stream: PromptStream, curriculum: LengthCurriculum) -> int:
    """Restore the data side (the previous stage's stream under ``boundary.data = continue``, then this stage's
    checkpoint, whose state wins) and return the step to start at."""
    saved: dict = {}

    def restore(state: dict) -> None:
        stream.load_state_dict(state)
        saved["phases"] = state.get("length_curriculum")  # absent from a boundary's state: derived from the step

    start = _start(ctx, restore)
    curriculum.begin(start, saved.get("phases"))
    return start


def run_grpo(ctx: StageContext, stage: config.Stage, prompts: PromptList) -> dict:
    g = replace(stage.grpo, share_prompts=stage.grpo.share_prompts and not ctx.actor.te)  # TE: whole sequences
    stream = PromptStream(prompts, stage.data.seed, alternate=prompts.alternate,  # half-half modes (§4.3.2)
                          epoch_filter=(g.readmit_unsolved, g.readmit_solved) if g.epoch_filter else None)
    scorer = stage_scorer(config.stage_domains(stage), stage.reward)  # one domain, or several mixed in one run
    curriculum = LengthCurriculum(stage)                  # response-length phases (§4.5.2, T17–T19)
    if g.kl_coef > 0:
        ctx.actor.snapshot_reference()  # KL reference = the stage's starting policy (§6.3), even on resume
    start = _resume_grpo(ctx, stream, curriculum)
    weight_sync.push(ctx.actor, ctx.engine)  # the engine serves this stage's starting (or resumed) weights
    for step in range(start, stage.steps):
        if curriculum.finished:
            break  # the last phase ended early, at its clip ratio (LengthPhase.until_clip_ratio)
        timer, switched = PhaseTimer(), []
        at_start = _data_state(stream, curriculum), checkpoint.rng_state()  # what a stop in this step saves
        phase_index, phase = curriculum.at()
        cfg, rollout = replace(g, overlong=phase.overlong), config.phase_rollout(stage, phase)  # + T (T17–T19)
        temperature = rollout.temperature  # the actor's log-probs are the sampling policy's (rollout/vllm.py)

        def sample(prompts_P, round_):  # one generation round; seeds keyed per (step, round)
            # groups are scored while the rest still generate (§4.6.2); "score" times what is left after
            with ScoreAsFinished(scorer, stage.reward.score_while_generating, g.group_size) as scoring:
                with timer("generate"):
                    mine = ctx.engine.generate(ranks.my_share(prompts_P), g.group_size, rollout,
                                               step=step + round_ * stage.steps, on_group=scoring.on_group)
                crash_point("generate")
                with timer("score"):
                    groups = _score_on_every_rank(scoring.finish, mine)
            rw = stage.reward  # whole round (§4.3.2); the rule reads each group's prompt (§4.3.2, §4.5.2)
            switched.append(penalize_code_switching(groups, rw.code_switch_penalty, rw.code_switch_rule,
                                                    rw.code_switch_script))
            return groups

        try:
            groups_P, refill = grpo.collect_groups(stream.next_batch, sample, cfg)  # + refill (§4.4.2)
        except RewardServerError as e:
            raise _stop_for_server(ctx, stage, e, step, start, at_start) from None
        stream.record(groups_P)                                                 # epoch filter (§4.5.2)
        batch = grpo.make_batch(groups_P, cfg, ctx.pad_id)                   # advantages, masks, filters
        curriculum.record(step, batch.metrics["truncation_rate"])           # may end the phase (§4.5.2)
        tensors = batch.tensors()                                # packed rows unless grpo.sequence_packing=false
        result = sync = None
        if batch.num_sequences:
            if g.kl_coef > 0:
                with timer("logprobs"), ctx.actor.reference_weights():
                    tensors["ref_logprobs"] = ctx.actor.logprobs(batch.tokens_B_T, temperature, batch.layout())
            with timer("train"):
                ctx.engine.sleep()
                result = ctx.actor.train_step(tensors, partial(grpo.actor_loss, cfg), temperature)
            with timer("sync"):
                sync = weight_sync.push(ctx.actor, ctx.engine)
        metrics = {**_grpo_metrics(batch, result, sync, timer, groups_P), **reward_metrics(groups_P), **refill,
                   **stream.metrics(), "phase": phase_index, "max_response_tokens": phase.max_response_tokens,
                   "temperature": temperature,
                   "code_switched": sum(switched) / max(sum(x.group_size for x in groups_P), 1)}
        ctx.log.log(step, metrics, progress={
            "reward": batch.metrics["reward_mean"], "len": batch.metrics["response_len_mean"]})
        _after(ctx, step, stage.steps, _data_state(stream, curriculum))
    ctx.log.close()
    return stream.state_dict()


def _grpo_metrics(batch, result, sync, timer: PhaseTimer, groups_P) -> dict:
    generated = sum(len(t) for g in groups_P for t in g.response_tokens_G_T)
    out = {**batch.metrics, **timer.as_metrics(), "tokens_per_s": generated / max(timer.seconds["generate"], 1e-9)}
    if result is not None:
        out.update(loss=result.loss, grad_norm=result.grad_norm, lr=result.lr, train_tokens=result.tokens,
                   sync_mb=sync.bytes / 1e6, sync_mb_per_s=sync.mb_per_s, **result.metrics)
        if result.metrics.get("computed_tokens"):  # what the actor ran (microbatches cut to their longest row)
            out["pad_share"] = 1.0 - float((batch.segment_ids_B_T > 0).sum()) / result.metrics["computed_tokens"]
    return out


class _Drawn:
    """A batch generator's position: batches drawn so far (its order is a pure function of seed and count)."""

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
    """The loop of the supervised stages (SFT, reward model): shuffled epochs of ``rows`` in batches of
    ``batch_size`` (``sft_batches``, seeded by ``stage.data.seed``), one actor step per batch, its metrics
    logged, checkpoints / resume / stop requests (:class:`Saves`). ``step_fn(batch, timer)`` trains on one
    batch (timing ``train`` in ``timer``) and returns its metrics and the progress bar's. Returns the data
    position (batches drawn)."""
    batches = _Drawn(sft_batches(rows, batch_size, stage.data.seed))
    start = _start(ctx, batches.load_state_dict)
    for step in range(start, stage.steps):
        timer = PhaseTimer()
        metrics, progress = step_fn(next(batches), timer)
        ctx.log.log(step, {**metrics, **timer.as_metrics()}, progress=progress)
        _after(ctx, step, stage.steps, batches.state_dict())
    ctx.log.close()
    return batches.state_dict()


def _sft_step(ctx: StageContext, stage: config.Stage, examples: list, timer: PhaseTimer) -> tuple[dict, dict]:
    batch = packing.pack_sft_batch(examples, stage.sft_max_tokens, ctx.pad_id)  # sequence packing
    with timer("train"):
        result = ctx.actor.train_step(batch.tensors(), sft_loss)
    fill = float((batch.segment_ids_B_T > 0).float().mean())
    return ({"loss": result.loss, "grad_norm": result.grad_norm, "lr": result.lr, "train_tokens": result.tokens,
             "truncated": batch.num_truncated, "packed_rows": batch.num_sequences, "packing_fill": fill},
            {"loss": result.loss})


def run_sft(ctx: StageContext, stage: config.Stage, examples: list) -> dict:
    return run_supervised(ctx, stage, examples, stage.sft_batch_size, partial(_sft_step, ctx, stage))


def rm_loss(scores_B_T, mb):
    return reward_model.bt_loss_terms(scores_B_T, mb["last"], mb["pair_valid"])


def _rm_step(ctx: StageContext, stage: config.Stage, pairs: list, timer: PhaseTimer) -> tuple[dict, dict]:
    batch = reward_model.make_pair_batch(pairs, stage.rm_max_tokens, ctx.pad_id)
    with timer("train"):
        result = ctx.actor.train_step(batch.tensors(), rm_loss)
    acc, margin = result.metrics["accuracy"], result.metrics["margin"]
    return ({"loss": result.loss, "accuracy": acc, "margin_mean": margin, "grad_norm": result.grad_norm,
             "lr": result.lr, "pairs": result.tokens, "truncated": batch.num_truncated},
            {"loss": result.loss, "acc": acc})


def run_reward_model(ctx: StageContext, stage: config.Stage, pairs: list) -> None:
    """Bradley–Terry RM training (§4.2); ``ctx.actor`` is an ``actor.reward_model.RewardModelActor``."""
    run_supervised(ctx, stage, pairs, stage.rm_batch_size, partial(_rm_step, ctx, stage))  # shuffled epochs of pairs
