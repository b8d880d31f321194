"""The LM head only where the loss reads it: logits at the positions that predict a trained token.

The vocabulary-sized output matmul and its log-softmax are a large share of a training step when the
vocabulary is big against the model (SmolLM2-135M: 49K × 576, about a fifth of the forward's FLOPs)
— and GRPO and SFT losses read log-probs only at response tokens (``loss_mask``), while the LM head
runs over every prompt and padding position too. TRL restricts its logits the same way
(``logits_to_keep``). This module selects, before the output layer, the hidden states of the
positions whose next token is trained, and puts their log-probs back into the ``[B, T]`` layout the
loss functions expect (zeros elsewhere, which masked losses never read).

Where it does not apply the actor keeps the whole-sequence head: sequence parallelism (the head
all-gathers a sequence shard), context parallelism (log-probs are reassembled over ranks) and heads
other than the LM head (the reward model's scores).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Selection:
    """The predicting positions of one microbatch: ``(b, t)`` pairs whose token ``t + 1`` is in the
    loss, and their rows in the output layer's input (flattened ``[S, B, H]``, or ``[B·T, 1, H]``
    for packed ``thd``)."""
    b: torch.Tensor
    t: torch.Tensor
    rows: torch.Tensor


def select(loss_mask_B_T: torch.Tensor, seq_len: int, thd: bool) -> Selection | None:
    """The positions predicting the trained tokens of ``loss_mask_B_T`` (``[B, T]``; position t
    holds the log-prob of token t, predicted at t − 1), for a model input padded to ``seq_len``
    positions per row; None when no token is trained (a microbatch of filler rows: the
    whole-sequence head runs, its loss is all masked)."""
    B = loss_mask_B_T.shape[0]
    b, t = (loss_mask_B_T[:, 1:] > 0).nonzero(as_tuple=True)
    if b.numel() == 0:
        return None
    rows = b * seq_len + t if thd else t * B + b
    return Selection(b, t, rows)


class HeadInput:
    """A forward pre-hook on the output layer: while :attr:`selection` is set, the layer sees only
    the selected positions' hidden states, as a ``[N, 1, H]`` sequence (so GPTModel returns logits
    ``[1, N, V]``)."""

    def __init__(self, output_layer: torch.nn.Module):
        self.selection: Selection | None = None
        output_layer.register_forward_pre_hook(self._select)

    def _select(self, module, args):
        if self.selection is None:
            return None
        hidden = args[0]
        rows = self.selection.rows.to(hidden.device)
        picked = hidden.reshape(-1, hidden.shape[-1]).index_select(0, rows)
        return (picked.unsqueeze(1), *args[1:])


def label_logprobs(logits: torch.Tensor, labels: torch.Tensor, temperature: float) -> torch.Tensor:
    """log softmax(logits / T) at each label, over the vocabulary sharded across TP ranks: the one
    place the actor turns logits into log-probs (the whole sequence, the selected positions of
    :func:`selected_token_logprobs`, a CP rank's share). ``logits`` ``[..., V/tp]``, ``labels``
    ``[...]``.

    The logits are the step's largest tensor. Megatron's cross-entropy works in place (it turns its
    input into the softmax it keeps for backward), so they go in as they are (fp32) or as their one
    fp32 copy (bf16), divided by the temperature in place: no scaled copy. Consumes ``logits``."""
    from megatron.core.tensor_parallel import vocab_parallel_cross_entropy

    logits = logits.float().contiguous()  # no copy for a whole fp32 output
    if temperature != 1.0:
        logits = logits.div_(temperature)
    return -vocab_parallel_cross_entropy(logits, labels.contiguous())


def selected_token_logprobs(logits_1_N_V: torch.Tensor, tokens_B_T: torch.Tensor,
                            selection: Selection, temperature: float) -> torch.Tensor:
    """``[B, T]`` log-probs (fp32) from the selected positions' logits: each next token's, at that
    token's position; 0 elsewhere. Consumes the logits (:func:`label_logprobs`)."""
    b, t = selection.b.to(tokens_B_T.device), selection.t.to(tokens_B_T.device)
    # squeeze, not [0]: a select's backward would zero-fill and copy a gradient as large as the
    # logits, where a squeeze's is a view
    logprobs = label_logprobs(logits_1_N_V.squeeze(0), tokens_B_T[b, t + 1], temperature)
    out = torch.zeros(tokens_B_T.shape, dtype=logprobs.dtype, device=logprobs.device)
    return out.index_put((b, t + 1), logprobs)


def token_logprobs(logits_B_T_V: torch.Tensor, tokens_B_T: torch.Tensor,
                   temperature: float) -> torch.Tensor:
    """``[B, T]`` with position t holding log p(tokens[t] | tokens[:t]) and 0 at t = 0, from the
    whole sequence's logits. Every position is scored against the next token (the last one against a
    wrapped-around label, dropped), so the model's output goes in as it is, with no shifted slice
    (:func:`label_logprobs`). Consumes ``logits_B_T_V``."""
    next_lp = label_logprobs(logits_B_T_V, torch.roll(tokens_B_T, -1, dims=1), temperature)
    return torch.nn.functional.pad(next_lp[:, :-1], (1, 0))


__all__ = ["Selection", "select", "HeadInput", "label_logprobs", "selected_token_logprobs",
           "token_logprobs"]
