"""One phrasing of a math prompt for training and evaluation (data/math_prompt.py, paper §4.5: the
reward reads the last \\boxed{}): a training row of the released set's shape and the evaluation item
of the same problem render the same user message; a prompt that already asks for \\boxed is not
asked twice; ``data.math_instruction`` sets it."""
import gzip
import json

import pytest

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade import config
from nemo_cascade.tooling.demo_data.benchmark_sets import gsm8k
from nemo_cascade.data.chat import render
from nemo_cascade.data.loader import load_prompts
from nemo_cascade.rewards import get_domain
from nemo_cascade.data.math_prompt import (MATH_INSTRUCTION, asks_for_boxed_answer, math_prompt,
                                           with_math_instruction)
from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer
from nemo_cascade.evaluate.suites import ROOT, get_suite, load_items

INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tok"))


def _first_rows(path, n):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line, _ in zip(f, range(n))]


def _write(tmp_path, rows):
    path = tmp_path / "rl-math.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.mark.parametrize("suite", ["math500", "aime25", "gsm8k"])
def test_training_row_and_evaluation_item_render_the_same_user_message(tmp_path, tok, suite):
    # Nemotron-Cascade-RL-Math rows are {"problem", "answer"}: bare problems, no instruction.
    # Evaluated, the same problem is asked with the AceMath request for a boxed answer; trained, it
    # must be asked the same way.
    items, path = load_items(get_suite(suite), limit=3)
    key = "question" if suite == "gsm8k" else "problem"
    rows = [{"problem": r[key], "answer": item.label}
            for r, item in zip(_first_rows(path, 3), items)]
    prompts = load_prompts(config.Data(source=_write(tmp_path, rows)), tok, "think",
                           get_domain("math"), 4096)
    assert len(prompts) == 3
    for prompt, item in zip(prompts, items):
        assert item.messages[-1]["content"].endswith(INSTRUCTION)
        expected = tok.encode(render(item.messages, "think", "cascade1"), add_special_tokens=False)
        assert prompt.prompt_tokens == expected, (tok.decode(prompt.prompt_tokens), item.messages)
        assert prompt.label == item.label


def test_the_default_is_the_suites_phrasing():
    assert MATH_INSTRUCTION == INSTRUCTION == config.Data().math_instruction
    assert math_prompt("What is 1+1?") == f"What is 1+1?\n\n{INSTRUCTION}"
    assert (get_suite("math500").load(ROOT / "data" / "math500" / "test.jsonl.gz")[0]
            .messages[-1]["content"]) == \
        math_prompt(_first_rows(ROOT / "data" / "math500" / "test.jsonl.gz", 1)[0]["problem"])


def test_benchmark_prompt_set_uses_the_same_phrasing():
    row = gsm8k("train", 1, 0)[0]
    assert row["prompt"].endswith(f"\n\n{INSTRUCTION}") and row["prompt"].count("\\boxed") == 1


@pytest.mark.parametrize("text, asks", [
    ("What is 2+3? Put the final answer in \\boxed{}.", True),
    ("Answer inside \\boxed{...}", True), ("Use \\fbox{} for the answer.", True),
    ("What is 2+3?", False), ("Is \\boxedness a word?", False), ("the boxed answer", False),
])
def test_detects_a_request_for_a_box(text, asks):
    assert asks_for_boxed_answer(text) is asks


def test_a_prompt_that_asks_already_is_not_asked_twice(tmp_path, tok):
    asked = "What is 2+3? Put the final answer in \\boxed{}."
    assert math_prompt(asked) == asked
    system = [{"role": "system", "content": "Always put the final answer in \\boxed{}."},
              {"role": "user", "content": "What is 2+3?"}]
    assert with_math_instruction(system) == system
    rows = [{"problem": asked, "answer": "5"}, {"messages": system, "answer": "5"},
            {"problem": "What is 2+3?", "answer": "5"}]
    prompts = load_prompts(config.Data(source=_write(tmp_path, rows)), tok, "no_think",
                           get_domain("math"), 4096)
    texts = [tok.decode(p.prompt_tokens) for p in prompts]
    assert [t.count("\\boxed") for t in texts] == [1, 1, 1]
    assert texts[2].count(INSTRUCTION) == 1


def test_the_last_user_turn_is_phrased_and_the_input_is_kept():
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "What is 2+3?"}]
    out = with_math_instruction(messages)
    assert [m["content"] for m in out] == ["Hi", "Hello", f"What is 2+3?\n\n{INSTRUCTION}"]
    assert messages[-1]["content"] == "What is 2+3?"


def test_setting_the_instruction(tmp_path, tok):
    path = _write(tmp_path, [{"problem": "What is 2+3?", "answer": "5"}])
    as_is = load_prompts(config.Data(source=path, math_instruction=""), tok, "no_think",
                         get_domain("math"), 4096)
    custom = load_prompts(config.Data(source=path, math_instruction="Box it: \\boxed{}."), tok,
                          "no_think", get_domain("math"), 4096)
    assert "\\boxed" not in tok.decode(as_is[0].prompt_tokens)
    assert "What is 2+3?\n\nBox it: \\boxed{}." in tok.decode(custom[0].prompt_tokens)


def test_other_domains_are_not_phrased(tmp_path, tok):
    path = tmp_path / "rlhf.jsonl"
    path.write_text(json.dumps({"prompt": "Tell me about otters."}) + "\n")
    prompts = load_prompts(config.Data(source=str(path)), tok, "no_think", get_domain("rlhf"), 4096)
    assert "\\boxed" not in tok.decode(prompts[0].prompt_tokens)


def test_the_setting_is_a_data_field():
    cfg = config.Cascade(
        model=config.Model(build="tiny-qwen3"),
        stages=(config.Stage(name="s", data=config.Data(source="synthetic:arithmetic")),))
    changed = apply_overrides(cfg, ["stages.s.data.math_instruction=Think, then box: \\boxed{}."])
    assert changed.stages[0].data.math_instruction == "Think, then box: \\boxed{}."
    bad = config.to_dict(cfg)
    bad["stages"][0]["data"]["math_instructions"] = ""
    with pytest.raises(config.ConfigError,
                       match=r"stages.0.data: unknown key\(s\) \['math_instructions'\]"):
        config.from_dict(config.Cascade, bad)
