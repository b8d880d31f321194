"""Released-dataset row schemas → prompt messages + the domain's label, accepted by the domain's
validator."""
import gzip
import json
from pathlib import Path

import pytest

from nemo_cascade.data.schemas import SchemaError
from nemo_cascade.rewards import REWARDS, VALIDATORS, adapt_row

DATA = Path(__file__).resolve().parents[2] / "data"


def test_math_rows():
    messages, label = adapt_row("math", {"problem": "What is 1/2 + 1/4?", "answer": "\\frac34"},
                                "m:1")
    assert messages == [{"role": "user", "content": "What is 1/2 + 1/4?"}] and label == "\\frac34"
    assert adapt_row("math", {"question": "2+2?", "answer": 4}, "m:2")[1] == "4"
    VALIDATORS["math"](label)
    with pytest.raises(SchemaError, match="m:3: expected field 'answer'"):
        adapt_row("math", {"problem": "x"}, "m:3")


def test_ifbench_rows_with_null_kwargs_validate():
    with gzip.open(DATA / "ifbench" / "IFBench_test.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    for i, row in enumerate(rows):
        _, label = adapt_row("ifeval", row, f"ifbench:{i}")
        assert label["prompt"] == row["prompt"]
        assert all(v is not None for kw in label["kwargs"] for v in kw.values())
        VALIDATORS["ifeval"](label)


def test_mbpp_rows_become_runnable_function_labels():
    with gzip.open(DATA / "mbpp" / "test.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f][:20]
    for i, row in enumerate(rows):
        messages, label = adapt_row("code", row, f"mbpp:{i}")
        assert messages[0]["content"] == row["text"]
        VALIDATORS["code"](label)
        assert label["entry_point"] in row["code"]
    _, label = adapt_row("code", rows[0], "mbpp:0")
    # the reference passes
    assert REWARDS["code"](f"```python\n{rows[0]['code']}\n```", label) == 1.0


def test_taco_input_output_rows():
    row = {
        "question": "Add two numbers.",
        "input_output": json.dumps({"inputs": ["1 2\n", ["3", "4"]],
                                    "outputs": ["3\n", ["7"]]}), "time_limit": 2}
    _, label = adapt_row("code", row, "taco:1")
    assert label == {
        "tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "3\n4\n", "output": "7\n"}],
        "time_limit": 2}
    VALIDATORS["code"](label)
    with pytest.raises(SchemaError, match="fn_name"):
        adapt_row("code", {"question": "q", "input_output": {"inputs": [], "outputs": [],
                                                             "fn_name": "2f"}}, "taco:2")


def test_taco_call_based_rows_become_call_tests():
    io = {"fn_name": "add", "inputs": [[1, 2], [[1], [2, 3]]], "outputs": [[3], [[1, 2, 3]]]}
    _, label = adapt_row("code", {"question": "Add.", "input_output": json.dumps(io)}, "taco:3")
    assert label == {
        "call_tests": [{"args": [1, 2], "output": [3]},
                       {"args": [[1], [2, 3]], "output": [[1, 2, 3]]}], "fn_name": "add",
        "class_name": None}
    VALIDATORS["code"](label)
    leet = {
        "question": "Add.", "input_output": io,
        "starter_code": "class Solution:\n    def add(self, a, b):\n"}
    assert adapt_row("code", leet, "taco:4")[1]["class_name"] == "Solution"
    with pytest.raises(SchemaError,
                       match=r"taco:5: field 'input_output.inputs' must hold a list of arguments"):
        adapt_row("code", {"question": "q", "input_output": dict(io, inputs=["1 2", [1]])},
                  "taco:5")


def test_swe_rows_in_both_file_layouts():
    files = {"pkg/a.py": "def f():\n    return 1\n"}
    patch = ("--- a/pkg/a.py\n+++ b/pkg/a.py\n@@ -1,2 +1,2 @@\n def f():\n-    return "
             "1\n+    return 2\n")
    for contents in (files, [{"file_path": "pkg/a.py",
                              "content": files["pkg/a.py"]}], json.dumps(files)):
        row = {
            "instance_id": "x__y-1", "prompt": "Fix f.", "golden_patch": patch,
            "relevant_file_contents": contents}
        messages, label = adapt_row("swe", row, "swe:1")
        assert label == {"golden_patch": patch, "files": files, "problem_statement": "Fix f."}
        VALIDATORS["swe"](label)
    with pytest.raises(SchemaError, match="relevant_file_contents"):
        adapt_row("swe", {"prompt": "Fix", "golden_patch": patch}, "swe:2")


def test_rlhf_and_passthrough_rows():
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert adapt_row("rlhf", {"messages": msgs}, "r:1") == (msgs, {"messages": msgs})
    VALIDATORS["rlhf"]({"messages": msgs})
    assert adapt_row("math", {"prompt": "p", "label": "7"}, "own:1") == ([{"role": "user",
                                                                           "content": "p"}], "7")


@pytest.mark.parametrize("domain, row, message", [
    ("math", {"answer": "1"}, "expected one of"),
    ("ifeval", {"prompt": "p", "kwargs": []}, "instruction_id_list"),
    ("code", {"question": "q"}, "expected tests"),
    ("swe", {"prompt": "p", "relevant_file_contents": {}}, "golden_patch"),
    ("rlhf", {"messages": [{"role": "assistant", "content": "x"}]}, "end with a user turn"),
    ("chess", {}, "no row schema"),
])
def test_bad_rows_name_the_field(domain, row, message):
    with pytest.raises(SchemaError, match=message):
        adapt_row(domain, row, "f.jsonl:9")
