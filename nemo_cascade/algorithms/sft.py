"""SFT math: masked next-token cross-entropy on response tokens, and sequence packing of (prompt, response)
examples.

Alignment convention (the same as :mod:`nemo_cascade.algorithms.grpo`; the actor relies on it)
    ``tokens_B_T`` are the input ids (packed examples, right-padded). The actor returns ``logprobs_B_T``
    with ``logprobs_B_T[b, t] = log p(tokens_B_T[b, t] | tokens_B_T[b, :t])`` for ``t >= 1`` and 0 at
    ``t = 0``. ``loss_mask_B_T[b, t] = 1`` exactly when the token at ``t`` is a (kept) response token, i.e.
    on an example's ``[P, P + R)`` for ``P`` prompt and ``R`` response tokens; the prompt is context only
    (response-only loss is the usual SFT convention; the paper's SFT description, §3.1, does not state it).

Loss normalisation: like GRPO's token-level loss, the function returns ``(numerator_sum, denominator_count)``
for Megatron's ``calculate_per_token_loss=True``, which divides by the count over all microbatches and ranks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

Tensor = torch.Tensor


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


@dataclass
class PackedSFTBatch:
    """Examples packed end to end into rows of at most ``max_tokens`` (sequence packing): no padding compute
    for short examples. Each example keeps its own positions (restarting at 0) and attends only to itself —
    the actor turns ``segment_ids_B_T`` into a block-diagonal causal mask — so a packed row computes exactly
    what the examples would compute in rows of their own."""

    tokens_B_T: Tensor
    """Input ids, int64: example after example, then ``pad_id``."""
    loss_mask_B_T: Tensor
    """float32 1.0 on kept response tokens (the module's alignment convention)."""
    position_ids_B_T: Tensor
    """int64 position of each token within its own example (RoPE positions)."""
    segment_ids_B_T: Tensor
    """int64 1, 2, … numbering the examples of a row; 0 on padding."""
    num_examples: int
    num_truncated: int = 0

    @property
    def num_sequences(self) -> int:
        return int(self.tokens_B_T.shape[0])

    def tensors(self) -> dict[str, Tensor]:
        return {"tokens": self.tokens_B_T, "loss_mask": self.loss_mask_B_T, "position_ids": self.position_ids_B_T,
                "segment_ids": self.segment_ids_B_T}


def pack_sft_batch(examples: Sequence[tuple[Sequence[int], Sequence[int]]], max_tokens: int,
                   pad_id: int) -> PackedSFTBatch:
    """Pack ``(prompt_tokens, response_tokens)`` examples, in order, into rows of ``max_tokens``: an example
    that does not fit the current row's remaining space starts a new row (first fit in order, so a batch packs
    the same way every time). Examples longer than ``max_tokens`` are truncated from the right: the
    response tail goes first, and only a prompt that alone exceeds ``max_tokens`` is cut itself (that example
    then has no trained token).
    ``T`` = the longest row. The loss over a packed batch equals the loss over the same examples unpacked."""
    if max_tokens < 1:
        raise ValueError(f"pack_sft_batch: max_tokens must be >= 1, got {max_tokens}")
    rows: list[list[tuple[list[int], int]]] = []  # per row: (example tokens, prompt length)
    used, truncated = max_tokens, 0
    for prompt, response in examples:
        truncated += len(prompt) + len(response) > max_tokens
        ids = (list(prompt) + list(response))[:max_tokens]
        if used + len(ids) > max_tokens:
            rows.append([])
            used = 0
        rows[-1].append((ids, min(len(prompt), len(ids))))
        used += len(ids)
    T = max((sum(len(ids) for ids, _ in row) for row in rows), default=0)
    tokens = torch.full((len(rows), T), pad_id, dtype=torch.long)
    mask, positions, segments = (torch.zeros((len(rows), T), dtype=dt) for dt in (torch.float32, torch.long, torch.long))
    for b, row in enumerate(rows):
        start = 0
        for k, (ids, P) in enumerate(row, 1):
            end = start + len(ids)
            tokens[b, start:end] = torch.tensor(ids, dtype=torch.long)
            mask[b, start + max(P, 1):end] = 1.0  # an example's first token is never predicted
            positions[b, start:end] = torch.arange(len(ids))
            segments[b, start:end] = k
            start = end
    return PackedSFTBatch(tokens, mask, positions, segments, len(examples), int(truncated))


def segment_causal_mask(segment_ids_B_T: Tensor) -> Tensor:
    """``[B, 1, T, T]`` bool, True where attention is *blocked* (Megatron's convention): query t may see key
    s only when s ≤ t and both belong to the same example (padding, segment 0, sees only padding)."""
    T = segment_ids_B_T.shape[1]
    same = segment_ids_B_T.unsqueeze(2) == segment_ids_B_T.unsqueeze(1)
    causal = torch.ones((T, T), dtype=torch.bool, device=segment_ids_B_T.device).tril()
    return ~(same & causal).unsqueeze(1)


__all__ = ["PackedSFTBatch", "sft_loss_terms", "pack_sft_batch", "segment_causal_mask"]
