"""Validation of one stage's own sections: its length, data, GRPO and sampling settings, reward and
reward-model settings. Every failure is one :class:`~.schema.ConfigError` line naming the field."""
from __future__ import annotations

import math
import re

from .derived import samples_on_policy, stage_domains
from .schema import REWARD_DOMAINS, ConfigError, LengthPhase, Parallel, Stage, literal_values

OVERLONG = literal_values(LengthPhase, "overlong")
NAMED_ANSWER_PATTERNS = ("gsm8k", "answer_is")
"""The names ``Reward.answer_pattern`` may take besides a regex: the keys of
rewards.math.ANSWER_PATTERNS (a test keeps the two equal; config imports nothing from rewards)."""


def at_least(field: str, value, least, note: str = "") -> None:
    """One line naming ``field`` unless ``value >= least`` (``note``: what the least value
    means)."""
    if value < least:
        raise ConfigError(f"{field}: expected >= {least}{f' ({note})' if note else ''}, got "
                          f"{value}")


def validate_grpo(s: Stage, p: Parallel, where: str) -> None:
    g, r = s.grpo, s.rollout
    if g.group_size < 2:
        raise ConfigError(f"{where}.grpo.group_size: GRPO needs >= 2 samples per prompt, got "
                          f"{g.group_size}")
    at_least(f"{where}.grpo.prompts_per_step", g.prompts_per_step, 1)
    if r.temperature <= 0:
        raise ConfigError(f"{where}.rollout.temperature: RL sampling needs > 0, got "
                          f"{r.temperature}")
    if not 0 < r.top_p <= 1:
        raise ConfigError(f"{where}.rollout.top_p: expected in (0, 1], got {r.top_p}")
    at_least(f"{where}.rollout.max_response_tokens", r.max_response_tokens, 1)
    at_least(f"{where}.grpo.pack_tokens", g.pack_tokens, 0,
             "0 = the batch's longest sequence or group")
    if p.cp > 1 and g.sequence_packing:
        raise ConfigError(f"{where}.grpo.sequence_packing: parallel.cp={p.cp} splits plain rows "
                          "over ranks, not packed ones (per-sequence attention); set "
                          "grpo.sequence_packing=false")
    _validate_reward(s, where)
    _validate_sampling_filters(s, where)


def validate_length(s: Stage, where: str) -> None:
    """A stage's length: ``steps``, or ``epochs`` over its data (SFT and RM stages) with steps =
    0."""
    at_least(f"{where}.epochs", s.epochs, 0, "0 = the length is steps")
    if s.epochs and samples_on_policy(s):
        raise ConfigError(f"{where}.epochs: a grpo stage's length is steps (T15–T20 give steps); "
                          "epochs are for sft and reward_model stages")
    if s.epochs and s.steps:
        raise ConfigError(f"{where}.epochs: the length is steps or epochs, not both; set steps=0 "
                          f"with epochs={s.epochs} (got steps={s.steps})")
    if not s.epochs and s.steps < 1:
        hint = "" if samples_on_policy(s) else " (or steps=0 with epochs > 0)"
        raise ConfigError(f"{where}.steps: expected >= 1, got {s.steps}{hint}")


