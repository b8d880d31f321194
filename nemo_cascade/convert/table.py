"""The HF ⇄ Megatron name table: one declarative list of rules plus a few named reshapes.

It is shared by everything that moves weights between the two worlds — loading HF checkpoints into the
actor, weight sync into vLLM, HF export and the conversion tool — so a naming bug cannot hide in one path.

A rule maps one Megatron parameter (full, TP=1 layout, *global* layer index) to one or more HF tensors:

    Rule(megatron="decoder.layers.{i}.self_attention.linear_qkv.weight",
         hf=("model.layers.{i}.self_attn.q_proj.weight", "…k_proj…", "…v_proj…"),
         reshape="qkv", tp="column")

``reshape`` names a function pair (merge HF parts → Megatron tensor, split it back); ``tp`` says how the
full tensor is cut over tensor-parallel ranks: ``column`` (dim 0), ``row`` (dim 1), ``vocab`` (dim 0 of the
embedding / output layer), ``glu`` (dim 0 of gate and of up separately, since each rank holds
``[gate_r; up_r]``) or ``replicated``.

Pure torch: no megatron import, so the table is unit-testable anywhere.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import torch


@dataclass(frozen=True)
class Rule:
    megatron: str
    hf: tuple[str, ...]
    tp: str = "replicated"
    reshape: str = "identity"
    per_layer: bool = True


@dataclass(frozen=True)
class Geometry:
    """The shapes a reshape needs: taken from the HF config."""

    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int


# ---------------------------------------------------------------------------------------- reshapes
# QKV: Megatron stores q, k, v interleaved per KV group — for each of the G groups, its (H/G) query heads,
# then its key head, then its value head — so that a contiguous dim-0 slice holds whole groups and
# tensor parallelism splits by group (docs/install.md). The same reshape serves the fused weight [(H+2G)·d, hidden]
# and the fused bias [(H+2G)·d] (Qwen2): dim 0 is interleaved, trailing dims ride along.

def _merge_qkv(parts: list[torch.Tensor], g: Geometry) -> torch.Tensor:
    q, k, v = parts
    groups, d, rest = g.num_key_value_heads, g.head_dim, tuple(q.shape[1:])
    per_group = g.num_attention_heads // groups
    return torch.cat(
        [q.reshape(groups, per_group * d, *rest), k.reshape(groups, d, *rest), v.reshape(groups, d, *rest)], dim=1
    ).reshape(-1, *rest)


def _split_qkv(t: torch.Tensor, g: Geometry) -> list[torch.Tensor]:
    groups, d, rest = g.num_key_value_heads, g.head_dim, tuple(t.shape[1:])
    per_group = g.num_attention_heads // groups
    t = t.reshape(groups, (per_group + 2) * d, *rest)
    q, k, v = torch.split(t, [per_group * d, d, d], dim=1)
    return [q.reshape(-1, *rest), k.reshape(-1, *rest), v.reshape(-1, *rest)]


def _merge_glu(parts: list[torch.Tensor], g: Geometry) -> torch.Tensor:
    gate, up = parts
    return torch.cat([gate, up], dim=0)


def _split_glu(t: torch.Tensor, g: Geometry) -> list[torch.Tensor]:
    gate, up = torch.chunk(t, 2, dim=0)
    return [gate, up]


RESHAPES: dict[str, tuple[Callable, Callable]] = {
    "identity": (lambda parts, g: parts[0], lambda t, g: [t]),
    "qkv": (_merge_qkv, _split_qkv),
    "glu": (_merge_glu, _split_glu),
}


# ---------------------------------------------------------------------------------------- tables
# Dense decoder-only models with RMSNorm, SwiGLU and RoPE. Qwen3 adds per-head q/k RMSNorm, Qwen2 biases on the
# q/k/v projections (convert.arch.ARCHS).
# Names are for Megatron's local (non-TE) layer spec; TE fuses the pre-attention / pre-MLP norms into the
# following linear layer, which `rules_for(te=True)` renames (_TE_RENAMES).

_DENSE = (
    Rule("embedding.word_embeddings.weight", ("model.embed_tokens.weight",), tp="vocab", per_layer=False),
    Rule("decoder.final_layernorm.weight", ("model.norm.weight",), per_layer=False),
    Rule("output_layer.weight", ("lm_head.weight",), tp="vocab", per_layer=False),
    Rule("decoder.layers.{i}.input_layernorm.weight", ("model.layers.{i}.input_layernorm.weight",)),
    Rule(
        "decoder.layers.{i}.self_attention.linear_qkv.weight",
        ("model.layers.{i}.self_attn.q_proj.weight", "model.layers.{i}.self_attn.k_proj.weight",
         "model.layers.{i}.self_attn.v_proj.weight"),
        tp="column", reshape="qkv",
    ),
    Rule("decoder.layers.{i}.self_attention.linear_proj.weight", ("model.layers.{i}.self_attn.o_proj.weight",),
         tp="row"),
    Rule("decoder.layers.{i}.pre_mlp_layernorm.weight", ("model.layers.{i}.post_attention_layernorm.weight",)),
    Rule(
        "decoder.layers.{i}.mlp.linear_fc1.weight",
        ("model.layers.{i}.mlp.gate_proj.weight", "model.layers.{i}.mlp.up_proj.weight"),
        tp="glu", reshape="glu",
    ),
    Rule("decoder.layers.{i}.mlp.linear_fc2.weight", ("model.layers.{i}.mlp.down_proj.weight",), tp="row"),
)

_QK_NORM = (
    Rule("decoder.layers.{i}.self_attention.q_layernorm.weight", ("model.layers.{i}.self_attn.q_norm.weight",)),
    Rule("decoder.layers.{i}.self_attention.k_layernorm.weight", ("model.layers.{i}.self_attn.k_norm.weight",)),
)

_QKV_BIAS = Rule(
    # Megatron's linear_qkv carries one fused bias (TransformerConfig.add_qkv_bias); interleaved per KV group
    # exactly like the fused weight, so a TP rank's column slice of the bias matches its rows of the weight.
    "decoder.layers.{i}.self_attention.linear_qkv.bias",
    ("model.layers.{i}.self_attn.q_proj.bias", "model.layers.{i}.self_attn.k_proj.bias",
     "model.layers.{i}.self_attn.v_proj.bias"),
    tp="column", reshape="qkv",
)


def _with_qkv_bias(rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    """``rules`` with the bias right after the fused QKV weight: weight sync streams a layer's q/k/v weights and
    biases together (vLLM finalises its fused qkv_proj once every part of it has arrived)."""
    return tuple(x for r in rules for x in ((r, _QKV_BIAS) if r.megatron.endswith("linear_qkv.weight") else (r,)))


TABLES: dict[str, tuple[Rule, ...]] = {
    "llama": _DENSE,
    "qwen3": _DENSE + _QK_NORM,
    "qwen2": _with_qkv_bias(_DENSE),
}

_TE_RENAMES = {
    "decoder.layers.{i}.input_layernorm.weight": "decoder.layers.{i}.self_attention.linear_qkv.layer_norm_weight",
    "decoder.layers.{i}.pre_mlp_layernorm.weight": "decoder.layers.{i}.mlp.linear_fc1.layer_norm_weight",
}


SCORE_HEAD = Rule("output_layer.weight", ("score.weight",), per_layer=False)
"""The reward model's head (paper §4.2: a linear head on the last hidden state) in place of the LM head:
Megatron holds it as ``output_layer.weight`` of shape [1, hidden], replicated over TP ranks; HF's
``*ForSequenceClassification`` (num_labels=1) calls it ``score.weight``."""

HEADS = ("lm", "score")


def rules_for(arch: str, tied_embeddings: bool, te: bool = False, head: str = "lm") -> tuple[Rule, ...]:
    """The rules of one architecture. Tied embeddings have no separate ``lm_head``/``output_layer``.
    ``head="score"``: the reward model's backbone plus :data:`SCORE_HEAD` instead of any LM head."""
    if arch not in TABLES:
        raise ValueError(f"architecture {arch!r} has no conversion table; known: {sorted(TABLES)}")
    if head not in HEADS:
        raise ValueError(f"head {head!r}: expected one of {list(HEADS)}")
    rules = []
    for r in TABLES[arch]:
        if r.megatron != "output_layer.weight":
            rules.append(r)
        elif head == "score":  # the RM never has an LM head, tied or not
            rules.append(SCORE_HEAD)
        elif not tied_embeddings:
            rules.append(r)
    rules = tuple(rules)
    if te:
        rules = tuple(Rule(_TE_RENAMES.get(r.megatron, r.megatron), r.hf, r.tp, r.reshape, r.per_layer)
                      for r in rules)
    return rules


