"""CPU compatibility for megatron-core: lets the real Megatron actor run over gloo on machines
without CUDA.

megatron-core assumes CUDA in ~40 places (docs/install.md): it allocates with
``device=torch.cuda.current_device()``, forks the CUDA RNG for tensor-parallel dropout/init,
synchronises streams, and asserts ``param.type() == "torch.cuda.FloatTensor"`` in the optimizer.
This module maps exactly those assumptions onto the CPU, and only when CUDA is absent: on a GPU
machine :func:`enable` does nothing.

Two parts:
- module patches: ``torch.cuda.{current_device, synchronize, get/set_rng_state, manual_seed, ...}``
  and Megatron's own CUDA-RNG helpers, redirected to the CPU generator; Megatron's grad-buffer
  reduce-scatter and all-gather made the identity over a one-rank group, where gloo would copy the
  whole buffer;
- a global ``TorchFunctionMode`` that rewrites ``device="cuda"``, ``.cuda()`` and ``.to("cuda")`` to
  the CPU and makes ``Tensor.type()`` report ``torch.cuda.*`` for CPU tensors.

The mode slows unrelated torch code (vLLM generation by 10–25 %), so callers suspend it with
:func:`suspended` around generation and the engine's weight load; :func:`active_while_pulled`
switches it back on while the actor produces the weights that load consumes.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import warnings
from typing import Iterable, Iterator

import torch
from torch.overrides import TorchFunctionMode
import torch.distributed as dist

log = logging.getLogger(__name__)

_MODE: "_CudaToCpu | None" = None
_ACTIVE = False  # whether _MODE is on torch's mode stack now (off inside suspended())
_END = object()


def _is_cuda(device) -> bool:
    return isinstance(device, (torch.device, str)) and str(device).startswith("cuda")


class _CudaToCpu(TorchFunctionMode):
    """Rewrites CUDA device requests to CPU inside every torch call."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if _is_cuda(kwargs.get("device")) or isinstance(kwargs.get("device"), int):
            kwargs["device"] = "cpu"
        if func is torch.Tensor.cuda:
            return args[0]
        if func is torch.Tensor.to:
            args = tuple("cpu" if _is_cuda(a) else a for a in args)
        if func is torch.Tensor.type and len(args) == 1 and not kwargs:
            name = func(*args)  # e.g. "torch.FloatTensor"
            if name.startswith("torch.cuda."):
                return name
            return name.replace("torch.", "torch.cuda.", 1)
        return func(*args, **kwargs)


def _patch_torch_cuda() -> None:
    cuda = torch.cuda
    cuda.current_device = lambda: "cpu"
    cuda.synchronize = lambda *a, **k: None
    cuda.empty_cache = lambda *a, **k: None
    cuda.device_count = lambda: 0
    cuda.get_rng_state = lambda device="cuda": torch.get_rng_state()
    cuda.set_rng_state = lambda state, device="cuda": torch.set_rng_state(state)
    # torch.manual_seed itself calls torch.cuda.manual_seed_all: seed the CPU generator directly.
    cuda.manual_seed = lambda seed: torch.default_generator.manual_seed(int(seed))
    cuda.manual_seed_all = lambda seed: None
    cuda.random.get_rng_state = cuda.get_rng_state
    cuda.random.set_rng_state = cuda.set_rng_state
    cuda.current_stream = lambda *a, **k: _NullStream()
    cuda.default_stream = lambda *a, **k: _NullStream()
    cuda.max_memory_allocated = lambda *a, **k: 0
    cuda.memory_allocated = lambda *a, **k: 0


class _NullStream:
    """Stand-in for a CUDA stream: CPU work is synchronous, so waiting is a no-op."""

    def wait_stream(self, *_):
        pass

    def synchronize(self):
        pass

    def record_event(self, *_):
        return None


def _patch_megatron_rng() -> None:
    from megatron.core.tensor_parallel import random as mrandom

    mrandom._get_cuda_rng_state = (
        lambda device="cuda", clone=False, graph_safe=False: torch.get_rng_state())
    mrandom._set_cuda_rng_state = (
        lambda new_state, device=-1, graph_safe=False: torch.set_rng_state(new_state))


def _patch_single_rank_collectives() -> None:
    """Megatron's grad buffers reduce-scatter the gradients and all-gather the updated parameters
    over the data- parallel group even when that group is one rank, where both are the identity.
    gloo still copies the whole buffer (SmolLM2's 538 MB of fp32 gradients: 0.2 s to reduce-scatter,
    0.3 s to all-gather on two cores), every step (docs/performance.md, "Training step on CPU").
    Over one rank the wrapped collectives copy only when output and input are different memory
    (Megatron passes views of the same buffer: nothing to do); asynchronous calls
    (``overlap_grad_reduce`` / ``overlap_param_gather``, which hand back the coalescing manager's
    handle) and groups of more ranks go to gloo as before."""
    from megatron.core.distributed import param_and_grad_buffer as buffers

    def over_one_rank_is_identity(collective):
        def call(output, input, *args, group=None, async_op=False, **kwargs):
            if async_op or dist.get_world_size(group) != 1:
                return collective(output, input, *args, group=group, async_op=async_op, **kwargs)
            if output.data_ptr() != input.data_ptr() or output.shape != input.shape:
                output.copy_(input)

        call.identity_over_one_rank = collective
        return call

    # once: enable() applies patches once
    for name in ("dist_reduce_scatter_func", "dist_all_gather_func"):
        setattr(buffers, name, over_one_rank_is_identity(getattr(buffers, name)))


def enable() -> bool:
    """Apply the compat layer if CUDA is absent. Idempotent. Returns True when it is active."""
    global _MODE
    if torch.cuda.is_available():
        return False
    if _MODE is None:
        _patch_torch_cuda()
        _patch_megatron_rng()
        _patch_single_rank_collectives()
        # On CPU the "CUDA" RNG *is* the CPU RNG, so Megatron's check that forking the
        # model-parallel RNG left the CPU RNG untouched always fires; it means nothing here.
        logging.getLogger("megatron.core.tensor_parallel.random").addFilter(
            lambda record: "CPU RNG state changed" not in record.getMessage())
        warnings.filterwarnings("ignore",
                                message="The .grad attribute of a Tensor that is not a leaf")
        _MODE = _CudaToCpu()
        _switch(True)
        log.info("megatron-core CPU compat layer enabled (no CUDA device)")
    return True


def is_enabled() -> bool:
    return _MODE is not None


def suspended() -> "contextlib.AbstractContextManager[None]":
    """Temporarily leave the device-rewriting mode (e.g. around vLLM generation, which it only slows
    down).

    The module patches stay; only the TorchFunctionMode is popped and pushed back. Nested, the inner
    one does nothing."""
    return _mode(False)


def active_while_pulled(items: Iterable) -> Iterator:
    """``items`` one by one, each produced with the device-rewriting mode on, also for a consumer
    that suspended it: the engine's CPU weight load runs vLLM's loaders without the mode (6,600
    intercepted torch calls per SmolLM2 push), while the actor's gathers that feed it are Megatron
    code that needs it."""
    return iter(functools.partial(_next_with_mode_on, iter(items)), _END)


def _next_with_mode_on(items: Iterator):
    with _mode(True):
        return next(items, _END)


@contextlib.contextmanager
def _mode(on: bool):
    if _MODE is None or _ACTIVE == on:
        yield
        return
    _switch(on)
    try:
        yield
    finally:
        _switch(not on)


def _switch(on: bool) -> None:
    global _ACTIVE
    _MODE.__enter__() if on else _MODE.__exit__(None, None, None)
    _ACTIVE = on
