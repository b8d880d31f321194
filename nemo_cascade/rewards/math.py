"""The math verifier: 1.0 when the model's final answer is mathematically equivalent to the
reference, else 0.0.

Paper §4.5 (Math RL reward): the ``\\boxed{}`` answer after ``</think>``, checked by a rule
verifier, 1 or 0. Three steps, each replaceable on its own:

1. the answer text. A thinking response is judged only after ``</think>`` and scores 0 if it never
   closed (§3.1.2). The answer is the last complete ``\\boxed{...}`` (:func:`extract_boxed`) or,
   configured with :func:`math_reward_with`, the last match of an answer pattern
   (:data:`ANSWER_PATTERNS`: GSM8K's ``#### 42``, "The answer is 42", or any regex with one group);
2. a fast exact check in this process (:func:`is_equivalent`: equal after :func:`normalize`, or
   equal as exact numbers), so the common trivial match pays no inter-process round trip;
3. otherwise the grader decides (``Reward.math_grader``): math-verify (the default: fractions,
   decimals, percentages, LaTeX, sets, intervals, tuples, matrices, equations such as ``x=5`` vs
   ``5``, symbolic expressions) or the AceMath-style rule grader the paper used (:mod:`.math_rule`),
   in killable worker processes with a hard per-sample timeout (:mod:`.workers`). math-verify's own
   timeouts use ``signal.alarm``, which fails outside the main thread, so they are switched off and
   a stuck sample's worker is killed instead. A sample that times out, crashes its worker or makes
   the grader raise scores 0. docs/rewards.md measures where the two graders disagree on
   model-written answers.

math-verify's semantics, pinned by tests/unit/test_math_verify.py: a reference ``50\\%`` accepts
``50\\%``, ``50`` and ``0.5``, and a reference ``50`` or ``0.5`` accepts ``50\\%`` (the percent sign
may be dropped or applied), but ``50`` never equals ``0.5``. Numbers match after rounding to 6
decimals (``1/3`` accepts ``0.333333``, not ``0.333``). Units and ``\\text{}`` wrappers are dropped
(``5 cm`` equals ``5``). A reference set ``\\{1,2\\}`` accepts ``2,1`` and even ``(1,2)``; ``(1,2]``
never equals ``[1,2]``; ``x=5`` and ``5`` are equal either way round.

Bounded time on any string up to 1 MB: extraction and the exact check are linear scans in this
process; answers or references longer than :data:`MAX_VERIFY_CHARS` get only the exact check (no
real answer is that long: the longest MATH-500 answer has 53 characters); all grader work runs under
the timeout.
"""
from __future__ import annotations

import functools
import logging
import re
from fractions import Fraction
from math import isfinite
from typing import Any, Optional, Sequence

from ..config import Reward, literal_values
from ..data.chat import split_thinking
from ..data.math_prompt import with_math_instruction
from ..data.schemas import adapt_math
from . import math_rule
from .reward_domain import BatchVerdicts, RewardDomain
from .workers import WorkerPool, shared_pool

DEFAULT_TIMEOUT_S = 5.0
"""Per-sample wall time in a worker; math-verify decides a real MATH answer in ~10-30 ms."""
MAX_VERIFY_CHARS = 1000
"""Answers or references longer than this skip math-verify (exact check only); see the module
docstring."""
WORKER_MEMORY_MB = 2048
"""Address-space cap per worker (~60 MB in use): a runaway sympy allocation becomes a MemoryError
(score 0) instead of swapping the machine."""

ANSWER_PATTERNS: dict[str, str] = {
    "gsm8k": r"####\s*(.+)",                          # GSM8K: "#### 42"
    # "The answer is 42." / "the final answer is: $7$"
    "answer_is": r"(?i)\banswer\s+is\s*:?\s*(.+)",
}
"""Named answer patterns for :func:`math_reward_with`: group 1 is the answer, the last match counts.
Both are linear on any input (``.+`` runs to the end of the line, so matches cannot overlap)."""

GRADERS = literal_values(Reward, "math_grader")
"""Who decides equivalence behind the exact check (``Reward.math_grader``): math-verify, or the
AceMath-style rule grader of :mod:`.math_rule` (§4.5: the paper trained with AceMath's rule
verifier)."""

