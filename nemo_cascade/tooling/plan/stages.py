"""Every stage's per-GPU estimate on the cascade's parallel layout (:func:`plan_cascade`)."""
from __future__ import annotations

from dataclasses import dataclass, replace

from nemo_cascade import config
from nemo_cascade.cascade.rm_server import (RM_SERVER_RUNTIME_BYTES, RMServerPlan, rm_server_share,
                                            served_reward_models)
from nemo_cascade.convert.shape import ModelShape
from nemo_cascade.evaluate.suites import get_suite
from nemo_cascade.tooling.plan.memory import (FIXED_BYTES, GIB, actor_bytes, engine_bytes,
                                              rank_params)
from nemo_cascade.tooling.plan.shapes import resolve_shape


@dataclass(frozen=True)
class StagePlan:
    """One stage's estimate on the worst GPU (bytes)."""

    name: str
    kind: str
    seq: int
    """The longest sequence the actor trains on (GRPO: the longest request the engine serves)."""
    seq_text: str
    actor_state: float
    activations: float
    train: float
    """Actor state + max(activations, optimizer temporary) + fixed + whatever else stays
    resident."""
    engine_weights: float | None
    kv_cache: float | None
    kv_tokens: int | None
    rollout: float | None
    """Generation (GRPO): actor state + the engine's whole budget + fixed."""
    gpu: float
    notes: tuple[str, ...] = ()

    @property
    def total(self) -> float:
        return max(self.train, self.rollout or 0.0)

    @property
    def kv_short(self) -> bool:
        on_policy = self.kind in config.ON_POLICY_KINDS
        return on_policy and self.kv_tokens is not None and self.kv_tokens < self.seq

    @property
    def fits(self) -> bool:
        return self.total <= self.gpu and not self.kv_short

    def verdict(self) -> str:
        if self.total > self.gpu:
            return f"OVER by {(self.total - self.gpu) / GIB:.1f} GiB"
        if self.kv_short:
            return f"KV cache holds {self.kv_tokens:,} < {self.seq:,} tokens"
        return f"fits ({(self.gpu - self.total) / GIB:.1f} GiB spare)"


@dataclass(frozen=True)
class CascadePlan:
    name: str
    parallel: config.Parallel
    shape: ModelShape
    shape_source: str
    gpu: float
    te: bool
    dtype_bytes: int
    engine_utilization: float | None
    engine_tp: int
    engine_context: int
    """The engine's max_model_len: the longest GRPO request, or the gate's largest budget (+ its
    prompt)."""
    stages: tuple[StagePlan, ...]
    rm_server: RMServerPlan | None = None
    """The cascade's own reward-model server on rank 0's GPU, when one runs
    (:func:`plan_rm_server`)."""

    @property
    def world(self) -> int:
        p = self.parallel
        return p.tp * p.pp * p.cp * p.dp

    @property
    def fits(self) -> bool:
        return all(s.fits for s in self.stages)


def _gate_budget(cfg: config.Cascade) -> int:
    """The response budget of the gate's largest suite (0 without a gate): the engine's context must
    hold it."""
    if not cfg.gate.suites:
        return 0
    if cfg.gate.max_tokens:
        return cfg.gate.max_tokens
    # torch-free; local: only cascades with a gate need it

    return max(get_suite(name).max_tokens for name in cfg.gate.suites)


def _longest(stage: config.Stage) -> tuple[int, str]:
    if config.samples_on_policy(stage):
        prompt = stage.rollout.max_prompt_tokens
        response = config.longest_response(stage)
        return prompt + response, (f"{_tokens(prompt + response)} "
                                   f"({_tokens(prompt)}+{_tokens(response)})")
    n = stage.sft_max_tokens if stage.kind == "sft" else stage.rm_max_tokens
    return n, _tokens(n) + (" per row" if stage.kind == "reward_model" else "")


def _tokens(n: int) -> str:
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else str(n)


def _rows_per_step(stage: config.Stage) -> int:
    if config.samples_on_policy(stage):
        return stage.grpo.prompts_per_step * stage.grpo.group_size
    return stage.sft_batch_size if stage.kind == "sft" else 2 * stage.rm_batch_size



def _check_layout_divides(shape: ModelShape, p: config.Parallel, engine_tp: int) -> None:
    """The actor's TP/PP and the engine's TP split the model's dimensions evenly (else ConfigError,
    one line)."""
    for name, value, by in (("num_key_value_heads", shape.num_key_value_heads, p.tp),
                            ("num_attention_heads", shape.num_attention_heads, p.tp),
                            ("vocab_size", shape.vocab_size, p.tp),
                            ("intermediate_size", shape.ffn_hidden_size, p.tp),
                            ("num_hidden_layers", shape.num_layers, p.pp)):
        if value % by:
            field = "pp" if name == "num_hidden_layers" else "tp"
            raise config.ConfigError(f"parallel.{field}={by} must divide the model's "
                                     f"{name}={value} ({shape.name})")
    if shape.num_attention_heads % engine_tp:
        raise config.ConfigError(f"rollout.tensor_parallel_size={engine_tp} must divide the "
                                 f"model's num_attention_heads={shape.num_attention_heads} "
                                 f"({shape.name})")


def _with_frozen_copies(ranks: list[dict], copies: int, dtype_bytes: int,
                        notes: list[str]) -> list[dict]:
    """Per rank, the actor's memory with ``copies`` more copies of its parameters (the KL reference,
    a distill stage's teachers) in its state; noted when there are any."""
    if not copies:
        return ranks
    notes.append(f"{copies} frozen parameter copies in the actor state (KL reference, teachers)")
    extra = [copies * m["params"] * dtype_bytes for m in ranks]
    return [{**m, "state": m["state"] + x, "train": m["train"] + x} for m, x in zip(ranks, extra)]


