"""Per-GPU memory of every stage of a cascade on its parallel layout: ``nemo-cascade plan RECIPE``.

An estimate from the model's shape and the config, for planning layouts on 8×H100-80GB nodes before
a job queues; nothing here imports torch, megatron or vllm at module level, and nothing is measured.
Per GPU:

- **actor state**: bf16 parameters (2 B/param), the fp32 gradient buffer (4 B/param: ``grad_reduce_in_fp32``)
  and the optimizer's fp32 master copy + Adam m, v (12 B/param; 8 with fp32 parameters, which are their own
  master), i.e. 18 B/param. Parameters and gradients split over TP × PP (the embedding and LM head over TP, on
  the first / last pipeline stage); Megatron's distributed optimizer shards the optimizer part over DP × CP.
- **activations** of the stage's longest sequence (GRPO: ``max_prompt_tokens`` + the longest response phase; SFT:
  ``sft_max_tokens``; reward model: ``rm_max_tokens`` per row, a pair's two rows in one microbatch) ×
  ``micro_batch_size`` rows, from :func:`layer_activation_bytes` (calibrated on the local spec, see there):
  TP splits the per-head / FFN parts, sequence parallelism also the hidden-size parts, CP the sequence;
  ``selective`` recompute drops the unfused attention's S² part, ``full`` keeps one bf16 layer input per layer
  plus one layer's activations while it is recomputed. 1F1B: pipeline rank r holds pp − r microbatches in
  flight; the last rank adds the LM head's 16·S·V/TP (vocab-parallel cross-entropy).
- **the colocated vLLM engine** (``rollout/vllm.py``): ``rollout.tensor_parallel_size`` = t consecutive ranks
  share an engine, each GPU holding 1/t of its weights (t = 1: a whole copy per rank); it may take
  ``gpu_memory_utilization`` × GPU memory (one engine serves the cascade, built with the first GRPO stage's
  ``rollout``), its KV cache is that budget minus the weights, and a token of KV costs
  2 × layers × kv_heads × head_dim × 2 bytes, the KV heads split over t (replicated once t exceeds them). It
  sleeps (level 2: weights and KV cache dropped, the next weight push refills them;
  ``rollout.engine_start.sleep_level``) during the actor's GRPO train step, so a GRPO stage peaks at max(actor
  state + activations, actor state + the engine's budget). The gate puts it to sleep after evaluating, so an SFT
  or reward-model stage trained after the engine was built does not pay for it on the GPU.
- the cascade's own reward-model server (a ``reward_model`` stage's export, served on rank 0's GPU to the end):
  :func:`plan_rm_server` gives it what the later stages leave (``plan_rm`` turns that into its
  ``vllm serve`` settings).
- a reward-model stage trains a second actor (the RM) while the policy actor keeps its parameters and gradient
  buffer (its optimizer is freed: ``cascade.train_reward_model``).

Checked against an H200 (bench/gpu_step.py, 12 Qwen3-8B-shaped layers, 4096 tokens, local spec, no recompute):
:func:`estimate_bytes` 123.8 GiB, measured peak 112–116 GiB — the numbers run ~7–10 % high.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

from nemo_cascade import config
from nemo_cascade.convert.shape import (ARCHITECTURES, ModelShape, any_shape_from_dict, load_config_json,
                                        shape_from_dict)


GIB = float(1 << 30)
FIXED_BYTES = 2 * GIB
"""Per GPU outside the estimate's tensors: CUDA context, cuBLAS and NCCL workspaces."""
ACTIVATION_MARGIN = 1.05
"""The calibration's allowance for allocator rounding and short-lived temporaries."""
GPUS_PER_NODE = 8


# --------------------------------------------------------------------------------------------- model shapes

