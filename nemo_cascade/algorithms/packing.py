"""Sequence packing, one module for every stage that packs: which sequences share a row
(:func:`pack_rows`), how a row is laid out (:func:`pack_sequences`), SFT's truncate-and-pack
(:func:`pack_sft_batch`) and the attention mask the actor builds from a packed row
(:func:`segment_causal_mask`).

A packed row holds several sequences end to end, then padding. Each keeps its own positions
(restarting at 0) and attends only to itself (``segment_ids_B_T``: 1, 2, … per sequence of a row, 0
on padding), so a row computes exactly what its sequences would compute in rows of their own,
without the padding.

Alignment convention (the one of :mod:`.grpo` and :mod:`.sft`; the actor relies on it)
    ``logprobs_B_T[b, t] = log p(tokens_B_T[b, t] | tokens_B_T[b, :t])``; ``loss_mask_B_T`` is 1
    exactly on a sequence's response tokens ``[start + P, start + P + R)`` for ``P`` prompt and
    ``R`` response tokens, except a sequence's first token, which has no context and is never
    predicted.

GRPO packs first-fit decreasing (the tightest rows for a batch it lays out at once; a group of
samples sharing their prompt may be split over rows' tails, :func:`fill_rows`); SFT packs in
the order of its examples, each row closed once the next example does not fit — :func:`pack_rows`
does both. A GRPO group's samples may share one copy of their prompt in a row
(:func:`share_prompts`): each then continues the prompt's positions and attends to it as well as to
itself.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch

Tensor = torch.Tensor


def pack_rows(lengths_S: Sequence[int], budget: int, in_order: bool = False) -> list[list[int]]:
    """Sequence indices grouped into rows of at most ``budget`` tokens; a sequence longer than
    ``budget`` gets a row of its own.

    Default, first-fit decreasing (:func:`fill_rows`, a unit a sequence): longest first, each into
    the first row with room. FFD leaves little of a row empty when the sequences are short against
    the budget; with ``budget`` = the longest sequence, no row is longer than an unpadded batch's,
    so a microbatch costs no more memory than without packing.
    ``in_order``: the sequences in their order, each into the last row if it has room, else into a
    new row (next fit: rows hold consecutive sequences).
    """
    if not in_order:
        return [[s for (s,) in row] for row in fill_rows(
            [(s,) for s in range(len(lengths_S))], lambda unit: lengths_S[unit[0]], budget)]
    rows: list[list[int]] = []
    free: list[int] = []
    for s, n in enumerate(lengths_S):
        if not rows or free[-1] < n:
            rows.append([])
            free.append(budget)
        rows[-1].append(s)
        free[-1] -= n
    return rows


def pad_share(lengths_S: Sequence[int], rows: int, width: int) -> float:
    """Share of the ``rows × width`` positions the actor computes that are padding (0 for an empty
    batch)."""
    return 1.0 - sum(lengths_S) / (rows * width) if rows * width else 0.0


def share_prompts(prompts_S: Sequence[Sequence[int]], responses_S: Sequence[Sequence[int]],
                  budget: int) -> tuple[list, list[int]]:
    """Consecutive sequences with the same prompt (a GRPO group's samples) combined into units that
    share one copy of it, each unit within ``budget`` tokens where it holds more than one sequence;
    returns the units (tuples of sequence indices) and their lengths, for :func:`pack_rows` and
    :func:`pack_sequences`.

    A unit of k samples lays its prompt out once but its last token (positions 0 … P−2), then per
    sample that last token and the response (positions P−1 …), which attends to the shared part and
    to itself (:func:`segment_causal_mask`): P − 1 + Σ(R + 1) tokens instead of Σ(P + R), each
    sample's values the same. A one-token prompt has nothing to share; a ``budget`` of 0 shares
    none."""
    units: list[tuple[int, ...]] = []
    lengths: list[int] = []
    for s, (prompt, response) in enumerate(zip(prompts_S, responses_S)):
        fits = units and lengths[-1] + len(response) < budget
        if fits and len(prompt) > 1 and list(prompt) == list(prompts_S[s - 1]):
            units[-1], lengths[-1] = (*units[-1], s), lengths[-1] + len(response) + 1
        else:
            units.append((s,))
            lengths.append(len(prompt) + len(response))
    return units, lengths


def pack_rows_of(prompts_S: Sequence[Sequence[int]], responses_S: Sequence[Sequence[int]],
                 pack_tokens: int,
                 share: bool) -> list[list]:
    """GRPO's rows for :func:`pack_sequences`: first-fit decreasing into rows of ``max(pack_tokens,
    longest sequence)`` tokens; with ``share``, of units sharing their prompt
    (:func:`share_prompts`; ``pack_tokens`` 0: a whole group each, rows as long as the longest),
    split over rows' tails where it would otherwise open a row (:func:`fill_rows`)."""
    budget = max([pack_tokens, *(len(p) + len(r) for p, r in zip(prompts_S, responses_S))])
    share_budget = (budget if pack_tokens else sys.maxsize) if share else 0
    units, lengths = share_prompts(prompts_S, responses_S, share_budget)

    def length(unit) -> int:  # the prompt but its last token once, then each sample's own part
        return len(prompts_S[unit[0]]) - 1 + sum(len(responses_S[s]) + 1 for s in unit)

    return fill_rows(units, length, max([budget, *lengths]))


