"""The size budget counts what a reader reads: physical lines, docstrings included
(docs/architecture.md, "Size budget"). Every module of the package within MODULE_LINES, every
function within FUNCTION_LINES, every module docstring within DOCSTRING_LINES (longer explanations
belong in docs/), and no file with more lines over 100 columns than its allowance in
lines_over_100.json, which only shrinks: a file below its allowance fails too, until the allowance
is written again (``python tools/code_lines.py --long-lines``). Growth comes with a feature, not
with denser lines."""
import ast
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "nemo_cascade"
MODULE_LINES = 520
FUNCTION_LINES = 60
DOCSTRING_LINES = 40

spec = importlib.util.spec_from_file_location("code_lines", ROOT / "tools" / "code_lines.py")
code_lines = importlib.util.module_from_spec(spec)
spec.loader.exec_module(code_lines)


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _over(limit: int, sizes: dict[str, int]) -> dict[str, int]:
    return {name: n for name, n in sizes.items() if n > limit}


def test_modules_functions_and_docstrings_within_their_limits():
    modules, functions, docstrings = {}, {}, {}
    for path in _modules():
        source, rel = path.read_text(encoding="utf-8"), str(path.relative_to(ROOT))
        modules[rel] = code_lines.physical_lines(source)
        tree = ast.parse(source)
        if ast.get_docstring(tree) is not None:
            docstrings[rel] = tree.body[0].end_lineno - tree.body[0].lineno + 1
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions[f"{rel}:{node.lineno} {node.name}"] = node.end_lineno - node.lineno + 1
    assert not _over(MODULE_LINES, modules), f"modules over {MODULE_LINES} lines"
    assert not _over(FUNCTION_LINES, functions), f"functions over {FUNCTION_LINES} lines"
    assert not _over(DOCSTRING_LINES, docstrings), f"module docstrings over {DOCSTRING_LINES} lines"


def test_lines_over_100_columns_only_shrink():
    allowed = json.loads(code_lines.LONG_LINES.read_text())
    today = code_lines.long_line_counts(ROOT)
    grown = {f: (n, allowed.get(f, 0)) for f, n in today.items() if n > allowed.get(f, 0)}
    shrunk = {f: (today.get(f, 0), n) for f, n in allowed.items() if today.get(f, 0) < n}
    assert not grown, f"lines over 100 columns (today, allowed): {grown}"
    assert not shrunk, ("fewer lines over 100 columns than allowed (today, allowed): run "
                        "`python tools/code_lines.py --long-lines` to lower the allowance: "
                        f"{shrunk}")


@pytest.mark.parametrize("source, want", [("x = 1\n" + "y" * 101 + "\n", 1), ("z" * 100, 0)])
def test_a_line_over_100_columns_is_counted(source, want):
    assert code_lines.long_lines(source) == want
