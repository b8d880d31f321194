"""The AceMath-style rule grader (rewards/math_rule.py, paper §4.5): the equivalences it must
accept, the answers it must refuse, where it deliberately differs from math-verify, bounded time on
hostile input through the reward's worker pool, and the ``Reward.math_grader`` setting wired through
the stage Scorer and the evaluation."""
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade import config
from nemo_cascade.rewards import Scorer
from nemo_cascade.rewards.math import MathVerifier, is_equivalent, math_reward_with
from nemo_cascade.rewards.math_rule import as_number, grade, normalize
from nemo_cascade.types import Prompt, PromptGroup

from .test_math_verify import EQUIVALENCES

ACCEPTED = [
    # one half, every way
    ("1/2", "0.5"),
    ("0.5", "\\frac{1}{2}"),
    ("\\frac{1}{2}", "\\dfrac12"),
    ("\\dfrac12", "1/2"),
    ("\\tfrac{1}{2}", "0.5"),
    (".5", "\\frac12"),
    ("0.50", "1/2"),
    ("-\\frac{1}{2}", "-0.5"),
    ("\\frac{-1}{2}", "-1/2"),
    ("+0.5", "1/2"),
    ("\\frac{2}{4}", "\\frac{1}{2}"),
    ("4\\frac{2}{3}", "\\frac{14}{3}"),
    # percentages: the sign dropped, and AceMath's ×100 / ÷100
    ("10\\%", "10"),
    ("10", "10\\%"),
    ("10%", "10"),
    ("0.1", "10\\%"),
    ("10\\%", "0.1"),
    ("50", "0.5"),
    # roots and symbolic equality
    ("3\\sqrt{2}", "\\sqrt{18}"),
    ("\\sqrt{18}", "3\\sqrt2"),
    ("\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt3}{2}"),
    ("\\sqrt{2}/2", "\\frac{1}{\\sqrt{2}}"),
    ("sqrt(2)", "\\sqrt{2}"),
    ("(x+1)^2", "x^2+2x+1"),
    ("2\\pi", "2 pi"),
    ("\\frac{\\pi}{2}", "\\pi/2"),
    ("10^{3}", "1000"),
    ("2^{10}", "1024"),
    ("\\frac{x}{2}", "0.5x"),
    ("2+3i", "3i+2"),
    # numbers within 1e-4 relative
    ("0.333333", "\\frac13"),
    ("3.14159", "\\pi"),
    ("1,000", "1000"),
    ("1{,}000", "1000"),
    ("1,\\!000", "1000"),
    ("-3", "-3.0"),
    ("- 3", "-3"),
    # intervals and unions: same brackets, same ends
    ("(1,2]", "(1, 2]"),
    ("\\left(1,2\\right]", "(1,2]"),
    ("(-\\infty,3)", "(-\\infty, 3)"),
    ("x \\in (1,2]", "(1,2]"),
    ("[3,4)\\cup(1,2]", "(1,2]\\cup[3,4)"),
    ("(-\\infty, 0) \\cup (0, \\infty)", "(-\\infty,0)\\cup(0,\\infty)"),
    ("(-inf, 3)", "(-\\infty,3)"),
    # tuples in order, sets and bare lists in any order
    ("(3,\\frac{\\pi}{2})", "\\left( 3, \\frac{\\pi}{2} \\right)"),
    ("(3, \\pi/2)", "(3,\\frac{\\pi}{2})"),
    ("(1,2,3)", "(1, 2, 3)"),
    ("\\{1,2\\}", "\\{2,1\\}"),
    ("2, 1", "\\{1,2\\}"),
    ("3,1,2", "1, 2, 3"),
    ("5", "\\{5\\}"),
    ("\\emptyset", "\\varnothing"),
    ("\\{\\}", "\\emptyset"),
    ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"),
    ("\\begin{pmatrix}2&0\\\\0&2\\end{pmatrix}", "\\begin{pmatrix}2 & 0\\\\ 0 & 2\\end{pmatrix}"),
    # \text{}, units, currency, degrees
    ("5\\text{ cm}", "5"),
    ("5\\text{ cm}^2", "5"),
    ("5 cm", "5"),
    ("5\\mbox{ inches}", "5"),
    ("18 dollars", "18"),
    ("\\$18", "18"),
    ("\\$18.00", "18"),
    ("\\text{Monday}", "\\text{monday}"),
    ("\\textbf{(C)}", "C"),
    ("(C)", "\\text{(C)}"),
    ("90^\\circ", "90"),
    ("30^{\\circ}", "30^\\circ"),
    ("45°", "45"),
    ("12 percent", "12"),
    ("3\\sqrt{2}\\text{ units}", "\\sqrt{18}"),
    # x= / a=…, b=… before the answer; equations equal up to sign
    ("x=5", "5"),
    ("5", "x = 5"),
    ("a=1, b=2", "1,2"),
    ("y = 2x+1", "2x+1"),
    ("x_1 = 3", "3"),
    ("2x+3y=6", "6=2x+3y"),
    ("x^2+y^2=1", "x^2 + y^2 = 1"),
    # wrappers and punctuation
    ("\\boxed{7}", "7"),
    ("7.", "7"),
    ("$7$", "7"),
    ("\\displaystyle\\frac{1}{2}", "0.5"), ]

