"""How steady is a cascade's forgetting matrix across seeds?

Runs the recipe once per seed (``nemo-cascade run RECIPE run_root=OUT/seedN seed=N``, one after the
other; a finished run is skipped, an unfinished one resumes), then prints per stage and suite the
avg@K cell on every seed with its mean, standard deviation and min–max; per RL stage its own-domain
change on every seed and whether the sign agrees; and each RL stage's changes on the other domains.
The tables also go to ``OUT/seeds.md``, a summary row to ``bench/results/cascade_seeds.jsonl``.

    .venv/bin/python bench/cascade_seeds.py --seeds 1 2 3 --recipe recipes/tiny.py --out runs/seeds

``seed`` is the Cascade's top-level seed (base-model init, actor and RM-head RNG, the gate's
sampling); the recipe's per-stage ``Data.seed`` and ``Rollout.seed`` stay as the recipe sets them.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "cascade_seeds.jsonl"
ALPHA = 0.05  # a change counts as significant below this paired p-value (the report's level)


# ------------------------------------------------------------------------------------------ runs


def run_dir(out: Path, seed: int, name: str) -> Path:
    return out / f"seed{seed}" / name


def run_state(run: Path) -> str:
    """``missing``, ``unfinished``, ``done`` (every stage done and gated) or ``stopped`` (the gate
    ended it)."""
    try:
        manifest = json.loads((run / "manifest.json").read_text())
        stages = [s["name"] for s in json.loads((run / "config.json").read_text())["stages"]]
    except (OSError, ValueError, KeyError, TypeError):
        return "missing"
    if manifest.get("stopped"):
        return "stopped"
    records = manifest.get("stages", {})
    done = all(records.get(s, {}).get("status") == "done"
               and records[s].get("gated", True) is not False for s in stages)
    return "done" if done else "unfinished"


def ensure_run(recipe: str, out: Path, seed: int, name: str) -> dict:
    """Run (or resume) the seed's cascade unless it has finished; ``{seed, state, rc, wall_s}``."""
    run = run_dir(out, seed, name)
    state = run_state(run)
    if state in ("done", "stopped"):
        print(f"seed {seed}: {run} has finished ({state}); skipped", flush=True)
        return {"seed": seed, "state": state, "rc": None, "wall_s": None}
    cli = Path(sys.executable).parent / "nemo-cascade"
    cmd = [str(cli), "run", recipe, f"run_root={run.parent}", f"seed={seed}"]
    print(f"seed {seed}: {'resuming' if state == 'unfinished' else 'running'}: {' '.join(cmd)}",
          flush=True)
    t0 = time.perf_counter()
    rc = subprocess.run(cmd).returncode  # OUT and RECIPE are relative to the caller's folder
    wall = round(time.perf_counter() - t0, 1)
    print(f"seed {seed}: exit {rc} after {wall:.0f} s; {run_state(run)}", flush=True)
    return {"seed": seed, "state": run_state(run), "rc": rc, "wall_s": wall}


def load_runs(out: Path, seeds: list[int], name: str) -> dict:
    """``seed → report.Run`` for every seed whose run folder has at least one gate row."""
    from nemo_cascade.tooling.report import ReportError, load_run

    runs = {}
    for seed in seeds:
        try:
            run = load_run(run_dir(out, seed, name))
        except ReportError as e:
            print(f"seed {seed}: {e}", flush=True)
            continue
        if run.history:
            runs[seed] = run
    return runs


# ------------------------------------------------------------------------------------------ numbers


class Seeded:
    """One run's rows, changes and paired tests, by row label."""

    def __init__(self, run):
        from nemo_cascade.evaluate.stage_scores import deltas

        labels = [label for label, _ in run.history]
        self.run = run
        self.cells = dict(run.history)
        self.change = dict(zip(labels, deltas(run.history)))
        self.tests = dict(zip(labels, run.tests()))

    def own(self, label: str, suite: str) -> bool:
        """Does row ``label``'s stage train on the suite's domain (the report's bold cells)?"""
        domains = self.run.row_domain.get(label)
        return domains is not None and self.run.suite_domain.get(suite) in domains.split("+")

    def score(self, label: str, suite: str) -> float | None:
        cell = self.cells.get(label, {}).get(suite)
        return None if cell is None else 100 * cell[0]

    def moved(self, label: str, suite: str) -> tuple[float, float | None] | None:
        """``(change in points vs the row before, paired p or None)``; None without a change."""
        if suite not in self.change.get(label, {}):
            return None
        test = self.tests.get(label, {}).get(suite)
        return 100 * self.change[label][suite], None if test is None else test.p


