"""Synthetic tasks for the tiny CPU recipe: small, deterministic, verifiable prompt sets made in
memory.

``arithmetic`` asks for sums and differences of small numbers with the answer in ``\\boxed{}``, so
the real ``math`` reward judges it. It is easy enough that a ~1M-parameter model learns part of it
from a few hundred SFT steps and has headroom for RL. Addressed from config as ``Data.source =
"synthetic:arithmetic"``; its preference form (:func:`arithmetic_pairs`) feeds the tiny cascade's
reward-model stage.

Held-out split: every problem ``(a, op, b)`` is assigned to ``train`` or ``test`` by a fixed hash of
the problem itself (:func:`_split_of`), independent of ``seed`` and ``size``. The two splits
therefore never share an operand pair, whatever seeds or sizes are drawn; ``seed`` only chooses
which problems of the split are drawn and their order. (A test pair may be the commuted form of a
train pair, ``3 + 4`` vs ``4 + 3``: that is generalisation the model has to do, not leakage.)
"""
from __future__ import annotations

import hashlib
import random

from nemo_cascade.data.generated import sft_pairs

TEST_FRACTION_PERCENT = 15
"""Share of problems (by hash) held out for the test split."""
MAX_OPERAND = 30
"""Operands are drawn from 0..MAX_OPERAND (differences are kept non-negative)."""
QUESTION = "What is {a} {op} {b}? Put the final answer in \\boxed{{}}."


def _split_of(a: int, op: str, b: int) -> str:
    """``train`` or ``test`` for one problem — a hash of the problem, so the split never depends on
    seeds."""
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

    ``size <= 0`` returns the whole split (in a seeded order). Asking for more rows than the split
    holds raises ``ValueError`` — repeating problems would silently change what "an epoch" means.
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


REJECT_KINDS = ("wrong", "inconsistent", "unboxed")
"""How a synthetic rejected response differs from the chosen (correct) one: a wrong result stated
throughout; the right working but a different boxed answer; the right answer without ``\\boxed{}``.
Each earns 0 from the ``math`` verifier while the chosen response earns 1."""


def wrong_result(value: int, rng: random.Random) -> int:
    """A nearby wrong non-negative result (off by 1..3): close enough that only the arithmetic
    tells."""
    candidates = [value + d for d in (-3, -2, -1, 1, 2, 3) if value + d >= 0]
    return rng.choice(candidates)


def arithmetic_pairs(rows: list[dict], mode: str = "no_think", seed: int = 0) -> list[dict]:
    """Preference rows from synthetic arithmetic rows (:func:`arithmetic`): the chosen response is
    the SFT reference answer; the rejected one is a corruption of it, its kind
    (:data:`REJECT_KINDS`) and wrong value drawn per problem from ``seed`` and the problem's uid, so
    a row's pair does not depend on which other rows were drawn."""
    out = []
    for row, (messages, chosen) in zip(rows, sft_pairs(rows, mode)):
        rng = random.Random(
            int.from_bytes(hashlib.sha256(f"{seed}:{row['uid']}".encode()).digest()[:8], "big"))
        kind = rng.choice(REJECT_KINDS)
        lhs, value = row["solution"].rsplit(" = ", 1)
        right, wrong = row["answer"], str(wrong_result(int(value), rng))
        if kind == "wrong":
            bad = dict(row, answer=wrong, solution=f"{lhs} = {wrong}")
        elif kind == "inconsistent":
            bad = dict(row, answer=wrong)
        else:
            bad = None
        rejected = (sft_pairs([bad], mode)[0][1] if bad is not None
                    else chosen.replace(f"\\boxed{{{right}}}", right))
        out.append({
            "uid": row["uid"], "prompt": messages, "chosen": chosen, "rejected": rejected,
            "kind": kind})
    return out


__all__ = ["arithmetic", "arithmetic_pairs", "wrong_result", "MAX_OPERAND", "TEST_FRACTION_PERCENT",
           "REJECT_KINDS"]
