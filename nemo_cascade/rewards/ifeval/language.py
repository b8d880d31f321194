"""IFEval's ``language:response_language`` and ``change_case:*`` instructions: the language and the
letter case of the whole response (paper §4.4, IFEval sub-stage).

Language is langdetect's verdict (:func:`.text.detect_language`); a text langdetect cannot classify
(no letters) passes, as in the reference checkers.
"""
from __future__ import annotations

import functools
import os

from langdetect.detector_factory import PROFILES_DIRECTORY

from .spec import RELATIONS, Arg, Instruction, relation_holds
from .text import count_capital_words, detect_language


def _is_language(text: str, language: str) -> bool:
    found = detect_language(text)
    return found is None or found == language


def _english_capital(text: str) -> bool:
    return text.isupper() and _is_language(text, "en")


def _english_lowercase(text: str) -> bool:
    return text.islower() and _is_language(text, "en")


def _capital_word_frequency(text: str, capital_frequency: int, capital_relation: str) -> bool:
    count = count_capital_words(text, limit=capital_frequency)
    return relation_holds(count, capital_relation, capital_frequency)


@functools.lru_cache(maxsize=None)
def detectable_languages() -> frozenset[str]:
    """The ISO 639-1 codes langdetect can answer (one profile file each)."""
    return frozenset(os.listdir(PROFILES_DIRECTORY))


def _known_language(language: str):
    if language in detectable_languages():
        return None
    return (f"language {language!r} is not one langdetect can detect "
            f"({sorted(detectable_languages())})")


INSTRUCTIONS = (
    Instruction("language:response_language", _is_language, {"language": Arg(str)},
                validate=_known_language),
    Instruction("change_case:capital_word_frequency", _capital_word_frequency, {
        "capital_frequency": Arg(int, minimum=0), "capital_relation": Arg(str, choices=RELATIONS)}),
    Instruction("change_case:english_capital", _english_capital),
    Instruction("change_case:english_lowercase", _english_lowercase),
)
