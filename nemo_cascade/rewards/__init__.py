"""Reward registry: ``REWARDS[domain](response, label) -> float``, and scoring of rollout groups.

One module per domain holds its verifier (DESIGN.md "Rewards"); this package only maps domain names to them
and fills ``PromptGroup.rewards_G``. A verifier never raises on model output and returns in bounded time for
any string up to 1 MB.
"""
from __future__ import annotations

from typing import Any, Callable

from ..types import PromptGroup
from .math import math_reward

RewardFn = Callable[[str, Any], float]

REWARDS: dict[str, RewardFn] = {
    "math": math_reward,
}
"""Domain → verifier. ifeval / code / swe / rlhf join as their modules land."""


def score_groups(groups: list[PromptGroup], reward_fn: RewardFn) -> list[PromptGroup]:
    """Fill ``rewards_G`` of every group from its ``response_text_G`` and the prompt's label (in place;
    the groups are also returned). A group without one text per sample is a caller bug: ValueError."""
    for i, group in enumerate(groups):
        if len(group.response_text_G) != group.group_size:
            raise ValueError(f"groups[{i}]: {len(group.response_text_G)} response texts for "
                             f"{group.group_size} samples; detokenise before scoring")
        group.rewards_G = [float(reward_fn(text, group.label)) for text in group.response_text_G]
    return groups


__all__ = ["REWARDS", "RewardFn", "score_groups"]
