"""GRPO math: group-relative advantages, the batch (packed by :mod:`.packing`, its groups and
samples chosen by :mod:`.group_filter`) and the policy-loss terms.

Everything here is a pure tensor function; nothing imports megatron or vllm.

Alignment convention (the actor relies on it)
    ``tokens_B_T`` are the input ids (prompt + response, right-padded). The actor returns
    ``logprobs_B_T`` with ``logprobs_B_T[b, t] = log p(tokens_B_T[b, t] | tokens_B_T[b, :t])`` for
    ``t >= 1`` and 0 at ``t = 0``. ``loss_mask_B_T`` and ``rollout_logprobs_B_T`` are indexed the
    same way: position ``t`` refers to the token *at* ``t`` being predicted. So a sequence with
    ``P`` prompt and ``R`` response tokens has mask 1 exactly on ``t in [P, P + R)`` and the
    engine's logprob of response token ``i`` at ``t = P + i``.

Loss normalisation convention
    The actor runs Megatron with ``calculate_per_token_loss=True``: a loss function returns
    ``(numerator_sum, denominator_count)`` per microbatch and Megatron divides the summed gradients
    by the count summed over all microbatches and data-parallel ranks. So the loss functions here
    return SUMS and COUNTS, never means; the global quotient is the loss of the whole batch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from nemo_cascade.algorithms.group_filter import (has_signal, is_zero_variance, policy_rewards,
                                                  statistics_rewards)
from nemo_cascade.algorithms.packing import pack_rows_of, pack_sequences, pad_share
from nemo_cascade.config import GRPO
from nemo_cascade.types import PromptGroup

Tensor = torch.Tensor


# --------------------------------------------------------------------------------------- advantages

def group_std(rewards_G: Tensor) -> Tensor:
    """Unbiased (Bessel-corrected, ÷(G−1)) standard deviation of one group; 0 for G ≤ 1.

    Unbiased to match verl's GRPO advantage (``torch.std``), the framework the paper trained with
    (§4.1.2).
    """
    if rewards_G.numel() <= 1:
        return rewards_G.new_zeros(())
    return rewards_G.std(unbiased=True)


def group_advantages(rewards_G: Tensor, eps: float) -> Tensor:
    """GRPO advantage of each sample within its group (paper §4.1.2, Eq. 1).

    ``A_i = (r_i − mean(r)) / (std(r) + eps)`` with the unbiased std (:func:`group_std`). A group of
    size 1 has no baseline to compare with: its advantage is 0 (verl passes the raw reward through
    instead; with G ≥ 2 enforced by config this only arises after overlong filtering, and a sample
    with nothing to be compared against carries no group-relative signal). Equal rewards give
    exactly 0 — not 0/eps of rounding noise in the mean, nor nan when eps = 0. Shape: ``rewards_G``
    (G,) → (G,).
    """
    if is_zero_variance(rewards_G):
        return torch.zeros_like(rewards_G)
    return (rewards_G - rewards_G.mean()) / (group_std(rewards_G) + eps)


def shape_rewards_zscore_tanh(rewards_G: Tensor, eps: float) -> Tensor:
    """Reward shaping of the RLHF "bag of tricks": ``tanh((r − mean) / (std + eps))`` per group
    (§6.3, T11).

    Bounds every reward to (−1, 1) so a reward model's outliers cannot dominate; the shaped rewards
    then go through :func:`group_advantages` as usual. Uses the same unbiased std. Shape (G,) →
    (G,).
    """
    return torch.tanh(group_advantages(rewards_G, eps))


def no_shaping(rewards_G: Tensor, eps: float) -> Tensor:
    """Identity shaping (paper default: no shaping with the 72B RM, §4.3)."""
    return rewards_G


SHAPING: dict[str, Callable[[Tensor, float], Tensor]] = {"none": no_shaping,
                                                         "zscore_tanh": shape_rewards_zscore_tanh}


# -------------------------------------------------------------------------------------------- batch

@dataclass
class GRPOBatch:
    """One rollout batch laid out for the actor (see the module docstring for the alignment
    convention).

    ``S`` kept sequences in ``B`` rows of ``T`` tokens. With ``GRPO.sequence_packing`` several
    sequences share a row (:func:`pack_rows`): each keeps its own positions and attends only to
    itself (``segment_ids_B_T``), so a row computes what its sequences would compute in rows of
    their own, without the padding. Without packing each sequence is a row of its own, right-padded
    to the longest (``B = S``). Empty (``num_sequences == 0``, all tensors with ``B = 0``) when
    every group was dropped — the caller skips the update.
    """

    tokens_B_T: Tensor
    """Input ids, int64: prompt + response of each sequence of the row, then ``pad_id``."""
    loss_mask_B_T: Tensor
    """float32 1.0 exactly on trained response positions (token at t is predicted), 0.0
    elsewhere."""
    advantages_B_T: Tensor
    """float32 advantage of the sequence each position belongs to (0.0 on padding)."""
    rollout_logprobs_B_T: Tensor
    """float32 engine logprob of the token at t (same positions as the mask), 0.0 elsewhere."""
    position_ids_B_T: Tensor
    """int64 position of each token within its own sequence (RoPE positions restart per
    sequence)."""
    segment_ids_B_T: Tensor
    """int64 1, 2, … numbering the sequences (and shared prompts) of a row; 0 on padding."""
    prefix_ids_B_T: Tensor
    """int64 on a sample that shares its prompt (``GRPO.share_prompts``), the segment id of that
    prompt; else 0."""
    advantages_S: Tensor
    """float32 advantage per kept sequence, in group order (the order of ``lengths_S`` and
    ``modes_S``)."""
    lengths_S: Tensor
    """int64 unpadded length (prompt + response) of each kept sequence."""
    modes_S: list[str] = field(default_factory=list)
    """Chat-template mode per kept sequence: ``think`` or ``no_think``."""
    domains_S: list[str] = field(default_factory=list)
    """Reward domain per kept sequence (a distill stage's teacher is its domain's)."""
    sequence_B_T: Tensor | None = None
    """int64 index into the kept sequences of the sequence each position belongs to; −1 on padding
    and on a shared prompt."""
    packed: bool = False
    """Rows hold several sequences: the actor needs :meth:`layout` (block-diagonal attention)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Rollout statistics (see :func:`make_batch`)."""

    @property
    def num_sequences(self) -> int:
        return int(self.lengths_S.shape[0])

    def layout(self) -> dict[str, Tensor]:
        """What the actor needs besides the tokens to run packed rows (none for one sequence per
        row, which keeps the plain causal path — the only one context parallelism can split);
        ``prefix_ids`` where samples share a prompt."""
        shared = {"prefix_ids": self.prefix_ids_B_T} if bool(self.prefix_ids_B_T.any()) else {}
        rows = {"position_ids": self.position_ids_B_T, "segment_ids": self.segment_ids_B_T}
        return {**rows, **shared} if self.packed else {}

    def tensors(self) -> dict[str, Tensor]:
        """The actor's ``train_step`` batch (:func:`actor_loss` reads it)."""
        return {"tokens": self.tokens_B_T, "loss_mask": self.loss_mask_B_T,
                "advantages": self.advantages_B_T,
                "rollout_logprobs": self.rollout_logprobs_B_T, **self.layout()}


