"""The actor's optimizer: Megatron's AdamW for one stage, its LR / weight-decay schedule, and the
optimizer state a checkpoint stores and restores (checkpoint/).

Kept apart from the actor's model code (actor/megatron.py) and from the checkpoint's file handling:
this module is what knows Megatron's optimizer classes — the chained optimizer's parts, the
distributed optimizer's DP-sharded parameter state, and the repair a restored torch Adam needs for
an exact resume.
"""
from __future__ import annotations

import torch

from nemo_cascade import config


def build(module, actor: config.Actor, parallel: config.Parallel, bf16: bool,
          params_dtype: torch.dtype):
    """A fresh Megatron optimizer (AdamW with ``actor``'s settings) over the DDP-wrapped
    ``module``."""
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer

    optimizer_config = OptimizerConfig(
        optimizer="adam", lr=actor.lr, min_lr=actor.min_lr, weight_decay=actor.weight_decay,
        adam_beta1=actor.adam_beta1, adam_beta2=actor.adam_beta2, adam_eps=actor.adam_eps,
        clip_grad=actor.clip_grad, bf16=bf16, params_dtype=params_dtype,
        use_distributed_optimizer=parallel.distributed_optimizer,
        # Meant to equal the DDP config's (megatron reads it only for MXFP8 parameter gathers).
        overlap_param_gather=parallel.overlap_param_gather,
    )
    return fuse_cpu_adam(get_megatron_optimizer(optimizer_config, [module]))


def fuse_cpu_adam(optimizer):
    """Switch torch's AdamW, which Megatron builds where neither Transformer Engine nor Apex brings
    a fused Adam (the CPU), to its fused CPU kernel; returns ``optimizer``.

    Megatron builds it without ``fused``, so each step runs a parameter at a time through eight
    elementwise passes over memory; the fused kernel makes one (SmolLM2-135M: 0.55 → 0.09 s a step
    on 2 cores). The update is the same formula rounded in another order, a few units in the last
    place of an update apart (docs/testing.md, tests/unit/test_cpu_adam.py); every element is
    computed on its own, so the result does not depend on the thread count. A checkpoint's param
    groups carry the flag, and :func:`restore` sets it again for one saved before."""
    for sub in parts(optimizer):
        inner = getattr(sub, "optimizer", None)
        if not isinstance(inner, torch.optim.Adam):  # TE's or Apex's FusedAdam on a GPU
            continue
        if all(p.device.type == "cpu" for g in inner.param_groups for p in g["params"]):
            for group in inner.param_groups:
                group.update(fused=True, foreach=False)
    return optimizer


def lr_scheduler(optimizer, actor: config.Actor, total_steps: int):
    """Megatron's LR / weight-decay scheduler for one stage: warm-up to ``actor.lr``, then
    ``lr_schedule`` decay to ``min_lr`` over ``actor.lr_decay_steps`` (0 = the stage's
    ``total_steps``; T14's horizon question)."""
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler

    decay = max(actor.lr_decay_steps or total_steps, actor.warmup_steps + 1)
    return OptimizerParamScheduler(optimizer, init_lr=0.0 if actor.warmup_steps else actor.lr,
                                   max_lr=actor.lr,
                                   min_lr=actor.min_lr, lr_warmup_steps=actor.warmup_steps,
                                   lr_decay_steps=decay,
                                   lr_decay_style=actor.lr_schedule, start_wd=actor.weight_decay,
                                   end_wd=actor.weight_decay, wd_incr_steps=decay,
                                   wd_incr_style="constant")


# ------------------------------------------------------------------------------- checkpoint state
def parts(optimizer) -> list:
    # get_megatron_optimizer returns a ChainedOptimizer even for one model chunk; its parts are what
    # carry state_dict / parameter-state APIs.
    return list(getattr(optimizer, "chained_optimizers", [optimizer]))


def kinds(optimizer) -> list[str]:
    """The parts' class names: a checkpoint records them, and a resume needs the same ones."""
    return [type(o).__name__ for o in parts(optimizer)]


def checkpoint_state(optimizer) -> list[dict]:
    """Per sub-optimizer: Megatron's state_dict, plus the distributed optimizer's DP-local parameter
    state.

    The distributed optimizer's ``state_dict()`` holds only param groups and the step; its fp32 main
    parameters and Adam moments live in DP-sharded buckets, which
    ``get_parameter_state_dp_reshardable`` returns as-is for this rank (no gather), and
    ``load_state_dict`` puts back with the matching sharding type.
    """
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer

    out = []
    for sub in parts(optimizer):
        # no step taken yet: nothing to keep (and Megatron's state_dict asserts)
        if not sub.optimizer.state:
            out.append(None)
            continue
        sd = sub.state_dict()
        if isinstance(sub, DistributedOptimizer):
            param_state = sub.get_parameter_state_dp_reshardable()
            # {gbuf index: {dtype: [bucket: [entry per param]]}}; the loader skips entries marked as
            # padding and expects the mark on every entry, which the getter does not add.
            for key, by_dtype in param_state.items():
                if isinstance(key, int):
                    for entry in (e for buckets in by_dtype.values() for b in buckets for e in b):
                        entry["padding"] = False
            sd["param_state"] = param_state
            sd["param_state_sharding_type"] = "dp_reshardable"
        out.append(sd)
    return out


@torch.no_grad()
def restore(optimizer, saved: list[dict]) -> None:
    """Put back what :func:`checkpoint_state` returned (one entry per part, None: saved before the
    first step)."""
    for sub, sd in zip(parts(optimizer), saved):
        # saved before the first step: Adam starts from scratch, from the restored weights
        if sd is None:
            sub.optimizer.state.clear()
            sub.reload_model_params()
            continue
        sub.load_state_dict(sd)
        # Megatron (without TE/Apex) gives every param the *same* step tensor when it rebuilds torch
        # Adam's state; Adam then increments that one tensor once per param per step and the bias
        # correction is wrong from the second step on. Each param gets its own copy, as in an
        # uninterrupted run.
        for st in sub.optimizer.state.values():
            if isinstance(st.get("step"), torch.Tensor):
                st["step"] = st["step"].clone()
    fuse_cpu_adam(optimizer)


__all__ = ["build", "fuse_cpu_adam", "lr_scheduler", "parts", "kinds", "checkpoint_state",
           "restore"]