_TOKENS = re.compile(r"\\(?:boxed|fbox) *\{|\{|\}")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:/\d+)?")
_FRAC = re.compile(r"([+-]?)\\[dt]?frac\{(\d+)\}\{(\d+)\}")
_MAX_NUMBER_CHARS = 64
"""Longer strings are compared as text: Fraction of a 10^6-digit string would be slow."""
_ESCAPED_BRACE = re.compile(r"\\[{}]")


def extract_boxed(text: str) -> Optional[str]:
    """Content of the last complete ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text``, braces
    matched.

    "Last" is the complete box that starts last, so ``\\boxed{1} ... \\boxed{2}`` gives ``"2"`` and
    a box truncated before its closing brace is skipped. Stray ``}`` outside any brace are ignored.
    None if no box is complete. Linear in ``len(text)``: each brace is visited once; open boxes are
    kept on a stack.
    """
    depth = 0
    # (depth outside the box, index where its content starts)
    open_boxes: list[tuple[int, int]] = []
    # (content start, content end) of the last-starting complete box
    best: Optional[tuple[int, int]] = None
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
    """Strip what does not change a final answer: whitespace, ``$``, ``\\!``/``\\,`` spacing,
    ``\\left``/ ``\\right``, a trailing ``.``, a leading ``+``, and one wrapping
    ``\\boxed{}``/``\\text{}``."""
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
    """Do two final answers agree? Equal after :func:`normalize`, or equal as numbers (``68`` ==
    ``68.0``, ``1/2`` == ``0.5``). This is the piece a math-verify backend replaces."""
    pred, ref = normalize(predicted), normalize(str(reference))
    if not pred or not ref:
        return False
    if pred == ref:
        return True
    a, b = _as_number(pred), _as_number(ref)
    return a is not None and b is not None and a == b



def extract_by_pattern(text: str, pattern: re.Pattern) -> Optional[str]:
    """Group 1 of the last match of ``pattern`` in ``text``, stripped of spaces, a trailing period
    and one pair of enclosing ``$``; None if nothing matches or the group is empty."""
    last = None
    for last in pattern.finditer(text):
        pass
    if last is None:
        return None
    answer = last.group(1).strip().rstrip(".").strip()
    if len(answer) >= 2 and answer[0] == answer[-1] == "$":
        answer = answer[1:-1].strip()
    return answer or None


def validate_label(label: Any) -> None:
    """A math label is a non-empty reference answer: a string with balanced braces, or a finite
    int/float. Raises ValueError (one line) otherwise, so a loader can reject the row before
    training."""
    if isinstance(label, bool) or not isinstance(label, (str, int, float)):
        raise ValueError(f"math label must be a string or a number, got {type(label).__name__}")
    if isinstance(label, float) and not isfinite(label):
        raise ValueError(f"math label must be a finite number, got {label}")
    text = str(label)
    if not text.strip():
        raise ValueError("math label is empty")
    unescaped = _ESCAPED_BRACE.sub("", text)  # \{ \} are set braces, not groups
    depth = 0
    for ch in unescaped:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            break
    if depth != 0:
        raise ValueError(f"math label has unbalanced braces: {text[:80]!r}")


# --------------------------------------------------------------------- runs inside worker processes

def load_math_verify() -> None:
    """Worker initializer: import math-verify and run one comparison, so the first real sample's
    timeout is not spent on sympy/ANTLR start-up (~0.3 s). Its "timeout is disabled" warning is the
    design here (the pool enforces the timeout), so math-verify's logging is limited to errors."""
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    verify_equivalence("\\frac{1}{2}", "0.5")


@functools.lru_cache(maxsize=4096)
def _parse_reference(reference: str) -> list:
    """Parsed reference, cached: a group's G samples share one label."""
    from math_verify import parse
    return parse(f"${reference}$", parsing_timeout=None)


