"""SFT math: masked next-token cross-entropy on response tokens, and (prompt, response) batch packing.

Alignment convention (the same as :mod:`nemo_cascade.algorithms.grpo`; the actor relies on it)
    ``tokens_B_T`` are the input ids (prompt + response, right-padded). The actor returns ``logprobs_B_T``
    with ``logprobs_B_T[b, t] = log p(tokens_B_T[b, t] | tokens_B_T[b, :t])`` for ``t >= 1`` and 0 at
    ``t = 0``. ``loss_mask_B_T[b, t] = 1`` exactly when the token at ``t`` is a (kept) response token, i.e.
    on ``t in [P, P + R)`` for ``P`` prompt and ``R`` response tokens; the prompt is context only
    (response-only loss is the usual SFT convention; the paper's SFT description, §3.1, does not state it).

Loss normalisation: like GRPO's token-level loss, the function returns ``(numerator_sum, denominator_count)``
for Megatron's ``calculate_per_token_loss=True``, which divides by the count over all microbatches and ranks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from nemo_cascade.algorithms.grpo import pack_sequences

Tensor = torch.Tensor


@dataclass
class SFTBatch:
    """``B`` (prompt, response) examples right-padded to the longest one, ``T ≤ max_tokens``."""

    tokens_B_T: Tensor
    """Input ids, int64, prompt + response then ``pad_id``."""
    loss_mask_B_T: Tensor
    """float32 1.0 on kept response-token positions (token at t is predicted), 0.0 elsewhere."""
    lengths_B: Tensor
    """int64 unpadded length of each (truncated) sequence."""
    num_truncated: int = 0
    """Examples longer than ``max_tokens`` that lost their tail."""

    @property
    def num_sequences(self) -> int:
        return int(self.tokens_B_T.shape[0])


def sft_loss_terms(logprobs_B_T: Tensor, loss_mask_B_T: Tensor) -> tuple[Tensor, Tensor]:
    """Masked cross-entropy as ``(numerator, denominator)``.

    ``numerator = −Σ_{b,t: mask>0} logprobs[b,t]`` (differentiable float32 scalar), ``denominator`` = number
    of masked tokens (int, Megatron's ``num_tokens``); globally loss = mean NLL per response token of the
    batch. Masked-out positions may hold any value (even −inf): they are selected away, not multiplied by 0.
    """
    valid_B_T = loss_mask_B_T > 0
    lp_B_T = logprobs_B_T.float()
    numerator = -torch.where(valid_B_T, lp_B_T, torch.zeros_like(lp_B_T)).sum()
    return numerator, valid_B_T.sum().to(torch.int)


def make_sft_batch(examples: Sequence[tuple[Sequence[int], Sequence[int]]], max_tokens: int,
                   pad_id: int) -> SFTBatch:
    """Pack ``(prompt_tokens, response_tokens)`` pairs into tensors with the module's alignment.

    Sequences longer than ``max_tokens`` are truncated from the right: the first ``max_tokens`` tokens of
    prompt + response are kept, so the response tail goes first and only a prompt that alone exceeds
    ``max_tokens`` is cut itself (that example then has no trained tokens: an all-zero mask row, which
    contributes nothing to numerator or denominator). Position 0 is never in the mask (nothing predicts it).
    """
    if max_tokens < 1:
        raise ValueError(f"make_sft_batch: max_tokens must be >= 1, got {max_tokens}")
    prompts_B, responses_B, truncated = [], [], 0
    for prompt, response in examples:
        truncated += len(prompt) + len(response) > max_tokens
        kept_prompt = list(prompt)[:max_tokens]
        prompts_B.append(kept_prompt)
        responses_B.append(list(response)[:max_tokens - len(kept_prompt)])
    tokens_B_T, mask_B_T, _, lengths_B = pack_sequences(prompts_B, responses_B, pad_id)
    return SFTBatch(tokens_B_T, mask_B_T, lengths_B, int(truncated))


__all__ = ["SFTBatch", "sft_loss_terms", "make_sft_batch"]