def _check_group(p: int, group: PromptGroup) -> None:
    G = group.group_size
    if len(group.rewards_G) != G:
        raise ValueError(f"group {p}: {len(group.rewards_G)} rewards for {G} samples (score the "
                         "groups first)")
    if len(group.finish_reason_G) != G or len(group.rollout_logprobs_G_T) != G:
        raise ValueError(f"group {p}: finish_reason_G/rollout_logprobs_G_T must have {G} entries")
    pairs = zip(group.response_tokens_G_T, group.rollout_logprobs_G_T)
    for i, (tokens, logprobs) in enumerate(pairs):
        if len(tokens) != len(logprobs):
            raise ValueError(f"group {p} sample {i}: {len(tokens)} tokens but {len(logprobs)} "
                             "logprobs")
    if not group.prompt_tokens:
        raise ValueError(f"group {p}: empty prompt (the first response token would have no "
                         "context)")


def make_batch(groups: list[PromptGroup], cfg: GRPO, pad_id: int) -> GRPOBatch:
    """Turn scored groups into a training batch: overlong policy → shaping → zero-variance drop →
    advantages.

    Per group: ``group_filter.OVERLONG[cfg.overlong]`` edits rewards / drops truncated samples; if
    ``cfg.drop_zero_variance_groups`` and the remaining rewards are all equal the group is dropped
    (§4.4.2); otherwise rewards are shaped (``SHAPING[cfg.reward_shaping]``) and turned into
    advantages with ``cfg.adv_eps``. Kept samples are laid out by :func:`pack_sequences`: several
    per row with ``cfg.sequence_packing`` (:func:`pack_rows_of`: ``cfg.pack_tokens``,
    ``cfg.share_prompts``), else one per row.

    metrics (over ALL generated samples, before any filter unless stated): ``groups``,
    ``groups_dropped`` (zero variance), ``samples_overlong_filtered``, ``reward_mean``,
    ``reward_std`` (population std over the batch), ``truncation_rate`` (share of ``length``
    finishes), ``response_len_mean`` (tokens), ``num_sequences`` and ``num_loss_tokens`` (of the
    batch), ``rows``, ``pad_share`` (of the ``rows × T`` positions), ``pad_share_unpacked`` (one
    sequence per row), ``shared_prompt_saving`` (of the sequences' tokens, not laid out: shared
    prompts); per chat-template mode, ``groups/<mode>`` and ``reward_mean/<mode>`` (the half-half
    batches of §4.3.2)."""
    prompts, responses, logprobs, advantages, modes, domains = [], [], [], [], [], []
    all_rewards = []
    dropped = filtered = 0
    for p, group in enumerate(groups):
        _check_group(p, group)
        scored_G, rewards_G, keep_G = policy_rewards(group, cfg)
        all_rewards.append(scored_G)
        filtered += int((~keep_G).sum())
        # the K ≤ G kept samples, or all G
        stats_rewards = statistics_rewards(rewards_G, keep_G, cfg)
        if cfg.drop_zero_variance_groups and not has_signal(group, rewards_G, keep_G, cfg):
            dropped += 1
            continue
        adv = group_advantages(SHAPING[cfg.reward_shaping](stats_rewards, cfg.adv_eps), cfg.adv_eps)
        adv_K = adv[keep_G] if cfg.overlong_filter_stats == "all" else adv
        for i, a in zip(keep_G.nonzero().flatten().tolist(), adv_K.tolist()):
            prompts.append(group.prompt_tokens)
            responses.append(group.response_tokens_G_T[i])
            logprobs.append(group.rollout_logprobs_G_T[i])
            advantages.append(a)
            modes.append(group.mode)
            domains.append(group.domain)

    rows = (pack_rows_of(prompts, responses, cfg.pack_tokens, cfg.share_prompts)
            if cfg.sequence_packing else None)
    laid = pack_sequences(prompts, responses, pad_id, logprobs, rows)
    advantages_S = torch.tensor(advantages, dtype=torch.float32)
    sequence_B_T = _sequence_index(laid)
    metrics = {
        **_generation_metrics(groups, all_rewards),
        "groups_dropped": float(dropped),
        "samples_overlong_filtered": float(filtered),
        "num_sequences": float(len(prompts)),
        **_layout_metrics(laid, [len(p) + len(r) for p, r in zip(prompts, responses)]),
    }
    return GRPOBatch(laid["tokens_B_T"], laid["loss_mask_B_T"],
                     _per_position(advantages_S, sequence_B_T), laid["values_B_T"],
                     laid["position_ids_B_T"], laid["segment_ids_B_T"], laid["prefix_ids_B_T"],
                     advantages_S, laid["lengths_S"], modes, domains, sequence_B_T,
                     packed=cfg.sequence_packing, metrics=metrics)


