"""Which rank does what: every rank generates and scores its share of the prompts, then all ranks share
the scored groups (the trainer needs the whole batch on every rank; it takes its data-parallel slice itself)."""
from __future__ import annotations

from typing import TypeVar

import torch.distributed as dist

T = TypeVar("T")


def world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def is_main() -> bool:
    return world()[0] == 0


def my_share(items: list[T]) -> list[T]:
    """Items rank r handles: a contiguous block, so that gathering keeps the original order."""
    rank, size = world()
    per = -(-len(items) // size)
    return items[rank * per:(rank + 1) * per]


def gather_shares(mine: list[T]) -> list[T]:
    """Concatenate every rank's share in rank order, on every rank."""
    rank, size = world()
    if size == 1:
        return list(mine)
    parts: list = [None] * size
    dist.all_gather_object(parts, mine)
    return [x for part in parts for x in part]


def most_over_ranks(value: int) -> int:
    """The largest ``value`` of any rank, on every rank (e.g. how many collective calls every rank must make)."""
    rank, size = world()
    if size == 1:
        return value
    parts: list = [None] * size
    dist.all_gather_object(parts, value)
    return max(parts)


def barrier() -> None:
    if world()[1] > 1:
        dist.barrier()


def from_main(obj: T) -> T:
    """Rank 0's ``obj`` on every rank (e.g. the URL of a server only rank 0 started)."""
    if world()[1] == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]
