"""Typed configuration: frozen dataclasses for a whole cascade, plus `key=value` overrides and validation.

A recipe is a Python function returning a :class:`Cascade`; it states only what differs from these
defaults (``dataclasses.replace``). Nothing here imports torch, megatron or vllm, so configs can be built,
validated and printed anywhere. User mistakes raise :class:`ConfigError` with one line naming the field.
"""
from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, Literal, Optional


class ConfigError(ValueError):
    """A user mistake in a recipe or an override; the message is one line naming the field."""


@dataclass(frozen=True)
class Model:
    hf_path: str = ""
    """HF folder (config.json, *.safetensors, tokenizer). The actor is built from it and vLLM serves it."""
    build: str = ""
    """Instead of reading ``hf_path``: build a random-init model of this named shape (a key of
    ``nemo_cascade.convert.tiny.BUILDERS``, e.g. ``tiny-qwen3``) with a tokenizer trained in code, into
    ``<run>/base_model``. For CPU demos and tests; no download."""
    dtype: Literal["float32", "bfloat16"] = "float32"
    """Parameter/compute dtype of actor and engine. fp32 on CPU; bf16 on GPUs."""


@dataclass(frozen=True)
class Parallel:
    tp: int = 1
    """Tensor-parallel size of the actor."""
    pp: int = 1
    """Pipeline-parallel size of the actor (1F1B schedule)."""
    dp: int = 1
    """Data-parallel size. World size = tp × pp × dp: the number of processes the CLI starts."""
    micro_batch_size: int = 4
    """Sequences per microbatch in the actor's forward/backward."""
    distributed_optimizer: bool = True
    """Shard optimizer state over data-parallel ranks (Megatron's distributed optimizer)."""


@dataclass(frozen=True)
class Actor:
    lr: float = 1e-6
    min_lr: float = 0.0
    lr_schedule: Literal["constant", "cosine", "linear"] = "constant"
    warmup_steps: int = 0
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.95
    """AdamW betas (0.9, 0.95) for every stage — paper §3.1.1 (SFT, T14) and §4.1.2 (RL)."""
    adam_eps: float = 1e-8
    clip_grad: float = 1.0
    seed: int = 1234


@dataclass(frozen=True)
class Rollout:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    """Sample from the k most likely tokens only; -1 disables top-k. Paper: 20 for IF-RL (T16)."""
    max_prompt_tokens: int = 512
    max_response_tokens: int = 256
    stop: tuple[str, ...] = ()
    kv_cache_gib: float = 1.0
    """KV-cache size on CPU engines (VLLM_CPU_KVCACHE_SPACE)."""
    gpu_memory_utilization: float = 0.5
    """Share of GPU memory vLLM may take when colocated with the actor (GPU engines only)."""
    seed: int = 0


