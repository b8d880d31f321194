"""The code verifier: 1.0 iff the answer's program passes every test of its label, else 0.0.

Paper §4.6 (Code RL): a binary pass-all reward; asynchronous verification cut the verification time
per batch from 1172.4 s to 416.2 s, hence :func:`reward_batch`, a thread pool sized to the cores
whose threads only wait on sandbox processes (:mod:`.sandbox`) that do the work.

The program is the **last complete fenced code block** of the answer whose info string is empty or
names Python (```` ```python ````, ```` ```py ````, ```` ```python3 ````, ```` ``` ````); blocks
tagged with another language (sample output, C++) are skipped, and a block whose closing fence is
missing (a truncated answer) does not count. Thinking responses: only the text after ``</think>`` is
read; no ``</think>`` scores 0.

Label shapes — stdin/stdout (TACO, APPS, Codeforces, LiveCodeBench), function call (HumanEval,
MBPP), call-based (TACO / APPS rows naming ``fn_name``) — and how each compares outputs are in
docs/rewards.md, "Code labels"; each takes an optional ``"time_limit"`` in seconds (default 5).

A program longer than ``MAX_PROGRAM_BYTES`` (1 MiB of UTF-8) scores 0 without running: judges cap
source size (Codeforces: 64 KB), and a 10 MB "program" would otherwise be copied into every test's
sandbox.
"""
from __future__ import annotations

import ast
import json
import math
import os
import re
import secrets
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

from ..config import Reward
from ..data.chat import split_thinking
from ..data.schemas import adapt_code
from .reward_domain import BatchVerdicts, RewardDomain, without_details
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
    has_tests, has_code, has_calls = "tests" in label, "test_code" in label, "call_tests" in label
    if has_tests + has_code + has_calls != 1:
        raise ValueError("code label: needs exactly one of 'tests' (stdin/stdout), 'test_code' "
                         "(function call) or 'call_tests' (call-based, fn_name), got keys "
                         f"{sorted(label)}")
    limit = label.get("time_limit", DEFAULT_TIME_LIMIT_S)
    if (isinstance(limit, bool) or not isinstance(limit, (int, float))
            or not 0 < limit <= MAX_TIME_LIMIT_S):
        raise ValueError(f"code label: time_limit must be a number in (0, {MAX_TIME_LIMIT_S:g}] "
                         f"seconds, got {limit!r}")
    if has_tests:
        tests = label["tests"]
        if not isinstance(tests, list) or not tests:
            raise ValueError("code label: 'tests' must be a non-empty list of {'input': str, "
                             "'output': str}")
        for i, test in enumerate(tests):
            if not (isinstance(test, dict) and isinstance(test.get("input"), str)
                    and isinstance(test.get("output"), str)):
                raise ValueError(f"code label: tests[{i}] must be {{'input': str, 'output': str}}, "
                                 f"got {test!r:.80}")
        return
    if has_calls:
        _validate_calls(label)
        return
    test_code, entry = label["test_code"], label.get("entry_point")
    if not isinstance(test_code, str) or not test_code.strip():
        raise ValueError("code label: 'test_code' must be a non-empty string")
    if not isinstance(entry, str) or not entry.isidentifier():
        raise ValueError(f"code label: 'entry_point' must be a Python identifier, got {entry!r}")
    try:
        ast.parse(test_code)
    except SyntaxError as e:
        raise ValueError(f"code label: test_code does not parse: {e.msg} (line "
                         f"{e.lineno})") from None


def extract_program(answer: str) -> Optional[str]:
    """The last complete Python (or untagged) fenced block of ``answer``, or None. One pass over the
    lines: an opening fence is a line starting with ```` ``` ```` (its info string is the language),
    the closing fence a line that is only ```` ``` ````."""
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
        if (not (math.isfinite(x) and math.isfinite(y))
                or abs(x - y) > FLOAT_TOLERANCE * max(1.0, abs(y))):
            return False
    return True


