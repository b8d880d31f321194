"""IFBench's ``count:*`` instructions: how many words, unique words, numbers, names, pronouns,
conjunctions, keywords and punctuation marks a response holds (paper §4.4, the IFBench evaluation).

Verdicts follow the IFBench evaluator that produced the published reference results (allenai/IFBench
at c94da020). Its notions of "word" differ between instructions and are kept as they are, since a
different tokenisation would flip verdicts: ``\\w+`` runs for ``word_count_range``, whitespace
pieces trimmed of ASCII punctuation for ``unique_word_count`` and ``conjunctions``, and so on.
"""
from __future__ import annotations

import re

from ..spec import Arg, Instruction
from ..text import count_words
from .text import drop_punctuation, trim_punctuation

_CONJUNCTIONS = frozenset({"and", "but", "for", "nor", "or", "so", "yet"})
_PERSON_NAMES = (
    "Emma", "Liam", "Sophia", "Jackson", "Olivia", "Noah", "Ava", "Lucas", "Isabella", "Mason",
    "Mia", "Ethan",
    "Charlotte", "Alexander", "Amelia", "Benjamin", "Harper", "Leo", "Zoe", "Daniel", "Chloe",
    "Samuel", "Lily",
    "Matthew", "Grace", "Owen", "Abigail", "Gabriel", "Ella", "Jacob", "Scarlett", "Nathan",
    "Victoria", "Elijah",
    "Layla", "Nicholas", "Audrey", "David", "Hannah", "Christopher", "Penelope", "Thomas", "Nora",
    "Andrew",
    "Aria", "Joseph", "Claire", "Ryan", "Stella", "Jonathan")
"""The 50 names the instruction's prompt lists; only these count."""
_PRONOUNS = frozenset({
    "i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves", "you", "your",
    "yours", "yourself",
    "yourselves", "he", "him", "his", "himself", "she", "her", "hers", "herself", "it", "its",
    "itself", "they",
    "them", "their", "theirs", "themselves"})
"""Personal, possessive and reflexive pronouns (the reference's set; later IFBench versions add
more)."""
_KEYWORD_TIMES = (1, 2, 3, 5, 7)
"""``keywords_multiple``: keyword k must occur exactly this many times."""
_MARKS = frozenset(".,!?;:")
_JAPANESE = re.compile("[\u3040-\u30ff\u4e00-\u9fff]")
"""Hiragana, katakana and the CJK unified ideographs."""


def _word_count_range(text: str, min_words: int, max_words: int) -> bool:
    return min_words <= count_words(text) <= max_words


def _unique_word_count(text: str, N: int) -> bool:
    # An all-punctuation piece trims to "", which counts as one more distinct word, as in the
    # reference.
    return len({trim_punctuation(w) for w in text.lower().split()}) >= N


def _conjunctions(text: str, small_n: int) -> bool:
    # Distinct as written: "and", "And" and "and," are three different conjunctions to the
    # reference.
    used = {w for w in text.split() if trim_punctuation(w).lower() in _CONJUNCTIONS}
    return len(used) >= small_n


def _person_names(text: str, N: int) -> bool:
    # A case-sensitive substring test: "Leo" is also found in "Leonard".
    return sum(1 for name in _PERSON_NAMES if name in text) >= N


def _numbers(text: str, N: int) -> bool:
    # Punctuation goes first, so "3.14" and "1,000" are one number each.
    return len(re.findall(r"\d+", drop_punctuation(text))) == N


def _pronouns(text: str, N: int) -> bool:
    words = drop_punctuation(text.replace("/", " ").lower()).split()  # "she/her" is two pronouns
    return sum(1 for w in words if w in _PRONOUNS) >= N


def _keywords_multiple(text: str, keyword1: str, keyword2: str, keyword3: str, keyword4: str,
                       keyword5: str) -> bool:
    lowered = text.lower()
    keywords = (keyword1, keyword2, keyword3, keyword4, keyword5)
    # Case-insensitive substring counts (non-overlapping); keywords are trimmed as the reference
    # does.
    return all(lowered.count(k.strip().lower()) == times
               for k, times in zip(keywords, _KEYWORD_TIMES))


def _punctuation(text: str) -> bool:
    """Every mark of ``. , ! ? ; :`` plus an interrobang (``?!``, ``!?`` or ``‽``).

    The ``?!`` (else ``!?``) that serves as the interrobang is removed once before the marks are
    looked for, so it does not also count as the question and exclamation marks.
    """
    if "?!" not in text and "!?" not in text and "‽" not in text:
        return False
    rest = text.replace("?!", "", 1)
    if len(rest) == len(text):
        rest = text.replace("!?", "", 1)
    return _MARKS <= set(rest)


def _words_japanese(text: str, N: int) -> bool:
    """Every N-th whitespace piece, trimmed of punctuation, is Japanese unless it is empty or all
    digits."""
    for position, piece in enumerate(text.split(), start=1):
        word = trim_punctuation(piece)
        if position % N == 0 and word and not word.isdigit() and not _JAPANESE.search(word):
            return False
    return True


def _range_ordered(min_words: int, max_words: int):
    return None if min_words <= max_words else (f"min_words={min_words} exceeds "
                                                f"max_words={max_words}")


_KEYWORD = Arg(str)
INSTRUCTIONS = (
    Instruction("count:word_count_range", _word_count_range,
                {"min_words": Arg(int, minimum=0), "max_words": Arg(int, minimum=0)},
                validate=_range_ordered),
    Instruction("count:unique_word_count", _unique_word_count, {"N": Arg(int, minimum=0)}),
    Instruction("count:conjunctions", _conjunctions, {"small_n": Arg(int, minimum=0)}),
    Instruction("count:person_names", _person_names, {"N": Arg(int, minimum=0)}),
    Instruction("count:numbers", _numbers, {"N": Arg(int, minimum=0)}),
    Instruction("count:pronouns", _pronouns, {"N": Arg(int, minimum=0)}),
    Instruction("count:keywords_multiple", _keywords_multiple,
                {f"keyword{k}": _KEYWORD for k in range(1, 6)}),
    Instruction("count:punctuation", _punctuation),
    Instruction("count:words_japanese", _words_japanese, {"N": Arg(int, minimum=1)}),
)