def plan_rm_server(cfg: config.Cascade, plan: CascadePlan) -> RMServerPlan | None:
    """The server's share from what rank 0 has left at the peak of every stage after the first
    served RM stage (the server lives to the cascade's end; with no stage after it, that stage's own
    peak). Its context is the engine's: the longest request any stage or gate suite makes. None when
    the cascade serves no RM itself."""
    served = served_reward_models(cfg)
    if not served:
        return None
    later = plan.stages[served[0] + 1:] or plan.stages[served[0]:]
    left = plan.gpu - max(s.total for s in later)
    shape, context = plan.shape, plan.engine_context
    weights = shape.params(lm_head=False) * plan.dtype_bytes
    need = weights + shape.kv_bytes_per_token(plan.dtype_bytes) * context
    share = rm_server_share(left, plan.gpu, len(served))
    return RMServerPlan(cfg.stages[served[-1]].name, cfg.model.dtype, share,
                        need + RM_SERVER_RUNTIME_BYTES, left, context, plan.gpu)



def plan_cascade(cfg: config.Cascade, gpu_gib: float = 80.0,
                 shape: str | ModelShape | None = None) -> CascadePlan:
    """Every stage's per-GPU estimate on ``cfg.parallel``; raises ConfigError (one line) for what
    cannot be planned: an invalid config, an unknown shape, a layout the shape does not divide."""
    config.validate(cfg)
    if gpu_gib <= 0:
        raise config.ConfigError(f"--gpu-memory-gib: expected > 0, got {gpu_gib}")
    model_shape, source = ((shape, f"given shape {shape.name}") if isinstance(shape, ModelShape)
                           else resolve_shape(cfg.model, shape))
    p, gpu = cfg.parallel, gpu_gib * GIB
    te = cfg.model.transformer_impl != "local"  # auto = TE on a GPU machine with transformer_engine
    dtype_bytes = 2 if cfg.model.dtype == "bfloat16" else 4
    grpo = [s for s in cfg.stages if config.samples_on_policy(s)]
    gate_on = bool(cfg.gate.suites)
    # One engine serves the cascade, built from the first GRPO stage's rollout (a gate alone: the
    # default's).
    first = grpo[0].rollout if grpo else config.Rollout()
    util = first.gpu_memory_utilization if grpo or gate_on else None
    engine_tp = first.tensor_parallel_size
    _check_layout_divides(model_shape, p, engine_tp)
    engine = (engine_bytes(model_shape, util, gpu, dtype_bytes, engine_tp) if util is not None
              else None)
    context = max([_longest(s)[0] for s in grpo] + [_gate_budget(cfg)])
    engine_built = gate_on and cfg.gate.evaluate_base
    stages = []
    for s in cfg.stages:
        seq, seq_text = _longest(s)
        notes: list[str] = []
        lm_head = s.kind != "reward_model"
        ranks = [actor_bytes(model_shape, p, seq=seq, rows_per_step=_rows_per_step(s), rank=r,
                             te=te, dtype_bytes=dtype_bytes,
                             lm_head=lm_head) for r in sorted({0, p.pp - 1})]
        ranks = _with_frozen_copies(ranks, config.frozen_copies(s), dtype_bytes, notes)
        extra = 0.0
        if s.kind == "reward_model":  # the policy actor keeps its parameters and gradient buffer
            policy = (max(rank_params(model_shape, p.tp, p.pp, r) for r in {0, p.pp - 1})
                      * (dtype_bytes + 4))
            extra += policy
            notes.append(f"policy actor resident beside the RM: {policy / GIB:.1f} GiB")
        engine_w = kv = kv_tokens = rollout = None
        if config.samples_on_policy(s):
            engine_w, kv, kv_tokens = engine["weights"], engine["kv"], engine["kv_tokens"]
            rollout = max(m["state"] for m in ranks) + engine["budget"] + FIXED_BYTES
            if s.rollout.gpu_memory_utilization != util:
                notes.append(f"asks gpu_memory_utilization {s.rollout.gpu_memory_utilization}; the "
                             f"engine was built with {util} (the first GRPO stage's)")
            engine_built = True
        elif engine_built and engine is not None:
            notes.append("the engine sleeps while this stage trains (the gate puts it to sleep; "
                         "the next weight push refills it)")
        worst = max(ranks, key=lambda m: m["train"])
        stages.append(StagePlan(
            name=s.name, kind=s.kind, seq=seq, seq_text=seq_text,
            actor_state=max(m["state"] for m in ranks),
            activations=worst["activations"], train=worst["train"] + extra, engine_weights=engine_w,
            kv_cache=kv, kv_tokens=kv_tokens, rollout=rollout, gpu=gpu, notes=tuple(notes)))
        engine_built = engine_built or gate_on
    plan = CascadePlan(cfg.name, p, model_shape, source, gpu, te, dtype_bytes, util, engine_tp,
                       context, tuple(stages))
    return replace(plan, rm_server=plan_rm_server(cfg, plan))


def size_rm_server(cfg: config.Cascade, gpu_gib: float) -> RMServerPlan | None:
    """What ``run_cascade`` asks on a GPU (``cascade/rm_server.py``'s ``RMServerSizer``): the
    cascade's own reward-model server's share of rank 0's GPU, from the whole plan."""
    return plan_cascade(cfg, gpu_gib).rm_server


__all__ = ["StagePlan", "CascadePlan", "plan_rm_server", "plan_cascade", "size_rm_server"]
