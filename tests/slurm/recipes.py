"""Recipes the slurm tier launches as nemo-run experiments (a file inside the checkout, so the jobs can load it)."""
from dataclasses import replace

from nemo_cascade.config import Gate


def sft_then_rlhf():
    """SFT → RLHF scored by a served reward model (``nemo-cascade launch --reward-model``): two stage jobs and a
    serve job; shortened from the kill-and-resume test's recipe, without the gate."""
    from tests.integration.test_resume import recipe

    cfg = recipe()
    sft, rlhf = cfg.stages
    # the URL is the recipe's placeholder: each job is handed the served model's URL file instead
    rlhf = replace(rlhf, steps=2, checkpoint_every=0, grpo=replace(rlhf.grpo, kl_coef=0.0, prompts_per_step=4),
                   reward=replace(rlhf.reward, reward_model_url="http://reward-model.invalid:8000"))
    return replace(cfg, name="launched", stages=(replace(sft, steps=10, checkpoint_every=0), rlhf), gate=Gate())
