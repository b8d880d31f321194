"""Code-switch detection and the per-stage penalty (paper §4.3.2 RLHF, §4.5 math, §4.6 code), and
the rules that read the prompt's language (§4.3.2: only purely English prompts; §4.5.2: the prompt's
own language)."""
import typing
import time

import pytest

from nemo_cascade import config
from nemo_cascade.rewards.language import (BATCH_MIN_MINUS_10, CODE_SWITCH_RULES, EXPECTED_SCRIPTS,
                                           OTHER_SCRIPT, apply_code_switch_penalty,
                                           foreign_letter_counts, is_code_switched,
                                           is_code_switched_reply, prompt_scripts, reply_scripts,
                                           strip_math_and_code)


@pytest.mark.parametrize("text, switched", [
    ("The answer is 42, because 6 times 7 is 42.", False),
    # Chinese drift inside English
    ("Let me compute this. 首先我们计算 the sum first.", True),
    ("Donc la réponse est 42 — voilà, naïve café.", False),                # accented Latin is Latin
    ("Пусть x = 5, then the answer is 5.", True),                          # Cyrillic drift
    ("We use $\\alpha + \\beta = \\gamma$ and α, β, π as symbols.", False),  # Greek is notation
    ("Over ℝ and ℕ, with 𝑥 ∈ ℝ, µ stays notation.", False),
    ("```python\nprint('你好世界')\n```\nThe code prints a greeting.", False),  # code is not prose
    ("Inline `变量` names in backticks are code.", False),
    # display math is not prose
    ("$$\\text{面积} = 3$$ then we stop.", False),
    # below min_foreign_letters
    ("One stray character 中 alone.", False),
    # a lone currency $ hides nothing
    ("It costs $5 and 首先 we pay.\nThen $3.", True),
    ("", False),
])
def test_is_code_switched_latin(text, switched):
    assert is_code_switched(text) is switched


def test_expected_script_other_than_latin():
    chinese = "答案是 42，因为 x = 6 乘以 7。"
    # Latin variables are neutral there
    assert not is_code_switched(chinese, "chinese")
    assert is_code_switched(chinese + " Это русский текст.", "chinese")
    assert is_code_switched(chinese, "latin")
    with pytest.raises(ValueError, match="unknown expected_script"):
        is_code_switched("text", "klingon")


def test_share_threshold_tolerates_a_quoted_word_in_a_long_text():
    text = "A long English explanation of the method. " * 40 + "The word 数学 means mathematics."
    assert is_code_switched(text)
    assert not is_code_switched(text, min_foreign_share=0.05)
    foreign, total = foreign_letter_counts(text)
    assert foreign == 2 and total > 1000


def test_strip_keeps_prose_and_drops_spans():
    stripped = strip_math_and_code(
        "Before $x^2$ mid \\(y\\) and \\[z\\] after ```code``` end \\frac")
    assert "x^2" not in stripped and "y" not in stripped.split() and "code" not in stripped
    assert "Before" in stripped and "after" in stripped and "frac" not in stripped


def test_non_strings_are_never_switched():
    assert is_code_switched(None) is False  # type: ignore[arg-type]
    assert is_code_switched(12345) is False  # type: ignore[arg-type]


def test_megabyte_of_hostile_text_is_linear():
    hostile = ["$" * (1 << 20), "`" * (1 << 20), "\\(" * (1 << 19), "中" * (1 << 20),
               "\\frac" * 200_000, "```\n" * 250_000]
    start = time.monotonic()
    verdicts = [is_code_switched(text) for text in hostile]
    assert time.monotonic() - start < 20  # linear passes; a backtracking regex would take hours
    assert verdicts[3] is True


@pytest.mark.parametrize("penalty, expected", [
    # math §4.5: the reward is replaced, not decremented
    (-1.0, [1.0, -1.0, 0.0, -1.0]),
    (0.0, [1.0, 0.0, 0.0, 0.0]),                    # code §4.6
    # RLHF §4.3.2: min over the batch before penalties, − 10
    (BATCH_MIN_MINUS_10, [1.0, -10.0, 0.0, -10.0]),
    (None, [1.0, 1.0, 0.0, 0.5]),
])
def test_penalties(penalty, expected):
    rewards, flags = [1.0, 1.0, 0.0, 0.5], [False, True, False, True]
    assert apply_code_switch_penalty(rewards, flags, penalty) == expected


def test_batch_min_uses_raw_scores_of_all_samples():
    rm_scores = [3.2, -1.5, 0.7]
    assert apply_code_switch_penalty(rm_scores, [True, False, False],
                                     BATCH_MIN_MINUS_10) == [-11.5, -1.5, 0.7]


@pytest.mark.parametrize("bad", ["minus_one", True, [1]])
def test_bad_penalty_is_an_error(bad):
    with pytest.raises(ValueError, match="code-switch penalty"):
        apply_code_switch_penalty([1.0], [True], bad)


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="flags"):
        apply_code_switch_penalty([1.0, 0.0], [True], -1.0)


