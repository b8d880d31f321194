"""Our IFBench-Train verdicts equal the reference verifier's (paper §4.4.2, the second IF-RL
sub-stage).

tests/data/ifbench_train/reference_verdicts.jsonl holds 348 responses judged by the IF-RLVR verifier
of open-instruct (its ``IFEvalG`` checkers; tests/data/ifbench_train/README.md says how they were
made): 12 per instruction id, half followed. Every verdict must be reproduced — there are no
exceptions.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from nemo_cascade.rewards.ifeval import IFBENCH_TRAIN, per_instruction

CASES = Path(__file__).resolve().parents[1] / "data" / "ifbench_train" / "reference_verdicts.jsonl"


def _cases() -> list[dict]:
    return [json.loads(line) for line in CASES.read_text(encoding="utf-8").splitlines()]


def test_every_reference_verdict_is_reproduced():
    cases = _cases()
    mismatches = []
    for case in cases:
        label = {
            "prompt": "p", "instruction_id_list": [case["instruction_id"]],
            "kwargs": [case["kwargs"]]}
        ours = per_instruction(case["response"], label, registry=IFBENCH_TRAIN)[0]
        if ours != case["followed"]:
            mismatches.append(
                (case["instruction_id"], case["kwargs"], case["response"][:80], case["followed"]))
    assert not mismatches, f"{len(mismatches)} of {len(cases)} disagree: {mismatches[:5]}"


def test_the_cases_cover_every_id_both_ways():
    counts = Counter((c["instruction_id"], c["followed"]) for c in _cases())
    assert {iid for iid, _ in counts} == set(IFBENCH_TRAIN)
    assert all(counts[(iid, v)] >= 6 for iid in IFBENCH_TRAIN for v in (True, False))
