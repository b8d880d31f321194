"""IFEval's ``startend:*``, ``combination:*`` and ``punctuation:no_comma`` instructions: how the
response begins and ends, two answers in one, and the absence of commas (paper §4.4, IFEval
sub-stage).
"""
from __future__ import annotations

from .spec import Arg, Instruction

_TWO_RESPONSES_SEPARATOR = "******"


def _end_checker(text: str, end_phrase: str) -> bool:
    # A closing double quote after the phrase is tolerated (responses wrapped in quotes).
    return text.strip().strip('"').lower().endswith(end_phrase.strip().lower())


def _quotation(text: str) -> bool:
    text = text.strip()
    return len(text) > 1 and text[0] == '"' and text[-1] == '"'


def _two_responses(text: str) -> bool:
    """Exactly two different non-blank answers separated by six asterisks; blank text is allowed
    only before the first or after the last separator."""
    parts = text.split(_TWO_RESPONSES_SEPARATOR)
    if not all(part.strip() for part in parts[1:-1]):
        return False
    answers = [part for part in parts if part.strip()]
    return len(answers) == 2 and answers[0].strip() != answers[1].strip()


def _repeat_prompt(text: str, prompt_to_repeat: str) -> bool:
    return text.strip().lower().startswith(prompt_to_repeat.strip().lower())


INSTRUCTIONS = (
    Instruction("startend:end_checker", _end_checker, {"end_phrase": Arg(str)}),
    Instruction("startend:quotation", _quotation),
    Instruction("combination:two_responses", _two_responses),
    Instruction("combination:repeat_prompt", _repeat_prompt, {"prompt_to_repeat": Arg(str)}),
    Instruction("punctuation:no_comma", lambda text: "," not in text),
)