def validate_data(s: Stage, where: str) -> None:
    """Every Data section of the stage: ``data``, then ``extra_data.J`` (the SFT blend, or
    mixed-domain prompts)."""
    if not s.data.source:
        raise ConfigError(f"{where}.data.source: expected a file path, synthetic:NAME or "
                          "benchmark:NAME")
    # The prompt limit the loader drops long rows at: the engine's for RL prompts, the sequence's
    # for SFT.
    limit = {"sft": ("sft_max_tokens", s.sft_max_tokens)}.get(s.kind)
    if samples_on_policy(s):
        limit = ("rollout.max_prompt_tokens", s.rollout.max_prompt_tokens)
    for name, d in (("data", s.data),
                    *((f"extra_data.{j}", d) for j, d in enumerate(s.extra_data))):
        at_least(f"{where}.{name}.max_bad_rows", d.max_bad_rows, 0)
        if d.domain and not samples_on_policy(s):
            raise ConfigError(f"{where}.{name}.domain: only grpo prompts are scored in a domain; a "
                              f"{s.kind} stage reads its rows as they are (leave it empty)")
        if d.domain and d.domain not in REWARD_DOMAINS:
            raise ConfigError(f"{where}.{name}.domain: expected one of {list(REWARD_DOMAINS)} or "
                              f"empty (the stage's domain), got {d.domain!r:.80}")
        if d.allow_eval_instructions and (not samples_on_policy(s)
                                          or (d.domain or s.domain) != "ifeval"):
            raise ConfigError(f"{where}.{name}.allow_eval_instructions: only IF-RL prompts (a grpo "
                              "source of domain ifeval) hold instruction ids; leave it false here")
        at_least(f"{where}.{name}.min_prompt_tokens", d.min_prompt_tokens, 0)
        if d.min_prompt_tokens and limit is None:
            raise ConfigError(f"{where}.{name}.min_prompt_tokens: a {s.kind} stage keeps every row "
                              "(long ones are cut to their last tokens); prompt-length drops are "
                              "for grpo and sft stages")
        if limit is not None and d.min_prompt_tokens > limit[1]:
            raise ConfigError(f"{where}.{name}.min_prompt_tokens: {d.min_prompt_tokens} is above "
                              f"{limit[0]}={limit[1]}, which would drop every row")
        at_least(f"{where}.{name}.swe_max_files", d.swe_max_files, 1)
        # the ground truth takes at least one file
        if not 0 <= d.swe_min_noisy_files < d.swe_max_files:
            raise ConfigError(f"{where}.{name}.swe_min_noisy_files: expected 0 to swe_max_files - "
                              f"1 = {d.swe_max_files - 1}, got {d.swe_min_noisy_files}")
        if not 0 <= d.swe_truth_only_share <= 1:  # drawn per instance
            raise ConfigError(f"{where}.{name}.swe_truth_only_share: expected a probability in "
                              f"[0, 1], got {d.swe_truth_only_share}")
        if not isinstance(d.repeat, int) or d.repeat < 1:  # the rows are listed `repeat` times
            raise ConfigError(f"{where}.{name}.repeat: expected an integer >= 1, got {d.repeat}")
        if d.repeat != 1 and s.kind == "reward_model":
            raise ConfigError(f"{where}.{name}.repeat: weights a source in an SFT blend or a GRPO "
                              f"prompt pool; a {s.kind} stage reads one source once, so repeat "
                              "must be 1")
    validate_shares(s, where)


def validate_shares(s: Stage, where: str) -> None:
    """``Data.share``: a GRPO or distill stage's prompt pool in fixed proportions, stated for every
    source or for none, each in (0, 1] and together 1, and not with ``repeat`` (two weights for one
    source)."""
    sources = [("data", s.data), *((f"extra_data.{j}", d) for j, d in enumerate(s.extra_data))]
    stated = [(name, d) for name, d in sources if d.share]
    if not stated:
        return
    name, d = stated[0]
    if not samples_on_policy(s):
        raise ConfigError(f"{where}.{name}.share: a share of a prompt pool, for grpo and distill "
                          f"stages; a {s.kind} stage weights a source with repeat")
    for name, d in sources:
        if not 0 < d.share <= 1:
            raise ConfigError(f"{where}.{name}.share: expected a share in (0, 1] on every source "
                              f"once one source states one, got {d.share}")
        if d.repeat != 1:
            raise ConfigError(f"{where}.{name}.repeat: a source with a share is repeated as its "
                              f"share needs; leave repeat at 1 (got {d.repeat})")
    total = sum(d.share for _, d in sources)
    if abs(total - 1) > 1e-6:
        raise ConfigError(f"{where}: the sources' shares (data, extra_data.*) add up to "
                          f"{total:g}; expected 1")


def validate_reward_model(s: Stage, p: Parallel, where: str) -> None:
    for name in ("rm_batch_size", "rm_max_tokens"):
        at_least(f"{where}.{name}", getattr(s, name), 1)
    if p.micro_batch_size % 2:
        # A pair's chosen and rejected rows must meet in one microbatch for the BT loss.
        raise ConfigError("parallel.micro_batch_size: a reward_model stage needs an even number "
                          "of sequences per microbatch (chosen + rejected), got "
                          f"{p.micro_batch_size}")


