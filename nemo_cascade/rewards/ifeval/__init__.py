"""Instruction-following rewards for IF-RL (paper §4.4): IFEval and IFBench instructions, verified.

``ifeval_reward(response, label) -> float`` is the ``ifeval`` domain's verifier: 1.0 iff the response follows
every instruction of an IFEval/IFBench row ``{"prompt", "instruction_id_list", "kwargs"}`` (strict;
``ifeval_reward_loose`` for the loose verdicts). ``per_instruction`` gives the verdicts one by one for pass
rates, ``validate_label`` rejects malformed rows at load time, and ``if_reward_with_rm`` is the thinking-model
reward with a reward-model bonus (§4.4.2).

Layout: ``spec`` (what an instruction is), one module per IFEval instruction group (``keywords``, ``length``,
``detectable``, ``language``, ``startend``), ``ifbench/`` (the IFBench test taxonomy, one module per id prefix,
with its offline part-of-speech tagger), ``text`` (NLTK / langdetect measurements), ``punkt`` (the offline NLTK
sentence model), ``taxonomy`` (the registries ``IFEVAL``, ``IFBENCH`` and ``ALL``), ``reward``.

Verdicts equal the reference evaluators': lm-eval's IFEval checkers, and IFBench's published verdicts
(tests/unit/test_ifeval_agreement.py, test_ifbench_agreement.py). Runtime needs ``nltk`` (pinned: its
tokenizers define "sentence" and "word"), ``langdetect``, ``syllapy`` and ``emoji``; nothing is downloaded.
"""
from .reward import (bind_label, if_reward_with_rm, ifeval_reward, ifeval_reward_loose, instruction_pass_rates,
                     judged_text, loose_variants, per_instruction, validate_label)
from .taxonomy import ALL, IFBENCH, IFEVAL

__all__ = ["ifeval_reward", "ifeval_reward_loose", "per_instruction", "validate_label", "bind_label",
           "instruction_pass_rates", "if_reward_with_rm", "loose_variants", "judged_text",
           "IFEVAL", "IFBENCH", "ALL"]
