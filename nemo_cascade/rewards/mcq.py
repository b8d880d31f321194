"""The multiple-choice verifier (GPQA-Diamond, MMLU-Pro): 1.0 iff the answer's letter is right.

Prompt (:func:`mcq_prompt`): OpenAI simple-evals' multiple-choice template — the instruction to end
with ``Answer: $LETTER``, the question, then one line per option, ``A) ...`` to ``J) ...``.

Extraction rule (:func:`extract_letter`). Only the text after ``</think>`` is read; a thinking
response that never closed ``</think>`` has no answer (0, as for every verifier). In that text the
answer is the **last** of these, by position:

- ``Answer: X`` — "answer" in any case, optionally bold (``**Answer:** X``), a colon, then the
  letter, optionally in parentheses, brackets or ``$...$`` (``Final Answer: (C)``);
- ``the answer is X`` — MMLU-Pro's chain-of-thought phrasing (``the correct answer is (C)``,
  ``the final answer is C``);
- ``\\boxed{X}`` — also ``\\boxed{\\text{X}}`` and ``\\boxed{(X)}``.

``X`` is one capital letter among the item's options (A–D for four options) standing alone
(``All`` is no answer); a letter beyond the options is skipped. A response with none of these
scores 0. Lower-case letters never count: "the answer is a bit longer" is not option A.

Label (docs/rewards.md): ``{"answer": "C", "choices": 4}`` — the right letter, the option count.
"""
from __future__ import annotations

import re
from typing import Any, Optional, Sequence

from ..config import Reward
from ..data.chat import split_thinking
from ..data.schemas import SchemaError
from .reward_domain import BatchVerdicts, RewardDomain

LETTERS = "ABCDEFGHIJ"
"""MMLU-Pro has up to ten options."""
MCQ_TEMPLATE = ("Answer the following multiple choice question. The last line of your "
                "response should be of the following format: 'Answer: $LETTER' (without quotes) "
                "where LETTER is one of {letters}. Think step by step before answering."
                "\n\n{question}\n\n{options}")
"""simple-evals' ``QUERY_TEMPLATE_MULTICHOICE`` (github.com/openai/simple-evals, MIT), any
option count."""

_X = r"[\(\[]?\s*\$?\s*([A-J])(?![A-Za-z0-9_])"
_PATTERNS = (
    re.compile(r"(?i:answer)\s*(?:\*\*)?\s*[:：]\s*(?:\*\*)?\s*" + _X),
    re.compile(r"(?i:the\s+(?:correct\s+|final\s+)?answer\s+is)\s*:?\s*(?:\*\*)?\s*"
               r"(?i:option\s+)?" + _X),
    re.compile(r"\\boxed\{\s*(?:\\text(?:bf)?\{\s*)?\(?\s*([A-J])(?![A-Za-z0-9_])"),
)


def mcq_prompt(question: str, options: Sequence[str]) -> str:
    """The user turn of a multiple-choice item: the template with the options lettered A, B, ..."""
    lines = "\n".join(f"{LETTERS[i]}) {text}" for i, text in enumerate(options))
    return MCQ_TEMPLATE.format(letters=LETTERS[:len(options)], question=question, options=lines)


def extract_letter(response: str, choices: int) -> Optional[str]:
    """The response's answer letter by the module docstring's rule, or None."""
    _, answer, terminated = split_thinking(response)
    if not terminated:
        return None
    allowed = LETTERS[:choices]
    found = [(m.start(1), m.group(1)) for p in _PATTERNS for m in p.finditer(answer)
             if m.group(1) in allowed]
    return max(found)[1] if found else None


def validate_label(label: Any) -> None:
    """A one-line ValueError unless ``label`` is ``{"answer": letter, "choices": n}``,
    2 <= n <= 10."""
    if not isinstance(label, dict):
        raise ValueError("mcq label: expected a dict with 'answer' and 'choices', got "
                         f"{type(label).__name__}")
    n, answer = label.get("choices"), label.get("answer")
    if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= len(LETTERS):
        raise ValueError(f"mcq label: 'choices' must be an integer in [2, {len(LETTERS)}], "
                         f"got {n!r:.40}")
    if not (isinstance(answer, str) and len(answer) == 1 and answer in LETTERS[:n]):
        raise ValueError(f"mcq label: 'answer' must be one of {LETTERS[:n]!r}, got {answer!r:.40}")


