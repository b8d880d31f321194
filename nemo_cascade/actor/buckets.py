"""Weight-gather buckets: how many parameters the actor gathers with one collective when it hands
out full HF-named tensors (weight sync to vLLM, HF export).

Gathering tensor by tensor costs one all-gather over TP and one broadcast over PP per tensor — about
400 of each for a 36-layer model, each with a fixed latency. A bucket gathers many at once. Its size
bounds the memory the gather holds at once (the flat gather buffer and the full tensors cut from it,
about twice the bucket), so it is taken from the memory free when the push starts, with a cap: a
fixed size would be wasteful on an idle host and too much beside a woken KV cache.
"""
from __future__ import annotations

from typing import Callable, Hashable, Sequence, TypeVar

import torch

CAP_BYTES = 1 << 30
"""At most 1 GiB of full tensors per bucket: beyond that the collectives are long enough that their
latency no longer matters, and the copy only takes memory."""
FREE_SHARE = 0.1
"""A bucket may take a tenth of the free memory (the gather holds about two buckets)."""

E = TypeVar("E")


def bucket_limit(free_bytes: int, cap: int = CAP_BYTES, share: float = FREE_SHARE) -> int:
    """Bytes of full tensors per bucket: ``share`` of the free memory, at most ``cap``, at least
    1."""
    return max(1, min(cap, int(free_bytes * share)))


def free_memory_bytes(device: torch.device) -> int:
    """Memory this process could still allocate on ``device``: the GPU's free memory, or the host's
    ``MemAvailable`` (free plus reclaimable page cache)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/meminfo has no MemAvailable line")


def plan_buckets(entries: Sequence[E], nbytes: Callable[[E], int], owner: Callable[[E], Hashable],
                 limit: int) -> list[list[E]]:
    """Consecutive entries grouped into buckets of at most ``limit`` bytes, never mixing owners (one
    pipeline stage broadcasts a bucket). An entry larger than ``limit`` is a bucket of its own;
    order is kept."""
    buckets: list[list[E]] = []
    size = 0
    for entry in entries:
        n = nbytes(entry)
        if not buckets or owner(buckets[-1][0]) != owner(entry) or size + n > limit:
            buckets.append([])
            size = 0
        buckets[-1].append(entry)
        size += n
    return buckets


__all__ = ["CAP_BYTES", "FREE_SHARE", "bucket_limit", "free_memory_bytes", "plan_buckets"]
