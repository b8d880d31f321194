"""The paper's benchmarks whose data is downloaded, not shipped: LiveCodeBench v5 / v6,
GPQA-Diamond, MMLU-Pro and ArenaHard (T1, T2), with their loaders and suites.

``nemo-cascade data prepare-eval`` (``tooling/prepare/benchmarks.py``) writes the files under
``data/benchmarks/`` in each benchmark's own field layout. Every row is checked here; a malformed
one, or a file of another release or layout, is a one-line :class:`~.suites.EvalError` naming
FILE:LINE and the field.

- **LiveCodeBench** (``livecodebench/code_generation_lite``): a version is a release and a window of
  contest dates (:class:`Window`). v5 = release_v5's problems dated 2024-08-01 to 2025-01-31 (279),
  v6 = release_v6's dated 2024-08-01 to 2025-04-30 (454): the paper's counts (T1). Rows outside
  the window are not items of the version; a row without ``contest_date`` is an error, and so is a
  file with no problem in the window. Tests: ``public_test_cases`` + ``private_test_cases`` (JSON,
  or the release's base64 / zlib / pickle form, unpickled without loading any class). stdin tests
  → the code reward's stdin/stdout label, 6 s per test (LiveCodeBench's default timeout);
  functional (LeetCode) tests → its call-based label: one JSON argument per input line,
  ``Solution().<func_name>`` when the starter code defines ``class Solution``, compared exactly
  (no APPS unwrapping), 6 s per test for the whole run. Prompt: LiveCodeBench's own (its system
  message, the question, the starter code or the stdin/stdout format).
- **GPQA-Diamond** (``Idavidrein/gpqa``, ``gpqa_diamond``): the right answer and three wrong ones,
  shuffled per item by a generator seeded with ``GPQA_SEED`` and the ``Record ID`` (the same order
  every run, whatever the file order); the ``mcq`` reward reads the letter (``rewards/mcq.py``).
- **MMLU-Pro** (``TIGER-Lab/MMLU-Pro``, test split): up to ten options in the file's order,
  zero-shot, the same prompt and reward as GPQA.
- **ArenaHard** v0.1 (``lmarena-ai/arena-hard-auto``): rows ``uid``, ``prompt``, ``baseline``
  (gpt-4-0314's answer, joined in by ``data prepare-eval``); the ``arena`` reward asks a judge
  (``rewards/arena.py``).
"""
from __future__ import annotations

import base64
import io
import json
import pickle
import random
import re
import zlib
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, Callable, Optional

from ..rewards.code import MAX_TIME_LIMIT_S
from ..rewards.mcq import LETTERS, mcq_prompt
from ..rewards.mcq import adapt as mcq_adapt
from .suite_types import (DATA, PAPER_DECODING, EvalError, Item, Suite,
                          per_row, row_field, user_turn,
                          validated)

BENCHMARKS = DATA / "benchmarks"
"""Where ``nemo-cascade data prepare-eval ... --out data/benchmarks`` writes (not in git)."""
LCB_TEST_SECONDS = 6.0
"""LiveCodeBench's default timeout per test."""
GPQA_SEED = 0
"""Seeds the per-item shuffle of GPQA's four answers (with the item's Record ID)."""


@dataclass(frozen=True)
class Window:
    """LiveCodeBench problems of one release whose ``contest_date`` lies in ``[start, end)``."""

    release: str
    start: date
    end: date
    problems: int
    """How many the paper counts (T1)."""

    def __str__(self) -> str:
        return (f"livecodebench/code_generation_lite {self.release}, contest_date in "
                f"[{self.start}, {self.end}), {self.problems} problems in the paper")


LCB_V5 = Window("release_v5", date(2024, 8, 1), date(2025, 2, 1), 279)
LCB_V6 = Window("release_v6", date(2024, 8, 1), date(2025, 5, 1), 454)

# ------------------------------------------------------------------------------------ LiveCodeBench

LCB_SYSTEM = ("You are an expert Python programmer. You will be given a question (problem "
              "specification) and will generate a correct Python program that matches the "
              "specification and passes all tests.")
