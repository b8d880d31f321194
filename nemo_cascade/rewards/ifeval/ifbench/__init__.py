"""The IFBench instruction taxonomy (Pyatkin et al. 2025, "Generalizing Verifiable Instruction
Following"): the 58 instruction ids of the IFBench test set, which the ``ifbench`` suite evaluates
(paper §4.4; evaluation only: the second IF-RL sub-stage trains on the separate IFBench-Train
taxonomy, ``..ifbench_train``, §4.4.2).

Verdicts reproduce the IFBench evaluator that produced the published reference results
(allenai/IFBench at c94da020, the version whose ``eval/`` files were generated with it);
``tests/unit/test_ifbench_agreement.py`` compares them with those results. Modules group the ids by
prefix: ``count``, ``ratio``, ``words``, ``sentence`` (with ``repeat:*``), ``formatting``
(``format:*``) and ``custom``; ``text`` holds the shared measurements and ``tagger`` the offline
part-of-speech tag that ``words:start_verb`` needs.

Where the reference would draw a random value (a required kwarg left null, or ``repeat:repeat_span``
with ``n_start`` 0), a label is rejected or the given value used, so that a response has one
verdict; where the reference would crash on a response (e.g. a division by zero), the instruction is
not followed.
"""
from . import count, custom, formatting, ratio, sentence, words

INSTRUCTIONS = (*count.INSTRUCTIONS, *ratio.INSTRUCTIONS, *words.INSTRUCTIONS,
                *sentence.INSTRUCTIONS,
                *formatting.INSTRUCTIONS, *custom.INSTRUCTIONS)

__all__ = ["INSTRUCTIONS"]
