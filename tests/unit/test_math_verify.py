"""Math reward with math-verify behind the exact check: labelled equivalences, answer patterns,
labels, hostile inputs that must finish (score 0) within the per-sample timeout.

The labelled cases run as one ``reward_batch`` (a module fixture) so they use the worker pool in
parallel; each case is still its own test. Verdicts marked "math-verify semantics" are what
math-verify 0.9 decides, pinned so an upgrade that changes them is noticed (and documented in
rewards/math.py).
"""
import random
import time

import pytest
from hypothesis import given, settings, strategies as st

from nemo_cascade.rewards.math import (ANSWER_PATTERNS, MathVerifier, extract_by_pattern,
                                       is_equivalent, math_reward, math_reward_with, reward_batch,
                                       validate_label)

# (model's boxed answer, reference label, expected reward)
EQUIVALENCES = [
    # fractions and decimals
    ("1/2", "0.5", 1),
    ("\\frac12", "0.5", 1),
    ("\\frac{1}{2}", "1/2", 1),
    ("\\dfrac{1}{2}", "\\frac12", 1),
    ("\\tfrac{1}{2}", "0.5", 1),
    ("0.50", "\\frac{1}{2}", 1),
    ("2/4", "\\frac{1}{2}", 1),
    ("\\frac{2}{4}", "0.5", 1),
    (".5", "1/2", 1),
    ("\\frac{-1}{2}", "-0.5", 1),
    ("-\\frac{1}{2}", "-1/2", 1),
    ("\\frac{14}{3}", "14/3", 1),
    ("4\\frac{2}{3}", "\\frac{14}{3}", 1),  # a mixed number
    # math-verify semantics: equal after rounding to 6 decimals
    ("0.333333", "\\frac13", 1),
    ("0.333", "\\frac{1}{3}", 0),
    ("\\frac{1}{3}", "0.3333333333", 1),
    ("1/2", "2", 0),
    ("\\frac{1}{2}", "\\frac{2}{1}", 0),
    ("0.5", "5", 0),
    ("100", "99.9999999", 0),
    # percentages (math-verify semantics: the % may be dropped or applied on either side; 50 != 0.5)
    ("50\\%", "50\\%", 1),
    ("50", "50\\%", 1),
    ("0.5", "50\\%", 1),
    ("1/2", "50\\%", 1),
    ("50\\%", "0.5", 1),
    ("50\\%", "50", 1),
    ("12\\%", "0.12", 1),
    ("0.12", "12\\%", 1),
    ("0.5", "50", 0),
    ("50", "0.5", 0),
    ("25\\%", "50\\%", 0),
    # roots
    ("\\sqrt3/2", "\\frac{\\sqrt{3}}{2}", 1),
    ("\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt3}{2}", 1),
    ("\\sqrt{18}", "3\\sqrt{2}", 1),
    ("3\\sqrt{2}", "\\sqrt{18}", 1),
    ("\\sqrt{2}/2", "\\frac{1}{\\sqrt{2}}", 1),
    ("2\\sqrt{2}", "3\\sqrt{2}", 0),
    ("\\sqrt{3}", "3", 0),
    # intervals
    ("(1,2]", "(1, 2]", 1),
    ("(1, 2]", "\\left(1,2\\right]", 1),
    ("(-\\infty,3)", "(-\\infty, 3)", 1),
    ("[3,4)\\cup(1,2]", "(1,2]\\cup[3,4)", 1),
    ("x \\in (1,2]", "(1,2]", 1),
    ("[1,2]", "(1,2]", 0),
    ("(1,2]", "[1,2]", 0),
    ("(1,2)", "[1,2]", 0),
    ("(-\\infty,3]", "(-\\infty, 3)", 0),
    # math-verify semantics: a relation is not an interval
    ("x<3", "(-\\infty,3)", 0),
    # sets and lists of solutions
    ("\\{1,2\\}", "\\{2,1\\}", 1),
    ("2,1", "\\{1,2\\}", 1),
    ("3, 1, 2", "1,2,3", 1),
    ("\\{\\}", "\\emptyset", 1),
    # math-verify semantics: a reference set accepts a tuple
    ("(1,2)", "\\{1,2\\}", 1),
    ("5,5", "5", 1),  # math-verify semantics: {5, 5} is {5}
    ("\\{1,2,3\\}", "\\{1,2\\}", 0),
    ("1,2", "1,3", 0),
    # math-verify semantics: \varnothing is not parsed
    ("\\emptyset", "\\varnothing", 0),
    # tuples and matrices
    ("(3,\\frac{\\pi}{2})", "\\left( 3, \\frac{\\pi}{2} \\right)", 1),
    ("(3, \\pi/2)", "(3,\\frac{\\pi}{2})", 1),
    ("(1,2,4)", "(1,2,3)", 0),
    ("(2,1)", "(1,2)", 0),
    ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", 1),
    ("\\begin{pmatrix}1\\\\3\\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", 0),
    # equations and assignments
    ("x=5", "5", 1),
    ("5", "x=5", 1),
    ("x = 5", "x=5", 1),
    ("a=1,b=2", "1,2", 1),
    ("2x+1", "y=2x+1", 1),
    ("x=6", "5", 0),
    ("x=5", "y=5", 0),
    # units, text, currency, degrees, choices
    ("5 cm", "5", 1),
    ("5\\text{ cm}", "5", 1),
    ("5\\text{ cm}^2", "5", 1),
    ("\\$18", "18", 1),
    ("\\$18.00", "18", 1),
    ("90^\\circ", "90", 1),
    ("30^{\\circ}", "30^\\circ", 1),
    ("\\text{(C)}", "C", 1),
    ("C", "\\text{(C)}", 1),
    ("(C)", "\\text{(C)}", 1),
    ("\\text{Yes}", "\\text{yes}", 1),
    ("\\text{Monday}", "\\text{Monday}", 1),
    ("B", "C", 0),
    ("\\text{Tuesday}", "\\text{Monday}", 0),
    ("\\text{no}", "\\text{yes}", 0),
    # math-verify semantics: words outside \text{} are symbols
    ("18 dollars", "18", 0),
    # math-verify semantics: degrees are not radians
    ("\\frac{\\pi}{2}", "90^\\circ", 0),
    # negatives
    ("-3", "-3.0", 1),
    ("-(3)", "-3", 1),
    ("- 3", "-3", 1),
    ("-3", "3", 0),
    ("3", "-3", 0),
    ("-\\infty", "\\infty", 0),
    # expressions
    ("(x+1)^2", "x^2+2x+1", 1),
    ("x^2+2x+1", "(x+1)^2", 1),
    ("x^2-1", "(x-1)(x+1)", 1),
    ("p-q", "p - q", 1),
    ("2x", "x+x", 1),
    ("\\frac{x}{2}", "0.5x", 1),
    ("\\pi/2", "\\frac{\\pi}{2}", 1),
    ("\\sin^2 x + \\cos^2 x", "1", 1),
    ("q-p", "p-q", 0),
    ("x^2", "x^3", 0),
    ("x", "y", 0),
    ("6.28318", "2\\pi", 0),
    ("\\pi", "3.14", 0),
    # integers written other ways
    ("10^{10}", "10000000000", 1),
    ("1,000", "1000", 1),
    ("1{,}000", "1000", 1),
    ("2^{10}", "1024", 1),
    ("10^{3}", "1000", 1),
    ("1000000", "10^6", 1),
    ("\\binom{5}{2}", "10", 1),
    ("5!", "120", 1),
    ("\\log_2 8", "3", 1),
    ("|{-3}|", "3", 1),
    ("\\lfloor 2.5\\rfloor", "2", 1),
    ("0.1+0.2", "0.3", 1),
    ("1000001", "1000000", 0),
    ("1e3", "1000", 0),  # math-verify semantics: e is Euler's number
    ("\\frac{1}{0}", "1", 0),
    ("0/0", "1", 0),
    # complex numbers
    ("2+3i", "3i+2", 1),
    ("2-3i", "2+3i", 0),
    # no usable answer
    ("", "5", 0),
    ("\\text{no answer}", "5", 0), ]


