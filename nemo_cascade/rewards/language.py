"""Code-switch (language-mixing) detection and the per-stage penalty applied to code-switched
samples.

The failure mode (paper §4.3–4.5): an RL-trained reasoning model drifts into another language
mid-response, typically Chinese characters inside an English answer. Each stage sets its own penalty
for it: RLHF gives a code-switched sample the batch minimum − 10 (§4.3.2), Math RL −1 (§4.5), Code
RL 0 (§4.6, T19: −1 hurt).

Which language a response must keep to depends on its prompt (:func:`reply_scripts`, one rule per
stage):

- ``english_prompt_only`` (RLHF, §4.3.2: the penalty applies "when the prompt is purely in English"
  and the response has non-English tokens): a prompt whose prose letters are all Latin (or that has
  none) expects a Latin-script response; a prompt with any other script — a Chinese, Japanese or
  Russian question in the multilingual RLHF prompts — is never penalised, whatever the answer's
  language;
- ``prompt_language`` (Math RL, §4.5.2: a response in a language "different from the original
  prompt's"): the response may use the scripts of its prompt's prose and Latin. A Chinese answer to
  a Chinese problem passes, Cyrillic inside it does not; Chinese inside an answer to an English
  problem is penalised. Code RL's penalty is 0 (T19), so its rule only matters when a user sets a
  penalty; it takes this one;
- ``fixed_script``: every response against one language (``Reward.code_switch_script``), the prompt
  unread.

How the prompt's language is read and when a response counts as code-switched (what is prose,
which letters are neutral, the thresholds, why a count and not only a share) is in
docs/rewards.md, "Code-switching: how it is read". Linear time on any input; neither a response
nor a prompt ever raises (a non-string is treated as empty).
"""
from __future__ import annotations

import functools
import re
import typing
import unicodedata
from typing import Collection, Literal, Optional, Sequence, Union

_LATIN = ("A-Za-z\u00aa\u00ba\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u0250-\u02af"
          "\u1d00-\u1d7f\u1e00-\u1eff\u2c60-\u2c7f\ua720-\ua7ff\uab30-\uab6f\uff21-\uff3a"
          "\uff41-\uff5a")
_SCRIPTS: dict[str, str] = {
    "latin": _LATIN,
    "cyrillic": "\u0400-\u052f\u1c80-\u1c8f\u2de0-\u2dff\ua640-\ua69f",
    "greek": "\u0370-\u03ff\u1f00-\u1fff",
    "han": "\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3038-\u303b\u3400-\u4dbf\u4e00-\u9fff"
           "\uf900-\ufaff\U00020000-\U0003134f",
    "kana": "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f",
    "hangul": "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af",
    "arabic": "\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufeff",
    "hebrew": "\u0590-\u05ff\ufb1d-\ufb4f",
    "devanagari": "\u0900-\u097f",
    "thai": "\u0e00-\u0e7f",
}
OTHER_SCRIPT = "other"
"""A script name besides the keys of ``_SCRIPTS``: letters of every script not listed there
(Bengali, Georgian, Ethiopic, ...). A prompt written in one lets its reply use them; a listed
foreign script is still foreign."""
_NOTATION = "\u00b5\u2100-\u214f\U0001d400-\U0001d7ff" + _SCRIPTS["greek"]
"""Letters that are mathematical notation in any language: micro sign, letter-like symbols, math
alphanumerics, Greek. (Unicode numbers that are not digits join them, :func:`_neutral`.)"""

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
"""Values of ``expected_script`` (and ``Reward.code_switch_script``) → the scripts a response in
that language is written in. Latin letters are allowed in every one of them (module docstring, step
2)."""

_LANGUAGE_OF_SCRIPT = {"han": "chinese", "kana": "japanese", "hangul": "korean",
                       "cyrillic": "cyrillic",
                       "arabic": "arabic", "hebrew": "hebrew", "devanagari": "devanagari",
                       "thai": "thai"}
"""The language a prompt's letters of a script stand for: kana marks Japanese (kana and han), hangul
Korean (hangul and han), han alone Chinese. Latin and Greek are judged apart
(:func:`prompt_scripts`)."""

CodeSwitchRule = Literal["english_prompt_only", "prompt_language", "fixed_script"]
CODE_SWITCH_RULES: tuple[str, ...] = typing.get_args(CodeSwitchRule)
"""Which responses a stage checks, and against what (module docstring): RLHF's rule (§4.3.2), Math
RL's (§4.5.2), or one fixed language for every response."""

_LETTERS = re.compile(r"[^\W\d_]+")
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_DELIMITERS = re.compile(r"```|`|\$\$|\$|\\\[|\\\]|\\\(|\\\)")
_CLOSER = {"```": "```", "`": "`", "$$": "$$", "$": "$", "\\[": "\\]", "\\(": "\\)"}
_LINE_BOUND = {"`", "$"}
"""Inline spans that cannot cross a line: a ``$`` (currency) or backtick whose closer lies on a
later line opens nothing and stays prose."""


