"""Weight sync: the actor's Megatron shards → full HF-named tensors → size-bounded buckets → the vLLM engine.

Phase order (the OOM lesson of vLLM #15254): the trainer's state is already offloaded or idle, the engine
wakes its *weights* only, buckets stream in (at most ``bucket_mb`` of gathered tensors alive at once), and
only then does the KV cache wake. Each push is verified: the engine checks that every parameter it serves
arrived (a missing one raises — never a half-updated model that looks fine), and the push manifest
(tensor count, bytes, seconds) is returned for the step's metrics.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator

import torch


@dataclass
class SyncStats:
    tensors: int
    bytes: int
    seconds: float

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / max(self.seconds, 1e-9)


def buckets(named: Iterator[tuple[str, torch.Tensor]], bucket_mb: float) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """Group a stream of tensors into lists of at most ``bucket_mb`` (a single larger tensor is its own bucket)."""
    limit = int(bucket_mb * 1e6)
    bucket, size = [], 0
    for name, t in named:
        nbytes = t.numel() * t.element_size()
        if bucket and size + nbytes > limit:
            yield bucket
            bucket, size = [], 0
        bucket.append((name, t))
        size += nbytes
    if bucket:
        yield bucket


def push(actor, engine, bucket_mb: float = 256.0) -> SyncStats:
    """Copy the actor's current weights into the engine in place (collective over all actor ranks)."""
    start = time.perf_counter()
    counted = {"tensors": 0, "bytes": 0}
    tied = actor.spec.tied_embeddings

    def stream() -> Iterator[tuple[str, torch.Tensor]]:
        # The actor's dtype is the engine's (both come from Model.dtype); vLLM casts if they ever differ.
        for bucket in buckets(actor.iter_hf_weights(), bucket_mb):
            for name, t in bucket:
                counted["tensors"] += 1
                counted["bytes"] += t.numel() * t.element_size()
                yield name, t
                if tied and name == "model.embed_tokens.weight":
                    # vLLM's in-place reload finalises the tied ParallelLMHead as a layer of its own: without
                    # its own copy of the embedding it keeps the OLD output weights (measured: garbage text
                    # after a push), although the checkpoint itself has no lm_head.weight.
                    yield "lm_head.weight", t

    engine.wake_up(["weights"])
    engine.load_weights(stream())  # raises if any parameter the engine serves was not sent
    engine.wake_up(["kv_cache"])
    return SyncStats(counted["tensors"], counted["bytes"], time.perf_counter() - start)
