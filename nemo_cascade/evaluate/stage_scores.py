"""The forgetting check between cascade stages (paper §4.1.1, T2 / T4–T8): did a later stage lose a skill?

The cascade evaluates the same suites after every stage (``runner.evaluate`` with the colocated engine, or
``nemo-cascade eval`` on each stage directory) and compares each stage's scores with the best earlier stage.
A suite **regresses** when ``best_before − now > max(min_drop, sigmas · √(se_before² + se_now²))``: the drop
must exceed both a practical threshold and the sampling noise of the two avg@K estimates (their standard
errors over items, assumed independent). The paper's largest per-stage regressions are 2–4 points
(ArenaHard after IF-RL, Tables 2 and 4–8), so ``min_drop`` defaults to 0.02.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from .eval_output import read_eval


@dataclass(frozen=True)
class Regression:
    suite: str
    best_stage: str
    best: float
    now: float
    threshold: float

    def __str__(self) -> str:
        return (f"{self.suite}: {100 * self.now:.1f} now vs {100 * self.best:.1f} after {self.best_stage} "
                f"(drop {100 * (self.best - self.now):.1f} > {100 * self.threshold:.1f})")


def scores(eval_doc: Mapping) -> dict[str, tuple[float, float]]:
    """``suite → (avg@K, standard error)`` of an eval.json document."""
    out = {}
    for name, r in eval_doc["suites"].items():
        m = r["metrics"]
        out[name] = (m[f"avg@{r['decoding']['samples']}"], m["stderr"])
    return out


def load_stage_scores(stage_dirs: Sequence[Path]) -> list[tuple[str, dict[str, tuple[float, float]]]]:
    """``(stage name, scores)`` for each stage directory holding an eval.json, in the given order."""
    return [(Path(d).name, scores(read_eval(Path(d) / "eval.json")))
            for d in stage_dirs if (Path(d) / "eval.json").is_file()]


def regressions(history: Sequence[tuple[str, Mapping[str, tuple[float, float]]]],
                current: Mapping[str, tuple[float, float]], min_drop: float = 0.02, sigmas: float = 2.0
                ) -> list[Regression]:
    """Suites of ``current`` that fell below their best score in ``history`` (earlier stages) by more than
    the threshold of the module docstring."""
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


def deltas(history: Sequence[tuple[str, Mapping[str, tuple[float, float]]]]) -> list[dict[str, float]]:
    """Per row of ``history``: ``suite → avg@K now − avg@K in the latest earlier row that has the suite``; a
    suite seen for the first time has no entry. "Latest earlier row", not "the row above": a stage that
    evaluated fewer suites must not hide the change of the next one."""
    last: dict[str, float] = {}
    out = []
    for _, row in history:
        out.append({s: now - last[s] for s, (now, _) in row.items() if s in last})
        last.update({s: now for s, (now, _) in row.items()})
    return out


def forgetting_matrix(history: Sequence[tuple[str, Mapping[str, tuple[float, float]]]]) -> str:
    """Markdown: one row per stage, one column per suite (avg@K in %), as in the paper's T2 / T4–T8."""
    suites = list(dict.fromkeys(s for _, row in history for s in row))
    lines = ["| stage | " + " | ".join(suites) + " |", "|---|" + "---|" * len(suites)]
    for stage, row in history:
        cells = [f"{100 * row[s][0]:.1f}" if s in row else "–" for s in suites]
        lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


__all__ = ["Regression", "scores", "load_stage_scores", "regressions", "deltas", "forgetting_matrix"]
