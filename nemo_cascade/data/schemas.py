"""Row schemas of the released Nemotron-Cascade datasets (and the common public ones), mapped to the
project's prompt + label contract (docs/architecture.md "Rewards": one label shape per domain).

``adapt(domain, row, where) -> (messages, label)`` reads one jsonl row of a domain's RL data:

- ``math`` — nvidia/Nemotron-Cascade-RL-Math: ``problem`` (or ``question`` / ``prompt`` /
  ``messages``) and ``answer`` (a string or number; the reference the math verifier compares with,
  §4.5). The problems are bare: the loader appends the request for a boxed answer
  (``Data.math_instruction``, :mod:`.math_prompt`).
- ``ifeval`` — instruction-following RL (IFEval / IFBench style): ``prompt`` (or ``messages``),
  ``instruction_id_list`` and ``kwargs``; or the released IF-RLVR rows
  (allenai/IF_multi_constraints_upto5, the IFBench-Train sub-stage of §4.4.2): ``messages`` and
  ``ground_truth``, a Python-literal (or JSON) string of ``[{"instruction_id": [...], "kwargs":
  [...]}]``. The label is ``{"prompt", "instruction_id_list", "kwargs"}`` (§4.4) either way.
- ``code`` — ``question`` / ``prompt`` / ``problem`` plus tests in one of: ``tests`` (``[{"input",
  "output"}]``), ``input_output`` (TACO / APPS: a JSON string or object ``{"inputs": [...],
  "outputs": [...]}``, with ``fn_name`` for call-based problems, and ``starter_code`` telling a
  ``class Solution`` method), or ``test_code`` + ``entry_point`` (HumanEval / MBPP style); optional
  ``time_limit`` seconds (§4.6).
- ``swe`` — nvidia/Nemotron-Cascade-RL-SWE: ``instance_id``, ``prompt`` (the Agentless repair
  prompt, or ``problem_statement``), ``golden_patch`` (or ``patch``) and ``relevant_file_contents``
  (``{path: content}`` or ``[{"file_path"/"path", "content"}]``); the label is ``{"golden_patch",
  "files", "problem_statement"}`` (§4.7). A row without ``prompt`` gets the Agentless repair prompt
  of its files built here. A row with ``candidate_files`` (the localizer's files in rank order,
  ``[{"path"/"file_path", "content"}]``) beside its ground-truth files (``golden_files``, else
  ``relevant_file_contents``) and its issue (``problem_statement`` or ``issue``) gets the §4.7.1
  prompt built for the stage's prompt limit (:mod:`.swe_prompts`): ground truth plus noisy files up
  to the limit, at most 5, shuffled; such a row must not also carry a ``prompt``.
- ``rlhf`` — ``prompt`` or ``messages``; the label is the conversation the answer replies to (§4.3).

Each domain's adapter is its ``RewardDomain.adapt``; :func:`adapt` is handed the domain (a
:class:`RowSchema`) by its caller, so data never looks domains up by name (``rewards.adapt_row``
does). A row already in the project's own shape (``label`` present) passes through unchanged. A row
that fits no schema raises :class:`SchemaError` (one line naming ``where`` and the field expected);
the loader counts and reports such rows (``Data.max_bad_rows``) instead of failing on the first one
when the user allows it. An SWE row whose §4.7.1 prompt fits nothing (its ground truth alone is too
long) comes back as ``(None, None)``: not a bad row, a dropped one (the loader counts it in
``PromptList.dropped_no_context``).
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import json
import math
import re
from typing import Any, Callable, Optional, Protocol

from .swe_prompts import PromptBudget, build_repair_prompt, render_repair_prompt
from ..errors import CascadeError

PROMPT_KEYS = ("prompt", "question", "problem")


class SchemaError(CascadeError, ValueError):
    """A row that does not fit its domain's schema; the message names the row and the expected
    field."""


class RefusedRow(ValueError):
    """A well-formed row that the stage's settings refuse, e.g. an IFBench *test* instruction id in
    IF-RL training data (§4.4.2); the message names the setting that allows it. Loading stops at it
    whatever ``Data.max_bad_rows`` allows: skipping it would hide a choice the recipe has to
    make."""


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
        raise SchemaError(f"{where}: field 'messages' must be a non-empty list of {{role, "
                          f"content}} objects")
    for j, m in enumerate(msgs):
        if not (isinstance(m, dict) and m.get("role") in ("system", "user", "assistant")
                and isinstance(m.get("content"), str)):
            raise SchemaError(f"{where}: field 'messages[{j}]' must be an object with role "
                              "system|user|assistant and string content")
    if msgs[-1]["role"] == "assistant":
        raise SchemaError(f"{where}: field 'messages' must end with a user turn in an RL prompt "
                          "set")
    return [{"role": m["role"], "content": m["content"]} for m in msgs]


def adapt_math(row: dict, where: str) -> tuple[list[dict], Any]:
    if "answer" not in row:
        raise SchemaError(f"{where}: expected field 'answer' (the reference final answer)")
    answer = row["answer"]
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        raise SchemaError(f"{where}: field 'answer' must be a string or number, got "
                          f"{type(answer).__name__}")
    # a missing answer in a pandas-written file
    if isinstance(answer, float) and not math.isfinite(answer):
        raise SchemaError(f"{where}: field 'answer' must be a finite number, got {answer}")
    return _prompt_messages(row, where), answer if isinstance(answer, str) else str(answer)


def adapt_ifeval(row: dict, where: str) -> tuple[list[dict], Any]:
    if "ground_truth" in row and "instruction_id_list" not in row:
        return _if_rlvr(row, where)
    for key in ("instruction_id_list", "kwargs"):
        if key not in row:
            raise SchemaError(f"{where}: expected field {key!r} (or the IF-RLVR field "
                              "'ground_truth')")
    messages = _prompt_messages(row, where, ("prompt",))
    prompt = row.get("prompt") or messages[-1]["content"]
    return messages, _if_label(messages, prompt, row["instruction_id_list"], row["kwargs"])


def _if_label(messages: list[dict], prompt: str, ids: Any, kwargs: Any) -> dict:
    """An IF label: the instructions, the prompt they are checked against, and the whole
    conversation when it is more than that one user turn (what IF-RL's reward-model bonus reads,
    §4.4.2)."""
    label = {"prompt": prompt, "instruction_id_list": ids, "kwargs": _without_nulls(kwargs)}
    return {**label, "messages": messages} if len(messages) > 1 else label


def _without_nulls(kwargs: Any) -> Any:
    # IFBench and IF-RLVR rows carry null kwargs values (and null kwargs): the checkers treat a
    # missing kwarg as its default. Anything else is left for the label check to reject.
    if not isinstance(kwargs, list):
        return kwargs
    return [{k: v for k, v in kw.items() if v is not None} if isinstance(kw, dict) else kw
            for kw in kwargs]


def _literal(text: str) -> Any:
    """A Python literal (``ast.literal_eval``: data only, nothing runs) or else JSON; ValueError if
    neither."""
    with contextlib.suppress(ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ast.literal_eval(text)
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        raise ValueError("neither a Python literal nor JSON") from None


def _if_rlvr(row: dict, where: str) -> tuple[list[dict], Any]:
    """An IF-RLVR row: ``messages`` and ``ground_truth`` (:func:`if_rlvr_constraints`)."""
    constraints = if_rlvr_constraints(row, where)
    messages = _prompt_messages(row, where, ("prompt",))
    return messages, _if_label(messages, messages[-1]["content"], constraints["instruction_id"],
                               constraints["kwargs"])


def if_rlvr_constraints(row: dict, where: str) -> dict:
    """``{"instruction_id": [...], "kwargs": [...]}`` of an IF-RLVR row's ``ground_truth``, a string
    holding ``[{'instruction_id': [...], 'kwargs': [...]}]`` (a Python literal or JSON). The
    reference verifier reads the list's first entry (itself a dict, or a JSON string of one); a list
    of several would silently drop constraints there, so here it must hold exactly one. SchemaError
    (one line) otherwise."""
    expected = "a string holding [{'instruction_id': [...], 'kwargs': [...]}]"
    truth = row["ground_truth"]
    if not isinstance(truth, str):
        raise SchemaError(f"{where}: field 'ground_truth' must be {expected}, got "
                          f"{type(truth).__name__}")
    try:
        value = _literal(truth)
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
            value = [_literal(value[0])]
    except ValueError as e:
        raise SchemaError(f"{where}: field 'ground_truth' must be {expected}: {e}") from None
    if isinstance(value, dict):
        value = [value]
    if not (isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict)):
        raise SchemaError(f"{where}: field 'ground_truth' must be {expected} (one dict in the "
                          "list)")
    constraints = value[0]
    for key in ("instruction_id", "kwargs"):
        if key not in constraints:
            raise SchemaError(f"{where}: field 'ground_truth' has no {key!r}; expected {expected}")
    return constraints


def _json_field(text: str, name: str, where: str) -> Any:
    """A field that holds JSON as a string (TACO's ``input_output``, SWE file lists), decoded."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaError(f"{where}: field {name!r} is a string but not JSON ({e.msg})") from None
    # nested too deeply; a number past Python's int-string limit
    except (RecursionError, ValueError):
        raise SchemaError(f"{where}: field {name!r} is a string but not JSON that can be "
                          "read") from None


def _code_tests(row: dict, where: str) -> dict:
    if "tests" in row:
        return {"tests": row["tests"]}
    if "input_output" in row:
        io = row["input_output"]
        if isinstance(io, str):
            io = _json_field(io, "input_output", where)
        if not (isinstance(io, dict) and isinstance(io.get("inputs"), list)
                and isinstance(io.get("outputs"), list)
                and len(io["inputs"]) == len(io["outputs"])):
            raise SchemaError(f"{where}: field 'input_output' must hold equally long 'inputs' and "
                              "'outputs' lists")
        # call-based: call fn_name(*inputs[i]), compare with outputs[i] (rewards/code.py)
        if "fn_name" in io:
            return _call_tests(row, io, where)
        return {"tests": [{"input": _text(i), "output": _text(o)}
                          for i, o in zip(io["inputs"], io["outputs"])]}
    if "test_code" in row or "test_list" in row:
        code = row.get("test_code")
        if code is None:  # MBPP: a list of asserts (+ optional setup code)
            asserts, setup = row.get("test_list"), row.get("test_setup_code") or ""
            if not isinstance(asserts, list) or not all(isinstance(a, str) for a in asserts):
                raise SchemaError(f"{where}: field 'test_list' must be a list of strings (assert "
                                  "statements)")
            if not isinstance(setup, str):
                raise SchemaError(f"{where}: field 'test_setup_code' must be a string")
            code = "\n".join([setup] + asserts).strip() + "\n"
        if not isinstance(code, str):
            raise SchemaError(f"{where}: field 'test_code' must be a string, got "
                              f"{type(code).__name__}")
        solution = row.get("code")
        solution = solution if isinstance(solution, str) else None
        entry = row.get("entry_point") or _entry_point(solution, code)
        return {"test_code": code, "entry_point": entry}
    raise SchemaError(f"{where}: expected tests as 'tests', 'input_output', or 'test_code' + "
                      "'entry_point'")


_SOLUTION_CLASS = re.compile(r"^class\s+Solution\b", re.MULTILINE)


def _call_tests(row: dict, io: dict, where: str) -> dict:
    """TACO/APPS call-based tests: each input a list of arguments; ``Solution().fn_name`` when the
    row's ``starter_code`` defines ``class Solution`` (LeetCode-style problems), else the top-level
    function."""
    fn = io["fn_name"]
    if not isinstance(fn, str) or not fn.isidentifier():
        raise SchemaError(f"{where}: field 'input_output.fn_name' must be a Python identifier")
    if not all(isinstance(args, list) for args in io["inputs"]):
        raise SchemaError(f"{where}: field 'input_output.inputs' must hold a list of arguments per "
                          "test")
    starter = row.get("starter_code")
    cls = "Solution" if isinstance(starter, str) and _SOLUTION_CLASS.search(starter) else None
    return {"call_tests": [{"args": a, "output": o} for a, o in zip(io["inputs"], io["outputs"])],
            "fn_name": fn, "class_name": cls}


_DEF = re.compile(r"^def\s+([A-Za-z_]\w*)\s*\(", re.MULTILINE)
_CALL = re.compile(r"([A-Za-z_]\w*)\s*\(")
_BUILTIN_NAMES = set(dir(builtins)) | {"assert"}


def _entry_point(solution: Optional[str], test_code: str) -> Optional[str]:
    """MBPP rows name no entry point: the reference solution's function that the tests call, else
    the first name the tests call that is not a builtin."""
    called = set(_CALL.findall(test_code))
    for name in _DEF.findall(solution or ""):
        if name in called:
            return name
    return next((n for n in _CALL.findall(test_code) if n not in _BUILTIN_NAMES), None)


def _text(value: Any) -> str:
    """TACO/APPS inputs and outputs are strings or lists of lines."""
    return "\n".join(map(str, value)) + "\n" if isinstance(value, list) else str(value)


def adapt_code(row: dict, where: str) -> tuple[list[dict], Any]:
    label = _code_tests(row, where)
    if "time_limit" in row and row["time_limit"] is not None:
        label["time_limit"] = row["time_limit"]
    return _prompt_messages(row, where, ("question", "prompt", "problem", "text")), label


def _swe_files(value: Any, where: str, name: str = "relevant_file_contents") -> dict[str, str]:
    """``{path: content}`` from a mapping, a list of ``{"file_path"/"path", "content"}`` items
    (order kept), or either one as a JSON string."""
    if isinstance(value, str):
        value = _json_field(value, name, where)
    if isinstance(value, dict):
        files = value
    elif isinstance(value, list):
        files = {}
        for item in value:
            path = item.get("file_path", item.get("path")) if isinstance(item, dict) else None
            if not isinstance(path, str) or not isinstance(item.get("content"), str):
                raise SchemaError(f"{where}: {name!r} items must be {{file_path, content}}")
            files[path] = item["content"]
    else:
        raise SchemaError(f"{where}: field {name!r} must map paths to file contents")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise SchemaError(f"{where}: field {name!r} must map string paths to string contents")
    return files


def _swe_candidates(value: Any, where: str) -> list[tuple[str, str]]:
    """The localizer's files as ``(path, content)`` in rank order: a list (a mapping has no rank
    order to trust), or a JSON string of one."""
    if isinstance(value, str):
        value = _json_field(value, "candidate_files", where)
    if not isinstance(value, list):
        raise SchemaError(f"{where}: field 'candidate_files' must be a list of {{path, content}} "
                          "in the localizer's rank order")
    return list(_swe_files(value, where, "candidate_files").items())


def adapt_swe(row: dict, where: str,
              budget: Optional[PromptBudget] = None) -> tuple[Optional[list[dict]], Any]:
    patch = row.get("golden_patch", row.get("patch"))
    if not isinstance(patch, str) or not patch.strip():
        raise SchemaError(f"{where}: expected field 'golden_patch' (a unified diff)")
    key = next((k for k in ("golden_files", "relevant_file_contents", "files") if k in row), None)
    if key is None:
        raise SchemaError(f"{where}: expected field 'relevant_file_contents' or 'golden_files' "
                          "(the files the patch edits)")
    files = _swe_files(row[key], where, key)
    statement = row.get("problem_statement", row.get("issue", row.get("prompt")))
    if not isinstance(statement, str):
        raise SchemaError(f"{where}: expected field 'problem_statement' or 'prompt' (the issue "
                          "text)")
    # §4.7.1: ground truth + localized noisy files, built for the stage's limit
    if "candidate_files" in row:
        if "prompt" in row:
            raise SchemaError(f"{where}: field 'prompt' with 'candidate_files': the prompt is "
                              "built from the candidate files here; give one or the other")
        if not statement.strip():
            raise SchemaError(f"{where}: field 'problem_statement' must be a non-empty string")
        budget = budget or PromptBudget(None, len)
        instance = row.get("instance_id", where)
        built = build_repair_prompt(statement, files,
                                    _swe_candidates(row["candidate_files"], where), budget.limit,
                                    budget.count_tokens, budget.rng(str(instance)),
                                    budget.max_files,
                                    budget.min_noisy_files, budget.truth_only_share)
        if built is None:
            return None, None
        messages, files = [{"role": "user", "content": built.text}], built.files
    elif "prompt" in row:  # the released set's own Agentless prompt
        messages = _prompt_messages(row, where, ("prompt",))
    # the issue alone would show the model no code: the repair prompt of the files (§4.7.1's variant
    # (a))
    else:
        if not statement.strip():
            raise SchemaError(f"{where}: field 'problem_statement' must be a non-empty string")
        messages = [{"role": "user",
                     "content": render_repair_prompt(statement, sorted(files.items()))}]
    return messages, {"golden_patch": patch, "files": files, "problem_statement": statement}


def adapt_rlhf(row: dict, where: str) -> tuple[list[dict], Any]:
    messages = _prompt_messages(row, where, ("prompt", "question"))
    return messages, {"messages": messages}


class RowSchema(Protocol):
    """What the loader needs of a domain (``rewards.RewardDomain`` is one): its name, its row
    adapter (taking the stage's ``PromptBudget`` where ``prompt_budget``), its prompt wording."""

    name: str
    adapt: Callable[..., tuple[Optional[list[dict]], Any]]
    prompt_budget: bool
    phrase: Optional[Callable[..., list[dict]]]


def adapt(domain: RowSchema, row: dict, where: str,
          swe_budget: Optional[PromptBudget] = None) -> tuple[Optional[list[dict]], Any]:
    """``(prompt messages, label)`` of one row of ``domain``'s RL data, read by the domain's
    adapter; :class:`SchemaError` if it fits no schema. A row with a ``label`` field is taken as
    already in the project's shape. ``swe_budget``: the stage's prompt limit and token counter for
    rows whose prompt is built here (``RowSchema.prompt_budget``: SWE, §4.7.1; None = no limit);
    ``(None, None)`` when such a row fits no prompt (dropped, not bad)."""
    if "label" in row and row["label"] is not None:
        return _prompt_messages(row, where), row["label"]
    return domain.adapt(row, where, swe_budget) if domain.prompt_budget else domain.adapt(row,
                                                                                          where)


__all__ = ["adapt", "RowSchema", "adapt_math", "adapt_ifeval", "adapt_code", "adapt_swe",
           "adapt_rlhf", "SchemaError",
           "RefusedRow", "if_rlvr_constraints"]
