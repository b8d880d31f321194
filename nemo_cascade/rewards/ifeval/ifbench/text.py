"""Text measurements shared by the IFBench checkers: punctuation stripping, the rule-based sentence
splitter, English stop words and NLTK word tokens.

IFBench (Pyatkin et al. 2025; its test set is the IF evaluation of paper §4.4) measures text in
several different ways, and a verdict only matches the reference evaluator if each checker uses the
same one:

* "punctuation" is Python's ``string.punctuation`` (ASCII only), removed with ``str.translate`` or
  trimmed from both ends of a whitespace-separated word;
* "sentences", for most checkers, come from the rule-based splitter of the original IFEval code
  (abbreviation and acronym rules, then a cut after every ``.``, ``?`` and ``!``),
  :func:`rule_sentences` — not NLTK's Punkt;
* "words" are ``str.split()`` pieces, ``\\w+`` runs (``re`` semantics, as NLTK ≤ 3.9 matched them)
  or NLTK's ``word_tokenize`` tokens (Punkt sentences, each split by the Treebank tokenizer),
  depending on the checker.
"""
from __future__ import annotations

import re
import string
from typing import Iterator

from ..text import sentence_spans, treebank_tokens

PUNCTUATION = string.punctuation
_DELETE_PUNCTUATION = str.maketrans("", "", string.punctuation)
_TRIM = string.punctuation + " "


def drop_punctuation(text: str) -> str:
    """``text`` without any ASCII punctuation character."""
    return text.translate(_DELETE_PUNCTUATION)


def trim_punctuation(word: str) -> str:
    """``word`` without ASCII punctuation and spaces at either end."""
    return word.strip(_TRIM)


# The rule-based splitter, as a sequence of rewrites. "<prd>" marks a dot that does not end a
# sentence and "<stop>" a sentence end; the order matters (later rules see the markers of earlier
# ones).
_LETTER = "([A-Za-z])"
# words that start a sentence after an abbreviation
_STARTER = (r"(Mr|Mrs|Ms|Dr|Prof|Capt|Cpt|Lt|He\s|She\s|It\s|They\s|Their\s|Our\s|We\s|But\s"
            r"|However\s|That\s|This\s|Wherever)")
_SUFFIX = "(Inc|Ltd|Jr|Sr|Co)"
_REWRITES = (
    (re.compile("(Mr|St|Mrs|Ms|Dr)[.]"), "\\1<prd>"),                      # titles
    (re.compile("[.](com|net|org|io|gov|edu|me)"), "<prd>\\1"),             # web domains
    (re.compile("([0-9])[.]([0-9])"), "\\1<prd>\\2"),                       # decimals
    # an ellipsis ends a sentence once
    (re.compile(r"\.{2,}"), lambda m: "<prd>" * len(m.group(0)) + "<stop>"),
)
_REWRITES_AFTER_PHD = (
    (re.compile(r"\s" + _LETTER + "[.] "), " \\1<prd> "),                   # initials
    # acronym ending a sentence
    (re.compile("([A-Z][.][A-Z][.](?:[A-Z][.])?) " + _STARTER), "\\1<stop> \\2"),
    (re.compile(_LETTER + "[.]" + _LETTER + "[.]" + _LETTER + "[.]"), "\\1<prd>\\2<prd>\\3<prd>"),
    (re.compile(_LETTER + "[.]" + _LETTER + "[.]"), "\\1<prd>\\2<prd>"),
    # "Inc. He ..." ends a sentence
    (re.compile(" " + _SUFFIX + "[.] " + _STARTER), " \\1<stop> \\2"),
    (re.compile(" " + _SUFFIX + "[.]"), " \\1<prd>"),
    (re.compile(" " + _LETTER + "[.]"), " \\1<prd>"),
)


def rule_sentences(text: str) -> list[str]:
    """The sentences of the original IFEval splitter (also lm-eval's ``split_into_sentences``),
    stripped.

    Newlines are spaces to it; sentence-final punctuation inside closing quotes is moved after the
    quote so that the quote stays in its sentence. Blank sentences can occur in the middle (``"a. .
    b"``) and are kept; only a blank last one is dropped.
    """
    text = " " + text.replace("\n", " ") + "  "
    for pattern, replacement in _REWRITES:
        text = pattern.sub(replacement, text)
    text = text.replace("Ph.D.", "Ph<prd>D<prd>")
    for pattern, replacement in _REWRITES_AFTER_PHD:
        text = pattern.sub(replacement, text)
    text = text.replace(".”", "”.").replace('."', '".').replace('!"', '"!').replace('?"', '"?')
    text = text.replace(".", ".<stop>").replace("?", "?<stop>").replace("!", "!<stop>")
    sentences = [s.strip() for s in text.replace("<prd>", ".").split("<stop>")]
    if sentences and not sentences[-1]:
        sentences.pop()
    return sentences


