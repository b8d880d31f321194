"""A rule-based math grader in the style of AceMath's evaluation, the verifier the paper's math RL
used (§4.5: "the AceMath rule verifier"); ``Reward.math_grader="rule"`` trains with it instead of
math-verify.

AceMath grades with the toolkit it inherited from the Qwen2.5-Math and DeepSeek-Math evaluations:
clean the two boxed strings, compare them as text, then as numbers with a relative tolerance, then
as sympy expressions. This module is our own implementation of that recipe (no code is shared with
those toolkits); its decisions:

1. normalise (:func:`normalize`): drop ``$``, spacing commands, ``\\left``/``\\right``,
   ``\\displaystyle``, a wrapping ``\\boxed{}``, degrees (``^\\circ``, ``°``), percent signs,
   thousands separators, a trailing ``.``; units after a number (``5\\text{ cm}^2``, ``5 cm``, ``18
   dollars``); ``\\text{}``-like wrappers kept by their content; ``\\dfrac``/``\\tfrac`` →
   ``\\frac``, ``\\frac12`` → ``\\frac{1}{2}``, ``\\sqrt3`` → ``\\sqrt{3}``; ``x=``/``x \\in``
   before the answer (a variable name of at most two characters, as in ``a=1, b=2``); a
   multiple-choice letter out of its parentheses (``(C)`` → ``C``); the spellings of ∞ and ∅;
2. equal as text after normalising (case and spaces ignored) → equal;
3. both numbers (integers, decimals, ``a/b``, ``\\frac{a}{b}``) → equal iff within 1e-4 relative of
   the reference or, as AceMath allows for percentages, of the reference × 100 or ÷ 100 (so ``50``
   matches ``0.5`` and ``50\\%`` matches ``0.5``; math-verify refuses the former); two integers must
   be equal exactly (ours: the toolkit's tolerance would accept a count of 1000001 for 1000000);
4. tuples, intervals and lists (split at top-level commas): tuples and intervals element by element,
   in order, with the same brackets (``(1,2]`` ≠ ``[1,2]``); sets ``\\{…\\}``, bare lists ``1, 2``
   and unions (``\\cup``) as multisets, in any order; a lone answer matches a one-element set;
5. otherwise sympy: both parsed from LaTeX (latex2sympy2_extended, an ANTLR parser — never ``eval``,
   so model text runs no code) and equal when ``a == b``, ``simplify(a − b) == 0`` (matrices
   entrywise), or both are numbers within 1e-4 relative; two equations ``a = b`` when ``lhs − rhs``
   agree up to sign.

Anything that cannot be parsed is not equal; :func:`grade` never raises on model output. Steps 1–4
are linear scans or bounded by the input length; step 5 may run for as long as sympy takes
(``10^{10^{10}}``), so the reward runs :func:`grade` in killable worker processes with a per-sample
timeout (``rewards.workers``, ``Reward.verify_timeout_s``), as it runs math-verify. Inputs longer
than :data:`MAX_CHARS` are compared as text only.
"""
from __future__ import annotations

import logging
import math
import re
from fractions import Fraction
from typing import Optional

REL_TOL = 1e-4
"""Relative tolerance of numeric comparisons (AceMath's toolkit compares numbers with
``rel_tol=1e-4``)."""
PERCENT_SCALED = True
"""A number also matches the reference × 100 and ÷ 100 (AceMath's ``include_percentage``): a
percentage may be answered as a fraction of 1 or the other way round."""
MAX_CHARS = 1000
"""Longer strings are compared as normalised text only (no parsing): no real final answer is that
long."""
_MAX_NUMBER_CHARS = 64
"""Longer digit strings are not converted to numbers (Fraction of a 10^6-digit string is slow)."""
_MAX_ITEMS = 64
"""Lists longer than this are compared as text (a multiset match is quadratic in the items)."""

# -------------------------------------------------------------------------------------- normalising

_SPACING = re.compile(r"(?<!\\)\\[,;: ]|\\q?quad(?![A-Za-z])|~")  # not the "\\" of a matrix row
_SIZING = re.compile(
    r"\\(?:left|right|bigl|bigr|Bigl|Bigr|biggl|biggr|big|Big|bigg|Bigg)(?![A-Za-z])")