@dataclass(frozen=True)
class Entry:
    """One concrete (layer-expanded) parameter: its Megatron name, HF names and rule."""

    megatron: str
    hf: tuple[str, ...]
    rule: Rule
    layer: int | None


def expand(rules: tuple[Rule, ...], num_layers: int) -> Iterator[Entry]:
    """Every parameter of the model, in a fixed order shared by all ranks (weight sync relies on it)."""
    for r in rules:
        if not r.per_layer:
            yield Entry(r.megatron, r.hf, r, None)
    for i in range(num_layers):
        for r in rules:
            if r.per_layer:
                yield Entry(r.megatron.format(i=i), tuple(h.format(i=i) for h in r.hf), r, i)


# ---------------------------------------------------------------------------------------- TP shards

def shard(full: torch.Tensor, tp_kind: str, rank: int, size: int) -> torch.Tensor:
    """The slice of a full (TP=1 layout) Megatron tensor that tensor-parallel `rank` of `size` holds."""
    if size == 1 or tp_kind == "replicated":
        return full
    if tp_kind in ("column", "vocab"):
        return torch.chunk(full, size, dim=0)[rank]
    if tp_kind == "row":
        return torch.chunk(full, size, dim=1)[rank]
    if tp_kind == "glu":
        gate, up = torch.chunk(full, 2, dim=0)
        return torch.cat([torch.chunk(gate, size, dim=0)[rank], torch.chunk(up, size, dim=0)[rank]], dim=0)
    raise ValueError(f"unknown tensor-parallel kind {tp_kind!r}")


def unshard(shards: list[torch.Tensor], tp_kind: str) -> torch.Tensor:
    """Inverse of :func:`shard`: the full tensor from all TP ranks' slices, in rank order."""
    if len(shards) == 1 or tp_kind == "replicated":
        return shards[0]
    if tp_kind in ("column", "vocab"):
        return torch.cat(shards, dim=0)
    if tp_kind == "row":
        return torch.cat(shards, dim=1)
    if tp_kind == "glu":
        halves = [torch.chunk(s, 2, dim=0) for s in shards]
        return torch.cat([h[0] for h in halves] + [h[1] for h in halves], dim=0)
    raise ValueError(f"unknown tensor-parallel kind {tp_kind!r}")


def to_megatron(entry: Entry, hf_tensors: list[torch.Tensor], geometry: Geometry) -> torch.Tensor:
    merge, _ = RESHAPES[entry.rule.reshape]
    return merge(hf_tensors, geometry)


def to_hf(entry: Entry, full: torch.Tensor, geometry: Geometry) -> list[tuple[str, torch.Tensor]]:
    _, split = RESHAPES[entry.rule.reshape]
    return list(zip(entry.hf, split(full, geometry)))
