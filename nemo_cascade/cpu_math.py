"""Deterministic elementwise math on CPU: MKL's vector math library picks its kernels before any thread races it.

torch's CPU wheels send contiguous float ``cos``, ``sin``, ``exp``, ``log``, ``sqrt``, ``tanh``, ``erf``... to MKL's
vector math (VML), each OpenMP thread on its own chunk, asking for the high-accuracy kernels. MKL 2024.2 (the
one torch 2.13's wheel links) chooses each function's kernel lazily, at its first call; when that first call
runs on several threads at once, one thread can run a low-accuracy kernel for its chunk of that one call. On an
Intel Xeon with AMX this changed RoPE's cosines for half the positions of the first step of one process in
twenty to thirty, by up to 5·10⁻⁵ rad, and so that step's loss in the 7th digit (docs/testing.md, "What is
bit-exact"). Calling every such function once on one element, on one thread, settles the choice for the whole
process; later calls run the kernel they always run. (Seen on an Intel Xeon; MKL dispatches otherwise on AMD
CPUs, and there the calls cost as little.)
"""
from __future__ import annotations

import torch

VML_FUNCTIONS = ("acos", "asin", "atan", "cos", "erf", "erfc", "erfinv", "exp", "log", "log10", "log2", "sin",
                 "sqrt", "tan", "tanh", "trunc")
"""The torch functions ATen implements with MKL's VML (``aten/src/ATen/cpu/vml.h``), in fp32 and fp64 alike."""

_settled = False


def settle_vector_math() -> bool:
    """Call each of :data:`VML_FUNCTIONS` once, on a one-element fp32 and fp64 tensor (a size no kernel splits
    over threads), so that MKL has chosen every kernel before any op runs them on several threads. Once per
    process; a no-op without MKL. Returns whether it ran now."""
    global _settled
    if _settled or not torch.backends.mkl.is_available():
        return False
    for dtype in (torch.float32, torch.float64):
        one = torch.full((1,), 0.5, dtype=dtype)
        for name in VML_FUNCTIONS:
            getattr(torch, name)(one)
    _settled = True
    return True


__all__ = ["VML_FUNCTIONS", "settle_vector_math"]
