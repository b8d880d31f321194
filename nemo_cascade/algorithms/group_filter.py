"""Which sampled groups and samples a GRPO step learns from: the overlong policies (§4.5.2),
dynamic filtering of groups without a gradient signal (§4.4.2), and the refill of a step's rounds
until it has enough informative groups. Pure functions of scored groups; the batch they feed is
:func:`nemo_cascade.algorithms.grpo.make_batch`.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from nemo_cascade.config import GRPO
from nemo_cascade.types import PromptGroup

Tensor = torch.Tensor


def is_zero_variance(rewards_G: Tensor) -> bool:
    """True when every reward of the group is equal (or the group has ≤ 1 sample).

    Such a group has advantage 0 for every sample, so it carries no gradient signal; DAPO-style
    dynamic filtering drops all-correct and all-wrong groups (IF-RL, paper §4.4.2). Exact equality:
    rewards are produced by the same verifier, so equal outcomes are bit-identical.
    """
    return rewards_G.numel() <= 1 or bool((rewards_G == rewards_G[0]).all())


def nonzero_variance_groups(rewards_P: Sequence[Tensor]) -> list[int]:
    """Indices of the groups to keep after dropping zero-variance groups (§4.4.2); order
    preserved."""
    return [p for p, rewards_G in enumerate(rewards_P) if not is_zero_variance(rewards_G)]


def overlong_none(rewards_G: Tensor, truncated_G: Tensor) -> tuple[Tensor, Tensor]:
    """Truncated samples are scored as they are (paper: no overlong filtering, e.g. RLHF, T15)."""
    return rewards_G, torch.ones_like(truncated_G, dtype=torch.bool)


def overlong_zero(rewards_G: Tensor, truncated_G: Tensor) -> tuple[Tensor, Tensor]:
    """Truncated samples get reward 0 and stay in the group (Math RL 32K/40K stages, §4.5.2)."""
    zeroed_G = torch.where(truncated_G, torch.zeros_like(rewards_G), rewards_G)
    return zeroed_G, torch.ones_like(truncated_G)


def overlong_filter(rewards_G: Tensor, truncated_G: Tensor) -> tuple[Tensor, Tensor]:
    """Truncated samples are skipped: they leave the loss AND the group's statistics (Math RL 24K,
    §4.5.2).

    The paper says overlong samples are "skipped, not given 0" (§4.5.2); DAPO's overlong filtering
    masks their loss. We also leave them out of the group mean/std: their (usually failing) reward
    in the baseline would still push the kept samples' advantages up relative to a truncation, i.e.
    re-introduce the length penalty that filtering is meant to remove. Returns (rewards unchanged,
    keep_G = not truncated).
    """
    return rewards_G, ~truncated_G


OVERLONG: dict[str, Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]] = {
    "none": overlong_none, "zero": overlong_zero, "filter": overlong_filter}


def _truncated(group: PromptGroup) -> Tensor:
    return torch.tensor([f == "length" for f in group.finish_reason_G], dtype=torch.bool)


def policy_rewards(group: PromptGroup, cfg: GRPO) -> tuple[Tensor, Tensor, Tensor]:
    """``(rewards_G as scored, rewards_G after the overlong policy, keep_G)`` of one scored
    group."""
    rewards_G = torch.tensor(group.rewards_G, dtype=torch.float64)
    return (rewards_G, *OVERLONG[cfg.overlong](rewards_G, _truncated(group)))


def filter_values(group: PromptGroup, rewards_G: Tensor, keep_G: Tensor, cfg: GRPO) -> Tensor:
    """What dynamic filtering judges a group by (:func:`statistics_rewards` of it): its verifier's
    verdicts where a bonus was added to them (``PromptGroup.verdicts_G``: IF-RL's reward-model
    bonus, whose unequal values would keep an all-correct group; the paper drops all-correct and
    all-wrong groups, §4.4.2), else its rewards after the overlong policy (``rewards_G``)."""
    if group.verdicts_G:
        rewards_G, _ = OVERLONG[cfg.overlong](torch.tensor(group.verdicts_G, dtype=torch.float64),
                                              _truncated(group))
    return statistics_rewards(rewards_G, keep_G, cfg)


def statistics_rewards(rewards_G: Tensor, keep_G: Tensor, cfg: GRPO) -> Tensor:
    """The rewards a group's mean and std (and its zero-variance test) are taken over: the kept
    samples, or with ``cfg.overlong_filter_stats == "all"`` every sample, a filtered one leaving the
    loss only (DAPO's masking). The paper says only that overlong samples are "skipped" (§4.5.2);
    docs/recipes.md ("Ambiguities, decided") gives the choice."""
    return rewards_G if cfg.overlong_filter_stats == "all" else rewards_G[keep_G]


def is_informative(group: PromptGroup, cfg: GRPO) -> bool:
    """True when the group's statistics rewards (:func:`statistics_rewards`) are unequal and a
    sample is kept: a nonzero advantage somewhere in the loss, i.e. a gradient signal. This is the
    group ``grpo.make_batch`` would keep under ``drop_zero_variance_groups`` (§4.4.2)."""
    _, rewards_G, keep_G = policy_rewards(group, cfg)
    return has_signal(group, rewards_G, keep_G, cfg)


def has_signal(group: PromptGroup, rewards_G: Tensor, keep_G: Tensor, cfg: GRPO) -> bool:
    """:func:`is_informative` of a group whose overlong policy is applied already."""
    return bool(keep_G.any()) and not is_zero_variance(filter_values(group, rewards_G, keep_G, cfg))


class Refill:
    """One step's rounds of generation, refilled until ``cfg.prompts_per_step`` groups are
    informative (DAPO's dynamic sampling; the paper drops all-correct / all-wrong groups, §4.4.2).
    The caller generates; this only says how many prompts each round samples:

        refill = Refill(cfg)
        while n := refill.prompts_wanted():
            refill.add(generate_and_score(stream.next_batch(n), round_=refill.round))

    Round 0 samples ``prompts_per_step`` prompts. While fewer groups than that are informative
    (:func:`is_informative`) and fewer than ``cfg.refill_max_rounds`` extra rounds ran, the next
    round samples exactly the missing number, so no informative group is generated only to be
    thrown away and the update never sees more than ``prompts_per_step`` of them. ``groups``
    holds every group in draw order (``grpo.make_batch`` drops the zero-variance ones)."""

    def __init__(self, cfg: GRPO):
        self.cfg, self.groups, self.informative, self.round = cfg, [], 0, 0

    def prompts_wanted(self) -> int:
        """How many prompts round ``self.round`` samples; 0 once the step has its groups."""
        cfg = self.cfg
        if self.round == 0:
            return cfg.prompts_per_step
        missing = cfg.prompts_per_step - self.informative
        more = cfg.drop_zero_variance_groups and missing > 0 and self.round <= cfg.refill_max_rounds
        return missing if more else 0

    def add(self, groups: list[PromptGroup]) -> None:
        """A round's scored groups."""
        self.groups = self.groups + groups
        self.informative += sum(is_informative(g, self.cfg) for g in groups)
        self.round += 1

    def metrics(self) -> dict[str, float]:
        """``refill_rounds`` (rounds after the first) and ``groups_informative``."""
        return {"refill_rounds": float(max(self.round - 1, 0)),
                "groups_informative": float(self.informative)}