def verify_equivalence(predicted: str, reference: str) -> bool:
    """math-verify's verdict that ``predicted`` equals ``reference`` (gold first: its comparison is
    not symmetric). Both are wrapped as inline LaTeX. No timeouts here: run it in a killable
    worker."""
    from math_verify import parse, verify
    gold = _parse_reference(reference)
    return bool(verify(gold, parse(f"${predicted}$", parsing_timeout=None), timeout_seconds=None))


# ---------------------------------------------------------------------------- the reward

class MathVerifier:
    """A configured math reward: ``verifier(response, label) -> float`` and, in parallel over the
    worker pool, ``verifier.reward_batch(responses, labels) -> list[float]``.

    ``answer_pattern``: None for the last ``\\boxed{}`` (paper §4.5), a name from
    :data:`ANSWER_PATTERNS`, or a regex whose group 1 is the answer (the last match counts).
    ``timeout_s``: hard wall time per sample in the grader. ``num_workers``: pool size (default: the
    cores this process may use); verifiers with the same grader and size share one pool, started on
    the first sample that needs it and stopped at exit. ``grader``: one of :data:`GRADERS` —
    ``math_verify`` or the AceMath-style ``rule`` grader (:func:`.math_rule.grade`), both behind the
    same extraction, exact check, workers and timeout.
    """

    def __init__(self, answer_pattern: Optional[str] = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                 num_workers: Optional[int] = None, grader: str = "math_verify"):
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if grader not in GRADERS:
            raise ValueError(f"math grader must be one of {list(GRADERS)}, got {grader!r}")
        self.grader = grader
        self.answer_pattern = answer_pattern
        self.timeout_s = timeout_s
        self.num_workers = num_workers
        self.pattern = None if answer_pattern is None else _compile_answer_pattern(answer_pattern)

    def extract_answer(self, response: Any) -> Optional[str]:
        """The final answer the response commits to, or None (not a string, thinking never closed,
        no answer found)."""
        if not isinstance(response, str):
            return None
        _, answer, terminated = split_thinking(response)
        if not terminated:
            return None
        if self.pattern is None:
            return extract_boxed(answer)
        return extract_by_pattern(answer, self.pattern)

    def pool(self) -> WorkerPool:
        if self.grader == "rule":
            return shared_pool(math_rule.grade, self.num_workers,
                               initializer=math_rule.load_rule_grader,
                               memory_limit_mb=WORKER_MEMORY_MB)
        return shared_pool(verify_equivalence, self.num_workers, initializer=load_math_verify,
                           memory_limit_mb=WORKER_MEMORY_MB)

    def __call__(self, response: Any, label: Any) -> float:
        return self.reward_batch([response], [label])[0]

    def reward_batch(self, responses: Sequence[Any], labels: Sequence[Any]) -> list[float]:
        """Scores of ``responses[i]`` against ``labels[i]``; the samples the exact check cannot
        settle go to the worker pool together, so they are verified in parallel."""
        if len(responses) != len(labels):
            raise ValueError(f"{len(responses)} responses but {len(labels)} labels")
        return self.score_answers([self.extract_answer(r) for r in responses], labels)

    def score_answers(self, answers: Sequence[Optional[str]], labels: Sequence[Any]) -> list[float]:
        """Scores of final answers already extracted (None: no answer, 0) against ``labels``: the
        exact check, then the grader in the worker pool. :meth:`reward_batch` after extraction; the
        grader comparison (bench/math_grader_agreement.py) grades answers found other ways through
        the same path."""
        if len(answers) != len(labels):
            raise ValueError(f"{len(answers)} answers but {len(labels)} labels")
        scores = [0.0] * len(answers)
        pending: list[tuple[str, str]] = []
        pending_index: list[int] = []
        for i, (answer, label) in enumerate(zip(answers, labels)):
            reference = str(label)
            if not isinstance(answer, str):
                continue
            if is_equivalent(answer, reference):
                scores[i] = 1.0
            elif 0 < len(answer) <= MAX_VERIFY_CHARS and 0 < len(reference) <= MAX_VERIFY_CHARS:
                pending.append((answer, reference))
                pending_index.append(i)
        if pending:
            # timeout, crash and error all score 0: the model's answer could not be shown equal
            for i, result in zip(pending_index, self.pool().map(pending, timeout_s=self.timeout_s)):
                scores[i] = 1.0 if result.ok and result.value else 0.0
        return scores


