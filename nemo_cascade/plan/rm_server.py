"""The cascade's own reward-model server: its share of what the actor and the engine leave on rank
0's GPU (``cascade/plan_rm.py`` turns it into ``vllm serve`` settings)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from nemo_cascade import config
from nemo_cascade.plan.memory import GIB

RM_SERVER_PROCESS_BYTES = 1 * GIB
"""The server process's CUDA context and allocator slack: outside the share vLLM budgets, but on
the GPU."""
RM_SERVER_RUNTIME_BYTES = 2 * GIB
"""Inside the share besides weights and KV cache: vLLM's profiled activation peak and CUDA
graphs."""
VLLM_DEFAULT_SHARE = 0.92
"""vLLM's default gpu_memory_utilization: right for a server alone on its GPU, never beside the
actor."""


@dataclass(frozen=True)
class RMServerPlan:
    """``share``: the server's ``--gpu-memory-utilization``; ``need`` (bytes): its weights in the
    model's dtype + the KV cache of one ``context``-token request + vLLM's runtime; ``left``
    (bytes): what the actor and the engine leave on the GPU at the peak of the stages the server
    lives through."""

    stage: str
    dtype: str
    share: float
    need: float
    left: float
    context: int
    gpu: float

    @property
    def fits(self) -> bool:
        return self.share > 0 and self.share * self.gpu >= self.need

    def line(self) -> str:
        verdict = "fits" if self.fits else "does NOT fit"
        return (f"reward-model server ({self.stage}, {self.dtype}) on rank 0's GPU {verdict}: "
                f"gpu_memory_utilization {self.share:g} = {self.share * self.gpu / GIB:.1f} GiB "
                f"of the {self.left / GIB:.1f} GiB the actor and engine leave; it needs "
                f"{self.need / GIB:.1f} GiB (weights + KV for {self.context:,} tokens + "
                f"{RM_SERVER_RUNTIME_BYTES / GIB:g} GiB runtime)")


def rm_server_share(left: float, gpu: float, servers: int = 1) -> float:
    """The ``gpu_memory_utilization`` of each of ``servers`` RM servers on a GPU of ``gpu`` bytes
    where ``left`` bytes stay free at the actor's and engine's peak: its part of what is left less
    its process overhead, as a fraction of the whole GPU (vLLM's unit), floored to 0.01 and at most
    vLLM's default. 0 when nothing is left."""
    part = max(left / max(servers, 1) - RM_SERVER_PROCESS_BYTES, 0.0)
    return min(math.floor(part / gpu * 100) / 100, VLLM_DEFAULT_SHARE)


def served_reward_models(cfg: config.Cascade) -> list[int]:
    """Indices of the reward_model stages the cascade serves itself: every one when the forgetting
    gate runs (each gate after an RM stage scores with the latest RM), else those a GRPO stage names
    in reward.reward_model_stage."""
    named = {s.reward.reward_model_stage for s in cfg.stages if config.samples_on_policy(s)}
    return [k for k, s in enumerate(cfg.stages)
            if s.kind == "reward_model" and (bool(cfg.gate.suites) or s.name in named)]



__all__ = ["RM_SERVER_PROCESS_BYTES", "RM_SERVER_RUNTIME_BYTES", "VLLM_DEFAULT_SHARE",
           "RMServerPlan", "rm_server_share", "served_reward_models"]
