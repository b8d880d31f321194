"""The IFBench-Train taxonomy (Pyatkin et al. 2025, "Generalizing Verifiable Instruction
Following"): the 29 training constraints of the IF-RLVR data, the registry of the paper's second
IF-RL sub-stage ("the second stage focuses on IF-Bench-Train taxonomy", §4.4.2).

These are not the IFBench *test* constraints (``..ifbench``, 58 ids, evaluation only): the two sets
share no id, and none of these ids means something else there. The released IF-RLVR rows
(allenai/IF_multi_constraints_upto5) mix these ids with IFEval's 25, which ``..taxonomy.IFEVAL``
verifies.

The definitions are the IF-RLVR verifier's (open-instruct ``open_instruct/IFEvalG/instructions.py``,
the block registered after "New Constraints!"), re-implemented here;
``tests/unit/test_ifbench_train_agreement.py`` replays verdicts of that reference. Where the
reference would draw a random kwarg (one left null or empty, a count of 0), the label is rejected at
load time, so a response has one verdict; where it would raise on a response, the instruction is not
followed; where its regular expressions would backtrack on hostile output, the same matches are
found in one pass. Modules: ``copying`` (``copy:*``, ``new:copy_span_idx``), ``keywords``
(``keywords:*``, ``count:count_increment_word``), ``layout`` (paragraphs, hyphens, brackets,
punctuation, first and last words), ``counting`` (the other ``count:*`` and ``letters:*``).
"""
from . import copying, counting, keywords, layout

INSTRUCTIONS = (*copying.INSTRUCTIONS, *keywords.INSTRUCTIONS, *layout.INSTRUCTIONS,
                *counting.INSTRUCTIONS)
assert len(INSTRUCTIONS) == 29, len(INSTRUCTIONS)

__all__ = ["INSTRUCTIONS"]
