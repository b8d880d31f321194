"""The local layer spec's core attention on CPU through torch's fused
``scaled_dot_product_attention``, about twice as fast there as Megatron-Core's unfused
``DotProductAttention`` (grouped-query K/V read in place instead of repeated per head and summed
back in the backward, no score matrix kept for it). Packed rows attend block by block
(:func:`packing.attention_blocks`): each segment's queries against its own keys and its shared
prompt's, never the rest of the row. Imported only by :func:`precision.layer_spec`, after the CPU
compat layer.

Precision: torch's CPU kernel has no bf16 fast path (several times slower than in fp32), so a bf16
actor's blocks run in fp32 and are rounded back, and its whole-row attention stays Megatron's (both
measured, docs/performance.md).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from megatron.core.transformer.dot_product_attention import DotProductAttention

from nemo_cascade.algorithms.packing import AttentionBlocks


class FusedAttention(DotProductAttention):
    """Megatron's ``DotProductAttention`` (its constructor: heads per TP rank, softmax scale) with
    the forward of ``F.scaled_dot_product_attention``: the same inputs ``[s, b, heads, dim]`` and
    output ``[s, b, heads · dim]``. ``attention_mask`` is Megatron's (True = blocked: on CPU the
    actor always builds it, causal or per sequence) or, for packed rows, :class:`AttentionBlocks`.
    The options only the unfused path implements are refused, not ignored."""

    def __init__(self, config, *args, **kwargs):
        super().__init__(config, *args, **kwargs)
        assert not (config.attention_dropout or config.apply_query_key_layer_scaling
                    or config.window_size is not None
                    or self.softmax_offset is not None), ("dropout, layer scaling, windows, "
                                                          "offsets: unfused only")

    def forward(self, query, key, value, attention_mask, attn_mask_type=None, attention_bias=None,
                packed_seq_params=None):
        assert attention_bias is None and packed_seq_params is None, "the local spec takes neither"
        if isinstance(attention_mask, AttentionBlocks):
            return attend_by_block(query, key, value, attention_mask, self.softmax_scale)
        if query.dtype != torch.float32:
            return super().forward(query, key, value, attention_mask, attn_mask_type)
        q, k, v = (x.permute(1, 2, 0, 3) for x in (query, key, value))  # [b, heads, s, dim]
        out = F.scaled_dot_product_attention(q, k, v, ~attention_mask, scale=self.softmax_scale,
                                             enable_gqa=True)
        return out.permute(2, 0, 1, 3).reshape(out.shape[2], out.shape[0], -1)


def attend_by_block(query, key, value, blocks: AttentionBlocks, scale: float):
    """``[s, b, heads, dim]`` query and ``[s, b, groups, dim]`` key / value attended block by block,
    in fp32; returns ``[s, b, heads · dim]`` in the query's dtype, zero on padding (in no block)."""
    s, b, heads, dim = query.shape
    # [U, heads, Q, dim]
    q = gather_rows(query.reshape(s * b, heads, dim), blocks.query_index_U_Q).transpose(1, 2)
    k, v = (gather_rows(x.reshape(s * b, -1, dim), blocks.key_index_U_K).transpose(1, 2)
            for x in (key, value))
    q, k, v = q.float(), k.float(), v.float()
    out = F.scaled_dot_product_attention(q, k, v, blocks.allowed_U_1_Q_K, scale=scale,
                                         enable_gqa=True)
    real = blocks.real_UQ.nonzero().squeeze(1)
    out = gather_rows(out.to(query.dtype).transpose(1, 2).reshape(-1, heads * dim), real)
    flat = blocks.query_index_U_Q.reshape(-1)[real]
    return query.new_zeros(s * b, heads * dim).index_copy(0, flat, out).view(s, b, heads * dim)


def gather_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x[index]`` along dim 0 (``index`` of any shape), with a backward that adds the gradients
    of a row gathered more than once (a shared prompt's keys, padding slots) in index order.
    ``x[index]``'s own backward adds them with atomic adds from every thread once the gradient
    has 32,768 elements or more, in whatever order the threads meet: two identical GRPO runs then
    trained different weights, one run in twelve on an idle machine and nearly every run beside
    another job (docs/testing.md). ``index_select``'s backward adds row after row."""
    return x.index_select(0, index.reshape(-1)).view(*index.shape, *x.shape[1:])
