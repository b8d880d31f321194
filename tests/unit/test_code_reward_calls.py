"""Call-based code rows (TACO/APPS ``fn_name``), scored through the real bubblewrap sandbox:
fn_name(*args) per test, Solution().fn_name when the starter code has the class, APPS's loose
list/tuple comparison, and no way for the program to fake a pass."""
import pytest

from nemo_cascade.rewards import adapt_row
from nemo_cascade.rewards.code import code_reward, validate_label


def py(src: str) -> str:
    return f"```python\n{src}\n```\n"


def label_of(io, starter=None, time_limit=None):
    row = {"question": "q", "input_output": io}
    if starter is not None:
        row["starter_code"] = starter
    if time_limit is not None:
        row["time_limit"] = time_limit
    return adapt_row("code", row, "taco:1")[1]


# TACO's shape: each output wrapped in a list; the pair function returns a tuple
TACO = {
    "fn_name": "pair_sum", "inputs": [[[1, 2, 3], 4], [[5], 5], [[], 0]], "outputs": [[[1, 3]],
                                                                                      [None],
                                                                                      [None]]}
GOOD = (
    "def pair_sum(xs, t):\n    seen = {}\n    for i, x in enumerate(xs):\n        if "
    "t - x in seen:\n"
    "            return (seen[t - x], i) if False else (t - x, x)\n        seen[x] = "
    "i\n    return None"
)


def test_top_level_function_passes_and_wrong_answers_fail():
    label = label_of(TACO)
    assert code_reward(py(GOOD), label) == 1.0  # a tuple return value equals the expected list
    assert code_reward(py(GOOD.replace("return None", "return []")), label) == 0.0
    # the first test only
    assert code_reward(py("def pair_sum(xs, t):\n    return (1, 3)"), label) == 0.0
    assert code_reward(py("def other(xs, t):\n    return None"), label) == 0.0          # no fn_name
    assert code_reward(py("def pair_sum(xs, t):\n    raise ValueError"), label) == 0.0


def test_solution_class_from_starter_code():
    io = {"fn_name": "twice", "inputs": [[2], [2.5]], "outputs": [4, 5.0000001]}
    label = label_of(io,
                     starter="class Solution:\n    def twice(self, x: float) -> float:\n        ")
    assert label["class_name"] == "Solution"
    answer = py("class Solution:\n    def twice(self, x):\n        return 2 * x")
    assert code_reward(answer, label) == 1.0  # 5.0 vs 5.0000001: within 1e-6 relative
    assert code_reward(py("def twice(x):\n    return 2 * x"), label) == 0.0  # the class is required


@pytest.mark.parametrize("got, want, same", [
    ("[1, 2]", [[1, 2]], True),        # the expected value wrapped in a list (TACO/APPS)
    ("[1, 2]", [1, 2], True),
    ("(1, 2)", [1, 2], True),
    ("True", [1], False),              # a bool is not an integer
    ("1", [True], False),
    ("'3'", [3], False),
    ("{'a': (1,)}", [{"a": [1]}], True),
    ("10**18 + 1", [10**18], False),   # integers compare exactly
])
def test_comparison_rules(got, want, same):
    label = label_of({"fn_name": "f", "inputs": [[]], "outputs": [want]})
    assert code_reward(py(f"def f():\n    return {got}"), label) == float(same)


@pytest.mark.parametrize("cheat", [
    "class Any:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\n\ndef "
    "f():\n    return Any()",
    "import builtins\nbuiltins.type = lambda x: list\ndef f():\n    return 0",
    "import json\njson.loads = lambda s: []\ndef f():\n    return 0",
    "def f():\n    import os\n    os.write(1, b'\\nok\\n')\n    os._exit(0)", ])
def test_the_program_cannot_fake_a_pass(cheat):
    assert code_reward(py(cheat), label_of({"fn_name": "f", "inputs": [[]],
                                            "outputs": [[7]]})) == 0.0


def test_time_limit_bounds_the_whole_run():
    label = label_of({"fn_name": "f", "inputs": [[]], "outputs": [1]}, time_limit=1)
    assert code_reward(py("def f():\n    while True:\n        pass"), label) == 0.0


@pytest.mark.parametrize("label, message", [
    ({"call_tests": [{"args": [], "output": 1}], "fn_name": "1f"}, "fn_name"),
    ({"call_tests": [], "fn_name": "f"}, "call_tests"),
    ({"call_tests": [{"args": 1, "output": 1}], "fn_name": "f"}, r"call_tests\[0\]"),
    ({"call_tests": [{"args": [], "output": 1}], "fn_name": "f", "class_name": "a b"
      }, "class_name"),
    ({"call_tests": [{"args": [], "output": 1}], "fn_name": "f", "tests": []}, "exactly one"), ])
def test_bad_call_labels(label, message):
    with pytest.raises(ValueError, match=message):
        validate_label(label)
