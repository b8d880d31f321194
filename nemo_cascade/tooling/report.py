"""The cascade report of a run directory: ``report.md`` and ``report.png``, rebuilt from its files
alone.

Reads ``config.json`` (stage order, kind, domain, steps), ``manifest.json`` (status, seconds, gate
verdicts), ``base/eval.json`` and ``stages/<k>-<name>/{eval.json, metrics.jsonl}``, so it can run at
the end of every stage, after a crash, or on a copied run directory (``nemo-cascade report
RUN_DIR``). The matrix is the paper's T2 / T4–T8 with the change against the previous evaluated row,
so forgetting and own-domain gains show at a glance.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from nemo_cascade.config import samples_on_policy
from nemo_cascade.runtime.files import replaced_atomically, write_text_atomically
from nemo_cascade.cascade.metrics import metric_rows
from nemo_cascade.evaluate.stage_scores import deltas
from nemo_cascade.evaluate.paired import ALPHA, PairedTest, p_text, paired_test
from nemo_cascade.tooling.report_run import (HEADLINE, WINDOW, ReportError, Run, StageInfo,
                                             finite_number, load_run, read_curve, trains_domain)

# --------------------------------------------------------------------------------------------- text


def _points(delta: float) -> str:
    value = round(100 * delta, 1)
    return f"{value + 0.0:+.1f}" if value else "+0.0"  # never "-0.0"


def _table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table padded to equal widths, so the same text reads in a terminal."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda cells: (  # noqa: E731
        "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |")
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                      *map(line, rows)]) + "\n"


def _is_own(run: Run, label: str, suite: str) -> bool:
    """Does the row's stage train on this suite's domain (an RL stage's reward domain)?"""
    return trains_domain(run.row_domain[label], run.suite_domain[suite])


def _cell(row: dict, change: dict, suite: str, fmt: str = " ({})",
          test: PairedTest | None = None) -> str:
    """``avg@K`` in % and, where an earlier row has the suite, the change in points formatted by
    ``fmt`` (with the paired test's p-value when ``test`` is given)."""
    if suite not in row:
        return "–"
    if suite not in change:
        return f"{100 * row[suite][0]:.1f}"
    moved = _points(change[suite]) + (f", p {p_text(test.p)}" if test is not None else "")
    return f"{100 * row[suite][0]:.1f}" + fmt.format(moved)


def _matrix(run: Run, own: str) -> str:
    """Stage × suite: ``avg@K (Δ vs the previous row)`` in %; ``own`` formats a stage's own-domain
    cells."""
    suites = list(dict.fromkeys(s for _, row in run.history for s in row))
    rows = []
    for (label, row), change, tests in zip(run.history, deltas(run.history), run.tests()):
        cells = [_cell(row, change, s, test=tests.get(s)) for s in suites]
        rows.append([label, *(own.format(c) if s in row and _is_own(run, label, s) else c
                              for s, c in zip(suites, cells))])
    return _table(["stage", *(f"{s} ({run.suite_domain[s]})" for s in suites)], rows)


def _own_domain(run: Run) -> list[str]:
    """One line per RL stage: the change of the suites of its own domain against the row before
    it."""
    change = dict(zip((label for label, _ in run.history), deltas(run.history)))
    tests = dict(zip((label for label, _ in run.history), run.tests()))
    lines = []
    for s in (s for s in run.stages if samples_on_policy(s)):
        moved = {x: d for x, d in change.get(s.name, {}).items()
                 if trains_domain(s.domain, run.suite_domain[x])}
        if s.name not in change:
            text = ("not evaluated yet" if s.evaluate
                    else "no gate after it (evaluate = false): see the next row")
        elif not moved:
            text = f"no {s.domain} suite in both this row and an earlier one"
        else:
            text = ", ".join(f"{x} {_points(d)}{_significance(tests[s.name].get(x))}"
                             for x, d in moved.items())
            text += f" (mean {_points(sum(moved.values()) / len(moved))})" if len(moved) > 1 else ""
        lines.append(f"- `{s.name}` ({s.domain}): {text}")
    return lines


def paired_rows(run_a: Run, label_a: str, run_b: Run, label_b: str,
                suite: str) -> PairedTest | None:
    """The paired test of ``suite`` from row ``label_a`` of ``run_a`` to row ``label_b`` of
    ``run_b`` (the same run or two), on the items both scored; None where either row has no item
    records for it or they share no item."""
    before, after = run_a.items.get(label_a, {}).get(suite), run_b.items.get(label_b, {}).get(suite)
    test = paired_test(before, after) if before is not None and after is not None else None
    return test if test is not None and test.items else None


def _kept_to_the_end(run: Run) -> list[str]:
    """One line per RL stage evaluated before the last row: its own-domain suites after it against
    the last row, paired on the same items — did the later stages keep what this one learned (the
    question the cascade's per-stage gates are there to answer, §4.1)?"""
    scores, (last, final) = dict(run.history), run.history[-1]
    lines = []
    for s in (s for s in run.stages
              if samples_on_policy(s) and s.name in scores and s.name != last):
        own = [x for x in scores[s.name]
               if trains_domain(s.domain, run.suite_domain[x]) and x in final]
        parts = []
        for x in own:
            test = paired_rows(run, s.name, run, last, x)
            parts.append(f"{x} {100 * scores[s.name][x][0]:.1f} → {100 * final[x][0]:.1f} "
                         f"({_points(final[x][0] - scores[s.name][x][0])}"
                         + (f", p {p_text(test.p)}, {test.verdict})" if test is not None else ")"))
        lines.append(f"- `{s.name}` ({s.domain}) to `{last}`: "
                     + (", ".join(parts) or f"no {s.domain} suite in both rows"))
    return lines


def _paired_drops(run: Run) -> list[str]:
    """One line per row with a suite that fell against the row before at p < ALPHA (the matrix's
    paired test), own domain or not."""
    lines = []
    for (label, _), change, tests in zip(run.history, deltas(run.history), run.tests()):
        drops = [f"{suite} {_points(change[suite])} (p {p_text(test.p)})"
                 for suite, test in tests.items() if test.verdict == "regression"]
        if drops:
            lines.append(f"- after `{label}`: " + ", ".join(drops))
    return lines


def _significance(test: PairedTest | None) -> str:
    return "" if test is None else f" (p {p_text(test.p)}, {test.verdict})"


_RULES = ("the gate's verdicts (manifest.json; `gate.on_regression` acts on them), each under the "
          "rule recorded with it: **paired**, a drop of at least `gate.min_drop` from the suite's "
          "best earlier row on the items both rows scored, significant at `gate.alpha`; "
          "**unpaired**, a drop below the best earlier score by more than max(`gate.min_drop`, "
          "`gate.sigmas` standard errors of the two scores).")


def _row_chosen(teacher: dict) -> str:
    return f" (row `{teacher['row']}`)" if teacher.get("row") else ""


def _teachers(run: Run) -> list[str]:
    """One line per distill stage that has started: each domain's teacher and where it came from."""
    lines = []
    for s in run.stages:
        parts = [f"{domain} ← `{t.get('source')}`" + _row_chosen(t)
                 for domain, t in s.teachers.items() if isinstance(t, dict)]
        by = f" (inserted by the gate after `{s.inserted_by}`)" if s.inserted_by else ""
        if parts:
            lines.append(f"- `{s.name}`{by}: " + ", ".join(parts))
    return lines


def _regressions(run: Run) -> list[str]:
    """One line per recorded regression, and one per repair stage the gate inserted for them; a
    manifest written before the paired rule records none."""
    lines = []
    for s in run.stages:
        lines += [f"- `{s.name}` ({s.gate.get('action', '?')}, {s.gate.get('rule', 'unpaired')} "
                  f"rule): {r}" for r in s.gate.get("regressions", [])]
        repair = s.gate.get("repair")
        if isinstance(repair, dict):
            lines.append(f"- `{s.name}`: repair stage `{repair.get('stage')}` inserted for "
                         f"{', '.join(repair.get('domains') or [])}")
    return lines


def matrix_text(run_dir: Path) -> str:
    """The forgetting matrix and the own-domain changes as aligned text, for the end-of-run
    printout."""
    run = load_run(run_dir)
    if not run.history:
        return "no evaluation yet (no base/eval.json, no stages/*/eval.json)\n"
    own = _own_domain(run)
    return (_matrix(run, own="{}*")
            + "* = the stage's own domain; (±x, p) = points vs the previous row and the "
            f"paired test's p-value (significant below {ALPHA})\n"
            + ("own-domain change:\n" + "\n".join(own) + "\n" if own else ""))


def _ends(values: list[float]) -> tuple[float, float, int]:
    """Means of the first and last ``n`` values, ``n = min(WINDOW, len // 2)``: the windows never
    overlap."""
    n = max(1, min(WINDOW, len(values) // 2))
    return sum(values[:n]) / n, sum(values[-n:]) / n, n


def _summary(run: Run) -> str:
    rows = []
    for s, (key, _, values) in zip(run.stages, run.curves):
        first, last, n = _ends(values) if values else (None, None, 0)
        planned = str(s.steps) if s.steps else f"{s.epochs:g} epochs"
        rows.append([str(s.index), s.name, s.kind, s.domain or "–", f"{len(values)}/{planned}",
                     s.status, "–" if s.seconds is None else f"{s.seconds:.0f}", key,
                     "–" if first is None else f"{first:.3f}",
                     "–" if last is None else f"{last:.3f}", str(n)])
    return _table(["#", "stage", "kind", "domain", "steps logged/planned", "status", "seconds",
                   "metric", "first n mean", "last n mean", "n"], rows)


def _total(rows: list[dict], key: str) -> float:
    return sum(v for v in (finite_number(r, key) for r in rows) if v is not None)


def _domain_rewards(rows: list[dict]) -> str:
    """A mixed-domain stage's mean reward per domain over its first and last n steps, weighted by
    each step's prompts of that domain (rewards.scoring logs ``reward_mean/<domain>``,
    ``prompts/<domain>``); "–" for a stage of one domain (its reward is the Stages table's)."""
    domains = sorted({k.split("/", 1)[1] for r in rows for k in r if k.startswith("prompts/")})
    n = max(1, min(WINDOW, len(rows) // 2))

    def weighted(window: list[dict], domain: str) -> str:
        pairs = [(finite_number(r, f"reward_mean/{domain}"), finite_number(r, f"prompts/{domain}"))
                 for r in window]
        pairs = [(v, w) for v, w in pairs if v is not None and w]
        return f"{sum(v * w for v, w in pairs) / sum(w for _, w in pairs):.3f}" if pairs else "–"

    return "; ".join(f"{d} {weighted(rows[:n], d)} → {weighted(rows[-n:], d)} "
                     f"({_total(rows, f'prompts/{d}'):.0f} prompts)" for d in domains) or "–"


def _training(run: Run) -> str:
    """What each GRPO stage's steps did, from its metrics.jsonl: the groups that carried a signal
    (unequal rewards: the only ones that train, §4.4.2), how many samples hit the length cap, where
    the time went."""
    rows = []
    for s in run.stages:
        if not samples_on_policy(s):
            continue
        logged = metric_rows(s.dir / "metrics.jsonl", missing_ok=True, error=ReportError)
        if not logged:
            continue
        step_s, generate_s = _total(logged, "time/step"), _total(logged, "time/generate")
        informative, groups = _total(logged, "groups_informative"), _total(logged, "groups")
        weak = " (below a third: little signal)" if groups and informative < groups / 3 else ""
        signal = f"{informative:.0f} / {groups:.0f}{weak}"
        if s.kind == "distill":  # the teacher's signal is in every group
            signal = f"{groups:.0f} / {groups:.0f} (teachers)"
        rows.append([s.name, signal,
                     f"{100 * _total(logged, 'truncation_rate') / len(logged):.0f}",
                     f"{step_s / len(logged):.1f}",
                     f"{100 * generate_s / step_s:.0f}" if step_s else "–",
                     _domain_rewards(logged)])
    if not rows:
        return ""
    return _table(["stage", "informative groups / generated", "truncated %", "s / step",
                   "generation % of step", "reward by domain, first n → last n steps"], rows)


def render_markdown(run: Run, png_name: str = "report.png") -> str:
    sha = run.git_sha[:12] or "unknown"
    parts = [f"# Cascade report: {run.name}", "",
             f"git `{sha}`; built from the files of the run directory "
             "(`nemo-cascade report RUN_DIR` rebuilds it).", "", "## Forgetting matrix", ""]
    if run.history:
        parts += [
            "avg@K in % after each stage; (±x, p) = change in points vs the previous evaluated "
            "row and the p-value of a paired test on the items both rows scored (exact McNemar "
            "with one sample per item, else a paired bootstrap): a change is called a gain or a "
            f"regression only at p < {ALPHA}; **bold** = the stage's own domain (an RL stage's "
            "suites of its reward domain). A stage without eval.json (pending, a reward model, "
            "which does not change the policy, or a stage with evaluate = false, the first part "
            "of a split stage) has no row.", "",
            _matrix(run, own="**{}**"), "### Own-domain change of each RL stage", "",
            *(_own_domain(run) or ["- no RL stage"]), ""]
        kept = _kept_to_the_end(run)
        if kept:
            parts += ["### Each RL stage's own domain at the end", "",
                      "the stage's own-domain suites after it against the last row, paired on the "
                      "same items: did the later stages keep it?", "", *kept, ""]
    else:
        parts += ["No evaluation yet (no `base/eval.json`, no `stages/*/eval.json`).", ""]
    recorded = _regressions(run) or ["None recorded in manifest.json."]
    parts += ["## Gate regressions", "", _RULES, "", *recorded, "",
              f"Drops against the row before at p < {ALPHA} (the matrix's paired test; the gate "
              "compares with the best earlier row instead):", "",
              *(_paired_drops(run) or ["- none"]), "",
              "## Stages", "",
              f"metric: GRPO `{HEADLINE['grpo']}`, distill `{HEADLINE['distill']}`, "
              f"SFT `{HEADLINE['sft']}`, reward model `{HEADLINE['reward_model']}`; first / last n "
              f"mean = over the first and last n ≤ {WINDOW} logged steps (n ≤ half the steps, so "
              "the two never overlap).",
              "", _summary(run)]
    taught = _teachers(run)
    if taught:
        parts += ["", "## Distill stages", "", "each domain's teacher (docs/distill.md); `best` "
                  "names the gate row it chose:", "", *taught]
    training = _training(run)
    if training:
        parts += [
            "## GRPO steps", "",
            "informative groups: groups whose rewards differ (the zero-variance rest is dropped, "
            "§4.4.2); truncated: share of samples stopped at the response budget, mean over steps; "
            "reward by domain: a mixed-domain stage's mean reward per domain (code-switch penalty "
            "included), weighted by the domain's prompts in each step.", "", training]
    parts += [f"![]({png_name})", ""]
    return "\n".join(parts)


# ------------------------------------------------------------------------------------------- figure


def _heatmap(ax, run: Run) -> None:
    """Rows = evaluated rows, columns = suites, colour = change vs the previous row; own-domain
    cells boxed."""
    import matplotlib
    from matplotlib.patches import Rectangle

    suites = list(dict.fromkeys(s for _, row in run.history for s in row))
    change = deltas(run.history)
    delta = np.array([[100 * d[s] if s in d else np.nan for s in suites] for d in change])
    # Symmetric limits centre the diverging map at 0; at least ±1 point so noise-sized changes stay
    # pale.
    lim = max(1.0, float(np.nanmax(np.abs(delta)))) if np.isfinite(delta).any() else 1.0
    # grey: no earlier row to compare with
    cmap = matplotlib.colormaps["RdBu"].with_extremes(bad="#eeeeee")
    image = ax.imshow(np.ma.masked_invalid(delta), cmap=cmap, vmin=-lim, vmax=lim, aspect="auto")
    for i, (label, row) in enumerate(run.history):
        for j, s in enumerate(suites):
            # white, not the grey of "no earlier row": this stage did not evaluate the suite
            if s not in row:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="white",
                                       edgecolor="none"))
            dark = bool(np.isfinite(delta[i, j]) and abs(delta[i, j]) > 0.6 * lim)
            ax.text(j, i, _cell(row, change[i], s, fmt="\n{}"), ha="center", va="center",
                    fontsize=8, color="white" if dark else "black")
            if s in row and _is_own(run, label, s):
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black",
                                       linewidth=2.5))
    ax.set_xticks(range(len(suites)), [f"{s}\n({run.suite_domain[s]})" for s in suites], fontsize=8)
    ax.set_yticks(range(len(run.history)),
                  [label + (f"\n[{run.row_domain[label]}]" if run.row_domain[label] else "")
                   for label, _ in run.history], fontsize=8)
    ax.xaxis.tick_top()
    ax.set_xlabel(
        "avg@K in % (change in points vs the previous row); boxed: the stage's own domain",
        fontsize=9)
    ax.figure.colorbar(image, ax=ax, shrink=0.7, label="change vs previous row (points)")


def _curves(fig, spec, curves: list) -> None:
    """One small panel per stage with logged steps: the headline metric per step and its moving
    average."""
    cols = 2 if len(curves) > 1 else 1
    grid = spec.subgridspec(math.ceil(len(curves) / cols), cols)
    for i, (stage, key, steps, values) in enumerate(curves):
        ax = fig.add_subplot(grid[i // cols, i % cols])
        ax.plot(steps, values, color="C0", alpha=0.35, linewidth=1,
                marker="." if len(values) < 3 else None)
        # a few points per window, ≤ the summary's window
        window = max(1, min(WINDOW, len(values) // 5))
        if window > 1:
            ax.plot(steps[window - 1:], np.convolve(values, np.ones(window) / window, mode="valid"),
                    color="C0", linewidth=2, label=f"mean of {window} steps")
            ax.legend(fontsize=6, loc="best")
        ax.set_title(f"{stage.index} {stage.name} "
                     f"({stage.kind}{'/' + stage.domain if stage.domain else ''})", fontsize=9)
        ax.set_ylabel(key, fontsize=8)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)


def render_png(run: Run, path: Path) -> None:
    """Heatmap (left) and training curves (right) into ``path``, atomically."""
    try:
        # imported here: `import nemo_cascade.evaluate` must stay light on machines that only train
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ReportError("report.png needs matplotlib (tools/setup_venv.sh installs it)") from None
    curves = [(s, *c) for s, c in zip(run.stages, run.curves) if c[2]]
    suites = len({s for _, row in run.history for s in row})
    heat_w, curve_w = 3.0 + 1.25 * max(suites, 2), 7.0 if curves else 0.0
    height = max(4.5, 2.5 + 0.6 * len(run.history), 1.0 + 2.3 * math.ceil(len(curves) / 2))
    fig = Figure(figsize=(heat_w + curve_w, height), layout="constrained")
    # Agg explicitly, without pyplot's global state: safe inside a training process
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(1, 2 if curves else 1,
                            width_ratios=[heat_w, curve_w] if curves else None)
    ax = fig.add_subplot(grid[0, 0])
    if run.history:
        _heatmap(ax, run)
    else:
        ax.text(0.5, 0.5, "no evaluation yet", ha="center", va="center")
        ax.axis("off")
    if curves:
        _curves(fig, grid[0, 1], curves)
    fig.suptitle(f"{run.name} (git {run.git_sha[:12] or 'unknown'})", fontsize=11)
    with replaced_atomically(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)


def build_report(run_dir: Path) -> tuple[Path, Path]:
    """Write ``RUN_DIR/report.md`` and ``RUN_DIR/report.png`` from the run directory's files;
    returns both paths. Raises :class:`ReportError` (one line naming the file) for a missing or
    unreadable file."""
    run = load_run(run_dir)
    md, png = Path(run_dir) / "report.md", Path(run_dir) / "report.png"
    write_text_atomically(md, render_markdown(run, png.name))
    render_png(run, png)
    return md, png


__all__ = ["ReportError", "StageInfo", "Run", "load_run", "paired_rows", "read_curve",
           "matrix_text", "render_markdown", "render_png", "build_report"]
