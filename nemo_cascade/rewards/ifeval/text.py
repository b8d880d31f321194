"""Text measurements the IF checkers share (paper §4.4): sentences, words, all-caps words, NLTK word
tokens and the language of a text.

The IFEval reference defines "sentence" as NLTK's English Punkt tokenizer, "capital word" as an
upper-case token of NLTK's ``word_tokenize`` and "language" as langdetect's verdict, so these are
used as libraries rather than re-derived: a different sentence splitter would change verdicts.
NLTK's English Punkt model ships with this package (``nltk_data/``, see :mod:`.punkt`) because
nothing may download at run time; langdetect runs with a fixed seed (its sampling is random
otherwise, so one response could get two verdicts). Both libraries are imported on first use so that
importing the rewards stays cheap.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Optional

from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory
from langdetect.lang_detect_exception import LangDetectException

from .punkt import register_nltk_data

_WORD = re.compile(r"\w+")
"""A word of IFEval's ``number_words``: a maximal run of word characters."""


def _without_regex_deadline() -> None:
    """Turn off the wall-clock limit NLTK ≥ 3.10 puts on each regular-expression call
    (``nltk.redos``).

    Past the limit NLTK raises, so the same megabyte response could pass on an idle machine and fail
    on a busy one; a reward must not depend on load. The patterns involved are NLTK's own fixed
    tokenizer rules, which run in time linear in the text, so time stays bounded without the
    deadline.
    """
    try:
        from nltk import redos
    except ImportError:  # NLTK ≤ 3.9 has no deadline
        return
    redos.DEFAULT_TIMEOUT = None


@functools.lru_cache(maxsize=None)
def _sentence_splitter() -> Any:
    register_nltk_data()
    _without_regex_deadline()
    from nltk.tokenize import PunktTokenizer

    return PunktTokenizer("english")


@functools.lru_cache(maxsize=None)
def _treebank() -> Any:
    _without_regex_deadline()
    from nltk.tokenize import NLTKWordTokenizer

    return NLTKWordTokenizer()


def treebank_tokens(sentence: str) -> list[str]:
    """NLTK's Treebank word tokens of one sentence (what ``word_tokenize`` does to each Punkt
    sentence)."""
    return _treebank().tokenize(sentence)


def count_words(text: str) -> int:
    """Number of maximal ``\\w+`` runs."""
    return sum(1 for _ in _WORD.finditer(text))


def sentence_spans(text: str):
    """Lazily, the (start, end) of each English Punkt sentence of ``text`` (NLTK's
    ``sent_tokenize``)."""
    return _sentence_splitter().span_tokenize(text)


def count_sentences(text: str, limit: Optional[int] = None) -> int:
    """Number of Punkt sentences, or ``limit`` as soon as that many were found.

    Every comparison the checkers make is against a threshold, so counting past it is wasted work.
    """
    n = 0
    for _ in sentence_spans(text):
        n += 1
        if limit is not None and n >= limit:
            break
    return n


def count_capital_words(text: str, limit: Optional[int] = None) -> int:
    """Number of tokens of NLTK's ``word_tokenize(text)`` that are upper case (``str.isupper``),
    capped at ``limit``. ``word_tokenize`` is Punkt sentences, each split by NLTK's Treebank word
    tokenizer. An upper-case token holds an upper-case character and the tokenizer adds none, so a
    sentence without one is not tokenised at all (the expensive step; think of a megabyte of
    punctuation)."""
    n = 0
    for start, end in sentence_spans(text):
        sentence = text[start:end]
        if not any(ch.isupper() for ch in sentence):
            continue
        n += sum(1 for tok in treebank_tokens(sentence) if tok.isupper())
        if limit is not None and n >= limit:
            return limit
    return n


@functools.lru_cache(maxsize=None)
def _language_factory() -> Any:
    factory = DetectorFactory()
    factory.load_profile(PROFILES_DIRECTORY)
    # langdetect samples n-grams at random; a seed makes one text give one answer
    factory.set_seed(0)
    return factory


def detect_language(text: str) -> Optional[str]:
    """langdetect's ISO 639-1 code for ``text`` (it reads at most the first 10,000 characters), or
    None when it cannot tell (no letters). The reference checkers count an undetectable text as
    passing."""
    detector = _language_factory().create()
    try:
        detector.append(text)
        return detector.detect()
    except LangDetectException:
        return None


__all__ = ["count_words", "count_sentences", "count_capital_words", "detect_language",
           "sentence_spans",
           "treebank_tokens"]
