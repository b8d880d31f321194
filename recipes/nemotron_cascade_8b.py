"""Nemotron-Cascade-8B, the unified thinking/instruct model (§1; the model card [MC8]), at the
paper's scale:

    [SFT 16K → SFT 32K] → RLHF → IF-RL (IFEval, then IFBench taxonomy) → math RL → code RL → SWE RL

Each stage starts from the previous one's checkpoint (§4.1). ``recipe()`` is the RL cascade from an
SFT checkpoint (the released ``Nemotron-Cascade-8B-SFT`` of [MCI], or your own); ``with_sft()`` adds
the two SFT stages of Table 14 in front and starts from Qwen3-8B-Base. Both read the environment
when called:

- ``NEMO_CASCADE_MODELS`` (default ``models``): HF folders ``Qwen3-8B-Base`` and
  ``Nemotron-Cascade-8B-SFT``;
- ``NEMO_CASCADE_DATA`` (default ``data/nemotron-cascade``): one jsonl/parquet file per stage
  (docs/recipes.md says where each comes from and how to fetch it);
- ``NEMO_CASCADE_RM_URL``: the served 72B Bradley–Terry RM (recipes/reward_model_72b.py, §4.2) for
  RLHF and the thinking models' IF reward; ``NEMO_CASCADE_JUDGE_URL``: the served Kimi-Dev-72B judge
  of SWE RL (Eq. 2).

A paper stage whose response length, overlong policy or temperature changes part-way (math 24K →
32K → 40K at T=1.0, 1.0, 0.8, T17; code 44K → 48K at T=1.0 → 0.8, T19) is one stage with a length
curriculum whose phases carry those settings (``LengthPhase``). One whose prompt limit changes (SWE
input 16K → 24K, T20) is two stages: a phase cannot change the prompt limit, which decides the
prompt set. The first part runs no forgetting gate (``evaluate=False``: the paper reports one row
per stage, T2) and the second carries the optimizer over (``boundary.optimizer="carry"``). IF-RL's
two sub-stages (IFEval, then IFBench taxonomy, T16) are two prompt sets: two stages, the first
without a gate.

"12K", "24K", … are multiples of 1024 tokens (the native context "32K" is 32768, [MCI]). Every
number cites its source; "ours" marks what the paper does not report. The other paper recipes
(8B-Thinking, 14B-Thinking) are built from the stage builders below with their own numbers.
docs/recipes.md tabulates all of it.
"""
from __future__ import annotations

import os
from dataclasses import replace

from nemo_cascade.config import (GRPO, Actor, Boundary, Cascade, Data, Gate, LengthPhase, Model,
                                 Parallel, Reward, Rollout, Stage)

K = 1024
"""The paper's "K" of token lengths (24K = 24576)."""

CARRY = Boundary(optimizer="carry")
"""The second part of one paper stage split in two (SWE input 16K → 24K, T20): Adam moments and step
count go on (the paper numbers the parts' steps continuously, 0–30 and 30–60). The longer prompt
limit admits more prompts, a new prompt set, so the prompt stream starts afresh."""

GATE_SUITES = ("ifeval", "ifbench", "aime24", "aime25", "humaneval", "mbpp", "swe")
"""The forgetting gate after every stage (§4.1.1, T2/T4–T8), each suite with the paper's App. B
decoding and its avg@K. LiveCodeBench, MMLU(-Pro), GPQA and ArenaHard have no suite here:
HumanEval/MBPP stand in for code. The RM-scored ``rlhf`` suite is left out: it needs the 72B RM
served for the whole cascade, not only for RLHF (add it with ``gate.reward_model_url=file:URLFILE``
where that server stays up)."""


def models_dir() -> str:
    return os.environ.get("NEMO_CASCADE_MODELS", "models")


def data_dir() -> str:
    return os.environ.get("NEMO_CASCADE_DATA", "data/nemotron-cascade")


