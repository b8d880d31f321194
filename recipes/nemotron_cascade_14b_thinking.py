"""Nemotron-Cascade-14B-Thinking (PAPER.md §1, [MC14]); no unified 14B was trained ("resource constraints"):

    [SFT 16K → SFT 32K]  →  RLHF → IF-RL (IFEval, then IFBench taxonomy) → math RL → code RL → SWE RL

The stage builders of recipes/nemotron_cascade_8b.py with the 14B column of every table: SFT steps (T14), RLHF
900 steps (T15), IF-RL 800 + 120 (T16), math 28K at T=1.2 then 40K at T=1.1 with LR 2.5e-6 (T18), code 56K at
T=1.0 (T19), SWE with 32K input for 120 steps (T13, T20). Figure 1 counts 2232 RL steps for this model; these
stages sum to 2224 (the table step counts). ``recipe()`` starts from your SFT checkpoint (none is released);
``with_sft()`` starts from Qwen3-14B-Base. ``single_node()`` is the same cascade on one 8-GPU node.
"""
from __future__ import annotations

import runpy
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from nemo_cascade.config import Cascade, LengthPhase, Parallel, Stage


# recipes/ is not a package (the CLI loads recipes by path): the 8B recipe's stage builders, as a namespace
base = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("nemotron_cascade_8b.py"))))
K = base.K

PARALLEL = Parallel(tp=8, cp=2, dp=1, micro_batch_size=1, sequence_parallel=True, recompute="full")
"""Two 8×H100-80GB nodes (16 GPUs): TP 8 inside a node, CP 2 across the two (code RL's 60K-token sequences,
T19). Not reported by the paper (PAPER.md §3); ours. Actor state ≈ 22 GB per GPU (bf16 weights 3.7 GB, fp32
grads 7.4 GB, Adam sharded over CP 11 GB), which leaves the colocated engine 60% of the GPU: a whole bf16 copy
(29.6 GB) and ~18 GB of KV cache (~115K tokens of Qwen3-14B). With TP 4 the actor would hold ≈ 33–44 GB and the
engine too little KV cache for one 60K-token request beside its full copy."""

SFT_PARALLEL = replace(PARALLEL, cp=1, dp=2)
"""``with_sft()``: the actor splits sequences over CP ranks in GRPO stages only, and a cascade has one layout, so
a cascade with SFT stages trades CP for DP on the same 16 GPUs (actor state as above; a 60K-token sequence fits
on TP 8 without CP under full recompute)."""

ENGINE_MEMORY = 0.6


def rl_stages() -> tuple[Stage, ...]:
    return (
        base.rlhf(900, mode="think"),  # T15: 900 steps (14B)
        # T16 thinking: 8K then 16K, overlong filtering only in the second, 800 + 120 steps (14B-Thinking),
        # reward R_IF + sigmoid(ẑ_RM) when every constraint passes, else 0 (§4.4.2)
        base.if_rl("if_ifeval", "rl-if/ifeval_taxonomy.jsonl", 800, "think", 8 * K, "none", rm_bonus=True),
        base.if_rl("if_ifbench", "rl-if/ifbench_taxonomy.jsonl", 120, "think", 16 * K, "filter", rm_bonus=True),
        # T18: LR 2.5e-6; 28K with overlong filtering at T=1.2 (steps 0–120), then 40K at T=1.1 (120–220)
        base.math_rl("math", 120, temperature=1.2, lr=2.5e-6, phases=(LengthPhase(120, 28 * K, "filter"),)),
        base.math_rl("math_40k", 100, temperature=1.1, lr=2.5e-6, phases=(LengthPhase(100, 40 * K, "zero"),),
                     boundary=base.CARRY),
        base.code_rl("code", 64, temperature=1.0, max_response=56 * K),  # T19 14B: T=1.0, 56K, 64 steps
        # T20 14B: input 32K (T13: 42.7, the best of 16–40K), 16K output, overlong filtering, steps 0–120
        base.swe_rl("swe", 120, max_prompt=32 * K, overlong="filter"),
    )


def recipe() -> Cascade:
    """RLHF → IF-RL → math → code → SWE from your 14B-Thinking SFT checkpoint (``with_sft()`` makes one)."""
    return base.cascade("nemotron-cascade-14b-thinking", f"{base.models_dir()}/Nemotron-Cascade-14B-Thinking-SFT",
                        PARALLEL, rl_stages(), ENGINE_MEMORY)


def with_sft() -> Cascade:
    """SFT 16K → SFT 32K (T14) → the RL cascade, from Qwen3-14B-Base (§1)."""
    # T14, 14B column: 22K + 41K steps. Its only LR entry is 5e-5, read here as both stages' (8B: 5e-5, 2e-5).
    sft = base.sft_stages(steps=(22_000, 41_000), lrs=(5e-5, 5e-5))
    return base.cascade("nemotron-cascade-14b-thinking", f"{base.models_dir()}/Qwen3-14B-Base", SFT_PARALLEL,
                        (*sft, *rl_stages()), ENGINE_MEMORY, evaluate_base=False)


def single_node() -> Cascade:
    """``recipe()`` on one 8×H100-80GB node: TP 8, no CP, unsharded Adam (actor ≈ 33 GB per GPU), the engine at
    50% (~10 GB of KV cache: one 60K-token code request at a time per GPU, so code RL rollouts run slowly)."""
    cfg = recipe()
    stages = tuple(replace(s, rollout=replace(s.rollout, gpu_memory_utilization=0.5)) if s.kind == "grpo" else s
                   for s in cfg.stages)
    return replace(cfg, parallel=replace(PARALLEL, cp=1), stages=stages)

