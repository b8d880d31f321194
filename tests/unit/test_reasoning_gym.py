"""reasoning-gym prompt sets (``synthetic:rg/TASK``): deterministic draws, disjoint hash splits, our
math reward agreeing with reasoning-gym's own scorer, one-line errors, and loading for SFT and GRPO
through the loader."""
import json
import os
import subprocess
import sys
from decimal import Decimal

import pytest

from nemo_cascade.config import Data
from nemo_cascade.tooling.demo_data import reasoning_gym as rgsets
from nemo_cascade.data.chat import render
from nemo_cascade.data.loader import DataError, load_prompts, load_sft_examples
from nemo_cascade.data.generated import sft_pairs
from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer
from nemo_cascade.rewards import REWARDS, VALIDATORS, get_domain

reasoning_gym = pytest.importorskip("reasoning_gym")


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tok"))


def _wrong(answer: str) -> str:
    """A different number: answer + 1 never contains the answer as a substring (reasoning-gym's
    default scorer gives partial credit for that), for integers and decimals alike."""
    return str(Decimal(answer) + 1)


@pytest.mark.parametrize("task", rgsets.SUPPORTED_NAMES)
def test_math_reward_agrees_with_reasoning_gym_scorer(task):
    """Same verdict as reasoning-gym on the reference (full credit from both) and on a wrong number
    (ours 0, theirs below full: gsm_symbolic gives 0.01 to any parsable wrong number). The reference
    SFT responses, no_think and think, earn full reward too."""
    score = reasoning_gym.get_score_answer_fn(task)
    math_reward = REWARDS["math"]
    entries, rows = rgsets.entries(task, "train", 6, 0), rgsets.rows(task, "train", 6, 0)
    for entry, row in zip(entries, rows):
        VALIDATORS["math"](row["answer"])
        assert row["question"].startswith(entry["question"].rstrip())
        assert row["question"].endswith(rgsets.BOXED_INSTRUCTION)
        assert score(row["answer"], entry) == 1.0 == \
            math_reward(f"\\boxed{{{row['answer']}}}", row["answer"])
        wrong = _wrong(row["answer"])
        assert math_reward(f"The answer is \\boxed{{{wrong}}}.", row["answer"]) == 0.0
        assert score(wrong, entry) < 1.0, (task, row["answer"], wrong)
        for mode in ("no_think", "think"):
            (_, response), = sft_pairs([row], mode)
            assert math_reward(response, row["answer"]) == 1.0, response


@pytest.mark.parametrize("task", ["chain_sum", "leg_counting", "gsm_symbolic"])
def test_splits_are_disjoint_and_independent_of_seed_and_size(task):
    train = rgsets.rows(task, "train", 120, 0) + rgsets.rows(task, "train", 120, 1)
    test = rgsets.rows(task, "test", 60, 0) + rgsets.rows(task, "test", 60, 7)
    assert not {r["question"] for r in train} & {r["question"] for r in test}
    assert all(rgsets.split_of(task, r["question"].removesuffix(f"\n\n{rgsets.BOXED_INSTRUCTION}"))
               == "test" for r in test)
    # distinct within a call
    assert len({r["uid"] for r in rgsets.rows(task, "train", 120, 0)}) == 120
    # size only truncates
    assert rgsets.rows(task, "test", 10, 7) == rgsets.rows(task, "test", 60, 7)[:10]


def test_deterministic_per_seed_and_across_processes():
    """Same seed, same rows — also in a fresh interpreter with another str hash seed; another seed,
    other rows."""
    first = rgsets.rows("basic_arithmetic", "train", 20, 3)
    assert rgsets.rows("basic_arithmetic", "train", 20, 3) == first
    assert rgsets.rows("basic_arithmetic", "train", 20, 4) != first
    code = ("import json; "
            "from nemo_cascade.tooling.demo_data.reasoning_gym import rows, SUPPORTED_NAMES\n"
            "print(json.dumps({t: rows(t, 'test', 5, 3) for t in SUPPORTED_NAMES}))")
    # a hash seed other than this process's (random unless PYTHONHASHSEED is set): set/dict order of
    # strings inside a generator would show up here
    other = str(int(os.environ.get("PYTHONHASHSEED", "0") or 0) + 1)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": other}).stdout
    assert json.loads(out) == {t: rgsets.rows(t, "test", 5, 3) for t in rgsets.SUPPORTED_NAMES}


def test_options_reach_the_task_config():
    rows = rgsets.rows("chain_sum?min_terms=2&max_terms=2&min_digits=1&max_digits=1", "train",
                       30, 0)
    assert all(len(r["solution"].split(" = ")[0].split()) == 3 for r in rows)  # "a OP b"
    with pytest.raises(ValueError, match="bad options"):
        rgsets.rows("chain_sum?no_such_option=1", "train", 1, 0)
    with pytest.raises(ValueError, match="data.seed"):
        rgsets.rows("chain_sum?seed=3", "train", 1, 0)
    # ~30 one-digit sums in the split
    with pytest.raises(ValueError, match="only .* distinct test problems"):
        rgsets.rows("chain_sum?min_terms=2&max_terms=2&min_digits=1&max_digits=1", "test", 400, 0)


def test_unknown_or_unsupported_task_is_a_one_line_data_error(tok):
    # the second exists but needs a reduced form
    for task in ("no_such_task", "fraction_simplification"):
        with pytest.raises(DataError) as err:
            load_prompts(Data(source=f"synthetic:rg/{task}", size=2), tok, "no_think",
                         get_domain("math"), 512)
        message = str(err.value)
        assert "\n" not in message and repr(task) in message and "chain_sum, " in message
    with pytest.raises(ValueError, match="split"):
        rgsets.rows("chain_sum", "validation", 2, 0)


def test_load_prompts_and_sft_examples_through_the_loader(tok):
    data = Data(source="synthetic:rg/chain_sum", size=8, split="test", seed=5)
    prompts = load_prompts(data, tok, "no_think", get_domain("math"), 1024,
                           validate_label=VALIDATORS["math"])
    rows = rgsets.rows("chain_sum", "test", 8, 5)
    assert len(prompts) == 8 and prompts.dropped_too_long == 0 and prompts.bad_rows == 0
    for p, row in zip(prompts, rows):
        assert (p.domain, p.uid, p.label, p.mode) == ("math", row["uid"], row["answer"], "no_think")
        assert tok.decode(p.prompt_tokens) == \
            render([{"role": "user", "content": row["question"]}], "no_think")
    examples = load_sft_examples(Data(source="synthetic:rg/gsm_symbolic", size=4, seed=1), tok,
                                 "think", 2048)
    assert len(examples) == 4
    prompt_ids, response_ids = examples[0]
    assert ("\\boxed{" in tok.decode(response_ids)
            and "Put the final answer in" in tok.decode(prompt_ids))


def test_leg_counting_is_worked_out_animal_by_animal_to_the_generators_total():
    """The SFT response names each animal's legs and adds them up; its last number is
    reasoning-gym's own answer."""
    for row in rgsets.rows("leg_counting?min_animals=1&max_animals=2&max_instances=3", "train",
                           60, 0):
        steps = row["solution"]
        assert (steps.split(" = ")[-1].split()[0] == row["answer"]
                or steps.endswith(f"has {row['answer']} legs"))
        if " + " in steps:  # two kinds of animal: the sum of the two products
            terms = steps.rsplit(". ", 1)[1].split(" = ")[0].split(" + ")
            assert sum(map(int, terms)) == int(row["answer"]), steps
