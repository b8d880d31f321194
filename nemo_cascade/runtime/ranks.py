"""Which rank does what: every rank generates and scores its share of the prompts, then all ranks
share the scored groups (the trainer needs the whole batch on every rank; it takes its data-parallel
slice itself).

Those host-side exchanges of Python objects run on one gloo group (:func:`object_group`), never on
NCCL: they follow rollouts that each rank generates on its own, so the fastest rank can wait for the
slowest far longer than NCCL's watchdog allows, and pickled objects have no business on a GPU
anyway. Its timeout is ``Parallel.collective_timeout_minutes`` (docs/scaling.md, "GPU path:
decisions and the source they follow").
"""
from __future__ import annotations

from datetime import timedelta
from typing import TypeVar

import torch.distributed as dist

from nemo_cascade.config import Parallel

T = TypeVar("T")

_timeout = timedelta(minutes=Parallel.collective_timeout_minutes)
_group: list = []
"""``[(default group, group)]`` once chosen (group None means the default group, which is gloo
already)."""


def collective_timeout() -> timedelta:
    """The timeout of every process group this program creates (``init_object_group`` sets it)."""
    return _timeout


def needs_own_object_group(default_backend: str) -> bool:
    """A separate gloo group is created unless the default group is gloo itself (CPU runs): reusing
    it costs nothing and keeps the CPU tier's group count what Megatron expects."""
    return str(default_backend).lower() != "gloo"


def init_object_group(timeout: timedelta) -> None:
    """Choose the group for object exchanges (collective: every rank calls it, right after
    ``init_process_group``, with the same ``timeout``)."""
    global _timeout
    _timeout = timeout
    _group.clear()
    own = needs_own_object_group(dist.get_backend())
    gloo = dist.new_group(backend="gloo", timeout=timeout) if own else None
    _group.append((dist.group.WORLD, gloo))


def object_group():
    """The gloo group for host-side exchanges. A default group made elsewhere (a test, a script)
    gets its object group here, at the first exchange — which every rank reaches, since the exchange
    is collective."""
    # none yet, or made under a destroyed default group
    if not _group or _group[0][0] is not dist.group.WORLD:
        init_object_group(_timeout)
    return _group[0][1]


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


def gather_objects(obj: T) -> list[T]:
    """Every rank's ``obj`` in rank order, on every rank (collective)."""
    rank, size = world()
    if size == 1:
        return [obj]
    parts: list = [None] * size
    dist.all_gather_object(parts, obj, group=object_group())
    return parts


def gather_shares(mine: list[T]) -> list[T]:
    """Concatenate every rank's share in rank order, on every rank."""
    return [x for part in gather_objects(list(mine)) for x in part]


def most_over_ranks(value: int) -> int:
    """The largest ``value`` of any rank, on every rank (e.g. how many collective calls every rank
    must make)."""
    return max(gather_objects(value))


def barrier() -> None:
    if world()[1] > 1:
        dist.barrier(group=object_group())


def from_main(obj: T) -> T:
    """Rank 0's ``obj`` on every rank (e.g. the URL of a server only rank 0 started)."""
    if world()[1] == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0, group=object_group())
    return box[0]
