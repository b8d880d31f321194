"""Code-switch (language-mixing) detection and the per-stage penalty applied to code-switched samples.

The failure mode (paper §4.3–4.5): an RL-trained reasoning model drifts into another language mid-response,
typically Chinese characters inside an English answer. Each stage sets its own penalty for it (PAPER.md,
"Code-switching penalties differ by stage"): RLHF gives a code-switched sample the batch minimum − 10
(§4.3.2), Math RL −1 (§4.5), Code RL 0 (§4.6: −1 hurt there).

The rule (:func:`is_code_switched`), applied to the whole response, thinking included:

1. drop what is not prose: fenced code blocks and inline code (backticks), display math (``$$...$$``,
   ``\\[...\\]``), inline math (``\\(...\\)`` and ``$...$`` within a line, so a lone currency ``$`` does not
   hide the rest of the text), and LaTeX command names (``\\frac``, ``\\alpha``);
2. count the letters left (Unicode letters, digits excluded) and those outside the expected script. Neutral,
   never foreign: Greek letters, letter-like symbols (ℝ, ℕ, µ), mathematical alphanumerics (𝑥) — these are
   notation, not language — and, when the expected script is not Latin, Latin letters (variables, units and
   identifiers are Latin in any language);
3. the response is code-switched when it has at least ``min_foreign_letters`` (default 2) foreign letters
   *and* they are at least ``min_foreign_share`` (default 0) of all its letters.

Why a count and not only a share: one CJK character is a syllable or a whole word, so a Chinese phrase in a
long English proof is a tiny share of the letters yet exactly the drift to penalise; two letters keep a single
stray symbol from flagging. Raise ``min_foreign_share`` to tolerate quoted foreign words in long texts.
Linear time on any input (a few regex passes and one pass over math/code delimiters).
"""
from __future__ import annotations

import functools
import re
from typing import Literal, Optional, Sequence, Union

_LATIN = ("A-Za-z\u00aa\u00ba\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u0250-\u02af\u1d00-\u1d7f\u1e00-\u1eff"
          "\u2c60-\u2c7f\ua720-\ua7ff\uab30-\uab6f\uff21-\uff3a\uff41-\uff5a")
_SCRIPTS: dict[str, str] = {
    "latin": _LATIN,
    "cyrillic": "\u0400-\u052f\u1c80-\u1c8f\u2de0-\u2dff\ua640-\ua69f",
    "greek": "\u0370-\u03ff\u1f00-\u1fff",
    "han": "\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3038-\u303b\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
           "\U00020000-\U0003134f",
    "kana": "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f",
    "hangul": "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af",
    "arabic": "\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufeff",
    "hebrew": "\u0590-\u05ff\ufb1d-\ufb4f",
    "devanagari": "\u0900-\u097f",
    "thai": "\u0e00-\u0e7f",
}
_NOTATION = "\u00b5\u2100-\u214f\U0001d400-\U0001d7ff" + _SCRIPTS["greek"]
"""Letters that are mathematical notation in any language: micro sign, letter-like symbols, math alphanumerics,
Greek."""

EXPECTED_SCRIPTS: dict[str, tuple[str, ...]] = {
    "latin": ("latin",),
    "chinese": ("han",),
    "japanese": ("han", "kana"),
    "korean": ("hangul", "han"),
    "cyrillic": ("cyrillic",),
    "greek": ("greek",),
    "arabic": ("arabic",),
    "hebrew": ("hebrew",),
    "devanagari": ("devanagari",),
    "thai": ("thai",),
}
"""Values of ``expected_script`` → the scripts a response in that language is written in."""

_LETTERS = re.compile(r"[^\W\d_]+")
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_DELIMITERS = re.compile(r"```|`|\$\$|\$|\\\[|\\\]|\\\(|\\\)")
_CLOSER = {"```": "```", "`": "`", "$$": "$$", "$": "$", "\\[": "\\]", "\\(": "\\)"}
_LINE_BOUND = {"`", "$"}
"""Inline spans that cannot cross a line: a ``$`` (currency) or backtick whose closer lies on a later line
opens nothing and stays prose."""


