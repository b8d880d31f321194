"""Synthetic arithmetic (demo_data): correct answers, held-out split, determinism, SFT pairs the
math reward accepts."""
import re

import pytest

from nemo_cascade.data.generated import sft_pairs
from nemo_cascade.rewards.math import math_reward
from nemo_cascade.tooling.demo_data.arithmetic import arithmetic

QUESTION = re.compile(r"What is (\d+) ([+-]) (\d+)\? Put the final answer in \\boxed\{\}\.")


def _pair(row):
    a, op, b = QUESTION.fullmatch(row["question"]).groups()
    return int(a), op, int(b)


def test_rows_are_correct_and_well_formed():
    rows = arithmetic("train", 200, seed=0)
    assert len(rows) == 200 and len({r["uid"] for r in rows}) == 200
    for r in rows:
        a, op, b = _pair(r)
        assert r["answer"] == str(a + b if op == "+" else a - b)
        assert int(r["answer"]) >= 0
    assert {_pair(r)[1] for r in rows} == {"+", "-"}


def test_train_and_test_operand_pairs_are_disjoint_for_any_seed():
    train = {_pair(r) for r in arithmetic("train", 0, seed=1)}
    test = {_pair(r) for r in arithmetic("test", 0, seed=2)}
    assert train and test and not train & test
    assert 0.05 < len(test) / (len(train) + len(test)) < 0.3
    # the split is a property of the problem, not of the seed
    assert {_pair(r) for r in arithmetic("test", 0, seed=99)} == test


def test_deterministic_and_seeded():
    assert arithmetic("train", 50, seed=3) == arithmetic("train", 50, seed=3)
    assert arithmetic("train", 50, seed=3) != arithmetic("train", 50, seed=4)


def test_size_limits():
    full = arithmetic("test", 0, seed=0)
    with pytest.raises(ValueError, match="exceeds"):
        arithmetic("test", len(full) + 1, seed=0)
    with pytest.raises(ValueError, match="split"):
        arithmetic("valid", 10, seed=0)


@pytest.mark.parametrize("mode", ["no_think", "think"])
def test_sft_pairs_score_full_reward(mode):
    rows = arithmetic("train", 20, seed=0)
    pairs = sft_pairs(rows, mode)
    for row, (messages, response) in zip(rows, pairs):
        assert messages == [{"role": "user", "content": row["question"]}]
        assert math_reward(response, row["answer"]) == 1.0
        assert response.startswith("<think>") == (mode == "think")


def test_sft_pair_text():
    row = {
        "uid": "x", "question": "What is 23 + 45? Put the final answer in \\boxed{}.",
        "answer": "68", "solution": "23 + 45 = 68"}
    assert sft_pairs([row])[0][1] == "23 + 45 = 68. The answer is \\boxed{68}."


def test_registered_as_synthetic_arithmetic():
    from nemo_cascade.config import Data
    from nemo_cascade.data import generated

    data = Data(source="synthetic:arithmetic", split="test", size=20, seed=3)
    assert generated.rows(data) == arithmetic("test", 20, seed=3)