LCB_WITH_STARTER = ("You will use the following starter code to write the solution to the problem "
                    "and enclose your code within delimiters.")
LCB_STDIN = ("Read the inputs from stdin solve the problem and write the answer to stdout (do not "
             "directly test on the sample inputs). Enclose your code within delimiters as follows. "
             "Ensure that when the python program runs, it reads the inputs, runs the algorithm "
             "and writes output to STDOUT.")
"""LiveCodeBench's prompt pieces (lcb_runner/prompts/code_generation.py, MIT)."""


def lcb_prompt(question: str, starter: str) -> str:
    """LiveCodeBench's generic question template, its system message first."""
    text = f"{LCB_SYSTEM}\n\n### Question:\n{question}\n\n"
    if starter:
        text += f"### Format: {LCB_WITH_STARTER}\n```python\n{starter}\n```\n\n"
    else:
        text += f"### Format: {LCB_STDIN}\n```python\n# YOUR CODE HERE\n```\n\n"
    return text + "### Answer: (use the provided format with backticks)\n\n"


def contest_date(row: dict, where: str) -> date:
    value = row.get("contest_date")
    if not isinstance(value, str):
        raise EvalError(f"{where}: expected field 'contest_date' (an ISO date: LiveCodeBench's "
                        "layout)")
    try:
        return datetime.fromisoformat(value).date()
    except ValueError:
        raise EvalError(f"{where}: field 'contest_date' is not an ISO date: "
                        f"{value!r:.40}") from None


class _NoClasses(pickle.Unpickler):
    """The release pickles a JSON string: no class is needed, and loading one could run code."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"refused class {module}.{name}")


def _compressed_json(text: str) -> Any:
    value = _NoClasses(io.BytesIO(zlib.decompress(base64.b64decode(text, validate=True)))).load()
    return json.loads(value)


def _is_test(t: Any) -> bool:
    return (isinstance(t, dict) and isinstance(t.get("input"), str)
            and isinstance(t.get("output"), str) and t.get("testtype") in ("stdin", "functional"))


def lcb_tests(row: dict, key: str, where: str) -> list[dict]:
    """One test field, ``[{"input", "output", "testtype"}]``: JSON or the release's compressed
    form."""
    text = row_field(row, key, where)
    try:
        tests = json.loads(text)
    except ValueError:
        try:
            tests = _compressed_json(text)
        except (ValueError, TypeError, EOFError, zlib.error, pickle.UnpicklingError):
            raise EvalError(f"{where}: field {key!r} is neither JSON nor LiveCodeBench's "
                            "base64/zlib/pickle form") from None
    if not (isinstance(tests, list) and all(_is_test(t) for t in tests)):
        raise EvalError(f"{where}: field {key!r} must be a list of "
                        "{input, output, testtype: stdin|functional}")
    return tests


def _json_value(text: str, what: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise EvalError(f"{where}: a functional test's {what} is not JSON: {text!r:.60}") from None


def _call(test: dict, where: str) -> dict:
    """A functional test: one JSON argument per input line, a JSON return value."""
    args = [_json_value(a, "input", where) for a in test["input"].split("\n") if a.strip()]
    return {"args": args, "output": _json_value(test["output"], "output", where)}


def _functional(row: dict, tests: list[dict], where: str) -> dict:
    meta = row.get("metadata")
    meta = _json_value(meta, "metadata", where) if isinstance(meta, str) else meta
    fn = meta.get("func_name") if isinstance(meta, dict) else None
    if not isinstance(fn, str):
        raise EvalError(f"{where}: field 'metadata' names no 'func_name' for the functional tests")
    calls = [_call(t, where) for t in tests]
    solution = re.search(r"^class Solution\b", row.get("starter_code") or "", re.M) is not None
    return {"call_tests": calls, "fn_name": fn, "class_name": "Solution" if solution else None,
            "wrapped_single": False,
            "time_limit": min(MAX_TIME_LIMIT_S, LCB_TEST_SECONDS * len(calls))}


def lcb_label(row: dict, where: str) -> dict:
    """The code reward's label of a problem's public and private tests."""
    tests = (lcb_tests(row, "public_test_cases", where)
             + lcb_tests(row, "private_test_cases", where))
    kinds = {t["testtype"] for t in tests}
    if kinds == {"functional"}:
        label = _functional(row, tests, where)
    elif kinds == {"stdin"}:
        label = {"tests": [{"input": t["input"], "output": t["output"]} for t in tests],
                 "time_limit": LCB_TEST_SECONDS}
    else:
        raise EvalError(f"{where}: expected tests all stdin or all functional, got "
                        f"{sorted(kinds) or 'none'}")
    return validated("code", label, where)


def lcb_item(window: Window) -> Callable[[dict, str, int], Optional[Item]]:
    """A row → its item, or None when its contest date is outside ``window``."""
    def item(row: dict, where: str, lineno: int) -> Optional[Item]:
        if not window.start <= contest_date(row, where) < window.end:
            return None
        starter = row.get("starter_code") or ""
        if not isinstance(starter, str):
            raise EvalError(f"{where}: field 'starter_code' must be a string")
        prompt = lcb_prompt(row_field(row, "question_content", where), starter)
        return Item(row_field(row, "question_id", where), user_turn(prompt), lcb_label(row, where))
    return item


def load_livecodebench(window: Window) -> Callable[[Path], list[Item]]:
    rows = per_row(lcb_item(window))

    def load(path: Path) -> list[Item]:
        items = rows(path)
        if not items:
            raise EvalError(f"{path}: no problem with a contest_date in [{window.start}, "
                            f"{window.end}): not LiveCodeBench {window.release}?")
        return items
    return load


# --------------------------------------------------------------------------------- multiple choice

def _text(row: dict, key: str, where: str) -> str:
    value = row_field(row, key, where).strip()
    if not value:
        raise EvalError(f"{where}: field {key!r} is empty")
    return value


def gpqa_options(row: dict, where: str) -> tuple[list[str], str]:
    """GPQA's four answers in the item's shuffled order, and the right one's letter."""
    answers = [_text(row, "Correct Answer", where)]
    answers += [_text(row, f"Incorrect Answer {k}", where) for k in (1, 2, 3)]
    order = list(range(4))
    random.Random(f"gpqa/{GPQA_SEED}/{row_field(row, 'Record ID', where)}").shuffle(order)
    return [answers[k] for k in order], LETTERS[order.index(0)]