@dataclass(frozen=True)
class GRPO:
    """Group-relative policy optimisation. Defaults are the paper's strict on-policy setting (§4.1.2)."""

    group_size: int = 8
    """Samples per prompt (G). Paper: 8 for RLHF/IF/math/code, 16 for SWE (T15–T20)."""
    prompts_per_step: int = 128
    """Prompts per rollout batch; one optimizer step per batch (strict on-policy, §4.1.2)."""
    adv_eps: float = 1e-6
    """Added to the group std in (r − mean)/(std + eps)."""
    loss_aggregation: Literal["token", "sequence"] = "token"
    """token: sum over all valid response tokens of the batch ÷ their count (§4.1.2, DAPO-style);
    sequence: mean over each sequence's tokens, then mean over sequences (bag of tricks, §6.3, T10)."""
    clip_eps_low: float = 0.2
    clip_eps_high: float = 0.28
    """PPO-style clipped ratio bounds. With one update per batch the ratio is 1 and clipping never acts."""
    kl_coef: float = 0.0
    """k3 KL to the reference (the stage's starting weights). Paper: 0; 1e-3 in the bag of tricks (§6.3)."""
    reward_shaping: Literal["none", "zscore_tanh"] = "none"
    """zscore_tanh: rewards → tanh(group z-score) before advantages (bag of tricks, §6.3, T11)."""
    drop_zero_variance_groups: bool = True
    """Drop groups whose rewards are all equal: they carry zero advantage (dynamic filtering, §4.4.2)."""
    overlong: Literal["none", "filter", "zero"] = "none"
    """Truncated samples: filter = leave the loss; zero = reward 0; none = scored as they are (§4.5.2)."""
    refill_max_rounds: int = 0
    """Dynamic sampling (DAPO-style, §4.4.2): after zero-variance groups are dropped, generate for as many more
    prompts as informative groups are missing, up to this many extra rounds, so the update sees
    ``prompts_per_step`` informative groups. 0 = drop only (the batch shrinks). Needs drop_zero_variance_groups."""
    epoch_filter: bool = False
    """Epoch-level prompt filtering (Math RL, §4.5.2): a prompt whose latest group was 0% or 100% correct
    (correct = reward > 0) leaves the following epochs, each epoch re-admitted with the probabilities below."""
    readmit_unsolved: float = 0.10
    """Per-epoch probability that a filtered-out 0%-correct prompt is re-admitted (§4.5.2: 0.10)."""
    readmit_solved: float = 0.01
    """Per-epoch probability that a filtered-out 100%-correct prompt is re-admitted (§4.5.2: 0.01)."""


@dataclass(frozen=True)
class Data:
    source: str = ""
    """A jsonl/parquet path, or ``synthetic:NAME`` for a generator in nemo_cascade.data.synthetic."""
    size: int = 0
    """Synthetic sets: number of rows to generate. File sets: 0 = all rows."""
    split: Literal["train", "test"] = "train"
    seed: int = 0
    max_bad_rows: int = 0
    """Rows that fit no schema of the stage's domain (or whose label fails its check) are skipped and counted up
    to this many; one more stops loading with the first bad row's file, line and field. 0 = strict."""


@dataclass(frozen=True)
class Reward:
    """How a GRPO stage scores its samples (nemo_cascade.rewards; paper §4.3–4.7)."""
    code_switch_penalty: str = "auto"
    """Reward of a language-mixing sample: a number (e.g. ``-1``), ``batch_min_minus_10``, ``none``, or ``auto``
    = the paper's value for the domain: math −1 (§4.5), code 0 (§4.6), rlhf batch min − 10 (§4.3.2), else none."""
    answer_pattern: Optional[str] = None
    """math: where the final answer is. None = the last ``\\boxed{}`` (§4.5); ``gsm8k``, ``answer_is`` or a regex."""
    verify_timeout_s: float = 5.0
    """math: hard wall time per sample in math-verify (its worker is killed after it)."""
    workers: int = 0
    """Verifier processes (math) or sandbox runs in flight (code) per rank; 0 = the cores this rank may use."""
    sandbox: Literal["bwrap", "unsafe"] = "bwrap"
    """code: run model programs under bubblewrap; ``unsafe`` runs them unsandboxed (trusted code only)."""
    reward_model_url: str = ""
    """rlhf (and ifeval with if_rm_bonus): a vLLM server of the Bradley–Terry reward model (§4.2)."""
    reward_model_stage: str = ""
    """Instead of a URL: the name of an earlier ``reward_model`` stage of this cascade, whose exported RM the
    cascade serves (a local vLLM server) for this stage — the RM trained in §4.2 scores the RLHF stage (§4.3)."""
    judge_url: str = ""
    """swe: a vLLM server of the judge LM for P("YES") on partial patches (§4.7, Eq. 2); empty = lexical."""
    if_rm_bonus: bool = False
    """ifeval, thinking models: R_IF + sigmoid(group-normalised RM score) when R_IF = 1, else 0 (§4.4.2)."""


