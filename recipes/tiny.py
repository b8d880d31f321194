"""The tiny cascade: the main CPU job (`make run`). Every stage kind of the paper's pipeline (§4.1,
Fig. 1) on a ~1M-parameter Qwen3 with a tokenizer trained in code, on synthetic tasks a model that
small can learn:

SFT (a blend of all domains, §3) → reward model (Bradley–Terry on preference pairs, §4.2) → RLHF
scored by that RM, served by the cascade (§4.3) → IF-RL (§4.4) → math RL (§4.5) → code RL (§4.6) →
SWE RL (§4.7),

with the forgetting gate after every stage (§4.1.1): the held-out split of each domain (data/tiny/,
the ``tiny-*`` suites) evaluated with the paper's decoding (App. B: T=0.6, top-p 0.95), the stage ×
benchmark matrix printed at the end and drawn in report.png.

Only deltas from nemo_cascade.config defaults are stated. Sizes are 2-core smoke scale, not the
paper's (Tables 14–20 hold those; see recipes/nemotron_cascade_*.py); the algorithmic choices are
the paper's defaults (§4.1.2: on-policy GRPO, token-level loss, no KL).
"""
from dataclasses import replace

from nemo_cascade.config import (GRPO, Actor, Cascade, Data, Gate, Model, Parallel, Repair, Reward,
                                 Rollout, Stage)

# a tiny model needs a larger step than the paper's 2e-6 to move in ~20 steps
RL_ACTOR = Actor(lr=3e-4)
RL_ROLLOUT = Rollout(temperature=1.0, max_prompt_tokens=96, max_response_tokens=40,
                     kv_cache_gib=1.0)
RL_GRPO = GRPO(group_size=8, prompts_per_step=16)


def _rl(name: str, domain: str, source: str, steps: int, seed: int, **kw) -> Stage:
    """A GRPO stage on the train split of a synthetic set (the gate evaluates its held-out
    split)."""
    return Stage(name=name, kind="grpo", domain=domain, data=Data(source=source, split="train",
                                                                  seed=seed), steps=steps,
                 **{"actor": RL_ACTOR, "rollout": RL_ROLLOUT, "grpo": RL_GRPO, **kw})


def recipe() -> Cascade:
    sft = Stage(
        name="sft", kind="sft",
        data=Data(source="synthetic:arithmetic", split="train", seed=1),
        extra_data=(Data(source="synthetic:if_arithmetic", split="train", seed=1),
                    Data(source="synthetic:code_arithmetic", split="train", seed=1),
                    Data(source="synthetic:bugfix_arithmetic", split="train", seed=1),
                    Data(source="synthetic:chat_arithmetic", split="train", seed=1)),
        steps=600, sft_batch_size=32, sft_max_tokens=256,
        actor=Actor(lr=2e-3, min_lr=2e-4, lr_schedule="cosine", warmup_steps=20, weight_decay=0.0),
    )
    # RLHF has prompts of its own, chat-style (§4.3); its RM learns a friendly reply from them
    chat = "synthetic:chat_arithmetic"
    rm = Stage(name="rm", kind="reward_model", data=Data(source=chat, split="train", seed=4),
               steps=150, rm_batch_size=32, rm_max_tokens=96, actor=Actor(lr=2e-3, warmup_steps=10))
    # RL steps of 1e-4: at 3e-4 the IF-RL and math rewards rose, then fell within 20 steps, below
    # where they started. Every verifiable domain refills its batch with informative groups (dynamic
    # sampling, §4.4.2): after SFT many groups are all right or all wrong (and for SWE's lexical
    # grade, all near misses at 2/3).
    verifiable = dict(actor=Actor(lr=1e-4), grpo=replace(RL_GRPO, refill_max_rounds=2))
    stages = (
        sft, rm,
        # RLHF optimises a ~1M-parameter RM's score: a gentler step, as reward hacking sets in fast
        # and costs the other domains (§4.3)
        _rl("rlhf", "rlhf", chat, 12, seed=5, reward=Reward(reward_model_stage="rm"),
            actor=Actor(lr=5e-5)),
        _rl("ifeval", "ifeval", "synthetic:if_arithmetic", 20, seed=6, **verifiable),
        _rl("math", "math", "synthetic:arithmetic", 24, seed=2, **verifiable),
        _rl("code", "code", "synthetic:code_arithmetic", 24, seed=7, **verifiable),
        _rl("swe", "swe", "synthetic:bugfix_arithmetic", 24, seed=8, **verifiable),
    )
    gate = Gate(suites=("tiny-math", "tiny-ifeval", "tiny-code", "tiny-swe", "tiny-rlhf"),
                samples=4)
    return Cascade(name="tiny", model=Model(build="tiny-qwen3-cascade"),
                   parallel=Parallel(tp=1, pp=1, dp=1,
                                     micro_batch_size=64), stages=stages, gate=gate)


def with_repair() -> Cascade:
    """The tiny cascade with repair on demand (docs/distill.md): after a GRPO stage whose gate row
    shows a paired regression, the gate inserts a distill stage in which the flagged domains learn
    from their best earlier rows and the stage's own domain from its export, on prompts of all of
    them (Nemotron-Cascade 2's MOPD). RLHF has chat prompts of its own, so every teacher is asked
    about its own prompts."""
    cfg = recipe()
    return replace(cfg, name="tiny-repair", gate=replace(cfg.gate, on_regression="repair",
                                                         repair=Repair(steps=12)))


def math_only() -> Cascade:
    """SFT on arithmetic → math GRPO: the two-stage cascade the integration tests run (minutes on 2
    cores)."""
    sft = Stage(
        name="sft", kind="sft", data=Data(source="synthetic:arithmetic", split="train",
                                          seed=1), steps=400, sft_batch_size=32, sft_max_tokens=96,
        actor=Actor(lr=2e-3, min_lr=2e-4, lr_schedule="cosine", warmup_steps=20, weight_decay=0.0))
    math = _rl("math", "math", "synthetic:arithmetic", 40, seed=2)
    math = replace(math, data=replace(math.data, split="test"),
                   rollout=replace(RL_ROLLOUT, max_prompt_tokens=64, max_response_tokens=32),
                   grpo=GRPO(group_size=8, prompts_per_step=32))
    return Cascade(name="tiny-math", model=Model(build="tiny-qwen3"),
                   parallel=Parallel(micro_batch_size=64), stages=(sft, math))


def two_ranks() -> Cascade:
    """The two-stage cascade with a TP=2 actor on 2 processes (each rank runs its own colocated
    engine)."""
    return replace(math_only(), name="tiny-tp2", parallel=replace(math_only().parallel, tp=2))
