"""IFBench's ``words:*`` instructions: constraints on each word — its first letter, vowels,
consonants, length, syllables, repetitions, position and part of speech (paper §4.4, the IFBench
evaluation).

Verdicts follow the reference evaluator (allenai/IFBench at c94da020): "words" are whitespace
pieces, mostly with ASCII punctuation removed first; sentences are the rule-based splitter's;
``start_verb``, ``words_position`` and ``keywords_specific_position`` use NLTK's ``word_tokenize``
tokens.
"""
from __future__ import annotations

import string
from collections import Counter

import syllapy

from ..spec import Arg, Instruction
from .tagger import first_token_tag
from .text import (drop_punctuation, head_word_tokens, last_word_tokens, rule_sentences,
                   trim_punctuation)

_ALPHABET = string.ascii_lowercase
_VOWELS = frozenset("aeiou")
_CONSONANTS = frozenset("bcdfghjklmnpqrstvwxyz")
_PRIMES = frozenset({2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73,
                     79, 83, 89, 97})
"""Primes up to 97 only: a longer word fails even if its length is prime, as in the reference."""


def _alphabet(text: str) -> bool:
    """Word k+1 starts with the letter after word k's (z wraps to a); the first must start with
    a-z."""
    words = drop_punctuation(text).split()
    if not words:
        return False
    letter = words[0][0].lower()
    # len: some capitals lower-case to two characters
    if len(letter) != 1 or letter not in _ALPHABET:
        return False
    for word in words[1:]:
        letter = _ALPHABET[(_ALPHABET.index(letter) + 1) % 26]
        if word.lower()[0] != letter:
            return False
    return True


def _vowel(text: str) -> bool:
    """One paragraph (no line break inside the stripped text) using at most three of a, e, i, o,
    u."""
    stripped = text.strip()
    return "\n" not in stripped and len(_VOWELS & set(stripped.lower())) <= 3


def _consonants(text: str) -> bool:
    """Every whitespace piece holds two adjacent lower-case consonants (after lower-casing;
    punctuation stays)."""
    for word in text.lower().split():
        if not any(a in _CONSONANTS and b in _CONSONANTS for a, b in zip(word, word[1:])):
            return False
    return True


def _palindrome(text: str) -> bool:
    words = drop_punctuation(text).lower().split()
    return sum(1 for w in words if len(w) >= 5 and w == w[::-1]) >= 10


def _prime_lengths(text: str) -> bool:
    return all(len(w) in _PRIMES for w in drop_punctuation(text).split())


def _repeats(text: str, small_n: int) -> bool:
    counts = Counter(drop_punctuation(text.lower()).split())
    return all(c <= small_n for c in counts.values())


def _odd_even_syllables(text: str) -> bool:
    """Syllable counts (syllapy) of consecutive words alternate between odd and even."""
    parities = [syllapy.count(w) % 2 for w in drop_punctuation(text).lower().split()]
    return all(a != b for a, b in zip(parities, parities[1:]))


def _last_first(text: str) -> bool:
    """Each sentence's last word is the next sentence's first word (case-insensitively)."""
    sentences = rule_sentences(text)
    for current, following in zip(sentences, sentences[1:]):
        last = current.rstrip(string.punctuation + " ").split()
        first = following.lstrip(string.punctuation + " ").split()
        if not last or not first:
            return False  # a sentence of punctuation only: the reference fails on it
        if last[-1].lower() != first[0].lower():
            return False
    return True


def _paragraph_last_first(text: str) -> bool:
    """Each non-blank line starts and ends with the same word (lower-cased, outer punctuation
    trimmed)."""
    for line in text.split("\n"):
        words = trim_punctuation(line.strip().lower()).split()
        if words and words[0] != words[-1]:
            return False
    return True


def _no_consecutive(text: str) -> bool:
    words = drop_punctuation(text.lower()).split()
    return all(a[0] != b[0] for a, b in zip(words, words[1:]))


def _start_verb(text: str) -> bool:
    """NLTK tags the first ``word_tokenize`` token as a verb (VB, VBD, VBG, VBN, VBP or VBZ); that
    tag depends on the first three tokens only."""
    first_three = head_word_tokens(text, 3)
    return bool(first_three) and "VB" in first_token_tag(first_three)


def _words_position(text: str, keyword: str) -> bool:
    """The second and the second-to-last ``word_tokenize`` tokens are both ``keyword``
    (case-sensitive)."""
    keyword = keyword.strip()
    head = head_word_tokens(text, 2)
    return len(head) == 2 and head[1] == keyword and last_word_tokens(text, 2)[0] == keyword


def _keywords_specific_position(text: str, keyword: str, n: int, m: int) -> bool:
    """The m-th ``word_tokenize`` token of the n-th sentence (rule-based splitter) is
    ``keyword``."""
    sentences = rule_sentences(text)
    if len(sentences) < n:
        return False
    tokens = head_word_tokens(sentences[n - 1], m)
    return len(tokens) == m and tokens[-1] == keyword.strip()


INSTRUCTIONS = (
    Instruction("words:alphabet", _alphabet),
    Instruction("words:vowel", _vowel),
    Instruction("words:consonants", _consonants),
    Instruction("words:palindrome", _palindrome),
    Instruction("words:prime_lengths", _prime_lengths),
    Instruction("words:repeats", _repeats, {"small_n": Arg(int, minimum=0)}),
    Instruction("words:odd_even_syllables", _odd_even_syllables),
    Instruction("words:last_first", _last_first),
    Instruction("words:paragraph_last_first", _paragraph_last_first),
    Instruction("words:no_consecutive", _no_consecutive),
    Instruction("words:start_verb", _start_verb),
    Instruction("words:words_position", _words_position, {"keyword": Arg(str)}),
    Instruction("words:keywords_specific_position", _keywords_specific_position,
                {"keyword": Arg(str), "n": Arg(int, minimum=1), "m": Arg(int, minimum=1)}),
)
