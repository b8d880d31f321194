"""Code lines of the training core (nemo_cascade/ minus tooling/) and of the tooling.

A code line is a line holding at least one code token: blank lines, comments and docstrings do not count. The
core's budget is 12K code lines (docs/architecture.md, "Layout", for what is core and what is tooling).

    python tools/code_lines.py            # per core package / top-level module, the tooling, the core total
    python tools/code_lines.py --files    # one line per file as well
"""

from __future__ import annotations

import argparse
import io
import sys
import tokenize
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "nemo_cascade"
TOOLING = "tooling"
# Tokens that never make a line a code line on their own.
_NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
             tokenize.ENDMARKER, tokenize.ENCODING}


def _docstring_lines(tokens: list[tokenize.TokenInfo]) -> set[int]:
    """Rows of the string tokens that stand alone as a statement (docstrings and bare string statements)."""
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
    """The number of lines of ``source`` that hold a code token (not a comment, docstring or blank)."""
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    docstrings = _docstring_lines(tokens)
    rows: set[int] = set()
    for token in tokens:
        if token.type in _NOT_CODE:
            continue
        span = range(token.start[0], token.end[0] + 1)
        rows.update(row for row in span if row not in docstrings)
    return len(rows)


def _group(path: Path) -> str:
    """A file's reporting group: its top-level package (``rewards``) or its module (``stage.py``)."""
    return path.relative_to(PACKAGE).parts[0]


def measure(package: Path = PACKAGE) -> dict[str, dict[str, int]]:
    """``{group: {relative file: code lines}}`` for every .py file under ``package``."""
    groups: dict[str, dict[str, int]] = defaultdict(dict)
    for path in sorted(package.rglob("*.py")):
        rel = str(path.relative_to(package))
        groups[_group(path)][rel] = code_lines(path.read_text(encoding="utf-8"))
    return groups


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", action="store_true", help="one line per file as well")
    args = parser.parse_args(argv)
    groups = measure()
    core_total = 0
    for name in sorted(groups, key=lambda group: (group == TOOLING, group)):
        files = groups[name]
        total = sum(files.values())
        if name != TOOLING:
            core_total += total
        print(f"{name:28s} {total:6d}")
        if args.files and len(files) > 1:
            for rel, count in files.items():
                print(f"  {rel:40s} {count:6d}")
    print(f"{'core total (minus tooling)':28s} {core_total:6d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