def strip_math_and_code(text: str) -> str:
    """``text`` without code blocks, inline code, math spans and LaTeX command names (step 1 of the
    rule). An opener never closed keeps the rest of the text as prose."""
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
                # the opener was prose; this token opens a new span
                kept.append(text[span[0]:m.start()])
                span = (m.start(), _CLOSER[token])
            else:
                span, prose_start = None, m.end()
    kept.append(text[prose_start:] if span is None else text[span[0]:])
    return _LATEX_COMMAND.sub(" ", "".join(kept))


def _count(pattern: re.Pattern, text: str) -> int:
    """Characters of ``text`` that ``pattern`` (a class with ``+``) matches; runs are matched in
    C."""
    return len(text) - len(pattern.sub("", text))


@functools.lru_cache(maxsize=1)
def _neutral() -> str:
    """Character-class body of the letters that are never foreign: Latin, :data:`_NOTATION`, and the
    Unicode numbers that are not digits (categories Nl and No: ², ½, ①, Ⅳ, ₁, 〇) — the regex engine
    counts them as word characters but not as ``\\d``, so without this "5 m²" would hold a foreign
    letter. Those of the Basic Multilingual Plane (found once here, from the same Unicode database
    the regex engine uses); the few beyond it are numerals of historic scripts, and a class tests
    each range beyond U+FFFF one by one (all 46 of them made every pattern 4x slower)."""
    ranges: list[list[int]] = []
    for cp in range(0x10000):
        if unicodedata.category(chr(cp)) in ("Nl", "No"):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp])
    return _LATIN + _NOTATION + "".join(f"{chr(a)}-{chr(b)}" for a, b in ranges)


def _script_set(expected: Union[str, Collection[str]]) -> frozenset[str]:
    """The scripts a response may use: a language key of :data:`EXPECTED_SCRIPTS`, or script names
    (keys of ``_SCRIPTS``, :data:`OTHER_SCRIPT`) as :func:`prompt_scripts` returns them; Latin is
    always among them."""
    if isinstance(expected, str):
        if expected not in EXPECTED_SCRIPTS:
            raise ValueError(f"unknown expected_script {expected!r}; known: "
                             f"{sorted(EXPECTED_SCRIPTS)}")
        return frozenset(EXPECTED_SCRIPTS[expected]) | {"latin"}
    scripts = frozenset(expected)
    unknown = scripts - set(_SCRIPTS) - {OTHER_SCRIPT}
    if unknown:
        raise ValueError(f"unknown scripts {sorted(unknown)}; known: "
                         f"{sorted(_SCRIPTS) + [OTHER_SCRIPT]}")
    return scripts | {"latin"}


@functools.lru_cache(maxsize=None)
def _run_of(ranges: str, negate: bool = False) -> re.Pattern:
    """Runs of characters in ``ranges`` (a character-class body), or outside them when
    ``negate``."""
    return re.compile(f"[{'^' if negate else ''}{ranges}]+")


def _countable_letters(prose: str) -> str:
    """The letters of ``prose`` that can be foreign: all but the neutral ones (step 2), in one pass.
    The script tests then run on letters only, with plain classes (a per-character letter test
    inside each would be ~10x slower)."""
    return _run_of(r"\W\d_" + _neutral()).sub("", prose)


@functools.lru_cache(maxsize=256)
def _foreign_pattern(allowed: frozenset[str]) -> Optional[re.Pattern]:
    """Runs of foreign letters among :func:`_countable_letters`: those outside the ``allowed``
    scripts; with :data:`OTHER_SCRIPT` allowed, those of the listed scripts not allowed. None:
    nothing is foreign."""
    if OTHER_SCRIPT in allowed:
        banned = "".join(_SCRIPTS[s] for s in sorted(set(_SCRIPTS) - allowed))
        return _run_of(banned) if banned else None
    # Latin is always allowed
    return _run_of("".join(_SCRIPTS[s] for s in sorted(allowed)), negate=True)


def _foreign_count(prose: str, allowed: frozenset[str]) -> int:
    pattern = _foreign_pattern(allowed)
    return 0 if pattern is None else _count(pattern, _countable_letters(prose))


def prompt_scripts(prompt: str, default: str = "latin") -> frozenset[str]:
    """The scripts of ``prompt``'s prose, as the languages they stand for (module docstring): each
    listed script present maps to its language's scripts in :data:`EXPECTED_SCRIPTS`, Greek counts
    when it outnumbers Latin, unlisted scripts add :data:`OTHER_SCRIPT`; Latin is always in. A
    prompt with no prose letters (or not a string) is in the language ``default``."""
    prose = strip_math_and_code(prompt) if isinstance(prompt, str) else ""
    found: set[str] = {"latin"}
    rest = _countable_letters(prose)
    for script, language in _LANGUAGE_OF_SCRIPT.items():  # each pass takes its script's letters out
        left = _run_of(_SCRIPTS[script]).sub("", rest)
        if len(left) < len(rest):
            found.update(EXPECTED_SCRIPTS[language])
        rest = left
    if rest:  # letters of no listed script (Latin and Greek are neutral, already gone)
        found.add(OTHER_SCRIPT)
    letters = _run_of(r"\W\d_").sub("", prose)
    latin, greek = _count(_run_of(_LATIN), letters), _count(_run_of(_SCRIPTS["greek"]), letters)
    if greek > latin:  # Greek prose; a few Greek letters in English text are notation
        found.add("greek")
    if found == {"latin"} and not latin:
        return _script_set(default)
    return frozenset(found)