REFUSED = [
    ("1/2", "2"),
    ("0.5", "5"),
    ("\\frac{1}{2}", "\\frac{2}{1}"),
    ("0.333", "\\frac{1}{3}"),
    ("1000001", "1000000"),
    ("25\\%", "50\\%"),
    ("2\\sqrt{2}", "3\\sqrt{2}"),
    ("\\sqrt{3}", "3"),
    ("x^2", "x^3"),
    ("q-p", "p-q"),
    ("-3", "3"),
    ("-\\infty", "\\infty"),
    ("\\pi", "3.14"),
    ("[1,2]", "(1,2]"),
    ("(1,2]", "[1,2]"),
    ("(1,2)", "[1,2]"),
    ("(-\\infty,3]", "(-\\infty,3)"),
    ("(2,1)", "(1,2)"),
    ("(1,2,4)", "(1,2,3)"),
    ("\\{1,2,3\\}", "\\{1,2\\}"),
    ("1,2", "1,3"),
    ("(1,2)", "\\{1,2\\}"),
    ("[3,4)", "(1,2]\\cup[3,4)"),
    ("\\begin{pmatrix}1\\\\3\\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}"),
    ("B", "C"),
    ("\\text{Tuesday}", "\\text{Monday}"),
    ("\\text{no}", "\\text{yes}"),
    ("\\frac{\\pi}{2}", "90^\\circ"),
    ("x=6", "5"),
    ("2x+3y=6", "4x+6y=12"),
    ("", "5"),
    ("   ", "5"),
    ("\\text{}", "5"),
    ("\\text{no answer}", "5"),
    ("\\frac{1}{0}", "1"),
    ("0/0", "1"),
    ("5x", "5"),
    ("2-3i", "2+3i"),
    ("x=5", "x=6"),
    ("\\sqrt{2}", "2"),
    ("\\infty", "1000000"),
    ("[1,3]", "[1,2]"), ]


@pytest.mark.parametrize("pred, ref", ACCEPTED, ids=[f"{p}|{r}" for p, r in ACCEPTED])
def test_accepts(pred, ref):
    assert grade(pred, ref) is True


@pytest.mark.parametrize("pred, ref", REFUSED, ids=[f"{p}|{r}" for p, r in REFUSED])
def test_refuses(pred, ref):
    assert grade(pred, ref) is False


def test_there_are_enough_labelled_cases():
    assert len(ACCEPTED) >= 80 and len(REFUSED) >= 40