@pytest.fixture(scope="module")
def equivalence_scores():
    responses = [f"Therefore the answer is $\\boxed{{{pred}}}$." for pred, _, _ in EQUIVALENCES]
    return reward_batch(responses, [ref for _, ref, _ in EQUIVALENCES])


def test_there_are_at_least_100_labelled_cases():
    assert len(EQUIVALENCES) >= 100
    assert {e for _, _, e in EQUIVALENCES} == {0, 1}


@pytest.mark.parametrize("index", range(len(EQUIVALENCES)),
                         ids=[f"{p}|{r}" for p, r, _ in EQUIVALENCES])
def test_labelled_equivalence(equivalence_scores, index):
    pred, ref, expected = EQUIVALENCES[index]
    assert equivalence_scores[index] == float(expected), (pred, ref)


def test_single_call_matches_the_batch(equivalence_scores):
    for index in (0, 20, 45, 70):
        pred, ref, _ = EQUIVALENCES[index]
        assert math_reward(f"\\boxed{{{pred}}}", ref) == equivalence_scores[index]


def test_exact_path_settles_trivial_matches_without_math_verify():
    # the exact check alone: these never reach a worker
    assert is_equivalent("68.0", "68") and is_equivalent("\\dfrac{1}{2}", "0.5")
    assert not is_equivalent("\\sqrt3/2", "\\frac{\\sqrt{3}}{2}")  # math-verify's job