@dataclass(frozen=True)
class LengthPhase:
    """One phase of a response-length curriculum (Math RL, §4.5.2, T17–T18: 24K filter → 32K zero → 40K zero).
    On the command line: ``stages.NAME.length_curriculum=STEPS:TOKENS:OVERLONG,...``."""
    steps: int
    max_response_tokens: int
    overlong: Literal["none", "filter", "zero"] = "none"


@dataclass(frozen=True)
class Boundary:
    """What a stage takes over from the stage before it. Its weights always come from the previous policy
    stage's final checkpoint (§4.1); when KL is on, the reference is that checkpoint too. LR warm-up is
    ``actor.warmup_steps`` of the new stage."""
    optimizer: Literal["reset", "carry"] = "reset"
    """reset: a fresh AdamW (zero moments) per stage; carry: keep the previous stage's Adam moments and step
    count, with this stage's LR schedule (useful when one stage is split in two)."""
    data: Literal["reset", "continue"] = "reset"
    """reset: the prompt stream starts at epoch 0; continue: pick up the previous stage's stream position and
    epoch-filter state (both stages must read the same prompt set)."""


@dataclass(frozen=True)
class Gate:
    """The forgetting gate (§4.1.1, T2/T4–T8): the same eval suites after every stage, a stage × benchmark
    matrix, and a per-benchmark regression tolerance (evaluate/gate.py)."""
    suites: tuple[str, ...] = ()
    """Suites of nemo_cascade.evaluate.suites; empty = no evaluation between stages."""
    samples: int = 0
    """K per item; 0 = the suite's default (paper App. B)."""
    max_tokens: int = 0
    """Response budget; 0 = the suite's default, cut to the engine's context."""
    limit: int = 0
    """First N items of each suite; 0 = all."""
    temperature: float = 0.6
    """App. B."""
    top_p: float = 0.95
    """App. B."""
    evaluate_base: bool = True
    """Also evaluate the starting model, so the first stage has a row to be compared with."""
    min_drop: float = 0.02
    """A suite regresses when it falls below its best earlier score by more than this (and by more than
    ``sigmas`` standard errors); the paper's largest per-stage drops are 2–4 points (PAPER.md §4)."""
    sigmas: float = 2.0
    tolerance: tuple[str, ...] = ()
    """Per-benchmark ``SUITE=DROP`` overrides of min_drop, e.g. ``("aime25=0.05",)``."""
    on_regression: Literal["warn", "stop"] = "warn"
    """warn: log and record it in the manifest and report; stop: end the cascade after that stage."""


@dataclass(frozen=True)
class Stage:
    name: str = ""
    kind: Literal["sft", "grpo", "reward_model"] = "grpo"
    """``reward_model``: a Bradley–Terry RM on preference pairs (§4.2), trained from the last policy's weights
    and exported as an HF *ForSequenceClassification folder; it is not handed on as the next stage's policy."""
    domain: str = "math"
    """Reward domain (GRPO) — a key of nemo_cascade.rewards.REWARDS."""
    data: Data = field(default_factory=Data)
    steps: int = 10
    mode: Literal["think", "no_think", "half"] = "no_think"
    """Thinking mode of the chat template (` /think` or ` /no_think` per user turn, §3.1.2). ``half`` (GRPO
    only): half of every batch's prompts in each mode — the unified model's RLHF (§4.3.2, Fig. 9)."""
    actor: Actor = field(default_factory=Actor)
    rollout: Rollout = field(default_factory=Rollout)
    grpo: GRPO = field(default_factory=GRPO)
    reward: Reward = field(default_factory=Reward)
    length_curriculum: tuple[LengthPhase, ...] = ()
    """GRPO: consecutive phases whose steps sum to ``steps``; each phase's max_response_tokens and overlong
    replace rollout.max_response_tokens and grpo.overlong for its steps (§4.5.2). Empty = one phase."""
    sft_batch_size: int = 32
    """SFT: sequences per optimizer step."""
    sft_max_tokens: int = 512
    """SFT: prompt + response tokens per sequence (longer rows are truncated)."""
    rm_batch_size: int = 32
    """reward_model: preference pairs per optimizer step (paper §4.2: 256; LR 2e-6 via actor.lr, 1 epoch)."""
    rm_max_tokens: int = 512
    """reward_model: tokens per conversation (prompt + response); longer ones keep their last tokens."""
    extra_data: tuple[Data, ...] = ()
    """SFT: more sources mixed into ``data`` (rows concatenated, then shuffled together) — the multi-domain SFT
    blend of §3 in one stage."""
    boundary: Boundary = field(default_factory=Boundary)
    checkpoint_every: int = 25
    """Save a resumable checkpoint (weights, optimizer, scheduler, RNG, data position) every N steps; a re-run
    of an interrupted stage continues from the newest one. 0 = only the stage's final export."""


