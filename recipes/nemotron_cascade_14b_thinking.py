"""Nemotron-Cascade-14B-Thinking (§1; the model card [MC14]); no unified 14B was trained
("resource constraints"):

    [SFT 16K → SFT 32K] → RLHF → IF-RL (IFEval, then IFBench taxonomy) → math RL → code RL → SWE RL

The stage builders of recipes/nemotron_cascade_8b.py with the 14B column of every table: SFT steps
(T14), RLHF 900 steps (T15), IF-RL 800 + 120 (T16), math 28K at T=1.2 then 40K at T=1.1 with LR
2.5e-6 in one stage of 220 steps (T18), code 56K at T=1.0 (T19), SWE with 32K input for 120 steps
(T13, T20). Figure 1 counts 2232 RL steps for this model; these stages sum to 2224 (the table step
counts). ``recipe()`` starts from your SFT checkpoint (none is released); ``with_sft()`` starts from
Qwen3-14B-Base. ``single_node()`` is the same cascade on one 8-GPU node.
"""
from __future__ import annotations

import runpy
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from nemo_cascade.config import Cascade, Gate, LengthPhase, Parallel, Stage


# recipes/ is not a package (the CLI loads recipes by path): the 8B recipe's stage builders,
# as a namespace
base = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("nemotron_cascade_8b.py"))))
K = base.K

PARALLEL = Parallel(tp=8, cp=2, dp=1, micro_batch_size=1, sequence_parallel=True, recompute="full")
"""Two 8×H100-80GB nodes (16 GPUs): TP 8 inside a node, CP 2 across the two (code RL's 60K-token
sequences, T19). Not reported by the paper (§3); ours. Actor state ≈ 20.6 GiB per GPU (bf16 weights
3.4 GiB, fp32 grads 6.9 GiB, Adam sharded over CP 10.3 GiB) by `nemo-cascade plan`, which leaves the
colocated engine 60% of the GPU (``ENGINE_MEMORY``, ``ENGINE_TP``). ``single_node()`` fits the same
cascade on 8 GPUs; two nodes give twice the rollout and training throughput."""

SFT_PARALLEL = replace(PARALLEL, cp=1, dp=2)
"""``with_sft()``: the actor splits sequences over CP ranks in GRPO stages only, and a cascade has
one layout, so a cascade with SFT stages trades CP for DP on the same 16 GPUs (actor state as above;
a 60K-token sequence fits on TP 8 without CP under full recompute)."""

ENGINE_MEMORY = 0.6
"""rollout.gpu_memory_utilization: 48 GiB of an 80 GiB GPU beside the actor's 20.6 GiB
(`nemo-cascade plan`: 70.6 GiB per GPU while generating)."""

ENGINE_TP = 2
"""rollout.tensor_parallel_size (ours; the paper reports no engine, §3): pairs of ranks share one
vLLM engine, so each GPU holds half the weights (13.8 GiB instead of 27.5) and half of each token's
KV heads. `nemo-cascade plan`: 449K KV tokens per engine instead of 134K, about seven whole
60K-token code requests at once instead of two (eight engines: 3.6M tokens over the 16 GPUs instead
of 2.1M). TP 4 would add 20% (4.3M) for twice the all-reduce group."""


def rl_stages() -> tuple[Stage, ...]:
    return (
        base.rlhf(900, mode="think"),  # T15: 900 steps (14B)
        # T16 thinking: 8K then 16K, overlong filtering only in the second, 800 + 120 steps
        # (14B-Thinking), reward R_IF + sigmoid(ẑ_RM) when every constraint passes, else 0 (§4.4.2)
        base.if_rl("if_ifeval", "rl-if/ifeval_taxonomy.jsonl", 800, "think", 8 * K, "none",
                   rm_bonus=True,
                   # one paper stage in two parts: the gate runs after the second (T2, T4–T8)
                   evaluate=False),
        base.if_rl("if_ifbench", "rl-if/ifbench_taxonomy.jsonl", 120, "think", 16 * K, "filter",
                   rm_bonus=True),
        # T18: LR 2.5e-6; 28K with overlong filtering at T=1.2 (steps 0–120), then 40K,
        # truncated = 0, at T=1.1 (120–220)
        base.math_rl(temperature=1.2, lr=2.5e-6,
                     phases=(LengthPhase(120, 28 * K, "filter"),
                             LengthPhase(100, 40 * K, "zero", temperature=1.1))),
        # T19 14B: T=1.0, 56K, 64 steps
        base.code_rl(temperature=1.0, phases=(LengthPhase(64, 56 * K),)),
        # T20 14B: input 32K (T13: 42.7, the best of 16–40K), 16K output, overlong filtering,
        # steps 0–120
        base.swe_rl("swe", 120, max_prompt=32 * K, overlong="filter"),
    )


GATE = Gate(mode="think", yarn=("swe=3",), max_input_tokens=(f"swe={64 * K}",))
"""App. B: a thinking-only model is evaluated in thinking mode on every suite, IFEval included (T1);
every suite with YaRN ×2 (the release config's factor) but SWE-bench, whose 64K input takes YaRN ×3
(the 8B's: 32K, ×2)."""


