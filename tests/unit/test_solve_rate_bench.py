"""bench/solve_rate.py measures every prompt source a recipe's GRPO stage trains on, each in its own domain."""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "bench"


@pytest.fixture(scope="module")
def solve_rate():
    sys.path.insert(0, str(BENCH))  # the script imports its sibling eval_speed.py, as it does when run
    try:
        spec = importlib.util.spec_from_file_location("solve_rate", BENCH / "solve_rate.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCH))


def flags(**given) -> argparse.Namespace:
    defaults = dict(recipe=None, stage=None, source=None, split=None, domain=None, prompts=64, samples=None,
                    max_tokens=None, temperature=None, style=None, mode=None, seed=0)
    return argparse.Namespace(**{**defaults, **given})


def test_a_recipe_stage_gives_its_data_then_each_extra_source_with_its_domain(solve_rate):
    root = Path(__file__).parents[2]
    sources, rollout, group, *_ = solve_rate.stage_settings(
        flags(recipe=f"{root}/recipes/smollm2.py:with_sft", stage="math", prompts=16))
    assert [(d.source, domain) for d, domain in sources] == [
        ("benchmark:gsm8k", "math"), ("synthetic:rg/leg_counting?min_animals=1&max_animals=2&max_instances=3", "math")]
    assert all(d.size == 16 and d.seed == 0 for d, _ in sources)
    assert group == 4 and rollout.max_response_tokens > 0

    mixed, *_ = solve_rate.stage_settings(flags(recipe=f"{root}/recipes/smollm2_mixed.py:with_sft", stage="mixed1"))
    assert sorted({domain for _, domain in mixed}) == ["code", "ifeval", "math"]
    assert len(mixed) == 4  # IF, GSM8K, leg counting, MBPP


def test_source_flag_replaces_the_stage_sources_with_one(solve_rate):
    root = Path(__file__).parents[2]
    sources, *_ = solve_rate.stage_settings(flags(recipe=f"{root}/recipes/smollm2.py:with_sft", stage="math",
                                                  source="benchmark:mbpp", domain="code", temperature=0.6))
    assert [(d.source, domain) for d, domain in sources] == [("benchmark:mbpp", "code")]
