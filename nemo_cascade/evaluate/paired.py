"""Paired tests between two evaluations of the same items: is a change a gain, a regression, or
noise?

Two rows of a report (two stages of one run, or the final rows of a cascade and its mixed twin)
scored the same suite on the same items, so item-level noise cancels in their difference. With one
binary sample per item the exact McNemar test counts the items only one row got right; otherwise a
paired bootstrap resamples the items' differences. A change is called a gain or a regression only at
``p < ALPHA``; everything else is reported as no significant change, with its p-value beside it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

ALPHA = 0.05
BOOTSTRAP_RESAMPLES = 10_000


@dataclass(frozen=True)
class PairedTest:
    """``after − before`` on the items both rows scored."""

    items: int
    diff: float
    """Mean over the shared items of (after − before), in [−1, 1]."""
    p: float
    test: str
    """``mcnemar`` (one binary sample per item) or ``bootstrap``."""
    only_before: int = 0
    """McNemar's discordant counts: items only the earlier row got right ..."""
    only_after: int = 0
    """... and items only the later one got right."""

    @property
    def verdict(self) -> str:
        if self.items == 0 or self.p >= ALPHA or self.diff == 0:
            return "no significant change"
        return "gain" if self.diff > 0 else "regression"


def mcnemar_exact(only_before: int, only_after: int) -> float:
    """Two-sided exact McNemar p-value: under no change each discordant item is a fair coin, so the
    smaller count is tested against Binomial(b + c, ½). Exact integer arithmetic (no overflow at
    thousands of items)."""
    n = only_before + only_after
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_before, only_after) + 1))
    return min(1.0, 2 * tail / 2 ** n)


def paired_bootstrap(diffs: list[float], resamples: int = BOOTSTRAP_RESAMPLES,
                     seed: int = 0) -> float:
    """Two-sided p-value of "mean difference = 0": the items' differences are centred (the null made
    true) and resampled with replacement; p = share of resampled means at least as far from 0 as the
    observed one, with the observed sample counted once so that p > 0. Seeded: the same files give
    the same p."""
    n = len(diffs)
    if n == 0:
        return 1.0
    mean = sum(diffs) / n
    # no spread: a constant difference is either exactly 0 or certain
    if all(d == diffs[0] for d in diffs):
        return 1.0 if mean == 0 else 1.0 / (resamples + 1)

    centred = np.asarray(diffs, dtype=np.float64) - mean
    rng, extreme = np.random.default_rng(seed), 0
    # in chunks: 1000 × items indices at a time, whatever the suite size
    for start in range(0, resamples, 1000):
        picks = rng.integers(0, n, size=(min(1000, resamples - start), n))
        extreme += int((np.abs(centred[picks].mean(axis=1)) >= abs(mean) - 1e-12).sum())
    return (1 + extreme) / (resamples + 1)


def item_values(suite_result: Mapping) -> tuple[dict[str, float], bool]:
    """``(uid → mean value over the item's samples, every item has one 0/1 sample)`` of one suite's
    eval.json entry (its ``records``). A prompt too long to generate counts as 0, as in the suite's
    score."""
    values, binary = {}, True
    for record in suite_result["records"]:
        samples = [float(v) for v in record["values"]]
        values[str(record["uid"])] = sum(samples) / len(samples) if samples else 0.0
        binary = binary and len(samples) == 1 and samples[0] in (0.0, 1.0)
    return values, binary


def paired_test(before: tuple[Mapping[str, float], bool],
                after: tuple[Mapping[str, float], bool]) -> PairedTest:
    """Compare two :func:`item_values` of one suite on the items both hold."""
    (b_values, b_binary), (a_values, a_binary) = before, after
    shared = [uid for uid in b_values if uid in a_values]
    diffs = [a_values[uid] - b_values[uid] for uid in shared]
    diff = sum(diffs) / len(diffs) if diffs else 0.0
    if b_binary and a_binary:
        only_before, only_after = sum(d < 0 for d in diffs), sum(d > 0 for d in diffs)
        return PairedTest(len(shared), diff, mcnemar_exact(only_before, only_after), "mcnemar",
                          only_before,
                          only_after)
    return PairedTest(len(shared), diff, paired_bootstrap(diffs), "bootstrap")


def p_text(p: float) -> str:
    """A p-value as a table shows it: three decimals, ``<0.001`` below that."""
    return "<0.001" if p < 0.001 else f"{p:.3f}"


__all__ = ["ALPHA", "PairedTest", "mcnemar_exact", "paired_bootstrap", "item_values", "paired_test",
           "p_text"]