@dataclass(frozen=True)
class Cascade:
    name: str = "run"
    model: Model = field(default_factory=Model)
    parallel: Parallel = field(default_factory=Parallel)
    stages: tuple[Stage, ...] = ()
    run_root: str = "runs"
    seed: int = 1234
    gate: Gate = field(default_factory=Gate)
    keep_checkpoints: int = 2
    """Resumable checkpoints kept per stage (older ones are deleted once a newer one is complete)."""
    chat_style: Literal["cascade1", "cascade2"] = "cascade1"
    """Chat template of every stage (nemo_cascade.data.chat): cascade1 = ChatML with ` /think` or ` /no_think`
    on each user turn and no empty think block (§3.1.2); cascade2 = no flags, empty ``<think></think>`` for
    non-thinking ([P2] §3.1.2). One per cascade: SFT teaches the template the RL stages then prompt with."""
    wandb: bool = False
    """Also log to Weights & Biases (set WANDB_MODE=offline without network). metrics.jsonl is always written."""


# ----------------------------------------------------------------------------------------- overrides

def _field_types(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _coerce(value: str, tp: Any, where: str) -> Any:
    """Parse a command-line string as `tp`; raise ConfigError naming `where` on failure."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise ConfigError(f"{where}: expected one of {list(choices)}, got {value!r}")
        return value
    if origin is typing.Union:  # Optional[X]
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value.lower() in ("none", "null"):
            return None
        return _coerce(value, args[0], where)
    if origin is tuple and typing.get_args(tp)[0] is LengthPhase:
        return tuple(_length_phase(item, where) for item in value.split(",") if item)
    if origin is tuple and is_dataclass(typing.get_args(tp)[0]):
        raise ConfigError(f"{where}: a list of {typing.get_args(tp)[0].__name__} sections; set it in a recipe")
    if origin is tuple:
        return tuple(s for s in value.split(",") if s) if value else ()
    try:
        if tp is bool:
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if tp is int:
            return int(value)
        if tp is float:
            return float(value)
        if tp is str:
            return value
    except ValueError:
        pass
    raise ConfigError(f"{where}: expected {getattr(tp, '__name__', tp)}, got {value!r}")


def _length_phase(item: str, where: str) -> LengthPhase:
    """``STEPS:TOKENS:OVERLONG`` (OVERLONG optional, default none) → LengthPhase."""
    parts = item.split(":")
    if len(parts) not in (2, 3):
        raise ConfigError(f"{where}: expected STEPS:TOKENS:OVERLONG,..., got {item!r}")
    overlong = _coerce(parts[2] if len(parts) == 3 else "none", Literal["none", "filter", "zero"], where)
    return LengthPhase(_coerce(parts[0], int, where), _coerce(parts[1], int, where), overlong)


def _stage_index(cfg: Cascade, key: str, where: str) -> int:
    names = [s.name for s in cfg.stages]
    if key in names:
        return names.index(key)
    if key.isdigit() and int(key) < len(cfg.stages):
        return int(key)
    raise ConfigError(f"{where}: no stage {key!r}; stages are {names}")


def _set(obj: Any, path: list[str], value: str, where: str, root: Cascade) -> Any:
    if isinstance(obj, tuple):  # stages.<name|index>.…
        idx = _stage_index(root, path[0], where)
        items = list(obj)
        items[idx] = _set(items[idx], path[1:], value, where, root)
        return tuple(items)
    if not is_dataclass(obj):
        raise ConfigError(f"{where}: {type(obj).__name__} has no sub-fields")
    types = _field_types(type(obj))
    name = path[0]
    if name not in types:
        raise ConfigError(f"{where}: unknown key {name!r}; expected one of {sorted(types)}")
    if len(path) > 1 and isinstance(getattr(obj, name), tuple) and name != "stages":
        raise ConfigError(f"{where}: set {name!r} as a whole ({'.'.join(where.split('.')[:-len(path) + 1])}=...)")
    if len(path) == 1:
        if is_dataclass(getattr(obj, name)) or isinstance(getattr(obj, name), tuple) and name == "stages":
            raise ConfigError(f"{where}: {name!r} is a section; set one of its fields ({where}.FIELD=VALUE)")
        return replace(obj, **{name: _coerce(value, types[name], where)})
    return replace(obj, **{name: _set(getattr(obj, name), path[1:], value, where, root)})


def apply_overrides(cfg: Cascade, overrides: list[str]) -> Cascade:
    """Apply ``a.b.c=value`` strings. ``stages.NAME.…`` (or an index) addresses one stage;
    ``stages.*.…`` addresses every stage."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r}: expected KEY=VALUE")
        key, value = item.split("=", 1)
        path = key.split(".")
        if path[0] == "stages" and len(path) > 2 and path[1] == "*":
            for s in cfg.stages:
                cfg = _set(cfg, ["stages", s.name, *path[2:]], value, key, cfg)
        else:
            cfg = _set(cfg, path, value, key, cfg)
    return validate(cfg)


