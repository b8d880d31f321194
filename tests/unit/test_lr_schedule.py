"""The LR schedule's horizon (T14: "cosine schedule to 0" over the trained steps, beside "Max Steps
100K")."""
import math
from pathlib import Path

import pytest
import torch

from nemo_cascade import config
from nemo_cascade.actor.optimizer import lr_scheduler
from nemo_cascade.tooling.cli import load_recipe
from nemo_cascade.tooling.overrides import apply_overrides

ROOT = Path(__file__).resolve().parents[2]


def _lr_after(actor: config.Actor, total_steps: int, steps: int) -> float:
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=actor.lr)
    scheduler = lr_scheduler(optimizer, actor, total_steps)
    for _ in range(steps):
        scheduler.step(1)
    return optimizer.param_groups[0]["lr"]


SFT = config.Actor(lr=5e-5, lr_schedule="cosine", warmup_steps=200)


def test_default_horizon_is_the_stage_and_reaches_min_lr_at_its_last_step():
    assert _lr_after(SFT, 20_000, 20_000) == pytest.approx(0.0, abs=1e-12)


def test_lr_decay_steps_sets_a_longer_horizon():
    actor = config.Actor(lr=5e-5, lr_schedule="cosine", warmup_steps=200, lr_decay_steps=100_000)
    # Megatron's cosine: progress over the steps after warm-up.
    progress = (20_000 - 200) / (100_000 - 200)
    expected = 5e-5 * 0.5 * (math.cos(math.pi * progress) + 1)
    assert _lr_after(actor, 20_000, 20_000) == pytest.approx(expected, rel=1e-6)
    assert expected > 0.85 * 5e-5


def test_negative_horizon_is_refused_in_one_line():
    cfg = load_recipe(str(ROOT / "recipes" / "tiny.py"))
    with pytest.raises(config.ConfigError) as e:
        config.validate(apply_overrides(cfg, ["stages.sft.actor.lr_decay_steps=-1"]))
    assert "\n" not in str(e.value) and "stages.sft.actor.lr_decay_steps" in str(e.value)
