"""Synthetic prompt sets for the cascade's other domains, sized for a tiny model on CPU.

Each generator is ``fn(split, size, seed) -> rows`` like :func:`.arithmetic.arithmetic` and is
addressed as ``synthetic:NAME``. Rows carry their domain's label (docs/rewards.md) and a
``response`` that earns full reward, so the same set serves the SFT warm-start and the RL stage.
Splits are fixed by a hash of the problem, never by seed or size, as in :mod:`.arithmetic`.

Every task needs a little arithmetic or counting, not only copying from the prompt, so a
~1M-parameter model that has seen the format in SFT still gets some held-out problems wrong and RL
has room to improve it (a pure copy task is solved perfectly by SFT and shows the RL stage nothing):

- ``if_arithmetic`` (``ifeval``): an arithmetic question with two or three IFEval instructions
  attached that the response must satisfy together (§4.4's verifiable instructions: an end phrase,
  quotation marks, capitals, lowercase, a postscript, a title, a keyword, exactly N bullet points);
- ``code_arithmetic`` (``code``): "write ``f(x) = x OP k`` such that ``f(x0) = y0``" — the model
  works out ``k`` — checked by asserts in the sandbox (§4.6);
- ``bugfix_arithmetic`` (``swe``): ``calc.py`` computes ``x OP k'`` with a wrong constant; the issue
  reports ``f(x0)`` and the value it should have, and the model works out the right constant; the
  prompt shows the file, Agentless-style, and asks for a SEARCH/REPLACE edit (§4.7).
"""
from __future__ import annotations

import hashlib
import operator
import random

from nemo_cascade.data.generated import sft_pairs

from . import reasoning_gym
from .arithmetic import arithmetic
from .chat_arithmetic import chat_arithmetic
from .if_prompts import if_requests
from .mbpp_sets import mbpp_bugfix, mbpp_code

IF_INSTRUCTIONS: dict[str, list[tuple[str, dict, str]]] = {
    "body": [("keywords:existence", {"keywords": ["result"]},
              "Include the keywords result in the response.")] + [
        ("detectable_format:number_bullet_lists", {"num_bullets": n},
         f"Your answer must contain exactly {n} bullet points. "
         f"Use the markdown bullet points such as:\n* This is point 1.") for n in (2, 3, 4, 5)],
    "tail": [("startend:end_checker", {"end_phrase": "Is there anything else I can help with?"},
              "Finish your response with this exact phrase: "
              "Is there anything else I can help with?"),
             ("detectable_content:postscript", {"postscript_marker": "P.S."},
              "At the end of your response, please explicitly add a postscript "
              "starting with P.S.")],
    "wrap": [("startend:quotation", {}, "Wrap your entire response with double quotation marks."),
             ("detectable_format:title", {},
              "Your answer must contain a title, wrapped in double angular brackets, "
              "such as <<poem of joy>>.")],
    "case": [("change_case:english_capital", {},
              "Your entire response should be in English, and in all capital letters."),
             ("change_case:english_lowercase", {},
              "Your entire response should be in English, and in all lowercase letters.")],
}
"""IFEval instructions (id, kwargs, the wording of IFEval's prompts) by the part of the response
they shape; a prompt carries two or three, from different parts, so they compose (the response is
built body → tail → wrap → case)."""
_CLASHES = {("detectable_format:number_bullet_lists", "startend:quotation")}
"""Pairs no response satisfies together (a quoted response's first bullet line starts with a
quote)."""


def _follow(chosen: list[tuple[str, dict, str]], base: str) -> str:
    """A response to ``base`` that follows every chosen instruction."""
    text = base
    for iid, kwargs, _ in chosen:
        if iid == "keywords:existence":
            text = f"The result: {text}"
        elif iid == "detectable_format:number_bullet_lists":
            text = "\n".join([f"* {text}", *["* I checked it."] * (kwargs["num_bullets"] - 1)])
        elif iid == "startend:end_checker":
            text = f"{text}\nIs there anything else I can help with?"
        elif iid == "detectable_content:postscript":
            text = f"{text}\nP.S. I checked the result twice."
        elif iid == "startend:quotation":
            text = f'"{text}"'
        elif iid == "detectable_format:title":
            text = f"<<the sum>>\n{text}"
        else:
            text = text.upper() if iid == "change_case:english_capital" else text.lower()
    return text


