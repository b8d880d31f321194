"""The HF ⇄ Megatron name table: one declarative list of rules plus a few named reshapes;
:class:`Table`, one model's names (tied embeddings included), is the only place that decides a
parameter name.

It is shared by everything that moves weights between the two worlds — loading HF checkpoints into
the actor, weight sync into vLLM, HF export and the conversion tool — so a naming bug cannot hide in
one path.

A rule maps one Megatron parameter (full, TP=1 layout, *global* layer index) to one or more HF
tensors:

    Rule(megatron="decoder.layers.{i}.self_attention.linear_qkv.weight",
         hf=("model.layers.{i}.self_attn.q_proj.weight", "…k_proj…", "…v_proj…"),
         reshape="qkv", tp="column")

``reshape`` names a function pair (merge HF parts → Megatron tensor, split it back); ``tp`` says how
the full tensor is cut over tensor-parallel ranks: ``column`` (dim 0), ``row`` (dim 1), ``vocab``
(dim 0 of the embedding / output layer), ``glu`` (dim 0 of gate and of up separately, since each
rank holds ``[gate_r; up_r]``) or ``replicated``.

Pure torch: no megatron import, so the table is unit-testable anywhere.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Callable, Iterable, Iterator

import torch

from nemo_cascade.convert.shape import ModelFilesError, ModelShape


@dataclass(frozen=True)
class Rule:
    megatron: str
    hf: tuple[str, ...]
    tp: str = "replicated"
    reshape: str = "identity"
    per_layer: bool = True
    dims: tuple[str, ...] = ("hidden",)
    """The full (TP=1) Megatron tensor's shape in :data:`DIMS` names (a norm weight by default)."""
    stage: str = "first"
    """A rule that is not per layer: the pipeline stage holding it (``first`` or ``last``)."""


# ---------------------------------------------------------------------------------------- reshapes
# QKV: Megatron stores q, k, v interleaved per KV group — for each of the G groups, its (H/G) query
# heads, then its key head, then its value head — so that a contiguous dim-0 slice holds whole
# groups and tensor parallelism splits by group (docs/install.md). The same reshape serves the fused
# weight [(H+2G)·d, hidden] and the fused bias [(H+2G)·d] (Qwen2): dim 0 is interleaved, trailing
# dims ride along.

def _merge_qkv(parts: list[torch.Tensor], shape: ModelShape) -> torch.Tensor:
    q, k, v = parts
    groups, d, rest = shape.num_key_value_heads, shape.head_dim, tuple(q.shape[1:])
    per_group = shape.num_attention_heads // groups
    return torch.cat([q.reshape(groups, per_group * d, *rest), k.reshape(groups, d, *rest),
                      v.reshape(groups, d, *rest)], dim=1).reshape(-1, *rest)


def _split_qkv(t: torch.Tensor, shape: ModelShape) -> list[torch.Tensor]:
    groups, d, rest = shape.num_key_value_heads, shape.head_dim, tuple(t.shape[1:])
    per_group = shape.num_attention_heads // groups
    t = t.reshape(groups, (per_group + 2) * d, *rest)
    q, k, v = torch.split(t, [per_group * d, d, d], dim=1)
    return [q.reshape(-1, *rest), k.reshape(-1, *rest), v.reshape(-1, *rest)]


def _merge_glu(parts: list[torch.Tensor], shape: ModelShape) -> torch.Tensor:
    gate, up = parts
    return torch.cat([gate, up], dim=0)


def _split_glu(t: torch.Tensor, shape: ModelShape) -> list[torch.Tensor]:
    gate, up = torch.chunk(t, 2, dim=0)
    return [gate, up]


DIMS: dict[str, Callable[[ModelShape], int]] = {
    "vocab": lambda shape: shape.vocab_size,
    "hidden": lambda shape: shape.hidden_size,
    "qkv": lambda shape: ((shape.num_attention_heads + 2 * shape.num_key_value_heads)
                          * shape.head_dim),
    "attention": lambda shape: shape.num_attention_heads * shape.head_dim,
    "ffn": lambda shape: shape.ffn_hidden_size,
    "2ffn": lambda shape: 2 * shape.ffn_hidden_size,  # linear_fc1: [gate; up]
    "head_dim": lambda shape: shape.head_dim,
    "1": lambda shape: 1,
}
"""What a rule's ``dims`` mean for a model shape."""

