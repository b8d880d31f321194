"""Reward domains, their verifiers and stage scoring.

Each domain is one :class:`RewardDomain` in :data:`DOMAINS` (``rewards/domains.py``; docs/rewards.md
"Adding a reward domain"): ``math`` (§4.5), ``ifeval`` (IFEval and IFBench, §4.4), ``code``
(sandboxed, §4.6), ``swe`` (§4.7), ``rlhf`` (a served reward model, §4.3), and for evaluation
``mcq`` (multiple choice) and ``arena`` (ArenaHard's served judge). A verifier never raises on model
output and returns in bounded time for any string up to 1 MB. Training and evaluation both score
through here: a stage builds a :class:`~.scoring.Scorer` from its ``config.Reward`` (batched,
parallel, with servers where the domain needs one). ``REWARDS`` and ``VALIDATORS`` are views of the
registry for one-off use: ``REWARDS[domain](response, label)``, the self-contained verifiers with
default settings (``rlhf`` and ``arena`` have none: they need a server), and
``VALIDATORS[domain](label)``.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Iterator, Optional

from ..config import Data
from .domains import DOMAINS, adapt_row, get_domain, register, unregister
from .reward_domain import RewardDomain, RewardFn
from .scoring import (MixedScorer, ScoreAsFinished, Scorer, apply_code_switch_penalty,
                      penalize_code_switching,
                      resolve_code_switch_penalty, resolve_code_switch_rule, reward_metrics,
                      stage_scorer)


class _Field(Mapping):
    """Domain name → one field of its :class:`RewardDomain` (domains where it is None are absent);
    live, so a domain registered later appears."""

    def __init__(self, field: str):
        self._field = field

    def __getitem__(self, name: str) -> Any:
        value = getattr(DOMAINS[name], self._field)
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return (name for name, d in DOMAINS.items() if getattr(d, self._field) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


REWARDS: Mapping[str, RewardFn] = _Field("reward")
"""Domain → verifier with default settings (strict IFEval/IFBench verdicts, boxed math, sandboxed
code, SWE with the lexical grade)."""

VALIDATORS: Mapping[str, Callable[[Any], None]] = _Field("validate_label")
"""Domain → label check for data loading: a one-line ValueError for a malformed label
(docs/rewards.md)."""


def training_validator(domain: str, data: Data,
                       where: str = "data") -> Optional[Callable[[Any], None]]:
    """The label check of a source a stage *trains* on (``where``: its config path, e.g.
    ``stages.if_ifbench.data``): the domain's ``training_validator`` where it has one (IF-RL:
    IFBench *test* instruction ids only with ``data.allow_eval_instructions``, §4.4.2), else its
    :data:`VALIDATORS` entry; None for an unknown domain. Evaluation suites keep
    :data:`VALIDATORS`."""
    spec = DOMAINS.get(domain)
    if spec is None:
        return None
    return spec.training_validator(data, where) if spec.training_validator else spec.validate_label


__all__ = ["DOMAINS", "RewardDomain", "register", "unregister", "get_domain", "adapt_row",
           "REWARDS", "VALIDATORS", "training_validator", "RewardFn", "Scorer", "MixedScorer",
           "stage_scorer", "ScoreAsFinished", "apply_code_switch_penalty",
           "penalize_code_switching", "reward_metrics", "resolve_code_switch_penalty",
           "resolve_code_switch_rule"]
