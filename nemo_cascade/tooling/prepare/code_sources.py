"""Code-RL problems from the public sets the paper names (§4.6.1: the AceReason code corpus — TACO,
APPS, DeepCoder, ...), since the 9.8K-problem set itself was not released.

Rows become the code shape the loader reads (``data/schemas.py``): ``question`` (the statement and
the code suites' request for a fenced program, ``data.mbpp_tasks.CODE_INSTRUCTION``),
``input_output`` ``{"inputs", "outputs"}`` (stdin → stdout), optional ``time_limit`` seconds,
``source``. Read from:

- ``BAAI/TACO`` and ``codeparrot/apps``: ``question``, ``input_output`` (a JSON string),
  ``starter_code``, TACO's ``time_limit`` ("2 seconds");
- ``agentica-org/DeepCoder-Preview-Dataset`` (``primeintellect``, ``taco``): ``problem`` and
  ``tests`` (a JSON list of ``{"input", "output", "type"|"testtype"}`` or a TACO-style object). Its
  ``lcbv5`` and ``codeforces`` parts are left out: they are LiveCodeBench and Codeforces problems,
  the benchmarks the paper reports code on, which the project does not ship and so cannot
  decontaminate against.

Call-based problems (tests naming ``fn_name``: LeetCode-style, the function is called with each
input) are kept with ``fn_name`` in ``input_output`` and the starter code in the question; the
manifest counts them (``call_based``). §4.6.1's filters that need no model are applied: interactive
problems are dropped (``interactive``), and so are problems without tests (``no_tests``). Its
difficulty filter (problems 8/8 solved by AceReason-Nemotron-7B or 0/8 by R1-0528) needs those
models' samples: :mod:`.difficulty` applies it from their recorded pass rates. A problem that is
also an SFT prompt (TACO and APPS are SFT code sources, §3.3) is left out by :mod:`.disjoint`, which
compares its :func:`statement`.
"""
from __future__ import annotations

import json
import re
from typing import Any

from nemo_cascade.data.mbpp_tasks import CODE_INSTRUCTION
from nemo_cascade.data.schemas import SchemaError
from nemo_cascade.rewards.code import MAX_TIME_LIMIT_S
from nemo_cascade.tooling.prepare.sources import Drop

_INTERACTIVE = re.compile(r"\binteractive (problem|task)\b|\binteraction protocol\b", re.I)
_SECONDS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|secs|second|seconds)?\s*$", re.I)
_STARTER = "\n\nUse this starter code:\n```python\n"
_REQUEST = f"\n\n{CODE_INSTRUCTION}"


def _json(value: Any, name: str, where: str) -> Any:
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            return json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            raise SchemaError(f"{where}: field {name!r} is a string but not JSON") from None
    return value


def _io_text(value: Any) -> str:
    """TACO/APPS inputs and outputs are strings or lists of lines (as the loader reads them)."""
    return "\n".join(map(str, value)) + "\n" if isinstance(value, list) else str(value)


def _tests(row: dict, where: str) -> tuple[list, list, Any]:
    """``(inputs, outputs, fn_name or None)`` of a row's tests."""
    if "input_output" in row:
        io = _json(row["input_output"], "input_output", where)
    else:
        io = _json(row.get("tests"), "tests", where)
    if io is None:
        return [], [], None
    if isinstance(io, dict):
        inputs, outputs = io.get("inputs"), io.get("outputs")
        if (not isinstance(inputs, list) or not isinstance(outputs, list)
                or len(inputs) != len(outputs)):
            raise SchemaError(f"{where}: tests must hold equally long 'inputs' and 'outputs' lists")
        return inputs, outputs, io.get("fn_name")
    if isinstance(io, list):
        inputs, outputs, fn_name = [], [], None
        for i, test in enumerate(io):
            if not isinstance(test, dict) or "input" not in test or "output" not in test:
                raise SchemaError(
                    f"{where}: tests[{i}] must be an object with 'input' and 'output'")
            kind = test.get("type", test.get("testtype", "stdin"))
            # functional: a call of the solution's function
            if kind not in ("stdin", "stdin_stdout"):
                fn_name = (test.get("fn_name") or (row.get("metadata") or {}).get("func_name")
                           or fn_name)
                if not fn_name:
                    raise SchemaError(
                        f"{where}: tests[{i}] is a function-call test but names no fn_name")
            inputs.append(test["input"])
            outputs.append(test["output"])
        return inputs, outputs, fn_name
    raise SchemaError(f"{where}: tests must be a list of {{input, output}} or {{inputs, outputs}}")


def _time_limit(value: Any):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and _SECONDS.match(value):
        seconds = float(_SECONDS.match(value).group(1))
    else:
        return None
    return seconds if 0 < seconds <= MAX_TIME_LIMIT_S else None


def code_row(dataset: str):
    """Converter of one code source's rows."""
    def convert(row: dict, where: str):
        question = row.get("question", row.get("problem"))
        if not isinstance(question, str) or not question.strip():
            raise SchemaError(f"{where}: expected field 'question' or 'problem' (the statement)")
        if _INTERACTIVE.search(question):
            return Drop("interactive")
        inputs, outputs, fn_name = _tests(row, where)
        if not inputs:
            return Drop("no_tests")
        io: dict = {"inputs": inputs, "outputs": outputs}
        starter = row.get("starter_code")
        text = question.strip()
        if fn_name:
            if not isinstance(fn_name, str) or not fn_name.isidentifier():
                raise SchemaError(
                    f"{where}: fn_name must be a Python identifier, got {fn_name!r:.40}")
            io["fn_name"] = fn_name
            if isinstance(starter, str) and starter.strip():
                text += f"{_STARTER}{starter.rstrip()}\n```"
        else:
            io = {"inputs": [_io_text(i) for i in inputs],
                  "outputs": [_io_text(o) for o in outputs]}
        out = {"question": f"{text}{_REQUEST}", "input_output": io, "source": dataset}
        limit = _time_limit(row.get("time_limit"))
        if limit is not None:
            out["time_limit"] = limit
        return out
    return convert


def statement(question: str) -> str:
    """The problem statement of a converted row's ``question``, without the starter code and the
    request for a fenced program :func:`code_row` adds (what the source and an SFT set share)."""
    text = question.removesuffix(_REQUEST)
    at = text.rfind(_STARTER)
    return text[:at] if at >= 0 and text.endswith("\n```") else text


def is_call_based(row: dict) -> bool:
    """Whether a converted code row's tests call a function (the loader's support for these is
    separate)."""
    return isinstance(row.get("input_output"), dict) and "fn_name" in row["input_output"]


def check_call_based(row: dict, where: str) -> None:
    """The shape check of a call-based row (the loader's adapter refuses ``fn_name`` for now)."""
    io = row["input_output"]
    if (not io["inputs"] or len(io["inputs"]) != len(io["outputs"])
            or not str(io["fn_name"]).isidentifier()):
        raise SchemaError(f"{where}: call-based 'input_output' needs equally long non-empty "
                          "'inputs'/'outputs' and an identifier 'fn_name'")


__all__ = ["code_row", "statement", "is_call_based", "check_call_based"]
