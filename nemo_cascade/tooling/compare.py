"""Runs side by side: the same gate suites after equal amounts of RL, one column per run.

The question a cascade has to answer is whether domain-wise stages beat one RL run over the same
domains mixed (recipes/smollm2.py against recipes/smollm2_mixed.py, docs/results/smollm2.md). Each
run's gate rows (base, then every evaluated stage) are placed at the RL steps done by then — the
GRPO steps of the stages up to that row — so rows of different runs at the same step count compare
equal compute. Reads the run directories only (:func:`.report.load_run`), like the single-run
report.

    nemo-cascade report runs/smollm2 runs/smollm2-mixed --out docs/results/smollm2
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from nemo_cascade.runtime.files import replaced_atomically, write_text_atomically
from nemo_cascade.config import samples_on_policy
from nemo_cascade.tooling.report import Run, load_run, paired_rows
from nemo_cascade.evaluate.paired import ALPHA, p_text


@dataclass(frozen=True)
class Point:
    """One gate row of a run: its label, the RL steps done by then, and ``suite → (avg@K,
    stderr)``."""
    label: str
    steps: int
    scores: dict[str, tuple[float, float]]


def points(run: Run) -> list[Point]:
    """The run's gate rows in order, each at the GRPO steps of the stages up to it (base: 0)."""
    done, out = {}, []
    total = 0
    for s in run.stages:
        if samples_on_policy(s):
            total += s.steps
        done[s.name] = total
    for label, row in run.history:
        out.append(Point(label, 0 if label == "base" else done.get(label, 0), dict(row)))
    return out


def _pct(score: tuple[float, float] | None) -> str:
    return "–" if score is None else f"{100 * score[0]:.1f} ± {100 * score[1]:.1f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows]) + "\n"


def _difference(run0: Run, p0: Point | None, run: Run, p: Point | None, suite: str) -> str:
    """``run``'s score minus ``run0``'s at these two gate rows, in points ± the unpaired standard
    error, then the paired test on the items both rows scored; ``–`` where either row lacks the
    suite."""
    first, other = (p0.scores.get(suite) if p0 else None), (p.scores.get(suite) if p else None)
    if first is None or other is None:
        return "–"
    text = f"{100 * (other[0] - first[0]):+.1f} ± {100 * math.hypot(other[1], first[1]):.1f}"
    test = paired_rows(run0, p0.label, run, p.label, suite)
    if test is not None:  # none without item records to pair
        text += f" (p {p_text(test.p)}, {test.items} items, {test.verdict})"
    return text


def comparison_markdown(runs: list[Run]) -> str:
    """Per suite (domain), the score of every run at every RL step count any run was evaluated at,
    with each later run's paired difference from the first at that step; then the final rows side by
    side the same way."""
    suites = list(dict.fromkeys(s for run in runs for _, row in run.history for s in row))
    per_run = [{p.steps: p for p in points(run)} for run in runs]
    steps = sorted({k for pts in per_run for k in pts})
    names = [run.name for run in runs]
    differences = [f"{n} − {names[0]}" for n in names[1:]]
    parts = [f"# {' vs '.join(names)}\n",
             "avg@K in % ± its standard error, after the RL steps in the first column (each run's "
             "gate row there: the stage that ended at that step). Differences in points ± the "
             "unpaired standard error, then the p-value of a paired test on the items both rows "
             "scored (exact McNemar with one sample per item, else a paired bootstrap): a "
             f"difference is called a gain or a regression only at p < {ALPHA}.\n"]
    for suite in suites:
        domain = next(run.suite_domain[suite] for run in runs if suite in run.suite_domain)
        rows = [[str(k), *(f"{_pct(pts[k].scores.get(suite))} ({pts[k].label})" if k in pts else "–"
                           for pts in per_run),
                 *(_difference(runs[0], per_run[0].get(k), run, pts.get(k), suite)
                   for run, pts in zip(runs[1:], per_run[1:]))] for k in steps]
        parts.append(f"\n## {suite} ({domain})\n\n"
                     + _table(["RL steps", *names, *differences], rows))
    finals = [points(run)[-1] if run.history else None for run in runs]
    rows = [[suite, *(_pct(p.scores.get(suite) if p else None) for p in finals),
             *(_difference(runs[0], finals[0], run, p, suite)
               for run, p in zip(runs[1:], finals[1:]))]
            for suite in suites]
    head = ["suite", *(f"{run.name} ({p.label}, {p.steps} steps)" if p else run.name
                       for run, p in zip(runs, finals)),
            *differences]
    parts.append("\n## Final rows\n\n" + _table(head, rows))
    return "".join(parts)


def comparison_png(runs: list[Run], path: Path) -> None:
    """One panel per suite: avg@K (with ±1 standard error) against RL steps, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    suites = list(dict.fromkeys(s for run in runs for _, row in run.history for s in row))
    cols = min(4, max(1, len(suites)))
    rows = -(-len(suites) // cols) or 1
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    for ax, suite in zip(axes.flat, suites):
        for run in runs:
            pts = [p for p in points(run) if suite in p.scores]
            xs = [p.steps for p in pts]
            ys = [100 * p.scores[suite][0] for p in pts]
            err = [100 * p.scores[suite][1] for p in pts]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=run.name)
            for p, y in zip(pts, ys):
                ax.annotate(p.label, (p.steps, y), textcoords="offset points", xytext=(3, 4),
                            fontsize=7)
        domain = next(run.suite_domain[suite] for run in runs if suite in run.suite_domain)
        ax.set(title=f"{suite} ({domain})", xlabel="RL steps", ylabel="avg@K, %")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(suites):]:
        ax.axis("off")
    fig.tight_layout()
    with replaced_atomically(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)


def build_comparison(run_dirs: list[Path], out_dir: Path) -> tuple[Path, Path]:
    """Write ``OUT/comparison.md`` and ``OUT/comparison.png`` for the runs; returns both paths.
    Raises ``ReportError`` (one line naming the file) for a run directory that cannot be read."""
    runs = [load_run(Path(d)) for d in run_dirs]
    out_dir.mkdir(parents=True, exist_ok=True)
    md, png = out_dir / "comparison.md", out_dir / "comparison.png"
    write_text_atomically(md, comparison_markdown(runs) + f"\n![]({png.name})\n")
    comparison_png(runs, png)
    return md, png


__all__ = ["Point", "points", "comparison_markdown", "comparison_png", "build_comparison"]
