"""The tiny cascade's evaluation suites (recipes/tiny.py's forgetting gate): held-out rows of the synthetic sets,
written to ``data/tiny/*.jsonl`` by tools/make_tiny_suites.py and read in the project's own row shape
(``evaluate.suites.load_rows``). :func:`nemo_cascade.tooling.demo_data.register` registers them.
"""
from __future__ import annotations

from typing import Callable

from nemo_cascade.evaluate.suites import DATA, Suite, load_rows


def _tiny_file(name: str) -> Callable:
    return lambda: DATA / "tiny" / name


_TINY = "held-out split of the tiny CPU recipe's synthetic set; not a paper benchmark"
_NO_YARN = 1.0  # the tiny models' own RoPE: their suites are not App. B's long evaluations
TINY_SUITES: tuple[Suite, ...] = (
    Suite("tiny-math", "math", "arithmetic (data.synthetic), 128 held-out problems", load_rows("math"),
          _tiny_file("math.jsonl"), mode="no_think", samples=4, max_tokens=32, metric="accuracy",
          paper=_TINY, yarn_factor=_NO_YARN),
    Suite("tiny-ifeval", "ifeval", "arithmetic with two or three IFEval instructions, 128 held-out prompts",
          load_rows("ifeval"), _tiny_file("ifeval.jsonl"), mode="no_think", samples=4, max_tokens=48,
          metric="prompt-level strict accuracy", paper=_TINY, yarn_factor=_NO_YARN),
    Suite("tiny-code", "code", "write f(x) = x OP k given f(x0) = y0, 64 held-out problems, sandboxed asserts",
          load_rows("code"), _tiny_file("code.jsonl"), mode="no_think", samples=4, max_tokens=32, metric="pass rate",
          paper=_TINY, yarn_factor=_NO_YARN),
    Suite("tiny-swe", "swe",
          "fix the constant in calc.py from a reported value (SEARCH/REPLACE), 64 held-out problems", load_rows("swe"),
          _tiny_file("swe.jsonl"), mode="no_think", samples=4, max_tokens=48,
          metric="share of samples equal to the golden patch", paper=_TINY, yarn_factor=_NO_YARN),
    Suite("tiny-rlhf", "rlhf", "arithmetic questions: win rate against the SFT answer under the cascade's RM",
          load_rows("rlhf"), _tiny_file("rlhf.jsonl"), mode="no_think", samples=4, max_tokens=32,
          metric="win rate vs. reference (ties 0.5)", paper=_TINY, pairwise=True, yarn_factor=_NO_YARN),
)
"""Small suites for the tiny cascade's forgetting gate (recipes/tiny.py); by name only, not in ``all``;
registered in this order (``nemo-cascade eval --help`` lists them so)."""

__all__ = ["TINY_SUITES"]