ENGLISH_STOPWORDS = frozenset("""
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves
he him his himself she she's her hers herself it it's its itself they them their theirs themselves
what which who whom this that that'll these those am is are was were be been being have has had
having do does did doing a an the and but if or because as until while of at by for with about
against between into through during before after above below to from up down in out on off over
under again further then once here there when where why how all any both each few more most other
some such no nor not only own same so than too very s t can will just don don't should should've now
d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't
haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't
wasn wasn't weren weren't won won't wouldn wouldn't
""".split())
"""NLTK's English stop-word list (``stopwords`` corpus of nltk_data, 179 entries). Newer nltk_data
releases add 19 contractions (``he'd``, ``i'm``, ...); like the entries with an apostrophe here they
can never equal a ``\\w+`` token, so the counts below are the same with either list."""
assert len(ENGLISH_STOPWORDS) == 179


def count_stopwords(text: str) -> int:
    """Number of ``\\w+`` tokens that are English stop words, case-insensitively."""
    return sum(1 for m in re.finditer(r"\w+", text) if m.group().lower() in ENGLISH_STOPWORDS)


def word_tokens(text: str) -> Iterator[str]:
    """NLTK's ``word_tokenize(text)``, lazily: Punkt sentences in order, each split by the Treebank
    tokenizer."""
    for start, end in sentence_spans(text):
        yield from treebank_tokens(text[start:end])


# How far the Treebank tokenizer looks. Its tokens never span whitespace and its rules look at most
# one character past a whitespace-separated chunk, except at the two ends of the sentence: a leading
# `"` becomes ``, and a final period is split off its word together with any closing brackets and
# quotes after it, across spaces (`end. ) "`). So a prefix cut after whitespace tokenises like the
# whole sentence, except for its last chunk — and for the chunks before it when the last one is all
# closers. A suffix starting with whitespace tokenises like the end of the whole sentence.
_CHUNK = re.compile(r"\S+\s*")
_CLOSERS = frozenset("])}>\"'»”’")


def _head_tokens(sentence: str, k: int) -> list[str]:
    """``treebank_tokens(sentence)[:k]``, tokenising a prefix of a few chunks where the sentence is
    long."""
    chunks = 0
    for chunk in _CHUNK.finditer(sentence):
        chunks += 1
        # Each chunk yields at least one token, so k earlier chunks cover the first k tokens.
        if chunks > k and not set(chunk.group().rstrip()) <= _CLOSERS:
            return treebank_tokens(sentence[:chunk.end()])[:k]
    return treebank_tokens(sentence)[:k]


def _tail_tokens(sentence: str, k: int) -> list[str]:
    """``treebank_tokens(sentence)[-k:]``, tokenising a suffix of k chunks where the sentence is
    long."""
    starts = [m.start() for m in re.finditer(r"(?<=\s)\S", sentence)]  # chunks after the first one
    if len(starts) < k:
        return treebank_tokens(sentence)[-k:]
    # from the whitespace before the k-th last chunk
    return treebank_tokens(sentence[starts[-k] - 1:])[-k:]


def head_word_tokens(text: str, k: int) -> list[str]:
    """``word_tokenize(text)[:k]`` without tokenising the rest of the text."""
    tokens: list[str] = []
    for start, end in sentence_spans(text):
        if len(tokens) >= k:
            break
        tokens += _head_tokens(text[start:end], k - len(tokens))
    return tokens[:k]


def last_word_tokens(text: str, k: int) -> list[str]:
    """``word_tokenize(text)[-k:]`` without tokenising the rest of the text."""
    tail: list[str] = []
    for start, end in reversed(list(sentence_spans(text))):
        if len(tail) >= k:
            break
        tail = _tail_tokens(text[start:end], k - len(tail)) + tail
    return tail[-k:] if k else []


__all__ = ["PUNCTUATION", "ENGLISH_STOPWORDS", "count_stopwords", "drop_punctuation",
           "trim_punctuation", "rule_sentences", "word_tokens", "head_word_tokens",
           "last_word_tokens"]
