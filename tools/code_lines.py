"""Lines of the training core (nemo_cascade/ minus tooling/) and of the tooling: physical lines
(what a reader reads, docstrings included) and code lines (lines holding a code token: no blank
line, comment or docstring). The size limits themselves are tests/unit/test_size_budget.py's.

    python tools/code_lines.py               # per core package / top-level module, tooling, core
    python tools/code_lines.py --files       # one line per file as well
    python tools/code_lines.py --long-lines  # list the lines over 100 columns
"""

from __future__ import annotations

import argparse
import io
import sys
import tokenize
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "nemo_cascade"
TOOLING = "tooling"
COLUMNS = 100
# Tokens that never make a line a code line on their own.
_NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
             tokenize.ENDMARKER, tokenize.ENCODING}


def _docstring_lines(tokens: list[tokenize.TokenInfo]) -> set[int]:
    """Rows of the string tokens that stand alone as a statement (docstrings and bare string
    statements)."""
    rows: set[int] = set()
    statement_start = True
    for token in tokens:
        if token.type == tokenize.STRING and statement_start:
            rows.update(range(token.start[0], token.end[0] + 1))
        if token.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            statement_start = True
        elif token.type not in (tokenize.NL, tokenize.COMMENT, tokenize.STRING):
            statement_start = False
    return rows


def code_lines(source: str) -> int:
    """The number of lines of ``source`` that hold a code token (not a comment, docstring or
    blank)."""
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    docstrings = _docstring_lines(tokens)
    rows: set[int] = set()
    for token in tokens:
        if token.type in _NOT_CODE:
            continue
        span = range(token.start[0], token.end[0] + 1)
        rows.update(row for row in span if row not in docstrings)
    return len(rows)


def physical_lines(source: str) -> int:
    return len(source.splitlines())


def long_lines(source: str) -> list[int]:
    """The line numbers of ``source``'s lines over :data:`COLUMNS` characters."""
    return [n for n, line in enumerate(source.splitlines(), 1) if len(line) > COLUMNS]


def lines_over_limit(root: Path = ROOT) -> list[str]:
    """``path:line`` of every line over :data:`COLUMNS` in the .py files of the package, tests,
    tools, bench and recipes."""
    found = []
    for folder in ("nemo_cascade", "tests", "tools", "bench", "recipes"):
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root)
            found += [f"{rel}:{n}" for n in long_lines(path.read_text(encoding="utf-8"))]
    return found


def _group(path: Path) -> str:
    """A file's reporting group: its top-level package (``rewards``) or its module
    (``cascade/stage.py``)."""
    return path.relative_to(PACKAGE).parts[0]


def measure(package: Path = PACKAGE) -> dict[str, dict[str, tuple[int, int]]]:
    """``{group: {relative file: (physical lines, code lines)}}`` for every .py file under
    ``package``."""
    groups: dict[str, dict[str, tuple[int, int]]] = defaultdict(dict)
    for path in sorted(package.rglob("*.py")):
        rel, source = str(path.relative_to(package)), path.read_text(encoding="utf-8")
        groups[_group(path)][rel] = (physical_lines(source), code_lines(source))
    return groups


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", action="store_true", help="one line per file as well")
    parser.add_argument("--long-lines", action="store_true",
                        help=f"list the lines over {COLUMNS} columns")
    args = parser.parse_args(argv)
    if args.long_lines:
        found = lines_over_limit()
        print("\n".join(found) or f"no line over {COLUMNS} columns")
        return 1 if found else 0
    groups = measure()
    core = [0, 0]
    print(f"{'':28s} {'physical':>8s} {'code':>6s}")
    for name in sorted(groups, key=lambda group: (group == TOOLING, group)):
        files = groups[name]
        physical, code = (sum(lines[i] for lines in files.values()) for i in (0, 1))
        if name != TOOLING:
            core = [core[0] + physical, core[1] + code]
        print(f"{name:28s} {physical:8d} {code:6d}")
        if args.files and len(files) > 1:
            for rel, (physical, code) in files.items():
                print(f"  {rel:40s} {physical:6d} {code:6d}")
    print(f"{'core total (minus tooling)':28s} {core[0]:8d} {core[1]:6d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
