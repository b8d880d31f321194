"""Recipes the slurm tier launches as nemo-run experiments (a file inside the checkout, so the jobs
can load it)."""
from dataclasses import replace

from nemo_cascade.config import (GRPO, Actor, Cascade, Data, Gate, Model, Parallel, Reward, Rollout,
                                 Stage)


def _rlhf(steps: int, prompts_per_step: int) -> Stage:
    """A tiny RLHF stage scored by a reward model reached by URL. The URL is a placeholder: a
    launched job is handed the served model's URL file, a test's run an override."""
    return Stage(name="rlhf", kind="grpo", domain="rlhf", steps=steps, checkpoint_every=0,
                 data=Data(source="synthetic:arithmetic", split="test", size=16, seed=2),
                 actor=Actor(lr=1e-4),
                 rollout=Rollout(max_prompt_tokens=96, max_response_tokens=24),
                 grpo=GRPO(group_size=4, prompts_per_step=prompts_per_step),
                 reward=Reward(reward_model_url="http://reward-model.invalid:8000"))


def sft_then_rlhf() -> Cascade:
    """SFT → RLHF scored by a served reward model (``nemo-cascade launch --reward-model``): two
    stage jobs and a serve job, a few steps each, no gate."""
    sft = Stage(name="sft", kind="sft",
                data=Data(source="synthetic:arithmetic", split="train", seed=1), steps=10,
                sft_batch_size=32, sft_max_tokens=96, checkpoint_every=0,
                actor=Actor(lr=2e-3, min_lr=2e-4, lr_schedule="cosine", warmup_steps=5))
    return Cascade(name="launched", model=Model(build="tiny-qwen3"),
                   parallel=Parallel(micro_batch_size=32),
                   stages=(sft, _rlhf(steps=2, prompts_per_step=4)))


def rlhf_in_short_jobs() -> Cascade:
    """One RLHF step scored by a reward model the test serves behind a slow proxy, in jobs shorter
    than the step (tests/slurm/test_time_limit.py): no step-interval or timed save, so only the
    deadline's stops save."""
    return Cascade(name="short-jobs", model=Model(build="tiny-qwen3"),
                   parallel=Parallel(micro_batch_size=32),
                   stages=(_rlhf(steps=1, prompts_per_step=8),), checkpoint_every_minutes=0,
                   gate=Gate(suites=("tiny-math",), samples=1, limit=4, max_tokens=16))


def gate_in_short_jobs() -> Cascade:
    """Two SFT steps and a gate row longer than a job (tests/slurm/test_time_limit.py): the
    RM-scored tiny-rlhf suite in 8 chunks of 8 items, each chunk scored by the reward model the test
    serves behind a slow proxy. No base row, so only the stage's row is slow."""
    data = Data(source="synthetic:arithmetic", split="train", seed=1)
    sft = Stage(name="sft", kind="sft", data=data, steps=2, sft_batch_size=16, sft_max_tokens=96,
                checkpoint_every=0, actor=Actor(lr=2e-3))
    gate = Gate(suites=("tiny-rlhf",), samples=1, max_tokens=16, evaluate_base=False, chunk_items=8,
                reward_model_url="http://reward-model.invalid:8000")
    return Cascade(name="short-gate", model=Model(build="tiny-qwen3"),
                   parallel=Parallel(micro_batch_size=16), stages=(sft,),
                   checkpoint_every_minutes=0, gate=gate)


def from_an_unreleased_base() -> Cascade:
    """A cascade whose base was never released (tests/slurm/test_sbatch.py): its job names the
    recipe that makes the base, in one line."""
    made_by = "tests/slurm/recipes.py:sft_then_rlhf"
    return replace(sft_then_rlhf(), name="from-unreleased", stages=sft_then_rlhf().stages[:1],
                   model=Model(hf_path="/nonexistent/models/Unreleased-SFT", made_by=made_by))