# ---------------------------------------------------------------------------------------- validation

def validate(cfg: Cascade, world_size: Optional[int] = None) -> Cascade:
    """Check values that types cannot express; raise ConfigError with the offending field."""
    p = cfg.parallel
    for name in ("tp", "pp", "dp", "micro_batch_size"):
        if getattr(p, name) < 1:
            raise ConfigError(f"parallel.{name}: expected an integer >= 1, got {getattr(p, name)}")
    if world_size is not None and world_size != p.tp * p.pp * p.dp:
        raise ConfigError(f"parallel: tp × pp × dp = {p.tp}×{p.pp}×{p.dp} must equal the world size {world_size}")
    if bool(cfg.model.hf_path) == bool(cfg.model.build):
        raise ConfigError("model: set exactly one of model.hf_path (an HF folder) and model.build (a tiny shape)")
    if not cfg.stages:
        raise ConfigError("stages: a cascade needs at least one stage")
    names = [s.name for s in cfg.stages]
    for i, s in enumerate(cfg.stages):
        where = f"stages.{s.name or i}"
        if not s.name or names.count(s.name) > 1:
            raise ConfigError(f"{where}.name: every stage needs a unique non-empty name, got {names}")
        if s.kind not in STAGE_KINDS:
            raise ConfigError(f"{where}.kind: unknown stage kind {s.kind!r}; expected one of {list(STAGE_KINDS)}")
        _validate_handoff(cfg, i, where)
        if s.steps < 1:
            raise ConfigError(f"{where}.steps: expected >= 1, got {s.steps}")
        if not s.data.source:
            raise ConfigError(f"{where}.data.source: expected a file path or synthetic:NAME")
        if s.data.max_bad_rows < 0:
            raise ConfigError(f"{where}.data.max_bad_rows: expected >= 0, got {s.data.max_bad_rows}")
        if s.mode == "half" and s.kind != "grpo":
            raise ConfigError(f"{where}.mode: 'half' splits GRPO batches (§4.3.2); a {s.kind} stage needs think "
                              f"or no_think")
        if s.kind == "grpo":
            g = s.grpo
            if g.group_size < 2:
                raise ConfigError(f"{where}.grpo.group_size: GRPO needs >= 2 samples per prompt, got {g.group_size}")
            if g.prompts_per_step < 1:
                raise ConfigError(f"{where}.grpo.prompts_per_step: expected >= 1, got {g.prompts_per_step}")
            r = s.rollout
            if r.temperature <= 0:
                raise ConfigError(f"{where}.rollout.temperature: RL sampling needs > 0, got {r.temperature}")
            if not 0 < r.top_p <= 1:
                raise ConfigError(f"{where}.rollout.top_p: expected in (0, 1], got {r.top_p}")
            if r.max_response_tokens < 1:
                raise ConfigError(f"{where}.rollout.max_response_tokens: expected >= 1")
            _validate_reward(s, where)
            _validate_sampling_filters(s, where)
        if s.kind == "reward_model":
            _validate_reward_model(s, p, where)
        if s.actor.lr < 0:
            raise ConfigError(f"{where}.actor.lr: expected >= 0, got {s.actor.lr}")
    _validate_gate(cfg.gate)
    if cfg.keep_checkpoints < 1:
        raise ConfigError(f"keep_checkpoints: expected >= 1, got {cfg.keep_checkpoints}")
    return cfg