def fill_rows(units: Sequence[tuple[int, ...]], length: Callable[[tuple[int, ...]], int],
              width: int) -> list[list[tuple[int, ...]]]:
    """Units into rows of ``width`` tokens, first-fit decreasing by ``length(unit)``: longest
    first, each into the first row with room (ties keep their order, so a batch packs the same way
    every time); a unit longer than ``width`` gets a row of its own. A unit of several samples
    sharing a prompt (:func:`share_prompts`) that fits no open row whole, but whose samples all fit
    in the open rows' free tails, is split over them (each part lays the prompt out again) instead
    of opening a row: a prompt copy in positions that were padding, where a new row would cost
    ``width`` positions, so a batch of whole groups of uneven length no longer pads about a row per
    group to the longest. A one-sequence unit is never split."""
    rows: list[list[tuple[int, ...]]] = []
    free: list[int] = []
    for unit in sorted(units, key=lambda u: -length(u)):
        need = length(unit)
        row = next((r for r, room in enumerate(free) if room >= need), None)
        parts = ([(row, unit)] if row is not None
                 else _spread(unit, free, length) if len(unit) > 1 else None)
        if parts is None:
            rows.append([])
            free.append(width)
            parts = [(len(rows) - 1, unit)]
        for r, part in parts:
            rows[r].append(part)
            free[r] -= length(part)
    return rows


def _spread(unit: tuple[int, ...], free: Sequence[int], length) -> list | None:
    """``unit``'s samples over rows with ``free`` tokens, the roomiest first, each taking those that
    fit (in order): ``[(row, part), ...]``, or None when some sample fits nowhere."""
    parts, rest = [], unit
    for r in sorted(range(len(free)), key=lambda r: -free[r]):
        part: tuple[int, ...] = ()
        for s in rest:
            if length((*part, s)) <= free[r]:
                part = (*part, s)
        if part:
            parts.append((r, part))
            rest = tuple(s for s in rest if s not in part)
        if not rest:
            return parts
    return None


