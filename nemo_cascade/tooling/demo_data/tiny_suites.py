"""The evaluation suites of the CPU recipes' generated sets: the tiny cascade's (recipes/tiny.py's
forgetting gate) and the SmolLM2 recipes' easy word problems, held-out rows written to
``data/tiny/*.jsonl`` and ``data/leg_counting/test.jsonl`` by tools/make_tiny_suites.py and read in
the project's own row shape (``evaluate.suites.load_rows``).
:func:`nemo_cascade.tooling.demo_data.register` registers them.
"""
from __future__ import annotations

from typing import Callable

from nemo_cascade.evaluate.suites import DATA, Suite, load_rows


def _tiny_file(name: str) -> Callable:
    return lambda: DATA / "tiny" / name


_TINY = "held-out split of the tiny CPU recipe's synthetic set; not a paper benchmark"
_NO_YARN = 1.0  # the tiny models' own RoPE: their suites are not App. B's long evaluations
TINY_SUITES: tuple[Suite, ...] = (
    Suite("tiny-math", "math", "arithmetic (data.synthetic), 128 held-out problems",
          load_rows("math"), _tiny_file("math.jsonl"), mode="no_think", samples=4, max_tokens=32,
          metric="accuracy", paper=_TINY, yarn_factor=_NO_YARN),
    Suite("tiny-ifeval", "ifeval",
          "arithmetic with two or three IFEval instructions, 128 held-out prompts",
          load_rows("ifeval"), _tiny_file("ifeval.jsonl"), mode="no_think", samples=4,
          max_tokens=48, metric="prompt-level strict accuracy", paper=_TINY, yarn_factor=_NO_YARN),
    Suite("tiny-code", "code",
          "write f(x) = x OP k given f(x0) = y0, 64 held-out problems, sandboxed asserts",
          load_rows("code"), _tiny_file("code.jsonl"), mode="no_think", samples=4, max_tokens=32,
          metric="pass rate", paper=_TINY, yarn_factor=_NO_YARN),
    Suite(
        "tiny-swe", "swe",
        "fix the constant in calc.py from a reported value (SEARCH/REPLACE), 64 held-out problems",
        load_rows("swe"), _tiny_file("swe.jsonl"), mode="no_think", samples=4, max_tokens=48,
        metric="share of samples equal to the golden patch", paper=_TINY, yarn_factor=_NO_YARN),
    Suite("tiny-rlhf", "rlhf",
          "arithmetic asked in a chat: win rate against the SFT reply under the cascade's RM",
          load_rows("rlhf"), _tiny_file("rlhf.jsonl"), mode="no_think", samples=4, max_tokens=32,
          metric="win rate vs. reference (ties 0.5)", paper=_TINY, pairwise=True,
          yarn_factor=_NO_YARN),
)
"""Small suites for the tiny cascade's forgetting gate (recipes/tiny.py); by name only, not in
``all``; registered in this order (``nemo-cascade eval --help`` lists them so)."""

LEG_COUNTING = "rg/leg_counting?min_animals=1&max_animals=2&max_instances=3"
"""reasoning-gym's leg-counting word problems at their easiest (one or two kinds of animal, one to
three of each): math a 135M model can learn after SFT, where GSM8K stays out of its reach
(recipes/smollm2.py:with_sft)."""
LEG_COUNTING_ITEMS = 250
WORD_MATH_SUITES: tuple[Suite, ...] = (Suite(
    "leg-counting", "math", f"reasoning-gym {LEG_COUNTING}, {LEG_COUNTING_ITEMS} held-out problems",
    load_rows("math"), lambda: DATA / "leg_counting" / "test.jsonl", mode="no_think", samples=1,
    max_tokens=224, metric="accuracy",
    paper="held-out split of a reasoning-gym generator; not a paper benchmark",
    yarn_factor=_NO_YARN), )
"""The held-out side of the SmolLM2 recipes' easy math prompts (``synthetic:`` +
:data:`LEG_COUNTING`, train split): the test split of the same generator (reasoning_gym.split_of
keeps them disjoint)."""

__all__ = ["TINY_SUITES", "WORD_MATH_SUITES", "LEG_COUNTING", "LEG_COUNTING_ITEMS"]