PRESETS = {
    # huggingface.co/Qwen/Qwen3-8B config.json
    "qwen3-8b": ModelShape("Qwen3-8B", hidden_size=4096, ffn_hidden_size=12288, num_attention_heads=32,
                           num_key_value_heads=8, head_dim=128, vocab_size=151936, num_layers=36),
    # huggingface.co/Qwen/Qwen3-14B config.json
    "qwen3-14b": ModelShape("Qwen3-14B", hidden_size=5120, ffn_hidden_size=17408, num_attention_heads=40,
                            num_key_value_heads=8, head_dim=128, vocab_size=151936, num_layers=40),
    # huggingface.co/Qwen/Qwen2.5-72B-Instruct config.json (Qwen2ForCausalLM: q/k/v biases, no q/k
    # norm)
    "qwen2.5-72b": ModelShape("Qwen2.5-72B", hidden_size=8192, ffn_hidden_size=29568, num_attention_heads=64,
                              num_key_value_heads=8, head_dim=128, vocab_size=152064, num_layers=80, qk_norm=False,
                              qkv_bias=True, hf_architecture="Qwen2ForCausalLM"),
    # tooling/demo_data/tiny_models.py's build_tiny_qwen3 (vocab: the in-code tokenizer's size, at
    # most 1024)
    "tiny-qwen3": ModelShape("tiny Qwen3", hidden_size=128, ffn_hidden_size=384, num_attention_heads=4,
                             num_key_value_heads=2, head_dim=32, vocab_size=1024, num_layers=4, tied_embeddings=True),
}
"""Named shapes: convert/shape.py's ModelShape, the type a config.json is read into (parameter counts included)."""
SIZE_PRESETS = {"8": "qwen3-8b", "14": "qwen3-14b", "72": "qwen2.5-72b"}
"""A size in a model folder's name ('…-14B-…') → the preset of that size (the paper's bases, §1 and §4.2)."""
_SIZE = re.compile(r"(?<![0-9.])(\d+(?:\.\d+)?)b(?![a-z0-9])", re.IGNORECASE)


def shape_from_config(raw: dict, where: str = "config.json") -> tuple[ModelShape, str]:
    """The shape in an HF ``config.json``, and a note when the actor cannot load its architecture
    (its standard fields are read anyway, for the estimate)."""
    archs = raw.get("architectures") or []
    if any(a in ARCHITECTURES for a in archs):
        return shape_from_dict(raw, where), ""
    shape = any_shape_from_dict(raw, where)
    return shape, unsupported_note(shape)


def unsupported_note(shape: ModelShape) -> str:
    if shape.hf_architecture in ARCHITECTURES:
        return ""
    return (f"{shape.hf_architecture} is not an architecture the actor loads (convert/shape.py: "
            f"{', '.join(sorted(ARCHITECTURES))}): the estimate is for its shape only")


def resolve_shape(model: config.Model, shape: str | None = None) -> tuple[ModelShape, str]:
    """``(shape, where it came from)``: ``--shape`` when given; else ``model.hf_path``'s
    config.json; else, when that folder does not exist here, the preset whose size its name carries
    ('8B', '14B', '72B')."""
    if shape:
        if shape.lower() not in PRESETS:
            raise config.ConfigError(f"--shape {shape}: unknown shape; expected one of {sorted(PRESETS)}")
        return _with_note(PRESETS[shape.lower()], f"preset {shape.lower()} (--shape)")
    if model.build:
        if model.build.startswith("tiny-qwen3"):
            return PRESETS["tiny-qwen3"], f"preset tiny-qwen3 (model.build={model.build})"
        raise config.ConfigError(f"model.build={model.build}: no shape preset for it; pass --shape NAME "
                                 f"(one of {sorted(PRESETS)})")
    folder = Path(model.hf_path)
    if folder.exists():
        path = folder / "config.json"
        found, note = shape_from_config(load_config_json(path), str(path))
        return found, str(path) + (f"; {note}" if note else "")
    sizes = {m.group(1) for m in _SIZE.finditer(folder.name)}
    known = {SIZE_PRESETS[s] for s in sizes if s in SIZE_PRESETS}
    if len(known) != 1:
        why = f"sizes {sorted(sizes)} in its name" if sizes else "no size in its name"
        raise config.ConfigError(f"model.hf_path {model.hf_path}: no such folder here and {why} to pick a preset from; "
                                 f"pass --shape NAME (one of {sorted(PRESETS)})")
    name = known.pop()
    size = next(s for s in sizes if SIZE_PRESETS.get(s) == name)
    return _with_note(PRESETS[name], f"preset {name}, inferred from '{size}B' in the name of {model.hf_path} "
                                     f"(no such folder here)")