def _limits(time_limit: float, expected_bytes: int = 0) -> Limits:
    """CPU time = the problem's limit. The wall clock (2 x limit + 5 s) only catches programs that
    sleep or block; it is generous because start-up on a loaded machine is slow and a false timeout
    is a wrong reward. The output cap leaves room for twice the expected output, so a correct answer
    is never cut."""
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
"""Function-call runner. The token arrives on stdin, so it is not in any file the program could
read; an exception (traceback on stderr, exit 1) or an early exit(0) never prints it. __name__ is
not "__main__": the answer's own ``if __name__ == "__main__":`` demo does not run (as in HumanEval's
harness)."""


def _defines_check(test_code: str) -> bool:
    return any(isinstance(node, ast.FunctionDef)
               and node.name == "check" for node in ast.parse(test_code).body)


def _passes_call(program: str, label: dict, time_limit: float, unsafe: bool) -> bool:
    harness = _HARNESS % {"program": program, "tests": label["test_code"],
                          "call_check": _defines_check(label["test_code"]),
                          "entry": label["entry_point"]}
    return _prints_token(harness, time_limit, unsafe)


def _prints_token(harness: str, time_limit: float, unsafe: bool) -> bool:
    """Whether ``harness`` (``_HARNESS`` or ``_CALL_HARNESS``) ran to the end: only then it prints
    its stdin token."""
    token = secrets.token_hex(16)
    result: RunResult = run_python(harness, token + "\n", _limits(time_limit), unsafe=unsafe)
    return result.ok and result.stdout.rstrip("\n").endswith("\n" + token)


def _validate_calls(label: dict) -> None:
    tests, fn, cls = label["call_tests"], label.get("fn_name"), label.get("class_name")
    if not isinstance(fn, str) or not fn.isidentifier():
        raise ValueError(f"code label: 'fn_name' must be a Python identifier, got {fn!r:.80}")
    if cls is not None and not (isinstance(cls, str) and cls.isidentifier()):
        raise ValueError("code label: 'class_name' must be a Python identifier or null, got "
                         f"{cls!r:.80}")
    if not isinstance(label.get("wrapped_single", True), bool):
        raise ValueError("code label: 'wrapped_single' must be true or false, got "
                         f"{label['wrapped_single']!r:.40}")
    if not isinstance(tests, list) or not tests:
        raise ValueError("code label: 'call_tests' must be a non-empty list of {'args': list, "
                         "'output': value}")
    for i, test in enumerate(tests):
        if not (isinstance(test, dict) and isinstance(test.get("args"), list) and "output" in test):
            raise ValueError(f"code label: call_tests[{i}] must be {{'args': list, 'output': "
                             f"value}}, got {test!r:.80}")


_CALL_HARNESS = '''\
import json, math, os, sys
_token = sys.stdin.readline().strip()
_tests = json.loads(%(tests)r)
_type, _len, _isinstance, _zip = type, len, isinstance, zip
_float, _abs, _isfinite = float, abs, math.isfinite
_PLAIN = (int, float, str, bool, type(None), list, tuple, dict)
_TOL = %(tolerance)r
_UNWRAP = %(wrapped_single)r


def _plain(v):  # only JSON-like values: no object with its own __eq__
    t = _type(v)
    if t in (list, tuple):
        return all(_plain(x) for x in v)
    if t is dict:
        return all(_type(k) is str and _plain(x) for k, x in v.items())
    return t in _PLAIN


def _same(got, want):
    if _type(got) is tuple:
        got = list(got)
    if _type(got) is list and _type(want) is list:
        return _len(got) == _len(want) and all(_same(a, b) for a, b in _zip(got, want))
    if _type(got) is dict and _type(want) is dict:
        return got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want)
    if _type(got) is bool or _type(want) is bool:
        return _type(got) is _type(want) and got == want
    if _type(got) in (int, float) and _type(want) in (int, float):
        if _type(got) is int and _type(want) is int:
            return got == want
        return (_isfinite(got) and _isfinite(want)
                and _abs(_float(got) - _float(want)) <= _TOL * max(1.0, _abs(_float(want))))
    return _type(got) is _type(want) and got == want


_ns = {"__name__": "__solution__", "__builtins__": __builtins__}
exec(compile(%(program)r, "solution.py", "exec"), _ns)
_cls = %(class_name)r
_fn = getattr(_ns[_cls](), %(fn_name)r) if _cls else _ns[%(fn_name)r]
for _test in _tests:
    _got, _want = _fn(*_test["args"]), _test["output"]
    if not (_plain(_got) and (_same(_got, _want)
                              or (_UNWRAP and _type(_want) is list and _want
                                  and _same(_got, _want[0])))):
        os._exit(3)
sys.stdout.flush()
os.write(1, ("\\n" + _token + "\\n").encode())
os._exit(0)
'''
"""Call-based runner (TACO/APPS ``fn_name``): the comparison rule is the module docstring's. The
tests are decoded and the helpers bound before the program runs, so rebinding builtins or ``json``
changes nothing."""


