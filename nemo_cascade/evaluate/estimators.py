"""Benchmark arithmetic: avg@k, the unbiased pass@k estimator, standard errors, pairwise win rates.

Notation: a suite has ``I`` items; item ``i`` gets ``K`` samples with per-sample values ``v_ij`` in
[0, 1] (1 = correct / won). Every function here is pure Python on lists, unit-tested against
hand-computed numbers (tests/unit/test_eval_metrics.py).

- **avg@K** (paper §2 and App. B: "avg@k pass@1"): ``(1/I) Σ_i (1/K) Σ_j v_ij`` — the mean over
  items of the mean over that item's samples. With binary values it is the pass@1 estimate from K
  samples per item; the paper reports AIME as avg@64, IFEval / IFBench / GPQA / LiveCodeBench as
  avg@8, SWE-bench as avg@4.
- **pass@k** (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", Eq. 1): for an
  item with ``n`` samples of which ``c`` are correct, the unbiased estimate of "at least one of k
  samples is correct" is ``1 − C(n−c, k) / C(n, k)`` (1 when ``n − c < k``), averaged over items. It
  is computed as ``1 − Π_{m=n−c+1}^{n} (1 − k/m)``, the numerically stable product form of the
  paper's code listing.
- **standard error** of avg@K: the sample standard deviation (``I − 1`` denominator) of the per-item
  means, divided by ``√I`` — the spread over items, the dominant source of benchmark noise; 0 for a
  single item.
- **pairwise outcome** (the RLHF suite, an ArenaHard-style proxy): a Bradley–Terry reward model
  scores the model's answer ``s_m`` and the reference answer ``s_r`` on the same conversation; the
  sample wins (1) if ``s_m − s_r > TIE_TOLERANCE``, loses (0) if ``s_r − s_m > TIE_TOLERANCE``, else
  ties (0.5, as ArenaHard counts ties). The win rate is the avg@K of these outcomes. The BT model's
  own preference probability ``σ(s_m − s_r)`` is reported beside it (``bt_win_prob``: the mean over
  samples and items).
"""
from __future__ import annotations

import math
from typing import Sequence

TIE_TOLERANCE = 1e-4
"""|s_m − s_r| at or below this is a tie: the same text scored in two batches of a vLLM server can
differ in the last float bits (batch-dependent kernels), and an identical answer must tie with
itself."""


def _check_rectangular(values_I_K: Sequence[Sequence[float]]) -> None:
    if not values_I_K:
        raise ValueError("no items")
    k = len(values_I_K[0])
    if k == 0 or any(len(row) != k for row in values_I_K):
        raise ValueError("every item needs the same number (>= 1) of samples, got "
                         f"{[len(r) for r in values_I_K]}")


def item_means(values_I_K: Sequence[Sequence[float]]) -> list[float]:
    """Per item, the mean of its K sample values."""
    _check_rectangular(values_I_K)
    return [sum(row) / len(row) for row in values_I_K]


def avg_at_k(values_I_K: Sequence[Sequence[float]]) -> float:
    """avg@K = mean over items of the mean over the item's K samples (see the module docstring)."""
    means = item_means(values_I_K)
    return sum(means) / len(means)


def standard_error(values_I_K: Sequence[Sequence[float]]) -> float:
    """Standard error of :func:`avg_at_k` over items: ``std(item means, ddof=1) / √I``; 0 for one
    item."""
    means = item_means(values_I_K)
    n = len(means)
    if n < 2:
        return 0.0
    mu = sum(means) / n
    return math.sqrt(sum((m - mu) ** 2 for m in means) / (n - 1) / n)


def pass_at_k_item(n: int, c: int, k: int) -> float:
    """Chen et al. (2021) unbiased pass@k for one item: ``1 − C(n−c, k) / C(n, k)``."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    product = 1.0
    for m in range(n - c + 1, n + 1):
        product *= 1.0 - k / m
    return 1.0 - product


def pass_at_k(correct_I_K: Sequence[Sequence[bool]], k: int) -> float:
    """Mean over items of :func:`pass_at_k_item` with ``n = K`` samples and ``c`` = how many are
    correct."""
    _check_rectangular(correct_I_K)
    total = sum(pass_at_k_item(len(row), sum(bool(x) for x in row), k) for row in correct_I_K)
    return total / len(correct_I_K)


def pairwise_outcome(model_score: float, reference_score: float,
                     tolerance: float = TIE_TOLERANCE) -> float:
    """1 (win), 0.5 (tie within ``tolerance``) or 0 (loss) of a model answer against the reference
    answer."""
    delta = float(model_score) - float(reference_score)
    if delta > tolerance:
        return 1.0
    if delta < -tolerance:
        return 0.0
    return 0.5


def bt_preference(model_score: float, reference_score: float) -> float:
    """The Bradley–Terry probability that the model's answer is preferred: ``σ(s_m − s_r)``."""
    z = float(model_score) - float(reference_score)
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def summarize(values_I_K: Sequence[Sequence[float]],
              correct_I_K: Sequence[Sequence[bool]]) -> dict[str, float]:
    """The headline numbers of one suite: ``avg@K``, its ``stderr``, ``pass@K`` and, when K >= 2,
    ``pass@1`` (the unbiased estimate, equal to avg@K for binary values)."""
    k = len(values_I_K[0]) if values_I_K else 0
    out = {f"avg@{k}": avg_at_k(values_I_K), "stderr": standard_error(values_I_K),
           f"pass@{k}": pass_at_k(correct_I_K, k)}
    if k >= 2:
        out["pass@1"] = pass_at_k(correct_I_K, 1)
    return out


__all__ = ["TIE_TOLERANCE", "item_means", "avg_at_k", "standard_error", "pass_at_k_item",
           "pass_at_k",
           "pairwise_outcome", "bt_preference", "summarize"]