_DEGREES = re.compile(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|°|\\degree(?![A-Za-z])")
_PERCENT = re.compile(r"\\%|%|\\text\{\s*percent\s*\}|\s+percent$")
_TEXT_WRAPPER = re.compile(
    r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_NUMBER_TEXT = r"[-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)"
_UNIT_AFTER_NUMBER = re.compile(
    rf"^({_NUMBER_TEXT}|[-+]?\\frac\{{\d+\}}\{{\d+\}})"  # a number or a plain fraction,
    # then \text{unit} or " words"
    r"\s*(?:\\(?:text|mbox|mathrm)\s*\{[^{}]*\}|\s[A-Za-z][A-Za-z .]*)"
    r"(?:\^\s*\{?\d\}?)?$")                                                # maybe squared or cubed
_TRAILING_TEXT_UNIT = re.compile(
    r"(?<=\S)\s*\\(?:text|mbox|mathrm)\s*\{\s[^{}]*\}(?:\^\s*\{?\d\}?)?$")
_FRAC_SHORT = re.compile(r"\\frac\s*(\d)\s*(\d)")
_FRAC_FIRST_SHORT = re.compile(r"\\frac\s*(\d)\s*\{")
_FRAC_SECOND_SHORT = re.compile(r"\\frac\s*(\{[^{}]*\})\s*(\d)")
_SQRT_SHORT = re.compile(r"\\sqrt\s*([0-9A-Za-z])")
_PLAIN_SQRT = re.compile(r"(?<![\\A-Za-z])sqrt\s*\(([^()]*)\)")
_PLAIN_PI = re.compile(r"(?<![\\A-Za-z])pi(?![A-Za-z])")
_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_VARIABLE = re.compile(r"^\s*(?:[A-Za-z]|[A-Za-z]_\{?\w{1,2}\}?|\\[A-Za-z]+|[A-Za-z]{2})\s*$")
_IN_PREFIX = re.compile(r"^\s*[A-Za-z]\s*\\in\s*")
_CHOICE = re.compile(r"^\(\s*([A-Ea-e])\s*\)$")
_INFINITY = re.compile(r"(?<![A-Za-z\\])(?:infinity|inf)(?![A-Za-z])")
_EMPTY_SET = re.compile(r"^(?:\\varnothing|\\emptyset|\\\{\s*\\\}|∅|\{\s*\})$")


def _strip_wrapper(s: str, head: str) -> str:
    """``s`` without one ``head{...}`` around all of it (braces matched), else ``s``."""
    if not (s.startswith(head) and s.endswith("}")):
        return s
    depth = 0
    for i in range(len(head) - 1, len(s)):
        depth += {"{": 1, "}": -1}.get(s[i], 0)
        if depth == 0:
            return s[len(head):-1] if i == len(s) - 1 else s
    return s


def _split_top(s: str, sep: str = ",") -> list[str]:
    """``s`` split at the ``sep`` that lie outside every bracket (``()[]{}``; brackets of either
    kind nest with each other, so the interval ``(1,2]`` holds one level)."""
    parts, depth, start = [], 0, 0
    i = 0
    while i < len(s):
        ch = s[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and s.startswith(sep, i):
            parts.append(s[start:i])
            start = i + len(sep)
            i = start
            continue
        i += 1
    parts.append(s[start:])
    return parts


def _drop_assignments(s: str) -> str:
    """``x=5`` → ``5`` and ``a=1, b=2`` → ``1,2``: the value after a short variable name (AceMath
    keeps the right-hand side when the left one has at most two characters); anything else is
    kept."""
    parts = _split_top(s)
    out = []
    for part in parts:
        sides = _split_top(part, "=")
        if len(sides) == 2 and _VARIABLE.match(sides[0]) and sides[1].strip():
            out.append(sides[1].strip())
        else:
            out.append(part.strip())
    return ",".join(out) if len(out) > 1 else out[0]


def normalize(answer: str) -> str:
    """An answer as AceMath-style grading compares it (see the module docstring, step 1). Linear in
    the length."""
    s = str(answer).strip()
    s = _strip_wrapper(s, "\\boxed{")
    s = s.replace("\n", " ").replace("\\$", "").replace("$", "").replace("\\displaystyle", "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("{,}", ",")
    s = _SPACING.sub(" ", s).replace("\\!", "")  # \! is a negative space: 1,\!000
    s = _SIZING.sub("", s)
    s = _DEGREES.sub("", s)
    s = _PERCENT.sub("", s).strip()
    s = s.rstrip(". ").strip()
    s = _PLAIN_SQRT.sub(r"\\sqrt{\1}", s)  # before units: "2 pi" is 2π, not 2 of a unit
    s = _PLAIN_PI.sub(r"\\pi", s)
    s = _INFINITY.sub(r"\\infty", s)
    m = _UNIT_AFTER_NUMBER.match(s)
    if m:
        s = m.group(1)
    s = _TRAILING_TEXT_UNIT.sub("", s)
    for _ in range(3):  # nested wrappers: \text{\textbf{C}}
        s = _TEXT_WRAPPER.sub(lambda t: t.group(1), s)
    s = s.strip().rstrip(".").strip()
    s = _IN_PREFIX.sub("", s)
    if "=" in s:
        s = _drop_assignments(s)
    s = _FRAC_SHORT.sub(r"\\frac{\1}{\2}", s)
    s = _FRAC_FIRST_SHORT.sub(r"\\frac{\1}{", s)
    s = _FRAC_SECOND_SHORT.sub(r"\\frac\1{\2}", s)
    s = _SQRT_SHORT.sub(r"\\sqrt{\1}", s)
    s = re.sub(r"\s+", " ", s).strip()
    if _THOUSANDS.match(s):  # 1,000 (not "1, 234": a list)
        s = s.replace(",", "")
    m = _CHOICE.match(s)
    if m:
        s = m.group(1)
    if _EMPTY_SET.match(s):
        s = "\\emptyset"
    if s.startswith("+"):
        s = s[1:].strip()
    if s.startswith(".") and s[1:2].isdigit():
        s = "0" + s
    return s


def _compact(s: str) -> str:
    return re.sub(r"\s+", "", s).lower()


# ------------------------------------------------------------------------------------------ numbers

_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:/\d+)?")
_FRAC = re.compile(r"([-+]?)\\frac\{([-+]?\d+(?:\.\d+)?)\}\{(\d+(?:\.\d+)?)\}")


def as_number(s: str) -> Optional[Fraction]:
    """The exact value of an integer, decimal, ``a/b`` or ``\\frac{a}{b}`` (signed), else None."""
    s = s.replace(" ", "")
    if not s or len(s) > _MAX_NUMBER_CHARS:
        return None
    m = _FRAC.fullmatch(s)
    try:
        if m:
            value = Fraction(m.group(2)) / Fraction(m.group(3))
            return -value if m.group(1) == "-" else value
        return Fraction(s) if _NUMBER.fullmatch(s) else None
    except (ValueError, ZeroDivisionError):
        return None


def _close(a: Fraction, b: Fraction) -> bool:
    if a == b:
        return True
    if a.denominator == 1 and b.denominator == 1:  # ours: counts are exact (1000001 is not 1000000)
        return False
    try:
        return math.isclose(float(a), float(b), rel_tol=REL_TOL)
    except OverflowError:
        return False


def _numbers_equal(a: Fraction, b: Fraction, scaled: bool) -> bool:
    candidates = (b, b * 100, b / 100) if scaled else (b,)
    return any(_close(a, c) for c in candidates)


# --------------------------------------------------------------------------------------- structures

_SET_OPEN, _SET_CLOSE = "\\{", "\\}"


def _enclosed(s: str, opens: str, closes: str) -> bool:
    """Does the bracket at ``s[0]`` close at ``s[-1]`` (any bracket kind, nesting counted)?"""
    if len(s) < 2 or s[0] not in opens or s[-1] not in closes:
        return False
    depth = 0
    for i, ch in enumerate(s):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i == len(s) - 1
    return False


def _structure(s: str) -> Optional[tuple[str, list[str]]]:
    """``(kind, items)`` for a sequence answer, else None. Kinds: ``"set"`` (``\\{…\\}``, bare
    lists, unions of intervals: order-free) or the two brackets of a tuple / interval (``"(]"``: in
    order)."""
    if s.startswith(_SET_OPEN) and s.endswith(_SET_CLOSE) and _enclosed(s[1:], "{", "}"):
        inner = s[2:-2].strip()
        return "set", ([p.strip() for p in _split_top(inner)] if inner else [])
    unions = _split_top(s, "\\cup")
    if len(unions) > 1:
        return "set", [p.strip() for p in unions]
    if _enclosed(s, "([", ")]"):
        items = _split_top(s[1:-1])
        if len(items) > 1:
            return s[0] + s[-1], [p.strip() for p in items]
        return None
    items = _split_top(s)
    if len(items) > 1:
        return "set", [p.strip() for p in items]
    return None


def _structures_equal(pred: tuple[str, list[str]], ref: tuple[str, list[str]]) -> bool:
    (pkind, pitems), (rkind, ritems) = pred, ref
    if pkind != rkind or len(pitems) != len(ritems) or len(pitems) > _MAX_ITEMS:
        return False
    if pkind != "set":
        return all(_equal(p, r, scaled=False) for p, r in zip(pitems, ritems))
    unmatched = list(ritems)
    for p in pitems:
        hit = next((k for k, r in enumerate(unmatched) if _equal(p, r, scaled=False)), None)
        if hit is None:
            return False
        unmatched.pop(hit)
    return True


# -------------------------------------------------------------------------------------------- sympy

def _parse(s: str):
    """A sympy object for a LaTeX (or plain) expression, or None. latex2sympy2_extended's ANTLR
    parser: model text is parsed, never evaluated as Python."""
    from latex2sympy2_extended import latex2sympy

    try:
        return latex2sympy(s)
    except Exception:  # noqa: BLE001 - any parse failure means "not an expression", i.e. not equal
        return None


def _difference_is_zero(a, b) -> bool:
    import sympy

    if isinstance(a, sympy.MatrixBase) or isinstance(b, sympy.MatrixBase):
        if not (isinstance(a, sympy.MatrixBase)
                and isinstance(b, sympy.MatrixBase)) or a.shape != b.shape:
            return False
        return all(sympy.simplify(x - y) == 0 for x, y in zip(a, b))
    if not (isinstance(a, sympy.Expr) and isinstance(b, sympy.Expr)):
        return False
    if sympy.simplify(a - b) == 0:
        return True
    if a.is_number and b.is_number:
        x, y = complex(sympy.N(a)), complex(sympy.N(b))
        finite = all(math.isfinite(v) for v in (x.real, x.imag, y.real, y.imag))
        return finite and abs(x - y) <= REL_TOL * max(abs(x), abs(y))
    return False


def _symbolic_equal(pred: str, ref: str) -> bool:
    import sympy

    a, b = _parse(pred), _parse(ref)
    if a is None or b is None:
        return False
    try:
        if a == b:
            return True
        if isinstance(a, sympy.Eq) and isinstance(b, sympy.Eq):
            da, db = a.lhs - a.rhs, b.lhs - b.rhs
            return _difference_is_zero(da, db) or _difference_is_zero(da, -db)
        return _difference_is_zero(a, b)
    # sympy raises many kinds on odd input: the answer is not shown equal
    except Exception:  # noqa: BLE001
        return False


# ------------------------------------------------------------------------------------------ grading

def _equal(pred: str, ref: str, scaled: bool) -> bool:
    """Steps 2–5 of the module docstring on two normalised strings."""
    if not pred or not ref:
        return False
    if _compact(pred) == _compact(ref):
        return True
    a, b = as_number(pred), as_number(ref)
    if a is not None and b is not None:
        return _numbers_equal(a, b, scaled)
    sp, sr = _structure(pred), _structure(ref)
    if sp is not None or sr is not None:
        if sp is None and sr[0] == "set":  # a lone answer against a one-element set
            sp = ("set", [pred])
        if sr is None and sp[0] == "set":
            sr = ("set", [ref])
        return sp is not None and sr is not None and _structures_equal(sp, sr)
    return _symbolic_equal(pred, ref)  # equations included: sympy Eq on both sides


def grade(predicted: str, reference: str) -> bool:
    """Is ``predicted`` (the model's final answer) equal to ``reference`` under the AceMath-style
    rules? Never raises on model output; may take long in sympy (run it under a timeout, see the
    module docstring)."""
    if not isinstance(predicted, str) or not isinstance(reference, (str, int, float)):
        return False
    reference = str(reference)
    if len(predicted) > MAX_CHARS or len(reference) > MAX_CHARS:
        return bool(predicted.strip()) and _compact(predicted) == _compact(reference)
    return _equal(normalize(predicted), normalize(reference), scaled=PERCENT_SCALED)


def load_rule_grader() -> None:
    """Worker initializer: load the LaTeX parser and sympy and grade one pair, so the first real
    sample's timeout is not spent on start-up; latex2sympy2_extended's warnings about odd input are
    limited to errors."""
    logging.getLogger("latex2sympy2_extended").setLevel(logging.ERROR)
    grade("3\\sqrt{2}", "\\sqrt{18}")


__all__ = ["grade", "normalize", "as_number", "load_rule_grader", "REL_TOL", "PERCENT_SCALED",
           "MAX_CHARS"]
