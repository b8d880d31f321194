"""IF-RL's second sub-stage data (paper §4.4.2: "the second stage focuses on IF-Bench-Train
taxonomy"): the released IF-RLVR rows load through the real loader and score through the stage's
Scorer; malformed ``ground_truth`` ends in one line; a training source holding an IFBench *test* id
is refused unless its ``Data.allow_eval_instructions`` says so; evaluation keeps the test
taxonomy."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade import config
from nemo_cascade.data.loader import DataError, load_prompts
from nemo_cascade.data.schemas import SchemaError
from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer
from nemo_cascade.rewards import (VALIDATORS, Scorer, adapt_row, get_domain, reward_metrics,
                                  training_validator)
from nemo_cascade.types import PromptGroup

ROWS = Path(__file__).resolve().parents[1] / "data" / "ifbench_train" / "if_rlvr_rows.jsonl"
TEST_ID_ROW = {"prompt": "Count to three. Use exactly 2 numbers.",
               "instruction_id_list": ["count:numbers"], "kwargs": [{"N": 2}]}


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tok"))


def _load(tok, path, **data):
    cfg = config.Data(source=str(path), **data)
    return load_prompts(cfg, tok, "no_think", get_domain("ifeval"), 4096,
                        validate_label=training_validator("ifeval", cfg, "stages.if_ifbench.data"))


def _scored(prompt, responses):
    group = PromptGroup(prompt=prompt, response_tokens_G_T=[[1]] * len(responses),
                        rollout_logprobs_G_T=[[-0.1]] * len(responses),
                        finish_reason_G=["stop"] * len(responses), response_text_G=list(responses))
    Scorer("ifeval").score([group])
    return group


def test_released_rows_load_and_score_through_the_loader_and_scorer(tok):
    prompts = _load(tok, ROWS)
    assert len(prompts) == 5 and prompts.bad_rows == 0
    first = prompts[0]
    assert first.label["instruction_id_list"] == [
        "last_word:last_word_answer", "punctuation:no_comma"]
    assert first.label["kwargs"] == [{"last_word": "brief"}, None]
    assert first.label["prompt"].startswith("Describe a sunrise")
    assert "Describe a sunrise" in tok.decode(first.prompt_tokens)
    responses = {  # row → (followed every instruction, broke one)
        0: ("The sun rose slowly and the answer stays brief.",
            "The sun rose, slowly. Brief it is not."),
        1: ("[i] [like] [apples] [and] [pears] [because] [they] [are] [sweet] [and] [fresh]",
            # "I": not lowercase
            "[I] [like] [apples] [and] [pears] [because] [they] [are] [sweet] [and] [fresh]"),
        2: ("sun, moon and moon; hello hello", "sun moon hello hello"),
        3: ("What is the capital of France?\n******\nWhat is the capital of France?", "Paris."),
        # the final "." is the last token, not "rain"
        4: ("rain drops rain. rain", "rain drops rain."),
    }
    for i, (good, bad) in responses.items():
        group = _scored(prompts[i], [good, bad])
        assert group.rewards_G == [1.0, 0.0], (i, group.reward_details_G)
    assert "if_pass/copy:copying_multiple" in reward_metrics([_scored(prompts[3], responses[3])])


def test_ground_truth_forms_adapt_to_one_label():
    messages = [{"role": "user", "content": "Say hi. End with the word bye."}]
    want = {"prompt": "Say hi. End with the word bye.",
            "instruction_id_list": ["last_word:last_word_answer"], "kwargs": [{"last_word": "bye"}]}
    truth = [{"instruction_id": ["last_word:last_word_answer"],
              "kwargs": [{"last_word": "bye", "N": None}]}]
    for form in (repr(truth), json.dumps(truth), json.dumps([json.dumps(truth[0])]),
                 repr(truth[0])):
        assert adapt_row("ifeval", {"messages": messages, "ground_truth": form},
                         "f:1") == (messages, want), form


@pytest.mark.parametrize("truth, message", [
    ("[{'instruction_id': ['punctuation:no_comma']}]", "field 'ground_truth' has no 'kwargs'"),
    ("[{'instruction_id': [], 'kwargs': []}, {'instruction_id': [], 'kwargs': []}]",
     "(one dict in the list)"),
    ("[]", "(one dict in the list)"),
    ("__import__('os').system('true')", "neither a Python literal nor JSON"),
    ("[" * 100_000, "neither a Python literal nor JSON"),
    (7, "must be a string holding"),
])
def test_malformed_ground_truth_is_one_line_naming_the_row(truth, message):
    row = {"messages": [{"role": "user", "content": "hi"}], "ground_truth": truth}
    with pytest.raises(SchemaError) as e:
        adapt_row("ifeval", row, "rows.jsonl:3")
    text = str(e.value)
    assert (text.startswith("rows.jsonl:3: field 'ground_truth'") and message in text
            and "\n" not in text)


def test_a_test_taxonomy_id_in_training_data_is_refused_naming_file_row_id_and_setting(
        tok, tmp_path):
    path = tmp_path / "train.jsonl"
    shutil.copy(ROWS, path)
    with open(path, "a") as f:
        f.write(json.dumps(TEST_ID_ROW) + "\n")
    # Not a malformed row that max_bad_rows may skip: the recipe has to say it means it.
    with pytest.raises(DataError) as e:
        _load(tok, path, max_bad_rows=10)
    text = str(e.value)
    assert text.startswith(f"{path}:6: ") and "'count:numbers'" in text and "\n" not in text
    assert "stages.if_ifbench.data.allow_eval_instructions=true" in text
    prompts = _load(tok, path, allow_eval_instructions=True)
    assert len(prompts) == 6 and prompts[5].label["instruction_id_list"] == ["count:numbers"]
    assert _scored(prompts[5], ["1 and 2", "1, 2, 3"]).rewards_G == [1.0, 0.0]


def test_evaluation_keeps_the_test_taxonomy():
    VALIDATORS["ifeval"](TEST_ID_ROW)  # the ifbench suite's rows validate as before
    training_validator("ifeval", config.Data(allow_eval_instructions=True))(TEST_ID_ROW)
    with pytest.raises(ValueError, match="data.allow_eval_instructions=true"):
        training_validator("ifeval", config.Data())(TEST_ID_ROW)
    assert training_validator("math", config.Data()) is VALIDATORS["math"]


def test_the_setting_is_given_on_the_command_line_and_refused_where_no_instruction_ids_are_read():
    from nemo_cascade.tooling.cli import load_recipe

    tiny = load_recipe(str(Path(__file__).resolve().parents[2] / "recipes" / "tiny.py"))
    cfg = apply_overrides(tiny, ["stages.ifeval.data.allow_eval_instructions=true"])
    assert config.stage_by_name(cfg, "ifeval").data.allow_eval_instructions
    with pytest.raises(config.ConfigError) as e:
        apply_overrides(tiny, ["stages.math.data.allow_eval_instructions=true"])
    assert str(e.value).startswith("stages.math.data.allow_eval_instructions: only IF-RL prompts")
    with pytest.raises(config.ConfigError, match=r"^stages\.sft\.data\.allow_eval_instructions"):
        apply_overrides(tiny, ["stages.sft.data.allow_eval_instructions=true"])


def test_the_setting_leaves_the_stage_hash_of_earlier_runs_alone_until_it_is_set():
    from nemo_cascade.cascade.lineage import _canonical, config_hash

    stage = config.Stage(name="if_ifbench", domain="ifeval", data=config.Data(source="rows.jsonl"))
    allowed = replace(stage, data=replace(stage.data, allow_eval_instructions=True))
    # A manifest written before the field existed (schema version 1) hashed the stage without it;
    # setting it is a new config.
    assert "allow_eval_instructions" not in _canonical(stage, 1)["data"]
    assert config_hash(stage, 1) != config_hash(allowed, 1)


def test_preflight_refuses_a_test_taxonomy_id_before_the_cascade_starts(tmp_path):
    from nemo_cascade.tooling.cli import load_recipe
    from nemo_cascade.cascade.preflight import check_cascade

    tiny = load_recipe(str(Path(__file__).resolve().parents[2] / "recipes" / "tiny.py"))
    train = tmp_path / "train.jsonl"
    shutil.copy(ROWS, train)
    with_test_id = tmp_path / "mixed.jsonl"
    with_test_id.write_text(ROWS.read_text() + json.dumps(TEST_ID_ROW) + "\n")

    def ifeval_source(path, **data):
        return apply_overrides(tiny, [f"stages.ifeval.data.source={path}",
                                      *(f"stages.ifeval.data.{k}={v}" for k, v in data.items())])

    check_cascade(ifeval_source(train))  # IFEval + IFBench-Train ids only
    with pytest.raises(config.ConfigError) as e:
        check_cascade(ifeval_source(with_test_id))
    text = str(e.value)
    assert text.startswith(f"{with_test_id}:6: ") and "'count:numbers'" in text and "\n" not in text
    assert "stages.ifeval.data.allow_eval_instructions=true" in text
    check_cascade(ifeval_source(with_test_id, allow_eval_instructions="true"))
