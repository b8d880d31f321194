"""External check of the code verifier: the 164 HumanEval problems (data/humaneval, from
openai/human-eval).

Every canonical solution must pass under the sandbox, and two broken variants of each must fail: the
body replaced by ``return None``, and an off-by-one mutant whose every ``return x`` yields a value
one step away (``x + 1`` for numbers, ``not x`` for booleans, a character more for strings, one
element fewer for lists). Each set runs through :func:`reward_batch` with 2 workers, as in training
(paper §4.6: async verification).
"""
import ast
import gzip
import json
from pathlib import Path

import pytest

from nemo_cascade.rewards.code import reward_batch

HUMAN_EVAL = Path(__file__).resolve().parents[2] / "data" / "humaneval" / "HumanEval.jsonl.gz"

# No skip when bubblewrap is missing: tools/setup_venv.sh installs it, and a sandbox that silently
# does not run would hide exactly what this test checks.
pytestmark = pytest.mark.integration

OFF_BY_ONE = '''
def _off_by_one(x):
    if isinstance(x, bool):
        return not x
    if isinstance(x, (int, float)):
        return x + 1
    if isinstance(x, str):
        return x + "x"
    if isinstance(x, (list, tuple)):
        return type(x)(list(x)[:-1]) if x else type(x)([None])
    return 0 if x is None else None
'''


class _WrapReturns(ast.NodeTransformer):
    def visit_Return(self, node: ast.Return) -> ast.Return:
        node.value = ast.Call(ast.Name("_off_by_one", ast.Load()),
                              [node.value or ast.Constant(None)], [])
        return node


def _canonical(problem: dict) -> str:
    return problem["prompt"] + problem["canonical_solution"]


def _returns_none(problem: dict) -> str:
    return problem["prompt"] + "    return None\n"


def _off_by_one(problem: dict) -> str:
    tree = ast.parse(_canonical(problem))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == problem["entry_point"]:
            _WrapReturns().visit(node)
    return OFF_BY_ONE + ast.unparse(tree)


@pytest.fixture(scope="module")
def problems():
    with gzip.open(HUMAN_EVAL, "rt") as f:
        found = [json.loads(line) for line in f if line.strip()]
    assert len(found) == 164
    return found


@pytest.mark.timeout(600)
@pytest.mark.parametrize("variant, expected", [(_canonical, 1.0), (_returns_none, 0.0),
                                               (_off_by_one, 0.0)],
                         ids=["canonical", "return_none", "off_by_one"])
def test_humaneval(problems, variant, expected):
    responses = [f"```python\n{variant(p)}\n```" for p in problems]
    labels = [{"test_code": p["test"], "entry_point": p["entry_point"]} for p in problems]
    scores = reward_batch(responses, labels, workers=2)
    wrong = [p["task_id"] for p, score in zip(problems, scores) if score != expected]
    assert not wrong, f"{len(wrong)} problems scored != {expected}: {wrong[:10]}"