def _with_note(shape: ModelShape, source: str) -> tuple[ModelShape, str]:
    note = unsupported_note(shape)
    return shape, source + (f"; {note}" if note else "")


# --------------------------------------------------------------------------------------------- activations

def layer_activation_bytes(d, seq: float, *, tp: int = 1, sp: bool = False, quadratic: bool = True) -> float:
    """Bytes one decoder layer saves for backward, per row of ``seq`` tokens (bf16 actor, no
    recompute).

    ``6·heads·S²`` (the local spec's unfused attention: fp32 softmax output and bf16 probabilities;
    0 with ``quadratic=False``: TE's fused attention or selective recompute) + ``S·(10·ffn +
    16·heads·hd + 8·kv·hd)`` (split over TP) + ``S·20·h`` (norm and residual tensors: split over TP
    only with sequence parallelism). Measured on the CPU build with saved-tensor hooks (bf16 actor,
    S = 256 / 512 / 1024, each dimension varied); the norms then ran unfused in fp32 (hence 20·h) —
    an upper bound for TE's fused norms."""
    h, hq, kvq = d.hidden_size, d.num_attention_heads * d.head_dim, d.num_key_value_heads * d.head_dim
    out = seq * (10 * d.ffn_hidden_size + 16 * hq + 8 * kvq) / tp + seq * 20 * h / (tp if sp else 1)
    if quadratic:
        out += 6 * (d.num_attention_heads / tp) * seq * seq
    return out


def head_activation_bytes(d, seq: float, *, tp: int = 1, vocab: int | None = None) -> float:
    """Per row at the LM head: ``16·S·V/TP`` (vocab-parallel logits, their fp32 copy, the saved
    softmax and the gradients alive at the start of backward) + ``10·S·h``. ``vocab=1``: a reward
    model's score head."""
    V = d.vocab_size if vocab is None else vocab
    return 16 * seq * V / tp + 10 * seq * d.hidden_size


def estimate_bytes(d, layers: int, micro_batch: int, seq_len: int) -> dict[str, float]:
    """Peak GPU memory of a bf16 train step of one actor on one GPU (local spec, no parallelism, no
    recompute), by parts, in bytes — bench/gpu_step.py's plan for how many layers fit.

    state: 18 B/param = bf16 param 2 + fp32 grad buffer 4 (grad_reduce_in_fp32) + fp32 master 4 + Adam m, v 8.
    activations: :func:`layer_activation_bytes` per layer and row, :func:`head_activation_bytes` per row at the
    head, × 1.05. The optimizer step adds a 4 B/param temporary (torch's foreach AdamW: sqrt(v)) after the
    activations are gone. ``d``: anything with ``ModelShape``'s dimension fields and ``params(layers)``.
    """
    P = d.params(layers)
    S = seq_len
    act = ACTIVATION_MARGIN * micro_batch * (layers * layer_activation_bytes(d, S) + head_activation_bytes(d, S))
    state = 18 * P
    # cuBLAS/NCCL workspaces, Megatron's baddbmm buffer
    fixed = FIXED_BYTES + 2 * d.num_attention_heads * S * S * micro_batch
    return {"params": P, "state": state, "activations": act, "total": max(state + act, state + 4 * P) + fixed}