# ---- numbers are notation ------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "The area is 5 m² and the volume 3 m³.",             # superscripts: No
    "Half ½ plus a quarter ¼ is three quarters ¾.",     # vulgar fractions: No
    "Step ① then step ② and ③.",                        # circled numbers: No
    "Chapter Ⅳ follows chapter Ⅲ.",                     # Roman numerals: Nl
    "Let x₁ and x₂ be the roots.",                      # subscripts: No
])
def test_unicode_numbers_are_not_foreign_letters(text):
    """² or ½ are word characters but not digits to the regex engine; they are not a language."""
    assert not is_code_switched(text)
    assert foreign_letter_counts(text)[0] == 0
    assert is_code_switched(text + " 首先计算")          # a real drift next to them still counts


# ---- the prompt's language (§4.3.2, §4.5.2) ------------------------------------------------------

ENGLISH = "Solve for x: what is the value of x if 2x + 3 = 7?"
CHINESE = "请计算下面的表达式，并给出最终答案：2x + 3 = 7，求 x。"
JAPANESE = "次の方程式を解いてください。2x + 3 = 7 のとき、x の値はいくつですか。"
RUSSIAN = "Решите уравнение 2x + 3 = 7 и найдите x."
KOREAN = "다음 방정식을 푸세요: 2x + 3 = 7."
CHINESE_WITH_CODE = ("请用 Python 实现这个函数：\n```python\ndef add(a, b):\n    return a + b  # sum\n```\n"
                     "并解释 `add`。")
ENGLISH_WITH_CHINESE_CODE = "Explain what this prints:\n```python\nprint('你好')\n```"
BENGALI = "এই সমীকরণটি সমাধান করুন।"


@pytest.mark.parametrize("prompt, scripts", [
    (ENGLISH, {"latin"}),
    (CHINESE, {"latin", "han"}),
    (JAPANESE, {"latin", "han", "kana"}),                 # kana → Japanese: kana and han
    (RUSSIAN, {"latin", "cyrillic"}),
    (KOREAN, {"latin", "hangul", "han"}),                 # hangul → Korean: hangul and han
    # English code and identifiers change nothing
    (CHINESE_WITH_CODE, {"latin", "han"}),
    # Chinese inside code is not the prompt's prose
    (ENGLISH_WITH_CHINESE_CODE, {"latin"}),
    ("What does 水 mean?", {"latin", "han"}),             # one Chinese word: not purely English
    # Greek letters in English are notation
    ("Let α and β be the angles of the triangle.", {"latin"}),
    ("Ποια είναι η λύση της εξίσωσης;", {"latin", "greek"}),     # Greek prose
    (BENGALI, {"latin", OTHER_SCRIPT}),                   # a script EXPECTED_SCRIPTS does not list
    ("$2x + 3 = 7$", {"latin"}),                          # no prose letters: the default language
    ("", {"latin"}),
])
def test_prompt_scripts(prompt, scripts):
    assert prompt_scripts(prompt) == scripts


def test_a_prompt_without_prose_letters_takes_the_default_language():
    assert prompt_scripts("$\\frac{1}{2} + 3$", "chinese") == {"latin", "han"}
    assert prompt_scripts(ENGLISH, "chinese") == {"latin"}  # letters decide when there are any
    assert prompt_scripts(None, "japanese") == {"latin", "han", "kana"}  # type: ignore[arg-type]


ANSWER_EN = "We subtract 3 and divide by 2, so x = 2. The answer is \\boxed{2}."
ANSWER_EN_WITH_ZH = "We subtract 3 and divide by 2, 所以答案是 x = 2. The answer is \\boxed{2}."
ANSWER_ZH = "两边减去 3，再除以 2，得到 x = 2。答案是 \\boxed{2}。"
ANSWER_ZH_WITH_RU = "两边减去 3，再除以 2，Следовательно x = 2。答案是 \\boxed{2}。"
ANSWER_RU = "Вычтем 3 и разделим на 2: x = 2. Ответ \\boxed{2}."
ANSWER_JA = "両辺から 3 を引いて 2 で割ると、x = 2 です。答えは \\boxed{2}。"
ANSWER_KO = "양변에서 3을 빼고 2로 나누면 x = 2 입니다."
ANSWER_PY = "```python\ndef add(a, b):\n    return a + b\n```\n这个函数返回 a 与 b 的和。"


@pytest.mark.parametrize("prompt, response, switched", [
    (ENGLISH, ANSWER_EN, False),
    (ENGLISH, ANSWER_EN_WITH_ZH, True),      # the drift §4.3.2 penalises
    (ENGLISH, ANSWER_ZH, True),
    (CHINESE, ANSWER_ZH, False),             # a Chinese answer to a Chinese prompt: never penalised
    # nor any answer to it: the prompt is not purely English
    (CHINESE, ANSWER_ZH_WITH_RU, False),
    (JAPANESE, ANSWER_EN_WITH_ZH, False),
    (RUSSIAN, ANSWER_ZH, False),
    (CHINESE_WITH_CODE, ANSWER_PY, False),
    (ENGLISH_WITH_CHINESE_CODE, ANSWER_EN_WITH_ZH, True),
])
def test_rlhf_rule_checks_only_answers_to_purely_english_prompts(prompt, response, switched):
    assert is_code_switched_reply(response, prompt, "english_prompt_only") is switched