def pack_sequences(prompts_S: Sequence[Sequence[int]], responses_S: Sequence[Sequence[int]],
                   pad_id: int,
                   response_values_S: Optional[Sequence[Sequence[float]]] = None,
                   rows: Optional[Sequence[Sequence]] = None) -> dict[str, Tensor]:
    """Lay (prompt, response) token lists out in rows with the module's alignment.

    ``rows`` lists the units of each row (:func:`pack_rows`): a sequence index, or a tuple of
    indices whose sequences share one copy of their prompt (:func:`share_prompts`); by default each
    sequence is a row of its own. Returns int64 ``tokens_B_T``, ``position_ids_B_T`` (restarting at
    0 per sequence), ``segment_ids_B_T`` (1, 2, … per sequence — and per shared prompt — of a row; 0
    on padding), ``prefix_ids_B_T`` (on a sample that shares its prompt, the segment id of that
    prompt; 0 elsewhere), ``lengths_S`` (P + R), float32 ``loss_mask_B_T`` (1 on a sequence's
    response tokens; a sequence's first token is never predicted) and ``values_B_T``
    (``response_values_S[s][i]`` at response token ``i``, 0 elsewhere), and int64 ``row_S`` /
    ``start_S`` / ``span_S``: where each sequence's own segment went. ``T`` = the longest row (0 if
    there are none).
    """
    lengths = [len(p) + len(r) for p, r in zip(prompts_S, responses_S)]
    rows = [[u if isinstance(u, tuple) else (u,) for u in row]
            for row in (rows or [[s] for s in range(len(lengths))])]
    B = len(rows)
    T = max((sum(len(prompts_S[u[0]]) - 1 + sum(len(responses_S[s]) + 1 for s in u) for u in row)
             for row in rows), default=0)
    out = {"tokens_B_T": torch.full((B, T), pad_id, dtype=torch.long)}
    out.update({k: torch.zeros((B, T), dtype=torch.long)
                for k in ("position_ids_B_T", "segment_ids_B_T", "prefix_ids_B_T")})
    out.update({k: torch.zeros((B, T), dtype=torch.float32)
                for k in ("loss_mask_B_T", "values_B_T")})
    where = {k: [0] * len(lengths) for k in ("row_S", "start_S", "span_S")}
    for b, row in enumerate(rows):
        start = segment = 0
        for unit in row:
            prompt, prefix = list(prompts_S[unit[0]]), 0
            if len(unit) > 1:  # the shared part, once: the prompt but its last token
                segment, prefix, end = segment + 1, segment + 1, start + len(prompt) - 1
                out["tokens_B_T"][b, start:end] = torch.tensor(prompt[:-1], dtype=torch.long)
                out["position_ids_B_T"][b, start:end] = torch.arange(end - start)
                out["segment_ids_B_T"][b, start:end] = segment
                start, prompt = end, prompt[-1:]
            for s in unit:
                P, first = len(prompt), len(prompts_S[s]) - len(prompt)
                end = start + P + len(responses_S[s])
                segment += 1
                out["tokens_B_T"][b, start:end] = torch.tensor(prompt + list(responses_S[s]),
                                                               dtype=torch.long)
                out["position_ids_B_T"][b, start:end] = torch.arange(first, first + end - start)
                out["segment_ids_B_T"][b, start:end] = segment
                out["prefix_ids_B_T"][b, start:end] = prefix
                out["loss_mask_B_T"][b, start + max(P, 1):end] = 1.0
                if response_values_S is not None and end > start + P:
                    out["values_B_T"][b, start + P:end] = torch.tensor(response_values_S[s],
                                                                       dtype=torch.float32)
                where["row_S"][s], where["start_S"][s], where["span_S"][s] = b, start, end - start
                start = end
    out.update(lengths_S=torch.tensor(lengths, dtype=torch.long),
               **{k: torch.tensor(v, dtype=torch.long) for k, v in where.items()})
    return out


@dataclass
class PackedSFTBatch:
    """SFT examples packed end to end into rows of at most ``max_tokens`` (:func:`pack_sft_batch`):
    no padding compute for short examples; the actor turns ``segment_ids_B_T`` into a block-diagonal
    causal mask."""

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
        return {"tokens": self.tokens_B_T, "loss_mask": self.loss_mask_B_T,
                "position_ids": self.position_ids_B_T,
                "segment_ids": self.segment_ids_B_T}


