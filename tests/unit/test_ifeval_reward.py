"""IF reward contract: hand-checked verdicts per instruction, labels, thinking, strict vs loose,
hostile input, pass rates and the thinking-model RM bonus. Independent of lm-eval (see
test_ifeval_agreement.py for that)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from nemo_cascade.rewards.ifeval import (IFEVAL, ifeval_reward, ifeval_reward_loose,
                                         if_reward_with_rm, instruction_pass_rates, loose_variants,
                                         per_instruction, validate_label)
from nemo_cascade.rewards.ifeval.punkt import MODEL_FILES, write_nltk_data
from nemo_cascade.rewards.ifeval.text import count_capital_words, count_sentences

from .ifeval_corpus import read_jsonl_gz

DATA = Path(__file__).resolve().parents[2] / "data" / "ifeval" / "input_data.jsonl.gz"


def label(iid: str, **kwargs) -> dict:
    return {"prompt": "p", "instruction_id_list": [iid], "kwargs": [kwargs]}


def verdict(text: str, iid: str, **kwargs) -> bool:
    return per_instruction(text, label(iid, **kwargs))[0]


CAPITALS = (
    "THIS IS A SIMPLE ENGLISH SENTENCE WRITTEN IN CAPITAL LETTERS, AND IT SHOULD BE DETECTED AS "
    "ENGLISH WITHOUT ANY TROUBLE.")  # langdetect reads some all-caps English as German
ENGLISH = "the weather was lovely today and we walked along the river for hours before dinner."
# (instruction, kwargs, followed, not followed) — each written out by hand from the IFEval spec
CASES = [
    ("keywords:existence", {"keywords": ["cat", "dog"]}, "A Category and a DOG.", "Only a cat."),
    ("keywords:frequency", {"keyword": "go", "frequency": 2,
                            "relation": "at least"}, "go go", "go"),
    ("keywords:frequency", {"keyword": "go", "frequency": 2,
                            "relation": "less than"}, "Go", "go, gone"),
    ("keywords:forbidden_words", {"forbidden_words": ["run"]}, "running late", "We RUN."),
    ("keywords:letter_frequency", {"letter": "z", "let_frequency": 2,
                                   "let_relation": "at least"}, "Zz", "z"),
    ("keywords:letter_frequency", {"letter": "!", "let_frequency": 3,
                                   "let_relation": "at least"}, "Hi!!!", "Hi!"),
    ("language:response_language", {"language": "de"},
     "Das Wetter war heute sehr schön und wir sind lange am Fluss spazieren gegangen.", ENGLISH),
    ("length_constraints:number_sentences", {"num_sentences": 2, "relation": "less than"},
     "Dr. Smith met Mr. Jones at 5 p.m. in Washington.", "One. Two."),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "a\n***\nb",
     "a\n***\n\n***\nb"),
    ("length_constraints:number_words", {"num_words": 3,
                                         "relation": "at least"}, "one two-three", "one two"),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 2,
      "first_word": "so"}, "Intro.\n\n\"So, yes.", "\n\nIntro.\n\nSo yes."),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "[a] and [b]",
     "[a] and [b\n]"),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Hi.\np. s. bye",
     "Hi. PS bye"),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"}, "x\nP.P.S y", "x\nP.S. y"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* a\n- b\n**c**",
     "* a\n* b\n- c"),
    ("detectable_format:constrained_response", {}, "My answer is maybe.", "My answer is perhaps."),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "*a* and **b**",
     "*a* and * *"),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
     "Section 1\na\nSection 2\nb", "Section 1\na\nsection 2\nb"),
    ("detectable_format:json_format", {}, '```json\n{"a": 1}\n```', '{"a": 1} trailing'),
    ("detectable_format:title", {}, "<<My Title>>\ntext", "<< >>\ntext"),
    ("combination:two_responses", {}, "one\n******\ntwo", "one\n******\none"),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Say hi."}, "say HI. Hi!", "Hi! Say hi."),
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, "Done. any other questions?\"",
     "Any other questions? Yes."),
    ("startend:quotation", {}, '"quoted"', '"not closed'),
    ("change_case:capital_word_frequency", {"capital_frequency": 3, "capital_relation": "at least"},
     "I DON'T know", "I don't KNOW"),
    ("change_case:english_capital", {}, CAPITALS, CAPITALS + " x"),
    ("change_case:english_lowercase", {}, ENGLISH,
     "das wetter war heute sehr schön und wir sind lange am fluss spazieren gegangen."),
    ("punctuation:no_comma", {}, "no commas here", "one, two"), ]


@pytest.mark.parametrize("iid, kwargs, good, bad", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_hand_checked_verdicts(iid, kwargs, good, bad):
    assert verdict(good, iid, **kwargs) is True
    assert verdict(bad, iid, **kwargs) is False


def test_every_ifeval_instruction_has_a_hand_checked_case():
    assert len(IFEVAL) == 25
    assert {c[0] for c in CASES} == set(IFEVAL)


def test_all_541_ifeval_labels_validate():
    rows = read_jsonl_gz(DATA)
    assert len(rows) == 541
    for row in rows:
        validate_label(row)
    assert {i for r in rows for i in r["instruction_id_list"]} == set(IFEVAL)


@pytest.mark.parametrize("bad, message", [
    ("not a dict", "must be a dict"),
    ({"instruction_id_list": []}, "non-empty list"),
    ({"instruction_id_list": ["keywords:nope"], "kwargs": [{}]}, "unknown instruction id"),
    ({"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}, {}]
      }, "one dict per instruction"),
    (label("keywords:frequency", keyword="a", frequency="3",
           relation="at least"), "must be a number"),
    (label("keywords:frequency", keyword="a", frequency=3, relation="at most"), "must be one of"),
    (label("keywords:frequency", keyword="(", frequency=3,
           relation="at least"), "regular expression"),
    (label("keywords:existence", keywords="cat"), "list of non-empty strings"),
    (label("keywords:existence"), "missing kwarg 'keywords'"),
    (label("length_constraints:number_words", num_words=2.5,
           relation="at least"), "must be an integer"),
    (label("length_constraints:nth_paragraph_first_word", num_paragraphs=2, nth_paragraph=3,
           first_word="a"), "nth_paragraph=3"),
    (label("punctuation:no_comma", stray=1), "unexpected kwargs"),
    (label("language:response_language", language="xx"), "langdetect"),
    (label("keywords:letter_frequency", letter="ab", let_frequency=1,
           let_relation="at least"), "one character"), ])
def test_malformed_labels_raise_one_line(bad, message):
    with pytest.raises(ValueError) as e:
        validate_label(bad)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_null_kwargs_are_absent_and_integral_floats_are_ints():
    row = {"prompt": "p", "instruction_id_list": ["length_constraints:number_words"],
           "kwargs": [{"num_words": 2.0, "relation": "at least", "keyword": None, "letter": None}]}
    validate_label(row)
    assert ifeval_reward("two words", row) == 1.0 and ifeval_reward("one", row) == 0.0


def test_reward_needs_every_instruction():
    row = {"prompt": "p", "instruction_id_list": ["punctuation:no_comma", "startend:quotation"],
           "kwargs": [{}, {}]}
    assert per_instruction('"a, b"', row) == [False, True]
    assert ifeval_reward('"a, b"', row) == 0.0
    assert ifeval_reward('"a b"', row) == 1.0


def test_thinking_is_not_judged_and_unclosed_thinking_fails():
    row = label("punctuation:no_comma")
    assert ifeval_reward("<think>hmm, commas, commas</think>\n\nno commas here", row) == 1.0
    assert ifeval_reward("<think>no commas</think>but, here", row) == 0.0
    assert ifeval_reward("<think>still thinking, no end", row) == 0.0
    assert per_instruction("<think>never closed", label("punctuation:no_comma")) == [False]
    # The blank line after </think> is template formatting, not a first paragraph of the answer.
    first = label("length_constraints:nth_paragraph_first_word", num_paragraphs=1, nth_paragraph=1,
                  first_word="hello")
    assert ifeval_reward("<think>x</think>\n\nHello world", first) == 1.0


def test_blank_responses_never_pass():
    for text in ("", "   \n", "<think>x</think>  "):
        assert per_instruction(text, label("punctuation:no_comma")) == [False]
        assert per_instruction(text, label("punctuation:no_comma"), loose=True) == [False]


def test_loose_removes_first_and_last_line_and_asterisks():
    assert len(loose_variants("a\nb\nc")) == 8
    row = label("detectable_format:json_format")
    chatty = 'Here is the JSON:\n{"a": 1}\nHope it helps.'
    assert ifeval_reward(chatty, row) == 0.0 and ifeval_reward_loose(chatty, row) == 1.0
    starred = label("startend:end_checker", end_phrase="That is all.")
    assert ifeval_reward("Done. **That is all.**", starred) == 0.0
    assert ifeval_reward_loose("Done. **That is all.**", starred) == 1.0
    assert ifeval_reward_loose("a, b\nc, d", label("punctuation:no_comma")) == 0.0


def test_shipped_punkt_model_is_the_trained_english_one(tmp_path):
    # Known abbreviations (Dr., Mr., p.m.) do not end sentences under the trained model; an empty
    # one splits.
    assert count_sentences("Dr. Smith met Mr. Jones at 5 p.m. yesterday. They talked.") == 2
    assert count_sentences("One. Two. Three. Four.", limit=2) == 2
    assert count_capital_words("I DON'T KNOW, U.S.A. is big.") == 5  # I, DO, N'T, KNOW, U.S.A.
    root = write_nltk_data(tmp_path)
    assert sorted(p.name
                  for p in (root / "tokenizers/punkt_tab/english").iterdir()) == sorted(MODEL_FILES)


def test_deeply_nested_json_is_a_failure_not_a_crash():
    assert verdict("[" * 100_000 + "]" * 100_000, "detectable_format:json_format") is False


@pytest.mark.timeout(120)
def test_tokeniser_based_checkers_finish_on_hostile_text():
    text = "Mr. " * 5_000 + "A." * 5_000 + "\n" * 5_000
    # "Mr." is a known abbreviation and "A.A.…A." one token: Punkt sees a single sentence.
    assert verdict(text, "length_constraints:number_sentences", num_sentences=2,
                   relation="less than") is True
    # Punkt keeps "A.A.…A." as one token and "Mr." is not upper case: one capital word, fewer than
    # 5.
    assert verdict(text, "change_case:capital_word_frequency", capital_frequency=5,
                   capital_relation="less than") is True


def test_non_string_response_scores_zero():
    assert ifeval_reward(None, label("punctuation:no_comma")) == 0.0


def test_instruction_pass_rates():
    rates = instruction_pass_rates([(["a", "b"], [True, False]), (["a"], [False])])
    assert rates == {"a": 0.5, "b": 0.0}
    with pytest.raises(ValueError):
        instruction_pass_rates([(["a"], [True, True])])


def test_if_reward_with_rm_matches_hand_computation():
    # scores 1, 2, 3: mean 2, unbiased std 1 → z = -1, 0, 1
    out = if_reward_with_rm([1.0, 0.0, 1.0], [1.0, 2.0, 3.0], eps=0.0)
    assert out[0] == pytest.approx(1 + 1 / (1 + math.e))
    assert out[1] == 0.0
    assert out[2] == pytest.approx(1 + 1 / (1 + math.exp(-1)))
    assert if_reward_with_rm([1.0, 1.0], [5.0, 5.0]) == [1.5, 1.5]   # equal scores: z = 0
    assert if_reward_with_rm([1.0], [7.0]) == [1.5]
    assert if_reward_with_rm([0.0, 0.0], [1e9, -1e9]) == [0.0, 0.0]
    big = if_reward_with_rm([1.0, 1.0], [1e300, -1e300])
    assert 1.0 <= big[1] < big[0] <= 2.0
    with pytest.raises(ValueError):
        if_reward_with_rm([1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        if_reward_with_rm([1.0, 1.0], [float("nan"), 1.0])


@pytest.mark.parametrize("iid,kwargs", [
    ("keywords:existence", {"keywords": ["(a+)+$"]}),
    ("keywords:frequency", {
        "keyword": "a?a?a?a?a?a?aaaaaa", "frequency": 1, "relation": "at least"}),
    ("keywords:forbidden_words", {"forbidden_words": ["x|(y*)*"]}),
    ("detectable_content:postscript", {"postscript_marker": r"P\.S\d+"}),
    ("detectable_format:multiple_sections", {
        "section_spliter": "(S|s)ection{1,9}", "num_sections": 2}), ])
def test_label_patterns_that_can_backtrack_are_refused_in_one_line(iid, kwargs):
    # A label is data; the reference matches these strings as regexes against a megabyte of model
    # output, so a nested or repeated quantifier in one row could stall the reward for hours.
    from nemo_cascade.rewards.ifeval import ALL
    from nemo_cascade.rewards.ifeval.spec import bind

    with pytest.raises(ValueError, match="can backtrack for hours") as err:
        bind(ALL[iid], kwargs)
    assert "\n" not in str(err.value) and iid in str(err.value)


def test_the_regex_syntax_real_labels_use_still_binds():
    from nemo_cascade.rewards.ifeval import ALL
    from nemo_cascade.rewards.ifeval.spec import bind

    bind(ALL["detectable_content:postscript"], {"postscript_marker": "P.P.S"})
    bind(ALL["keywords:existence"], {"keywords": ["don't", "[Tt]he", "^Dear"]})
