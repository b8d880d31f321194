"""How a math problem is put to the model: the one place that phrases a math prompt.

The math reward reads the last ``\\boxed{}`` of the answer (paper §4.5), so the prompt asks for one.
The released math RL set holds bare problems and short answers, while evaluation has always appended
the AceMath / AceReason request "Please reason step by step, and put your final answer within
\\boxed{}.". Training rows (``data.loader.load_prompts``, domain ``math``), the ``benchmark:gsm8k``
prompt set and the math evaluation suites (``evaluate.suites``) all phrase their prompts here, so a
model is trained on the prompt it is evaluated with. The request comes after the problem and a blank
line; a prompt that already asks for ``\\boxed`` (the synthetic and reasoning-gym sets, data written
with its own instruction) is left as it is, so no prompt asks twice. ``Data.math_instruction`` sets
the request ("" keeps every row as it is).
"""
from __future__ import annotations

import re
from typing import Sequence

from ..config import Data

MATH_INSTRUCTION: str = Data().math_instruction
"""The default request, ``Data.math_instruction``: "Please reason step by step, and put your final
answer within \\boxed{}." (AceMath / AceReason evaluation, the phrasing the suites have always
used)."""

_ASKS_FOR_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")


def asks_for_boxed_answer(text: str) -> bool:
    """Does ``text`` already ask for (or show) a ``\\boxed`` / ``\\fbox`` answer?"""
    return bool(_ASKS_FOR_BOX.search(text))


def math_prompt(problem: str, instruction: str = MATH_INSTRUCTION) -> str:
    """The user message for ``problem``: the problem, a blank line and ``instruction``; the problem
    alone when ``instruction`` is empty or the problem already asks for a boxed answer."""
    if not instruction or asks_for_boxed_answer(problem):
        return problem
    return f"{problem}\n\n{instruction}"


def with_math_instruction(messages: Sequence[dict],
                          instruction: str = MATH_INSTRUCTION) -> list[dict]:
    """``messages`` with the last user turn phrased by :func:`math_prompt`; unchanged when any turn
    (a system prompt, say) already asks for a boxed answer. A new list; the input is not
    modified."""
    out = [dict(m) for m in messages]
    if not instruction or any(asks_for_boxed_answer(m.get("content", "")) for m in out):
        return out
    for m in reversed(out):
        if m.get("role") == "user":
            m["content"] = math_prompt(m["content"], instruction)
            break
    return out


__all__ = ["MATH_INSTRUCTION", "asks_for_boxed_answer", "math_prompt", "with_math_instruction"]