@pytest.mark.parametrize("raw, normal", [
    ("\\dfrac{1}{2}", "\\frac{1}{2}"),
    ("\\frac12", "\\frac{1}{2}"),
    ("\\frac1{2}", "\\frac{1}{2}"),
    ("\\frac{1}2", "\\frac{1}{2}"),
    ("\\sqrt3", "\\sqrt{3}"),
    ("5\\text{ cm}^2", "5"),
    ("\\text{(C)}", "C"),
    ("90^{\\circ}", "90"),
    ("10\\%", "10"),
    ("x = \\frac{1}{2}", "\\frac{1}{2}"),
    ("1,000", "1000"),
    ("1, 234", "1, 234"),
    ("\\left( 1, 2 \\right)", "( 1, 2 )"),
    ("infinity", "\\infty"),
    ("\\varnothing", "\\emptyset"),
    ("\\boxed{\\$5.}", "5"),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"), ])
def test_normalize(raw, normal):
    assert normalize(raw) == normal


def test_numbers_are_exact_fractions():
    assert as_number("\\frac{3}{6}") == as_number("0.5") == as_number("1/2")
    assert as_number("-\\frac{1}{4}") == as_number("-0.25")
    assert as_number("1" * 65) is None and as_number("x") is None and as_number("1/0") is None


def test_accepts_whatever_the_exact_check_accepts():
    # The reward settles trivial matches in-process (rewards/math.is_equivalent) before either
    # grader runs: the rule grader must agree with it, or the grader setting would change verdicts
    # the exact check already gave.
    settled = [(p, r) for p, r, _ in EQUIVALENCES if is_equivalent(p, r)]
    assert len(settled) >= 15
    assert [(p, r) for p, r in settled if not grade(p, r)] == []


def test_where_it_differs_from_math_verify():
    """The deliberate differences, each documented (rewards/math_rule.py): AceMath's percent scaling
    and 1e-4 tolerance, assignments kept by their value, words after a number taken as units; and
    order-free lists that are not sets for math-verify's semantics."""
    differ = {(p, r): e for p, r, e in EQUIVALENCES if grade(p, r) != bool(e)}
    assert differ == {
        ("0.5", "50"): 0, ("50", "0.5"): 0,            # ×100 / ÷100 (AceMath's include_percentage)
        ("100", "99.9999999"): 0, ("6.28318", "2\\pi"): 0,   # within 1e-4 relative
        ("x=5", "y=5"): 0,                             # both sides keep their value: 5 = 5
        ("18 dollars", "18"): 0,                       # a word after a number is a unit
        ("\\emptyset", "\\varnothing"): 0,             # math-verify does not parse \varnothing
        ("(1,2)", "\\{1,2\\}"): 1,                     # a tuple is not a set
        ("5,5", "5"): 1,                               # two answers are not one
    }


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_normalising_never_raises(text):
    # normalising runs before any parsing: it must take anything and stay linear
    assert isinstance(normalize(text), str)
    assert as_number(normalize(text)) is None or len(text) > 0


def test_not_a_string_is_not_equal():
    assert grade(None, "1") is False and grade(1, "1") is False and grade("1", None) is False
    assert grade("1", 1) is True and grade("0.5", 0.5) is True


def test_long_inputs_are_compared_as_text_only():
    long = "1+" * 600 + "1"
    started = time.monotonic()
    assert grade(long, long) is True and grade(long, "1201") is False
    assert time.monotonic() - started < 1.0


@pytest.mark.timeout(180)
def test_hostile_answers_finish_within_the_timeout_and_score_zero():
    verifier = MathVerifier(timeout_s=2.0, num_workers=2, grader="rule")
    hostile = [
        # sympy works on this for ever: killed
        "\\boxed{10^{10^{10^{10}}}}",
        "\\boxed{9^{9^{9}}}",
        "\\boxed{(x+1)^{1000}}",
        "\\boxed{" + "{" * 450 + "1" + "}" * 450 + "}",
        "\\boxed{" + "{}" * 500_000 + "}",                        # 1 MB: the exact check only
        "\\boxed{" + "\\frac{" * 200 + "1" + "}{2}" * 200 + "}",
        "\\boxed{" + "(1," * 300 + "1" + ")" * 300 + "}",           # deeply nested tuples
        # a list longer than the multiset match takes
        "\\boxed{" + ",".join(["x"] * 400) + "}",
        "\\boxed{__import__('os').system('touch /tmp/pwned_by_grader')}",  # parsed, never evaluated
    ]
    counts_before = dict(verifier.pool().counts)
    started = time.monotonic()
    scores = verifier.reward_batch(hostile, ["1"] * len(hostile))
    elapsed = time.monotonic() - started
    assert scores == [0.0] * len(hostile)
    # the kill path was taken
    assert verifier.pool().counts["timeout"] > counts_before.get("timeout", 0)
    assert elapsed < 120, elapsed
    assert not Path("/tmp/pwned_by_grader").exists()
    # replaced workers still score
    assert verifier.reward_batch(["\\boxed{3\\sqrt{2}}"], ["\\sqrt{18}"]) == [1.0]


def test_the_grader_is_a_verifier_setting():
    assert math_reward_with(grader="rule")("so \\boxed{50}", "0.5") == 1.0
    assert math_reward_with()("so \\boxed{50}", "0.5") == 0.0
    with pytest.raises(ValueError, match="math grader must be one of"):
        MathVerifier(grader="acemath")


def _group(label, texts):
    n = len(texts)
    return PromptGroup(prompt=Prompt(prompt_tokens=[1], domain="math", label=label),
                       response_tokens_G_T=[[2]] * n, rollout_logprobs_G_T=[[-0.1]] * n,
                       finish_reason_G=["stop"] * n, response_text_G=list(texts))


def test_stage_scorer_uses_the_configured_grader():
    # answers on which the two graders differ: the stage's reward follows Reward.math_grader
    texts = [
        "<think>x</think>\\boxed{50}", "<think>x</think>\\boxed{18 dollars}",
        "<think>x</think>\\boxed{0.5}"]
    labels = ["0.5", "18", "0.5"]
    default = [_group(l, [t]) for l, t in zip(labels, texts)]
    rule = [_group(l, [t]) for l, t in zip(labels, texts)]
    Scorer("math", config.Reward()).score(default)
    Scorer("math", config.Reward(math_grader="rule")).score(rule)
    assert [g.rewards_G for g in default] == [[0.0], [0.0], [1.0]]
    assert [g.rewards_G for g in rule] == [[1.0], [1.0], [1.0]]


def test_grader_setting_is_checked_and_overridable():
    stage = config.Stage(name="s", data=config.Data(source="synthetic:arithmetic"))
    cfg = config.Cascade(model=config.Model(build="tiny-qwen3"), stages=(stage,))
    assert apply_overrides(
        cfg, ["stages.s.reward.math_grader=rule"]).stages[0].reward.math_grader == "rule"
    with pytest.raises(config.ConfigError, match="stages.s.reward.math_grader") as e:
        apply_overrides(cfg, ["stages.s.reward.math_grader=acemath"])
    assert "\n" not in str(e.value)


def test_evaluation_takes_the_grader():
    from nemo_cascade.evaluate.runner import EvalSettings, _reward_settings, check_settings
    from nemo_cascade.evaluate.suites import EvalError, get_suite

    assert _reward_settings(get_suite("math500"),
                            EvalSettings(math_grader="rule")).math_grader == "rule"
    assert _reward_settings(get_suite("math500"), EvalSettings()).math_grader == "math_verify"
    with pytest.raises(EvalError, match="--math-grader"):
        check_settings(["gsm8k"], EvalSettings(math_grader="acemath"))


def test_agreement_bench_reports_the_disagreeing_answers(tmp_path, capsys):
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("agreement", Path(__file__).parents[2] / "bench"
                                                  / "math_grader_agreement.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    # a duplicate
    records = [{"uid": "1", "label": "0.5", "responses": ["so \\boxed{50}", "so \\boxed{50}"]},
               {"uid": "2", "label": "7", "responses": ["The answer is 7.", "I guess 3 or 4"]},
               {"uid": "3", "label": "(1,2)", "responses": ["\\boxed{\\{1,2\\}}", "\\boxed{}"]}]
    run = {
        "suites": {
            "math500": {"domain": "math", "records": records}, "ifeval": {
                "domain": "ifeval", "records": [{"uid": "x", "label": {}, "responses": ["hi"]}]}}}
    (tmp_path / "eval.json").write_text(json.dumps(run))
    out = tmp_path / "agreement.json"
    assert bench.main([
        str(tmp_path / "eval.json"), "--out",
        str(out), "--no-references", "--timeout-s", "5"]) == 0
    result = json.loads(out.read_text())
    # the duplicate response counts once; the empty box falls back to a stated answer or number,
    # here none
    assert result["responses"] == {"math500/boxed": 2, "math500/last number": 1, "math500/none": 1,
                                   "math500/stated": 1}
    rows = {(t["source"]): t for t in result["table"]}
    assert [rows["boxed"][k] for k in ("n", "agree", "rule_only", "math_verify_only")
            ] == [2, 0, 1, 1]
    assert [(d["answer"], d["reference"], d["math_verify"], d["rule"])
            for d in result["disagreements"]] == [("50", "0.5", False, True),
                                                  ("\\{1,2\\}", "(1,2)", True, False)]
    assert rows["stated"]["both_correct"] == 1 and rows["last number"]["agree"] == 1
    assert "`50`, reference `0.5`" in capsys.readouterr().out