# --------------------------------------------------------------------------------------------- the plan

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
    """Actor state + max(activations, optimizer temporary) + fixed + whatever else stays resident."""
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
    """The engine's max_model_len: the longest GRPO request, or the gate's largest budget (+ its prompt)."""
    stages: tuple[StagePlan, ...]
    rm_server: RMServerPlan | None = None
    """The cascade's own reward-model server on rank 0's GPU, when one runs (``plan_rm.plan_rm_server``)."""

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
    from nemo_cascade.evaluate.suites import get_suite  # torch-free; local: only cascades with a gate need it

    return max(get_suite(name).max_tokens for name in cfg.gate.suites)


def _longest(stage: config.Stage) -> tuple[int, str]:
    if config.samples_on_policy(stage):
        prompt = stage.rollout.max_prompt_tokens
        response = max(p.max_response_tokens for p in config.length_phases(stage))
        return prompt + response, f"{_tokens(prompt + response)} ({_tokens(prompt)}+{_tokens(response)})"
    n = stage.sft_max_tokens if stage.kind == "sft" else stage.rm_max_tokens
    return n, _tokens(n) + (" per row" if stage.kind == "reward_model" else "")


def _tokens(n: int) -> str:
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else str(n)


def _rows_per_step(stage: config.Stage) -> int:
    if config.samples_on_policy(stage):
        return stage.grpo.prompts_per_step * stage.grpo.group_size
    return stage.sft_batch_size if stage.kind == "sft" else 2 * stage.rm_batch_size


def rank_params(d: ModelShape, tp: int, pp: int, rank: int, lm_head: bool = True) -> float:
    """Parameters held by a GPU of pipeline rank ``rank``: its layers' share of TP, the embedding
    (first rank), the final norm and the head (last rank; a tied head is a copy there when pp >
    1)."""
    split, rep = d.layer_params()
    n = d.num_layers // pp * (split / tp + rep)
    embedding = d.vocab_size * d.hidden_size / tp
    if rank == 0:
        n += embedding
    if rank == pp - 1:
        n += d.hidden_size
        if not lm_head:
            n += d.hidden_size
        elif not d.tied_embeddings or pp > 1:
            n += embedding
    return n


def actor_bytes(d: ModelShape, p: config.Parallel, *, seq: int, rows_per_step: int, rank: int, te: bool, dtype_bytes: int,
                lm_head: bool = True) -> dict[str, float]:
    """One actor's memory on a GPU of pipeline rank ``rank`` during a train step, by parts
    (bytes)."""
    P = rank_params(d, p.tp, p.pp, rank, lm_head)
    shard = p.dp * p.cp if p.distributed_optimizer else 1
    optimizer = 12 if dtype_bytes == 2 else 8  # fp32 master + Adam m, v (fp32 params are their own master)
    state = P * (dtype_bytes + 4) + P * optimizer / shard
    S = math.ceil(seq / p.cp)
    mb = p.micro_batch_size
    micro = math.ceil(rows_per_step / (p.dp * mb))
    in_flight = min(p.pp - rank, micro)  # 1F1B: rank r runs pp − r forwards ahead of its first backward
    L = d.num_layers // p.pp
    quadratic = not te and p.recompute != "selective"
    scale = dtype_bytes / 2  # the coefficients are bf16's
    per_layer = scale * layer_activation_bytes(d, S, tp=p.tp, sp=p.sequence_parallel, quadratic=quadratic)
    if p.recompute == "full":  # each layer keeps its input; one layer's activations exist while it is recomputed
        layers = in_flight * L * mb * dtype_bytes * S * d.hidden_size / (p.tp if p.sequence_parallel else 1)
        layers += mb * per_layer
    else:
        layers = in_flight * L * mb * per_layer
    head = mb * head_activation_bytes(d, S, tp=p.tp, vocab=None if lm_head else 1) if rank == p.pp - 1 else 0.0
    act = ACTIVATION_MARGIN * (layers + head)
    # + the local spec's baddbmm buffer
    fixed = FIXED_BYTES + (0 if te else 2 * (d.num_attention_heads / p.tp) * S * S * mb)
    return {"params": P, "state": state, "activations": act, "optimizer_temp": 4 * P / shard, "fixed": fixed,
            "train": state + max(act, 4 * P / shard) + fixed}


