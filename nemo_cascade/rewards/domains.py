"""The registry of reward domains: ``DOMAINS[name]`` is that domain's
:class:`~.reward_domain.RewardDomain`.

Each domain module defines its own entry (``DOMAIN``, at the end of ``math.py``, ``code.py``,
``rlhf.py``, ``mcq.py``, ``arena.py``, and in ``ifeval/domain.py``, ``swe/domain.py``); this
module only collects them. Import direction: the domain modules import their row adapters from
``data.schemas`` (rewards reads ``data``: chat templates,
                  RM renderings); data never imports rewards,
its loader is handed the domain.
``config.REWARD_DOMAINS`` lists the same names for config validation (config sits below rewards and
cannot import this; :func:`register` adds to both); tests/unit/test_reward_domain_registry.py fails
when the two differ.
"""
from __future__ import annotations

from typing import Any, Optional

from ..config import REWARD_DOMAINS
from ..data.schemas import SchemaError, adapt
from ..data.swe_prompts import PromptBudget
from . import arena, code, math, mcq, rlhf
from .ifeval import domain as ifeval
from .reward_domain import RewardDomain
from .swe import domain as swe

DOMAINS: dict[str, RewardDomain] = {
    d.name: d for d in (math.DOMAIN, ifeval.DOMAIN, code.DOMAIN, swe.DOMAIN, rlhf.DOMAIN,
                        mcq.DOMAIN, arena.DOMAIN)}
"""Every reward domain by name, in the cascade's order of first use; then the evaluation ones
(multiple choice, ArenaHard's judge), which a stage may also train with."""


def register(domain: RewardDomain) -> RewardDomain:
    """Add ``domain`` to :data:`DOMAINS` and its name to those configs accept
    (``config.REWARD_DOMAINS``): a domain defined outside this package (a user's plugin file,
    docs/rewards.md), or in a test. A name already taken is a ValueError. Returns it."""
    if domain.name in DOMAINS:
        raise ValueError(f"reward domain {domain.name!r} is already registered")
    DOMAINS[domain.name] = domain
    REWARD_DOMAINS.append(domain.name)
    return domain


def unregister(name: str) -> None:
    """Remove a registered domain (a test's) from :data:`DOMAINS` and from the names configs
    accept."""
    del DOMAINS[name]
    REWARD_DOMAINS.remove(name)


def get_domain(name: str) -> RewardDomain:
    """The domain called ``name``; a one-line ValueError naming the known ones otherwise."""
    if name not in DOMAINS:
        raise ValueError(f"no reward domain {name!r}; expected one of {sorted(DOMAINS)}")
    return DOMAINS[name]


def adapt_row(name: str, row: dict, where: str, swe_budget: Optional[PromptBudget] = None
              ) -> tuple[Optional[list[dict]], Any]:
    """``data.schemas.adapt`` by the domain's name: ``(prompt messages, label)`` of one row;
    SchemaError (one line) for a row that fits no schema or a domain that has none."""
    if name not in DOMAINS:
        raise SchemaError(f"{where}: no row schema for domain {name!r}; expected one of "
                          f"{sorted(DOMAINS)}")
    return adapt(DOMAINS[name], row, where, swe_budget)


__all__ = ["DOMAINS", "RewardDomain", "register", "unregister", "get_domain", "adapt_row"]
