"""IFBench-Train's counting instructions: lower-case words, letters, one letter, unique tokens, and
a composition of 3 paragraphs × n sentences × m words (``count:*``, ``letters:*``; paper §4.4.2, the
IFBench-Train sub-stage).

Verdicts follow the IF-RLVR verifier's definitions (open-instruct ``IFEvalG``), whose notions of
word differ per instruction and are kept: ``\\b[a-z]+\\b`` runs, ASCII letters, NLTK
``word_tokenize`` tokens.
"""
from __future__ import annotations

import re
from itertools import islice
from typing import Optional

from ..ifbench.text import rule_sentences, word_tokens
from ..spec import RELATIONS, Arg, Instruction, relation_holds

_LOWERCASE_WORD = re.compile(r"\b[a-z]+\b")
_ASCII_LETTER = re.compile(r"[a-zA-Z]")
_DIVIDER = re.compile(r"\s?\*\*\*\s?")


def _lowercase_counting(text: str, N: int) -> bool:
    """At most N all-lower-case ASCII words in total (the prompt says "each word at most N times";
    the reference counts them all together). A word next to a non-ASCII letter ("café") is no such
    word."""
    return sum(1 for _ in _LOWERCASE_WORD.finditer(text)) <= N


def _letter_counting(text: str, N: int, relation: str) -> bool:
    """The number of ASCII letters, compared with N."""
    return relation_holds(sum(1 for _ in _ASCII_LETTER.finditer(text)), relation, N)


def _letter_frequency(text: str, letter: str, let_frequency: int, let_relation: str) -> bool:
    """Occurrences of ``letter`` in the lower-cased response, compared with ``let_frequency``."""
    return relation_holds(text.lower().count(letter.lower()), let_relation, let_frequency)


def _count_unique(text: str) -> bool:
    """No ``word_tokenize`` token occurs twice (case-sensitive; punctuation marks are tokens
    too)."""
    seen: set[str] = set()
    for token in word_tokens(text):
        if token in seen:
            return False
        seen.add(token)
    return True


def _counting_composition(text: str, n_sent: int, n_words: int) -> bool:
    """Three paragraphs divided by ``***``, each of exactly ``n_sent`` rule-based sentences of
    exactly ``n_words`` ``word_tokenize`` tokens (punctuation marks count as tokens).

    Unlike ``paragraphs:paragraphs``, a blank part before the first or after the last divider fails
    too: the reference discounts it and then still requires it to hold ``n_sent`` sentences.
    """
    paragraphs = _DIVIDER.split(text)
    if len(paragraphs) != 3:
        return False
    for paragraph in paragraphs:
        sentences = rule_sentences(paragraph)
        if len(sentences) != n_sent:
            return False
        for sentence in sentences:
            if len(list(islice(word_tokens(sentence), n_words + 1))) != n_words:
                return False
    return True


def _one_letter(letter: str, let_frequency: int, let_relation: str) -> Optional[str]:
    # The reference draws a random letter for anything but one character that lower-cases to a-z.
    lowered = letter.lower()
    if len(letter) != 1 or len(lowered) != 1 or not "a" <= lowered <= "z":
        return f"letter {letter!r:.20} must be one letter a-z (upper or lower case)"
    return None


_RELATION = Arg(str, choices=RELATIONS)
INSTRUCTIONS = (
    Instruction("count:lowercase_counting", _lowercase_counting, {"N": Arg(int, minimum=1)}),
    Instruction("letters:letter_counting", _letter_counting,
                {"N": Arg(int, minimum=1), "relation": _RELATION}),
    Instruction("letters:letter_counting2", _letter_frequency, {
        "letter": Arg(str), "let_frequency": Arg(int, minimum=0), "let_relation": _RELATION},
                validate=_one_letter),
    Instruction("count:count_unique", _count_unique),
    Instruction("count:counting_composition", _counting_composition,
                {"n_sent": Arg(int, minimum=1), "n_words": Arg(int, minimum=1)}),
)