def gpqa_item(row: dict, where: str, lineno: int) -> Item:
    """GPQA rows (``Question``, ``Correct Answer``, ``Incorrect Answer 1..3``, ``Record ID``)."""
    options, letter = gpqa_options(row, where)
    label = validated("mcq", {"answer": letter, "choices": len(options)}, where)
    prompt = mcq_prompt(_text(row, "Question", where), options)
    return Item(row_field(row, "Record ID", where), user_turn(prompt), label, f"Answer: {letter}")


def mmlu_pro_item(row: dict, where: str, lineno: int) -> Item:
    """MMLU-Pro rows (``question_id``, ``question``, ``options``, ``answer``, ``answer_index``)."""
    uid = str(row_field(row, "question_id", where, int))
    try:
        messages, label = mcq_adapt(row, where)
    except ValueError as e:
        raise EvalError(str(e)) from None
    return Item(uid, messages, validated("mcq", label, where), f"Answer: {label['answer']}")


def arena_hard_item(row: dict, where: str, lineno: int) -> Item:
    """Prepared ArenaHard rows (``uid``, ``prompt``, ``baseline``: the answer to beat)."""
    label = {"prompt": _text(row, "prompt", where), "baseline": _text(row, "baseline", where)}
    return Item(row_field(row, "uid", where), user_turn(label["prompt"]),
                validated("arena", label, where), label["baseline"])


