"""The size budget counts what a reader reads: physical lines, docstrings included
(docs/architecture.md, "Size budget"). Every module of the package within MODULE_LINES, every
function within FUNCTION_LINES, every module docstring within DOCSTRING_LINES (longer explanations
belong in docs/), and no line over 100 columns in the package, tests, tools, bench or recipes.
Growth comes with a feature, not with denser lines."""
import ast
import importlib.util
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


def test_no_line_over_100_columns():
    found = code_lines.lines_over_limit(ROOT)
    assert not found, f"lines over 100 columns (python tools/code_lines.py --long-lines): {found}"


@pytest.mark.parametrize("source, want", [("x = 1\n" + "y" * 101 + "\n", [2]), ("z" * 100, [])])
def test_a_line_over_100_columns_is_found(source, want):
    assert code_lines.long_lines(source) == want
