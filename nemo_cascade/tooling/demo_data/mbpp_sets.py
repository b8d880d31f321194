"""MBPP-derived prompt sets for CPU-scale code and SWE stages.

Two generators with the ``fn(split, size, seed) -> rows`` signature of :mod:`.synthetic_domains`,
addressed as ``synthetic:mbpp_code`` and ``synthetic:mbpp_bugfix``; rows carry ``uid``, ``prompt``,
the domain's ``label`` (docs/rewards.md) and a ``response`` that earns full reward, so one set
serves SFT and RL:

- ``mbpp_code`` (``code``, §4.6): the task text and its asserts, phrased as the MBPP eval suite
  phrases them (``data.mbpp_tasks.mbpp_task``, shared with ``evaluate.suites.load_mbpp``); the label
  runs setup code + asserts in the sandbox; the response is the reference solution in a ````
  ```python ```` block.
- ``mbpp_bugfix`` (``swe``, §4.7): ``solution.py`` holds the reference solution with one injected
  bug, the problem statement is the task text plus the assert that now fails, the golden patch is
  the unified diff back to the reference, and the response is the Agentless SEARCH/REPLACE edit that
  applies it.

Bug injection (:func:`bugfix_row`): every single-token mutation of the reference — a flipped
comparison (``<`` ↔ ``<=``, ``==`` ↔ ``!=``, ...), a changed arithmetic operator, ``and`` ↔ ``or``,
``min`` ↔ ``max``, an integer literal or a ``range`` bound off by one — is a candidate; the
candidates are ordered by a hash of the task and the first one that compiles and makes an assert
fail (not hang) in the sandbox is kept, so the set holds only real bugs. That costs sandbox runs, so
the rows are computed once by ``tools/make_mbpp_bugfix.py`` into the committed
``data/mbpp_bugfix/bugfix.jsonl.gz`` and a unit test checks that a sample regenerates identically.

Splits: a task is held out (``test``) iff a hash of its ``task_id`` falls in the lowest 15 %, the
same for both sets, so a task held out of one is never trained on through the other; size and seed
never move a task between splits, the seed only orders. The rows come from MBPP's *test* file (the
``mbpp`` eval suite's data): a run that trains on these sets should read that suite's score as
in-distribution.
"""
from __future__ import annotations

import ast
import hashlib
import io
import random
import tokenize
from pathlib import Path
from typing import Optional

from nemo_cascade.data.mbpp_tasks import clean_source, mbpp_row, read_rows
from nemo_cascade.rewards.sandbox import Limits, run_python
from nemo_cascade.rewards.swe.diffs import render_unified_diff

ROOT = Path(__file__).resolve().parents[3]
MBPP_FILE = ROOT / "data" / "mbpp" / "test.jsonl.gz"
BUGFIX_FILE = ROOT / "data" / "mbpp_bugfix" / "bugfix.jsonl.gz"
TEST_PERCENT = 15
BUGGY_FILE_NAME = "solution.py"
MAX_CANDIDATES = 8
"""Mutants tried per task before it is left out of the bug-fix set (each try is a sandbox run)."""


# ------------------------------------------------------------------------------------------ splits

def split_of(task_id) -> str:
    digest = hashlib.sha256(f"mbpp:{task_id}".encode()).digest()
    return "test" if int.from_bytes(digest[:4], "big") % 100 < TEST_PERCENT else "train"


def _sample(name: str, rows, split: str, size: int, seed: int) -> list[dict]:
    if split not in ("train", "test"):
        raise ValueError(f"{name}: split must be 'train' or 'test', got {split!r}")
    pool = [r for r in rows if split_of(r["task_id"]) == split]
    if size > len(pool):
        raise ValueError(f"{name}: size {size} exceeds the {len(pool)} {split} tasks")
    return random.Random(seed).sample(pool, size if size > 0 else len(pool))


# --------------------------------------------------------------------------------------- generators

def mbpp_code(split: str, size: int, seed: int) -> list[dict]:
    """MBPP tasks as function-call code prompts; the response is the reference solution."""
    return [mbpp_row(task, f"mbpp_code/{task['task_id']}")
            for task in _sample("mbpp_code", read_rows(MBPP_FILE), split, size, seed)]


def mbpp_bugfix(split: str, size: int, seed: int) -> list[dict]:
    """MBPP solutions with one injected bug each (precomputed, see the module docstring), as SWE
    repair prompts; the response is the SEARCH/REPLACE edit that restores the reference."""
    return [dict(row) for row in _sample("mbpp_bugfix", read_rows(BUGFIX_FILE), split, size, seed)]


