"""Multi-domain evaluation (paper §2, App. B; T2, T4–T8): real benchmarks, the paper's decoding,
avg@K.

The suites (:mod:`.suites`) — IFEval, IFBench, GSM8K, MATH-500, AIME 2024/2025, HumanEval, MBPP,
SWE-bench Lite repair, an HH-RLHF win rate under the served reward model, and the downloaded
LiveCodeBench v5/v6, GPQA-Diamond, MMLU-Pro and ArenaHard (:mod:`.paper_benchmarks`) — generate with
the project's vLLM rollout engine and score with the training rewards (``rewards.Scorer``);
:mod:`.estimators` holds avg@K, pass@K and the win-rate arithmetic, :mod:`.eval_output` the
eval.json / markdown / SVG outputs, :mod:`.stage_scores` the forgetting check between stages. A
run's report.md / report.png is tooling (``tooling/report.py``), built from these outputs. Entry
point: :func:`evaluate` (an engine that already serves the weights, e.g. the cascade's colocated
one); ``nemo-cascade eval`` of a checkpoint folder builds its own engine around it
(``tooling/standalone.py``).

This package imports vLLM only through ``rollout`` and only when an engine is built.
"""
from .stage_scores import Regression, forgetting_matrix, regressions
from .estimators import avg_at_k, pass_at_k, pass_at_k_item, standard_error
from .runner import EvalSettings, SuiteResult, evaluate, prepare, run_suite
from .suites import SUITES, EvalError, Item, Suite, get_suite, load_items, suite_names

__all__ = ["SUITES", "Suite", "Item", "EvalError", "EvalSettings", "SuiteResult", "evaluate",
           "prepare", "run_suite", "get_suite", "suite_names", "load_items", "avg_at_k",
           "pass_at_k", "pass_at_k_item", "standard_error", "regressions", "forgetting_matrix",
           "Regression"]
