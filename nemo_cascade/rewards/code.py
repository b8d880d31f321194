"""The code verifier: 1.0 iff the answer's program passes every test of its label, else 0.0.

Paper §4.6 (Code RL): a binary pass-all reward; asynchronous verification cut the verification time per
batch from 1172.4 s to 416.2 s, hence :func:`reward_batch`, a thread pool sized to the cores whose threads
only wait on sandbox processes (:mod:`.sandbox`) that do the work.

The program is the **last complete fenced code block** of the answer whose info string is empty or names
Python (```` ```python ````, ```` ```py ````, ```` ```python3 ````, ```` ``` ````); blocks tagged with another
language (sample output, C++) are skipped, and a block whose closing fence is missing (a truncated answer)
does not count. Thinking responses: only the text after ``</think>`` is read; no ``</think>`` scores 0.

Label shapes (DESIGN.md "Rewards"), both with an optional ``"time_limit"`` in seconds (default 5):

- stdin/stdout (TACO / APPS / Codeforces / LiveCodeBench): ``{"tests": [{"input": str, "output": str}]}``.
  Each test is one run with ``input`` on stdin, stopping at the first failure. ``time_limit`` is the CPU
  time per test. Output comparison (:func:`outputs_match`): both sides are split on whitespace (so line
  breaks, trailing spaces and blank lines never matter) and must have the same number of tokens; two tokens
  match if they are equal strings, or if both are decimal numbers and at least one has a fraction or
  exponent, within ``|a - b| <= 1e-6 * max(1, |b|)`` (1e-6 absolute below 1, relative above).
  Two integers must be equal strings: ``10**18 + 1`` never "matches" ``10**18`` through float rounding.
- function call (HumanEval / MBPP): ``{"test_code": str, "entry_point": str}``. One run executes the
  program, then ``test_code``, then — if ``test_code`` defines a top-level ``check`` — ``check(entry_point)``
  (HumanEval); otherwise ``test_code`` is a list of asserts (MBPP). ``time_limit`` bounds the whole run.
  Passing means finishing normally and printing a random token the program never sees in its source, so a
  program that calls ``exit(0)`` before the tests run scores 0.

A program longer than ``MAX_PROGRAM_BYTES`` (1 MiB of UTF-8) scores 0 without running: judges cap source
size (Codeforces: 64 KB), and a 10 MB "program" would otherwise be copied into every test's sandbox.
"""
from __future__ import annotations

import ast
import math
import os
import re
import secrets
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

from ..data.chat import split_thinking
from .sandbox import Limits, RunResult, run_python

DEFAULT_TIME_LIMIT_S = 5.0
MAX_TIME_LIMIT_S = 60.0
FLOAT_TOLERANCE = 1e-6
MAX_PROGRAM_BYTES = 1 << 20
_PYTHON_TAGS = {"", "python", "py", "python3", "py3"}
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")
_MAX_NUMBER_CHARS = 64
"""Longer numeric tokens are compared as strings (no float() of a 10^6-digit string)."""


def validate_label(label: Any) -> None:
    """Raise ValueError (one line) unless ``label`` is a well-formed code label."""
    if not isinstance(label, dict):
        raise ValueError(f"code label: expected a dict, got {type(label).__name__}")
    has_tests, has_code = "tests" in label, "test_code" in label
    if has_tests == has_code:
        raise ValueError("code label: needs exactly one of 'tests' (stdin/stdout) or 'test_code' "
                         f"(function call), got keys {sorted(label)}")
    limit = label.get("time_limit", DEFAULT_TIME_LIMIT_S)
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not 0 < limit <= MAX_TIME_LIMIT_S:
        raise ValueError(f"code label: time_limit must be a number in (0, {MAX_TIME_LIMIT_S:g}] seconds, "
                         f"got {limit!r}")
    if has_tests:
        tests = label["tests"]
        if not isinstance(tests, list) or not tests:
            raise ValueError("code label: 'tests' must be a non-empty list of {'input': str, 'output': str}")
        for i, test in enumerate(tests):
            if not (isinstance(test, dict) and isinstance(test.get("input"), str)
                    and isinstance(test.get("output"), str)):
                raise ValueError(f"code label: tests[{i}] must be {{'input': str, 'output': str}}, got {test!r:.80}")
        return
    test_code, entry = label["test_code"], label.get("entry_point")
    if not isinstance(test_code, str) or not test_code.strip():
        raise ValueError("code label: 'test_code' must be a non-empty string")
    if not isinstance(entry, str) or not entry.isidentifier():
        raise ValueError(f"code label: 'entry_point' must be a Python identifier, got {entry!r}")
    try:
        ast.parse(test_code)
    except SyntaxError as e:
        raise ValueError(f"code label: test_code does not parse: {e.msg} (line {e.lineno})") from None


def extract_program(answer: str) -> Optional[str]:
    """The last complete Python (or untagged) fenced block of ``answer``, or None. One pass over the
    lines: an opening fence is a line starting with ```` ``` ```` (its info string is the language), the
    closing fence a line that is only ```` ``` ````."""
    last, body, tag = None, None, ""
    for line in answer.split("\n"):
        stripped = line.strip()
        if body is None:
            if stripped.startswith("```"):
                body, tag = [], stripped[3:].strip().lower()
        elif stripped == "```":
            if tag.split(" ")[0] in _PYTHON_TAGS:
                last = "\n".join(body) + "\n"
            body = None
        else:
            body.append(line)
    return last


