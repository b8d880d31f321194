"""Instruction-following rewards for IF-RL (paper §4.4): IFEval, IFBench-Train and IFBench
instructions, verified.

``ifeval_reward(response, label) -> float`` is the ``ifeval`` domain's verifier: 1.0 iff the
response follows every instruction of a row ``{"prompt", "instruction_id_list", "kwargs"}`` (strict;
``ifeval_reward_loose`` for the loose verdicts). ``per_instruction`` gives the verdicts one by one
for pass rates, ``validate_label`` rejects malformed rows at load time (``validate_training_label``
also refuses IFBench test ids in training data unless ``Data.allow_eval_instructions``), and
``if_reward_with_rm`` is the thinking-model reward with a reward-model bonus (§4.4.2).

Taxonomies (``taxonomy``): IF-RL trains on IFEval (``IFEVAL``, 25 ids), then on IFBench-Train
(``IFBENCH_TRAIN``, the 29 training constraints of the released IF-RLVR data, §4.4.2) — together
``TRAINING``; the IFBench *test* taxonomy (``IFBENCH``, 58 ids, ``EVALUATION_ONLY``) is what the
``ifbench`` suite evaluates. The sets are disjoint, so ``ALL`` resolves any label.

Layout: ``spec`` (what an instruction is), one module per IFEval instruction group (``keywords``,
``length``, ``detectable``, ``language``, ``startend``), ``ifbench/`` (the IFBench test taxonomy,
one module per id prefix, with its offline part-of-speech tagger), ``ifbench_train/`` (the
IFBench-Train taxonomy), ``text`` (NLTK / langdetect measurements), ``punkt`` (the offline NLTK
sentence model), ``taxonomy`` (the registries), ``reward``.

Verdicts equal the reference evaluators': lm-eval's IFEval checkers, IFBench's published verdicts
and the IF-RLVR verifier's (open-instruct ``IFEvalG``) on recorded cases
(tests/unit/test_ifeval_agreement.py, test_ifbench_agreement.py, test_ifbench_train_agreement.py).
Runtime needs ``nltk`` (pinned: its tokenizers define "sentence" and "word"), ``langdetect``,
``syllapy`` and ``emoji``; nothing is downloaded.
"""
from .reward import (bind_label, if_reward_with_rm, ifeval_reward, ifeval_reward_loose,
                     instruction_pass_rates,
                     judged_text, loose_variants, per_instruction, validate_label,
                     validate_training_label)
from .taxonomy import ALL, EVALUATION_ONLY, IFBENCH, IFBENCH_TRAIN, IFEVAL, TRAINING

__all__ = ["ifeval_reward", "ifeval_reward_loose", "per_instruction", "validate_label",
           "validate_training_label",
           "bind_label", "instruction_pass_rates", "if_reward_with_rm", "loose_variants",
           "judged_text",
           "IFEVAL", "IFBENCH", "IFBENCH_TRAIN", "TRAINING", "EVALUATION_ONLY", "ALL"]
