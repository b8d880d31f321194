"""benchmark:gsm8k / benchmark:mbpp: the shipped train splits load as RL prompts phrased exactly as
the eval suites phrase the test splits, labels validate, reference responses earn full reward, and
the splits never overlap."""
import gzip
import json

import pytest

from nemo_cascade.config import Data
from nemo_cascade.data.generated import rows as generated_rows
from nemo_cascade.data.loader import DataError, load_prompts
from nemo_cascade.evaluate.suites import get_suite, gsm8k_final_answer, load_items
from nemo_cascade.rewards import REWARDS, VALIDATORS, get_domain
from nemo_cascade.rewards.sandbox import SandboxUnavailable, check_available
from nemo_cascade.tooling.demo_data.benchmark_sets import DATA, gsm8k, mbpp

SETS = {"gsm8k": (gsm8k, "math", 7473, 1319), "mbpp": (mbpp, "code", 374, 500)}


@pytest.mark.parametrize("name", sorted(SETS))
def test_splits_hold_the_shipped_rows_and_labels_validate(name):
    gen, domain, n_train, n_test = SETS[name]
    train, test = gen("train", 0, 0), gen("test", 0, 0)
    assert (len(train), len(test)) == (n_train, n_test)
    for row in train[:200] + test[:50]:
        VALIDATORS[domain](row["label"])
    assert {r["uid"] for r in train}.isdisjoint({r["uid"] for r in test})


@pytest.mark.parametrize("name", sorted(SETS))
def test_test_split_is_phrased_as_the_eval_suite(name):
    """What RL trains on looks like what the gate evaluates: the test split's prompts and labels
    equal the suite's items (so the train split, read the same way, is in the suite's format)."""
    rows = sorted(SETS[name][0]("test", 0, 0), key=lambda r: r["uid"])
    items, _ = load_items(get_suite(name))
    by_prompt = {item.messages[-1]["content"]: item.label for item in items}
    assert len(by_prompt) == len(items)
    for row in rows:
        assert by_prompt[row["prompt"]] == row["label"]


def test_problems_do_not_cross_splits():
    def texts(split, key):
        with gzip.open(DATA / "gsm8k" / f"{split}.jsonl.gz", "rt") as f:
            return {json.loads(line)[key] for line in f}
    assert texts("train", "question").isdisjoint(texts("test", "question"))
    ids = {r["uid"] for r in mbpp("train", 0, 0)}
    assert all(601 <= int(uid.split("/")[1]) <= 974 for uid in ids)


def test_gsm8k_references_earn_the_reward_and_the_answer_is_the_final_number():
    assert gsm8k_final_answer("so 2 + 2 = 4\n#### 1,234") == "1234"
    with pytest.raises(ValueError, match="####"):
        gsm8k_final_answer("no marker")
    for row in gsm8k("train", 5, 3):
        assert "<<" not in row["response"]
        assert REWARDS["math"](row["response"], row["label"]) == 1.0, row["uid"]
        assert REWARDS["math"]("The final answer is \\boxed{-1.5}.", row["label"]) == 0.0


def test_mbpp_references_pass_in_the_sandbox():
    try:
        check_available()
    except SandboxUnavailable as e:
        pytest.skip(f"needs the sandbox: {e}")
    rows = mbpp("train", 3, 0)  # each check is a sandbox run: a sample suffices
    for row in rows:
        assert REWARDS["code"](row["response"], row["label"]) == 1.0, row["uid"]


def test_size_and_seed_sample_and_bad_requests_fail_in_one_line():
    a, b = gsm8k("train", 10, 1), gsm8k("train", 10, 2)
    assert len(a) == 10 and [r["uid"] for r in a] != [r["uid"] for r in b]
    assert [r["uid"] for r in a] == [r["uid"] for r in gsm8k("train", 10, 1)]
    with pytest.raises(DataError, match="size 400 exceeds the 374 train rows"):
        generated_rows(Data(source="benchmark:mbpp", split="train", size=400))
    with pytest.raises(
            DataError,
            match="unknown benchmark set 'gsm9k'; expected one of \\['gsm8k', 'mbpp'\\]"):
        generated_rows(Data(source="benchmark:gsm9k"))


def test_loads_as_prompts(tmp_path):
    from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

    tok = build_tiny_tokenizer(tmp_path)
    prompts = load_prompts(Data(source="benchmark:gsm8k", split="train", size=8, seed=0), tok,
                           "no_think", get_domain("math"),
                           4096)
    assert len(prompts) == 8 and all(p.domain == "math" and p.prompt_tokens for p in prompts)
    assert {p.uid for p in prompts} == {r["uid"] for r in gsm8k("train", 8, 0)}
