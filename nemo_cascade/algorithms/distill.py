"""On-policy distillation (MOPD, Nemotron-Cascade 2): per-token advantages from a teacher's
log-probs.

The student samples; on each sampled token the teacher's log-probability minus the student's is the
advantage, so the policy gradient follows the reverse KL(student ‖ teacher) on the student's own
samples. Truncated importance sampling weights each token by the trainer/sampler probability ratio,
clipped, because the engine that sampled and the actor that trains round differently. Tensors are
``[B, T]`` laid out as in :mod:`.grpo` (position t holds the log-prob of token t); masked positions
may hold anything.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from nemo_cascade.config import GRPO, Distill
from nemo_cascade.algorithms.grpo import AGGREGATION, logprob_gap, sum_count


def teacher_advantages(student_B_T: Tensor, teacher_B_T: Tensor, mask_B_T: Tensor) -> Tensor:
    """``log π_teacher − log π_student`` on the trained tokens, 0 elsewhere: positive where the
    teacher finds the student's token likelier than the student does. Detached inputs expected."""
    gap = teacher_B_T.float() - student_B_T.float()
    return torch.where(mask_B_T > 0, gap, torch.zeros_like(gap))


def importance_ratio(student_B_T: Tensor, rollout_B_T: Tensor, mask_B_T: Tensor) -> Tensor:
    """``π_student / π_sampler`` per trained token (1 elsewhere), computed in log space."""
    log_ratio = student_B_T.float() - rollout_B_T.float()
    return torch.exp(torch.where(mask_B_T > 0, log_ratio, torch.zeros_like(log_ratio)))


def importance_weights(student_B_T: Tensor, rollout_B_T: Tensor, mask_B_T: Tensor, low: float,
                       high: float) -> Tensor:
    """:func:`importance_ratio` clipped to ``[low, high]``: truncated importance sampling."""
    return importance_ratio(student_B_T, rollout_B_T, mask_B_T).clamp(low, high)


def distill_loss_terms(logprobs_B_T: Tensor, teacher_B_T: Tensor, rollout_B_T: Tensor,
                       reward_advantages: Tensor, mask_B_T: Tensor, cfg: GRPO, d: Distill,
                       segment_ids_B_T: Optional[Tensor] = None
                       ) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """``(numerator, denominator, metrics)`` of ``−w · A · log π`` per trained token, aggregated as
    GRPO's loss (``cfg.loss_aggregation``), with ``A = teacher − student + d.reward_weight ·
    A_reward`` and ``w`` the truncated importance weight (both detached). ``reward_advantages`` is
    the group advantage per row ``(B,)`` or per position ``(B, T)``.

    metrics (``[sum, count]`` over trained tokens): ``reverse_kl`` (mean student − teacher log-prob
    on the student's samples: the estimate of KL(student ‖ teacher) the stage drives down) and
    ``importance_clipped`` (share of tokens whose weight was clipped)."""
    valid = mask_B_T > 0
    student = logprobs_B_T.detach()
    gap = teacher_advantages(student, teacher_B_T, mask_B_T)
    reward = reward_advantages.float()
    advantages = gap + d.reward_weight * (reward[:, None] if reward.dim() == 1 else reward)
    ratio = importance_ratio(student, rollout_B_T, mask_B_T)
    weights = ratio.clamp(d.ratio_low, d.ratio_high)
    # exp(lp − lp.detach()) is 1 in value (the loss reads −w·A, as GRPO's) and ∇lp in gradient
    lp = torch.where(valid, logprobs_B_T.float(), torch.zeros_like(gap))
    unit = torch.exp(lp - lp.detach())
    loss = torch.where(valid, -(weights * advantages) * unit, torch.zeros_like(gap))
    numerator, denominator = AGGREGATION[cfg.loss_aggregation](loss, valid, segment_ids_B_T)
    clipped = valid & (weights != ratio)
    count = valid.sum()
    metrics = {"reverse_kl": sum_count(-gap.sum(), count),
               "importance_clipped": sum_count(clipped.sum(), count)}
    return numerator, denominator, metrics


def distill_loss(cfg: GRPO, d: Distill, logprobs_B_T: Tensor, mb: dict
                 ) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """The actor's per-microbatch loss of a distill stage: :func:`distill_loss_terms` on the batch's
    ``teacher_logprobs`` (each sequence's own domain's teacher), plus GRPO's ``logprob_gap``."""
    num, den, metrics = distill_loss_terms(logprobs_B_T, mb["teacher_logprobs"],
                                           mb["rollout_logprobs"], mb["advantages"],
                                           mb["loss_mask"], cfg, d, mb.get("segment_ids"))
    metrics["logprob_gap"] = logprob_gap(logprobs_B_T, mb)
    return num, den, metrics


__all__ = ["teacher_advantages", "importance_ratio", "importance_weights", "distill_loss_terms",
           "distill_loss"]