# ------------------------------------------------------------------------------------ bug injection

_SWAPS = {
    "<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "+": "-", "-": "+",
    "*": "+", "**": "*", "//": "/", "/": "//", "%": "//", "+=": "-=", "-=": "+=", "&": "|",
    "|": "&", "^": "&", "<<": ">>", ">>": "<<", "and": "or", "or": "and", "not": "", "in": "not in",
    "break": "continue", "True": "False", "False": "True", "min": "max", "max": "min", "any": "all",
    "all": "any", "upper": "lower", "lower": "upper", "isupper": "islower", "islower": "isupper",
    "startswith": "endswith", "endswith": "startswith", "nlargest": "nsmallest",
    "nsmallest": "nlargest"}
"""Token → its mutant: the slips a programmer makes (a bound, an operator, a connective, a negation,
a constant, the twin of a builtin or method). A mutant that does not compile (``*args`` → ``+args``,
``for x not in``) is skipped."""


def _pick(key: str, n: int) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") % n


def _splice(source: str, line: int, start: int, end: int, text: str) -> str:
    """``source`` with characters ``start:end`` of 1-based ``line`` replaced by ``text``."""
    lines = source.split("\n")
    lines[line - 1] = lines[line - 1][:start] + text + lines[line - 1][end:]
    return "\n".join(lines)


def mutants(source: str, key: str) -> list[tuple[str, str]]:
    """``(description, mutated source)`` for every single-line mutation of ``source`` that compiles,
    ordered by a hash of ``key`` and the mutation (so which bug a task gets is fixed by the task,
    not by the order of its code)."""
    out = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
        tree = ast.parse(source)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    for tok in tokens:
        (row, col), (_, end) = tok.start, tok.end
        if tok.type in (tokenize.OP, tokenize.NAME) and tok.string in _SWAPS:
            new = _SWAPS[tok.string]
            # a dropped `not ` leaves no double space behind
            if not new and tok.line[end:end + 1] == " ":
                end += 1
        elif tok.type == tokenize.NUMBER and tok.string.isdigit():
            value = int(tok.string)  # 0 has only one neighbour that keeps the literal well-formed
            new = str(value + 1 if value == 0 or _pick(f"{key}:{row}:{col}", 2) else value - 1)
        else:
            continue
        out.append((f"line {row} col {col}: `{tok.string}` -> `{new}`",
                    _splice(source, row, col, end, new)))
    lines = source.split("\n")
    for node in ast.walk(tree):  # a loop bound that is an expression: one iteration more or less
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "range" and node.args and not node.keywords):
            continue
        stop = node.args[1] if len(node.args) > 1 else node.args[0]
        if isinstance(stop, (ast.Name, ast.Call, ast.Attribute, ast.Subscript, ast.BinOp)) and \
                stop.lineno == stop.end_lineno:
            # AST offsets are bytes
            end = len(lines[stop.lineno - 1].encode()[:stop.end_col_offset].decode())
            delta = " + 1" if _pick(f"{key}:range:{stop.lineno}:{end}", 2) else " - 1"
            out.append((f"line {stop.lineno} col {end}: range bound{delta}",
                        _splice(source, stop.lineno, end, end, delta)))
    valid = [m for m in out if _compiles(m[1])]
    return sorted(valid, key=lambda m: hashlib.sha256(f"{key}|{m[0]}".encode()).hexdigest())


def _compiles(source: str) -> bool:
    try:
        compile(source, BUGGY_FILE_NAME, "exec")
        return True
    except (SyntaxError, ValueError):
        return False


_RUNNER = '''\
import sys
_ns = {"__name__": "__solution__"}
exec(compile(%(program)r, "solution.py", "exec"), _ns)
exec(compile(%(setup)r, "setup.py", "exec"), _ns)
for _i, _test in enumerate(%(tests)r):
    try:
        exec(compile(_test, "test.py", "exec"), _ns)
    except BaseException as _e:
        print("\\n%(marker)s", _i, type(_e).__name__)
        sys.exit(0)
print("\\n%(marker)s pass")
'''
"""Runs the asserts one by one and reports the first that fails and how, so the issue can quote
it."""
_MARKER = "@@mbpp-tests@@"