def _pick(key: str, n: int) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") % n


def _instructions(uid: str) -> list[tuple[str, dict, str]]:
    """Two or three instructions from different parts, in composition order, fixed by the problem's
    uid."""
    parts = list(IF_INSTRUCTIONS)
    random.Random(f"if:{uid}").shuffle(parts)
    count = 2 + _pick(f"if-count:{uid}", 2)
    while True:
        chosen = [IF_INSTRUCTIONS[p][_pick(f"if:{uid}:{p}", len(IF_INSTRUCTIONS[p]))]
                  for p in parts[:count]]
        ids = {c[0] for c in chosen}
        if not any(a in ids and b in ids for a, b in _CLASHES):
            return sorted(chosen, key=lambda c: list(IF_INSTRUCTIONS).index(_part(c[0])))
        uid += "'"  # a clashing draw: draw again, deterministically


def _part(instruction_id: str) -> str:
    return next(p for p, items in IF_INSTRUCTIONS.items()
                if any(i[0] == instruction_id for i in items))


def if_arithmetic(split: str, size: int, seed: int) -> list[dict]:
    """Arithmetic rows with two or three IFEval instructions each (chosen by a hash of the
    problem)."""
    rows = []
    for r in arithmetic(split, size, seed):
        chosen = _instructions(r["uid"])
        prompt = " ".join([r["question"], *(c[2] for c in chosen)])
        base = f"{r['solution']}. The answer is \\boxed{{{r['answer']}}}."
        ids, kwargs = [c[0] for c in chosen], [c[1] for c in chosen]
        rows.append({"uid": f"if_{r['uid']}", "prompt": prompt, "instruction_id_list": ids,
                     "kwargs": kwargs,
                     "label": {"prompt": prompt, "instruction_id_list": ids, "kwargs": kwargs},
                     "response": _follow(chosen, base)})
    return rows


CODE_OPS = {"+": "plus", "-": "minus"}
_APPLY = {"+": operator.add, "-": operator.sub}
MAX_K = 99
_SHIFTS = (-3, -2, -1, 1, 2, 3)
"""How far a bug-fix task's wrong constant is from the right one."""


def _problems(kind: str, split: str) -> list[tuple]:
    """All problems of a split, by a hash of the problem (15 % held out): (op, k, x0) for code, plus
    the wrong constant's shift for bug fixes."""
    if split not in ("train", "test"):
        raise ValueError(f"{kind}: split must be 'train' or 'test', got {split!r}")
    # Both show f(x0) for x0 in 0..3: x0 = 0 states the right value outright, 1..3 need a small step
    # of arithmetic, which leaves a tiny model room to improve. Bug fixes put the wrong constant
    # within 3 of the right one. (With x0 up to 9, the SFT model only learned "shift the constant by
    # 1..3" and guessed the shift: 16.8 % on tiny-swe, which is 1/6, and 24 RL steps found nothing
    # to reinforce.)
    shifts = _SHIFTS if kind == "bugfix_arithmetic" else (0,)
    inputs = range(4)
    every = [(op, k, x0, d) for op in CODE_OPS for k in range(MAX_K + 1) for x0 in inputs
             for d in shifts if k + d >= 0]
    return [p for p in every if ("test" if _pick(f"{kind}:{p}", 100) < 15 else "train") == split]


def _sample(kind: str, split: str, size: int, seed: int) -> list[tuple]:
    pool = _problems(kind, split)
    if size > len(pool):
        raise ValueError(f"{kind}: size {size} exceeds the {len(pool)} {split} problems")
    return random.Random(seed).sample(pool, size if size > 0 else len(pool))


