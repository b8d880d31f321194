"""Math verifier: boxed extraction, normalisation, think handling, robustness to hostile output."""
import pytest

from nemo_cascade.rewards import REWARDS, Scorer
from nemo_cascade.rewards.math import extract_boxed, is_equivalent, math_reward
from nemo_cascade.types import Prompt, PromptGroup


@pytest.mark.parametrize("text, expected", [
    ("The answer is \\boxed{68}.", "68"),
    ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),                 # nested braces
    ("\\boxed{\\sqrt{\\frac{a}{b}}} done", "\\sqrt{\\frac{a}{b}}"),
    ("first \\boxed{1} then \\boxed{2}", "2"),                  # last one wins
    ("\\boxed {7}", "7"),
    ("\\fbox{9}", "9"),
    ("no box here", None),
    ("\\boxed{68", None),                                       # unbalanced: never closed
    ("\\boxed{1} and a truncated \\boxed{2", "1"),              # an unclosed last box is skipped
    ("}}} \\boxed{5} }", "5"),                                  # stray closers
    ("\\boxed{}", ""),
    ("{\\boxed{3}", "3"),
])
def test_extract_boxed(text, expected):
    assert extract_boxed(text) == expected


@pytest.mark.timeout(20)
@pytest.mark.parametrize("garbage", [
    # 1 MB of unclosed boxes: quadratic rescans would never finish
    "\\boxed{" * 150_000,
    "{" * 1_000_000,
    "}" * 1_000_000,
    "\\boxed{1}" * 110_000,
    "x" * 1_000_000,
    "<think>" + "\\boxed{{" * 120_000,
    "1" * 1_000_000,
])
def test_megabyte_garbage_finishes(garbage):
    assert math_reward(garbage, "1") in (0.0, 1.0)
    assert math_reward("\\boxed{" + garbage[:1_000_000] + "}", "1") in (0.0, 1.0)


@pytest.mark.timeout(20)
def test_huge_numbers_are_not_computed():
    # Fraction("1e999999999") would try to build a billion-digit integer
    assert math_reward("\\boxed{1e999999999}", "1") == 0.0
    assert math_reward("\\boxed{" + "9" * 900_000 + "}", "9" * 900_000) == 1.0  # equal as strings


@pytest.mark.parametrize("pred, ref, same", [
    ("68", "68", True), ("68.0", "68", True), ("68", "68.", True), (" 6 8 ", "68", True),
    ("$68$", "68", True), ("+68", "68", True), ("1\\!000", "1000", True), ("0.5", "1/2", True),
    ("\\frac{1}{2}", "0.5", True), ("\\dfrac{1}{2}", "\\frac{1}{2}", True), ("-3", "-3.00", True),
    ("67", "68", False), ("-68", "68", False), ("", "", False), ("x", "68", False),
    ("\\text{yes}", "yes", True), ("68", "\\boxed{68}", True), ("(1,2]", "(1, 2]", True),
])
def test_is_equivalent(pred, ref, same):
    assert is_equivalent(pred, ref) is same


@pytest.mark.parametrize("response, score", [
    ("23 + 45 = 68. The answer is \\boxed{68}.", 1.0),
    ("The answer is \\boxed{67}.", 0.0),
    ("The answer is 68.", 0.0),                                      # no box
    ("<think>maybe \\boxed{67}</think>So \\boxed{68}.", 1.0),        # only the answer is judged
    ("<think>\\boxed{68}</think>So \\boxed{67}.", 0.0),
    # box inside thinking does not count
    ("<think>\\boxed{68}</think>I am not sure.", 0.0),
    ("<think>\\boxed{68} and I keep thinking", 0.0),                 # thinking never closed
    ("\\boxed{68}<think>x</think>", 1.0),                            # does not open with <think>
])
def test_math_reward(response, score):
    assert math_reward(response, "68") == score


@pytest.mark.parametrize("response", [None, 5, b"\\boxed{68}", ["\\boxed{68}"]])
def test_math_reward_never_raises(response):
    assert math_reward(response, "68") == 0.0


def test_numeric_label():
    assert math_reward("\\boxed{68}", 68) == 1.0


def test_score_groups():
    prompt = Prompt(prompt_tokens=[1, 2], domain="math", label="5")
    group = PromptGroup(prompt=prompt, response_tokens_G_T=[[3], [4], [5]],
                        rollout_logprobs_G_T=[[-0.1], [-0.2], [-0.3]],
                        finish_reason_G=["stop", "stop", "length"],
                        response_text_G=["\\boxed{5}", "\\boxed{6}", "<think>\\boxed{5}"])
    assert Scorer("math").score([group]) == [group]
    assert group.rewards_G == [1.0, 0.0, 0.0]
    assert [d["answer_found"] for d in group.reward_details_G] == [True, True, False]
    group.response_text_G = group.response_text_G[:2]
    with pytest.raises(ValueError, match="detokenise"):
        Scorer("math").score([group])