def _validate_sampling_filters(s: Stage, where: str) -> None:
    g, r = s.grpo, s.rollout
    if r.top_k == 0 or r.top_k < -1:
        raise ConfigError(f"{where}.rollout.top_k: expected -1 (off) or >= 1, got {r.top_k}")
    at_least(f"{where}.grpo.refill_max_rounds", g.refill_max_rounds, 0)
    if g.refill_max_rounds and not g.drop_zero_variance_groups:
        raise ConfigError(f"{where}.grpo.refill_max_rounds: refilling replaces dropped groups; it "
                          "needs grpo.drop_zero_variance_groups=true")
    for name in ("readmit_unsolved", "readmit_solved"):
        if not 0 <= getattr(g, name) <= 1:
            raise ConfigError(f"{where}.grpo.{name}: expected a probability in [0, 1], got "
                              f"{getattr(g, name)}")
    if g.epoch_filter and "rlhf" in stage_domains(s):
        raise ConfigError(f"{where}.grpo.epoch_filter: needs a pass/fail reward (correct = reward "
                          "> 0); rlhf rewards are reward-model scores")
    for k, phase in enumerate(s.length_curriculum):
        if phase.steps < 1 or phase.max_response_tokens < 1:
            raise ConfigError(f"{where}.length_curriculum.{k}: steps and max_response_tokens must "
                              f"be >= 1, got {phase.steps}:{phase.max_response_tokens}")
        if phase.overlong not in OVERLONG:
            raise ConfigError(f"{where}.length_curriculum.{k}.overlong: expected "
                              f"{', '.join(OVERLONG[:-1])} or {OVERLONG[-1]}, got "
                              f"{phase.overlong!r:.80}")
        if phase.temperature is not None and not phase.temperature > 0:
            raise ConfigError(f"{where}.length_curriculum.{k}.temperature: RL sampling needs > 0 "
                              f"(or None = rollout.temperature), got {phase.temperature}")
        if not 0 <= phase.until_clip_ratio < 1:
            raise ConfigError(f"{where}.length_curriculum.{k}.until_clip_ratio: expected a share "
                              f"in [0, 1) (0 = run all its steps), got {phase.until_clip_ratio}")
    if s.length_curriculum and sum(p.steps for p in s.length_curriculum) != s.steps:
        raise ConfigError(f"{where}.length_curriculum: phase steps sum to "
                          f"{sum(p.steps for p in s.length_curriculum)}, expected steps={s.steps}")


def _validate_reward(s: Stage, where: str) -> None:
    rw = s.reward
    if s.domain not in REWARD_DOMAINS:
        raise ConfigError(f"{where}.domain: expected one of {list(REWARD_DOMAINS)}, got "
                          f"{s.domain!r:.80}")
    penalty = rw.code_switch_penalty
    if penalty not in ("auto", "none", "batch_min_minus_10"):
        try:
            float(penalty)
        except ValueError:
            raise ConfigError(f"{where}.reward.code_switch_penalty: expected a number, "
                              "'batch_min_minus_10', 'none' or 'auto', got "
                              f"{penalty!r:.80}") from None
    if penalty not in ("auto", "none", "batch_min_minus_10") and not math.isfinite(float(penalty)):
        raise ConfigError(f"{where}.reward.code_switch_penalty: expected a finite number, got "
                          f"{penalty!r:.80}")
    if rw.answer_pattern is not None and rw.answer_pattern not in NAMED_ANSWER_PATTERNS:
        try:
            groups = re.compile(rw.answer_pattern).groups
        except (re.error, RecursionError, OverflowError) as e:
            raise ConfigError(f"{where}.reward.answer_pattern: not a regex ({e}); or one of "
                              f"{list(NAMED_ANSWER_PATTERNS)}") from None
        if groups < 1:
            raise ConfigError(f"{where}.reward.answer_pattern: the regex needs a group capturing "
                              "the answer, e.g. '####\\s*(.+)'; or one of "
                              f"{list(NAMED_ANSWER_PATTERNS)}")
    if rw.verify_timeout_s <= 0:
        raise ConfigError(f"{where}.reward.verify_timeout_s: expected > 0, got "
                          f"{rw.verify_timeout_s}")
    at_least(f"{where}.reward.workers", rw.workers, 0, "0 = all cores")
    at_least(f"{where}.reward.judge_reasoning_tokens", rw.judge_reasoning_tokens, 0,
             "0 = the judge answers at once")
    needs_rm = ("the rlhf domain" if "rlhf" in stage_domains(s)
                else "if_rm_bonus" if rw.if_rm_bonus else "")
    if needs_rm and not (rw.reward_model_url or rw.reward_model_stage):
        raise ConfigError(f"{where}.reward.reward_model_url: {needs_rm} needs a reward model: a "
                          "server URL, or reward.reward_model_stage = an earlier reward_model "
                          "stage to serve")
    if rw.reward_model_url and rw.reward_model_stage:
        raise ConfigError(f"{where}.reward.reward_model_stage: set it or reward.reward_model_url, "
                          "not both")


__all__ = ["OVERLONG", "NAMED_ANSWER_PATTERNS", "at_least", "validate_grpo", "validate_length",
           "validate_data", "validate_shares", "validate_reward_model"]