def layout(seeded: dict) -> tuple[list[str], list[str], list[str], dict[str, str]]:
    """Row labels, suites, RL stage names and suite → domain over all seeds, in run order."""
    runs = [s.run for s in seeded.values()]
    labels = list(dict.fromkeys(label for r in runs for label, _ in r.history))
    suites = list(dict.fromkeys(suite for r in runs for _, row in r.history for suite in row))
    rl = list(dict.fromkeys(s.name for r in runs for s in r.stages if s.domain))  # on-policy
    domain = {k: v for r in runs for k, v in r.suite_domain.items()}
    return labels, suites, rl, domain


def points(value: float) -> str:
    value = round(value, 1)
    return f"{value + 0.0:+.1f}" if value else "+0.0"


def sign(value: float) -> str:
    value = round(value, 1)
    return "+" if value > 0 else "-" if value < 0 else "0"


def p_cell(p: float | None) -> str:
    return "" if p is None else " (<0.001)" if p < 0.001 else f" ({p:.3f})"


def change_cell(moved: tuple[float, float | None] | None) -> str:
    return "–" if moved is None else points(moved[0]) + p_cell(moved[1])


# ------------------------------------------------------------------------------------------ tables


def table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table padded to equal widths, readable as plain text too."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), rule, *map(line, rows)]) + "\n"


def spread(values: list[float]) -> list[str]:
    """mean, standard deviation (n − 1) and min–max of the cells present, in %."""
    if not values:
        return ["–", "–", "–"]
    sd = f"{statistics.stdev(values):.1f}" if len(values) > 1 else "–"
    return [f"{statistics.fmean(values):.1f}", sd, f"{min(values):.1f}–{max(values):.1f}"]


def cells_table(seeded: dict) -> str:
    """(a) every stage × suite cell on each seed, with its spread."""
    labels, suites, _, domain = layout(seeded)
    rows = []
    for label in labels:
        for suite in suites:
            values = {seed: s.score(label, suite) for seed, s in seeded.items()}
            if all(v is None for v in values.values()):
                continue
            own = any(s.own(label, suite) for s in seeded.values())
            shown = [f"{v:.1f}" if v is not None else "–" for v in values.values()]
            present = [v for v in values.values() if v is not None]
            rows.append([label, f"{suite} ({domain[suite]})" + ("*" if own else ""), *shown,
                         *spread(present)])
    seeds = [f"seed {seed}" for seed in seeded]
    return table(["stage", "suite", *seeds, "mean", "sd", "min–max"], rows)


def own_rows(seeded: dict) -> list[tuple[str, str, dict, list[str], str]]:
    """Per RL stage and own-domain suite: ``(stage, suite, seed → change, signs, agreement)``."""
    labels, suites, rl, _ = layout(seeded)
    out = []
    for stage in (x for x in rl if x in labels):
        for suite in suites:
            if not any(s.own(stage, suite) for s in seeded.values()):
                continue
            moved = {seed: s.moved(stage, suite) for seed, s in seeded.items()}
            signs = [sign(m[0]) for m in moved.values() if m is not None]
            agree = "–" if len(signs) < 2 else "yes" if len(set(signs)) == 1 else "no"
            out.append((stage, suite, moved, signs, agree))
    return out


def own_table(seeded: dict) -> str:
    """(b) each RL stage's own-domain change on every seed, its signs and whether they agree."""
    rows = [[stage, suite, *map(change_cell, moved.values()), " ".join(signs) or "–", agree]
            for stage, suite, moved, signs, agree in own_rows(seeded)]
    seeds = [f"seed {seed}" for seed in seeded]
    return table(["RL stage", "own suite", *seeds, "signs", "same sign"], rows)


def significant_drops(moved: list) -> int:
    return sum(m[0] < 0 and m[1] is not None and m[1] < ALPHA for m in moved)