RESHAPES: dict[str, tuple[Callable, Callable]] = {"identity": (lambda parts, shape: parts[0],
                                                               lambda t, shape: [t]),
                                                  "qkv": (_merge_qkv, _split_qkv),
                                                  "glu": (_merge_glu, _split_glu)}


# ---------------------------------------------------------------------------------------- tables
# Dense decoder-only models with RMSNorm, SwiGLU and RoPE. Qwen3 adds per-head q/k RMSNorm, Qwen2
# biases on the q/k/v projections (convert.shape.ARCHS). Names are for Megatron's local (non-TE)
# layer spec; TE fuses the pre-attention / pre-MLP norms into the following linear layer, which
# `rules_for(te=True)` renames (_TE_RENAMES).

_DENSE = (
    Rule("embedding.word_embeddings.weight", ("model.embed_tokens.weight",), tp="vocab",
         per_layer=False,
         dims=("vocab", "hidden")),
    Rule("decoder.final_layernorm.weight", ("model.norm.weight",), per_layer=False, stage="last"),
    Rule("output_layer.weight", ("lm_head.weight",), tp="vocab", per_layer=False,
         dims=("vocab", "hidden"),
         stage="last"),
    Rule("decoder.layers.{i}.input_layernorm.weight", ("model.layers.{i}.input_layernorm.weight",)),
    Rule(
        "decoder.layers.{i}.self_attention.linear_qkv.weight",
        ("model.layers.{i}.self_attn.q_proj.weight", "model.layers.{i}.self_attn.k_proj.weight",
         "model.layers.{i}.self_attn.v_proj.weight"),
        tp="column", reshape="qkv", dims=("qkv", "hidden"),
    ),
    Rule("decoder.layers.{i}.self_attention.linear_proj.weight",
         ("model.layers.{i}.self_attn.o_proj.weight",),
         tp="row", dims=("hidden", "attention")),
    Rule("decoder.layers.{i}.pre_mlp_layernorm.weight",
         ("model.layers.{i}.post_attention_layernorm.weight",)),
    Rule(
        "decoder.layers.{i}.mlp.linear_fc1.weight",
        ("model.layers.{i}.mlp.gate_proj.weight", "model.layers.{i}.mlp.up_proj.weight"),
        tp="glu", reshape="glu", dims=("2ffn", "hidden"),
    ),
    Rule("decoder.layers.{i}.mlp.linear_fc2.weight", ("model.layers.{i}.mlp.down_proj.weight",),
         tp="row",
         dims=("hidden", "ffn")),
)

_QK_NORM = (
    Rule("decoder.layers.{i}.self_attention.q_layernorm.weight",
         ("model.layers.{i}.self_attn.q_norm.weight",),
         dims=("head_dim",)),
    Rule("decoder.layers.{i}.self_attention.k_layernorm.weight",
         ("model.layers.{i}.self_attn.k_norm.weight",),
         dims=("head_dim",)),
)

_QKV_BIAS = Rule(
    # Megatron's linear_qkv carries one fused bias (TransformerConfig.add_qkv_bias); interleaved per
    # KV group exactly like the fused weight, so a TP rank's column slice of the bias matches its
    # rows of the weight.
    "decoder.layers.{i}.self_attention.linear_qkv.bias",
    ("model.layers.{i}.self_attn.q_proj.bias", "model.layers.{i}.self_attn.k_proj.bias",
     "model.layers.{i}.self_attn.v_proj.bias"),
    tp="column", reshape="qkv", dims=("qkv",),
)