STAGE_KINDS = ("sft", "grpo", "reward_model")


def _validate_handoff(cfg: Cascade, i: int, where: str) -> None:
    """What a stage takes from earlier stages: its checkpoint cadence, the data-position hand-over, a served
    reward model, an SFT mixture."""
    s = cfg.stages[i]
    if s.checkpoint_every < 0:
        raise ConfigError(f"{where}.checkpoint_every: expected >= 0 (0 = no mid-stage checkpoints)")
    if s.extra_data and s.kind != "sft":
        raise ConfigError(f"{where}.extra_data: only SFT stages mix sources; a {s.kind} stage reads data")
    for j, d in enumerate(s.extra_data):
        if not d.source:
            raise ConfigError(f"{where}.extra_data.{j}.source: expected a file path or synthetic:NAME")
    if s.boundary.data == "continue":
        before = [p for p in cfg.stages[:i] if p.kind == s.kind]
        if not before or before[-1].data != s.data:
            raise ConfigError(f"{where}.boundary.data: 'continue' needs an earlier {s.kind} stage with the same data")
    if s.boundary.optimizer == "carry":
        prev = cfg.stages[i - 1] if i else None
        if prev is None or prev.kind == "reward_model" or s.kind == "reward_model":
            raise ConfigError(f"{where}.boundary.optimizer: 'carry' needs a policy stage right before this policy "
                              f"stage (a reward model trains its own optimizer)")
        fixed = ("adam_beta1", "adam_beta2", "adam_eps", "clip_grad")  # the scheduler sets lr and wd
        changed = [f for f in fixed if getattr(prev.actor, f) != getattr(s.actor, f)]
        if changed:
            raise ConfigError(f"{where}.boundary.optimizer: 'carry' keeps the optimizer, so actor.{changed[0]} must "
                              f"equal stage {prev.name}'s")
    rm_stage = s.reward.reward_model_stage
    if rm_stage and rm_stage not in [p.name for p in cfg.stages[:i] if p.kind == "reward_model"]:
        raise ConfigError(f"{where}.reward.reward_model_stage: {rm_stage!r} is not an earlier reward_model stage; "
                          f"those are {[p.name for p in cfg.stages[:i] if p.kind == 'reward_model']}")


def _validate_gate(g: Gate) -> None:
    if min(g.samples, g.max_tokens, g.limit) < 0:
        raise ConfigError("gate: samples, max_tokens and limit must be >= 0 (0 = the suite's default)")
    if g.min_drop < 0 or g.sigmas < 0:
        raise ConfigError("gate: min_drop and sigmas must be >= 0")
    for item in g.tolerance:
        suite, sep, drop = item.partition("=")
        try:
            ok = bool(sep) and suite in g.suites and float(drop) >= 0
        except ValueError:
            ok = False
        if not ok:
            raise ConfigError(f"gate.tolerance: expected SUITE=DROP with SUITE one of gate.suites {list(g.suites)} "
                              f"and DROP >= 0, got {item!r}")


