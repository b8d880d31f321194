"""Our IFEval verdicts equal lm-eval's reference checkers on the 541 IFEval prompts with varied
responses.

The corpus (tests/unit/ifeval_corpus.py) is GPT-4's reference response to every prompt plus edits
meant to flip each instruction; the tests require identical strict and loose verdicts on it, and
that every one of the 25 instructions is seen both followed and not followed, under the strict and
under the loose verdict. lm-eval, langdetect and nltk are installed by tools/setup_venv.sh; a
missing one is an error, not a skip.

Known, deliberate difference: for ``keywords:letter_frequency`` with a "letter" outside a-z (IFEval
uses '!' and '#') the reference draws a random letter; we count the named character. Those two
instances are left out here and tested by hand in test_ifeval_reward.py.
"""
from __future__ import annotations

import collections

import pytest

from nemo_cascade.rewards.ifeval import IFEVAL, loose_variants, per_instruction
from nemo_cascade.rewards.ifeval.reward import _passes
from nemo_cascade.rewards.ifeval.spec import bind

from .ifeval_corpus import corpus
from .ifeval_reference import load_lm_eval_ifeval

# Checkers that cost milliseconds per call (langdetect, NLTK tokenisers) see a smaller part of the
# corpus: the reference response, the upper/lower-case edits and their own targeted edits.
EXPENSIVE = {"change_case:english_lowercase", "change_case:english_capital",
             "language:response_language", "change_case:capital_word_frequency",
             "length_constraints:number_sentences"}


@pytest.fixture(scope="module")
def reference():
    return load_lm_eval_ifeval()


@pytest.fixture(scope="module")
def rows():
    return corpus()


def _randomised_by_reference(iid: str, kwargs: dict) -> bool:
    return iid == "keywords:letter_frequency" and not ("a" <= kwargs["letter"].lower() <= "z")


def _texts_for(iid: str, texts: list[str], own: list[str]) -> list[str]:
    if iid not in EXPENSIVE:
        return texts
    base = texts[0]
    return list(dict.fromkeys([base, base.upper(), base.lower(), *own]))


def _reference_checker(registry, iid: str, kwargs: dict):
    checker = registry.INSTRUCTION_DICT[iid](iid)
    # as lm-eval's utils.py does
    checker.build_description(**{k: v for k, v in kwargs.items() if v})
    return checker


def _checker_pairs(reference, rows):
    """``(row, iid, kwargs, texts, own edits, our instruction, its bound kwargs, lm-eval's
    checker)`` for every instruction of the corpus that the reference does not randomise."""
    registry, _ = reference
    for row, texts, own_edits in rows:
        for iid, kwargs, own in zip(row["instruction_id_list"], row["kwargs"], own_edits):
            if not _randomised_by_reference(iid, kwargs):
                yield (row, iid, kwargs, texts, own, IFEVAL[iid], bind(IFEVAL[iid], kwargs),
                       _reference_checker(registry, iid, kwargs))


def test_every_checker_agrees_with_lm_eval(reference, rows):
    seen = collections.defaultdict(set)
    mismatches = []
    for row, iid, kwargs, texts, own, ours, bound, theirs in _checker_pairs(reference, rows):
        for text in _texts_for(iid, texts, own):
            verdict = _passes(ours, bound, text)
            expected = bool(text.strip()) and bool(theirs.check_following(text))
            seen[iid].add(verdict)
            if verdict != expected:
                mismatches.append((row["key"], iid, kwargs, text[:120], expected, verdict))
    assert not mismatches, f"{len(mismatches)} disagreements, first: {mismatches[:5]}"
    assert set(seen) == set(IFEVAL), f"instructions never exercised: {set(IFEVAL) - set(seen)}"
    one_sided = {iid: v for iid, v in seen.items() if v != {True, False}}
    assert not one_sided, f"instructions seen with only one verdict: {one_sided}"


def _chatty(text: str) -> str:
    """A first and a last line that only the loose verdict drops."""
    return "Sure, here it is:\n" + text + "\nHope this helps!"


