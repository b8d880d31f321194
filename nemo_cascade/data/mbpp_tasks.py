"""The MBPP prompt format: how an MBPP task is put to the model and checked, shared by the ``mbpp``
eval suite (``evaluate.suites.load_mbpp``) and the MBPP-derived training sets, so a model trained on
them is evaluated on the prompt it learned: the task text and its asserts, then the code suites'
request for a fenced program (:data:`CODE_INSTRUCTION`); the label runs setup code + asserts in the
sandbox (§4.6).
"""
from __future__ import annotations

import functools
import gzip
import json
import re
from pathlib import Path

CODE_INSTRUCTION = ("Please provide a self-contained Python script that solves the problem in a "
                    "markdown code block.")
"""The code suites' request for a fenced program (the code reward runs the last Python block,
§4.6)."""
_ASSERT_CALL = re.compile(r"^\s*assert\s+(?:not\s+)?\(?\s*"
                          r"(?:set\(|math\.isclose\()?\s*([A-Za-z_]\w*)\s*\(")


# -------------------------------------------------------------------------------------- MBPP format

def mbpp_task(text: str, tests: list, setup: str = "") -> tuple[str, dict]:
    """``(prompt, code label)`` of an MBPP task: the prompt shows the task and its asserts (the MBPP
    paper's format); the label runs setup code + asserts, and its entry point is the function the
    first assert calls. ValueError (one line) if the first test is not such an assert."""
    match = _ASSERT_CALL.match(tests[0]) if tests and isinstance(tests[0], str) else None
    if match is None or not all(isinstance(t, str) for t in tests):
        raise ValueError("field 'test_list' must be assert strings, the first calling the function")
    test_code = "\n".join([setup or "", *tests]).strip() + "\n"
    prompt = (f"{text}\nYour code should pass these tests:\n\n" + "\n".join(tests)
              + f"\n\n{CODE_INSTRUCTION}")
    return prompt, {"test_code": test_code, "entry_point": match.group(1)}


def clean_source(code: str) -> str:
    """MBPP's reference code with LF line ends, no trailing spaces and one final newline (the
    bug-fix file is compared modulo trailing whitespace anyway; clean text keeps the diffs and edits
    minimal)."""
    lines = [line.rstrip() for line in code.replace("\r\n", "\n").split("\n")]
    return "\n".join(lines).strip("\n") + "\n"


@functools.lru_cache(maxsize=None)
def read_rows(path: Path) -> tuple[dict, ...]:
    """The rows of a ``.jsonl.gz`` file shipped in ``data/`` (read once per process)."""
    if not path.is_file():
        raise ValueError(f"{path} is missing (it ships with the repository)")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f if line.strip())


def mbpp_row(task: dict, uid: str) -> dict:
    """An MBPP task as a code prompt row whose response is the reference solution (also
    ``benchmark:mbpp``)."""
    prompt, label = mbpp_task(task["text"], task["test_list"], task.get("test_setup_code") or "")
    return {"uid": uid, "prompt": prompt, "label": label,
            "response": f"```python\n{clean_source(task['code'])}```"}


__all__ = ["mbpp_task", "mbpp_row", "read_rows", "clean_source", "CODE_INSTRUCTION"]