def strip_math_and_code(text: str) -> str:
    """``text`` without code blocks, inline code, math spans and LaTeX command names (step 1 of the rule).
    An opener never closed keeps the rest of the text as prose."""
    kept: list[str] = []
    prose_start = 0
    span: Optional[tuple[int, str]] = None  # (where the open span starts, the closer that ends it)
    for m in _DELIMITERS.finditer(text):
        token = m.group()
        if span is None:
            if token in _CLOSER:
                kept.append(text[prose_start:m.start()])
                span = (m.start(), _CLOSER[token])
        elif token == span[1]:
            if span[1] in _LINE_BOUND and text.find("\n", span[0], m.start()) >= 0:
                kept.append(text[span[0]:m.start()])  # the opener was prose; this token opens a new span
                span = (m.start(), _CLOSER[token])
            else:
                span, prose_start = None, m.end()
    kept.append(text[prose_start:] if span is None else text[span[0]:])
    return _LATEX_COMMAND.sub(" ", "".join(kept))


def _count(pattern: re.Pattern, text: str) -> int:
    """Characters of ``text`` that ``pattern`` (a class with ``+``) matches; runs are matched in C."""
    return len(text) - len(pattern.sub("", text))


@functools.lru_cache(maxsize=None)
def _foreign_letter_pattern(expected_script: str) -> re.Pattern:
    """Letters that are neither in the expected scripts nor neutral (step 2 of the rule)."""
    if expected_script not in EXPECTED_SCRIPTS:
        raise ValueError(f"unknown expected_script {expected_script!r}; known: {sorted(EXPECTED_SCRIPTS)}")
    allowed = "".join(_SCRIPTS[s] for s in EXPECTED_SCRIPTS[expected_script]) + _NOTATION
    if expected_script != "latin":
        allowed += _LATIN
    return re.compile(rf"[^\W\d_{allowed}]+")


def foreign_letter_counts(text: str, expected_script: str = "latin") -> tuple[int, int]:
    """``(foreign letters, all letters)`` in the prose of ``text`` (steps 1 and 2 of the rule)."""
    prose = strip_math_and_code(text)
    return _count(_foreign_letter_pattern(expected_script), prose), _count(_LETTERS, prose)


def is_code_switched(text: str, expected_script: str = "latin", min_foreign_letters: int = 2,
                     min_foreign_share: float = 0.0) -> bool:
    """True when ``text`` mixes in another script: at least ``min_foreign_letters`` letters outside
    ``expected_script`` (a key of :data:`EXPECTED_SCRIPTS`), making up at least ``min_foreign_share`` of its
    letters, after math, code and notation are set aside (module docstring). Non-strings are False."""
    if not isinstance(text, str):
        return False
    prose = strip_math_and_code(text)
    foreign = _count(_foreign_letter_pattern(expected_script), prose)
    if foreign < min_foreign_letters:
        return False
    return foreign >= min_foreign_share * _count(_LETTERS, prose)


BATCH_MIN_MINUS_10 = "batch_min_minus_10"
CodeSwitchPenalty = Union[float, Literal["batch_min_minus_10"], None]
"""A stage's setting: the reward a code-switched sample gets (Math RL −1.0, Code RL 0.0), RLHF's
"batch_min_minus_10", or None for no penalty."""


def apply_code_switch_penalty(rewards: Sequence[float], flags: Sequence[bool],
                              penalty: CodeSwitchPenalty) -> list[float]:
    """``rewards`` with every flagged sample's reward replaced by the penalty (a new list).

    A number replaces the reward (paper: "−1 for code-switching", §4.5): a correct but code-switched answer
    gets −1, not 1 − 1. ``"batch_min_minus_10"`` (RLHF, §4.3.2) gives flagged samples min(rewards) − 10, the
    minimum over the whole batch passed in (all samples, before any penalty), so a code-switched answer always
    ranks below every other in its group whatever the reward model's scale. None returns the rewards as is.
    """
    if len(rewards) != len(flags):
        raise ValueError(f"{len(rewards)} rewards but {len(flags)} code-switch flags")
    is_number = isinstance(penalty, (int, float)) and not isinstance(penalty, bool)
    if not (penalty is None or penalty == BATCH_MIN_MINUS_10 or is_number):
        raise ValueError(f"code-switch penalty must be a number, {BATCH_MIN_MINUS_10!r} or None, got {penalty!r}")
    if penalty is None or not any(flags):
        return [float(r) for r in rewards]
    value = min(rewards) - 10.0 if penalty == BATCH_MIN_MINUS_10 else float(penalty)
    return [value if flagged else float(r) for r, flagged in zip(rewards, flags)]


__all__ = ["is_code_switched", "foreign_letter_counts", "strip_math_and_code", "apply_code_switch_penalty",
           "EXPECTED_SCRIPTS", "BATCH_MIN_MINUS_10", "CodeSwitchPenalty"]
