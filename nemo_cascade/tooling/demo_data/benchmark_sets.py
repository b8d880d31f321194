"""Benchmarks' own splits as RL prompt sets, phrased exactly as their evaluation suites phrase them.

``benchmark:NAME`` (``Data(source="benchmark:gsm8k", split="train")``) reads the split's file
shipped in ``data/`` and turns each row into a prompt with its domain's label and a reference
response, the ``fn(split, size, seed) -> rows`` shape of the synthetic generators
(:mod:`.synthetic_domains`):

- ``gsm8k`` (``math``): ``data/gsm8k/{train,test}.jsonl.gz``; the question and the suites' request
  for a boxed final answer (``data.math_prompt.math_prompt``, which the suites use too); the label
  is the number after ``####`` (thousands commas dropped); the response is the worked solution
  without its ``<<calculator>>`` annotations, ending in ``\\boxed{}``.
- ``mbpp`` (``code``): ``data/mbpp/{train,test}.jsonl.gz`` (task ids 601–974 and 11–510, the splits
  of MBPP's README); the task with its asserts (``data.mbpp_tasks.mbpp_task``, the ``mbpp`` suite's
  format); the label runs the asserts in the sandbox; the response is the reference solution.

Training on the train split and evaluating on the suite of the same name (its test split) is the
held-out setup of the SmolLM2 recipes: the model sees the benchmark's own format in RL, never its
test problems. ``size`` > 0 takes that many rows in a seeded order (``size`` 0: the whole split);
asking for more rows than the split holds is an error.
"""
from __future__ import annotations

import random
import re
from pathlib import Path

from nemo_cascade.data.generated import BENCHMARK_PREFIX
from nemo_cascade.data.math_prompt import MATH_INSTRUCTION, math_prompt
from nemo_cascade.data.mbpp_tasks import mbpp_row, read_rows
from nemo_cascade.evaluate.suites import gsm8k_final_answer

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "data"
_CALCULATOR = re.compile(r"<<[^<>]*>>")


def _split_file(name: str, split: str) -> Path:
    if split not in ("train", "test"):
        raise ValueError(
            f"{BENCHMARK_PREFIX}{name}: split must be 'train' or 'test', got {split!r}")
    return DATA / name / f"{split}.jsonl.gz"


def _take(name: str, split: str, rows: list[dict], size: int, seed: int) -> list[dict]:
    if size > len(rows):
        raise ValueError(
            f"{BENCHMARK_PREFIX}{name}: size {size} exceeds the {len(rows)} {split} rows")
    return random.Random(seed).sample(rows, size if size > 0 else len(rows))


def gsm8k(split: str, size: int, seed: int) -> list[dict]:
    """GSM8K problems as math prompts (see the module docstring)."""
    rows = []
    for k, row in enumerate(read_rows(_split_file("gsm8k", split)), 1):
        answer = gsm8k_final_answer(row["answer"])
        working = _CALCULATOR.sub("", row["answer"].rsplit("####", 1)[0]).strip()
        rows.append({
            "uid": f"gsm8k/{split}/{k}", "prompt": math_prompt(row["question"]), "label": answer,
            "response": f"{working}\nThe final answer is \\boxed{{{answer}}}."})
    return _take("gsm8k", split, rows, size, seed)


def mbpp(split: str, size: int, seed: int) -> list[dict]:
    """MBPP tasks as function-call code prompts (see the module docstring)."""
    rows = [
        mbpp_row(task, f"mbpp/{task['task_id']}") for task in read_rows(_split_file("mbpp", split))]
    return _take("mbpp", split, rows, size, seed)


BENCHMARK_SETS = {"gsm8k": gsm8k, "mbpp": mbpp}
"""``benchmark:NAME`` → its generator."""

__all__ = ["BENCHMARK_SETS", "MATH_INSTRUCTION", "gsm8k", "mbpp"]
