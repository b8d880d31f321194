"""Bradley–Terry reward-model math: the pairwise loss on scalar scores, and preference-pair batch
packing.

Paper §4.2: the RM is the policy backbone with a linear head on the last hidden state, trained with
the Bradley–Terry loss on (prompt, chosen, rejected) pairs. With ``r = score of the last token of
prompt + response``,

    P(chosen ≻ rejected) = σ(r_chosen − r_rejected),   loss per pair = −log σ(r_chosen − r_rejected)
                                                                      = softplus(r_rejected −
                                                                      r_chosen).

Batch layout (the actor relies on it): a batch of ``P`` pairs is ``B = 2P`` rows, **interleaved** —
row ``2i`` is pair ``i``'s chosen sequence, row ``2i + 1`` its rejected one — so any contiguous
slice of an even number of rows (a microbatch, a data-parallel share) holds whole pairs.
``last_B[b]`` is the index of row ``b``'s last real token; the scores at padding positions are never
read (causal attention: right padding cannot change the score at an earlier position).
``pair_valid_B`` is 1.0 on real rows and 0.0 on rows the actor pads in to fill a microbatch; a pair
counts when its chosen row is valid.

Loss normalisation: like :mod:`~nemo_cascade.algorithms.sft`, :func:`bt_loss_terms` returns
``(numerator_sum, denominator_count)`` for Megatron's ``calculate_per_token_loss=True``, which
divides by the count over all microbatches and data-parallel ranks: globally, loss = mean over the
batch's pairs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F

Tensor = torch.Tensor


@dataclass
class PairBatch:
    """``P`` preference pairs as ``B = 2P`` interleaved rows, right-padded to ``T ≤ max_tokens``."""

    tokens_B_T: Tensor
    """int64 token ids (prompt + response), then ``pad_id``; rows 2i / 2i+1 = chosen / rejected of
    pair i."""
    last_B: Tensor
    """int64 index of each row's last real token (where the score is read)."""
    pair_valid_B: Tensor
    """float32 1.0 for every real row (the actor pads with 0.0 rows)."""
    num_truncated: int = 0
    """Sequences longer than ``max_tokens`` whose first tokens were cut."""

    @property
    def num_pairs(self) -> int:
        return int(self.tokens_B_T.shape[0]) // 2

    def tensors(self) -> dict[str, Tensor]:
        return {"tokens": self.tokens_B_T, "last": self.last_B, "pair_valid": self.pair_valid_B}


def last_token_scores(scores_B_T: Tensor, last_B: Tensor) -> Tensor:
    """``scores_B_T[b, last_B[b]]`` as float32 ``[B]`` (differentiable)."""
    return scores_B_T.float().gather(1, last_B.long().unsqueeze(1)).squeeze(1)


def bt_loss_terms(scores_B_T: Tensor, last_B: Tensor,
                  pair_valid_B: Tensor) -> tuple[Tensor, Tensor, dict]:
    """Bradley–Terry loss as ``(numerator, denominator, metrics)`` over interleaved rows.

    ``numerator = Σ_{valid pairs i} softplus(r_rej,i − r_cho,i)`` (= −log σ(margin_i), computed
    stably), ``denominator`` = number of valid pairs (int). ``metrics`` are ``[sum, count]`` pairs
    the actor reduces to means: ``accuracy`` (share of pairs with r_chosen > r_rejected; a tie is
    not a win) and ``margin`` (mean r_chosen − r_rejected).
    """
    if scores_B_T.shape[0] % 2:
        raise ValueError("bt_loss_terms: rows must come in (chosen, rejected) pairs, got "
                         f"{scores_B_T.shape[0]} rows")
    r_B = last_token_scores(scores_B_T, last_B)
    margin_P = r_B[0::2] - r_B[1::2]
    valid_P = pair_valid_B[0::2] > 0
    zero = torch.zeros_like(margin_P)
    numerator = torch.where(valid_P, F.softplus(-margin_P), zero).sum()
    count = valid_P.sum()
    margin = margin_P.detach()
    metrics = {"accuracy": torch.stack([torch.where(valid_P, (margin > 0).float(), zero).sum(),
                                        count.float()]),
               "margin": torch.stack([torch.where(valid_P, margin, zero).sum(), count.float()])}
    return numerator, count.to(torch.int), metrics


def pair_accuracy(chosen_P: Sequence[float], rejected_P: Sequence[float]) -> float:
    """Share of pairs whose chosen score is strictly higher (held-out RM accuracy, as RewardBench
    counts it)."""
    if len(chosen_P) != len(rejected_P) or not chosen_P:
        raise ValueError(f"pair_accuracy: need equally many (>0) chosen and rejected scores, got "
                         f"{len(chosen_P)} and {len(rejected_P)}")
    return sum(c > r for c, r in zip(chosen_P, rejected_P)) / len(chosen_P)


def make_pair_batch(pairs: Sequence[tuple[Sequence[int], Sequence[int]]], max_tokens: int,
                    pad_id: int) -> PairBatch:
    """Pack ``(chosen_ids, rejected_ids)`` token sequences (each the whole prompt + response) into a
    :class:`PairBatch`.

    A sequence longer than ``max_tokens`` keeps its **last** ``max_tokens`` tokens: the score is
    read at the final token, which must stay the real end of the response — the same rule the served
    RM's client applies to over-long inputs (``rewards.remote``), so training and serving see the
    same window.
    """
    if max_tokens < 1:
        raise ValueError(f"make_pair_batch: max_tokens must be >= 1, got {max_tokens}")
    rows, truncated = [], 0
    for i, pair in enumerate(pairs):
        for seq in pair:
            if not len(seq):
                raise ValueError(f"make_pair_batch: pair {i} has an empty sequence")
            truncated += len(seq) > max_tokens
            rows.append(list(seq)[-max_tokens:])
    if not rows:
        raise ValueError("make_pair_batch: no pairs")
    width = max(map(len, rows))
    tokens_B_T = torch.full((len(rows), width), pad_id, dtype=torch.long)
    for b, row in enumerate(rows):
        tokens_B_T[b, :len(row)] = torch.tensor(row, dtype=torch.long)
    last_B = torch.tensor([len(r) - 1 for r in rows], dtype=torch.long)
    return PairBatch(tokens_B_T, last_B, torch.ones(len(rows), dtype=torch.float32), int(truncated))


__all__ = ["PairBatch", "bt_loss_terms", "last_token_scores", "pair_accuracy", "make_pair_batch"]
