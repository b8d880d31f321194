"""Bytes per GPU of the actor and the colocated engine, from a model's shape (the formulas the
package docstring describes); nothing here imports torch."""
from __future__ import annotations

import math

from nemo_cascade import config
from nemo_cascade.convert.shape import ModelShape

GIB = float(1 << 30)
FIXED_BYTES = 2 * GIB
"""Per GPU outside the estimate's tensors: CUDA context, cuBLAS and NCCL workspaces."""
ACTIVATION_MARGIN = 1.05
"""The calibration's allowance for allocator rounding and short-lived temporaries."""
GPUS_PER_NODE = 8


def layer_activation_bytes(shape, seq: float, *, tp: int = 1, sp: bool = False,
                           quadratic: bool = True) -> float:
    """Bytes one decoder layer saves for backward, per row of ``seq`` tokens (bf16 actor, no
    recompute).

    ``6·heads·S²`` (the local spec's unfused attention: fp32 softmax output and bf16 probabilities;
    0 with ``quadratic=False``: TE's fused attention or selective recompute) + ``S·(10·ffn +
    16·heads·hd + 8·kv·hd)`` (split over TP) + ``S·20·h`` (norm and residual tensors: split over TP
    only with sequence parallelism). Measured on the CPU build with saved-tensor hooks (bf16 actor,
    S = 256 / 512 / 1024, each dimension varied); the norms then ran unfused in fp32 (hence 20·h) —
    an upper bound for TE's fused norms."""
    h = shape.hidden_size
    hq, kvq = shape.num_attention_heads * shape.head_dim, shape.num_key_value_heads * shape.head_dim
    out = (seq * (10 * shape.ffn_hidden_size + 16 * hq + 8 * kvq) / tp
           + seq * 20 * h / (tp if sp else 1))
    if quadratic:
        out += 6 * (shape.num_attention_heads / tp) * seq * seq
    return out


def head_activation_bytes(shape, seq: float, *, tp: int = 1, vocab: int | None = None) -> float:
    """Per row at the LM head: ``16·S·V/TP`` (vocab-parallel logits, their fp32 copy, the saved
    softmax and the gradients alive at the start of backward) + ``10·S·h``. ``vocab=1``: a reward
    model's score head."""
    V = shape.vocab_size if vocab is None else vocab
    return 16 * seq * V / tp + 10 * seq * shape.hidden_size


def estimate_bytes(shape, layers: int, micro_batch: int, seq_len: int) -> dict[str, float]:
    """Peak GPU memory of a bf16 train step of one actor on one GPU (local spec, no parallelism, no
    recompute), by parts, in bytes — bench/gpu_step.py's plan for how many layers fit.

    state: 18 B/param = bf16 param 2 + fp32 grad buffer 4 (grad_reduce_in_fp32) + fp32 master 4 +
    Adam m, v 8. activations: :func:`layer_activation_bytes` per layer and row,
    :func:`head_activation_bytes` per row at the head, × 1.05. The optimizer step adds a 4 B/param
    temporary (torch's foreach AdamW: sqrt(v)) after the activations are gone. ``shape``: anything
    with ``ModelShape``'s dimension fields and ``params(layers)``.
    """
    P = shape.params(layers)
    S = seq_len
    act = ACTIVATION_MARGIN * micro_batch * (layers * layer_activation_bytes(shape, S)
                                             + head_activation_bytes(shape, S))
    state = 18 * P
    # cuBLAS/NCCL workspaces, Megatron's baddbmm buffer
    fixed = FIXED_BYTES + 2 * shape.num_attention_heads * S * S * micro_batch
    return {"params": P, "state": state, "activations": act,
            "total": max(state + act, state + 4 * P) + fixed}


def rank_params(shape: ModelShape, tp: int, pp: int, rank: int, lm_head: bool = True) -> float:
    """Parameters held by a GPU of pipeline rank ``rank``: its layers' share of TP, the embedding
    (first rank), the final norm and the head (last rank; a tied head is a copy there when pp >
    1)."""
    split, rep = shape.layer_params()
    n = shape.num_layers // pp * (split / tp + rep)
    embedding = shape.vocab_size * shape.hidden_size / tp
    if rank == 0:
        n += embedding
    if rank == pp - 1:
        n += shape.hidden_size
        if not lm_head:
            n += shape.hidden_size
        elif not shape.tied_embeddings or pp > 1:
            n += embedding
    return n


def actor_bytes(shape: ModelShape, p: config.Parallel, *, seq: int, rows_per_step: int, rank: int,
                te: bool, dtype_bytes: int,
                lm_head: bool = True) -> dict[str, float]:
    """One actor's memory on a GPU of pipeline rank ``rank`` during a train step, by parts
    (bytes)."""
    P = rank_params(shape, p.tp, p.pp, rank, lm_head)
    shard = p.dp * p.cp if p.distributed_optimizer else 1
    # fp32 master + Adam m, v (fp32 params are their own master)
    optimizer = 12 if dtype_bytes == 2 else 8
    state = P * (dtype_bytes + 4) + P * optimizer / shard
    S = math.ceil(seq / p.cp)
    mb = p.micro_batch_size
    micro = math.ceil(rows_per_step / (p.dp * mb))
    # 1F1B: rank r runs pp − r forwards ahead of its first backward
    in_flight = min(p.pp - rank, micro)
    L = shape.num_layers // p.pp
    quadratic = not te and p.recompute != "selective"
    scale = dtype_bytes / 2  # the coefficients are bf16's
    per_layer = scale * layer_activation_bytes(shape, S, tp=p.tp, sp=p.sequence_parallel,
                                               quadratic=quadratic)
    # each layer keeps its input; one layer's activations exist while it is recomputed
    if p.recompute == "full":
        shards = p.tp if p.sequence_parallel else 1
        layers = in_flight * L * mb * dtype_bytes * S * shape.hidden_size / shards
        layers += mb * per_layer
    else:
        layers = in_flight * L * mb * per_layer
    head = 0.0
    if rank == p.pp - 1:
        head = mb * head_activation_bytes(shape, S, tp=p.tp, vocab=None if lm_head else 1)
    act = ACTIVATION_MARGIN * (layers + head)
    # + the local spec's baddbmm buffer
    fixed = FIXED_BYTES + (0 if te else 2 * (shape.num_attention_heads / p.tp) * S * S * mb)
    return {"params": P, "state": state, "activations": act, "optimizer_temp": 4 * P / shard,
            "fixed": fixed,
            "train": state + max(act, 4 * P / shard) + fixed}


def engine_bytes(shape: ModelShape, utilization: float, gpu: float, dtype_bytes: int,
                 tp: int = 1) -> dict[str, float]:
    """The colocated engine's share on one GPU: 1/tp of the weights, and the KV cache its budget
    leaves, in tokens of the whole engine (each GPU holds max(1, kv_heads / tp) of a token's KV
    heads)."""
    weights = shape.params() * dtype_bytes / tp
    kv = max(utilization * gpu - weights, 0.0)
    kv_heads_here = max(1, shape.num_key_value_heads // tp)
    per_token = shape.kv_bytes_per_token(dtype_bytes) * kv_heads_here / shape.num_key_value_heads
    return {"budget": utilization * gpu, "weights": weights, "kv": kv,
            "kv_tokens": int(kv // per_token),
            "kv_per_token": per_token}



__all__ = ["GIB", "FIXED_BYTES", "ACTIVATION_MARGIN", "GPUS_PER_NODE", "layer_activation_bytes",
           "head_activation_bytes", "estimate_bytes", "rank_params", "actor_bytes", "engine_bytes"]