def reply_scripts(prompt: str, rule: str, script: str = "latin") -> Optional[frozenset[str]]:
    """The scripts a reply to ``prompt`` may use under ``rule`` (one of :data:`CODE_SWITCH_RULES`),
    or None when the rule checks no reply to this prompt: under ``english_prompt_only`` (§4.3.2)
    every prompt that is not purely Latin-script. ``script`` is ``fixed_script``'s language and the
    language of a prompt without prose letters. The prompt is data: any string (or none) is read
    without raising."""
    if rule == "fixed_script":
        return _script_set(script)
    if rule not in CODE_SWITCH_RULES:
        raise ValueError(f"unknown code-switch rule {rule!r}; known: {list(CODE_SWITCH_RULES)}")
    scripts = prompt_scripts(prompt, script)
    if rule == "english_prompt_only" and scripts != {"latin"}:
        return None
    return scripts


def foreign_letter_counts(
        text: str, expected_script: Union[str, Collection[str]] = "latin") -> tuple[int, int]:
    """``(foreign letters, all letters)`` in the prose of ``text`` (steps 1 and 2 of the rule)."""
    prose = strip_math_and_code(text)
    return _foreign_count(prose, _script_set(expected_script)), _count(_LETTERS, prose)


def is_code_switched(text: str, expected_script: Union[str, Collection[str]] = "latin",
                     min_foreign_letters: int = 2, min_foreign_share: float = 0.0) -> bool:
    """True when ``text`` mixes in another script: at least ``min_foreign_letters`` letters outside
    ``expected_script`` (a key of :data:`EXPECTED_SCRIPTS`, or the script names
    :func:`reply_scripts` returns), making up at least ``min_foreign_share`` of its letters, after
    math, code and notation are set aside (module docstring). Non-strings are False."""
    allowed = _script_set(expected_script)
    if not isinstance(text, str):
        return False
    prose = strip_math_and_code(text)
    foreign = _foreign_count(prose, allowed)
    if foreign < min_foreign_letters:
        return False
    return foreign >= min_foreign_share * _count(_LETTERS, prose)


def is_code_switched_reply(response: str, prompt: str, rule: str = "prompt_language",
                           script: str = "latin",
                           min_foreign_letters: int = 2, min_foreign_share: float = 0.0) -> bool:
    """Whether ``response`` to ``prompt`` is code-switched under ``rule`` (:func:`reply_scripts`,
    then :func:`is_code_switched`)."""
    scripts = reply_scripts(prompt, rule, script)
    return scripts is not None and is_code_switched(response, scripts, min_foreign_letters,
                                                    min_foreign_share)


BATCH_MIN_MINUS_10 = "batch_min_minus_10"
CodeSwitchPenalty = Union[float, Literal["batch_min_minus_10"], None]
"""A stage's setting: the reward a code-switched sample gets (Math RL −1.0, Code RL 0.0), RLHF's
"batch_min_minus_10", or None for no penalty."""


def apply_code_switch_penalty(rewards: Sequence[float], flags: Sequence[bool],
                              penalty: CodeSwitchPenalty) -> list[float]:
    """``rewards`` with every flagged sample's reward replaced by the penalty (a new list).

    A number replaces the reward (paper: "−1 for code-switching", §4.5): a correct but code-switched
    answer gets −1, not 1 − 1. ``"batch_min_minus_10"`` (RLHF, §4.3.2) gives flagged samples
    min(rewards) − 10, the minimum over the whole batch passed in (all samples, before any penalty),
    so a code-switched answer always ranks below every other in its group whatever the reward
    model's scale. None returns the rewards as is.
    """
    if len(rewards) != len(flags):
        raise ValueError(f"{len(rewards)} rewards but {len(flags)} code-switch flags")
    is_number = isinstance(penalty, (int, float)) and not isinstance(penalty, bool)
    if not (penalty is None or penalty == BATCH_MIN_MINUS_10 or is_number):
        raise ValueError(f"code-switch penalty must be a number, {BATCH_MIN_MINUS_10!r} or None, "
                         f"got {penalty!r}")
    if penalty is None or not any(flags):
        return [float(r) for r in rewards]
    value = min(rewards) - 10.0 if penalty == BATCH_MIN_MINUS_10 else float(penalty)
    return [value if flagged else float(r) for r, flagged in zip(rewards, flags)]


__all__ = ["is_code_switched", "is_code_switched_reply", "reply_scripts", "prompt_scripts",
           "foreign_letter_counts",
           "strip_math_and_code", "apply_code_switch_penalty", "EXPECTED_SCRIPTS",
           "CODE_SWITCH_RULES", "OTHER_SCRIPT",
           "BATCH_MIN_MINUS_10", "CodeSwitchPenalty", "CodeSwitchRule"]