def _layout_metrics(laid: dict[str, Tensor], lengths: list[int]) -> dict[str, float]:
    """How the kept sequences (``lengths``: prompt + response each) were laid out in rows."""
    B, T = laid["tokens_B_T"].shape
    laid_tokens = int((laid["segment_ids_B_T"] > 0).sum())
    return {
        "num_loss_tokens": float(laid["loss_mask_B_T"].sum()),
        "rows": float(B),
        "pad_share": pad_share([laid_tokens], B, T),
        "pad_share_unpacked": pad_share(lengths, len(lengths), max(lengths, default=0)),
        "shared_prompt_saving": 1.0 - laid_tokens / sum(lengths) if lengths else 0.0,
    }


def _per_position(values_S: Tensor, sequence_B_T: Tensor) -> Tensor:
    """Each sequence's value on every position of its own segment; 0 on padding and on shared
    prompts."""
    out_B_T = torch.zeros(sequence_B_T.shape, dtype=torch.float32)
    on_B_T = sequence_B_T >= 0
    out_B_T[on_B_T] = values_S[sequence_B_T[on_B_T]]
    return out_B_T


def _sequence_index(laid: dict[str, Tensor]) -> Tensor:
    """The kept sequence each position of the laid-out rows belongs to (:func:`pack_sequences`:
    ``row_S[s]`` from ``start_S[s]`` for ``span_S[s]`` tokens); −1 on padding and on a shared
    prompt."""
    sequence_B_T = torch.full(laid["values_B_T"].shape, -1, dtype=torch.int64)
    places = zip(*(laid[k].tolist() for k in ("row_S", "start_S", "span_S")))
    for s, (b, start, n) in enumerate(places):
        sequence_B_T[b, start:start + n] = s
    return sequence_B_T