def engine_bytes(d: ModelShape, utilization: float, gpu: float, dtype_bytes: int, tp: int = 1) -> dict[str, float]:
    """The colocated engine's share on one GPU: 1/tp of the weights, and the KV cache its budget
    leaves, in tokens of the whole engine (each GPU holds max(1, kv_heads / tp) of a token's KV
    heads)."""
    weights = d.params() * dtype_bytes / tp
    kv = max(utilization * gpu - weights, 0.0)
    per_token = d.kv_bytes_per_token(dtype_bytes) * max(1, d.num_key_value_heads // tp) / d.num_key_value_heads
    return {"budget": utilization * gpu, "weights": weights, "kv": kv, "kv_tokens": int(kv // per_token),
            "kv_per_token": per_token}


def _check_layout_divides(d: ModelShape, p: config.Parallel, engine_tp: int) -> None:
    """The actor's TP/PP and the engine's TP split the model's dimensions evenly (else ConfigError,
    one line)."""
    for name, value, by in (("num_key_value_heads", d.num_key_value_heads, p.tp),
                            ("num_attention_heads", d.num_attention_heads, p.tp),
                            ("vocab_size", d.vocab_size, p.tp), ("intermediate_size", d.ffn_hidden_size, p.tp),
                            ("num_hidden_layers", d.num_layers, p.pp)):
        if value % by:
            field = "pp" if name == "num_hidden_layers" else "tp"
            raise config.ConfigError(f"parallel.{field}={by} must divide the model's {name}={value} ({d.name})")
    if d.num_attention_heads % engine_tp:
        raise config.ConfigError(f"rollout.tensor_parallel_size={engine_tp} must divide the model's "
                                 f"num_attention_heads={d.num_attention_heads} ({d.name})")


def _with_frozen_copies(ranks: list[dict], copies: int, dtype_bytes: int,
                        notes: list[str]) -> list[dict]:
    """Per rank, the actor's memory with ``copies`` more copies of its parameters (the KL reference,
    a distill stage's teachers) in its state; noted when there are any."""
    if not copies:
        return ranks
    notes.append(f"{copies} frozen parameter copies in the actor state (KL reference, teachers)")
    extra = [copies * m["params"] * dtype_bytes for m in ranks]
    return [{**m, "state": m["state"] + x, "train": m["train"] + x} for m, x in zip(ranks, extra)]


# ---------------------------------------------- the cascade's own reward-model server

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
    d, context = plan.shape, plan.engine_context
    weights = d.params(lm_head=False) * plan.dtype_bytes
    need = weights + d.kv_bytes_per_token(plan.dtype_bytes) * context
    share = rm_server_share(left, plan.gpu, len(served))
    return RMServerPlan(cfg.stages[served[-1]].name, cfg.model.dtype, share,
                        need + RM_SERVER_RUNTIME_BYTES, left, context, plan.gpu)



# ---------------------------------------------------------------- the cascade

def plan_cascade(cfg: config.Cascade, gpu_gib: float = 80.0, shape: str | ModelShape | None = None) -> CascadePlan:
    """Every stage's per-GPU estimate on ``cfg.parallel``; raises ConfigError (one line) for what
    cannot be planned: an invalid config, an unknown shape, a layout the shape does not divide."""
    config.validate(cfg)
    if gpu_gib <= 0:
        raise config.ConfigError(f"--gpu-memory-gib: expected > 0, got {gpu_gib}")
    d, source = ((shape, f"given shape {shape.name}") if isinstance(shape, ModelShape)
                 else resolve_shape(cfg.model, shape))
    p = cfg.parallel
    gpu = gpu_gib * GIB
    te = cfg.model.transformer_impl != "local"  # auto = TE on a GPU machine with transformer_engine
    dtype_bytes = 2 if cfg.model.dtype == "bfloat16" else 4
    grpo = [s for s in cfg.stages if config.samples_on_policy(s)]
    gate_on = bool(cfg.gate.suites)
    # One engine serves the cascade, built from the first GRPO stage's rollout (a gate alone: the
    # default's).
    first = grpo[0].rollout if grpo else config.Rollout()
    util = first.gpu_memory_utilization if grpo or gate_on else None
    engine_tp = first.tensor_parallel_size
    _check_layout_divides(d, p, engine_tp)
    engine = engine_bytes(d, util, gpu, dtype_bytes, engine_tp) if util is not None else None
    context = max([_longest(s)[0] for s in grpo] + [_gate_budget(cfg)])
    engine_built = gate_on and cfg.gate.evaluate_base
    stages = []
    for s in cfg.stages:
        seq, seq_text = _longest(s)
        notes: list[str] = []
        lm_head = s.kind != "reward_model"
        ranks = [actor_bytes(d, p, seq=seq, rows_per_step=_rows_per_step(s), rank=r, te=te,
                             dtype_bytes=dtype_bytes, lm_head=lm_head) for r in sorted({0, p.pp - 1})]
        ranks = _with_frozen_copies(ranks, config.frozen_copies(s), dtype_bytes, notes)
        extra = 0.0
        if s.kind == "reward_model":  # the policy actor keeps its parameters and gradient buffer
            policy = max(rank_params(d, p.tp, p.pp, r) for r in {0, p.pp - 1}) * (dtype_bytes + 4)
            extra += policy
            notes.append(f"policy actor resident beside the RM: {policy / GIB:.1f} GiB")
        engine_w = kv = kv_tokens = rollout = None
        if config.samples_on_policy(s):
            engine_w, kv, kv_tokens = engine["weights"], engine["kv"], engine["kv_tokens"]
            rollout = max(m["state"] for m in ranks) + engine["budget"] + FIXED_BYTES
            if s.rollout.gpu_memory_utilization != util:
                notes.append(f"asks gpu_memory_utilization {s.rollout.gpu_memory_utilization}; the engine was "
                             f"built with {util} (the first GRPO stage's)")
            engine_built = True
        elif engine_built and engine is not None:
            notes.append("the engine sleeps while this stage trains (the gate puts it to sleep; the next weight "
                         "push refills it)")
        worst = max(ranks, key=lambda m: m["train"])
        stages.append(StagePlan(
            name=s.name, kind=s.kind, seq=seq, seq_text=seq_text, actor_state=max(m["state"] for m in ranks),
            activations=worst["activations"], train=worst["train"] + extra, engine_weights=engine_w, kv_cache=kv,
            kv_tokens=kv_tokens, rollout=rollout, gpu=gpu, notes=tuple(notes)))
        engine_built = engine_built or gate_on
    plan = CascadePlan(cfg.name, p, d, source, gpu, te, dtype_bytes, util, engine_tp, context, tuple(stages))
    return replace(plan, rm_server=plan_rm_server(cfg, plan))


__all__ = ["PRESETS", "resolve_shape", "shape_from_config", "layer_activation_bytes",
           "head_activation_bytes", "estimate_bytes", "rank_params", "actor_bytes", "engine_bytes", "StagePlan",
           "CascadePlan", "plan_cascade", "GIB", "GPUS_PER_NODE", "RMServerPlan", "rm_server_share",
           "served_reward_models", "plan_rm_server", "RM_SERVER_PROCESS_BYTES",
           "RM_SERVER_RUNTIME_BYTES", "VLLM_DEFAULT_SHARE"]
