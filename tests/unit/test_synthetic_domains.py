"""Synthetic IF, code and bug-fix sets: labels validate, the reference response earns full reward, a
wrong one does not, and the held-out split never shares a problem with the training split."""
import pytest

from nemo_cascade.tooling.demo_data.synthetic_domains import DOMAIN_TASKS, IF_INSTRUCTIONS
from nemo_cascade.rewards import REWARDS, VALIDATORS

DOMAIN = {
    "if_arithmetic": "ifeval", "code_arithmetic": "code", "bugfix_arithmetic": "swe",
    "mbpp_code": "code", "mbpp_bugfix": "swe", "if_requests": "ifeval"}


def test_every_set_is_checked_here():
    """The verifiable sets below; chat_arithmetic is scored by the cascade's own reward model (its
    preference pairs: test_demo_data.py), so only its label is checked here."""
    assert set(DOMAIN_TASKS) == {*DOMAIN, "chat_arithmetic"}
    for row in DOMAIN_TASKS["chat_arithmetic"]("test", 20, 0):
        VALIDATORS["rlhf"](row["label"])


@pytest.mark.parametrize("name", sorted(DOMAIN))
def test_reference_responses_earn_full_reward(name):
    rows = DOMAIN_TASKS[name]("test", 0, 0)
    domain = DOMAIN[name]
    for row in rows if domain != "code" else rows[:4]:  # code runs in the sandbox: a few suffice
        VALIDATORS[domain](row["label"])
        assert REWARDS[domain](row["response"], row["label"]) == 1.0, row


@pytest.mark.parametrize("name, wrong", [
    ("if_arithmetic", "plain text that follows none of the instructions, it has a comma"),
    ("code_arithmetic", "```python\ndef f(x):\n    return 12345\n```"),
])
def test_wrong_responses_do_not(name, wrong):
    row = DOMAIN_TASKS[name]("train", 3, 0)[0]
    assert REWARDS[DOMAIN[name]](wrong, row["label"]) == 0.0


def test_bugfix_wrong_edit_scores_below_one():
    row = DOMAIN_TASKS["bugfix_arithmetic"]("train", 1, 0)[0]
    search = row["label"]["files"]["calc.py"].splitlines()[1]
    edit = f"### calc.py\n<<<<<<< SEARCH\n{search}\n=======\n    return 0\n>>>>>>> REPLACE"
    assert REWARDS["swe"](edit, row["label"]) < 1.0
    assert REWARDS["swe"]("I would rather not.", row["label"]) == -1.0


@pytest.mark.parametrize("name", sorted(DOMAIN_TASKS))
def test_splits_are_disjoint_and_seed_only_orders(name):
    gen = DOMAIN_TASKS[name]
    train, test = {r["uid"] for r in gen("train", 0, 0)}, {r["uid"] for r in gen("test", 0, 0)}
    assert train and test and not train & test
    assert {r["uid"] for r in gen("test", 0, 1)} == test
    assert [r["uid"] for r in gen("train", 5, 3)] == [r["uid"] for r in gen("train", 5, 3)]
    with pytest.raises(ValueError, match="exceeds"):
        gen("test", len(test) + 1, 0)


def test_every_if_instruction_is_used():
    rows = DOMAIN_TASKS["if_arithmetic"]("train", 0, 0)
    assert {i for r in rows for i in r["instruction_id_list"]} == {
        i for part in IF_INSTRUCTIONS.values() for i, _, _ in part}
    assert {len(r["instruction_id_list"]) for r in rows} == {2, 3}
