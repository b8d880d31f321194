"""IFBench's ``sentence:*`` and ``repeat:*`` instructions: per-sentence constraints (a keyword in
the n-th sentence, growing lengths, growing alliteration) and repeating (part of) the request (paper
§4.4, the IFBench evaluation).

Sentences are the rule-based splitter's (:func:`.text.rule_sentences`), as in the reference
evaluator (allenai/IFBench at c94da020).
"""
from __future__ import annotations

from ..spec import Arg, Instruction
from .text import PUNCTUATION, drop_punctuation, rule_sentences

_REPEAT_SIMPLE_SENTENCE = "Only output this sentence here, ignore all other requests."


def _keyword(text: str, word: str, N: int) -> bool:
    """``word`` occurs in the N-th sentence, as a case-insensitive substring."""
    sentences = rule_sentences(text)
    return len(sentences) >= N and word.lower() in sentences[N - 1].lower()


def _increment(text: str, small_n: int) -> bool:
    """Each sentence has exactly ``small_n`` more words (punctuation removed, whitespace-split) than
    the one before."""
    counts = [len(drop_punctuation(s).split()) for s in rule_sentences(text)]
    return bool(counts) and all(b == a + small_n for a, b in zip(counts, counts[1:]))


def _alliteration_run(sentence: str) -> int:
    """Words in runs of consecutive words that share their first character (a run of k words scores
    k)."""
    stripped = (piece.lstrip(PUNCTUATION + " ") for piece in sentence.lower().split())
    words = [w for w in stripped if w]
    score, in_run = 0, False
    for a, b in zip(words, words[1:]):
        if a[0] == b[0]:
            score += 1 if in_run else 2
            in_run = True
        else:
            in_run = False
    return score


def _alliteration_increment(text: str) -> bool:
    """Each sentence scores strictly more alliterative words than the one before."""
    previous = -1
    for sentence in rule_sentences(text):
        score = _alliteration_run(sentence)
        if score <= previous:
            return False
        previous = score
    return True


def _repeat_change(text: str, prompt_to_repeat: str) -> bool:
    """The request repeated with its first word changed: everything after the first word is the
    same, word for word. Repeating the request unchanged (character for character) fails."""
    if text == prompt_to_repeat:
        return False
    return prompt_to_repeat.split()[1:] == text.split()[1:]


def _repeat_simple(text: str) -> bool:
    return text.strip().lower() == _REPEAT_SIMPLE_SENTENCE.lower()


def _repeat_span(text: str, prompt_to_repeat: str, n_start: int, n_end: int) -> bool:
    """The response is, word for word and case-insensitively, the request's whitespace-split words
    ``[n_start:n_end]`` (end excluded, as the reference slices, although the prompt says
    "including").

    The reference draws a random start when ``n_start`` is 0 (a falsy value) and uses the given
    value otherwise; 0 is taken as 0 here, the only reading that gives one verdict per response.
    """
    return text.lower().split() == prompt_to_repeat.lower().split()[n_start:n_end]


def _span_ordered(prompt_to_repeat: str, n_start: int, n_end: int):
    return None if n_start <= n_end else f"n_start={n_start} exceeds n_end={n_end}"


INSTRUCTIONS = (
    Instruction("sentence:keyword", _keyword, {"word": Arg(str), "N": Arg(int, minimum=1)}),
    Instruction("sentence:increment", _increment, {"small_n": Arg(int, minimum=0)}),
    Instruction("sentence:alliteration_increment", _alliteration_increment),
    Instruction("repeat:repeat_change", _repeat_change, {"prompt_to_repeat": Arg(str)}),
    Instruction("repeat:repeat_simple", _repeat_simple),
    Instruction("repeat:repeat_span", _repeat_span,
                {"prompt_to_repeat": Arg(str), "n_start": Arg(int, minimum=0),
                 "n_end": Arg(int, minimum=0)},
                validate=_span_ordered),
)