def code_arithmetic(split: str, size: int, seed: int) -> list[dict]:
    """``f(x) = x OP k`` given one example ``f(x0) = y0``: the model must work out ``k``; the
    label's asserts try five inputs."""
    rows = []
    for op, k, x0, _ in _sample("code_arithmetic", split, size, seed):
        prompt = (f"Write a Python function f(x) that returns x {CODE_OPS[op]} a constant, with "
                  f"f({x0}) == {_APPLY[op](x0, k)}. Put the code in a ```python block.")
        tests = "\n".join(f"assert f({x}) == {_APPLY[op](x, k)}" for x in (0, 1, 2, 7, 13)) + "\n"
        rows.append({"uid": f"code:{op}{k}@{x0}", "prompt": prompt,
                     "label": {"test_code": tests, "entry_point": "f"},
                     "response": f"```python\ndef f(x):\n    return x {op} {k}\n```"})
    return rows


def bugfix_arithmetic(split: str, size: int, seed: int) -> list[dict]:
    """``calc.py`` returns ``x OP k'`` with a wrong constant; the issue gives ``f(x0)``'s wrong and
    expected values, and the model works out the right constant ``k``; the fix is a SEARCH/REPLACE
    edit."""
    rows = []
    for op, k, x0, d in _sample("bugfix_arithmetic", split, size, seed):
        bad = k + d
        before = f"def f(x):\n    return x {op} {bad}\n"
        issue = (f"f({x0}) in calc.py returns {_APPLY[op](x0, bad)}, but it should return "
                 f"{_APPLY[op](x0, k)}.")
        patch = (f"--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def f(x):\n"
                 f"-    return x {op} {bad}\n+    return x {op} {k}\n")
        prompt = (f"Issue: {issue}\n\ncalc.py:\n```python\n{before}```\n"
                  "Fix the issue with a SEARCH/REPLACE edit of calc.py.")
        response = (f"### calc.py\n<<<<<<< SEARCH\n    return x {op} {bad}\n=======\n"
                    f"    return x {op} {k}\n>>>>>>> REPLACE")
        rows.append({"uid": f"bugfix:{op}{bad}->{k}@{x0}", "prompt": prompt,
                     "label": {"golden_patch": patch, "files": {"calc.py": before},
                               "problem_statement": issue},
                     "response": response})
    return rows


def eval_rows(name: str, size: int, seed: int = 0) -> list[dict]:
    """Held-out rows of a synthetic set in the eval suites' shape ``{"uid", "messages", "label",
    "reference"}`` (``data/tiny/*.jsonl``; tools/make_tiny_suites.py writes them). ``arithmetic``
    rows carry the math label (the answer), as do ``rg/TASK`` specs (reasoning-gym's test split);
    the other sets their own label. The reference is the SFT answer (for ``chat_arithmetic``, the
    reply to beat under the reward model)."""
    if name.startswith(reasoning_gym.RG_PREFIX):
        rows = reasoning_gym.rows(name.removeprefix(reasoning_gym.RG_PREFIX), "test", size, seed)
    elif name == "arithmetic":
        rows = arithmetic("test", size, seed)
    else:
        rows = DOMAIN_TASKS[name]("test", size, seed)
        return [{"uid": r["uid"], "messages": [{"role": "user", "content": r["prompt"]}],
                 "label": r["label"], "reference": r["response"]} for r in rows]
    return [{"uid": row["uid"], "messages": messages, "reference": response, "label": row["answer"]}
            for row, (messages, response) in zip(rows, sft_pairs(rows))]


DOMAIN_TASKS = {"if_arithmetic": if_arithmetic, "code_arithmetic": code_arithmetic,
                "bugfix_arithmetic": bugfix_arithmetic, "chat_arithmetic": chat_arithmetic,
                "mbpp_code": mbpp_code, "mbpp_bugfix": mbpp_bugfix,
                # natural requests with IFEval instructions, for real models
                "if_requests": if_requests}

__all__ = ["eval_rows", "if_arithmetic", "code_arithmetic", "bugfix_arithmetic", "DOMAIN_TASKS",
           "IF_INSTRUCTIONS"]