def tolerances(g: Gate) -> dict[str, float]:
    """Per-suite ``min_drop``: gate.tolerance overrides, else gate.min_drop."""
    custom = {k: float(v) for k, _, v in (t.partition("=") for t in g.tolerance)}
    return {suite: custom.get(suite, g.min_drop) for suite in g.suites}


def _validate_reward_model(s: Stage, p: Parallel, where: str) -> None:
    for name in ("rm_batch_size", "rm_max_tokens"):
        if getattr(s, name) < 1:
            raise ConfigError(f"{where}.{name}: expected >= 1, got {getattr(s, name)}")
    if p.micro_batch_size % 2:
        # A pair's chosen and rejected rows must meet in one microbatch for the BT loss.
        raise ConfigError(f"parallel.micro_batch_size: a reward_model stage needs an even number of sequences "
                          f"per microbatch (chosen + rejected), got {p.micro_batch_size}")


def _validate_sampling_filters(s: Stage, where: str) -> None:
    g, r = s.grpo, s.rollout
    if r.top_k == 0 or r.top_k < -1:
        raise ConfigError(f"{where}.rollout.top_k: expected -1 (off) or >= 1, got {r.top_k}")
    if g.refill_max_rounds < 0:
        raise ConfigError(f"{where}.grpo.refill_max_rounds: expected >= 0, got {g.refill_max_rounds}")
    if g.refill_max_rounds and not g.drop_zero_variance_groups:
        raise ConfigError(f"{where}.grpo.refill_max_rounds: refilling replaces dropped groups; it needs "
                          f"grpo.drop_zero_variance_groups=true")
    for name in ("readmit_unsolved", "readmit_solved"):
        if not 0 <= getattr(g, name) <= 1:
            raise ConfigError(f"{where}.grpo.{name}: expected a probability in [0, 1], got {getattr(g, name)}")
    if g.epoch_filter and s.domain == "rlhf":
        raise ConfigError(f"{where}.grpo.epoch_filter: needs a pass/fail reward (correct = reward > 0); "
                          f"rlhf rewards are reward-model scores")
    for k, phase in enumerate(s.length_curriculum):
        if phase.steps < 1 or phase.max_response_tokens < 1:
            raise ConfigError(f"{where}.length_curriculum.{k}: steps and max_response_tokens must be >= 1, "
                              f"got {phase.steps}:{phase.max_response_tokens}")
        if phase.overlong not in ("none", "filter", "zero"):
            raise ConfigError(f"{where}.length_curriculum.{k}.overlong: expected none, filter or zero, "
                              f"got {phase.overlong!r}")
    if s.length_curriculum and sum(p.steps for p in s.length_curriculum) != s.steps:
        raise ConfigError(f"{where}.length_curriculum: phase steps sum to "
                          f"{sum(p.steps for p in s.length_curriculum)}, expected steps={s.steps}")


def length_phases(stage: Stage) -> tuple[LengthPhase, ...]:
    """The stage's response-length phases (§4.5.2); without a curriculum, one phase of rollout/grpo settings."""
    return stage.length_curriculum or (
        LengthPhase(stage.steps, stage.rollout.max_response_tokens, stage.grpo.overlong),)


def phase_at(stage: Stage, step: int) -> tuple[int, LengthPhase]:
    """``(index, phase)`` in force at ``step`` (phases run back to back in declaration order)."""
    end = 0
    for k, phase in enumerate(length_phases(stage)):
        end += phase.steps
        if step < end:
            return k, phase
    raise ValueError(f"step {step} is past the stage's {end} steps")


