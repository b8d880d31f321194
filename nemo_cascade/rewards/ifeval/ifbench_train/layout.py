"""IFBench-Train's layout instructions: two paragraphs (``paragraphs:*``), hyphen-joined sentences,
bracketed words and bigrams (``detectable_format:*``), no dots or exclamation marks
(``punctuation:*``), and the first or last word of the response or of every sentence
(``first_word:*``, ``last_word:*``) (paper §4.4.2, the IFBench-Train sub-stage).

Verdicts follow the IF-RLVR verifier's definitions (open-instruct ``IFEvalG``): "words" are
whitespace-separated pieces and "sentences" come from the rule-based splitter of the original IFEval
code (:func:`..ifbench.text.rule_sentences`).
"""
from __future__ import annotations

import re

from ..ifbench.text import rule_sentences
from ..spec import Arg, Instruction

_DIVIDER = re.compile(r"\s?\*\*\*\s?")
_NOT_WORD = re.compile(r"[^\w\s]")


def _two_paragraphs(paragraphs: list[str]) -> bool:
    """Two non-blank parts; a blank part is allowed only first or last (text before the first
    divider or after the last one), never between two dividers."""
    count = len(paragraphs)
    for i, paragraph in enumerate(paragraphs):
        if not paragraph.strip():
            if 0 < i < len(paragraphs) - 1:
                return False
            count -= 1
    return count == 2


def _paragraphs_divided(text: str) -> bool:
    """Two paragraphs separated by the markdown divider ``***`` (with at most one whitespace
    character on either side belonging to it)."""
    return _two_paragraphs(_DIVIDER.split(text))


def _paragraphs_blank_line(text: str) -> bool:
    """Two paragraphs separated by ``\\n\\n``; a third newline starts the second paragraph with a
    newline, a fourth makes a blank paragraph in the middle."""
    return _two_paragraphs(text.split("\n\n"))


def _sentence_hyphens(text: str) -> bool:
    """The pieces between hyphens are the response's sentences, unpadded: each hyphen-separated
    piece equals the sentence at the same position when the hyphens are read as spaces (rule-based
    splitter) and has no outer whitespace. Only as many pieces as there are sentences are compared,
    as in the reference."""
    sentences = rule_sentences(text.replace("-", " "))
    return all(piece == piece.strip()
               and piece == sentence for piece, sentence in zip(text.split("-"), sentences))


def _square_brackets(text: str) -> bool:
    return all(word.startswith("[") and word.endswith("]") for word in text.split())


def _bigram_wrapping(text: str) -> bool:
    """Words 1–2, 3–4, ... each open with ``<<`` on the first and close with ``>>`` on the second;
    an odd last word is free."""
    words = text.split()
    return all(words[i].startswith("<<")
               and words[i + 1].endswith(">>") for i in range(0, len(words) - 1, 2))


def _first_word_answer(text: str, first_word: str) -> bool:
    words = text.split()
    return bool(words) and words[0].lower() == first_word.strip().lower()


def _first_word_sent(text: str, first_word: str) -> bool:
    """Every rule-based sentence is non-blank and its first whitespace piece is the word,
    case-insensitively (punctuation stays: "Yes," is not "yes")."""
    expected = first_word.strip().lower()
    for sentence in rule_sentences(text):
        if not sentence.strip() or sentence.split()[0].lower() != expected:
            return False
    return True


def _last_word(piece: str) -> str:
    return _NOT_WORD.sub("", piece).lower()


def _last_word_answer(text: str, last_word: str) -> bool:
    """The last whitespace piece, without the characters that are neither word characters nor
    whitespace, is the word, case-insensitively."""
    words = text.split()
    return bool(words) and _last_word(words[-1]) == last_word.strip().lower()


def _last_word_sent(text: str, last_word: str) -> bool:
    """Every rule-based sentence is non-blank and its last whitespace piece, punctuation removed, is
    the word."""
    expected = last_word.strip().lower()
    for sentence in rule_sentences(text):
        if not sentence.strip() or _last_word(sentence.split()[-1]) != expected:
            return False
    return True


_WORD = {"first_word": Arg("text")}
_LAST = {"last_word": Arg("text")}
INSTRUCTIONS = (
    Instruction("paragraphs:paragraphs", _paragraphs_divided),
    Instruction("paragraphs:paragraphs2", _paragraphs_blank_line),
    Instruction("detectable_format:sentence_hyphens", _sentence_hyphens),
    Instruction("detectable_format:square_brackets", _square_brackets),
    Instruction("detectable_format:bigram_wrapping", _bigram_wrapping),
    Instruction("punctuation:punctuation_dot", lambda text: "." not in text),
    Instruction("punctuation:punctuation_exclamation", lambda text: "!" not in text),
    Instruction("first_word:first_word_answer", _first_word_answer, _WORD),
    Instruction("first_word:first_word_sent", _first_word_sent, _WORD),
    Instruction("last_word:last_word_answer", _last_word_answer, _LAST),
    Instruction("last_word:last_word_sent", _last_word_sent, _LAST),
)