def pack_sft_batch(examples: Sequence[Sequence[Sequence[int]]], max_tokens: int,
                   pad_id: int) -> PackedSFTBatch:
    """Pack examples, in order, into rows of ``max_tokens``: an example that does not fit the
    current row's remaining space starts a new row (``pack_rows(..., in_order=True)``, so a batch
    packs the same way every time). An example is its token segments, context and learned
    alternating: ``(prompt, response)``, or ``(prompt, answer 1, context, answer 2, ...)`` for a
    conversation whose every assistant turn is learned (the context segments carry no loss).
    Examples longer than ``max_tokens`` are truncated from the right: the last segments' tail goes
    first, and only a prompt that alone exceeds ``max_tokens`` is cut itself (that example then has
    no trained token). ``T`` = the longest row. The loss over a packed batch equals the loss over
    the same examples unpacked."""
    if max_tokens < 1:
        raise ValueError(f"pack_sft_batch: max_tokens must be >= 1, got {max_tokens}")
    kept = [[t for segment in example for t in segment][:max_tokens] for example in examples]
    prompt_lengths = [min(len(example[0]), len(ids)) for example, ids in zip(examples, kept)]
    truncated = sum(sum(map(len, example)) > max_tokens for example in examples)
    rows = pack_rows([len(ids) for ids in kept], max_tokens, in_order=True)
    laid = pack_sequences([ids[:P] for ids, P in zip(kept, prompt_lengths)],
                          [ids[P:] for ids, P in zip(kept, prompt_lengths)], pad_id, rows=rows)
    for s, example in enumerate(examples):  # later context segments: seen, not learned
        row, start, begin = int(laid["row_S"][s]), int(laid["start_S"][s]), 0
        for j, segment in enumerate(example):
            if j % 2 == 0 and j > 0:
                end = min(begin + len(segment), len(kept[s]))
                laid["loss_mask_B_T"][row, start + begin:start + end] = 0.0
            begin += len(segment)
    return PackedSFTBatch(laid["tokens_B_T"], laid["loss_mask_B_T"], laid["position_ids_B_T"],
                          laid["segment_ids_B_T"], len(examples), int(truncated))


def segment_causal_mask(segment_ids_B_T: Tensor, prefix_ids_B_T: Optional[Tensor] = None) -> Tensor:
    """``[B, 1, T, T]`` bool, True where attention is *blocked* (Megatron's convention): query t may
    see key s only when s ≤ t and both belong to the same example (padding, segment 0, sees only
    padding) — or s is in the shared prompt t's sample continues (``prefix_ids_B_T``,
    :func:`share_prompts`)."""
    T = segment_ids_B_T.shape[1]
    same = segment_ids_B_T.unsqueeze(2) == segment_ids_B_T.unsqueeze(1)
    if prefix_ids_B_T is not None:
        prefix_B_T_1 = prefix_ids_B_T.unsqueeze(2)
        same |= (prefix_B_T_1 == segment_ids_B_T.unsqueeze(1)) & (prefix_B_T_1 > 0)
    causal = torch.ones((T, T), dtype=torch.bool, device=segment_ids_B_T.device).tril()
    return ~(same & causal).unsqueeze(1)


@dataclass
class AttentionBlocks:
    """The attention of packed rows as one small dense block per segment instead of a ``[T, T]``
    mask per row, of which a row of many sequences computes mostly blocked cells. Tokens are
    numbered ``t · B + b`` (Megatron's ``[s, b, ...]`` activations flattened); block ``u`` holds its
    segment's queries in order and, as keys, the shared prompt it continues (if any) followed by the
    segment itself."""

    query_index_U_Q: Tensor
    """The block's i-th query token (0 past the segment's end: computed, never written back)."""
    key_index_U_K: Tensor
    """The block's j-th key token (0 past its keys: always blocked)."""
    allowed_U_1_Q_K: Tensor
    """True where query i may attend to key j (``F.scaled_dot_product_attention``'s convention); a
    position past the segment's end attends to key 0 only, so no softmax row is empty."""
    real_UQ: Tensor
    """Which of the flattened ``[U · Q]`` query slots are real tokens (those written back)."""


