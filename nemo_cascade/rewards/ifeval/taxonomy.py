"""The instruction registries: IFEval's 25 instruction ids, the IFBench test ids and the
IFBench-Train ids, each mapped to its checker — and which of them training may use.

The paper's IF-RL runs in two sub-stages, first on the IFEval taxonomy, then on the IFBench-Train
taxonomy ("the second stage focuses on IF-Bench-Train taxonomy", §4.4.2; IFEval: Zhou et al. 2023;
IFBench: Pyatkin et al. 2025). IFBench's *test* taxonomy is what the ``ifbench`` evaluation suite
measures, so it is evaluation only: a training source that holds one of its ids is refused unless
its ``Data.allow_eval_instructions`` says so (``reward.validate_training_label``). The three id sets
are disjoint (asserted below), so one label format serves all and :data:`ALL` resolves any label
without an id meaning two things.
"""
from __future__ import annotations

from . import detectable, keywords, language, length, startend
from .ifbench import INSTRUCTIONS as _IFBENCH_INSTRUCTIONS
from .ifbench_train import INSTRUCTIONS as _IFBENCH_TRAIN_INSTRUCTIONS
from .spec import registry

IFEVAL = registry(keywords.INSTRUCTIONS, length.INSTRUCTIONS, detectable.INSTRUCTIONS,
                  language.INSTRUCTIONS,
                  startend.INSTRUCTIONS)
"""IFEval (lm-eval ``ifeval`` task): id → instruction. Trained on (both sub-stages) and
evaluated."""

IFBENCH = registry(_IFBENCH_INSTRUCTIONS)
"""IFBench test taxonomy, all 58 ids of the IFBench test set (see ``ifbench/__init__.py``): id →
instruction. Evaluation only."""

IFBENCH_TRAIN = registry(_IFBENCH_TRAIN_INSTRUCTIONS)
"""IFBench-Train taxonomy, the 29 training constraints of the IF-RLVR data (see
``ifbench_train/__init__.py``): id → instruction."""

TRAINING = {**IFEVAL, **IFBENCH_TRAIN}
"""What IF-RL training data may use without further settings: IFEval's ids and IFBench-Train's (the
released IF-RLVR rows mix both)."""

EVALUATION_ONLY = frozenset(IFBENCH)
"""Ids a training source may hold only with ``Data.allow_eval_instructions``: training on them leaks
into the IFBench evaluation."""

ALL = {**IFEVAL, **IFBENCH, **IFBENCH_TRAIN}
assert len(ALL) == len(IFEVAL) + len(IFBENCH) + len(IFBENCH_TRAIN), ("IFEval, IFBench and "
                                                                     "IFBench-Train ids overlap")

__all__ = ["IFEVAL", "IFBENCH", "IFBENCH_TRAIN", "TRAINING", "EVALUATION_ONLY", "ALL"]