def recipe() -> Cascade:
    """RLHF → IF-RL → math → code → SWE from your 14B-Thinking SFT checkpoint (``with_sft()`` makes
    one; NVIDIA released none, so preflight names that recipe when the folder is missing)."""
    sft = f"{base.models_dir()}/Nemotron-Cascade-14B-Thinking-SFT"
    cfg = base.cascade("nemotron-cascade-14b-thinking", sft, PARALLEL, rl_stages(), ENGINE_MEMORY,
                       engine_tp=ENGINE_TP, gate=GATE)
    return replace(cfg, model=replace(cfg.model,
                                      made_by="recipes/nemotron_cascade_14b_thinking.py:with_sft"))


def with_sft() -> Cascade:
    """SFT 16K → SFT 32K (T14, thinking rows only) → the RL cascade, from Qwen3-14B-Base (§1)."""
    # T14, 14B column: 22K + 41K steps. Its only LR entry is 5e-5, read here as both stages'
    # (8B: 5e-5, 2e-5).
    sft = base.thinking_sft(base.sft_stages(steps=(22_000, 41_000), lrs=(5e-5, 5e-5)))
    return base.cascade("nemotron-cascade-14b-thinking", f"{base.models_dir()}/Qwen3-14B-Base",
                        SFT_PARALLEL, (*sft, *rl_stages()), ENGINE_MEMORY, evaluate_base=False,
                        engine_tp=ENGINE_TP, gate=GATE)


def single_node() -> Cascade:
    """``recipe()`` on one 8×H100-80GB node: TP 8, no CP, unsharded Adam (actor ≈ 31 GiB per GPU),
    the engine at 50% sharded 4 ways (`nemo-cascade plan`: 6.9 GiB of weights and 33 GiB of KV cache
    per GPU, 868K tokens per engine, about fourteen whole 60K-token code requests at once; 73.0 GiB
    per GPU while generating). A whole engine per rank would hold 82K tokens, one such request,
    beside its 27.5 GiB copy; one over 2 ranks 344K."""
    cfg = recipe()
    stages = tuple(
        replace(s, rollout=replace(s.rollout, gpu_memory_utilization=0.5, tensor_parallel_size=4),
                grpo=replace(s.grpo, sequence_packing=True))  # no CP: rows can be packed
        if s.kind == "grpo" else s for s in cfg.stages)
    return replace(cfg, parallel=replace(PARALLEL, cp=1), stages=stages)



# docs/recipes.md (tools/recipe_docs.py): the 8B recipe's citations, with the 14B column's where its
# numbers differ
CASCADE_SOURCES = {
    **base.CASCADE_SOURCES,
    "gate.yarn": "App. B: YaRN ×2 for every suite (their default) but the 14B's SWE-bench, ×3",
    "gate.max_input_tokens": "App. B: SWE-bench input 64K for the 14B "
                             "(the suite's default: the 8B's 32K)",
}
STAGE_SOURCES = {
    **base.STAGE_SOURCES,
    "mode": "SFT: rows carry their own (§3.1.2); RL: a thinking-only model ([MC14])",
    "steps": "T14 (14B: 22K, 41K); T15 (14B: 900); T16 14B-Thinking (800 + 120; the text differs); "
             "T18 (0–220); T19 (14B: 64); T20 (14B: 0–120)",
    "actor.lr": "T14 (the 14B column lists only 5e-5: used for both stages); T15–T16; "
                "T18: 2.5e-6; T19; T20",
    "grpo.prompts_per_step": "T15–T16: 256 (the text says 128); T18–T20: 128",
    "rollout.temperature": "T15–T16: 0.6; T18: 1.2 (1.1 in the 40K phase); T19 (14B): 1.0; "
                           "T20: 1.0",
    "rollout.max_prompt_tokens": "T20, T13: SWE input 32K for the 14B; "
                                 "the others are not reported: ours",
    "data.min_prompt_tokens": "§4.7: SWE RL drops prompts shorter than 8K",
    "rollout.max_response_tokens": "T15: 12K; T16 thinking: 8K / 16K; "
                                   "T18: 28K → 40K (math: the first phase's, see curriculum); "
                                   "T19 (14B): 56K; T20: 16K",
    "grpo.overlong": "T15: no filtering; T16 thinking: no / yes; "
                     "T18: filter / zero (§4.5.2; math: the first phase's); T19: none; "
                     "T20 (14B): filter",
    "length_curriculum": "T18, §4.5.2: 28K filter at T = 1.2 (0–120) "
                         "→ 40K zero at T = 1.1 (120–220)",
    "reward.if_rm_bonus": "§4.4.2: thinking models score R_IF + sigmoid(ẑ_RM) "
                          "when R_IF = 1, else 0",
    "data.keep_mode": "T8: another SFT than the unified model's (8B); "
                      "ours: the thinking answers (decided)",
}
del STAGE_SOURCES["boundary.optimizer"]  # T20: the 14B's SWE RL is one stage (input 32K throughout)
