"""Weight sync: the actor's Megatron shards → gathered in buckets → full HF-named tensors → the vLLM
engine.

Phase order (the OOM lesson of vLLM #15254): the trainer's state is already offloaded or idle, the
engine wakes its *weights* only, buckets stream in (one bucket of gathered tensors alive at once,
sized from the free memory with a cap: actor/buckets.py), and only then does the KV cache wake. Each
push is verified: the engine checks that every parameter it serves arrived (a missing one raises —
never a half-updated model that looks fine), and the push manifest (tensor count, bytes, seconds) is
returned for the step's metrics.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator

import torch

from nemo_cascade.interfaces import Actor, Engine


@dataclass
class SyncStats:
    tensors: int
    bytes: int
    seconds: float

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / max(self.seconds, 1e-9)


def push(actor: Actor, engine: Engine, bucket_bytes: int | None = None) -> SyncStats:
    """Copy the actor's current weights into the engine in place (collective over all actor ranks),
    in the engine's dtype (``engine.dtype``: ``rollout.dtype``, e.g. an fp32 actor into a bf16
    engine). ``bucket_bytes``: full tensors gathered per collective (default: from the free memory,
    with a cap)."""
    start = time.perf_counter()
    counted = {"tensors": 0, "bytes": 0}
    # The conversion table decides the names the engine needs beyond the checkpoint's (the tied
    # head: vLLM's in-place reload finalises the tied ParallelLMHead as a layer of its own and keeps
    # the OLD head without it).
    aliases: dict[str, list[str]] = {}
    for alias, original in actor.table.engine_aliases.items():
        aliases.setdefault(original, []).append(alias)
    # bytes counted in the engine's dtype (it converts on load)
    itemsize = getattr(torch, engine.dtype).itemsize

    def stream() -> Iterator[tuple[str, torch.Tensor]]:
        # gathered bucket by bucket
        for name, t in actor.iter_hf_weights(bucket_bytes=bucket_bytes):
            counted["tensors"] += 1
            counted["bytes"] += t.numel() * itemsize
            for sent_as in (name, *aliases.get(name, ())):
                yield sent_as, t

    engine.wake_up(["weights"])
    engine.load_weights(stream())  # raises if any parameter the engine serves was not sent
    engine.wake_up(["kv_cache"])
    return SyncStats(counted["tensors"], counted["bytes"], time.perf_counter() - start)
