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
from nemo_cascade.algorithms.grpo import AGGREGATION


def _sum_count(total: Tensor, count: Tensor) -> Tensor:
    """A metric in Megatron's reporting form: ``[sum, count]``, summed over microbatches and
    ranks."""
    return torch.stack([total.detach().float(), count.detach().float()])


def teacher_advantages(student_B_T: Tensor, teacher_B_T: Tensor, mask_B_T: Tensor) -> Tensor:
    """``log π_teacher − log π_student`` on the trained tokens, 0 elsewhere: positive where the
    teacher finds the student's token likelier than the student does. Detached inputs expected."""
    valid = mask_B_T > 0
    gap = teacher_B_T.float() - student_B_T.float()
    return torch.where(valid, gap, torch.zeros_like(gap))


def importance_weights(
    student_B_T: Tensor, rollout_B_T: Tensor, mask_B_T: Tensor, low: float, high: float
) -> Tensor:
    """``clip(π_student / π_sampler, low, high)`` per trained token (1 elsewhere), computed in log
    space."""
    valid = mask_B_T > 0
    log_ratio = torch.where(
        valid,
        student_B_T.float() - rollout_B_T.float(),
        torch.zeros_like(student_B_T, dtype=torch.float32),
    )
    return torch.exp(log_ratio).clamp(low, high)


def distill_loss_terms(
    logprobs_B_T: Tensor,
    teacher_B_T: Tensor,
    rollout_B_T: Tensor,
    reward_advantages: Tensor,
    mask_B_T: Tensor,
    cfg: GRPO,
    d: Distill,
    segment_ids_B_T: Optional[Tensor] = None,
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
    reward = reward[:, None] if reward.dim() == 1 else reward
    advantages = gap + d.reward_weight * reward
    weights = importance_weights(student, rollout_B_T, mask_B_T, d.ratio_low, d.ratio_high)
    # exp(lp − lp.detach()) is 1 in value (the loss reads −w·A, as GRPO's) and ∇lp in gradient
    lp = torch.where(valid, logprobs_B_T.float(), torch.zeros_like(gap))
    loss = torch.where(
        valid, -(weights * advantages) * torch.exp(lp - lp.detach()), torch.zeros_like(gap)
    )
    numerator, denominator = AGGREGATION[cfg.loss_aggregation](loss, valid, segment_ids_B_T)
    raw = torch.exp(
        torch.where(valid, student.float() - rollout_B_T.float(), torch.zeros_like(gap))
    )
    clipped = valid & ((raw < d.ratio_low) | (raw > d.ratio_high))
    count = valid.sum()
    metrics = {
        "reverse_kl": _sum_count(-gap.sum(), count),
        "importance_clipped": _sum_count(clipped.sum(), count),
    }
    return numerator, denominator, metrics


def distill_loss(
    cfg: GRPO, d: Distill, logprobs_B_T: Tensor, mb: dict
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """The actor's per-microbatch loss of a distill stage: :func:`distill_loss_terms` on the batch's
    ``teacher_logprobs`` (each sequence's own domain's teacher), plus GRPO's ``logprob_gap``."""
    mask = mb["loss_mask"]
    num, den, metrics = distill_loss_terms(
        logprobs_B_T,
        mb["teacher_logprobs"],
        mb["rollout_logprobs"],
        mb["advantages"],
        mask,
        cfg,
        d,
        mb.get("segment_ids"),
    )
    valid = mask > 0
    gap = torch.where(
        valid, (logprobs_B_T.detach() - mb["rollout_logprobs"]).abs(), torch.zeros(())
    )
    metrics["logprob_gap"] = torch.stack([gap.sum(), valid.sum().float()])
    return num, den, metrics


__all__ = ["teacher_advantages", "importance_weights", "distill_loss_terms", "distill_loss"]
