"""Every checker of the registries (IFEval, IFBench and IFBench-Train, paper §4.4) returns a bool
for a megabyte of random or hostile text, without raising (docs/rewards.md: any string up to 1 MB,
in bounded time).

The checkers are called directly, not through the reward's exception guard, so a raise fails the
test. The time is printed (run with ``-s`` to see it) and not asserted: tests never assert on wall
time. The timeout is only a guard against a hang, e.g. a regular expression that backtracks
quadratically — which on a megabyte takes hours, not seconds.
"""
from __future__ import annotations

import json
import random
import string
import time
from pathlib import Path

import pytest

from nemo_cascade.rewards.ifeval import ALL
from nemo_cascade.rewards.ifeval.spec import bind

from .ifbench_data import ifbench_rows
from .ifeval_corpus import read_jsonl_gz

MEGABYTE = 1_000_000
# Shapes that broke naive implementations: runs of line starts (per-line regexes, removing list
# items while iterating), of '<', '[', '*', '(' and quotes (backtracking bracket and highlight
# patterns, nesting stacks), abbreviations (sentence splitters), "Question" labels and tabs (the CSV
# and quiz checkers).
TRAPS = ["\n", "<", "[", "*", "(", '"', " \n", ".", "Mr. ", "?!", "<<a>>", "Question 1\n", "\t"]


def _texts() -> dict[str, str]:
    rng = random.Random(0)
    alphabet = string.ascii_letters + string.digits + string.punctuation + " " * 10 + "\n\n" + "😀é日"
    segment = MEGABYTE // len(TRAPS)
    return {
        "random": "".join(rng.choice(alphabet) for _ in range(MEGABYTE)),
        "newlines": "\n" * MEGABYTE,
        "traps": "".join((trap * (segment // len(trap) + 1))[:segment] for trap in TRAPS),
    }


def _one_label_per_instruction() -> dict[str, dict]:
    rows = read_jsonl_gz(
        Path(__file__).resolve().parents[2] / "data" / "ifeval" / "input_data.jsonl.gz")
    kwargs: dict[str, dict] = {}
    for row in rows + ifbench_rows():
        for iid, kw in zip(row["instruction_id_list"], row["kwargs"]):
            kwargs.setdefault(iid, kw)
    train_cases = (Path(__file__).resolve().parents[1] / "data" / "ifbench_train"
                   / "reference_verdicts.jsonl")
    for line in train_cases.read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        kwargs.setdefault(case["instruction_id"], case["kwargs"])
    return kwargs


@pytest.mark.timeout(900)
def test_every_checker_returns_a_bool_for_a_megabyte():
    kwargs = _one_label_per_instruction()
    assert set(kwargs) == set(ALL)
    total = 0.0
    for name, text in _texts().items():
        started = time.monotonic()
        for iid in sorted(ALL):
            instruction = ALL[iid]
            assert isinstance(instruction.check(text, **bind(instruction, kwargs[iid])), bool), iid
        elapsed = time.monotonic() - started
        total += elapsed
        print(f"{name}: {len(ALL)} checkers on {len(text):,} characters in {elapsed:.1f} s")
    print(f"total {total:.1f} s")