def test_loose_verdicts_agree_with_lm_eval(reference, rows):
    """Per instruction, the loose verdict (any of the eight variants passes) on the reference
    response and on the instruction's own edits, each wrapped in a chatty first and last line."""
    seen = collections.defaultdict(set)
    mismatches = []
    for row, iid, kwargs, texts, own, ours, bound, theirs in _checker_pairs(reference, rows):
        candidates = [texts[0], *own][: 3 if iid in EXPENSIVE else None]
        for text in dict.fromkeys(_chatty(t) for t in candidates):
            variants = loose_variants(text)
            verdict = any(_passes(ours, bound, v) for v in variants)
            expected = any(v.strip() and theirs.check_following(v) for v in variants)
            seen[iid].add(verdict)
            if verdict != expected:
                mismatches.append((row["key"], iid, kwargs, text[:120], expected, verdict))
    assert not mismatches, f"{len(mismatches)} disagreements, first: {mismatches[:5]}"
    one_sided = {iid: v for iid, v in seen.items() if v != {True, False}}
    assert set(seen) == set(IFEVAL) and not one_sided, (
        f"loose verdict seen with one value only: {one_sided}")


def test_prompt_level_strict_and_loose_agree_with_lm_eval(reference, rows):
    """End to end through lm-eval's own strict and loose harness (utils.py), on the reference
    response and with a chatty first and last line that only the loose verdict removes; every fourth
    prompt, for time."""
    _, utils = reference
    mismatches, loose_differs = [], 0
    for row, texts, _ in rows[::4]:
        example = utils.InputExample(key=row["key"], instruction_id_list=row["instruction_id_list"],
                                     prompt=row["prompt"], kwargs=row["kwargs"])
        keep = [not _randomised_by_reference(i, k)
                for i, k in zip(row["instruction_id_list"], row["kwargs"])]
        for text in (texts[0], "Sure, here it is:\n" + texts[0] + "\nHope this helps!"):
            verdicts = {}
            for loose, harness in ((False, utils.test_instruction_following_strict),
                                   (True, utils.test_instruction_following_loose)):
                expected = harness(example, text).follow_instruction_list
                verdicts[loose] = ours = per_instruction(text, row, loose=loose)
                if [v for v, k in zip(ours, keep) if k] != [v for v, k in zip(expected, keep) if k]:
                    mismatches.append(
                        (row["key"], loose, row["instruction_id_list"], text[:120], expected, ours))
            loose_differs += verdicts[False] != verdicts[True]
    assert not mismatches, f"{len(mismatches)} disagreements, first: {mismatches[:3]}"
    assert loose_differs > 0, (
        "strict and loose never differed: the corpus does not exercise the loose variants")


# Devanagari vowel signs, decomposed accents and zero-width joiners are not \w to re; superscripts
# are not either.
UNICODE_WORDS = ["हिन्दी में लिखा गया उत्तर", "cafe\u0301 cre\u0300me",
                 "family 👨\u200d👩\u200d👧 emoji", "x² + y² = z²"]


def test_word_counts_on_non_ascii_text_agree_with_lm_eval(reference):
    """Words are ``\\w+`` runs with Python's ``re`` semantics, as in IFEval's code and IFBench's
    reference run (NLTK ≤ 3.9). NLTK 3.10 matches with the ``regex`` module, whose ``\\w`` also
    covers combining marks and joiners ("हिन्दी" is 1 word there, 3 here), so under it lm-eval
    disagrees: tools/setup_venv.sh pins NLTK."""
    registry, _ = reference
    for text in UNICODE_WORDS:
        for n in range(1, 9):
            kwargs = {"num_words": n, "relation": "less than"}
            theirs = _reference_checker(registry, "length_constraints:number_words", kwargs)
            ours = IFEVAL["length_constraints:number_words"]
            assert (_passes(ours, bind(ours, kwargs), text)
                    == theirs.check_following(text)), (text, n)
