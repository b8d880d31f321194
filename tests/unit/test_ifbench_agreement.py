"""Our IFBench verdicts equal the published reference verdicts (paper §4.4, the IFBench evaluation).

allenai/IFBench publishes the strict and loose verdicts of its evaluator (at c94da020) on 294 sample
responses (data/ifbench). 290 of them join the current test file by prompt (4 prompts were reworded
later, so their kwargs are unknown). On every joined row, every instruction's strict and loose
verdict must be identical — there are no exceptions. One row needs a remark: key 286
(``repeat:repeat_span`` with ``n_start`` 0) was judged with a random start, since the reference
treats 0 as "not given"; its response fails for any start, so the verdict is the same.

The shared measurements behind the verdicts are compared with independent implementations too: the
rule-based sentence splitter with lm-eval's copy of it, and the partial tokenisation with NLTK's
``word_tokenize``, on all the sample responses and GPT-4's IFEval responses.
"""
from __future__ import annotations

import nltk

from nemo_cascade.rewards.ifeval import IFBENCH, instruction_pass_rates, per_instruction
from nemo_cascade.rewards.ifeval.ifbench.text import (head_word_tokens, last_word_tokens,
                                                      rule_sentences)

from .ifbench_data import reference_verdicts
from .ifeval_corpus import load_rows
from .ifeval_reference import load_lm_eval_ifeval


def test_strict_and_loose_verdicts_equal_the_published_ones():
    results = reference_verdicts()
    assert len(results) == 290
    mismatches = []
    for row, response, strict, loose in results:
        for is_loose, expected in ((False, strict), (True, loose)):
            ours = per_instruction(response, row, loose=is_loose, registry=IFBENCH)
            if ours != expected:
                mismatches.append(
                    (row["key"], row["instruction_id_list"], is_loose, expected, ours))
    assert not mismatches, f"{len(mismatches)} disagreements: {mismatches[:5]}"


def test_pass_rates_equal_the_published_ones():
    results = reference_verdicts()
    for is_loose, column in ((False, 2), (True, 3)):
        ours = instruction_pass_rates(
            (row["instruction_id_list"],
             per_instruction(r[1], row, loose=is_loose, registry=IFBENCH))
            for r in results for row in [r[0]])
        theirs = instruction_pass_rates((r[0]["instruction_id_list"], r[column]) for r in results)
        assert ours == theirs
    assert set(ours) <= set(IFBENCH) and len(ours) >= 55  # the joined rows use nearly all 58 ids


def _sample_texts() -> list[str]:
    responses = [response for _, response, _, _ in reference_verdicts()]
    return responses + [answer for _, answer in load_rows()]


def test_rule_based_splitter_equals_lm_evals():
    registry, _ = load_lm_eval_ifeval()
    split_into_sentences = registry.instructions.instructions_util.split_into_sentences
    hostile = ["U.S. He left. Inc. It ended", "Ph.D. holders... really?! \"Yes.\" 'No!' end.”",
               "a.b.c. d", "<prd><stop> x. y", "Dr. No went to google.com. 3.14 is pi", "   ",
               "..."]
    for text in _sample_texts() + hostile:
        assert rule_sentences(text) == split_into_sentences(text), text[:80]


def test_partial_word_tokens_equal_nltk_word_tokenize():
    for text in _sample_texts():
        full = nltk.word_tokenize(text)
        assert (head_word_tokens(text, 3) == full[:3]
                and last_word_tokens(text, 2) == full[-2:]), text[:80]