@pytest.mark.parametrize("prompt, response, switched", [
    (ENGLISH, ANSWER_EN, False),
    (ENGLISH, ANSWER_EN_WITH_ZH, True),      # Chinese in an answer to an English problem
    (ENGLISH, ANSWER_RU, True),
    # a Chinese answer to a Chinese problem is in its language
    (CHINESE, ANSWER_ZH, False),
    (CHINESE, ANSWER_EN_WITH_ZH, False),     # English words (Latin letters) stay neutral
    (CHINESE, ANSWER_RU, True),              # a Russian answer to a Chinese problem is not
    (CHINESE, ANSWER_ZH_WITH_RU, True),
    (JAPANESE, ANSWER_JA, False),            # kana and han
    (JAPANESE, ANSWER_KO, True),
    (KOREAN, ANSWER_KO, False),
    (RUSSIAN, ANSWER_RU, False),
    (RUSSIAN, ANSWER_ZH, True),
    (CHINESE_WITH_CODE, ANSWER_PY, False),
    (BENGALI, "উত্তর হল x = 2", False),       # an unlisted script answered in itself
    (BENGALI, "উত্তর হল x = 2, 所以", True),  # a listed foreign script is still foreign
])
def test_math_rule_checks_the_prompt_s_language(prompt, response, switched):
    assert is_code_switched_reply(response, prompt, "prompt_language") is switched


def test_fixed_script_rule_ignores_the_prompt():
    # today's rule: Latin, always
    assert is_code_switched_reply(ANSWER_ZH, CHINESE, "fixed_script")
    assert not is_code_switched_reply(ANSWER_ZH, ENGLISH, "fixed_script", "chinese")
    assert is_code_switched_reply(ANSWER_RU, CHINESE, "fixed_script", "chinese")


def test_thresholds_still_apply_under_a_prompt_rule():
    one_char = "The answer is 2. 好"
    # below min_foreign_letters
    assert not is_code_switched_reply(one_char, ENGLISH, "english_prompt_only")
    long_text = "A long English explanation of the method. " * 40 + "The word 数学 means mathematics."
    assert is_code_switched_reply(long_text, ENGLISH)
    assert not is_code_switched_reply(long_text, ENGLISH, min_foreign_share=0.05)


def test_reply_scripts_per_rule():
    assert reply_scripts(CHINESE, "english_prompt_only") is None              # not checked at all
    assert reply_scripts(ENGLISH, "english_prompt_only") == {"latin"}
    assert reply_scripts(CHINESE, "prompt_language") == {"latin", "han"}
    assert reply_scripts(CHINESE, "fixed_script", "korean") == {"latin", "hangul", "han"}
    # resolved per domain before
    with pytest.raises(ValueError, match="unknown code-switch rule 'auto'"):
        reply_scripts(ENGLISH, "auto")


@pytest.mark.parametrize("prompt", [None, 42, b"bytes", ["a list"]])
def test_a_prompt_that_is_not_text_never_raises(prompt):
    """The prompt is data: whatever it holds, the rule reads it as an empty (default-language)
    prompt."""
    for rule in CODE_SWITCH_RULES:
        assert is_code_switched_reply(
            ANSWER_EN_WITH_ZH, prompt, rule) is True  # type: ignore[arg-type]
        assert is_code_switched_reply(ANSWER_EN, prompt, rule) is False  # type: ignore[arg-type]


def test_megabyte_of_hostile_prompt_is_linear():
    hostile = ["$" * (1 << 20), "`" * (1 << 20), "中" * (1 << 20), "・" * (1 << 20), "α" * (1 << 20),
               "a" * (1 << 20) + "中", "²" * (1 << 20), "\\(" * (1 << 19)]
    start = time.monotonic()
    scripts = [reply_scripts(text, rule) for text in hostile for rule in CODE_SWITCH_RULES]
    assert time.monotonic() - start < 20
    assert scripts[2 * 3 + 1] == {"latin", "han"} and scripts[5 * 3 + 0] is None


def test_config_languages_are_the_detector_s():
    """Reward.code_switch_script's choices are EXPECTED_SCRIPTS's keys, and code_switch_rule's are
    the rules plus auto (config imports nothing from rewards, so this test keeps them equal)."""
    hints = typing.get_type_hints(config.Reward)
    assert set(typing.get_args(hints["code_switch_script"])) == set(EXPECTED_SCRIPTS)
    assert set(typing.get_args(hints["code_switch_rule"])) == {"auto", *CODE_SWITCH_RULES}
