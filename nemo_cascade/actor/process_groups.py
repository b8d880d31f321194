"""The job's process groups: the default group and the object-exchange group (``ranks``), and
Megatron's model-parallel groups, all waiting ``Parallel.collective_timeout_minutes`` for a slow
rank."""
from __future__ import annotations

import os
import socket
from datetime import timedelta

import torch
import torch.distributed as dist

from nemo_cascade import config
from nemo_cascade.runtime import ranks


def init_distributed(timeout_minutes: float | None = None) -> None:
    """Join (or create, for a plain `python` run) the default process group: gloo on CPU, NCCL on
    GPUs; and the gloo group for host-side object exchanges (``ranks.object_group``). Both wait
    ``timeout_minutes`` (``Parallel.collective_timeout_minutes``; None: its default) for a slow rank
    before giving up — not NCCL's 10 minutes, which one rank's long rollout outlasts while the
    others wait to exchange theirs."""
    if dist.is_initialized():
        return
    if "RANK" not in os.environ:  # single process, not under torchrun
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(port))
    if timeout_minutes is None:
        timeout_minutes = config.Parallel.collective_timeout_minutes
    timeout = timedelta(minutes=timeout_minutes)
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        dist.init_process_group("nccl", timeout=timeout)
    else:
        dist.init_process_group("gloo", timeout=timeout)
    ranks.init_object_group(timeout)


def init_model_parallel(parallel: config.Parallel) -> None:
    """Megatron's tensor-, pipeline-, context- and data-parallel groups (once per process), each
    waiting ``parallel.collective_timeout_minutes`` as the default group does: Megatron's own
    default is 30 minutes, which a rank still generating its share of a long rollout outlasts."""
    from megatron.core import parallel_state

    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(
            tensor_model_parallel_size=parallel.tp, pipeline_model_parallel_size=parallel.pp,
            context_parallel_size=parallel.cp,
            distributed_timeout_minutes=parallel.collective_timeout_minutes)


__all__ = ["init_distributed", "init_model_parallel"]
