"""SFT math: masked next-token cross-entropy on response tokens (examples are packed by
:func:`.packing.pack_sft_batch`).

Alignment convention (the same as :mod:`nemo_cascade.algorithms.grpo`; the actor relies on it)
    ``tokens_B_T`` are the input ids (packed examples, right-padded). The actor returns
    ``logprobs_B_T`` with ``logprobs_B_T[b, t] = log p(tokens_B_T[b, t] | tokens_B_T[b, :t])`` for
    ``t >= 1`` and 0 at ``t = 0``. ``loss_mask_B_T[b, t] = 1`` exactly when the token at ``t`` is a
    (kept) response token, i.e. on an example's ``[P, P + R)`` for ``P`` prompt and ``R`` response
    tokens; the prompt is context only (response-only loss is the usual SFT convention; the paper's
    SFT description, §3.1, does not state it).

Loss normalisation: like GRPO's token-level loss, the function returns ``(numerator_sum,
denominator_count)`` for Megatron's ``calculate_per_token_loss=True``, which divides by the count
over all microbatches and ranks.
"""
from __future__ import annotations

import torch

Tensor = torch.Tensor


def sft_loss_terms(logprobs_B_T: Tensor, loss_mask_B_T: Tensor) -> tuple[Tensor, Tensor]:
    """Masked cross-entropy as ``(numerator, denominator)``.

    ``numerator = −Σ_{b,t: mask>0} logprobs[b,t]`` (differentiable float32 scalar), ``denominator``
    = number of masked tokens (int, Megatron's ``num_tokens``); globally loss = mean NLL per
    response token of the batch. Masked-out positions may hold any value (even −inf): they are
    selected away, not multiplied by 0.
    """
    valid_B_T = loss_mask_B_T > 0
    lp_B_T = logprobs_B_T.float()
    numerator = -torch.where(valid_B_T, lp_B_T, torch.zeros_like(lp_B_T)).sum()
    return numerator, valid_B_T.sum().to(torch.int)


__all__ = ["sft_loss_terms"]