def forgetting_table(seeded: dict) -> str:
    """(c) each RL stage's change on the other domains' suites, per seed."""
    labels, suites, rl, domain = layout(seeded)
    rows = []
    for stage in (x for x in rl if x in labels):
        for suite in suites:
            if any(s.own(stage, suite) for s in seeded.values()):
                continue
            moved = {seed: s.moved(stage, suite) for seed, s in seeded.items()}
            present = [m for m in moved.values() if m is not None]
            if not present:
                continue
            mean = statistics.fmean(m[0] for m in present)
            rows.append([stage, f"{suite} ({domain[suite]})", *map(change_cell, moved.values()),
                         points(mean), points(min(m[0] for m in present)),
                         f"{significant_drops(present)}/{len(present)}"])
    seeds = [f"seed {seed}" for seed in seeded]
    return table(["RL stage", "other suite", *seeds, "mean", "worst", f"drops p<{ALPHA}"], rows)


def repair_rows(seeded: dict) -> list[dict]:
    """Per seed and repair the gate inserted (``gate.on_regression = repair``), once the repair has
    its row: each suite the flagged stage lost (its best earlier row, after the stage, after the
    repair; recovered unless the repair's own gate row flags it again), the stage's own suites
    (after the stage → after the repair, paired) and the suites the repair's row newly flags."""
    out = []
    for seed, s in seeded.items():
        stages = {st.name: st for st in s.run.stages}
        for repair in (st for st in s.run.stages if st.inserted_by and st.name in s.cells):
            stage = stages[repair.inserted_by]
            again = {f["suite"]: f for f in (repair.gate or {}).get("flagged", [])}
            flagged = (stage.gate or {}).get("flagged", [])
            lost_suites = {f["suite"] for f in flagged}
            new = [f for suite, f in again.items() if suite not in lost_suites]
            own = [(x, s.score(stage.name, x), s.moved(repair.name, x))
                   for x in s.cells[stage.name] if s.own(stage.name, x)]
            for lost in flagged:
                suite = lost["suite"]
                out.append({"seed": seed, "stage": stage.name, "suite": suite,
                            "best": 100 * lost["best"], "best_row": lost["best_stage"],
                            "after_stage": 100 * lost["now"], "p": lost["p"],
                            "after_repair": s.score(repair.name, suite),
                            "recovered": suite not in again,
                            "p_again": again[suite]["p"] if suite in again else None,
                            "own": own, "new_flags": new})
    return out


def repairs_table(rows: list[dict]) -> str:
    """(d) what each inserted repair won back, and what the repaired stage kept."""
    lines = []
    for r in rows:
        after = r["after_repair"]
        verdict = (f"still flagged, {points(after - r['best'])}{p_cell(r['p_again'])}"
                   if not r["recovered"] else "above best" if after >= r["best"]
                   else "within noise")
        own = "; ".join(f"{suite} {before:.1f} → {before + moved[0]:.1f}{p_cell(moved[1])}"
                        for suite, before, moved in r["own"] if moved is not None) or "–"
        new = "; ".join(f"{f['suite']} {100 * f['best']:.1f} ({f['best_stage']}) → "
                        f"{100 * f['now']:.1f}{p_cell(f['p'])}" for f in r["new_flags"]) or "–"
        lines.append([str(r["seed"]), r["stage"],
                      f"{r['suite']} {r['best']:.1f} ({r['best_row']}) → {r['after_stage']:.1f}"
                      f"{p_cell(r['p'])} → {after:.1f}", verdict, own, new])
    return table(["seed", "flagged stage", "flagged suite: best → after the stage → after its "
                  "repair", "after the repair, vs best", "the stage's own: after it → after "
                  "its repair", "newly flagged after the repair"], lines)


# ------------------------------------------------------------------------------------------ output


def status_table(out: Path, name: str, states: list[dict], seeded: dict) -> str:
    rows = []
    for st in states:
        run = seeded[st["seed"]].run if st["seed"] in seeded else None
        rows.append([str(st["seed"]), str(run_dir(out, st["seed"], name)), st["state"],
                     "–" if st["rc"] is None else str(st["rc"]),
                     "–" if st["wall_s"] is None else f"{st['wall_s']:.0f}", stage_seconds(run),
                     str(len(run.history)) if run else "0", run.git_sha[:12] if run else "–"])
    return table(["seed", "run", "state", "exit", "wall s", "stages s", "gate rows", "git"], rows)


