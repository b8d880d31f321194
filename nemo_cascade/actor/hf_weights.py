"""The actor's weights in and out in HF names: loading an HF checkpoint into this rank's shards, and
gathering full HF tensors on every rank for weight sync, export and release — both through the
conversion table (convert/table.py), the one place that maps HF tensors to Megatron parameters.

:class:`HFWeights` is an object the actor owns (``MegatronActor.weights``), kept apart so the
actor module holds the model, its schedule and its losses. It is given what it reads: the rank's
model, the conversion table (convert.table.Table: every name, full shape, owning pipeline stage
and tied-embedding decision comes from it), the model's shape, the parallel layout and its process
groups.
"""
from __future__ import annotations

import math
from typing import Callable, Iterator

import torch
import torch.distributed as dist

from nemo_cascade.actor import buckets, cpu
from nemo_cascade.convert import table
from nemo_cascade.convert.hf_io import SafetensorsReader
from nemo_cascade.convert.shape import ModelFilesError, ModelShape


class HFWeights:
    """Weights in/out of one rank's Megatron model in HF names (see the module docstring).

    ``before_gather`` runs before every gather: the actor's pending parameter all-gather
    (``MegatronActor.finish_param_gather``), so what leaves is the stepped weights."""

    def __init__(self, model: torch.nn.Module, conversion: table.Table, shape: ModelShape,
                 parallel, parallel_state, device: torch.device, params_dtype: torch.dtype,
                 before_gather: Callable[[], None]):
        self.model, self.table, self.shape = model, conversion, shape
        self.parallel, self.parallel_state = parallel, parallel_state
        self.device, self.params_dtype, self.before_gather = device, params_dtype, before_gather

    @property
    def tp_rank(self) -> int:
        return self.parallel_state.get_tensor_model_parallel_rank()

    def _layer_offset(self) -> int:
        per_stage = self.shape.num_layers // self.parallel.pp
        return self.parallel_state.get_pipeline_model_parallel_rank() * per_stage

    def _local_name(self, entry: table.Entry) -> str | None:
        """This rank's parameter name for a table entry, or None if another PP stage owns it."""
        if entry.layer is None:
            return entry.megatron
        local = entry.layer - self._layer_offset()
        if not 0 <= local < self.shape.num_layers // self.parallel.pp:
            return None
        return entry.megatron.replace(f"layers.{entry.layer}.", f"layers.{local}.", 1)

    def _owned(self) -> Iterator[tuple[table.Entry, torch.nn.Parameter]]:
        params = dict(self.model.named_parameters())
        for e in self.table.entries:
            name = self._local_name(e)
            if name is not None and name in params:
                yield e, params[name]
        by_megatron = {e.megatron: e for e in self.table.entries}
        # tied embeddings, PP > 1: the last stage's
        for copy, original in self.table.megatron_copies.items():
            if copy in params:
                yield by_megatron[original], params[copy]

    @torch.no_grad()
    def load(self, hf_path: str, optional: frozenset[str] = frozenset()) -> None:
        """Copy an HF checkpoint into this rank's shards (each rank reads only what it holds).

        Parameters whose HF tensors are all in ``optional`` and absent from the folder keep their
        values (a reward model's new head when it starts from a causal-LM checkpoint)."""
        reader = SafetensorsReader(hf_path)
        self.table.check_known_hf(reader.names(), hf_path)
        loaded = set()
        for entry, param in self._owned():
            if set(entry.hf) <= optional and not any(n in reader for n in entry.hf):
                loaded.add(id(param))
                continue
            parts = [reader.get(n) for n in entry.hf]
            full = table.to_megatron(entry, parts, self.shape)
            local = table.shard(full, entry.rule.tp, self.tp_rank, self.parallel.tp)
            if local.shape != param.shape:
                raise ModelFilesError(f"{hf_path}: {entry.hf[0]} has shape {tuple(full.shape)}, "
                                      f"which does not fit {entry.megatron} {tuple(param.shape)} "
                                      f"on TP rank {self.tp_rank}")
            param.copy_(local.to(param.dtype))
            loaded.add(id(param))
        missing = [n for n, p in self.model.named_parameters() if id(p) not in loaded]
        if missing:
            raise ModelFilesError(f"{hf_path}: no table entry filled Megatron parameters {missing}")

    def gathered(self, dtype: torch.dtype | None = None,
                 bucket_bytes: int | None = None) -> Iterator[tuple[str, torch.Tensor]]:
        """Yield every HF-named full tensor on every rank (collective: all ranks must iterate
        fully).

        Parameters travel in buckets (actor/buckets.py) of at most ``bucket_bytes`` of full tensors
        — by default a share of the free memory, agreed by all ranks — with one all-gather of the TP
        shards within the owning pipeline stage and one broadcast from that stage to all ranks per
        bucket, in the table's fixed order, so every rank's engine receives the whole model. On CPU
        each tensor is produced with the compat mode on, also when the consumer (the engine's weight
        load) runs with it suspended.
        """
        return cpu.active_while_pulled(self._hf_weights(dtype, bucket_bytes))

    @torch.no_grad()
    def _hf_weights(self, dtype: torch.dtype | None,
                    bucket_bytes: int | None) -> Iterator[tuple[str, torch.Tensor]]:
        self.before_gather()
        copies = {id(p) for p in self._megatron_copies()}
        owned = {e.megatron: p for e, p in self._owned() if id(p) not in copies}
        limit = self.agreed_bucket_bytes() if bucket_bytes is None else bucket_bytes
        size = self.params_dtype.itemsize
        for bucket in buckets.plan_buckets(list(self.table.entries),
                                           lambda e: math.prod(self._full_shape(e)) * size,
                                           self._owner_stage, limit):
            for entry, full in zip(bucket, self._gather_bucket(bucket, owned)):
                for name, t in table.to_hf(entry, full, self.shape):
                    yield name, (t if dtype is None else t.to(dtype))

    def agreed_bucket_bytes(self) -> int:
        """The bucket size every rank can afford: from the smallest free memory of any rank
        (collective)."""
        free = torch.tensor([buckets.free_memory_bytes(self.device)], dtype=torch.int64,
                            device=self.device)
        dist.all_reduce(free, op=dist.ReduceOp.MIN)
        return buckets.bucket_limit(int(free))

    def _gather_bucket(self, bucket: list[table.Entry], owned: dict) -> list[torch.Tensor]:
        """The full (TP = 1) tensors of one bucket of entries owned by one pipeline stage, on every
        rank."""
        parallel_state, tp = self.parallel_state, self.parallel.tp
        fulls = None
        if bucket[0].megatron in owned:  # this rank's pipeline stage holds the bucket
            fulls = [owned[e.megatron].detach() for e in bucket]
            split = [i for i, e in enumerate(bucket) if tp > 1 and e.rule.tp != "replicated"]
            if split:  # one all-gather of the concatenated shards instead of one per tensor
                flat = torch.cat([fulls[i].reshape(-1) for i in split])
                # flat for gloo
                gathered = torch.empty(tp * flat.numel(), dtype=flat.dtype, device=flat.device)
                dist.all_gather_into_tensor(gathered, flat,
                                            group=parallel_state.get_tensor_model_parallel_group())
                per_rank, offset = gathered.view(tp, -1), 0
                for i in split:
                    n, shape = fulls[i].numel(), fulls[i].shape
                    fulls[i] = table.unshard([r[offset:offset + n].view(shape) for r in per_rank],
                                             bucket[i].rule.tp)
                    offset += n
        # the owning stage broadcasts the bucket's full tensors, concatenated
        if self.parallel.pp > 1:
            shapes = [self._full_shape(e) for e in bucket]
            flat = (torch.cat([f.reshape(-1) for f in fulls]) if fulls is not None else
                    torch.empty(sum(math.prod(s) for s in shapes), dtype=self.params_dtype,
                                device=self.device))
            group = parallel_state.get_pipeline_model_parallel_group()
            owner = dist.get_process_group_ranks(group)[self._owner_stage(bucket[0])]
            dist.broadcast(flat, src=owner, group=group)
            parts = flat.split([math.prod(s) for s in shapes])
            fulls = [part.view(s) for part, s in zip(parts, shapes)]
        return fulls

    def _megatron_copies(self) -> list[torch.nn.Parameter]:
        params = dict(self.model.named_parameters())
        return [params[name] for name in self.table.megatron_copies if name in params]

    def _owner_stage(self, entry: table.Entry) -> int:
        return self.table.owner_stage(entry, self.parallel.pp)

    def _full_shape(self, entry: table.Entry) -> tuple[int, ...]:
        return self.table.full_shape(entry)
