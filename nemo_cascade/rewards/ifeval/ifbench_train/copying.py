"""IFBench-Train's ``copy:*`` and ``new:copy_span_idx`` instructions: repeat the request (whole,
several times or a character span of it) instead of answering it, and repeat a phrase with one word
changed each time (paper §4.4.2, the IFBench-Train sub-stage).

Verdicts follow the IF-RLVR verifier's definitions (open-instruct ``IFEvalG``): a copy is compared
with the request after stripping both ends and lower-casing, nothing else.
"""
from __future__ import annotations

import re
from typing import Optional

from ..spec import Arg, Instruction

_COPIES_SEPARATOR = "******"
_REGEX_SYNTAX = re.compile(r"[.^$*+?{}\[\]()|\\]")


def _same_request(text: str, prompt_to_repeat: str) -> bool:
    return text.strip().lower() == prompt_to_repeat.strip().lower()


def _copying_multiple(text: str, prompt_to_repeat: str, N: int) -> bool:
    """Exactly N copies separated by six asterisks (a seventh asterisk stays in a copy and spoils
    it)."""
    copies = text.split(_COPIES_SEPARATOR)
    return len(copies) == N and all(_same_request(c, prompt_to_repeat) for c in copies)


def _copy_span(text: str, prompt_to_repeat: str, n_start: int, n_end: int) -> bool:
    """The request's characters ``[n_start, n_end)``: the prompt says "between (and including)" both
    indices, but the reference slices, so ``n_end`` is excluded."""
    return _same_request(text, prompt_to_repeat[n_start:n_end])


def phrase_spans(text: str, first: str, last: str) -> list[str]:
    """What ``re.findall(first + " .*? " + last, text)`` finds for literal words ``first`` and
    ``last``, in one left-to-right pass.

    The reference pattern backtracks: on a megabyte line holding ``first`` many times and ``last``
    never, each start scans to the end of the line. Here the earliest start is the only one tried —
    a later start on the same line sees a subset of the text after the earliest one, so if the
    earliest finds no " last" none can. ``.`` stops at newlines, so a span never crosses one.
    """
    spans = []
    head, tail = first + " ", " " + last
    for line in text.split("\n"):
        pos = 0
        while True:
            start = line.find(head, pos)
            if start < 0:
                break
            # `.*?` may be empty: the tail may follow at once
            end = line.find(tail, start + len(head))
            if end < 0:
                break
            pos = end + len(tail)
            spans.append(line[start:pos])
    return spans


def _repeat_phrase(text: str, phrase: str, small_n: int) -> bool:
    """The phrase's first word, a space, anything on the same line, a space and its last word occur
    exactly ``small_n`` times, and each occurrence has the phrase's word count and differs from it
    in exactly one word (whitespace-split, case-sensitive). The reference never checks that the
    changed word is the middle one."""
    words = phrase.split()
    spans = phrase_spans(text, words[0], words[-1])
    if len(spans) != small_n:
        return False
    for span in spans:
        found = span.split()
        if len(found) != len(words) or sum(a != b for a, b in zip(found, words)) != 1:
            return False
    return True


def _literal_ends(phrase: str, small_n: int) -> Optional[str]:
    # The reference puts the first and last words into a regular expression unescaped; words with
    # regex syntax would match something else than they say (or not compile), so such labels are
    # refused.
    words = phrase.split()
    for word in {words[0], words[-1]}:
        if _REGEX_SYNTAX.search(word):
            return (f"phrase {phrase!r:.80}: its first and last words are matched as regular "
                    f"expressions; {word!r:.40} holds regex syntax")
    return None


def _nonempty_span(prompt_to_repeat: str, n_start: int, n_end: int) -> Optional[str]:
    return None if n_start < n_end else (f"n_start={n_start} must be below n_end={n_end} (an empty "
                                         "span)")


_REQUEST = {"prompt_to_repeat": Arg("text")}
INSTRUCTIONS = (
    Instruction("copy:repeat_phrase", _repeat_phrase,
                {"phrase": Arg("text"), "small_n": Arg(int, minimum=1)},
                validate=_literal_ends),
    Instruction("copy:copy", _same_request, _REQUEST),
    Instruction("copy:copying_simple", _same_request, _REQUEST),
    Instruction("copy:copying_multiple", _copying_multiple, {**_REQUEST, "N": Arg(int, minimum=1)}),
    # n_start 0 is a valid index; the reference reads 0 as "not given" and draws one, the label's 0
    # is used here.
    Instruction("new:copy_span_idx", _copy_span,
                {**_REQUEST, "n_start": Arg(int, minimum=0), "n_end": Arg(int, minimum=1)},
                validate=_nonempty_span),
)