def first_failure(program: str, task: dict) -> Optional[tuple[int, str]]:
    """``(index, exception name)`` of the first of ``task``'s asserts that fails against ``program``
    in the sandbox; None if all pass. RuntimeError if the run produced no verdict (timeout, crash on
    import)."""
    runner = _RUNNER % {"program": program, "setup": task.get("test_setup_code") or "",
                        "tests": list(task["test_list"]), "marker": _MARKER}
    result = run_python(runner, "", Limits(cpu_s=2.0, wall_s=15.0))
    lines = [line for line in result.stdout.splitlines() if line.startswith(_MARKER)]
    if not result.ok or not lines:
        raise RuntimeError(f"no verdict (exit {result.returncode}, killed={result.killed})")
    verdict = lines[-1].split()[1:]
    return None if verdict == ["pass"] else (int(verdict[0]), verdict[1])


def _search_block(buggy: list[str], fixed: list[str], line: int) -> tuple[str, str]:
    """SEARCH/REPLACE texts around the changed 0-based ``line``, grown by context lines until the
    SEARCH occurs exactly once in the buggy file (the reward rejects an ambiguous SEARCH)."""
    stripped = [s.rstrip() for s in buggy]
    lo, hi, up = line, line + 1, True
    while True:
        window = stripped[lo:hi]
        hits = sum(stripped[i:i + len(window)] == window
                   for i in range(len(stripped) - len(window) + 1))
        if hits == 1 or (lo == 0 and hi == len(buggy)):
            return "\n".join(buggy[lo:hi]), "\n".join(fixed[lo:hi])
        if (up and lo > 0) or hi == len(buggy):  # alternate: a line above, a line below
            lo -= 1
        else:
            hi += 1
        up = not up


def bugfix_row(task: dict) -> Optional[dict]:
    """The bug-fix row of an MBPP task, or None when its reference fails its own asserts or none of
    the first :data:`MAX_CANDIDATES` mutants makes an assert fail reliably."""
    fixed = clean_source(task["code"])
    try:
        if first_failure(fixed, task) is not None:
            return None
    except RuntimeError:
        return None
    for description, buggy in mutants(fixed, f"mbpp:{task['task_id']}")[:MAX_CANDIDATES]:
        try:
            failure = first_failure(buggy, task)
            # Twice: a verdict that depends on hash seeds or timing would make a flaky task.
            if failure is None or first_failure(buggy, task) != failure:
                continue
        except RuntimeError:  # hangs or breaks on import: not the kind of bug an assert can report
            continue
        return _row(task, buggy, fixed, description, failure, render_unified_diff)
    return None


def _row(task: dict, buggy: str, fixed: str, description: str, failure: tuple[int, str],
         render) -> dict:
    index, error = failure
    how = "fails" if error == "AssertionError" else f"raises {error}"
    statement = (
        f"{task['text']}\n\nThe function in {BUGGY_FILE_NAME} has a bug: this test {how}:\n"
        f"{task['test_list'][index]}")
    buggy_lines, fixed_lines = buggy.rstrip("\n").split("\n"), fixed.rstrip("\n").split("\n")
    changed = next(i for i, (a, b) in enumerate(zip(buggy_lines, fixed_lines)) if a != b)
    search, replace = _search_block(buggy_lines, fixed_lines, changed)
    prompt = (f"Issue: {statement}\n\n{BUGGY_FILE_NAME}:\n```python\n{buggy}```\n"
              f"Fix the issue with a SEARCH/REPLACE edit of {BUGGY_FILE_NAME}.")
    label = {"golden_patch": render({BUGGY_FILE_NAME: buggy}, {BUGGY_FILE_NAME: fixed}),
             "files": {BUGGY_FILE_NAME: buggy}, "problem_statement": statement}
    response = (f"### {BUGGY_FILE_NAME}\n<<<<<<< "
                f"SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE")
    return {
        "uid": f"mbpp_bugfix/{task['task_id']}", "task_id": task["task_id"],
        "mutation": description, "prompt": prompt, "label": label, "response": response}


def mbpp_tasks() -> tuple[dict, ...]:
    """The MBPP rows the sets derive from (``data/mbpp/test.jsonl.gz``)."""
    return read_rows(MBPP_FILE)


__all__ = [
    "mbpp_code", "mbpp_bugfix", "mbpp_tasks", "bugfix_row", "mutants", "first_failure", "split_of",
    "MBPP_FILE", "BUGFIX_FILE", "TEST_PERCENT", "BUGGY_FILE_NAME"]
