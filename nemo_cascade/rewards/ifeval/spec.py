"""What a verifiable instruction is: an id, its typed kwargs, and a check ``check(text, **kwargs) ->
bool`` (the unit of the IF-RL reward, paper §4.4).

Every instruction group module (``keywords``, ``length``, ...) declares its instructions with
:class:`Instruction`; :func:`bind` turns one ``(instruction_id, kwargs)`` pair of a label into a
ready check, raising a one-line ValueError for a malformed label. Labels come from IFEval / IFBench
rows, which list *every* kwarg name of the taxonomy with ``null`` for the unused ones, so ``None``
means "absent" and unknown names are only an error when they carry a value.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

RELATIONS = ("less than", "at least")
"""IFEval's comparison words: ``less than`` is ``count < n``, ``at least`` is ``count >= n``."""


@dataclass(frozen=True)
class Arg:
    """One keyword argument of an instruction.

    ``kind`` is ``int``, ``float``, ``str``, ``list`` (a list of strings), ``"regex"`` (a string
    that the reference checkers use as a regular expression, so it must compile) or ``"text"`` (a
    string that must not be blank: where the reference draws a random word for an empty one, a label
    must name it). ``int`` accepts integral floats (IFBench stores counts as ``13.0``). ``choices``
    restricts a ``str``; ``minimum`` bounds a number.
    """

    kind: Any
    optional: bool = False
    choices: tuple = ()
    minimum: Optional[float] = None
    default: Any = None


@dataclass(frozen=True)
class Instruction:
    """A verifiable instruction: ``check(text, **kwargs)`` is True when ``text`` follows it.

    ``check`` is only called on non-blank text (the callers treat a blank response as failing, as
    the reference evaluators do) and must not raise on any string. ``validate`` checks
    cross-argument constraints (e.g. ``nth_paragraph <= num_paragraphs``) and returns an error
    message or None.
    """

    id: str
    check: Callable[..., bool]
    args: Mapping[str, Arg] = field(default_factory=dict)
    validate: Optional[Callable[..., Optional[str]]] = None


def relation_holds(count: float, relation: str, threshold: float) -> bool:
    """``count < threshold`` for ``less than``, ``count >= threshold`` for ``at least``."""
    return count < threshold if relation == "less than" else count >= threshold


def _coerce(iid: str, name: str, arg: Arg, value: Any) -> Any:
    where = f"{iid}: kwarg {name!r}={value!r:.80}"
    if arg.kind in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where} must be a number")
        if not math.isfinite(value):  # JSON's NaN / Infinity: no count or threshold
            raise ValueError(f"{where} must be a finite number")
        if arg.kind is int:
            if value != int(value):
                raise ValueError(f"{where} must be an integer")
            value = int(value)
        if arg.minimum is not None and value < arg.minimum:
            raise ValueError(f"{where} must be >= {arg.minimum}")
        return value
    if arg.kind is list:
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str)
                                                           and v for v in value) or not value:
            raise ValueError(f"{where} must be a non-empty list of non-empty strings")
        return list(value)
    if not isinstance(value, str):
        raise ValueError(f"{where} must be a string")
    if arg.choices and value not in arg.choices:
        raise ValueError(f"{where} must be one of {list(arg.choices)}")
    if arg.kind == "text" and not value.strip():
        raise ValueError(f"{where} must not be blank")
    if arg.kind == "regex":
        if not value.strip():
            raise ValueError(f"{where} must not be blank")
        problem = pattern_problem(value)
        if problem:
            raise ValueError(f"{where} {problem}")
    return value


_BACKTRACKING = re.compile(r"[*+?{}()|\\]")


def pattern_problem(pattern: str) -> Optional[str]:
    """Why a label's string cannot be used as the regular expression the reference checkers make of
    it, or None.

    The reference matches keywords, markers and splitters *as regexes* against the response. A label
    is data, and a pattern with quantifiers or groups (``(a+)+$``, ``a?a?a?…aaa``) can backtrack for
    hours on a megabyte of model output — one data row could stall every reward worker. No IFEval or
    IFBench label uses regex syntax beyond ``.``, ``^``, ``$`` and ``[...]``; those stay, everything
    that can nest or repeat goes.
    """
    try:
        re.compile(pattern)
    except re.error as e:
        return f"is not a valid regular expression ({e})"
    if _BACKTRACKING.search(pattern):
        return ("uses regex quantifiers, groups, alternation or escapes (* + ? { } ( ) | \\), "
                "which can backtrack for hours on model output; labels match words and markers "
                "literally")
    return None


def bind(instruction: Instruction, kwargs: Any) -> dict[str, Any]:
    """Validated, typed kwargs for ``instruction.check``; ValueError (one line) if the label is
    malformed."""
    iid = instruction.id
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, Mapping):
        raise ValueError(f"{iid}: kwargs must be a dict, got {type(kwargs).__name__}")
    given = {k: v for k, v in kwargs.items() if v is not None}
    unknown = sorted(set(given) - set(instruction.args))
    if unknown:
        raise ValueError(f"{iid}: unexpected kwargs {unknown} (accepted: "
                         f"{sorted(instruction.args)})")
    bound: dict[str, Any] = {}
    for name, arg in instruction.args.items():
        if name in given:
            bound[name] = _coerce(iid, name, arg, given[name])
        elif arg.optional:
            bound[name] = arg.default
        else:
            raise ValueError(f"{iid}: missing kwarg {name!r}")
    if instruction.validate is not None:
        problem = instruction.validate(**bound)
        if problem:
            raise ValueError(f"{iid}: {problem}")
    return bound


def registry(*groups: tuple[Instruction, ...]) -> dict[str, Instruction]:
    """Id → instruction over several group tuples; a duplicate id is a programming error."""
    out: dict[str, Instruction] = {}
    for group in groups:
        for ins in group:
            if ins.id in out:
                raise AssertionError(f"instruction id {ins.id!r} declared twice")
            out[ins.id] = ins
    return out


__all__ = ["Arg", "Instruction", "RELATIONS", "bind", "registry", "relation_holds"]
