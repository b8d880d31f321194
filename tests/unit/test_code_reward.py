"""Code verifier: program extraction, output comparison, label validation, both test formats,
pass-all with early stop, thinking responses, the batch pool, and bounded time on hostile
responses."""
import time

import pytest

from nemo_cascade.rewards import code
from nemo_cascade.rewards.code import (code_reward, extract_program, outputs_match, reward_batch,
                                       validate_label)



def reward(response, label):
    return code_reward(response, label)


def py(src: str) -> str:
    return f"Here is my solution.\n```python\n{src}\n```\n"


ADD = {"tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "10 -4\n", "output": "6"}]}
ADD_OK = "a, b = map(int, input().split())\nprint(a + b)"
ADD_WRONG = "a, b = map(int, input().split())\nprint(a - b)"


@pytest.mark.parametrize("answer, expected", [
    ("```python\nx = 1\n```", "x = 1\n"),
    ("```\nx = 1\n```", "x = 1\n"),                                     # untagged block counts
    ("```py\na\n```\ntext\n```python3\nb\n```", "b\n"),                 # the last block wins
    # other languages are skipped
    ("```python\na\n```\nSample output:\n```text\n3\n```", "a\n"),
    ("```python\na\n```\n```cpp\nint main(){}\n```", "a\n"),
    # unterminated last block ignored
    ("```python\na\n```\n```python\nb = 2", "a\n"),
    ("  ```python\n  if x:\n      y()\n  ```", "  if x:\n      y()\n"),  # indented fences
    ("```Python\nA\n```", "A\n"),
    ("```python\n```", "\n"),
    ("no code at all", None),
    ("`inline` and ``` not a fence at line end", None),
])
def test_extract_program(answer, expected):
    assert extract_program(answer) == expected


@pytest.mark.timeout(30)
@pytest.mark.parametrize("garbage", [
    # every line opens a block that never closes: a regex would go quadratic
    "```a\n" * 200_000,
    "```\n" * 250_000,
    "x" * 1_000_000,
    "\n" * 1_000_000,
    "<think>" + "```python\n" * 100_000,
])
def test_megabyte_responses_score_zero_quickly(garbage):
    assert reward(garbage, ADD) == 0.0
    assert reward(garbage, {"test_code": "assert f() == 1", "entry_point": "f"}) == 0.0


@pytest.mark.parametrize("actual, expected, same", [
    ("3\n", "3", True),
    # token-wise: line structure and blank lines ignored
    ("1 2\n3 4\n\n", "1 2 3 4", True),
    ("  a\tb  ", "a b", True),
    ("0.5000001", "0.5", True),                      # 1e-6 absolute below 1 ...
    ("0.500002", "0.5", False),
    ("1000000.5", "1000000.0", True),                # ... relative above 1
    ("1000002.5", "1000000.0", False),
    ("2.0", "2", True),                              # a float answer may print an integer value
    ("1e-7", "0", True),
    ("-0.0", "0", True),
    ("1000000000000000001", "1000000000000000000", False),   # integers compare exactly
    ("007", "7", False),
    ("YES", "yes", False),                           # case matters
    ("1 2", "1 2 3", False),
    ("", "", True),
    ("", "0", False),
    ("nan", "nan", True),
    ("nan", "0.0", False),
    ("inf", "1e400", False),
    ("1e400", "1e400", True),
    ("9" * 70 + ".0", "9" * 70 + ".5", False),      # very long numbers: string comparison only
])
def test_outputs_match(actual, expected, same):
    assert outputs_match(actual, expected) is same


@pytest.mark.parametrize("label, message", [
    ([], "expected a dict"),
    ({}, "exactly one of"),
    ({"tests": [], "test_code": "x", "entry_point": "f"}, "exactly one of"),
    ({"tests": []}, "non-empty list"),
    ({"tests": "1 2"}, "non-empty list"),
    ({"tests": [{"input": "1"}]}, r"tests\[0\]"),
    ({"tests": [{"input": 1, "output": "1"}]}, r"tests\[0\]"),
    ({"tests": [{"input": "", "output": ""}], "time_limit": 0}, "time_limit"),
    ({"tests": [{"input": "", "output": ""}], "time_limit": True}, "time_limit"),
    ({"tests": [{"input": "", "output": ""}], "time_limit": "2"}, "time_limit"),
    ({"tests": [{"input": "", "output": ""}], "time_limit": 1e9}, "time_limit"),
    ({"test_code": "", "entry_point": "f"}, "non-empty string"),
    ({"test_code": "assert f()"}, "entry_point"),
    ({"test_code": "assert f()", "entry_point": "not valid"}, "entry_point"),
    ({"test_code": "def check(:", "entry_point": "f"}, "does not parse"),
])
def test_validate_label_rejects(label, message):
    with pytest.raises(ValueError, match=message) as info:
        validate_label(label)
    assert "\n" not in str(info.value)
    # a bad label is a data error even through the reward
    with pytest.raises(ValueError):
        reward(py(ADD_OK), label)


def test_validate_label_accepts():
    validate_label(ADD)
    validate_label({
        "tests": [{"input": "", "output": "", "extra": 1}], "time_limit": 2.5, "source": "taco"})
    validate_label({
        "test_code": "def check(candidate):\n    assert candidate(1) == 2\n", "entry_point": "inc"})


def test_stdio_pass_fail_and_runtime_error():
    assert reward(py(ADD_OK), ADD) == 1.0
    assert reward(py(ADD_WRONG), ADD) == 0.0
    # right output, failed exit
    assert reward(py(ADD_OK + "\nraise SystemExit(1)"), ADD) == 0.0
    # site's exit() is available
    assert reward(py(ADD_OK + "\nexit()"), ADD) == 1.0
    # float tolerance
    assert reward(py("print(sum(map(int, input().split())) + 0.0000001)"), ADD) == 1.0
    assert reward(py("print(int(input().split()[0]) + 2)"), ADD) == 0.0    # passes test 1 only


def test_stops_at_first_failure(monkeypatch):
    calls = []
    real = code.run_python

    def counting(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(code, "run_python", counting)
    label = {"tests": [{"input": "1 1\n", "output": "2"}, {"input": "2 2\n", "output": "5"},
                       {"input": "3 3\n", "output": "6"}]}
    assert reward(py(ADD_OK), label) == 0.0
    assert calls == ["1 1\n", "2 2\n"]


def test_thinking_responses():
    think = "<think>\nmaybe:\n```python\nprint('wrong')\n```\n</think>\n"
    # only the answer after </think> counts
    assert reward(think + py(ADD_OK), ADD) == 1.0
    # a code block inside thinking is not an answer
    assert reward(think, ADD) == 0.0
    assert reward("<think>\n" + py(ADD_OK), ADD) == 0.0        # thinking never closed
    assert reward(py(ADD_OK) + py(ADD_WRONG), ADD) == 0.0      # the last block is the program
    assert reward(py(ADD_WRONG) + py(ADD_OK), ADD) == 1.0
    assert reward(None, ADD) == 0.0


HUMANEVAL_LIKE = {
    "test_code": "METADATA = {}\n\ndef check(candidate):\n    assert candidate([1, 2]) == 3\n"
                 "    assert candidate([]) == 0\n",
    "entry_point": "total",
}
MBPP_LIKE = {
    "test_code": "assert total([1, 2]) == 3\nassert total([]) == 0\n", "entry_point": "total"}


@pytest.mark.parametrize("label", [HUMANEVAL_LIKE, MBPP_LIKE])
def test_function_call_style(label):
    assert reward(py("def total(xs):\n    return sum(xs)"), label) == 1.0
    assert reward(py("def total(xs):\n    print('debug', xs)\n    return sum(xs)"), label) == 1.0
    assert reward(
        py("def total(xs):\n    return sum(xs)\n\nif __name__ == '__main__':\n    "
           "raise SystemExit(1)"
           ),
        # the program is imported, not run as main
        label) == 1.0
    assert reward(py("def total(xs):\n    return len(xs)"), label) == 0.0
    assert reward(py("def summe(xs):\n    return sum(xs)"), label) == 0.0    # wrong name
    assert reward(py("def total(xs):\n    return sum(xs\n"), label) == 0.0   # syntax error


@pytest.mark.parametrize("escape", ["import sys\nsys.exit(0)", "exit()", "import os\nos._exit(0)",
                                    "import sys\nsys.stdout.write('\\nok\\n')\nsys.exit(0)"])
def test_exiting_before_the_tests_scores_zero(escape):
    assert reward(py(f"def total(xs):\n    return len(xs)\n{escape}"), HUMANEVAL_LIKE) == 0.0


def test_time_limit_applies():
    slow = ("import time\nt = time.process_time()\nwhile time.process_time() - t < 1.2:\n  "
            "  pass\nprint(3)")
    # CPU limit: whole seconds, 1
    label = {"tests": [{"input": "1 2\n", "output": "3"}], "time_limit": 0.5}
    start = time.monotonic()
    assert reward(py(slow), label) == 0.0
    # right output, then hangs
    assert reward(py("print(3)\nimport time\ntime.sleep(100)"), label) == 0.0
    assert time.monotonic() - start < 30
    assert reward(py(slow), dict(label, time_limit=4)) == 1.0


def test_reward_batch_parallel_in_order():
    responses = [
        py(ADD_OK),
        py(ADD_WRONG), "no code",
        py("def total(xs):\n    return sum(xs)"),
        py(ADD_OK)]
    labels = [ADD, ADD, ADD, HUMANEVAL_LIKE, ADD]
    expected = [1.0, 0.0, 0.0, 1.0, 1.0]
    assert reward_batch(responses, labels, workers=2) == expected
    assert reward_batch(responses, labels, workers=1) == expected
    assert reward_batch([], []) == []
    assert code.default_workers() >= 1


def test_reward_batch_rejects_bad_input_before_running(monkeypatch):
    monkeypatch.setattr(code, "run_python", lambda *a, **k: pytest.fail("ran a program"))
    with pytest.raises(ValueError, match="2 responses for 1 labels"):
        reward_batch(["a", "b"], [ADD])
    with pytest.raises(ValueError, match=r"labels\[1\]: code label"):
        reward_batch([py(ADD_OK), py(ADD_OK)], [ADD, {"tests": []}])
