"""Code-switch detection and the per-stage penalty (paper §4.3.2 RLHF, §4.5 math, §4.6 code)."""
import time

import pytest

from nemo_cascade.rewards.language import (BATCH_MIN_MINUS_10, apply_code_switch_penalty, foreign_letter_counts,
                                           is_code_switched, strip_math_and_code)


@pytest.mark.parametrize("text, switched", [
    ("The answer is 42, because 6 times 7 is 42.", False),
    ("Let me compute this. 首先我们计算 the sum first.", True),              # Chinese drift inside English
    ("Donc la réponse est 42 — voilà, naïve café.", False),                # accented Latin is Latin
    ("Пусть x = 5, then the answer is 5.", True),                          # Cyrillic drift
    ("We use $\\alpha + \\beta = \\gamma$ and α, β, π as symbols.", False),  # Greek is notation
    ("Over ℝ and ℕ, with 𝑥 ∈ ℝ, µ stays notation.", False),
    ("```python\nprint('你好世界')\n```\nThe code prints a greeting.", False),  # code is not prose
    ("Inline `变量` names in backticks are code.", False),
    ("$$\\text{面积} = 3$$ then we stop.", False),                          # display math is not prose
    ("One stray character 中 alone.", False),                               # below min_foreign_letters
    ("It costs $5 and 首先 we pay.\nThen $3.", True),                        # a lone currency $ hides nothing
    ("", False),
])
def test_is_code_switched_latin(text, switched):
    assert is_code_switched(text) is switched


def test_expected_script_other_than_latin():
    chinese = "答案是 42，因为 x = 6 乘以 7。"
    assert not is_code_switched(chinese, "chinese")                        # Latin variables are neutral there
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
    stripped = strip_math_and_code("Before $x^2$ mid \\(y\\) and \\[z\\] after ```code``` end \\frac")
    assert "x^2" not in stripped and "y" not in stripped.split() and "code" not in stripped
    assert "Before" in stripped and "after" in stripped and "frac" not in stripped


def test_non_strings_are_never_switched():
    assert is_code_switched(None) is False  # type: ignore[arg-type]
    assert is_code_switched(12345) is False  # type: ignore[arg-type]


def test_megabyte_of_hostile_text_is_linear():
    hostile = ["$" * (1 << 20), "`" * (1 << 20), "\\(" * (1 << 19), "中" * (1 << 20), "\\frac" * 200_000,
               "```\n" * 250_000]
    start = time.monotonic()
    verdicts = [is_code_switched(text) for text in hostile]
    assert time.monotonic() - start < 20  # linear passes; a backtracking regex would take hours
    assert verdicts[3] is True


@pytest.mark.parametrize("penalty, expected", [
    (-1.0, [1.0, -1.0, 0.0, -1.0]),                 # math §4.5: the reward is replaced, not decremented
    (0.0, [1.0, 0.0, 0.0, 0.0]),                    # code §4.6
    (BATCH_MIN_MINUS_10, [1.0, -10.0, 0.0, -10.0]),  # RLHF §4.3.2: min over the batch before penalties, − 10
    (None, [1.0, 1.0, 0.0, 0.5]),
])
def test_penalties(penalty, expected):
    rewards, flags = [1.0, 1.0, 0.0, 0.5], [False, True, False, True]
    assert apply_code_switch_penalty(rewards, flags, penalty) == expected


def test_batch_min_uses_raw_scores_of_all_samples():
    rm_scores = [3.2, -1.5, 0.7]
    assert apply_code_switch_penalty(rm_scores, [True, False, False], BATCH_MIN_MINUS_10) == [-11.5, -1.5, 0.7]


@pytest.mark.parametrize("bad", ["minus_one", True, [1]])
def test_bad_penalty_is_an_error(bad):
    with pytest.raises(ValueError, match="code-switch penalty"):
        apply_code_switch_penalty([1.0], [True], bad)


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="flags"):
        apply_code_switch_penalty([1.0, 0.0], [True], -1.0)
