"""How the sequences of a batch are laid out for the actor's model, beside the precision plan
(actor/precision.py) that picks the model:

- context parallelism (CP): Megatron's load-balanced split of a sequence into ``2 × cp`` chunks
  (rank r holds chunks r and 2·cp−1−r, as ``megatron.core.utils.get_batch_on_this_cp_rank``), its
  inverse, and :func:`cp_gather`, which reassembles per-position values over the CP group;
- packed rows on TE: the ``thd`` boundaries its attention needs, and the activation shape the
  pipeline schedule sends between stages;
- RoPE at positions for rows whose samples share a prompt (:class:`RopeAtPositions`).
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from nemo_cascade.actor.lm_head import label_logprobs


class RopeAtPositions:
    """Megatron's RoPE rotates by column, which is right for packed rows only because attention is
    relative and a sequence's columns are consecutive; a sample sharing its prompt
    (``GRPO.share_prompts``) sits columns away from it. While ``positions`` ([B, T]) is set, each
    token's rotation is looked up at its own position in the same table (a position never exceeds
    its column), through a forward hook on the rotary module."""

    def __init__(self, rope: torch.nn.Module):
        self.positions: torch.Tensor | None = None
        rope.register_forward_hook(self._at_positions)

    def _at_positions(self, module, args, output):
        if self.positions is None:
            return output
        # YaRN's rotary module also returns its mscale
        emb, rest = (output[0], output[1:]) if isinstance(output, tuple) else (output, None)
        emb = emb[:, 0, 0][self.positions.t()].unsqueeze(2)  # [T, 1, 1, d] → [T, B, 1, d]
        return emb if rest is None else (emb, *rest)


def pad_seq(x: torch.Tensor, length: int, fill: int = 0) -> torch.Tensor:
    """Right-pad dim 1 to ``length``. Causal attention: padding at the end never changes earlier
    positions."""
    if x.shape[1] >= length:
        return x
    return torch.nn.functional.pad(x, (0, length - x.shape[1]), value=fill)


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def cp_split(x: torch.Tensor, cp: int, rank: int, dim: int = 1) -> torch.Tensor:
    """CP rank ``rank``'s part of ``x`` along ``dim``: chunks ``rank`` and ``2·cp−1−rank`` of
    ``2·cp`` equal chunks. Causal attention makes late chunks costlier; pairing an early with a late
    chunk balances the ranks (megatron's ``get_batch_on_this_cp_rank``, which TE's ring attention
    and megatron's RoPE slicing assume)."""
    if cp == 1:
        return x
    chunks = x.chunk(2 * cp, dim=dim)
    return torch.cat([chunks[rank], chunks[2 * cp - 1 - rank]], dim=dim)


def cp_unsplit(parts: list[torch.Tensor], dim: int = 1) -> torch.Tensor:
    """Inverse of :func:`cp_split`: the whole sequence from every CP rank's part, in rank order."""
    cp = len(parts)
    if cp == 1:
        return parts[0]
    chunks: list[torch.Tensor | None] = [None] * (2 * cp)
    for rank, part in enumerate(parts):
        chunks[rank], chunks[2 * cp - 1 - rank] = part.chunk(2, dim=dim)
    return torch.cat(chunks, dim=dim)


class _GatherSequence(torch.autograd.Function):
    """Forward: all-gather the CP parts and reassemble the sequence. Backward: this rank's part of
    the gradient.

    Every CP rank then computes the same whole-sequence loss, so each rank's own positions carry
    exactly the gradient of that loss (no sum over ranks — that would count it cp times)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        ctx.cp, ctx.rank = dist.get_world_size(group), dist.get_rank(group)
        parts = [torch.empty_like(x) for _ in range(ctx.cp)]
        dist.all_gather(parts, x.contiguous(), group=group)
        return cp_unsplit(parts, dim=1)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return cp_split(grad, ctx.cp, ctx.rank, dim=1).contiguous(), None


def cp_gather(x_B_L: torch.Tensor, group) -> torch.Tensor:
    """``[B, T/cp]`` per-position values of this CP rank → ``[B, T]`` in sequence order,
    differentiable."""
    if group is None or dist.get_world_size(group) == 1:
        return x_B_L
    return _GatherSequence.apply(x_B_L, group)


def cp_inputs(tokens_B_T: torch.Tensor, cp: int, rank: int) -> dict:
    """GPTModel inputs of CP rank ``rank`` for whole (padded) rows: its two chunks of tokens and
    positions, and the next-token labels of those positions (``labels[t] = tokens[t+1]``) — a
    chunk's last position predicts a token that lives on another rank, so labels are cut from the
    whole row, not from the chunk."""
    positions = torch.arange(tokens_B_T.shape[1], device=tokens_B_T.device)
    positions = positions.unsqueeze(0).expand_as(tokens_B_T)
    labels = torch.nn.functional.pad(tokens_B_T[:, 1:], (0, 1))
    return dict(input_ids=cp_split(tokens_B_T, cp, rank),
                position_ids=cp_split(positions, cp, rank),
                attention_mask=None, labels=cp_split(labels, cp, rank))


def cp_token_logprobs(logits: torch.Tensor, labels: torch.Tensor, T: int, temperature: float,
                      group) -> torch.Tensor:
    """Per-token log-probs ``[B, T]`` in ``lm_head.token_logprobs``' alignment (position t:
    log p of token t given the tokens before it; 0 at t = 0) from this CP rank's vocab-parallel
    logits ``[B, L, V/tp]``: each local position's log-prob of its label
    (``lm_head.label_logprobs``, consuming ``logits``), reassembled over the CP group
    (:func:`cp_gather`), shifted."""
    next_lp = cp_gather(label_logprobs(logits, labels, temperature), group)
    return torch.nn.functional.pad(next_lp[:, :T - 1], (1, 0))


def thd_inputs(tokens_B_T: torch.Tensor, positions_B_T: torch.Tensor,
               segments_B_T: torch.Tensor) -> dict:
    """GPTModel inputs for packed rows on TE: the rows as one ``[1, B·T]`` sequence with example
    boundaries."""
    from megatron.core.packed_seq_params import PackedSeqParams

    cu, longest = thd_boundaries(segments_B_T)
    packed = PackedSeqParams(qkv_format="thd", cu_seqlens_q=cu, cu_seqlens_kv=cu,
                             max_seqlen_q=longest, max_seqlen_kv=longest)
    return dict(input_ids=tokens_B_T.reshape(1, -1), position_ids=positions_B_T.reshape(1, -1),
                attention_mask=None, packed_seq_params=packed)


def pipeline_shape(seq_len: int, micro_batch_size: int, thd: bool) -> tuple[int, int]:
    """``(seq_length, micro_batch_size)`` for Megatron's pipeline schedule, which sizes the
    activations sent between stages as ``[seq_length, micro_batch_size, hidden]`` (divided by cp,
    and tp with SP). Packed rows on TE (:func:`thd_inputs`) run as one ``[1, B·T]`` sequence, so a
    stage sends ``[B·T, 1, hidden]``: the receiving stage must be told that shape, not ``[T, B,
    hidden]`` — with B > 1 it would hand TE's ``thd`` attention a 4-D tensor. (With PP > 1 every
    microbatch has exactly ``micro_batch_size`` rows.)"""
    return (seq_len * micro_batch_size, 1) if thd else (seq_len, micro_batch_size)


def thd_boundaries(segment_ids_B_T: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Packed rows as TE's ``thd`` layout: the rows laid end to end, each run of equal segment ids
    (an example, or a row's padding) one sequence. Returns ``(cu_seqlens int32 [n+1], max_seqlen)``.

    TE's fused attention only honours an explicit attention mask for 'padding'/'arbitrary' mask
    types; the TE spec is 'causal', so a packed row's block-diagonal mask must be given as sequence
    boundaries instead."""
    B, T = segment_ids_B_T.shape
    flat = segment_ids_B_T.reshape(-1)
    starts = torch.ones_like(flat, dtype=torch.bool)
    starts[1:] = flat[1:] != flat[:-1]
    starts[::T] = True  # a row never continues the previous row's last example
    idx = starts.nonzero().squeeze(1)
    cu = torch.cat([idx, torch.tensor([B * T], device=idx.device)]).to(torch.int32)
    return cu, int((cu[1:] - cu[:-1]).max())