def _generation_metrics(groups: list[PromptGroup], scored: list[Tensor]) -> dict[str, float]:
    """What was generated, over every sample before any filter: ``scored[p]`` is group p's rewards
    after the overlong policy (:func:`.group_filter.policy_rewards`). Per chat-template mode, its
    groups and mean reward (§4.3.2)."""
    rewards = torch.cat(scored) if scored else torch.zeros(0, dtype=torch.float64)
    finishes = [f for g in groups for f in g.finish_reason_G]
    lengths = [len(r) for g in groups for r in g.response_tokens_G_T]
    metrics = {
        "groups": float(len(groups)),
        "reward_mean": rewards.mean().item() if rewards.numel() else 0.0,
        "reward_std": rewards.std(unbiased=False).item() if rewards.numel() else 0.0,
        "truncation_rate": finishes.count("length") / len(finishes) if finishes else 0.0,
        "response_len_mean": sum(lengths) / len(lengths) if lengths else 0.0,
    }
    for mode in sorted({g.mode for g in groups}):
        mine = [r for g, r in zip(groups, scored) if g.mode == mode]
        metrics[f"groups/{mode}"] = float(len(mine))
        metrics[f"reward_mean/{mode}"] = torch.cat(mine).mean().item()
    return metrics


# --------------------------------------------------------------------------------------------- loss

def aggregate_token(loss_B_T: Tensor, valid_B_T: Tensor, segment_ids_B_T: Optional[Tensor] = None
                    ) -> tuple[Tensor, Tensor]:
    """Token-level aggregation (paper default, §4.1.2, DAPO-style).

    ``numerator = Σ_{b,t valid} loss[b,t]``, ``denominator = #valid tokens``; globally loss = sum of
    per-token losses / number of valid tokens in the whole batch. Rows' sequences do not matter.
    """
    numerator = torch.where(valid_B_T, loss_B_T, torch.zeros_like(loss_B_T)).sum()
    return numerator, valid_B_T.sum().to(torch.int)


