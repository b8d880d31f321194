"""IFBench-Train's ``keywords:*`` instructions: a keyword exactly once, a keyword counted, two
keywords once and twice, a word left out, a palindrome, a keyword at a position, the same first and
last word, and no adjacent words starting with consecutive letters (paper §4.4.2, the IFBench-Train
sub-stage).

Verdicts follow the IF-RLVR verifier's definitions (open-instruct ``IFEvalG``). As in IFEval,
counted keywords are regular expressions matched case-insensitively anywhere (so "cat" is also found
in "category"); labels with backtracking regex syntax are refused (:func:`..spec.pattern_problem`).
"""
from __future__ import annotations

import re

from ..ifbench.text import head_word_tokens, last_word_tokens
from ..ifbench.words import _keywords_specific_position
from ..spec import RELATIONS, Arg, Instruction, relation_holds


def _occurrences(text: str, keyword: str) -> int:
    return sum(1 for _ in re.finditer(keyword.strip(), text, flags=re.IGNORECASE))


def _word_once(text: str, keyword: str) -> bool:
    return _occurrences(text, keyword) == 1


def _word_count(text: str, keyword: str, frequency: int, relation: str) -> bool:
    return relation_holds(_occurrences(text, keyword), relation, frequency)


def _count_increment(text: str, keyword1: str, keyword2: str) -> bool:
    """``keyword1`` exactly once and ``keyword2`` exactly twice (each counted on its own, so a
    keyword inside the other counts for both)."""
    return _occurrences(text, keyword1) == 1 and _occurrences(text, keyword2) == 2


def _exclude_word(text: str, keyword: str) -> bool:
    """The keyword never occurs between two spaces — the reference's whole test, so it may still
    start or end the response or a line, or stand before punctuation."""
    return f" {keyword.strip()} " not in text


def _palindrome(text: str) -> bool:
    """Some whitespace-separated piece reads the same backwards, punctuation and case included (one
    letter suffices: "a", "I")."""
    return any(word == word[::-1] for word in text.split())


def _start_end(text: str) -> bool:
    """NLTK's ``word_tokenize`` gives at least two tokens, the first equal to the last
    case-insensitively (a final period is a token of its own, so "Yes ... yes." fails)."""
    head = head_word_tokens(text, 2)
    return len(head) == 2 and head[0].lower() == last_word_tokens(text, 1)[0].lower()


def _no_adjacent_consecutive(text: str) -> bool:
    """No whitespace-separated piece starts with the character (lower-cased) right after the one the
    piece before it starts with (any characters: "1 2" fails too); a first character that
    lower-cases to two fails."""
    initials = [word[0].lower() for word in text.split()]
    if len(initials) > 1 and any(len(c) != 1 for c in initials):
        return False
    return all(ord(b) - ord(a) != 1 for a, b in zip(initials, initials[1:]))


_COUNTED = Arg("regex")
INSTRUCTIONS = (
    Instruction("keywords:word_once", _word_once, {"keyword": _COUNTED}),
    Instruction("keywords:word_count_different_numbers", _word_count, {
        "keyword": _COUNTED, "frequency": Arg(int, minimum=0),
        "relation": Arg(str, choices=RELATIONS)}),
    Instruction("count:count_increment_word", _count_increment,
                {"keyword1": _COUNTED, "keyword2": _COUNTED}),
    Instruction("keywords:exclude_word_harder", _exclude_word, {"keyword": Arg("text")}),
    Instruction("keywords:palindrome", _palindrome),
    # The same definition as IFBench's test-set words:keywords_specific_position (a token of the
    # n-th rule-based sentence); a separate id in a separate registry.
    Instruction("keywords:keyword_specific_position", _keywords_specific_position,
                {"keyword": Arg("text"), "n": Arg(int, minimum=1), "m": Arg(int, minimum=1)}),
    Instruction("keywords:start_end", _start_end),
    Instruction("keywords:no_adjacent_consecutive", _no_adjacent_consecutive),
)
