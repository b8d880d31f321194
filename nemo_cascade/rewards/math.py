"""The math verifier: 1.0 when the last ``\\boxed{...}`` of the answer equals the reference, else 0.0.

Three separate steps, so the equivalence check can later be swapped for math-verify in worker processes
without touching the rest: :func:`extract_boxed` (the model's final answer), :func:`normalize` and
:func:`is_equivalent` (string/number equality for this first version), :func:`math_reward` (the REWARDS entry).

Thinking responses (DESIGN.md "Rewards", paper §3.1.2): only the text after ``</think>`` is judged; a
response whose thinking never closed scores 0. The verifier never raises on model output: any string up to
1 MB is scored in linear time (one regex pass over ``\\boxed{`` and braces; numbers are parsed only from short,
exponent-free strings, so no huge-integer arithmetic can be triggered).
"""
from __future__ import annotations

import re
from fractions import Fraction
from typing import Any, Optional

from ..data.chat import split_thinking

_TOKENS = re.compile(r"\\(?:boxed|fbox) *\{|\{|\}")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:/\d+)?")
_FRAC = re.compile(r"([+-]?)\\[dt]?frac\{(\d+)\}\{(\d+)\}")
_MAX_NUMBER_CHARS = 64
"""Longer strings are compared as text: Fraction of a 10^6-digit string would be slow."""


def extract_boxed(text: str) -> Optional[str]:
    """Content of the last complete ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text``, braces matched.

    "Last" is the complete box that starts last, so ``\\boxed{1} ... \\boxed{2}`` gives ``"2"`` and a box
    truncated before its closing brace is skipped. Stray ``}`` outside any brace are ignored. None if no box
    is complete. Linear in ``len(text)``: each brace is visited once; open boxes are kept on a stack.
    """
    depth = 0
    open_boxes: list[tuple[int, int]] = []  # (depth outside the box, index where its content starts)
    best: Optional[tuple[int, int]] = None  # (content start, content end) of the last-starting complete box
    for m in _TOKENS.finditer(text):
        tok = m.group()
        if tok == "}":
            if depth == 0:
                continue
            depth -= 1
            if open_boxes and open_boxes[-1][0] == depth:
                _, start = open_boxes.pop()
                if best is None or start > best[0]:
                    best = (start, m.start())
        else:
            if tok != "{":
                open_boxes.append((depth, m.end()))
            depth += 1
    return None if best is None else text[best[0]:best[1]]


def normalize(answer: str) -> str:
    """Strip what does not change a final answer: whitespace, ``$``, ``\\!``/``\\,`` spacing, ``\\left``/
    ``\\right``, a trailing ``.``, a leading ``+``, and one wrapping ``\\boxed{}``/``\\text{}``."""
    s = answer.strip()
    if s.startswith("\\boxed{") and s.endswith("}") and extract_boxed(s) == s[len("\\boxed{"):-1]:
        s = s[len("\\boxed{"):-1]  # a reference written as \boxed{68}
    s = re.sub(r"\s+", "", s)
    for junk in ("$", "\\!", "\\,", "\\;", "\\left", "\\right"):
        s = s.replace(junk, "")
    if s.startswith("\\text{") and s.endswith("}") and "{" not in s[len("\\text{"):-1]:
        s = s[len("\\text{"):-1]
    s = s.rstrip(".")
    if s.startswith("+"):
        s = s[1:]
    return s


def _as_number(s: str) -> Optional[Fraction]:
    """Exact value of an integer, decimal, ``a/b`` or ``\\frac{a}{b}``; None for anything else."""
    if len(s) > _MAX_NUMBER_CHARS:
        return None
    m = _FRAC.fullmatch(s)
    if m:
        s = f"{m.group(1)}{m.group(2)}/{m.group(3)}"
    if not _NUMBER.fullmatch(s):
        return None
    try:
        return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None


def is_equivalent(predicted: str, reference: Any) -> bool:
    """Do two final answers agree? Equal after :func:`normalize`, or equal as numbers (``68`` == ``68.0``,
    ``1/2`` == ``0.5``). This is the piece a math-verify backend replaces."""
    pred, ref = normalize(predicted), normalize(str(reference))
    if not pred or not ref:
        return False
    if pred == ref:
        return True
    a, b = _as_number(pred), _as_number(ref)
    return a is not None and b is not None and a == b


def math_reward(response: str, label: Any) -> float:
    """REWARDS["math"]: 1.0 if the last boxed answer (after ``</think>`` in a thinking response) matches
    ``label`` (the reference answer string), else 0.0. Never raises on model output."""
    try:
        if not isinstance(response, str):
            return 0.0
        _, answer, terminated = split_thinking(response)
        if not terminated:
            return 0.0
        boxed = extract_boxed(answer)
        return 1.0 if boxed is not None and is_equivalent(boxed, label) else 0.0
    except Exception:  # a verifier bug must cost one sample's reward, never the run
        return 0.0


__all__ = ["extract_boxed", "normalize", "is_equivalent", "math_reward"]