REWARD_DOMAINS = ("math", "ifeval", "code", "swe", "rlhf")
"""Keys of nemo_cascade.rewards.REWARDS, listed here so configs validate without importing the verifiers."""


def _validate_reward(s: Stage, where: str) -> None:
    rw = s.reward
    if s.domain not in REWARD_DOMAINS:
        raise ConfigError(f"{where}.domain: expected one of {list(REWARD_DOMAINS)}, got {s.domain!r}")
    penalty = rw.code_switch_penalty
    if penalty not in ("auto", "none", "batch_min_minus_10"):
        try:
            float(penalty)
        except ValueError:
            raise ConfigError(f"{where}.reward.code_switch_penalty: expected a number, 'batch_min_minus_10', "
                              f"'none' or 'auto', got {penalty!r}") from None
    if rw.verify_timeout_s <= 0:
        raise ConfigError(f"{where}.reward.verify_timeout_s: expected > 0, got {rw.verify_timeout_s}")
    if rw.workers < 0:
        raise ConfigError(f"{where}.reward.workers: expected >= 0 (0 = all cores), got {rw.workers}")
    needs_rm = "the rlhf domain" if s.domain == "rlhf" else "if_rm_bonus" if rw.if_rm_bonus else ""
    if needs_rm and not (rw.reward_model_url or rw.reward_model_stage):
        raise ConfigError(f"{where}.reward.reward_model_url: {needs_rm} needs a reward model: a server URL, or "
                          f"reward.reward_model_stage = an earlier reward_model stage to serve")
    if rw.reward_model_url and rw.reward_model_stage:
        raise ConfigError(f"{where}.reward.reward_model_stage: set it or reward.reward_model_url, not both")


# ---------------------------------------------------------------------------------------- (de)serialise

def to_dict(cfg: Any) -> Any:
    if is_dataclass(cfg):
        return {f.name: to_dict(getattr(cfg, f.name)) for f in fields(cfg)}
    if isinstance(cfg, tuple):
        return [to_dict(x) for x in cfg]
    return cfg


def from_dict(cls, data: dict, where: str = "") -> Any:
    """Inverse of :func:`to_dict`; unknown keys raise ConfigError (used to read a run's config.json)."""
    types = _field_types(cls)
    unknown = set(data) - set(types)
    if unknown:
        raise ConfigError(f"{where or cls.__name__}: unknown key(s) {sorted(unknown)}")
    kwargs = {}
    for name, value in data.items():
        tp = types[name]
        if is_dataclass(tp):
            kwargs[name] = from_dict(tp, value, f"{where}.{name}".strip("."))
        elif name == "stages":
            kwargs[name] = tuple(from_dict(Stage, v, f"stages.{i}") for i, v in enumerate(value))
        elif typing.get_origin(tp) is tuple and is_dataclass(typing.get_args(tp)[0]):
            item = typing.get_args(tp)[0]
            kwargs[name] = tuple(from_dict(item, v, f"{where}.{name}.{i}".strip(".")) for i, v in enumerate(value))
        elif typing.get_origin(tp) is tuple:
            kwargs[name] = tuple(value)
        else:
            kwargs[name] = value
    return cls(**kwargs)


def dumps(cfg: Cascade) -> str:
    return json.dumps(to_dict(cfg), indent=2, sort_keys=False)


def stage_by_name(cfg: Cascade, name: str) -> Stage:
    for s in cfg.stages:
        if s.name == name:
            return s
    raise ConfigError(f"--stage: no stage {name!r}; stages are {[s.name for s in cfg.stages]}")


__all__ = [
    "ConfigError", "Model", "Parallel", "Actor", "Rollout", "GRPO", "Data", "Reward", "LengthPhase", "Boundary",
    "Gate", "STAGE_KINDS", "tolerances", "Stage",
    "Cascade", "length_phases", "phase_at", "apply_overrides", "validate", "to_dict", "from_dict", "dumps",
    "stage_by_name", "dataclasses",
]
