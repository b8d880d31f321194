"""The instruction registries: IFEval's 25 instruction ids and the IFBench ids, each mapped to its checker.

The paper's IF-RL runs in two sub-stages, first on the IFEval taxonomy, then on the IFBench taxonomy (paper
§4.4; IFEval: Zhou et al. 2023; IFBench: Pyatkin et al. 2025). The two id sets are disjoint, so one label
format serves both and :data:`ALL` resolves either.
"""
from __future__ import annotations

from . import detectable, keywords, language, length, startend
from .ifbench import INSTRUCTIONS as _IFBENCH_INSTRUCTIONS
from .spec import registry

IFEVAL = registry(keywords.INSTRUCTIONS, length.INSTRUCTIONS, detectable.INSTRUCTIONS, language.INSTRUCTIONS,
                  startend.INSTRUCTIONS)
"""IFEval (lm-eval ``ifeval`` task): id → instruction."""

IFBENCH = registry(_IFBENCH_INSTRUCTIONS)
"""IFBench test taxonomy, all 58 ids of the IFBench test set (see ``ifbench/__init__.py``): id → instruction."""

ALL = {**IFEVAL, **IFBENCH}
assert len(ALL) == len(IFEVAL) + len(IFBENCH), "IFEval and IFBench ids overlap"

__all__ = ["IFEVAL", "IFBENCH", "ALL"]