def rm_url() -> str:
    """The 72B Bradley–Terry RM (§4.2) served with ``vllm serve RM --runner pooling``; a placeholder
    by default."""
    return os.environ.get("NEMO_CASCADE_RM_URL", "http://localhost:8000")


def judge_url() -> str:
    """Kimi-Dev-72B served with ``vllm serve`` for SWE RL's P("YES") (§4.7, Eq. 2); a placeholder by
    default."""
    return os.environ.get("NEMO_CASCADE_JUDGE_URL", "http://localhost:8001")


def data(path: str, **fields) -> Data:
    return Data(source=f"{data_dir()}/{path}", **fields)


# ---------------------------------------------------------------------------------------- SFT (T14)

def sft_stages(steps: tuple[int, int], lrs: tuple[float, float]) -> tuple[Stage, Stage]:
    """The two SFT stages of §3.1.1 / T14 (same hyperparameters for the unified and thinking
    models).

    Rows carry their own mode: a user turn with ``"mode": "no_think"`` gets `` /no_think`` (§3.1.2);
    the rest are thinking rows, which is most of the data (reasoning, tool calling and SWE are
    thinking only, §3.2–3.3)."""
    stage1, stage2 = steps
    lr1, lr2 = lrs
    actor = Actor(lr_schedule="cosine", min_lr=0.0,  # T14: cosine to 0
                  weight_decay=1e-4)  # T14; AdamW β = (0.9, 0.95) is the Actor default
    # §3.2: 2.8M general + 1.2M knowledge samples, both stages
    general = data("sft-stage-1/general.jsonl")
    sft1 = Stage(
        name="sft_16k", kind="sft", mode="think",
        steps=stage1,  # T14: 1 epoch = 20K (8B) / 22K (14B) steps
        data=general,
        extra_data=(data("sft-stage-1/math.jsonl"),      # §3.3: 2.77M samples (R1, ≤16K)
                    data("sft-stage-1/code.jsonl"),      # §3.3: 1.42M samples
                    data("sft-stage-1/science.jsonl")),  # §3.3: 289K samples
        sft_batch_size=256,    # T14: global batch 256
        sft_max_tokens=16 * K,  # T14: stage 1 is 16K
        # T14 max LR; warm-up not reported: ours, 1%
        actor=replace(actor, lr=lr1, warmup_steps=stage1 // 100),
        checkpoint_every=500,  # ours: an 8B checkpoint with Adam state is ~100 GB
    )
    sft2 = replace(
        sft1, name="sft_32k", steps=stage2,  # T14: 1 epoch = 32K (8B) / 41K (14B) steps
        data=general,  # §3.1.1: stage 2 re-uses the general data
        # §3.3: 1.88M samples (R1-0528, ≤32K)
        extra_data=(data("sft-stage-2/math.jsonl"),
                    # §3.3: 1.39M samples
                    data("sft-stage-2/code.jsonl"),
                    # §3.3: 345K samples, upsampled 2×
                    data("sft-stage-2/science.jsonl", repeat=2),
                    # §3.3: 310K conversations, stage 2 only
                    data("sft-stage-2/tool_calling.jsonl"),
                    # §3.3: Agentless SWE, upsampled 3× in stage 2
                    data("sft-swe/swe.jsonl", repeat=3)),
        sft_max_tokens=32 * K,  # T14: stage 2 is 32K
        actor=replace(actor, lr=lr2, warmup_steps=stage2 // 100),
    )
    return sft1, sft2


def thinking_sft(stages: tuple[Stage, Stage]) -> tuple[Stage, ...]:
    """The SFT stages of a thinking-only model (8B-Thinking, 14B-Thinking): the general data's
    thinking answers only (its rows answer in both modes, §3.2; the other sources are thinking
    only). T8's 8B-Thinking starts from another SFT than the unified model (SWE-Verified 30.2 vs
    26.1); docs/recipes.md, "Ambiguities, decided"."""
    return tuple(replace(s, data=replace(s.data, keep_mode="think")) for s in stages)


# ------------------------------------------------------------------------------------- RL (T15–T20)

RL_ACTOR = Actor(lr=2e-6)
"""T15–T17: 2e-6. AdamW β = (0.9, 0.95) (§4.1.2) is the default; constant LR, no warm-up, no weight
decay and gradient clipping 1.0 are not reported (ours: the defaults)."""

RL_GRPO = GRPO(group_size=8, prompts_per_step=128, drop_zero_variance_groups=False)
"""T15–T19: G = 8; 128 prompts per step for math/code (RLHF/IF: 256). Strict on-policy GRPO with
token-level loss, KL 0, no reward shaping (§4.1.2) are the defaults. Groups with equal rewards stay
in the token mean: the paper filters them only in IF-RL (§4.4.2)."""

RL_ROLLOUT = Rollout(top_p=0.95)
"""T15–T20: top-p 0.95 in every stage; top-k off except IF-RL."""


def rl_stage(name: str, domain: str, source: str | Data, steps: int, mode: str,
             **sections) -> Stage:
    return Stage(name=name, kind="grpo", domain=domain,
                 data=data(source) if isinstance(source, str) else source, steps=steps, mode=mode,
                 **{"actor": RL_ACTOR, "grpo": RL_GRPO, **sections})


def with_phases(stage: Stage, phases: tuple[LengthPhase, ...]) -> Stage:
    """``stage`` over ``phases`` run back to back (§4.5.2): its steps are theirs added up, its
    rollout budget and overlong policy the first phase's (later phases set their own, and their
    temperature where they change it). One phase is no curriculum."""
    first = phases[0]
    return replace(stage, steps=sum(p.steps for p in phases),
                   rollout=replace(stage.rollout, max_response_tokens=first.max_response_tokens),
                   grpo=replace(stage.grpo, overlong=first.overlong),
                   length_curriculum=phases if len(phases) > 1 else ())


def rlhf(steps: int, mode: str) -> Stage:
    """RLHF (§4.3, T15) on the 72B RM's score of the post-``</think>`` answer (§4.3.2)."""
    return rl_stage(
        # §4.3.1: RM prompts without math / competitive code
        "rlhf", "rlhf", "rlhf/prompts.jsonl", steps, mode,
        grpo=replace(RL_GRPO, prompts_per_step=256),  # T15: 256 × 8 (the text says 128)
        rollout=replace(RL_ROLLOUT, temperature=0.6,  # T15: 0.6 / 0.95
                        max_prompt_tokens=4 * K,      # not reported: ours
                        # T15: 12K, no overlong filtering (grpo.overlong none)
                        max_response_tokens=12 * K),
        # §4.2–4.3: the 72B Bradley–Terry RM, no shaping
        reward=Reward(reward_model_url=rm_url(),
                      code_switch_penalty="batch_min_minus_10"))  # §4.3.2


def if_rl(name: str, path: str, steps: int, mode: str, max_response: int, overlong: str,
          rm_bonus: bool, evaluate: bool = True) -> Stage:
    """One IF-RL sub-stage (§4.4, T16): IFEval taxonomy first, then IFBench taxonomy."""
    return rl_stage(
        name, "ifeval", path, steps, mode, evaluate=evaluate,
        grpo=replace(RL_GRPO, prompts_per_step=256,  # T16: 256 × 8 (the text says 128)
                     overlong=overlong,
                     # §4.4.2: dynamic filtering of all-0 / all-1 groups
                     drop_zero_variance_groups=True,
                     # §4.4.2 DAPO-style; the number of extra rounds is ours
                     refill_max_rounds=3),
        rollout=replace(RL_ROLLOUT, temperature=0.6, top_k=20,  # T16: 0.6 / 0.95, top-k 20
                        max_prompt_tokens=2 * K,                # not reported: ours
                        max_response_tokens=max_response),
        # §4.4.2: thinking models add sigmoid(group-normalised RM score) when every
        # constraint passes
        reward=Reward(code_switch_penalty="none",  # none reported for IF-RL
                      if_rm_bonus=rm_bonus, reward_model_url=rm_url() if rm_bonus else ""),
    )


def math_rl(temperature: float, lr: float, phases: tuple[LengthPhase, ...]) -> Stage:
    """Math RL (§4.5, T17–T18) on Nemotron-Cascade-RL-Math with epoch-level filtering (§4.5.2): one
    stage over its length phases (each sets its budget and overlong policy, and its temperature
    where it changes)."""
    return with_phases(rl_stage(
        "math", "math", "rl-math/train.jsonl", 0, "think",  # [DM]: 14,476 problems
        actor=replace(RL_ACTOR, lr=lr),
        # §4.5.2: drop 0% / 100% prompts, re-admit at 0.10 / 0.01
        grpo=replace(RL_GRPO, epoch_filter=True),
        rollout=replace(RL_ROLLOUT, temperature=temperature,
                        max_prompt_tokens=2 * K),  # not reported: ours
        reward=Reward(code_switch_penalty="-1",  # §4.5: −1 for code-switching
                      # §4.5: AceMath's rule-based verifier (rewards/math_rule.py)
                      math_grader="rule"),
    ), phases)


def code_rl(temperature: float, phases: tuple[LengthPhase, ...]) -> Stage:
    """Code RL (§4.6, T19): binary pass-all-tests reward in the sandbox, no overlong filtering; one
    stage over its length phases (the unified 8B's two, T19)."""
    return with_phases(rl_stage(
        "code", "code", "rl-code/train.jsonl", 0, "think",  # §4.6.1: 9.8K AceReason problems
        actor=replace(RL_ACTOR, lr=4e-6),  # T19
        rollout=replace(RL_ROLLOUT, temperature=temperature,
                        max_prompt_tokens=4 * K),  # not reported: ours
        reward=Reward(code_switch_penalty="0"),  # §4.6: 0, because −1 hurt
    ), phases)


def swe_rl(name: str, steps: int, max_prompt: int, overlong: str, boundary: Boundary = Boundary(),
           evaluate: bool = True) -> Stage:
    """Agentless code-repair RL (§4.7, T20) with the execution-free reward of Eq. 2 (Kimi-Dev-72B
    judge)."""
    return rl_stage(
        name, "swe", data("rl-swe/train.jsonl",   # [DS] Nemotron-Cascade-RL-SWE
                          min_prompt_tokens=8 * K),  # §4.7: prompts shorter than 8K are dropped
        steps, "think",
        actor=replace(RL_ACTOR, lr=2.5e-6),  # T20
        grpo=replace(RL_GRPO, group_size=16, overlong=overlong),  # T20: 128 × 16
        rollout=replace(RL_ROLLOUT, temperature=1.0,  # T20: 1.0 / 0.95
                        max_prompt_tokens=max_prompt,
                        max_response_tokens=16 * K),  # T20: 16K output
        # T12: the semantic (judge) reward was chosen over the lexical one
        reward=Reward(judge_url=judge_url(),
                      code_switch_penalty="none"),  # none reported for SWE RL
        boundary=boundary, evaluate=evaluate,
    )


# Math, code and SWE RL run in thinking mode ("think" above; inferred, not stated): the paper
# confines only IF-RL to one mode for the unified model (non-thinking, §4.4.2), and these stages'
# 16–48K budgets are reasoning budgets.

def math_8b() -> Stage:
    """T17 (both 8B models), 500 steps: 24K filter (steps 0–190) → 32K zero (190–430) at T=1.0, then
    40K zero (430–500) at T=0.8."""
    # T17: T=1.0; LR 2e-6 (the text says 2e-6 or 2.5e-6)
    return math_rl(temperature=1.0, lr=2e-6, phases=(
        # §4.5.2: the 24K "compression" stage skips overlong
        LengthPhase(190, 24 * K, "filter"),
        # §4.5.2: 32K, truncated samples score 0
        LengthPhase(240, 32 * K, "zero"),
        # T17: 430–500 at 40K and T=0.8
        LengthPhase(70, 40 * K, "zero", temperature=0.8)))


def swe_8b() -> tuple[Stage, Stage]:
    """T20 (both 8B models): input 16K with overlong filtering (steps 0–30), then 24K without
    (30–60). Two stages: the prompt limit decides the prompt set, which a length phase cannot
    change."""
    return (
        swe_rl("swe", 30, max_prompt=16 * K, overlong="filter",
               # one paper stage: the gate runs after its second part (T2 has one SWE row)
               evaluate=False),
        swe_rl("swe_24k", 30, max_prompt=24 * K, overlong="none",  # T13: 24K was best for the 8B
               boundary=CARRY),
    )


def rl_stages() -> tuple[Stage, ...]:
    return (
        # T15: 800 steps (8B); §4.3.2 / Fig. 9: half-half thinking / non-thinking batches
        rlhf(800, mode="half"),
        # T16 unified: 8K / 8K, no overlong filtering, 2300 + 800 steps, non-thinking only (§4.4.2),
        # IF reward only; one paper stage in two prompt sets: the gate runs after the second
        # (T2 has one IF-RL row)
        if_rl("if_ifeval", "rl-if/ifeval_taxonomy.jsonl", 2300, "no_think", 8 * K, "none",
              rm_bonus=False, evaluate=False),
        if_rl("if_ifbench", "rl-if/ifbench_taxonomy.jsonl", 800, "no_think", 8 * K, "none",
              rm_bonus=False),
        math_8b(),
        # T19 unified 8B: 90 steps, 44K at T=1.0 then 48K at T=0.8. Where it switches is not
        # reported: ours is after 64 steps, the thinking models' single-phase length (T19).
        code_rl(temperature=1.0,
                phases=(LengthPhase(64, 44 * K), LengthPhase(26, 48 * K, temperature=0.8))),
        *swe_8b(),
    )


# -------------------------------------------------------------------------------------- the cascade

PARALLEL = Parallel(tp=2, cp=2, dp=2, micro_batch_size=1, sequence_parallel=True, recompute="full")
"""One 8×H100-80GB node. The paper reports no parallel layout (§3), only 8 nodes for code RL; ours:
TP 2 × CP 2 (sequences of up to 52K tokens, T19) × DP 2, one sequence per microbatch, full
recompute. Actor state ≈ 34 GiB per GPU (bf16 weights 7.6 GiB, fp32 grads 15 GiB, Adam sharded over
DP × CP 11 GiB), by `nemo-cascade plan`; the colocated engine (``ENGINE_TP``, ``ENGINE_MEMORY``)
takes 36 GiB beside it."""

SFT_PARALLEL = replace(PARALLEL, tp=4, cp=1)
"""``with_sft()``: the actor splits sequences over CP ranks in GRPO stages only, and a cascade has
one layout, so a cascade with SFT stages trades CP for TP: TP 4 × DP 2 on the same node (actor ≈
25 GB per GPU; a 52K-token sequence fits without CP under full recompute)."""

ENGINE_MEMORY = 0.45
"""rollout.gpu_memory_utilization of every GRPO stage (one colocated engine serves them all): 36 GiB
of an 80 GiB GPU beside the actor's resident state (`nemo-cascade plan`: 72.3 GiB per GPU while
generating)."""

ENGINE_TP = 2
"""rollout.tensor_parallel_size of every GRPO stage (ours; the paper reports no engine, §3): pairs
of ranks share one vLLM engine, so each GPU holds half the weights (7.6 GiB instead of 15.3) and
half of each token's KV heads. `nemo-cascade plan`: 413K KV tokens per engine instead of 151K, about
six whole 52K-token code requests at once instead of two (four engines: 1.65M tokens per node
instead of 1.21M). TP 4 would add only 13% per node (1.87M) for twice the all-reduce group."""


def cascade(name: str, hf_path: str, parallel: Parallel, stages: tuple[Stage, ...],
            engine_memory: float, evaluate_base: bool = True, engine_tp: int = ENGINE_TP,
            yarn_factor: float = 2.0, gate: Gate = Gate()) -> Cascade:
    # Context parallelism splits plain rows only: GRPO rows are packed where the layout has no CP.
    stages = tuple(replace(s, rollout=replace(s.rollout, gpu_memory_utilization=engine_memory,
                                              tensor_parallel_size=engine_tp),
                           grpo=replace(s.grpo, sequence_packing=parallel.cp == 1))
                   if s.kind == "grpo" else s for s in stages)
    return Cascade(
        name=name,
        model=Model(hf_path=hf_path, dtype="bfloat16",  # precision not reported: bf16
                    transformer_impl="auto",
                    yarn_factor=yarn_factor),  # App. B: the release evaluates with YaRN 2
        parallel=parallel, stages=stages,
        # App. B decoding (Gate defaults), warn only; the unified model in T2's modes
        # (gate.mode = suite: IFEval non-thinking, the rest thinking), each suite at YaRN 2 (its
        # default); ``gate``: a model's deltas
        gate=replace(gate, suites=GATE_SUITES, evaluate_base=evaluate_base),
        # §3.1.2: " /think" / " /no_think" on each user turn, no empty think block
        chat_style="cascade1",
    )


def recipe() -> Cascade:
    """RLHF → IF-RL → math → code → SWE from an SFT checkpoint ([MCI] releases the paper's)."""
    return cascade("nemotron-cascade-8b", f"{models_dir()}/Nemotron-Cascade-8B-SFT", PARALLEL,
                   _marked(rl_stages()), ENGINE_MEMORY)


RELEASED = {"rlhf": ("RLHF", "from_rlhf"), "if_ifbench": ("IFRL", "from_if_rl"),
            "math": ("MathRL", "from_math_rl"), "code": ("CodeRL", "from_code_rl")}
"""Stage → (the [MCI] checkpoint of the policy after it, the recipe function that starts from it).
[MCI] releases the 8B's SFT, RLHF, IF-RL, math-RL and code-RL checkpoints, so a run can skip the
stages whose data was never released (RLHF prompts, code-RL problems): preflight names these when an
input is missing."""


def _marked(stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
    return tuple(replace(s, released_after=f"recipes/nemotron_cascade_8b.py:{RELEASED[s.name][1]}")
                 if s.name in RELEASED else s for s in stages)


def _after(stage: str) -> Cascade:
    """The cascade's stages after ``stage``, from the released checkpoint of the policy after it
    (``$NEMO_CASCADE_MODELS/Nemotron-Cascade-8B-<RLHF|IFRL|MathRL|CodeRL>``); its gate's first row
    is that checkpoint's, the matching row of T2."""
    stages = _marked(rl_stages())
    later = stages[[s.name for s in stages].index(stage) + 1:]
    return cascade(f"nemotron-cascade-8b-from-{RELEASED[stage][0].lower()}",
                   f"{models_dir()}/Nemotron-Cascade-8B-{RELEASED[stage][0]}", PARALLEL, later,
                   ENGINE_MEMORY)


def from_rlhf() -> Cascade:
    """IF-RL → math → code → SWE from the released RLHF checkpoint: no RLHF prompts, no reward
    model."""
    return _after("rlhf")


def from_if_rl() -> Cascade:
    """Math → code → SWE from the released IF-RL checkpoint."""
    return _after("if_ifbench")


def from_math_rl() -> Cascade:
    """Code → SWE from the released math-RL checkpoint."""
    return _after("math")


def from_code_rl() -> Cascade:
    """SWE RL alone from the released code-RL checkpoint: no code-RL problems (never released)
    needed."""
    return _after("code")


def with_sft() -> Cascade:
    """SFT 16K → SFT 32K (T14) → the RL cascade, from Qwen3-8B-Base (§1)."""
    sft = sft_stages(steps=(20_000, 32_000), lrs=(5e-5, 2e-5))  # T14, 8B column
    # The pretrained base does not chat: no gate row before the first SFT stage.
    return cascade("nemotron-cascade-8b", f"{models_dir()}/Qwen3-8B-Base", SFT_PARALLEL,
                   (*sft, *_marked(rl_stages())), ENGINE_MEMORY, evaluate_base=False)


# ---------------------------------------------------------------------------------- docs/recipes.md
# Where each field's value comes from, one row per field (in row order) of the tables
# tools/recipe_docs.py writes into docs/recipes.md: the values come from the built cascades, the
# citations from here. A new row is one line.

CASCADE_SOURCES = {
    "name": "",
    "model.hf_path": "§1: Qwen3 base for `with_sft()`; an SFT checkpoint for the RL-only cascade "
                     "(`$NEMO_CASCADE_MODELS`)",
    "model.dtype": "not reported (§3): bf16",
    "model.transformer_impl": "ours: Transformer Engine layers where installed",
    "model.fp8": "not reported (§3): no FP8",
    "model.yarn_factor": "App. B: YaRN ×2 over 32768 positions; the run trains and serves with it "
                         "(`<run>/base_model`) and every export carries it",
    "parallel.tp": "not reported (§3): ours, see the parallel plans",
    "parallel.pp": "ours",
    "parallel.cp": "ours: the actor splits sequences over CP in GRPO stages only, "
                   "so cascades with SFT use none",
    "parallel.dp": "ours",
    "parallel.micro_batch_size": "ours: one long sequence per microbatch",
    "parallel.sequence_parallel": "ours",
    "parallel.recompute": "ours: sequences of 12–60K tokens",
    "parallel.distributed_optimizer": "ours (the default)",
    "chat_style": "§3.1.2: ` /think` / ` /no_think` on each user turn, no empty think block",
    "gate.suites": "§4.1.1, T2/T4–T8, App. B decoding; the paper's benchmarks whose data ships "
                   "here (lcb-v5, lcb-v6, gpqa-diamond, mmlu-pro after `data prepare-eval`)",
    "gate.evaluate_base": "ours: the RL-only cascade gets the SFT row of T2; "
                          "a pretrained base gets none",
    "gate.mode": "App. B, T2: the unified model per suite (IFEval non-thinking, "
                 "the rest thinking); thinking-only models: thinking everywhere (T1, T8)",
    "gate.on_regression": "ours: the paper's per-stage tables show expected drops "
                          "(IFEval after RLHF)",
}
"""The cascade table (a column per recipe function). The thinking recipes share it."""

STAGE_SOURCES = {
    "domain": "§4.1: SFT → RLHF → IF-RL → math → code → SWE",
    "mode": "SFT: rows carry their own (§3.1.2); RLHF: half-half (§4.3.2, Fig. 9); "
            "IF-RL: non-thinking only (§4.4.2); "
            "math/code/SWE: thinking (inferred: only IF-RL is restricted)",
    "steps": "T14 (8B); T15 (8B: 800); T16 unified (2300 + 800; the text differs); T17 (0–500); "
             "T19 (90); T20 (0–30, 30–60)",
    "actor.lr": "T14 (8B: 5e-5, 2e-5); T15–T16; T17 (the text says 2e-6 or 2.5e-6); T19; T20",
    "actor.lr_schedule": "SFT: T14 (cosine to 0); RL: not reported, ours (constant)",
    "actor.warmup_steps": "not reported: ours (SFT 1% of its steps; RL none)",
    "actor.weight_decay": "SFT: T14; RL: not reported, ours (0)",
    "sft_batch_size": "T14: global batch 256",
    "sft_max_tokens": "T14: stage 1 16K, stage 2 32K",
    "grpo.prompts_per_step": "T15–T16: 256 (the text says 128); T17, T19, T20: 128",
    "grpo.group_size": "T15–T19: 8; T20: 16",
    "rollout.temperature": "T15–T16: 0.6; T17: 1.0 (0.8 in the 40K phase); "
                           "T19 (unified): 1.0 (0.8 in the 48K phase); T20: 1.0",
    "rollout.top_p": "T15–T20",
    "rollout.top_k": "T16: 20 for IF-RL; none reported elsewhere (off)",
    "rollout.max_prompt_tokens": "T20: SWE input 16K → 24K (T13); "
                                 "the others are not reported: ours",
    "data.min_prompt_tokens": "§4.7: SWE RL drops prompts shorter than 8K",
    "rollout.max_response_tokens": "T15: 12K; T16 unified: 8K / 8K; T17: 24K → 32K → 40K; "
                                   "T19 unified: 44K → 48K "
                                   "(math, code: the first phase's, see curriculum); T20: 16K",
    "grpo.overlong": "T15–T16 unified: no filtering; T17: filter / zero / zero (§4.5.2; "
                     "math: the first phase's); T19: none; T20 (8B): filter / none",
    "length_curriculum": "T17, §4.5.2: 24K filter (0–190) → 32K zero (190–430) → 40K zero "
                         "at T = 0.8 (430–500); T19 unified: 44K → 48K at T = 0.8, 90 steps "
                         "(the switch after 64 is ours)",
    "grpo.kl_coef": "§4.1.2: no KL (1e-3 only in the bag of tricks, §6.3, T10)",
    "grpo.loss_aggregation": "§4.1.2: token-level (DAPO-style); "
                             "sequence-level only in the bag of tricks (§6.3)",
    "grpo.reward_shaping": "§4.3.2: none with the 72B RM "
                           "(group z-score + tanh only in the bag of tricks, T11)",
    "grpo.drop_zero_variance_groups": "§4.4.2: dynamic filtering in IF-RL; not reported elsewhere "
                                      "(equal-reward groups stay in the token mean)",
    "grpo.refill_max_rounds": "§4.4.2 DAPO-style dynamic sampling; the number of rounds is ours",
    "grpo.epoch_filter": "§4.5.2: epoch-level filtering of 0% / 100% prompts",
    "grpo.readmit_unsolved": "§4.5.2: re-admit 0% prompts with p = 0.10",
    "grpo.readmit_solved": "§4.5.2: re-admit 100% prompts with p = 0.01",
    "grpo.sequence_packing": "ours (training layout, not reported): "
                             "packed rows where the layout has no CP",
    "grpo.pack_tokens": "ours: rows as long as the batch's longest sequence",
    "grpo.share_prompts": "ours (training layout): a group's samples share one prompt copy on the "
                          "local spec; off on Transformer Engine (these recipes' GPUs)",
    "reward.code_switch_penalty": "§4.3.2 (RLHF: batch min − 10), §4.5 (math: −1), "
                                  "§4.6 (code: 0, −1 hurt); none reported for IF and SWE",
    "reward.math_grader": "§4.5: the answer is checked by AceMath's rule-based verifier "
                          "(an AceMath-style grader, rewards/math_rule.py)",
    "reward.if_rm_bonus": "§4.4.2: the RM bonus is for the thinking models; "
                          "the unified model's IF reward is R_IF",
    "evaluate": "ours: no gate between the parts of one paper stage (T2, T4–T8: one row per stage)",
    "boundary.optimizer": "ours: SWE's 24K part keeps the Adam state (steps 0–30, 30–60, T20); "
                          "its longer prompt limit admits more prompts, "
                          "so the prompt stream starts afresh",
    "rollout.tensor_parallel_size": "not reported (§3): ours, the parallel plans below",
    "rollout.gpu_memory_utilization": "ours: the parallel plans below",
    "checkpoint_every": "ours (SFT: fewer ~100 GB checkpoints; RL: the default 25)",
}
"""The stage table (a column per stage of ``with_sft()``, which has every stage of ``recipe()``).
The thinking recipes start from it and replace the rows whose numbers differ."""