def _compile_answer_pattern(answer_pattern: str) -> re.Pattern:
    """A name from ANSWER_PATTERNS or a regex with at least one group; a bad one is a config
    error."""
    source = ANSWER_PATTERNS.get(answer_pattern, answer_pattern)
    try:
        pattern = re.compile(source)
    except re.error as exc:
        raise ValueError(f"answer_pattern {answer_pattern!r} is not a regex: {exc}") from exc
    if pattern.groups < 1:
        raise ValueError(f"answer_pattern {answer_pattern!r} needs a group capturing the answer, "
                         f"e.g. {ANSWER_PATTERNS['gsm8k']!r}; named patterns: "
                         f"{sorted(ANSWER_PATTERNS)}")
    return pattern


def math_reward_with(answer_pattern: Optional[str] = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                     num_workers: Optional[int] = None,
                     grader: str = "math_verify") -> MathVerifier:
    """A math reward for another answer format, timeout or grader, e.g.
    ``math_reward_with("gsm8k")`` scores the last ``#### 42`` line, ``math_reward_with(r"Final:
    (.+)")`` a custom one and ``math_reward_with(grader="rule")`` the last box with the
    AceMath-style grader. See :class:`MathVerifier`."""
    return MathVerifier(answer_pattern, timeout_s, num_workers, grader)


_DEFAULT = MathVerifier()


def math_reward(response: str, label: Any) -> float:
    """REWARDS["math"]: 1.0 if the last boxed answer (after ``</think>`` in a thinking response) is
    equivalent to ``label`` (the reference answer string), else 0.0. Never raises on model
    output."""
    return _DEFAULT(response, label)


def reward_batch(responses: Sequence[str], labels: Sequence[Any]) -> list[float]:
    """:func:`math_reward` over a batch, the math-verify part in parallel worker processes."""
    return _DEFAULT.reward_batch(responses, labels)


def batch_verdicts(settings: Reward) -> BatchVerdicts:
    """The stage's math verifier (``Reward.answer_pattern``, ``verify_timeout_s``, ``workers``,
    ``math_grader``); details say whether an answer was found at all (the ``answer_found``
    metric)."""
    verifier = MathVerifier(settings.answer_pattern, settings.verify_timeout_s, settings.workers
                            or None,
                            settings.math_grader)

    def verdicts(responses, labels):
        details = [{"answer_found": verifier.extract_answer(r) is not None} for r in responses]
        return verifier.reward_batch(responses, labels), details
    return verdicts


def _answer_found(details: list[dict]) -> dict[str, float]:
    found = [d["answer_found"] for d in details if "answer_found" in d]
    return {"answer_found": sum(found) / len(found)} if found else {}


def _check_eval_reward(settings: Reward) -> None:
    try:
        MathVerifier(settings.answer_pattern)
    except ValueError as e:
        raise ValueError(f"--answer-pattern: {e}") from None


DOMAIN = RewardDomain(
    "math", adapt_math, validate_label, batch_verdicts, reward=math_reward,
    code_switch_penalty=-1.0,                    # §4.5: "−1 for code-switching"
    code_switch_rule="prompt_language",  # §4.5.2: "different from the original prompt's language"
    # the suites' wording
    phrase=lambda messages, data: with_math_instruction(messages, data.math_instruction),
    batch_metrics=_answer_found,
    eval_options=("answer_pattern", "math_grader"), check_eval_reward=_check_eval_reward,
    record_label=True)
"""The math domain (§4.5): boxed answers against a reference, math-verify or the AceMath-style rule
grader."""


__all__ = ["DOMAIN", "batch_verdicts", "extract_boxed", "extract_by_pattern", "normalize",
           "is_equivalent", "validate_label",
           "verify_equivalence", "load_math_verify", "MathVerifier", "math_reward_with",
           "math_reward",
           "reward_batch", "ANSWER_PATTERNS", "DEFAULT_TIMEOUT_S", "MAX_VERIFY_CHARS", "GRADERS"]
