"""The local layer spec's core attention through torch's fused ``scaled_dot_product_attention``: for fp32 actors
on CPU, where it is about twice as fast as Megatron-Core's unfused ``DotProductAttention`` (grouped-query K/V
read in place instead of repeated per head and summed back in the backward, no score matrix kept for it).
A bf16 actor keeps Megatron's: torch's CPU kernel has no bf16 fast path and runs several times slower there
(both measured, docs/performance.md). Imported only by :func:`precision.layer_spec`, after the CPU compat layer.
"""
from __future__ import annotations

import torch.nn.functional as F
from megatron.core.transformer.dot_product_attention import DotProductAttention


class FusedAttention(DotProductAttention):
    """Megatron's ``DotProductAttention`` (its constructor: heads per TP rank, softmax scale) with the forward of
    ``F.scaled_dot_product_attention``: the same inputs ``[s, b, heads, dim]``, the same mask convention (True =
    blocked: on CPU the actor always builds it, causal or per sequence) and output ``[s, b, heads · dim]``. The
    options only the unfused path implements are refused, not ignored."""

    def __init__(self, config, *args, **kwargs):
        super().__init__(config, *args, **kwargs)
        assert not (config.attention_dropout or config.apply_query_key_layer_scaling or config.window_size is not None
                    or self.softmax_offset is not None), "dropout, layer scaling, windows, offsets: unfused only"

    def forward(self, query, key, value, attention_mask, attn_mask_type=None, attention_bias=None,
                packed_seq_params=None):
        assert attention_bias is None and packed_seq_params is None, "the local spec takes neither"
        q, k, v = (x.permute(1, 2, 0, 3) for x in (query, key, value))  # [b, heads, s, dim]
        out = F.scaled_dot_product_attention(q, k, v, ~attention_mask, scale=self.softmax_scale, enable_gqa=True)
        return out.permute(2, 0, 1, 3).reshape(out.shape[2], out.shape[0], -1)