def _number(token: str) -> Optional[float]:
    if len(token) > _MAX_NUMBER_CHARS or not _DECIMAL.fullmatch(token):
        return None
    return float(token)


def outputs_match(actual: str, expected: str) -> bool:
    """Token-wise comparison with float tolerance; the rule is in the module docstring."""
    got, want = actual.split(), expected.split()
    if len(got) != len(want):
        return False
    for a, b in zip(got, want):
        if a == b:
            continue
        x, y = _number(a), _number(b)
        if x is None or y is None or (_INTEGER.fullmatch(a) and _INTEGER.fullmatch(b)):
            return False
        if not (math.isfinite(x) and math.isfinite(y)) or abs(x - y) > FLOAT_TOLERANCE * max(1.0, abs(y)):
            return False
    return True


def _limits(time_limit: float, expected_bytes: int = 0) -> Limits:
    """CPU time = the problem's limit. The wall clock (2 x limit + 5 s) only catches programs that sleep or
    block; it is generous because start-up on a loaded machine is slow and a false timeout is a wrong reward.
    The output cap leaves room for twice the expected output, so a correct answer is never cut."""
    return Limits(cpu_s=time_limit, wall_s=2.0 * time_limit + 5.0,
                  output_bytes=max(Limits.output_bytes, 2 * expected_bytes + 4096))


def _passes_stdio(program: str, tests: list[dict], time_limit: float, unsafe: bool) -> bool:
    for test in tests:  # stop at the first failure: the reward is pass-all (§4.6)
        limits = _limits(time_limit, len(test["output"].encode("utf-8", "surrogatepass")))
        result = run_python(program, test["input"], limits, unsafe=unsafe)
        if not (result.ok and outputs_match(result.stdout, test["output"])):
            return False
    return True


_HARNESS = '''\
import os, sys
_token = sys.stdin.readline().strip()
_ns = {"__name__": "__solution__", "__builtins__": __builtins__}
exec(compile(%(program)r, "solution.py", "exec"), _ns)
exec(compile(%(tests)r, "tests.py", "exec"), _ns)
if %(call_check)r:
    _ns["check"](_ns[%(entry)r])
sys.stdout.flush()
os.write(1, ("\\n" + _token + "\\n").encode())
os._exit(0)
'''
"""Function-call runner. The token arrives on stdin, so it is not in any file the program could read; an
exception (traceback on stderr, exit 1) or an early exit(0) never prints it. __name__ is not "__main__":
the answer's own ``if __name__ == "__main__":`` demo does not run (as in HumanEval's harness)."""


def _defines_check(test_code: str) -> bool:
    return any(isinstance(node, ast.FunctionDef) and node.name == "check" for node in ast.parse(test_code).body)


def _passes_call(program: str, label: dict, time_limit: float, unsafe: bool) -> bool:
    token = secrets.token_hex(16)
    harness = _HARNESS % {"program": program, "tests": label["test_code"],
                          "call_check": _defines_check(label["test_code"]), "entry": label["entry_point"]}
    result: RunResult = run_python(harness, token + "\n", _limits(time_limit), unsafe=unsafe)
    return result.ok and result.stdout.rstrip("\n").endswith("\n" + token)


def code_reward(response: str, label: Any, *, unsafe: bool = False) -> float:
    """REWARDS["code"]: 1.0 iff the answer's program passes all tests of ``label``, else 0.0.

    Never raises on model output. Raises ValueError for a malformed label and
    :class:`~.sandbox.SandboxUnavailable` when the sandbox cannot run (and ``unsafe`` is not set): both are
    setup errors that must stop a run rather than silently score every sample 0.
    """
    validate_label(label)
    if not isinstance(response, str):
        return 0.0
    _, answer, terminated = split_thinking(response)
    program = extract_program(answer) if terminated else None
    if program is None or len(program.encode("utf-8", "surrogatepass")) > MAX_PROGRAM_BYTES:
        return 0.0
    time_limit = float(label.get("time_limit", DEFAULT_TIME_LIMIT_S))
    if "tests" in label:
        return 1.0 if _passes_stdio(program, label["tests"], time_limit, unsafe) else 0.0
    return 1.0 if _passes_call(program, label, time_limit, unsafe) else 0.0


def default_workers() -> int:
    """The cores this process may run on: each pool thread keeps one sandboxed program busy."""
    return len(os.sched_getaffinity(0))


def reward_batch(responses: list[str], labels: list, *, workers: Optional[int] = None,
                 unsafe: bool = False) -> list[float]:
    """Score ``responses[i]`` against ``labels[i]`` in parallel, in order. ``workers`` threads (default:
    the cores this process may use) each wait on one sandboxed run at a time. All labels are validated
    before any program runs, so a bad label fails fast."""
    if len(responses) != len(labels):
        raise ValueError(f"reward_batch: {len(responses)} responses for {len(labels)} labels")
    for i, label in enumerate(labels):
        try:
            validate_label(label)
        except ValueError as e:
            raise ValueError(f"labels[{i}]: {e}") from None
    with ThreadPoolExecutor(max_workers=workers or default_workers()) as pool:
        return list(pool.map(lambda pair: code_reward(*pair, unsafe=unsafe), zip(responses, labels)))


__all__ = ["code_reward", "reward_batch", "default_workers", "validate_label", "extract_program", "outputs_match",
           "DEFAULT_TIME_LIMIT_S", "FLOAT_TOLERANCE", "MAX_PROGRAM_BYTES"]
