"""The forgetting check between cascade stages (paper §4.1.1, T2 / T4–T8): did a later stage lose a
skill?

Each stage's scores are compared with the best earlier row of the same suite. Two rules
(docs/evaluation.md, "The gate's rule"): **paired** (the default) — the drop on the items both rows
scored is at least ``min_drop`` and a paired test (:mod:`.paired`) calls it significant at
``alpha``; **unpaired** — ``best − now > max(min_drop, sigmas · √(se_best² + se_now²))``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from .eval_output import read_eval
from .paired import PairedTest, item_values, p_text, paired_test

ItemValues = tuple[dict[str, float], bool]
"""One suite's :func:`.paired.item_values` in one row: ``(uid → value, every item one 0/1
sample)``."""


@dataclass(frozen=True)
class Regression:
    suite: str
    best_stage: str
    best: float
    now: float
    threshold: float
    """The smallest drop the rule flags (unpaired: the noise-scaled one; paired: ``min_drop``)."""
    rule: str = "unpaired"
    p: float | None = None
    """The paired test's p-value (paired rule)."""
    test: str = ""
    """``mcnemar`` or ``bootstrap`` (paired rule)."""
    items: int = 0
    """Items both rows scored (paired rule)."""

    def __str__(self) -> str:
        drop = (f"{self.suite}: {100 * self.now:.1f} now vs {100 * self.best:.1f} "
                f"after {self.best_stage}")
        if self.rule == "paired":
            return (f"{drop} (paired drop {100 * (self.best - self.now):.1f} ≥ "
                    f"{100 * self.threshold:.1f}, {self.test} p {p_text(self.p or 0.0)} "
                    f"on {self.items} items)")
        return f"{drop} (drop {100 * (self.best - self.now):.1f} > {100 * self.threshold:.1f})"


def scores(eval_doc: Mapping) -> dict[str, tuple[float, float]]:
    """``suite → (avg@K, standard error)`` of an eval.json document."""
    out = {}
    for name, r in eval_doc["suites"].items():
        m = r["metrics"]
        out[name] = (m[f"avg@{r['decoding']['samples']}"], m["stderr"])
    return out


def load_stage_scores(
        stage_dirs: Sequence[Path]) -> list[tuple[str, dict[str, tuple[float, float]]]]:
    """``(stage name, scores)`` for each stage directory holding an eval.json, in the given
    order."""
    return [(Path(d).name, scores(read_eval(Path(d) / "eval.json")))
            for d in stage_dirs if (Path(d) / "eval.json").is_file()]


def regressions(history: Sequence[tuple[str, Mapping[str, tuple[float, float]]]],
                current: Mapping[str, tuple[float, float]], min_drop: float = 0.02,
                sigmas: float = 2.0
                ) -> list[Regression]:
    """Suites of ``current`` that fell below their best score in ``history`` (earlier stages) by
    more than the threshold of the module docstring."""
    found = []
    for suite, (now, se_now) in current.items():
        earlier = [(stage, s[suite]) for stage, s in history if suite in s]
        if not earlier:
            continue
        best_stage, (best, se_best) = max(earlier, key=lambda e: e[1][0])
        threshold = max(min_drop, sigmas * math.sqrt(se_best ** 2 + se_now ** 2))
        if best - now > threshold:
            found.append(Regression(suite, best_stage, best, now, threshold))
    return found


def paired_regressions(history: Sequence[tuple[str, Mapping[str, tuple[float, float]]]],
                       items: Sequence[tuple[str, Mapping[str, ItemValues]]],
                       current: Mapping[str, tuple[float, float]],
                       current_items: Mapping[str, ItemValues],
                       min_drop: float = 0.02, alpha: float = 0.05) -> list[Regression]:
    """Suites of ``current`` whose paired drop from their best earlier row (``history``'s scores,
    ``items`` the same rows' item values) is at least ``min_drop`` at p < ``alpha``. A suite that
    shares no item with that row is judged by the unpaired rule at 2 sigmas."""
    found = []
    by_stage = dict(items)
    for suite, (now, se_now) in current.items():
        earlier = [(stage, s[suite]) for stage, s in history if suite in s]
        if not earlier:
            continue
        best_stage, (best, se_best) = max(earlier, key=lambda e: e[1][0])
        before = by_stage.get(best_stage, {}).get(suite)
        test = paired_test(before, current_items[suite]) if before else None
        if test is None or test.items == 0:
            found += regressions([(best_stage, {suite: (best, se_best)})], {suite: (now, se_now)},
                                 min_drop)
        elif _paired_drop(test, min_drop, alpha):
            found.append(Regression(suite, best_stage, best, now, min_drop, "paired", test.p,
                                    test.test, test.items))
    return found


def _paired_drop(test: PairedTest, min_drop: float, alpha: float) -> bool:
    """A drop of at least ``min_drop`` on the shared items that the test calls significant."""
    return -test.diff >= min_drop - 1e-12 and test.p < alpha


def row_regressions(row_dirs: Sequence[Path], current: Path, tolerance: Mapping[str, float],
                    rule: str = "paired", alpha: float = 0.05, sigmas: float = 2.0
                    ) -> list[Regression]:
    """The regressions of the row ``current`` (a folder with eval.json) against the earlier rows
    ``row_dirs`` (in order), for the suites of ``tolerance`` (suite → ``min_drop``), by ``rule``."""
    rows = [(Path(d).name, read_eval(Path(d) / "eval.json")) for d in row_dirs
            if (Path(d) / "eval.json").is_file()]
    history = [(name, scores(doc)) for name, doc in rows]
    doc = read_eval(Path(current) / "eval.json")
    now = scores(doc)
    suites = [s for s in tolerance if s in now]
    if rule == "unpaired":
        return [r for s in suites for r in regressions(history, {s: now[s]}, tolerance[s], sigmas)]
    items = [(name, _item_values(doc)) for name, doc in rows]
    return [r for s in suites for r in
            paired_regressions(history, items, {s: now[s]}, _item_values(doc), tolerance[s], alpha)]


def _item_values(eval_doc: Mapping) -> dict[str, ItemValues]:
    return {name: item_values(r) for name, r in eval_doc["suites"].items()}


def deltas(
        history: Sequence[tuple[str, Mapping[str, tuple[float, float]]]]) -> list[dict[str, float]]:
    """Per row of ``history``: ``suite → avg@K now − avg@K in the latest earlier row that has the
    suite``; a suite seen for the first time has no entry. "Latest earlier row", not "the row
    above": a stage that evaluated fewer suites must not hide the change of the next one."""
    last: dict[str, float] = {}
    out = []
    for _, row in history:
        out.append({s: now - last[s] for s, (now, _) in row.items() if s in last})
        last.update({s: now for s, (now, _) in row.items()})
    return out


def forgetting_matrix(history: Sequence[tuple[str, Mapping[str, tuple[float, float]]]]) -> str:
    """Markdown: one row per stage, one column per suite (avg@K in %), as in the paper's T2 /
    T4–T8."""
    suites = list(dict.fromkeys(s for _, row in history for s in row))
    lines = ["| stage | " + " | ".join(suites) + " |", "|---|" + "---|" * len(suites)]
    for stage, row in history:
        cells = [f"{100 * row[s][0]:.1f}" if s in row else "–" for s in suites]
        lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


__all__ = ["Regression", "ItemValues", "scores", "load_stage_scores", "regressions",
           "paired_regressions", "row_regressions", "deltas", "forgetting_matrix"]
