"""IFEval's ``keywords:*`` instructions: required, counted and forbidden words, and letter frequency
(paper §4.4, IFEval sub-stage).

Semantics follow the IFEval reference checkers (Zhou et al. 2023, as shipped in lm-eval): keywords
are matched case-insensitively *as regular expressions* anywhere in the text (so "cat" also matches
"category"), forbidden words only as whole words (``\\b...\\b``).
"""
from __future__ import annotations

import re

from .spec import RELATIONS, Arg, Instruction, pattern_problem, relation_holds


def _existence(text: str, keywords: list[str]) -> bool:
    return all(re.search(k, text, flags=re.IGNORECASE) for k in keywords)


def _frequency(text: str, keyword: str, frequency: int, relation: str) -> bool:
    count = sum(1 for _ in re.finditer(keyword.strip(), text, flags=re.IGNORECASE))
    return relation_holds(count, relation, frequency)


def _forbidden(text: str, forbidden_words: list[str]) -> bool:
    return not any(re.search(r"\b" + w + r"\b", text, flags=re.IGNORECASE) for w in forbidden_words)


def _letter_frequency(text: str, letter: str, let_frequency: int, let_relation: str) -> bool:
    # The reference replaces a "letter" outside a-z (IFEval has '!' and '#') by a random letter;
    # counting the character the prompt names is the only deterministic reading of such a label.
    count = text.lower().count(letter.strip().lower())
    return relation_holds(count, let_relation, let_frequency)


def _usable(*patterns: str):
    for pattern in patterns:
        problem = pattern_problem(pattern)
        if problem:
            return f"{pattern!r:.80} {problem}"
    return None


def _one_character(letter: str, let_frequency: int, let_relation: str):
    return None if len(letter.strip()) == 1 else f"letter {letter!r} must be one character"


INSTRUCTIONS = (
    Instruction("keywords:existence", _existence, {"keywords": Arg(list)},
                validate=lambda keywords: _usable(*keywords)),
    Instruction("keywords:frequency", _frequency, {
        "keyword": Arg("regex"), "frequency": Arg(int, minimum=0),
        "relation": Arg(str, choices=RELATIONS)}),
    Instruction("keywords:forbidden_words", _forbidden, {"forbidden_words": Arg(list)},
                validate=lambda forbidden_words: _usable(*forbidden_words)),
    Instruction("keywords:letter_frequency", _letter_frequency, {
        "letter": Arg(str), "let_frequency": Arg(int, minimum=0),
        "let_relation": Arg(str, choices=RELATIONS)},
        validate=_one_character),
)