def mcq_reward(response: str, label: Any) -> float:
    """REWARDS["mcq"]: 1.0 iff the extracted letter is the label's; never raises on model output."""
    validate_label(label)
    found = extract_letter(response, label["choices"]) if isinstance(response, str) else None
    return float(found == label["answer"])


def _verdicts(responses: Sequence[str], labels: Sequence[Any]) -> tuple[list[float], list[dict]]:
    letters = [extract_letter(r, lab["choices"]) if isinstance(r, str) else None
               for r, lab in zip(responses, labels)]
    return ([float(x == lab["answer"]) for x, lab in zip(letters, labels)],
            [{"letter": x} for x in letters])


def batch_verdicts(settings: Reward) -> BatchVerdicts:
    """No setting matters: extraction is pure and fast."""
    return _verdicts


def answer_letter(row: dict, n: int, where: str) -> str:
    """A row's right letter from ``answer`` (a letter) or ``answer_index`` (0-based); both must
    agree where both are given."""
    letter, index = row.get("answer"), row.get("answer_index")
    if index is not None and (isinstance(index, bool) or not isinstance(index, int)
                              or not 0 <= index < n):
        raise SchemaError(f"{where}: field 'answer_index' must be an integer in [0, {n}), "
                          f"got {index!r:.40}")
    if letter is None and index is None:
        raise SchemaError(f"{where}: expected field 'answer' (a letter) or 'answer_index'")
    if letter is not None and not (isinstance(letter, str) and len(letter) == 1
                                   and letter in LETTERS[:n]):
        raise SchemaError(f"{where}: field 'answer' must be one of {LETTERS[:n]!r}, "
                          f"got {letter!r:.40}")
    if letter is not None and index is not None and LETTERS[index] != letter:
        raise SchemaError(f"{where}: 'answer' {letter!r} and 'answer_index' {index} disagree")
    return letter if letter is not None else LETTERS[index]


def options_of(row: dict, where: str) -> list[str]:
    """A row's ``options``: a list of 2 to 10 strings."""
    options = row.get("options")
    if not (isinstance(options, list) and 2 <= len(options) <= len(LETTERS)
            and all(isinstance(o, str) for o in options)):
        raise SchemaError(f"{where}: field 'options' must be a list of 2 to {len(LETTERS)} "
                          f"strings, got {type(options).__name__}")
    return options


def adapt(row: dict, where: str) -> tuple[list[dict], dict]:
    """MMLU-Pro-shaped rows: ``question``, ``options``, the ``answer`` letter and/or
    ``answer_index``."""
    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        raise SchemaError(f"{where}: expected field 'question' (a non-empty string)")
    options = options_of(row, where)
    label = {"answer": answer_letter(row, len(options), where), "choices": len(options)}
    return [{"role": "user", "content": mcq_prompt(question, options)}], label


def _answered(records: list[dict]) -> dict:
    """The share of samples with a letter found: a low one means the format is ignored."""
    letters = [d.get("letter") for r in records if not r["too_long"] for d in r["details"]]
    return {"answered": sum(x is not None for x in letters) / len(letters)} if letters else {}


def _notes(metrics: dict) -> list[str]:
    return [f"answered {100 * metrics['answered']:.1f}%"] if "answered" in metrics else []


DOMAIN = RewardDomain("mcq", adapt, validate_label, batch_verdicts, reward=mcq_reward,
                      record_label=True, eval_metrics=_answered, report_notes=_notes)
"""Multiple choice (GPQA-Diamond, MMLU-Pro; paper T1, T2): the answer's letter against the
label's."""


__all__ = ["DOMAIN", "LETTERS", "MCQ_TEMPLATE", "mcq_prompt", "extract_letter", "validate_label",
           "mcq_reward", "batch_verdicts", "adapt", "answer_letter", "options_of"]
