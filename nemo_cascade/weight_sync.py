"""Weight sync: the actor's Megatron shards → gathered in buckets → full HF-named tensors → the vLLM engine.

Phase order (the OOM lesson of vLLM #15254): the trainer's state is already offloaded or idle, the engine
wakes its *weights* only, buckets stream in (one bucket of gathered tensors alive at once, sized from the
free memory with a cap: actor/buckets.py), and only then does the KV cache wake. Each push is verified: the engine checks that every parameter it serves
arrived (a missing one raises — never a half-updated model that looks fine), and the push manifest
(tensor count, bytes, seconds) is returned for the step's metrics.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable, Iterator

import torch


@dataclass
class SyncStats:
    tensors: int
    bytes: int
    seconds: float

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / max(self.seconds, 1e-9)


def in_dtype(named: Iterable[tuple[str, torch.Tensor]], dtype: torch.dtype) -> Iterator[tuple[str, torch.Tensor]]:
    """Each tensor in ``dtype``, converted once where it lives (``Tensor.to`` keeps the device: on GPUs the cast
    runs there, before vLLM's loaders see it) and passed through untouched when it already is. Converting before
    the engine halves what vLLM's layerwise reload buffers for an fp32 actor and a bf16 engine (docs/scaling.md,
    "GPU path": the reload holds every tensor of a layer until the layer is complete). A CPU engine's load
    (rollout/packed_reload.py) buffers nothing, and its copy into the engine's weights converts in the same pass."""
    for name, t in named:
        yield name, (t if t.dtype == dtype else t.to(dtype))


def push(actor, engine, bucket_bytes: int | None = None) -> SyncStats:
    """Copy the actor's current weights into the engine in place (collective over all actor ranks), in the
    engine's dtype (``engine.dtype``: ``rollout.dtype``, e.g. an fp32 actor into a bf16 engine).
    ``bucket_bytes``: full tensors gathered per collective (default: from the free memory, with a cap)."""
    start = time.perf_counter()
    counted = {"tensors": 0, "bytes": 0}
    # The conversion table decides the names the engine needs beyond the checkpoint's (the tied head: vLLM's
    # in-place reload finalises the tied ParallelLMHead as a layer of its own and keeps the OLD head without it).
    aliases: dict[str, list[str]] = {}
    for alias, original in actor.table.engine_aliases.items():
        aliases.setdefault(original, []).append(alias)
    dtype = getattr(torch, engine.dtype)
    weights = actor.iter_hf_weights(bucket_bytes=bucket_bytes)
    if not engine.on_cpu:  # a CPU engine converts while it copies into its weights: one pass, no new tensor
        weights = in_dtype(weights, dtype)

    def stream() -> Iterator[tuple[str, torch.Tensor]]:
        # gathered bucket by bucket; bytes counted as they land, in the engine's dtype
        for name, t in weights:
            counted["tensors"] += 1
            counted["bytes"] += t.numel() * dtype.itemsize
            yield name, t
            for alias in aliases.get(name, ()):
                yield alias, t

    engine.wake_up(["weights"])
    engine.load_weights(stream())  # raises if any parameter the engine serves was not sent
    engine.wake_up(["kv_cache"])
    return SyncStats(counted["tensors"], counted["bytes"], time.perf_counter() - start)