def aggregate_sequence(loss_B_T: Tensor, valid_B_T: Tensor, segment_ids_B_T: Optional[Tensor] = None
                       ) -> tuple[Tensor, Tensor]:
    """Sequence-level aggregation (RLHF bag of tricks, §6.3, T10).

    ``numerator = Σ_s mean_{t valid}(loss[s,t])`` over sequences with ≥ 1 valid token,
    ``denominator`` = number of such sequences; globally loss = mean over sequences of each
    sequence's mean token loss. A sequence is a ``(row, segment id)`` pair — packed rows hold
    several; without ``segment_ids_B_T`` each row is one sequence.
    """
    B, T = loss_B_T.shape
    if segment_ids_B_T is None:
        segment_ids_B_T = torch.ones((B, T), dtype=torch.long, device=loss_B_T.device)
    per_row = int(segment_ids_B_T.max()) + 1 if segment_ids_B_T.numel() else 1
    key = (torch.arange(B, device=loss_B_T.device)[:, None] * per_row + segment_ids_B_T).reshape(-1)
    masked = torch.where(valid_B_T, loss_B_T, torch.zeros_like(loss_B_T)).reshape(-1)
    sum_S = masked.new_zeros(B * per_row).index_add(0, key, masked)
    n_S = torch.zeros(B * per_row, device=loss_B_T.device).index_add(0, key,
                                                                     valid_B_T.reshape(-1).float())
    has_tokens_S = n_S > 0
    numerator = (sum_S / n_S.clamp(min=1))[has_tokens_S].sum()
    return numerator, has_tokens_S.sum().to(torch.int)


AGGREGATION: dict[str, Callable[[Tensor, Tensor, Optional[Tensor]], tuple[Tensor, Tensor]]] = {
    "token": aggregate_token, "sequence": aggregate_sequence}


def k3_kl(logprobs_B_T: Tensor, ref_logprobs_B_T: Tensor) -> Tensor:
    """Schulman's k3 estimator of KL(π ‖ π_ref) per token: ``exp(ref − lp) − (ref − lp) − 1`` (≥
    0)."""
    log_ratio_B_T = ref_logprobs_B_T - logprobs_B_T
    return torch.exp(log_ratio_B_T) - log_ratio_B_T - 1.0


def sum_count(total: Tensor, count: Tensor) -> Tensor:
    """A metric in Megatron's reporting form: ``[sum, count]``, summed over microbatches and
    ranks."""
    return torch.stack([total.detach().float(), count.detach().float()])


