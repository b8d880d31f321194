"""What ``nemo-cascade plan`` prints: the per-stage memory table of
:func:`nemo_cascade.tooling.plan.plan_cascade`, its assumptions, and a warning per stage that does
not fit."""
from __future__ import annotations

import math

from nemo_cascade.tooling.plan import GIB, GPUS_PER_NODE, CascadePlan, engine_bytes


ASSUMPTIONS = (
    "assumptions: per GPU; actor = bf16 params + fp32 grads + fp32 master & Adam m/v (18 "
    "B/param) over TP×PP, "
    "the optimizer's 12 B/param sharded over DP×CP (distributed optimizer); activations = "
    "bench/gpu_step.py's "
    "calibrated per-layer formula (~7–10 % above an H200's measured peak) for "
    "micro_batch_size rows of the "
    "longest sequence, 1F1B in-flight microbatches, LM head 16·S·V/TP; {attention}; the "
    "engine sleeps during "
    "GRPO train steps and otherwise holds gpu_memory_utilization × GPU (KV cache = that − its "
    "weights; vLLM also "
    "reserves its activation peak and CUDA graphs from it); 2 GiB for CUDA context and workspaces; "
    "train = state + activations, rollout = state + engine; FP8 not modelled. Estimates, "
    "not measurements."
)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"


def _params(n: float) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.2f} M"


def _gib(x: float | None) -> str:
    return "—" if x is None else f"{x / GIB:.1f}"


def render(plan: CascadePlan) -> str:
    lines = _header(plan)
    if plan.engine_utilization is not None:
        lines.append(_engine_line(plan))
    lines += ["", *_stage_table(plan), "", "GiB per GPU. " + ASSUMPTIONS.format(
        attention="TE fused attention (no S² term)" if plan.te
        else "local spec: unfused attention (6·heads·S² per layer unless recompute)")]
    for s in plan.stages:
        for note in s.notes:
            lines.append(f"note: {s.name}: {note}")
    return "\n".join(lines + _warnings(plan))


def _header(plan: CascadePlan) -> list[str]:
    p, shape = plan.parallel, plan.shape
    nodes = math.ceil(plan.world / GPUS_PER_NODE)
    extras = [x for x, on in (("SP", p.sequence_parallel),
                              (f"recompute {p.recompute}", p.recompute != "none"),
                              ("distributed optimizer", p.distributed_optimizer)) if on]
    return [
        f"plan: {plan.name} on {_count(plan.world, 'GPU')} of {plan.gpu / GIB:g} GiB "
        f"({_count(nodes, 'node')} of {GPUS_PER_NODE}): actor TP {p.tp} × PP {p.pp} × CP {p.cp} "
        f"× DP {p.dp}, micro-batch {p.micro_batch_size}"
        + (f", {', '.join(extras)}" if extras else ""),
        f"model: {shape.name}, {_params(shape.params())} params, {shape.num_layers} layers, "
        f"hidden {shape.hidden_size}, {shape.num_attention_heads}/{shape.num_key_value_heads} "
        f"heads, vocab {shape.vocab_size}; shape from {plan.shape_source}",
    ]


def _engine_line(plan: CascadePlan) -> str:
    t = plan.engine_tp
    e = engine_bytes(plan.shape, plan.engine_utilization, plan.gpu, plan.dtype_bytes, t)
    weights = f"{e['weights'] / GIB:.1f} GiB"
    layout = (f"vLLM TP 1 per rank (a whole {weights} copy on each of the "
              f"{_count(plan.world, 'GPU')})" if t == 1
              else f"vLLM TP {t}, {plan.world // t} engines of {t} ranks ({weights} of weights "
                   "per GPU)")
    return (f"engine: {layout}, gpu_memory_utilization {plan.engine_utilization} = "
            f"{e['budget'] / GIB:.1f} GiB, KV {e['kv_per_token'] / 1024:g} KiB/token per GPU → "
            f"{e['kv_tokens']:,} tokens per engine; max_model_len ≥ {plan.engine_context:,} "
            "(longest request or gate budget); asleep it holds nothing (level-2 sleep: its "
            f"{weights} of weights are dropped and pushed again)")


def _stage_table(plan: CascadePlan) -> list[str]:
    p = plan.parallel
    rows = ["| stage | kind | layout | longest seq | actor state | activations | engine weights "
            "| KV cache (tokens) | train | rollout | total / GPU | verdict |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    layout = f"TP{p.tp} PP{p.pp} CP{p.cp} DP{p.dp}"
    for s in plan.stages:
        kv = "—" if s.kv_cache is None else f"{s.kv_cache / GIB:.1f} ({s.kv_tokens / 1000:.0f}K)"
        rows.append(f"| {s.name} | {s.kind} | {layout} | {s.seq_text} | {_gib(s.actor_state)} | "
                    f"{_gib(s.activations)} | {_gib(s.engine_weights)} | {kv} | {_gib(s.train)} | "
                    f"{_gib(s.rollout)} | {s.total / GIB:.1f} / {plan.gpu / GIB:g} | "
                    f"{s.verdict()} |")
    return rows


def _warnings(plan: CascadePlan) -> list[str]:
    lines = []
    if plan.engine_utilization is not None:
        tokens = engine_bytes(plan.shape, plan.engine_utilization, plan.gpu, plan.dtype_bytes,
                              plan.engine_tp)["kv_tokens"]
        if tokens < plan.engine_context:
            lines.append(f"WARNING: the engine's KV cache holds {tokens:,} tokens, less than its "
                         f"max_model_len {plan.engine_context:,}: vLLM will refuse to start")
    if plan.rm_server is not None:
        lines.append(("" if plan.rm_server.fits else "WARNING: ") + plan.rm_server.line())
    for s in plan.stages:
        if not s.fits:
            lines.append(f"WARNING: stage {s.name} ({s.kind}): {s.verdict()} — ≈ "
                         f"{s.total / GIB:.1f} GiB per GPU against {plan.gpu / GIB:g} GiB "
                         "(an estimate)")
    return lines