@pytest.mark.parametrize("response, score", [
    # math-verify on the answer only
    ("<think>it is \\boxed{2}</think>So $\\boxed{\\dfrac{1}{2}}$.", 1.0),
    ("<think>\\boxed{0.5}</think>So \\boxed{2}.", 0.0),
    ("<think>\\boxed{0.5}</think>No box.", 0.0),
    ("<think>\\boxed{0.5} and still thinking", 0.0),                      # thinking never closed
    ("\\boxed{0.5} then \\boxed{2}", 0.0),                                # the last box counts
    ("\\boxed{2} then \\boxed{0.5}", 1.0),
])
def test_thinking_and_last_box(response, score):
    assert math_reward(response, "1/2") == score


@pytest.mark.parametrize("response, label, score", [
    ("Natalia sold 48 + 24 = 72 clips.\n#### 72", "72", 1.0),
    ("#### 1,000", "1000", 1.0),
    ("#### $18.00", "18", 1.0),
    ("#### 5\nwait, no.\n#### 6", "6", 1.0),                            # the last match counts
    ("#### 5\nwait, no.\n#### 6", "5", 0.0),
    # pattern mode ignores boxes
    ("The answer is \\boxed{72}", "72", 0.0),
    ("<think>#### 72</think>I don't know.", "72", 0.0),
    ("####", "72", 0.0),
])
def test_gsm8k_pattern(response, label, score):
    assert math_reward_with("gsm8k")(response, label) == score


@pytest.mark.parametrize("response, score", [
    ("So the answer is $\\frac{1}{2}$.", 1.0),
    ("The final answer is: 0.5", 1.0),
    ("THE ANSWER IS 1/2.", 1.0),
    ("The answer is 2.", 0.0),
    ("An answer follows: 1/2", 0.0),
])
def test_answer_is_pattern(response, score):
    assert math_reward_with("answer_is")(response, "1/2") == score


def test_custom_pattern_and_batch():
    verifier = math_reward_with(r"Final: (.+)")
    assert verifier.reward_batch(["Final: 0.5", "Final: 3", "nothing"],
                                 ["1/2", "1/2", "1/2"]) == [1.0, 0.0, 0.0]
    assert extract_by_pattern("Final: $7$.", verifier.pattern) == "7"


