"""IFEval's ``length_constraints:*`` instructions: numbers of sentences, words and paragraphs (paper
§4.4, IFEval sub-stage).

Two notions of "paragraph" coexist in IFEval, as in the reference checkers: ``number_paragraphs``
splits at the markdown divider ``***`` (with one optional whitespace character either side), while
``nth_paragraph_first_word`` splits at blank lines (``"\\n\\n"``).
"""
from __future__ import annotations

import itertools
import re

from .spec import RELATIONS, Arg, Instruction, relation_holds
from .text import count_sentences, count_words

_DIVIDER = re.compile(r"\s?\*\*\*\s?")
_FIRST_WORD_STOP = frozenset(".,?!'\"")


def _number_sentences(text: str, num_sentences: int, relation: str) -> bool:
    return relation_holds(count_sentences(text, limit=num_sentences), relation, num_sentences)


def _number_words(text: str, num_words: int, relation: str) -> bool:
    return relation_holds(count_words(text), relation, num_words)


def _number_paragraphs(text: str, num_paragraphs: int) -> bool:
    parts = _DIVIDER.split(text)
    inner = parts[1:-1]
    if any(not p.strip() for p in inner):
        return False  # an empty paragraph between two dividers
    ends = [parts[0]] if len(parts) == 1 else [parts[0], parts[-1]]
    return len(inner) + sum(1 for p in ends if p.strip()) == num_paragraphs


def _first_word(paragraph: str) -> str:
    """The paragraph's first whitespace-separated word, leading quotes removed, cut at the first
    punctuation mark, lower-cased character by character."""
    word = paragraph.split()[0].lstrip("'").lstrip('"')
    return "".join(ch.lower() for ch in itertools.takewhile(lambda ch: ch not in _FIRST_WORD_STOP,
                                                            word))


def _nth_paragraph_first_word(text: str, num_paragraphs: int, nth_paragraph: int,
                              first_word: str) -> bool:
    paragraphs = text.split("\n\n")
    count = sum(1 for p in paragraphs if p.strip())
    # The nth paragraph is indexed among *all* blank-line-separated chunks, empty ones included, as
    # in the reference; only the total count skips the empty ones.
    if nth_paragraph > count:
        return False
    paragraph = paragraphs[nth_paragraph - 1].strip()
    if not paragraph:
        return False
    return count == num_paragraphs and _first_word(paragraph) == first_word.lower()


def _nth_within(num_paragraphs: int, nth_paragraph: int, first_word: str):
    if not 1 <= nth_paragraph <= num_paragraphs:
        return f"nth_paragraph={nth_paragraph} must be in 1..num_paragraphs={num_paragraphs}"
    return None


INSTRUCTIONS = (
    Instruction("length_constraints:number_sentences", _number_sentences, {
        "num_sentences": Arg(int, minimum=0), "relation": Arg(str, choices=RELATIONS)}),
    Instruction("length_constraints:number_paragraphs", _number_paragraphs, {
        "num_paragraphs": Arg(int, minimum=0)}),
    Instruction("length_constraints:number_words", _number_words, {
        "num_words": Arg(int, minimum=0), "relation": Arg(str, choices=RELATIONS)}),
    Instruction("length_constraints:nth_paragraph_first_word", _nth_paragraph_first_word, {
        "num_paragraphs": Arg(int, minimum=1), "nth_paragraph": Arg(int, minimum=1),
        "first_word": Arg(str)},
        validate=_nth_within),
)