def _passes_calls(program: str, label: dict, time_limit: float, unsafe: bool) -> bool:
    harness = _CALL_HARNESS % {"program": program, "tests": json.dumps(label["call_tests"]),
                               "fn_name": label["fn_name"], "class_name": label.get("class_name"),
                               "tolerance": FLOAT_TOLERANCE,
                               "wrapped_single": label.get("wrapped_single", True)}
    return _prints_token(harness, time_limit, unsafe)


def code_reward(response: str, label: Any, *, unsafe: bool = False) -> float:
    """REWARDS["code"]: 1.0 iff the answer's program passes all tests of ``label``, else 0.0.

    Never raises on model output. Raises ValueError for a malformed label and
    :class:`~.sandbox.SandboxUnavailable` when the sandbox cannot run (and ``unsafe`` is not set):
    both are setup errors that must stop a run rather than silently score every sample 0.
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
    if "call_tests" in label:
        return 1.0 if _passes_calls(program, label, time_limit, unsafe) else 0.0
    return 1.0 if _passes_call(program, label, time_limit, unsafe) else 0.0


def default_workers() -> int:
    """The cores this process may run on: each pool thread keeps one sandboxed program busy."""
    return len(os.sched_getaffinity(0))


def reward_batch(responses: list[str], labels: list, *, workers: Optional[int] = None,
                 unsafe: bool = False) -> list[float]:
    """Score ``responses[i]`` against ``labels[i]`` in parallel, in order. ``workers`` threads
    (default: the cores this process may use) each wait on one sandboxed run at a time. All labels
    are validated before any program runs, so a bad label fails fast."""
    if len(responses) != len(labels):
        raise ValueError(f"reward_batch: {len(responses)} responses for {len(labels)} labels")
    for i, label in enumerate(labels):
        try:
            validate_label(label)
        except ValueError as e:
            raise ValueError(f"labels[{i}]: {e}") from None
    with ThreadPoolExecutor(max_workers=workers or default_workers()) as pool:
        return list(pool.map(lambda pair: code_reward(*pair, unsafe=unsafe),
                             zip(responses, labels)))


def batch_verdicts(settings: Reward) -> BatchVerdicts:
    """The stage's sandboxed runs (``Reward.workers`` in flight; ``sandbox="unsafe"`` runs
    unsandboxed)."""
    return without_details(lambda responses, labels: reward_batch(
        responses, labels, workers=settings.workers or None, unsafe=settings.sandbox == "unsafe"))


DOMAIN = RewardDomain("code", adapt_code, validate_label, batch_verdicts, reward=code_reward,
                      code_switch_penalty=0.0,  # §4.6 / T19: 0, because −1 hurt
                      sandbox=True)
"""The code domain (§4.6): the answer's last Python block against the row's tests, sandboxed."""


__all__ = ["DOMAIN", "batch_verdicts", "code_reward", "reward_batch", "default_workers",
           "validate_label",
           "extract_program", "outputs_match", "DEFAULT_TIME_LIMIT_S", "FLOAT_TOLERANCE",
           "MAX_PROGRAM_BYTES"]