def stage_seconds(run) -> str:
    """The stages' own seconds from the manifest (gates excluded), also for a run made earlier."""
    seconds = [s.seconds for s in run.stages if s.seconds is not None] if run else []
    return f"{sum(seconds):.0f}" if seconds else "–"


def report_text(args, name: str, states: list[dict], seeded: dict) -> str:
    seeds = " ".join(map(str, args.seeds))
    parts = [f"# Cascade across seeds: {name} ({args.recipe}), seeds {seeds}", "",
             status_table(args.out, name, states, seeded)]
    if not seeded:
        return "\n".join(parts + ["No run has a gate row yet.", ""])
    parts += ["## (a) avg@K in % per stage and suite", "",
              "sd = standard deviation over seeds (n − 1); * = the stage's own domain.", "",
              cells_table(seeded),
              "## (b) Own-domain change of each RL stage", "",
              "points vs the row before (paired p-value); signs per seed in seed order.", "",
              own_table(seeded),
              "## (c) Each RL stage's change on the other domains", "",
              "points vs the row before (paired p-value); worst = the lowest over seeds;",
              f"drops p<{ALPHA} = seeds on which the suite fell significantly.", "",
              forgetting_table(seeded)]
    disagree = sorted({stage for stage, _, _, _, agree in own_rows(seeded) if agree == "no"})
    parts += [f"Own-domain signs disagree across seeds: {', '.join(disagree) or 'none'}.", ""]
    repairs = repair_rows(seeded)
    if repairs:
        back = sum(r["recovered"] for r in repairs)
        parts += ["## (d) Repairs the gate inserted", "",
                  "avg@K in %; (p) = the gate's paired test against the best earlier row, and for "
                  "the stage's own suites against the stage's row.", "", repairs_table(repairs),
                  f"Flagged suites recovered to within noise of their best row: {back} of "
                  f"{len(repairs)}.", ""]
    return "\n".join(parts)


def result_row(args, name: str, states: list[dict], seeded: dict) -> dict:
    own = [{"stage": stage, "suite": suite, "agree": agree,
            "change": {str(seed): None if m is None else round(m[0], 2)
                       for seed, m in moved.items()}}
           for stage, suite, moved, _, agree in own_rows(seeded)]
    cells = {str(seed): {label: {suite: round(100 * v[0], 2) for suite, v in row.items()}
                         for label, row in s.run.history} for seed, s in seeded.items()}
    repairs = [{k: r[k] for k in ("seed", "stage", "suite", "recovered")}
               for r in repair_rows(seeded)]
    return {"recipe": args.recipe, "name": name, "seeds": args.seeds, "runs": states,
            "cells": cells, "own_domain": own, "repairs": repairs,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="Cascade.seed values")
    p.add_argument("--recipe", default="recipes/tiny.py", help="recipes/NAME.py[:fn]")
    p.add_argument("--out", type=Path, default=Path("runs/seeds"), help="OUT/seedN/NAME per seed")
    p.add_argument("--no-run", action="store_true", help="only read the runs already in OUT "
                   "(no results row)")
    args = p.parse_args(argv)
    from nemo_cascade.tooling.cli import load_recipe

    name = load_recipe(args.recipe).name
    states = [ensure_run(args.recipe, args.out, s, name) if not args.no_run else
              {"seed": s, "state": run_state(run_dir(args.out, s, name)), "rc": None,
               "wall_s": None} for s in args.seeds]
    seeded = {seed: Seeded(run) for seed, run in load_runs(args.out, args.seeds, name).items()}
    text = report_text(args, name, states, seeded)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "seeds.md").write_text(text)
    if not args.no_run:  # a re-read of the same runs is not a new measurement
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        with RESULTS.open("a") as f:
            f.write(json.dumps(result_row(args, name, states, seeded)) + "\n")
    print(text, flush=True)
    return 0 if all(st["state"] in ("done", "stopped") for st in states) else 1


if __name__ == "__main__":
    sys.exit(main())
