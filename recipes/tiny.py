"""The tiny cascade: the main CPU job (`make run`). A ~1M-parameter Qwen3 with a tokenizer trained in code is
warm-started by SFT on synthetic arithmetic, then trained by GRPO on held-out arithmetic prompts with the
exact-match math reward — the real stack (Megatron-Core actor, colocated vLLM) at laptop scale.

Only the deltas from nemo_cascade.config defaults are stated; paper values are not used here (this is a
2-core smoke-scale run), except the algorithmic choices, which are the paper's defaults (§4.1.2).
"""
from dataclasses import replace

from nemo_cascade.config import GRPO, Actor, Cascade, Data, Model, Parallel, Rollout, Stage


def recipe() -> Cascade:
    sft = Stage(
        name="sft", kind="sft",
        data=Data(source="synthetic:arithmetic", split="train", seed=1),
        steps=400, sft_batch_size=32, sft_max_tokens=96,
        actor=Actor(lr=2e-3, min_lr=2e-4, lr_schedule="cosine", warmup_steps=20, weight_decay=0.0),
    )
    math = Stage(
        name="math", kind="grpo", domain="math",
        data=Data(source="synthetic:arithmetic", split="test", seed=2),  # held out from SFT
        steps=40,
        actor=Actor(lr=1e-4),
        rollout=Rollout(temperature=1.0, max_prompt_tokens=64, max_response_tokens=32, kv_cache_gib=1.0),
        grpo=GRPO(group_size=8, prompts_per_step=32),
    )
    return Cascade(name="tiny", model=Model(build="tiny-qwen3"), parallel=Parallel(tp=1, pp=1, dp=1,
                   micro_batch_size=64), stages=(sft, math))


def two_ranks() -> Cascade:
    """The same cascade with a TP=2 actor on 2 processes (each rank runs its own colocated engine)."""
    return replace(recipe(), name="tiny-tp2", parallel=replace(recipe().parallel, tp=2))