def policy_loss_terms(
        logprobs_B_T: Tensor, old_logprobs_B_T: Tensor, advantages: Tensor, mask_B_T: Tensor,
        cfg: GRPO, ref_logprobs_B_T: Optional[Tensor] = None,
        segment_ids_B_T: Optional[Tensor] = None) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """Clipped GRPO surrogate (+ optional k3 KL) as ``(numerator, denominator, metrics)``.

    Per valid token (``mask_B_T > 0``), with ``ratio = exp(lp − old)`` and ``A`` its sequence's
    advantage — ``advantages`` is ``(B,)`` with one sequence per row, or ``(B, T)`` per position
    (packed rows)::

        loss[b,t] = −min(ratio·A, clip(ratio, 1 − clip_eps_low, 1 + clip_eps_high)·A)
                    + kl_coef · (exp(ref − lp) − (ref − lp) − 1)

    Strict on-policy (§4.1.2): the caller passes ``old = logprobs.detach()``, so ratio ≡ 1, the clip
    never acts and the gradient is REINFORCE's ``−A·∇lp``; the clip (separate low/high bounds, DAPO)
    and the KL (1e-3 in the bag of tricks, §6.3) are configured components. No entropy term
    (coefficient 0, §4.1.2). ``kl_coef > 0`` requires ``ref_logprobs_B_T`` (ValueError otherwise).
    Aggregation: ``AGGREGATION[cfg.loss_aggregation]``; numerator is a differentiable float32
    scalar, denominator an int count (Megatron's ``num_tokens``), never a mean; ``segment_ids_B_T``
    tells sequence aggregation which sequences share a row. Masked positions may hold any value
    (even ±inf).

    metrics: name → detached float32 tensor ``[sum, count]`` over valid tokens (Megatron's reporting
    format: sum both over microbatches and ranks, then divide) for ``clip_fraction`` (share of
    tokens where the clipped term is the one used), ``ratio`` (mean ratio) and ``kl`` (mean k3; 0
    without ref).
    """
    if cfg.kl_coef > 0 and ref_logprobs_B_T is None:
        raise ValueError(f"policy_loss_terms: kl_coef={cfg.kl_coef} > 0 needs ref_logprobs_B_T")
    valid_B_T = mask_B_T > 0
    zeros_B_T = torch.zeros_like(logprobs_B_T, dtype=torch.float32)
    # Sanitise masked positions first, so exp() never sees padding garbage (0·inf = nan, also in
    # backward).
    lp_B_T = torch.where(valid_B_T, logprobs_B_T.float(), zeros_B_T)
    old_B_T = torch.where(valid_B_T, old_logprobs_B_T.float(), zeros_B_T)
    # [B, 1] broadcasts
    adv_B_T = advantages.float()[:, None] if advantages.dim() == 1 else advantages.float()

    ratio_B_T = torch.exp(lp_B_T - old_B_T)
    unclipped_B_T = ratio_B_T * adv_B_T
    clipped_B_T = torch.clamp(ratio_B_T, 1.0 - cfg.clip_eps_low, 1.0 + cfg.clip_eps_high) * adv_B_T
    loss_B_T = -torch.minimum(unclipped_B_T, clipped_B_T)

    kl_B_T = zeros_B_T
    if ref_logprobs_B_T is not None:
        ref_B_T = torch.where(valid_B_T, ref_logprobs_B_T.float(), zeros_B_T)
        kl_B_T = k3_kl(lp_B_T, ref_B_T)
    if cfg.kl_coef > 0:
        loss_B_T = loss_B_T + cfg.kl_coef * kl_B_T

    numerator, denominator = AGGREGATION[cfg.loss_aggregation](loss_B_T, valid_B_T, segment_ids_B_T)
    n_valid = valid_B_T.sum()
    metrics = {
        "clip_fraction": sum_count((valid_B_T & (clipped_B_T < unclipped_B_T)).sum(), n_valid),
        "ratio": sum_count(torch.where(valid_B_T, ratio_B_T, zeros_B_T).sum(), n_valid),
        "kl": sum_count(torch.where(valid_B_T, kl_B_T, zeros_B_T).sum(), n_valid),
    }
    return numerator, denominator, metrics


def actor_loss(cfg: GRPO, logprobs_B_T: Tensor,
               mb: dict) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """The actor's per-microbatch loss for one strict on-policy update (§4.1.2):
    :func:`policy_loss_terms` with ``old = logprobs.detach()``, plus the metric ``logprob_gap`` —
    |actor − rollout| log-prob on the trained tokens, ``[sum, count]`` — which checks that vLLM
    sampled with the weights being trained (weight sync)."""
    num, den, metrics = policy_loss_terms(logprobs_B_T, logprobs_B_T.detach(), mb["advantages"],
                                          mb["loss_mask"], cfg, mb.get("ref_logprobs"),
                                          mb.get("segment_ids"))
    metrics["logprob_gap"] = logprob_gap(logprobs_B_T, mb)
    return num, den, metrics


def logprob_gap(logprobs_B_T: Tensor, mb: dict) -> Tensor:
    """``[sum, count]`` of |actor − rollout| log-prob over the trained tokens: near 0 when the
    engine sampled with the weights being trained (weight sync)."""
    mask = mb["loss_mask"] > 0
    gap = torch.where(mask, (logprobs_B_T.detach() - mb["rollout_logprobs"]).abs(), torch.zeros(()))
    return sum_count(gap.sum(), mask.sum())


__all__ = [
    "GRPOBatch", "group_std", "group_advantages", "shape_rewards_zscore_tanh", "no_shaping",
    "SHAPING",
    "make_batch",
    "aggregate_token", "aggregate_sequence", "AGGREGATION", "k3_kl", "policy_loss_terms",
    "actor_loss",
    "logprob_gap", "sum_count",
]
