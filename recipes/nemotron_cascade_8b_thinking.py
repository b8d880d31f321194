"""Nemotron-Cascade-8B-Thinking, the thinking-only 8B model (§1; the model card [MC8T]):

    [SFT 16K → SFT 32K] → RLHF → IF-RL (IFEval, then IFBench taxonomy) → math RL → code RL → SWE RL

The unified 8B recipe (recipes/nemotron_cascade_8b.py: environment variables, stage builders,
parallel plan) with the thinking model's deltas: every stage in thinking mode, IF-RL at 8K then 16K
with overlong filtering in the second sub-stage and the RM bonus in its reward (§4.4.2, T16), and
code RL in one phase at T=1.2 (T19). SFT (T14), math (T17) and SWE (T20) are the 8B numbers the two
8B models share. ``recipe()`` starts from your SFT checkpoint (no 8B-Thinking SFT checkpoint is
released); ``with_sft()`` starts from Qwen3-8B-Base.
"""
from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace

from nemo_cascade.config import Cascade, Gate, LengthPhase, Stage


# recipes/ is not a package (the CLI loads recipes by path): the 8B recipe's stage builders,
# as a namespace
base = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("nemotron_cascade_8b.py"))))
K = base.K


def rl_stages() -> tuple[Stage, ...]:
    return (
        base.rlhf(800, mode="think"),  # T15: 800 steps (8B); a thinking-only model
        # T16 thinking: 8K then 16K, overlong filtering only in the second, 550 + 300 steps
        # (8B-Thinking), reward R_IF + sigmoid(ẑ_RM) when every constraint passes, else 0 (§4.4.2)
        base.if_rl("if_ifeval", "rl-if/ifeval_taxonomy.jsonl", 550, "think", 8 * K, "none",
                   rm_bonus=True,
                   # one paper stage in two parts: the gate runs after the second (T2, T4–T8)
                   evaluate=False),
        base.if_rl("if_ifbench", "rl-if/ifbench_taxonomy.jsonl", 300, "think", 16 * K, "filter",
                   rm_bonus=True),
        base.math_8b(),  # T17
        # T19 8B-Thinking: T=1.2, 44K, 64 steps
        base.code_rl(temperature=1.2, phases=(LengthPhase(64, 44 * K),)),
        *base.swe_8b(),  # T20
    )


GATE = Gate(mode="think")
"""App. B: a thinking-only model is evaluated in thinking mode on every suite, IFEval included
(T1, T8)."""


def recipe() -> Cascade:
    """RLHF → IF-RL → math → code → SWE from your 8B-Thinking SFT checkpoint (``with_sft()`` makes
    one)."""
    return base.cascade("nemotron-cascade-8b-thinking",
                        f"{base.models_dir()}/Nemotron-Cascade-8B-Thinking-SFT", base.PARALLEL,
                        rl_stages(), base.ENGINE_MEMORY, gate=GATE)


def with_sft() -> Cascade:
    """SFT 16K → SFT 32K (T14: the unified model's hyperparameters, thinking rows only) → the RL
    cascade, from Qwen3-8B-Base."""
    # T14, 8B column
    sft = base.thinking_sft(base.sft_stages(steps=(20_000, 32_000), lrs=(5e-5, 2e-5)))
    return base.cascade("nemotron-cascade-8b-thinking", f"{base.models_dir()}/Qwen3-8B-Base",
                        base.SFT_PARALLEL, (*sft, *rl_stages()), base.ENGINE_MEMORY,
                        evaluate_base=False, gate=GATE)


# docs/recipes.md (tools/recipe_docs.py): the 8B recipe's citations, with this model's own where
# its numbers differ
CASCADE_SOURCES = base.CASCADE_SOURCES
STAGE_SOURCES = {
    **base.STAGE_SOURCES,
    "mode": "SFT: rows carry their own (§3.1.2); RL: a thinking-only model ([MC8T])",
    "steps": "T14 (8B); T15 (8B: 800); T16 8B-Thinking (550 + 300; the text differs); T17 (0–500); "
             "T19 (8B-Thinking: 64); T20 (0–30, 30–60)",
    "rollout.temperature": "T15–T16: 0.6; T17: 1.0 (0.8 in the 40K phase); "
                           "T19 (8B-Thinking): 1.2; T20: 1.0",
    "rollout.max_response_tokens": "T15: 12K; T16 thinking: 8K / 16K; T17: 24K → 32K → 40K "
                                   "(math: the first phase's, see curriculum); "
                                   "T19 (8B-Thinking): 44K; T20: 16K",
    "grpo.overlong": "T15: no filtering; T16 thinking: no / yes; "
                     "T17: filter / zero / zero (§4.5.2; math: the first phase's); T19: none; "
                     "T20 (8B): filter / none",
    "length_curriculum": "T17, §4.5.2: 24K filter (0–190) → 32K zero (190–430) "
                         "→ 40K zero at T = 0.8 (430–500)",
    "reward.if_rm_bonus": "§4.4.2: thinking models score R_IF + sigmoid(ẑ_RM) "
                          "when R_IF = 1, else 0",
    "data.keep_mode": "T8: another SFT than the unified model's; "
                      "ours: the thinking answers (decided)",
}