def attention_blocks(segment_ids_B_T: Tensor,
                     prefix_ids_B_T: Optional[Tensor] = None) -> AttentionBlocks:
    """:class:`AttentionBlocks` for the rows :func:`segment_causal_mask` describes, with the same
    attention: a segment's token attends causally to its segment and to all of the shared prompt it
    continues; padding (segment 0) is in no block. Relies on :func:`pack_sequences`' layout:
    segments contiguous, numbered in column order, a shared prompt before the samples that continue
    it."""
    (B, T), S = segment_ids_B_T.shape, int(segment_ids_B_T.max()) + 1
    real = segment_ids_B_T > 0
    row_segment_N = (torch.arange(B).unsqueeze(1) * S + segment_ids_B_T)[real]  # (row, segment)
    keys_U, block_N, n_U = torch.unique_consecutive(row_segment_N, return_inverse=True,
                                                    return_counts=True)
    # a block's tokens are consecutive
    slot_N = torch.arange(len(block_N)) - (n_U.cumsum(0) - n_U)[block_N]
    Q = int(n_U.max())
    # + an unused column, 0, for the gathers
    query_U_Q = torch.zeros((len(n_U), Q + 1), dtype=torch.long)
    query_U_Q[block_N, slot_N] = (torch.arange(T) * B + torch.arange(B).unsqueeze(1))[real]
    prefix_U = torch.zeros_like(n_U)
    if prefix_ids_B_T is not None:
        prefix_U[block_N] = prefix_ids_B_T[real]
    prompt_U = torch.where(prefix_U > 0, torch.searchsorted(keys_U, keys_U - keys_U % S + prefix_U),
                           0)
    # keys from the shared prompt, then the block's own
    m_U = torch.where(prefix_U > 0, n_U[prompt_U], 0)
    j, m, n = torch.arange(int((m_U + n_U).max())), m_U.unsqueeze(1), n_U.unsqueeze(1)
    key_U_K = torch.where(j < m, query_U_Q[prompt_U.unsqueeze(1), j.clamp(max=Q)], query_U_Q.gather(
        1, (j - m).clamp(0, Q)))
    i, j, m, n = torch.arange(Q).view(1, Q, 1), j.view(1, 1, -1), m.unsqueeze(2), n.unsqueeze(2)
    allowed = (i < n) & ((j < m) | (j - m <= i)) | (i >= n) & (j == 0)
    return AttentionBlocks(query_U_Q[:, :Q], key_U_K, allowed.unsqueeze(1),
                           (torch.arange(Q) < n).reshape(-1))


BLOCK_CELLS_AT_MOST = 0.5
"""Packed rows attend by block where the blocks compute at most this share of the mask's score
cells: at 1 (a sequence per row) the gathers cost 3-8 %, at 0.2 (a group sharing its prompt) blocks
save 11-14 % of the tiny model's train step on CPU (docs/performance.md)."""


def packed_attention(segment_ids_B_T: Tensor, prefix_ids_B_T: Optional[Tensor] = None, *,
                     by_block: bool = False) -> Tensor | AttentionBlocks:
    """What the actor's core attention gets for packed rows: :func:`attention_blocks` where
    ``by_block`` (its attention takes them: torch's fused one on CPU) and they compute at most
    :data:`BLOCK_CELLS_AT_MOST` of the mask's score cells, else :func:`segment_causal_mask`."""
    B, T = segment_ids_B_T.shape
    if by_block and segment_ids_B_T.any():  # (a DP rank's filler rows hold no sequence)
        blocks = attention_blocks(segment_ids_B_T, prefix_ids_B_T)
        if blocks.allowed_U_1_Q_K.numel() <= BLOCK_CELLS_AT_MOST * B * T * T:
            return blocks
    return segment_causal_mask(segment_ids_B_T, prefix_ids_B_T)


__all__ = ["pack_rows", "pad_share", "share_prompts", "pack_rows_of", "fill_rows", "pack_sequences",
           "PackedSFTBatch",
           "pack_sft_batch", "segment_causal_mask", "AttentionBlocks", "attention_blocks",
           "packed_attention", "BLOCK_CELLS_AT_MOST"]
