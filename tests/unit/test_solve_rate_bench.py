"""bench/solve_rate.py measures every prompt source a recipe's GRPO stage trains on, each in its own
domain."""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "bench"


@pytest.fixture(scope="module")
def solve_rate():
    # the script imports its sibling eval_speed.py, as it does when run
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("solve_rate", BENCH / "solve_rate.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCH))


def flags(**given) -> argparse.Namespace:
    defaults = dict(recipe=None, stage=None, source=None, split=None, domain=None, prompts=64,
                    samples=None, max_tokens=None, temperature=None, style=None, mode=None, seed=0)
    return argparse.Namespace(**{**defaults, **given})


def test_a_recipe_stage_gives_its_data_then_each_extra_source_with_its_domain(solve_rate):
    root = Path(__file__).parents[2]
    sources, rollout, group, *_ = solve_rate.stage_settings(
        flags(recipe=f"{root}/recipes/smollm2.py:with_sft", stage="math", prompts=16))
    assert [(d.source, domain) for d, domain in sources] == [
        ("benchmark:gsm8k", "math"),
        ("synthetic:rg/leg_counting?min_animals=1&max_animals=2&max_instances=3", "math")]
    assert all(d.size == 16 and d.seed == 0 for d, _ in sources)
    assert group == 4 and rollout.max_response_tokens > 0

    mixed, *_ = solve_rate.stage_settings(
        flags(recipe=f"{root}/recipes/smollm2_mixed.py:with_sft", stage="mixed1"))
    assert sorted({domain for _, domain in mixed}) == ["code", "ifeval", "math"]
    assert len(mixed) == 4  # IF, GSM8K, leg counting, MBPP


def test_source_flag_replaces_the_stage_sources_with_one(solve_rate):
    root = Path(__file__).parents[2]
    sources, *_ = solve_rate.stage_settings(
        flags(recipe=f"{root}/recipes/smollm2.py:with_sft", stage="math", source="benchmark:mbpp",
              domain="code", temperature=0.6))
    assert [(d.source, domain) for d, domain in sources] == [("benchmark:mbpp", "code")]


@pytest.mark.parametrize("source, domain", [("benchmark:gsm8k", "math"),
                                            ("benchmark:mbpp", "code")])
def test_kept_rows_load_back_as_exactly_the_kept_prompts(solve_rate, tmp_path, source, domain):
    """The difficulty filter's file is a prompt source whose prompts are the kept ones, token for
    token (the math request for a boxed answer is not added twice), with their uids and labels."""
    from nemo_cascade.config import Data
    from nemo_cascade.data.loader import load_prompts
    from nemo_cascade.rewards import get_domain
    from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

    tok = build_tiny_tokenizer(tmp_path)
    data = Data(source=source, split="train", size=12, seed=3)
    prompts = load_prompts(data, tok, "no_think", get_domain(domain), 4096)
    solved = {p.uid: k % 5 for k, p in enumerate(prompts)}  # 0..4 of 4 samples
    rows = solve_rate.kept_rows(data, solved, 1, 3)
    assert [r["uid"] for r in rows] == [p.uid for p in prompts if 1 <= solved[p.uid] <= 3] and rows
    path = tmp_path / "kept.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    again = load_prompts(Data(source=str(path), cache=False), tok, "no_think", get_domain(domain),
                         4096)
    kept = [p for p in prompts if 1 <= solved[p.uid] <= 3]
    assert [(p.uid, p.prompt_tokens, p.label) for p in again] == [
        (p.uid, p.prompt_tokens, p.label) for p in kept]
