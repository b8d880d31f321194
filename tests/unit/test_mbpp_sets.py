"""MBPP-derived code and bug-fix sets: labels validate, references earn full reward, every injected
bug fails its task's asserts, the committed bug-fix rows regenerate, splits are disjoint, and the
sets load as prompts."""
import gzip
import json

import pytest

from nemo_cascade.config import Data
from nemo_cascade.data.loader import load_prompts, load_sft_examples
from nemo_cascade.data.mbpp_tasks import mbpp_task
from nemo_cascade.rewards import REWARDS, VALIDATORS, get_domain
from nemo_cascade.rewards.sandbox import SandboxUnavailable, check_available
from nemo_cascade.tooling.demo_data import mbpp_sets
from nemo_cascade.tooling.demo_data.mbpp_sets import (BUGFIX_FILE, BUGGY_FILE_NAME, bugfix_row,
                                                      first_failure, mbpp_bugfix, mbpp_code,
                                                      mutants, split_of)
from nemo_cascade.tooling.demo_data.synthetic_domains import DOMAIN_TASKS

GENERATORS = {"mbpp_code": (mbpp_code, "code"), "mbpp_bugfix": (mbpp_bugfix, "swe")}


@pytest.fixture(scope="module")
def sandbox():
    try:
        check_available()
    except SandboxUnavailable as e:
        pytest.skip(f"needs the sandbox: {e}")


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

    return build_tiny_tokenizer(tmp_path_factory.mktemp("mbpp_tok"))


def _tasks_by_id():
    return {t["task_id"]: t for t in mbpp_sets.mbpp_tasks()}


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_labels_validate_and_generators_are_registered(name):
    gen, domain = GENERATORS[name]
    assert DOMAIN_TASKS[name] is gen
    rows = gen("train", 0, 0) + gen("test", 0, 0)
    assert len({r["uid"] for r in rows}) == len(rows)
    for row in rows:
        VALIDATORS[domain](row["label"])  # the swe validator also applies the golden patch
        assert row["prompt"].strip() and row["response"].strip()


def test_code_references_pass_and_a_wrong_program_fails(sandbox):
    rows = mbpp_code("test", 3, 0)  # each check is a sandbox run: a sample suffices
    for row in rows:
        assert REWARDS["code"](row["response"], row["label"]) == 1.0, row["uid"]
    assert REWARDS["code"]("```python\ndef nothing():\n    return None\n```",
                           rows[0]["label"]) == 0.0


def test_code_prompt_is_the_mbpp_suite_format():
    task = next(t for t in mbpp_sets.mbpp_tasks() if t["task_id"] == 11)
    prompt, label = mbpp_task(task["text"], task["test_list"])
    assert prompt.startswith(
        task["text"] + "\nYour code should pass these tests:\n\nassert remove_Occ(")
    assert label == {"test_code": "\n".join(task["test_list"]) + "\n", "entry_point": "remove_Occ"}
    with pytest.raises(ValueError, match="test_list"):
        mbpp_task("text", ["print(1)"])


def test_every_bugfix_reference_edit_earns_one_and_wrong_edits_do_not():
    rows = mbpp_bugfix("train", 0, 0) + mbpp_bugfix("test", 0, 0)
    assert len(rows) > 400  # most MBPP tasks yield a failing mutant
    for row in rows:
        assert REWARDS["swe"](row["response"], row["label"]) == 1.0, row["uid"]
    row = rows[0]
    buggy = row["label"]["files"][BUGGY_FILE_NAME]
    search = row["response"].split("<<<<<<< SEARCH\n")[1].split("\n=======")[0]
    wrong = f"### {BUGGY_FILE_NAME}\n<<<<<<< SEARCH\n{search}\n=======\n    pass\n>>>>>>> REPLACE"
    assert REWARDS["swe"](wrong, row["label"]) < 1.0
    assert REWARDS["swe"]("I would rather not.", row["label"]) == -1.0
    assert row["label"]["problem_statement"] in row["prompt"] and buggy in row["prompt"]


