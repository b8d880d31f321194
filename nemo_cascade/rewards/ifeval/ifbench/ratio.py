"""IFBench's ``ratio:*`` instructions: stop-word share, character-trigram overlap with a reference
text, and the mix and lengths of sentences (paper §4.4, the IFBench evaluation).

"Sentence" here is the rule-based splitter (:func:`.text.rule_sentences`) and a sentence's type is
its last character (``.``, ``?``, ``!``), as in the reference evaluator (allenai/IFBench at
c94da020). Percentages are computed with the reference's arithmetic (``part / whole * 100``) so that
boundary cases round the same way.
"""
from __future__ import annotations

from ..spec import Arg, Instruction
from ..text import count_words
from .text import count_stopwords, rule_sentences


def _stop_words(text: str, percentage: float) -> bool:
    words = count_words(text)
    if words == 0:
        return False  # no words: the reference divides by zero
    return count_stopwords(text) / words * 100 <= percentage


def _trigrams(text: str) -> set[str]:
    return {text[i:i + 3] for i in range(len(text) - 2)}


def _overlap(text: str, reference_text: str, percentage: float) -> bool:
    """The share of the response's distinct *character* trigrams that also occur in the reference
    text is within ±2 points of ``percentage``."""
    ours = _trigrams(text)
    if not ours:
        return False  # under three characters: the reference divides by zero
    shared = len(ours & _trigrams(reference_text)) / len(ours)
    return percentage - 2 <= shared * 100 <= percentage + 2


def _ending_counts(text: str) -> tuple[int, int, int]:
    sentences = rule_sentences(text)
    counts = tuple(sum(1 for s in sentences if s.endswith(mark)) for mark in ".?!")
    return counts  # type: ignore[return-value]


def _sentence_type(text: str) -> bool:
    """Twice as many sentences ending in ``.`` as in ``?`` (so also none of either)."""
    declarative, interrogative, _ = _ending_counts(text)
    return declarative == 2 * interrogative


def _sentence_balance(text: str) -> bool:
    """As many sentences ending in ``.`` as in ``?`` and in ``!``."""
    declarative, interrogative, exclamatory = _ending_counts(text)
    return declarative == interrogative == exclamatory


def _sentence_words(text: str) -> bool:
    """Exactly three sentences of equal length in characters (the prompt also asks for all-different
    words, which the reference does not check)."""
    sentences = rule_sentences(text)
    return len(sentences) == 3 and len({len(s.strip()) for s in sentences}) == 1


_PERCENT = Arg(float, minimum=0)
INSTRUCTIONS = (
    Instruction("ratio:stop_words", _stop_words, {"percentage": _PERCENT}),
    Instruction("ratio:overlap", _overlap, {"reference_text": Arg(str), "percentage": _PERCENT}),
    Instruction("ratio:sentence_type", _sentence_type),
    Instruction("ratio:sentence_balance", _sentence_balance),
    Instruction("ratio:sentence_words", _sentence_words),
)