def _with_qkv_bias(rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    """``rules`` with the bias right after the fused QKV weight: weight sync streams a layer's q/k/v
    weights and biases together (vLLM finalises its fused qkv_proj once every part of it has
    arrived)."""
    out: list[Rule] = []
    for rule in rules:
        out.append(rule)
        if rule.megatron.endswith("linear_qkv.weight"):
            out.append(_QKV_BIAS)
    return tuple(out)


TABLES: dict[str, tuple[Rule, ...]] = {"llama": _DENSE, "qwen3": _DENSE + _QK_NORM,
                                       "qwen2": _with_qkv_bias(_DENSE)}

_TE_RENAMES = {
    "decoder.layers.{i}.input_layernorm.weight":
        "decoder.layers.{i}.self_attention.linear_qkv.layer_norm_weight",
    "decoder.layers.{i}.pre_mlp_layernorm.weight":
        "decoder.layers.{i}.mlp.linear_fc1.layer_norm_weight",
}


SCORE_HEAD = Rule("output_layer.weight", ("score.weight",), per_layer=False, dims=("1", "hidden"),
                  stage="last")
"""The reward model's head (paper §4.2: a linear head on the last hidden state) in place of the LM
head: Megatron holds it as ``output_layer.weight`` of shape [1, hidden], replicated over TP ranks;
HF's ``*ForSequenceClassification`` (num_labels=1) calls it ``score.weight``."""

HEADS = ("lm", "score")


def rules_for(arch: str, tied_embeddings: bool, te: bool = False,
              head: str = "lm") -> tuple[Rule, ...]:
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
        rules = tuple(replace(r, megatron=_TE_RENAMES.get(r.megatron, r.megatron)) for r in rules)
    return rules


@dataclass(frozen=True)
class Entry:
    """One concrete (layer-expanded) parameter: its Megatron name, HF names and rule."""

    megatron: str
    hf: tuple[str, ...]
    rule: Rule
    layer: int | None


def expand(rules: tuple[Rule, ...], num_layers: int) -> Iterator[Entry]:
    """Every parameter of the model, in a fixed order shared by all ranks (weight sync relies on
    it)."""
    for r in rules:
        if not r.per_layer:
            yield Entry(r.megatron, r.hf, r, None)
    for i in range(num_layers):
        for r in rules:
            if r.per_layer:
                yield Entry(r.megatron.format(i=i), tuple(h.format(i=i) for h in r.hf), r, i)


# -------------------------------------------------------------------------------- one model's names
# Tied embeddings (``tie_word_embeddings``), decided here once: the HF checkpoint has no
# ``lm_head.weight`` (export writes none; one a checkpoint carries anyway is the embedding and is
# not read); Megatron has no output layer rule, except that with PP > 1 the last stage keeps a copy
# of the embedding as ``output_layer.weight``; and vLLM's in-place reload finalises the tied
# ParallelLMHead as a layer of its own, so a weight push sends the embedding under
# ``lm_head.weight`` too (without it the engine keeps the OLD head: measured, garbage text).
_TIED_HF_HEAD = {"lm_head.weight": "model.embed_tokens.weight"}
_TIED_MEGATRON_COPY = {"output_layer.weight": "embedding.word_embeddings.weight"}
_SAVED_BUFFERS = ("model.layers.{i}.self_attn.rotary_emb.inv_freq",)
"""Non-parameters some older transformers checkpoints carry (computed, never loaded; transformers
ignores them)."""


def tied_head_aliases(tied_embeddings: bool) -> dict[str, str]:
    """``{HF name the engine needs: the HF tensor to send under it}`` beyond a checkpoint's own
    names."""
    return dict(_TIED_HF_HEAD) if tied_embeddings else {}


class UnknownTensorError(ModelFilesError):
    """A checkpoint tensor the conversion table has no rule for; the message is one line naming
    it."""


@dataclass(frozen=True)
class Table:
    """The naming authority for one model: its expanded entries, every HF name and its entry, each
    Megatron tensor's full shape and pipeline stage, and what tied embeddings mean for names.
    Loading, weight sync, HF export, release conversion and checkpoint export all ask it; none
    matches names itself."""

    shape: ModelShape
    rules: tuple[Rule, ...]
    head: str
    entries: tuple[Entry, ...]

    @property
    def tied(self) -> bool:
        """The LM head is the embedding (a reward model's score head never is)."""
        return self.shape.tied_embeddings and self.head == "lm"

    @property
    def engine_aliases(self) -> dict[str, str]:
        """HF names a weight push sends beyond the checkpoint's: ``{alias: the HF name whose tensor
        it is}``."""
        return tied_head_aliases(self.tied)

    @property
    def megatron_copies(self) -> dict[str, str]:
        """Megatron parameters that copy another (the tied head on the last of several pipeline
        stages): ``{copy: original}``; never written to HF, never a checkpoint's unknown
        parameter."""
        return dict(_TIED_MEGATRON_COPY) if self.tied else {}

    @cached_property
    def by_hf(self) -> dict[str, Entry]:
        """Every HF name this model's checkpoint holds → its entry."""
        return {name: e for e in self.entries for name in e.hf}

    def check_known_hf(self, names: Iterable[str], where: str) -> None:
        """Refuse HF tensor names this model's table does not know (an unread tensor means the
        checkpoint holds a model the table does not describe: a working but wrong model after
        loading). Known without being read: the tied ``lm_head.weight``, a causal LM's head when the
        reward model starts from it, and saved rotary buffers."""
        ignored = {b.format(i=i) for b in _SAVED_BUFFERS for i in range(self.shape.num_layers)}
        if self.shape.tied_embeddings or self.head == "score":
            ignored |= set(_TIED_HF_HEAD)
        unknown = sorted(set(names) - set(self.by_hf) - ignored)
        if unknown:
            more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
            raise UnknownTensorError(f"{where}: tensor {unknown[0]!r}{more} is not a parameter of "
                                     f"the {self.shape.hf_architecture} conversion table "
                                     f"(convert/table.py); expected only its {len(self.by_hf)} HF "
                                     "names")

    def full_shape(self, entry: Entry) -> tuple[int, ...]:
        """The full (TP=1) Megatron tensor of ``entry``."""
        return tuple(DIMS[d](self.shape) for d in entry.rule.dims)

    def owner_stage(self, entry: Entry, pp: int) -> int:
        """The pipeline stage (of ``pp``) that holds ``entry``."""
        if entry.layer is not None:
            return entry.layer // (self.shape.num_layers // pp)
        return 0 if entry.rule.stage == "first" else pp - 1


def table_for(shape: ModelShape, te: bool = False, head: str = "lm") -> Table:
    """The table of one model (:func:`rules_for` its architecture, expanded over its layers)."""
    rules = rules_for(shape.arch, shape.tied_embeddings, te=te, head=head)
    return Table(shape, rules, head, tuple(expand(rules, shape.num_layers)))


# ---------------------------------------------------------------------------------------- TP shards

def shard(full: torch.Tensor, tp_kind: str, rank: int, size: int) -> torch.Tensor:
    """The slice of a full (TP=1 layout) Megatron tensor that tensor-parallel `rank` of `size`
    holds."""
    if size == 1 or tp_kind == "replicated":
        return full
    if tp_kind in ("column", "vocab"):
        return torch.chunk(full, size, dim=0)[rank]
    if tp_kind == "row":
        return torch.chunk(full, size, dim=1)[rank]
    if tp_kind == "glu":
        gate, up = torch.chunk(full, 2, dim=0)
        return torch.cat([torch.chunk(gate, size, dim=0)[rank], torch.chunk(up, size, dim=0)[rank]],
                         dim=0)
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


def to_megatron(entry: Entry, hf_tensors: list[torch.Tensor], shape: ModelShape) -> torch.Tensor:
    merge, _ = RESHAPES[entry.rule.reshape]
    return merge(hf_tensors, shape)


def to_hf(entry: Entry, full: torch.Tensor, shape: ModelShape) -> list[tuple[str, torch.Tensor]]:
    _, split = RESHAPES[entry.rule.reshape]
    return list(zip(entry.hf, split(full, shape)))