def test_mutants_fail_their_asserts_and_references_pass(sandbox):
    tasks = _tasks_by_id()
    for row in mbpp_bugfix("test", 3, 1):
        task = tasks[row["task_id"]]
        buggy = row["label"]["files"][BUGGY_FILE_NAME]
        index, _ = first_failure(buggy, task)
        assert task["test_list"][index] in row["label"]["problem_statement"]
        label = mbpp_task(task["text"], task["test_list"], task["test_setup_code"])[1]
        assert REWARDS["code"](f"```python\n{buggy}```", label) == 0.0, row["uid"]


def test_committed_bugfix_rows_regenerate(sandbox):
    tasks = _tasks_by_id()
    with gzip.open(BUGFIX_FILE, "rt") as f:
        stored = [json.loads(line) for line in f]
    # a sample: a regeneration costs several sandbox runs
    for row in stored[::len(stored) // 2][:2]:
        assert bugfix_row(tasks[row["task_id"]]) == row


def test_mutants_are_single_line_and_ordered_by_the_task():
    source = "def f(xs):\n    return [x + 1 for x in range(len(xs)) if x < 3 and x != 0]\n"
    first = mutants(source, "mbpp:1")
    assert first == mutants(source, "mbpp:1") and first != mutants(source, "mbpp:2")
    kinds = {d.split(": ", 1)[1] for d, _ in first}
    assert {"`+` -> `-`", "`<` -> `<=`", "`and` -> `or`", "`!=` -> `==`", "`0` -> `1`"} <= kinds
    assert kinds & {"`3` -> `4`", "`3` -> `2`"} and any(k.startswith("range bound") for k in kinds)
    for _, mutant in first:
        changed = [a != b for a, b in zip(mutant.split("\n"), source.split("\n"))]
        assert mutant.count("\n") == source.count("\n") and sum(changed) == 1
        compile(mutant, "m.py", "exec")


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_splits_are_disjoint_fixed_by_task_and_seed_only_orders(name):
    gen, _ = GENERATORS[name]
    train, test = gen("train", 0, 0), gen("test", 0, 0)
    assert train and test and not {r["uid"] for r in train} & {r["uid"] for r in test}
    assert all(split_of(r["uid"].split("/")[1]) == "test" for r in test)
    assert {r["uid"] for r in gen("test", 0, 7)} == {r["uid"] for r in test}
    assert [r["uid"] for r in gen("train", 5, 3)] == [r["uid"] for r in gen("train", 5, 3)]
    assert [r["uid"] for r in gen("train", 5, 3)] != [r["uid"] for r in gen("train", 5, 4)]
    assert 0.08 < len(test) / (len(train) + len(test)) < 0.22  # about 15 % held out
    with pytest.raises(ValueError, match="exceeds"):
        gen("test", len(test) + 1, 0)


def test_bugfix_and_code_hold_out_the_same_tasks():
    code = {r["uid"].split("/")[1] for r in mbpp_code("test", 0, 0)}
    bugfix = {r["uid"].split("/")[1] for r in mbpp_bugfix("test", 0, 0)}
    assert bugfix <= code


def test_load_prompts_and_sft_through_the_loader(tok):
    data = Data(source="synthetic:mbpp_bugfix", size=4, split="test", seed=0)
    prompts = load_prompts(data, tok, "no_think", get_domain("swe"), 4096,
                           validate_label=VALIDATORS["swe"])
    rows = mbpp_bugfix("test", 4, 0)
    assert [p.uid for p in prompts] == [r["uid"] for r in rows]
    assert [p.label for p in prompts] == [r["label"] for r in rows] and prompts[0].domain == "swe"
    code = load_prompts(Data(source="synthetic:mbpp_code", size=2), tok, "think",
                        get_domain("code"), 4096,
                        validate_label=VALIDATORS["code"])
    assert len(code) == 2 and "entry_point" in code[0].label
    assert len(load_sft_examples(data, tok, "think", 4096)) == 4
