"""Row schemas of the released Nemotron-Cascade datasets (and the common public ones), mapped to the project's
prompt + label contract (DESIGN.md "Rewards": one label shape per domain).

``adapt(domain, row, where) -> (messages, label)`` reads one jsonl row of a domain's RL data:

- ``math`` — nvidia/Nemotron-Cascade-RL-Math: ``problem`` (or ``question`` / ``prompt`` / ``messages``) and
  ``answer`` (a string or number; the reference the math verifier compares with, §4.5). The problems are bare:
  the loader appends the request for a boxed answer (``Data.math_instruction``, :mod:`.math_prompt`).
- ``ifeval`` — instruction-following RL (IFEval / IFBench / IF-RLVR style): ``prompt`` (or ``messages``),
  ``instruction_id_list`` and ``kwargs``; the label is ``{"prompt", "instruction_id_list", "kwargs"}`` (§4.4).
- ``code`` — ``question`` / ``prompt`` / ``problem`` plus tests in one of: ``tests`` (``[{"input", "output"}]``),
  ``input_output`` (TACO / APPS: a JSON string or object ``{"inputs": [...], "outputs": [...]}``), or
  ``test_code`` + ``entry_point`` (HumanEval / MBPP style); optional ``time_limit`` seconds (§4.6).
- ``swe`` — nvidia/Nemotron-Cascade-RL-SWE: ``instance_id``, ``prompt`` (the Agentless repair prompt, or
  ``problem_statement``), ``golden_patch`` (or ``patch``) and ``relevant_file_contents`` (``{path: content}``
  or ``[{"file_path"/"path", "content"}]``); the label is ``{"golden_patch", "files", "problem_statement"}``
  (§4.7).
- ``rlhf`` — ``prompt`` or ``messages``; the label is the conversation the answer replies to (§4.3).

A row already in the project's own shape (``label`` present) passes through unchanged. A row that fits no
schema raises :class:`SchemaError` (one line naming ``where`` and the field expected); the loader counts and
reports such rows (``Data.max_bad_rows``) instead of failing on the first one when the user allows it.
"""
from __future__ import annotations

import builtins
import json
import math
import re
from typing import Any, Optional

PROMPT_KEYS = ("prompt", "question", "problem")


class SchemaError(ValueError):
    """A row that does not fit its domain's schema; the message names the row and the expected field."""


def _prompt_messages(row: dict, where: str, keys: tuple[str, ...] = PROMPT_KEYS) -> list[dict]:
    for key in keys:
        if key in row:
            value = row[key]
            if not isinstance(value, str) or not value.strip():
                raise SchemaError(f"{where}: field {key!r} must be a non-empty string")
            return [{"role": "user", "content": value}]
    msgs = row.get("messages")
    if msgs is None:
        raise SchemaError(f"{where}: expected one of {list(keys) + ['messages']}")
    if not isinstance(msgs, list) or not msgs:
        raise SchemaError(f"{where}: field 'messages' must be a non-empty list of {{role, content}} objects")
    for j, m in enumerate(msgs):
        if not (isinstance(m, dict) and m.get("role") in ("system", "user", "assistant")
                and isinstance(m.get("content"), str)):
            raise SchemaError(f"{where}: field 'messages[{j}]' must be an object with role system|user|assistant "
                              "and string content")
    if msgs[-1]["role"] == "assistant":
        raise SchemaError(f"{where}: field 'messages' must end with a user turn in an RL prompt set")
    return [{"role": m["role"], "content": m["content"]} for m in msgs]


def _math(row: dict, where: str) -> tuple[list[dict], Any]:
    if "answer" not in row:
        raise SchemaError(f"{where}: expected field 'answer' (the reference final answer)")
    answer = row["answer"]
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        raise SchemaError(f"{where}: field 'answer' must be a string or number, got {type(answer).__name__}")
    if isinstance(answer, float) and not math.isfinite(answer):  # a missing answer in a pandas-written file
        raise SchemaError(f"{where}: field 'answer' must be a finite number, got {answer}")
    return _prompt_messages(row, where), answer if isinstance(answer, str) else str(answer)


def _ifeval(row: dict, where: str) -> tuple[list[dict], Any]:
    for key in ("instruction_id_list", "kwargs"):
        if key not in row:
            raise SchemaError(f"{where}: expected field {key!r}")
    messages = _prompt_messages(row, where, ("prompt",))
    prompt = row.get("prompt") or messages[-1]["content"]
    # IFBench rows may carry null kwargs values: the checkers treat a missing kwarg as its default.
    kwargs = [{k: v for k, v in (kw or {}).items() if v is not None} if isinstance(kw, dict) else kw
              for kw in row["kwargs"]] if isinstance(row["kwargs"], list) else row["kwargs"]
    return messages, {"prompt": prompt, "instruction_id_list": row["instruction_id_list"], "kwargs": kwargs}


