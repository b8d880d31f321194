"""Reward registry: ``REWARDS[domain](response, label) -> float``, label validators, and stage scoring.

One module per domain holds its verifier (docs/rewards.md): ``math`` (§4.5), ``ifeval`` (IFEval and IFBench,
§4.4), ``code`` (sandboxed, §4.6), ``swe`` (§4.7), ``rlhf`` (a served reward model, §4.3). A verifier never
raises on model output and returns in bounded time for any string up to 1 MB. Training and evaluation both
score through here: a stage builds a :class:`~.scoring.Scorer` from its ``config.Reward`` (batched, parallel,
with servers where the domain needs one); ``REWARDS`` holds the self-contained verifiers with default settings
for one-off use. ``rlhf`` has no entry there: it needs a reward-model server (``Reward.reward_model_url``).
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, Optional

from ..config import Data
from . import code, ifeval, math, rlhf, swe
from .scoring import (MixedScorer, ScoreAsFinished, Scorer, apply_code_switch_penalty, penalize_code_switching,
                      resolve_code_switch_penalty, resolve_code_switch_rule, reward_metrics, stage_scorer)

RewardFn = Callable[[str, Any], float]

REWARDS: dict[str, RewardFn] = {
    "math": math.math_reward,
    "ifeval": ifeval.ifeval_reward,
    "code": code.code_reward,
    "swe": swe.swe_reward,
}
"""Domain → verifier with default settings (strict IFEval/IFBench verdicts, boxed math, sandboxed code,
SWE with the lexical grade)."""

VALIDATORS: dict[str, Callable[[Any], None]] = {
    "math": math.validate_label,
    "ifeval": ifeval.validate_label,
    "code": code.validate_label,
    "swe": swe.validate_label,
    "rlhf": rlhf.validate_label,
}
"""Domain → label check for data loading: a one-line ValueError for a malformed label (docs/rewards.md)."""


def training_validator(domain: str, data: Data, where: str = "data") -> Optional[Callable[[Any], None]]:
    """The label check of a source a stage *trains* on (``where``: its config path, e.g.
    ``stages.if_ifbench.data``): the domain's :data:`VALIDATORS` entry, except that IF-RL rows may hold IFBench
    *test* instruction ids only with ``data.allow_eval_instructions`` (§4.4.2; ``ifeval.validate_training_label``).
    Evaluation suites keep :data:`VALIDATORS`."""
    if domain == "ifeval":
        return partial(ifeval.validate_training_label, allow_eval_instructions=data.allow_eval_instructions,
                       setting=f"{where}.allow_eval_instructions")
    return VALIDATORS.get(domain)


__all__ = ["REWARDS", "VALIDATORS", "training_validator", "RewardFn", "Scorer", "MixedScorer", "stage_scorer",
           "ScoreAsFinished", "apply_code_switch_penalty", "penalize_code_switching", "reward_metrics",
           "resolve_code_switch_penalty", "resolve_code_switch_rule"]
