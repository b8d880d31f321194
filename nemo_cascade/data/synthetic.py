"""Synthetic tasks for the tiny CPU recipe: small, deterministic, verifiable prompt sets made in memory.

``arithmetic`` asks for sums and differences of small numbers with the answer in ``\\boxed{}``, so the real
``math`` reward judges it. It is easy enough that a ~1M-parameter model learns part of it from a few hundred
SFT steps and has headroom for RL. Addressed from config as ``Data.source = "synthetic:arithmetic"``.

Held-out split: every problem ``(a, op, b)`` is assigned to ``train`` or ``test`` by a fixed hash of the
problem itself (:func:`_split_of`), independent of ``seed`` and ``size``. The two splits therefore never share
an operand pair, whatever seeds or sizes are drawn; ``seed`` only chooses which problems of the split are drawn
and their order. (A test pair may be the commuted form of a train pair, ``3 + 4`` vs ``4 + 3``: that is
generalisation the model has to do, not leakage.)
"""
from __future__ import annotations

import hashlib
import random
from typing import Callable

TEST_FRACTION_PERCENT = 15
"""Share of problems (by hash) held out for the test split."""
MAX_OPERAND = 30
"""Operands are drawn from 0..MAX_OPERAND (differences are kept non-negative)."""
QUESTION = "What is {a} {op} {b}? Put the final answer in \\boxed{{}}."


def _split_of(a: int, op: str, b: int) -> str:
    """``train`` or ``test`` for one problem — a hash of the problem, so the split never depends on seeds."""
    digest = hashlib.sha256(f"arithmetic:{a}{op}{b}".encode()).digest()
    return "test" if int.from_bytes(digest[:4], "big") % 100 < TEST_FRACTION_PERCENT else "train"


def _problems(split: str, max_operand: int) -> list[tuple[int, str, int]]:
    """All problems of one split, in a fixed order."""
    out = []
    for a in range(max_operand + 1):
        for b in range(max_operand + 1):
            for op in ("+", "-"):
                if op == "-" and b > a:  # keep answers non-negative: one less thing to learn
                    continue
                if _split_of(a, op, b) == split:
                    out.append((a, op, b))
    return out


def _row(a: int, op: str, b: int) -> dict:
    c = a + b if op == "+" else a - b
    return {
        "uid": f"arithmetic:{a}{op}{b}",
        "question": QUESTION.format(a=a, op=op, b=b),
        "answer": str(c),
        "solution": f"{a} {op} {b} = {c}",
    }


def arithmetic(split: str, size: int, seed: int, max_operand: int = MAX_OPERAND) -> list[dict]:
    """``size`` rows ``{"uid", "question", "answer", "solution"}`` of ``split`` ("train" | "test").

    ``size <= 0`` returns the whole split (in a seeded order). Asking for more rows than the split holds raises
    ``ValueError`` — repeating problems would silently change what "an epoch" means.
    """
    if split not in ("train", "test"):
        raise ValueError(f"arithmetic: split must be 'train' or 'test', got {split!r}")
    pool = _problems(split, max_operand)
    if size > len(pool):
        raise ValueError(f"arithmetic: size {size} exceeds the {len(pool)} {split} problems "
                         f"with operands <= {max_operand}")
    rng = random.Random(seed)
    picked = rng.sample(pool, size if size > 0 else len(pool))
    return [_row(*p) for p in picked]


def sft_pairs(rows: list[dict], mode: str = "no_think") -> list[tuple[list[dict], str]]:
    """``(prompt messages, response text)`` per row, for SFT on a synthetic task.

    no_think: ``"23 + 45 = 68. The answer is \\boxed{68}."``; think: the working goes inside
    ``<think>...</think>`` and the answer follows (the thinking format of §3.1.2).
    """
    if mode not in ("think", "no_think"):
        raise ValueError(f"mode must be 'think' or 'no_think', got {mode!r}")
    pairs = []
    for row in rows:
        if "response" in row:  # the other domains' sets (synthetic_domains) carry a reference response
            response = row["response"]
            if mode == "think":
                response = f"<think>\nI follow the request exactly.\n</think>\n\n{response}"
            pairs.append(([{"role": "user", "content": row["prompt"]}], response))
            continue
        work, answer = row.get("solution", ""), row["answer"]
        final = f"The answer is \\boxed{{{answer}}}."
        if mode == "think":
            response = f"<think>\n{work}.\n</think>\n\n{final}"
        else:
            response = f"{work}. {final}" if work else final
        pairs.append(([{"role": "user", "content": row["question"]}], response))
    return pairs


SYNTHETIC: dict[str, Callable[..., list[dict]]] = {"arithmetic": arithmetic}
"""Generators addressed as ``synthetic:NAME``; each is ``fn(split, size, seed) -> rows``."""

__all__ = ["arithmetic", "sft_pairs", "SYNTHETIC", "MAX_OPERAND", "TEST_FRACTION_PERCENT"]