ROW_ITEMS: dict[str, Callable[[dict, str, int], Optional[Item]]] = {
    "lcb-v5": lcb_item(LCB_V5), "lcb-v6": lcb_item(LCB_V6), "gpqa-diamond": gpqa_item,
    "mmlu-pro": mmlu_pro_item, "arena-hard": arena_hard_item}
"""Suite → its row check ``(row, where, lineno)`` → the item (None: not one of the suite's), or
EvalError. ``data prepare-eval`` checks every row it writes with it."""

# ------------------------------------------------------------------------------------ the suites


def _file(*parts: str) -> Callable[[], Path]:
    return lambda: BENCHMARKS.joinpath(*parts)


def _fetch(name: str) -> str:
    return f"nemo-cascade data prepare-eval {name} --out data/benchmarks"


_LCB = dict(domain="code", mode="think", samples=8, max_tokens=65536,
            metric="pass rate (public + private tests, sandboxed)",
            paper=f"{PAPER_DECODING}; avg@8, 64K budget (T1, T9)",
            get_data=_fetch("livecodebench"))
_MCQ = dict(domain="mcq", mode="think", max_tokens=65536, metric="accuracy (answer letter)")

PREPARED_SUITES: dict[str, Suite] = {s.name: s for s in (
    Suite("lcb-v5", description="LiveCodeBench v5: release_v5 problems dated "
                                "2024-08-01..2025-01-31 (279)",
          load=load_livecodebench(LCB_V5), default_data=_file("livecodebench", "release_v5.jsonl"),
          data_version=str(LCB_V5), **_LCB),
    Suite("lcb-v6", description="LiveCodeBench v6: release_v6 problems dated "
                                "2024-08-01..2025-04-30 (454)",
          load=load_livecodebench(LCB_V6), default_data=_file("livecodebench", "release_v6.jsonl"),
          data_version=str(LCB_V6), **_LCB),
    Suite("gpqa-diamond", description="GPQA-Diamond, 198 questions, 4 options shuffled per item "
                                      "(Rein et al. 2023)",
          load=per_row(gpqa_item), default_data=_file("gpqa", "gpqa_diamond.jsonl"), samples=8,
          paper=f"{PAPER_DECODING}; avg@8, 64K budget (T1)", get_data=_fetch("gpqa-diamond"),
          data_version=f"Idavidrein/gpqa gpqa_diamond; options shuffled per Record ID, "
                       f"seed {GPQA_SEED}", **_MCQ),
    Suite("mmlu-pro", description="MMLU-Pro test, 12,032 questions, up to 10 options "
                                  "(Wang et al. 2024)",
          load=per_row(mmlu_pro_item), default_data=_file("mmlu-pro", "test.jsonl"), samples=1,
          paper=f"{PAPER_DECODING}; 1 sample, exact match, thinking, 64K budget (T1)",
          get_data=_fetch("mmlu-pro"), data_version="TIGER-Lab/MMLU-Pro test split, zero-shot",
          **_MCQ),
    Suite("arena-hard", "arena", "ArenaHard v0.1, 500 prompts, judged against gpt-4-0314's answers",
          per_row(arena_hard_item), _file("arena-hard", "arena-hard-v0.1.jsonl"), mode="think",
          samples=1, max_tokens=32768,
          metric="win rate vs. the baseline (judge, both orders; ties 0.5)",
          paper=f"{PAPER_DECODING}, max 32K; ArenaHard 1.0, no style control, judge "
                "GPT-4-Turbo-2024-04-09",
          data_version="lmarena-ai/arena-hard-auto arena-hard-v0.1, baseline gpt-4-0314",
          get_data=_fetch("arena-hard")),
)}
"""The downloaded paper benchmarks by name (``suites.prepared_suites``)."""


__all__ = ["PREPARED_SUITES", "BENCHMARKS", "Window", "LCB_V5", "LCB_V6", "GPQA_SEED",
           "LCB_TEST_SECONDS", "lcb_prompt", "contest_date", "lcb_tests", "lcb_label", "lcb_item",
           "load_livecodebench", "gpqa_options", "gpqa_item", "mmlu_pro_item", "arena_hard_item",
           "ROW_ITEMS"]
