"""Synthetic prompt sets for the cascade's other domains, sized for a tiny model on CPU (issue 5, item 6).

Each generator is ``fn(split, size, seed) -> rows`` like :func:`.synthetic.arithmetic` and is addressed as
``synthetic:NAME``. Rows carry their domain's label (DESIGN.md "Rewards") and a ``response`` that earns full
reward, so the same set serves the SFT warm-start and the RL stage. Splits are fixed by a hash of the problem,
never by seed or size, as in :mod:`.synthetic`.

- ``if_arithmetic`` (``ifeval``): an arithmetic question with one IFEval instruction attached (§4.4's verifiable
  instructions: an end phrase, quotation marks, capitals, lowercase, a postscript, a title, a keyword);
- ``code_arithmetic`` (``code``): "write ``f(x)`` returning ``x OP k``", checked by asserts in the sandbox (§4.6);
- ``bugfix_arithmetic`` (``swe``): ``calc.py`` computes ``x OP' k`` where the issue says ``x OP k``; the golden
  patch fixes the operator; the prompt shows the file, Agentless-style, and asks for a SEARCH/REPLACE edit (§4.7).
"""
from __future__ import annotations

import hashlib
import operator
import random

from .synthetic import arithmetic

IF_INSTRUCTIONS: list[tuple[str, dict, str]] = [
    ("startend:end_checker", {"end_phrase": "Is there anything else I can help with?"},
     "Finish your response with this exact phrase: Is there anything else I can help with?"),
    ("startend:quotation", {}, "Wrap your entire response with double quotation marks."),
    ("change_case:english_capital", {}, "Your entire response should be in English, and in all capital letters."),
    ("change_case:english_lowercase", {}, "Your entire response should be in English, and in all lowercase letters."),
    ("detectable_content:postscript", {"postscript_marker": "P.S."},
     "At the end of your response, please explicitly add a postscript starting with P.S."),
    ("detectable_format:title", {}, "Your answer must contain a title, wrapped in double angular brackets, "
                                    "such as <<poem of joy>>."),
    ("keywords:existence", {"keywords": ["result"]}, "Include the keywords result in the response."),
]
"""(IFEval instruction id, kwargs, the instruction's wording as in IFEval's prompts)."""


def _follow(instruction_id: str, base: str) -> str:
    """A response to ``base`` that follows the instruction."""
    return {
        "startend:end_checker": lambda: f"{base} Is there anything else I can help with?",
        "startend:quotation": lambda: f'"{base}"',
        "change_case:english_capital": base.upper,
        "change_case:english_lowercase": base.lower,
        "detectable_content:postscript": lambda: f"{base}\nP.S. I checked the result twice.",
        "detectable_format:title": lambda: f"<<the sum>>\n{base}",
        "keywords:existence": lambda: f"The result: {base}",
    }[instruction_id]()


def _pick(key: str, n: int) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") % n


def if_arithmetic(split: str, size: int, seed: int) -> list[dict]:
    """Arithmetic rows with one IFEval instruction each (chosen by a hash of the problem)."""
    rows = []
    for r in arithmetic(split, size, seed):
        iid, kwargs, wording = IF_INSTRUCTIONS[_pick(r["uid"], len(IF_INSTRUCTIONS))]
        prompt = f"{r['question']} {wording}"
        base = f"{r['solution']}. The answer is \\boxed{{{r['answer']}}}."
        rows.append({"uid": f"if_{r['uid']}", "prompt": prompt, "instruction_id_list": [iid], "kwargs": [kwargs],
                     "label": {"prompt": prompt, "instruction_id_list": [iid], "kwargs": [kwargs]},
                     "response": _follow(iid, base)})
    return rows


CODE_OPS = {"+": "plus", "-": "minus", "*": "times"}
_APPLY = {"+": operator.add, "-": operator.sub, "*": operator.mul}
MAX_K = 30
_WRONG = {"+": "-", "-": "+", "*": "+"}


def _ops_split(kind: str, split: str) -> list[tuple[str, int]]:
    """All (op, k) problems of a split, by a hash of the problem (15 % held out)."""
    if split not in ("train", "test"):
        raise ValueError(f"{kind}: split must be 'train' or 'test', got {split!r}")
    return [(op, k) for op in CODE_OPS for k in range(MAX_K + 1)
            if ("test" if _pick(f"{kind}:{op}{k}", 100) < 15 else "train") == split]


def _sample(kind: str, split: str, size: int, seed: int) -> list[tuple[str, int]]:
    pool = _ops_split(kind, split)
    if size > len(pool):
        raise ValueError(f"{kind}: size {size} exceeds the {len(pool)} {split} problems")
    return random.Random(seed).sample(pool, size if size > 0 else len(pool))


def code_arithmetic(split: str, size: int, seed: int) -> list[dict]:
    """``f(x) = x OP k`` tasks; the label's asserts try five inputs."""
    rows = []
    for op, k in _sample("code_arithmetic", split, size, seed):
        prompt = (f"Write a Python function f(x) that returns x {CODE_OPS[op]} {k}. "
                  "Put the code in a ```python block.")
        tests = "\n".join(f"assert f({x}) == {_APPLY[op](x, k)}" for x in (0, 1, 2, 7, 13)) + "\n"
        rows.append({"uid": f"code:{op}{k}", "prompt": prompt,
                     "label": {"test_code": tests, "entry_point": "f"},
                     "response": f"```python\ndef f(x):\n    return x {op} {k}\n```"})
    return rows


def bugfix_arithmetic(split: str, size: int, seed: int) -> list[dict]:
    """``calc.py`` returns ``x OP' k`` but should return ``x OP k``; fix it with a SEARCH/REPLACE edit."""
    rows = []
    for op, k in _sample("bugfix_arithmetic", split, size, seed):
        wrong = _WRONG[op]
        before = f"def f(x):\n    return x {wrong} {k}\n"
        issue = f"f(x) in calc.py should return x {CODE_OPS[op]} {k}, but it returns x {CODE_OPS[wrong]} {k}."
        patch = (f"--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def f(x):\n-    return x {wrong} {k}\n"
                 f"+    return x {op} {k}\n")
        prompt = (f"Issue: {issue}\n\ncalc.py:\n```python\n{before}```\n"
                  "Fix the issue with a SEARCH/REPLACE edit of calc.py.")
        response = (f"### calc.py\n<<<<<<< SEARCH\n    return x {wrong} {k}\n=======\n    return x {op} {k}\n"
                    ">>>>>>> REPLACE")
        rows.append({"uid": f"bugfix:{op}{k}", "prompt": prompt,
                     "label": {"golden_patch": patch, "files": {"calc.py": before}, "problem_statement": issue},
                     "response": response})
    return rows


DOMAIN_TASKS = {"if_arithmetic": if_arithmetic, "code_arithmetic": code_arithmetic,
                "bugfix_arithmetic": bugfix_arithmetic}

__all__ = ["if_arithmetic", "code_arithmetic", "bugfix_arithmetic", "DOMAIN_TASKS", "IF_INSTRUCTIONS"]
