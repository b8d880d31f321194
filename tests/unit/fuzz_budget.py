"""Shared settings of the fuzz tier (tests/unit/test_fuzz_*.py): hypothesis settings per target and
a tally of the cases each target ran, so ``bench/reliability.py`` can report "fuzz cases run".

Every fuzz test is deterministic (``derandomize=True``: the examples follow from the test's name, no
database) and bounded (``max_examples`` per target below), so the whole tier is reproducible and its
cost fixed. :data:`CASES_RUN` counts the cases actually run in this process (hypothesis may stop
early on a small strategy space, and explicit cases add to it); :data:`FUZZ_EXAMPLES` is the budget.
"""
from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, settings

FUZZ_EXAMPLES: dict[str, int] = {
    # config
    "config.apply_overrides": 300,
    "config.from_dict": 200,
    "config.load_recipe": 100,
    # data
    "data.jsonl_lines": 150,
    "data.bad_row_counting": 100,
    "data.sft_and_preference_rows": 100,
    "data.schemas": 300,
    "data.parquet_rows": 30,
    # chat template
    "chat.render": 300,
    "chat.render_vs_jinja": 200,
    "chat.split_thinking": 300,
    # verifiers
    "math.random_text": 150,
    "math.latex_grammar": 50,
    "ifeval.random_text": 150,
    "ifeval.huge_text": 6,
    "swe.diff_parser": 300,
    "swe.diff_roundtrip": 150,
    "swe.reward": 150,
    "language.code_switch": 200,
}
"""Hypothesis ``max_examples`` per fuzz target: the fuzz tier's budget."""

CASES_RUN: Counter = Counter()
"""Cases run per target in this process (hypothesis examples, including shrinking replays, plus
explicit cases); read it after ``pytest.main`` on the fuzz files."""


def fuzz(target: str):
    """The hypothesis settings of ``target``: its budget, derandomized, no deadline (the machine is
    shared; bounded-time claims are asserted against the code's own configured bounds instead), no
    example database."""
    return settings(
        max_examples=FUZZ_EXAMPLES[target], derandomize=True, deadline=None, database=None,
        suppress_health_check=[
            HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
            HealthCheck.function_scoped_fixture])


def ran(target: str, n: int = 1) -> None:
    """Count ``n`` cases of ``target``."""
    CASES_RUN[target] += n


def one_line(message: str) -> bool:
    """A user-facing error message is one line (docs/architecture.md, "Contracts": one clear line on
    bad input)."""
    return "\n" not in message and "\r" not in message and message.strip() != ""


__all__ = ["FUZZ_EXAMPLES", "CASES_RUN", "fuzz", "ran", "one_line"]
