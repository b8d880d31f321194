"""The ``swe`` reward domain (SWE RL, §4.7): an Agentless repair answer against the golden patch,
Eq. 2.

Rows build their §4.7.1 prompt for the stage's prompt limit (``data.swe_prompts``), so the adapter
takes the loader's prompt budget. Steps and suites report the share of each Eq. 2 outcome (which
branch scored a sample).
"""
from __future__ import annotations

from ...config import Reward
from ...data.schemas import adapt_swe
from ..remote import JudgeClient
from ..reward_domain import BatchVerdicts, RewardDomain, shares
from .reward import JudgeGrader, SWEReward, swe_reward, validate_label


def batch_verdicts(settings: Reward) -> BatchVerdicts:
    """Eq. 2's "otherwise" case: the judge's P("YES") if ``Reward.judge_url`` is set, else the
    lexical grade."""
    grader = (JudgeGrader(JudgeClient(settings.judge_url,
                                      reasoning_tokens=settings.judge_reasoning_tokens))
              if settings.judge_url else None)
    return SWEReward(grader).verdicts


def batch_metrics(details: list[dict]) -> dict[str, float]:
    """``swe/<outcome>``: the share of the batch's samples scored by each branch of Eq. 2 (§4.7)."""
    outcomes = [d["outcome"] for d in details if "outcome" in d]
    return shares(outcomes, "swe") if outcomes else {}


def eval_metrics(records: list[dict]) -> dict:
    """``swe/<outcome>`` over the generated samples of a suite (too-long items generated
    nothing)."""
    outcomes = [r["details"][j].get("outcome") for r in records if not r["too_long"]
                for j in range(len(r["scores"]))]
    return {f"swe/{o}": outcomes.count(o) / len(outcomes) for o in sorted(set(outcomes) - {None})}


def report_notes(m: dict) -> list[str]:
    return [f"mean Eq. 2 reward {m['mean_reward']:.3f}"] if m["mean_reward"] is not None else []


DOMAIN = RewardDomain("swe", adapt_swe, validate_label, batch_verdicts, reward=swe_reward,
                      prompt_budget=True,
                      servers=("judge_url",), batch_metrics=batch_metrics,
                      eval_options=("judge_url",),
                      eval_metrics=eval_metrics,
                      report_notes=report_notes)
"""The paper sets no code-switch penalty for SWE RL (§4.7): the defaults (none; the prompt-language
rule)."""

__all__ = ["DOMAIN", "batch_verdicts", "batch_metrics", "eval_metrics", "report_notes"]