@pytest.mark.parametrize("pattern", ["(unclosed", "no group here"])
def test_bad_answer_pattern_is_a_config_error(pattern):
    with pytest.raises(ValueError, match="answer_pattern"):
        math_reward_with(pattern)


def test_named_patterns_are_listed():
    assert set(ANSWER_PATTERNS) == {"gsm8k", "answer_is"}


@pytest.mark.parametrize(
    "label", ["1/2", "\\frac{\\sqrt3}{2}", "(1, 2]", "\\{1,2\\}", 68, 0.5, "\\text{(C)}"])
def test_valid_labels(label):
    validate_label(label)


@pytest.mark.parametrize("label, message", [
    (None, "string or a number"),
    (True, "string or a number"),
    (["1"], "string or a number"),
    ({"answer": "1"}, "string or a number"),
    ("", "empty"),
    ("   ", "empty"),
    (float("nan"), "finite"),
    (float("inf"), "finite"),
    ("\\frac{1}{2", "unbalanced"),
    ("1}", "unbalanced"), ])
def test_malformed_labels(label, message):
    with pytest.raises(ValueError, match=message) as info:
        validate_label(label)
    assert "\n" not in str(info.value)


def test_mismatched_batch_is_a_caller_error():
    with pytest.raises(ValueError, match="2 responses but 1 labels"):
        reward_batch(["a", "b"], ["1"])


def _random_unicode(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(chr(rng.randrange(0x20, 0xD7FF)) for _ in range(n))


@pytest.mark.timeout(180)
def test_adversarial_inputs_finish_within_the_timeout_and_score_zero():
    verifier = MathVerifier(timeout_s=3.0, num_workers=2)
    hostile = [
        # sympy would evaluate forever: killed
        "\\boxed{10^{10^{10^{10}}}}",
        "\\boxed{9^{9^{9}}}",
        "\\boxed{9**9**9}",
        # 10k nested braces (beyond MAX_VERIFY_CHARS)
        "\\boxed{" + "{" * 5000 + "1" + "}" * 5000 + "}",
        # deep nesting that does reach math-verify
        "\\boxed{" + "{" * 450 + "1" + "}" * 450 + "}",
        "\\boxed{" + "{}" * 500_000 + "}",                      # 1 MB of braces
        "{" * 500_000 + "}" * 500_000,
        _random_unicode(1_000_000, seed=0),                     # 1 MB of random unicode
        # random unicode that math-verify must parse
        "\\boxed{" + _random_unicode(300, seed=1) + "}",
        "\\boxed{" + "\\frac{" * 200 + "1" + "}{2}" * 200 + "}",
    ]
    counts_before = dict(verifier.pool().counts)
    started = time.monotonic()
    scores = verifier.reward_batch(hostile, ["1"] * len(hostile))
    elapsed = time.monotonic() - started
    assert scores == [0.0] * len(hostile)
    # the kill path was taken
    assert verifier.pool().counts["timeout"] > counts_before.get("timeout", 0)
    # a generous bound, not a speed claim: every item is bounded by its 3 s timeout plus a worker
    # restart
    assert elapsed < 150, elapsed
    # replaced workers still score
    assert verifier.reward_batch(["\\boxed{\\dfrac{1}{2}}"], ["0.5"]) == [1.0]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.text(max_size=50))
def test_parent_side_never_raises_on_any_text(response, label):
    # extraction and the exact check run in the trainer process: they must accept anything
    verifier = MathVerifier()
    answer = verifier.extract_answer(response)
    assert answer is None or isinstance(answer, str)
    assert is_equivalent(response, label) in (True, False)
    found = extract_by_pattern(response, math_reward_with("answer_is").pattern)
    assert found is None or (isinstance(found, str) and found != "")
