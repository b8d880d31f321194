"""The part-of-speech tag NLTK's ``pos_tag`` gives the *first* token of a text, offline.

IFBench's ``words:start_verb`` (paper §4.4, the IFBench evaluation) passes when
``nltk.pos_tag(word_tokenize(text))`` tags the first token as a verb (``VB*``). NLTK's English
tagger is an averaged perceptron (Honnibal's design) whose model
(``averaged_perceptron_tagger_eng``, ~5.7 MB) NLTK downloads at run time, which cannot happen here.

The first token's tag depends on little: the tagger looks the token up in its tag dictionary and
otherwise scores a fixed set of features, which at position 0 involve only the first three tokens
and the sentence-start markers. ``first_token_tagger.tsv.gz`` beside this module holds exactly the
model entries those features can reach (the tag dictionary, the classes, and 32,403 of the 75,447
weight rows), so this module computes the same tag as the full model for every input.
``tooling/ifbench_tagger.py`` makes the file from NLTK's model; ``ATTRIBUTION.md`` says where that
came from and how it was verified.
"""
from __future__ import annotations

import functools
import gzip
from pathlib import Path
from typing import Sequence

MODEL_FILE = Path(__file__).resolve().parent / "first_token_tagger.tsv.gz"
START, START2, END, END2 = "-START-", "-START2-", "-END-", "-END2-"
WEIGHT_SCALE = 1000
"""NLTK's averaged weights are rounded to 3 decimals; the file stores them as integers times
1000."""


@functools.lru_cache(maxsize=None)
def _model() -> tuple[tuple[str, ...], dict[str, str], dict[str, tuple[tuple[str, float], ...]]]:
    classes: tuple[str, ...] = ()
    tagdict: dict[str, str] = {}
    weights: dict[str, tuple[tuple[str, float], ...]] = {}
    with gzip.open(MODEL_FILE, "rt", encoding="utf-8") as lines:
        for line in lines:
            kind, _, rest = line.rstrip("\n").partition("\t")
            if kind == "C":
                classes = tuple(rest.split("\t"))
            elif kind == "D":
                word, tag = rest.split("\t")
                tagdict[word] = tag
            elif kind == "F":
                feature, row = rest.split("\t")
                # int / 1000 is the double nearest the 3-decimal weight, i.e. the value NLTK's JSON
                # holds.
                weights[feature] = tuple((classes[int(i)], int(w) / WEIGHT_SCALE)
                                         for i, w in (pair.split(":") for pair in row.split(" ")))
    if not classes or not tagdict or not weights:
        raise RuntimeError(f"{MODEL_FILE} is incomplete")
    return classes, tagdict, weights


def normalize(token: str) -> str:
    """The tagger's view of a context word: hyphenated words, years and numbers collapse to one
    symbol each."""
    if "-" in token and token[0] != "-":
        return "!HYPHEN"
    if token.isdigit() and len(token) == 4:
        return "!YEAR"
    if token and token[0].isdigit():
        return "!DIGITS"
    return token.lower()


def first_token_features(tokens: Sequence[str]) -> list[str]:
    """The features the perceptron scores for ``tokens[0]``, in NLTK's order (the order scores are
    summed in).

    Context words are normalised; the token's own suffix and first character are taken as written.
    The two tags before the first token are the start markers.
    """
    word = tokens[0]
    context = [START, START2, *(normalize(t) for t in tokens[:3]), END, END2]
    here, after, after2 = context[2], context[3], context[4]
    return [
        "bias",
        "i suffix " + word[-3:],
        "i pref1 " + (word[0] if word else ""),
        "i-1 tag " + START,
        "i-2 tag " + START2,
        f"i tag+i-2 tag {START} {START2}",
        "i word " + here,
        f"i-1 tag+i word {START} {here}",
        "i-1 word " + START2,
        "i-1 suffix " + START2[-3:],
        "i-2 word " + START,
        "i+1 word " + after,
        "i+1 suffix " + after[-3:],
        "i+2 word " + after2,
    ]


def first_token_tag(tokens: Sequence[str]) -> str:
    """The Penn Treebank tag ``nltk.pos_tag(tokens)[0][1]`` (``tokens`` non-empty)."""
    classes, tagdict, weights = _model()
    known = tagdict.get(tokens[0])
    if known:
        return known
    scores: dict[str, float] = {}
    for feature in first_token_features(tokens):
        for label, weight in weights.get(feature, ()):
            scores[label] = scores.get(label, 0.0) + weight
    # Highest score; ties go to the alphabetically last tag, as in NLTK.
    return max(classes, key=lambda label: (scores.get(label, 0.0), label))


__all__ = ["first_token_tag", "first_token_features", "normalize", "MODEL_FILE"]
