"""The ``ifeval`` reward domain (IF-RL, §4.4): IFEval / IFBench / IFBench-Train instructions, strict
verdicts.

Training reward R_IF = 1 iff every instruction passes; thinking models may add the reward model's
bonus (§4.4.2, ``Reward.if_rm_bonus``). Steps log each instruction's pass rate; evaluation reports
IFEval's four numbers (Zhou et al. 2023, §3: prompt- and instruction-level, strict and loose).
"""
from __future__ import annotations

from collections import defaultdict
from functools import partial
from typing import Any, Optional, Sequence

from ...config import Data, Reward
from ...data.schemas import adapt_ifeval
from ...types import PromptGroup
from ..remote import RewardModelClient
from ..reward_domain import RewardDomain
from ..rlhf import RLHFReward
from .reward import (if_reward_with_rm, ifeval_reward, instruction_pass_rates, per_instruction,
                     validate_label,
                     validate_training_label)


def verdicts(responses: Sequence[str], labels: Sequence[Any]) -> tuple[list[float], list[dict]]:
    """R_IF = 1 iff every instruction passes (strict verdicts, §4.4); details keep each
    instruction's verdict for the per-instruction pass rates."""
    scores, details = [], []
    for response, label in zip(responses, labels):
        passed = per_instruction(response, label)
        scores.append(1.0 if all(passed) else 0.0)
        details.append({"instructions": dict(zip(label["instruction_id_list"], passed))})
    return scores, details


def training_validator(data: Data, where: str):
    """IF-RL rows may hold IFBench *test* instruction ids only with ``data.allow_eval_instructions``
    (§4.4.2)."""
    return partial(validate_training_label, allow_eval_instructions=data.allow_eval_instructions,
                   setting=f"{where}.allow_eval_instructions")


def rm_conversation(label: dict) -> dict:
    """What the reward model reads of an IF prompt: the whole conversation (system prompt and
    earlier turns of a multi-turn IF-RLVR row) where the label holds it, else the one user turn."""
    return {"messages": label["messages"]} if "messages" in label else {"prompt": label["prompt"]}


def rm_bonus(settings: Reward) -> Optional[Any]:
    """§4.4.2, thinking models (``Reward.if_rm_bonus``): R_IF + sigmoid(group-normalised RM score)
    where R_IF = 1. Only groups with a passing sample ask the reward model; the others stay all
    0."""
    if not settings.if_rm_bonus:
        return None
    rm = RLHFReward(RewardModelClient(settings.reward_model_url))

    def add(groups: list[PromptGroup]) -> None:
        todo = [g for g in groups if any(r == 1.0 for r in g.rewards_G)]
        if not todo:
            return
        responses = [text for g in todo for text in g.response_text_G]
        labels = [rm_conversation(g.label) for g in todo for _ in range(g.group_size)]
        rm_scores = rm.batch(responses, labels)
        start = 0
        for group in todo:
            end = start + group.group_size
            group.verdicts_G = list(group.rewards_G)  # dynamic filtering still judges R_IF (grpo)
            group.rewards_G = if_reward_with_rm(group.rewards_G, rm_scores[start:end])
            start = end
    return add


def batch_metrics(details: list[dict]) -> dict[str, float]:
    """``if_pass/<instruction id>``: each instruction's pass rate in the batch (the per-instruction
    report, §4.4)."""
    passed: dict[str, list[bool]] = defaultdict(list)
    for d in details:
        for iid, ok in d.get("instructions", {}).items():
            passed[iid].append(ok)
    return {f"if_pass/{iid}": sum(v) / len(v) for iid, v in sorted(passed.items())}


def eval_record(record: dict, label: Any, responses: list[str]) -> None:
    """The strict and loose verdicts of every sample, instruction by instruction (they replace the
    details)."""
    record.pop("details", None)
    record["instructions_strict"] = [per_instruction(r, label) for r in responses]
    record["instructions_loose"] = [per_instruction(r, label, loose=True) for r in responses]


def eval_metrics(records: list[dict]) -> dict:
    """IFEval's four numbers (Zhou et al. 2023, §3): prompt-level = share of samples following every
    instruction; instruction-level = followed instructions / all instructions (micro average over
    samples). Too-long items count as failing every instruction."""
    out = {}
    for kind in ("strict", "loose"):
        found = []
        for r in records:
            ids = r["label"]["instruction_id_list"]
            for v in r.get(f"instructions_{kind}") or [[False] * len(ids)] * len(r["values"]):
                found.append((ids, v))
        out[f"prompt_{kind}"] = sum(all(v) for _, v in found) / len(found)
        out[f"instruction_{kind}"] = sum(sum(v) for _, v in found) / sum(len(v) for _, v in found)
        if kind == "strict":
            out["instructions"] = instruction_pass_rates(found)
    return out


def report_notes(m: dict) -> list[str]:
    return [f"prompt loose {100 * m['prompt_loose']:.1f}, instr. strict "
            f"{100 * m['instruction_strict']:.1f}, instr. loose {100 * m['instruction_loose']:.1f}"]


DOMAIN = RewardDomain("ifeval", adapt_ifeval, validate_label, lambda settings: verdicts,
                      reward=ifeval_reward,
                      training_validator=training_validator, group_bonus=rm_bonus,
                      batch_metrics=batch_metrics,
                      record_label=True, eval_record=eval_record, eval_metrics=eval_metrics,
                      report_notes=report_notes)
"""The paper sets no code-switch penalty for IF-RL (§4.4): the defaults (none; the prompt-language
rule)."""

__all__ = ["DOMAIN", "verdicts", "training_validator", "rm_conversation", "rm_bonus",
           "batch_metrics", "eval_record", "eval_metrics", "report_notes"]