def trimmed(mb: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A microbatch without the columns no row needs: packed rows' padding (``segment_ids`` 0 in
    every row); for rows without segments, the columns after every row's last trained token
    (``loss_mask``): attention is causal, so no earlier column sees them, and the loss reads only
    the trained tokens."""
    needed = mb["segment_ids"] if "segment_ids" in mb else mb["loss_mask"]
    T = needed.shape[1]
    filled = (needed > 0).any(0).nonzero()
    width = int(filled.max()) + 1 if filled.numel() else 1
    return {k: v[:, :width] if v.dim() == 2 and v.shape[1] == T else v for k, v in mb.items()}


def pad_rows(t: torch.Tensor, n: int, fill: int = 0) -> torch.Tensor:
    """Pad to `n` rows. Zero rows have an all-zero loss mask, so they add nothing to sums or
    counts."""
    if t.shape[0] >= n:
        return t
    return torch.cat([t, torch.full((n - t.shape[0], *t.shape[1:]), fill, dtype=t.dtype)])


__all__ = ["RopeAtPositions", "pad_seq", "round_up", "cp_split", "cp_unsplit", "cp_gather",
           "cp_inputs", "cp_token_logprobs", "thd_inputs", "thd_boundaries", "pipeline_shape",
           "trimmed", "pad_rows"]