def _json_field(text: str, name: str, where: str) -> Any:
    """A field that holds JSON as a string (TACO's ``input_output``, SWE file lists), decoded."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaError(f"{where}: field {name!r} is a string but not JSON ({e.msg})") from None
    except (RecursionError, ValueError):  # nested too deeply; a number past Python's int-string limit
        raise SchemaError(f"{where}: field {name!r} is a string but not JSON that can be read") from None


def _code_tests(row: dict, where: str) -> dict:
    if "tests" in row:
        return {"tests": row["tests"]}
    if "input_output" in row:
        io = row["input_output"]
        if isinstance(io, str):
            io = _json_field(io, "input_output", where)
        if not (isinstance(io, dict) and isinstance(io.get("inputs"), list) and isinstance(io.get("outputs"), list)
                and len(io["inputs"]) == len(io["outputs"])):
            raise SchemaError(f"{where}: field 'input_output' must hold equally long 'inputs' and 'outputs' lists")
        if "fn_name" in io:
            raise SchemaError(f"{where}: call-based 'input_output' (fn_name) is not supported; use "
                              "'test_code' + 'entry_point'")
        return {"tests": [{"input": _text(i), "output": _text(o)} for i, o in zip(io["inputs"], io["outputs"])]}
    if "test_code" in row or "test_list" in row:
        code = row.get("test_code")
        if code is None:  # MBPP: a list of asserts (+ optional setup code)
            asserts, setup = row.get("test_list"), row.get("test_setup_code") or ""
            if not isinstance(asserts, list) or not all(isinstance(a, str) for a in asserts):
                raise SchemaError(f"{where}: field 'test_list' must be a list of strings (assert statements)")
            if not isinstance(setup, str):
                raise SchemaError(f"{where}: field 'test_setup_code' must be a string")
            code = "\n".join([setup] + asserts).strip() + "\n"
        if not isinstance(code, str):
            raise SchemaError(f"{where}: field 'test_code' must be a string, got {type(code).__name__}")
        solution = row.get("code")
        entry = row.get("entry_point") or _entry_point(solution if isinstance(solution, str) else None, code)
        return {"test_code": code, "entry_point": entry}
    raise SchemaError(f"{where}: expected tests as 'tests', 'input_output', or 'test_code' + 'entry_point'")


_DEF = re.compile(r"^def\s+([A-Za-z_]\w*)\s*\(", re.MULTILINE)
_CALL = re.compile(r"([A-Za-z_]\w*)\s*\(")
_BUILTIN_NAMES = set(dir(builtins)) | {"assert"}


def _entry_point(solution: Optional[str], test_code: str) -> Optional[str]:
    """MBPP rows name no entry point: the reference solution's function that the tests call, else the first
    name the tests call that is not a builtin."""
    called = set(_CALL.findall(test_code))
    for name in _DEF.findall(solution or ""):
        if name in called:
            return name
    return next((n for n in _CALL.findall(test_code) if n not in _BUILTIN_NAMES), None)


def _text(value: Any) -> str:
    """TACO/APPS inputs and outputs are strings or lists of lines."""
    return "\n".join(map(str, value)) + "\n" if isinstance(value, list) else str(value)


def _code(row: dict, where: str) -> tuple[list[dict], Any]:
    label = _code_tests(row, where)
    if "time_limit" in row and row["time_limit"] is not None:
        label["time_limit"] = row["time_limit"]
    return _prompt_messages(row, where, ("question", "prompt", "problem", "text")), label


def _swe_files(value: Any, where: str) -> dict[str, str]:
    if isinstance(value, str):
        value = _json_field(value, "relevant_file_contents", where)
    if isinstance(value, dict):
        files = value
    elif isinstance(value, list):
        files = {}
        for item in value:
            path = item.get("file_path", item.get("path")) if isinstance(item, dict) else None
            if not isinstance(path, str) or not isinstance(item.get("content"), str):
                raise SchemaError(f"{where}: 'relevant_file_contents' items must be {{file_path, content}}")
            files[path] = item["content"]
    else:
        raise SchemaError(f"{where}: field 'relevant_file_contents' must map paths to file contents")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise SchemaError(f"{where}: field 'relevant_file_contents' must map string paths to string contents")
    return files


def _swe(row: dict, where: str) -> tuple[list[dict], Any]:
    patch = row.get("golden_patch", row.get("patch"))
    if not isinstance(patch, str) or not patch.strip():
        raise SchemaError(f"{where}: expected field 'golden_patch' (a unified diff)")
    if "relevant_file_contents" not in row and "files" not in row:
        raise SchemaError(f"{where}: expected field 'relevant_file_contents' (the files the patch edits)")
    files = _swe_files(row.get("relevant_file_contents", row.get("files")), where)
    statement = row.get("problem_statement", row.get("prompt"))
    if not isinstance(statement, str):
        raise SchemaError(f"{where}: expected field 'problem_statement' or 'prompt' (the issue text)")
    messages = _prompt_messages(row, where, ("prompt", "problem_statement"))
    return messages, {"golden_patch": patch, "files": files, "problem_statement": statement}


def _rlhf(row: dict, where: str) -> tuple[list[dict], Any]:
    messages = _prompt_messages(row, where, ("prompt", "question"))
    return messages, {"messages": messages}


ADAPTERS = {"math": _math, "ifeval": _ifeval, "code": _code, "swe": _swe, "rlhf": _rlhf}


def adapt(domain: str, row: dict, where: str) -> tuple[list[dict], Any]:
    """``(prompt messages, label)`` of one row of ``domain``'s RL data; :class:`SchemaError` if it fits no
    schema. A row with a ``label`` field is taken as already in the project's shape."""
    if domain not in ADAPTERS:
        raise SchemaError(f"{where}: no row schema for domain {domain!r}; expected one of {sorted(ADAPTERS)}")
    if "label" in row and row["label"] is not None:
        return _prompt_messages(row, where), row["label"]
    return ADAPTERS[domain](row, where)


__all__ = ["adapt", "ADAPTERS", "SchemaError"]
