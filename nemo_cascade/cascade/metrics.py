"""Where a stage's numbers go: one ``metrics.jsonl`` line per step (always; tests and reports read
it), an optional Weights & Biases run, progress on the console, and phase timers. Only rank 0
writes.

A stage that resumes from a checkpoint (a requeued Slurm job, a re-run) continues both logs:
``metrics.jsonl`` loses the lines the interrupted run wrote past the checkpoint, so it ends up as an
uninterrupted run's, and the W&B run is the same one (its id is kept in the stage directory,
``wandb_id``)."""
from __future__ import annotations

import json
import os
import secrets
import time
from contextlib import contextmanager
from pathlib import Path

from nemo_cascade.runtime import console, faults, heartbeat, ranks
from nemo_cascade.data.rows import DataError, read_jsonl
from nemo_cascade.errors import CascadeError


class PhaseTimer:
    """Wall time per named phase of a step (generate / score / logprobs / train / sync); each is
    also the rank's heartbeat phase (runtime/heartbeat.py)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, phase: str):
        start = time.perf_counter()
        try:
            with heartbeat.phase(phase):
                yield
        finally:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - start

    def as_metrics(self) -> dict[str, float]:
        out = {f"time/{k}": round(v, 4) for k, v in self.seconds.items()}
        out["time/step"] = round(sum(self.seconds.values()), 4)
        return out


class MetricsLog:
    """The logs of one stage, opened at ``start_step``: 0 for a stage that starts (over), else the
    step after the checkpoint it resumes from."""

    def __init__(self, stage_dir: Path, stage_name: str, total_steps: int, use_wandb: bool = False,
                 run_name: str = "", start_step: int = 0):
        self.main = ranks.is_main()
        self.path = Path(stage_dir) / "metrics.jsonl"
        self.stage = stage_name
        self.bar = None
        self.wandb = None
        self.wandb_from = 0  # steps below it are already in the (resumed) W&B run
        self.total = total_steps
        heartbeat.where(f"stage {stage_name}, step {start_step + 1} of {total_steps}")
        if not self.main:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keep_before(self.path, start_step)
        self.bar = console.progress(total_steps, stage_name, "step", initial=start_step)
        if use_wandb:
            self.wandb = wandb_run(Path(stage_dir), f"{run_name}/{stage_name}",
                                   resume=start_step > 0)
            self.wandb_from = self.wandb.starting_step

    def log(self, step: int, metrics: dict, progress: dict | None = None) -> None:
        done = step + 1
        heartbeat.where(f"stage {self.stage}, step {done + 1} of {self.total}" if done < self.total
                        else f"stage {self.stage}, after its last step")
        if not self.main:
            return
        row = {"stage": self.stage, "step": step, **metrics}
        faults.fill_point(self.path)
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        # A resumed W&B run already holds the steps the interrupted run logged past its checkpoint;
        # W&B drops steps below its counter anyway, but with a warning each.
        if self.wandb is not None and step >= self.wandb_from:
            self.wandb.log({f"{self.stage}/{k}": v for k, v in metrics.items()
                            if isinstance(v, (int, float))}, step=step)
        if self.bar is not None:
            self.bar.update(1)
            if progress:
                self.bar.set_postfix({k: f"{v:.3g}" for k, v in progress.items()})

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.wandb is not None:
            self.wandb.finish()


def keep_before(path: Path, step: int) -> None:
    """A stage that (re)starts at ``step`` logs it and the steps after it again: drop the lines an
    interrupted run wrote from there on, so that the file equals an uninterrupted run's."""
    if not path.is_file():
        return
    rows = [row for row in metric_rows(path) if row["step"] < step]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))  # as log() wrote them


WANDB_ID = "wandb_id"
"""The stage directory's file holding its W&B run id."""


def wandb_run(stage_dir: Path, name: str, resume: bool):
    """The stage's W&B run. A resuming stage logs on into the run whose id it kept in
    ``stage_dir/wandb_id`` (``resume="allow"``: W&B continues that run, or creates it when it has
    none of that id — offline, or never synced). A stage that starts over gets a new id: W&B keeps a
    run's steps increasing and would drop the restarted steps. The id is random rather than derived
    from the run's name or config: a run folder deleted and run again, or the same recipe run
    elsewhere, must not append to an old W&B run."""
    import wandb

    path = stage_dir / WANDB_ID
    run_id = path.read_text().strip() if resume and path.is_file() else ""
    if not run_id:
        run_id = secrets.token_hex(8)  # hex: valid in a W&B id (letters, digits, - and _)
        path.write_text(run_id + "\n")
    # project: an argument would override WANDB_PROJECT (slurm/env.sh); reinit: a stage that died in
    # this process (an exception past the stage loop) left its run open
    return wandb.init(project=os.environ.get("WANDB_PROJECT") or "nemo-cascade", name=name,
                      id=run_id,
                      resume="allow", reinit="finish_previous")


def metric_rows(path: Path, *, missing_ok: bool = False,
                error: type[CascadeError] = DataError) -> list[dict]:
    """The one reader of a metrics.jsonl: the logged steps in order (``[]`` for a missing file if
    ``missing_ok``). An unterminated last line that is not JSON is a step cut off by a crash
    mid-write (log() ends every line with a newline): it is dropped, so a crashed run still resumes
    and reports. Any other bad line is a one-line ``error`` naming ``FILE:LINE``."""
    path = Path(path)
    if missing_ok and not path.is_file():
        return []
    bad: list[tuple[int, str]] = []
    rows = [row for _, row in read_jsonl(path, bad=bad, error=error)]
    if bad:
        text = path.read_bytes()
        cut_off = not text.endswith(b"\n") and bad[-1][0] == text.count(b"\n") + 1
        if len(bad) > 1 or not cut_off:
            raise error(bad[0][1])
    return rows


def read_metrics(stage_dir: Path) -> list[dict]:
    return metric_rows(Path(stage_dir) / "metrics.jsonl")


def summarize(stage_dir: Path, window: int = 10) -> str:
    """One line per stage for the end of a run: how its headline metric moved from the first to the
    last ``window`` steps (GRPO: mean reward; SFT: loss)."""
    rows = read_metrics(stage_dir)
    key = "reward_mean" if rows and "reward_mean" in rows[0] else "loss"
    values = [r[key] for r in rows if key in r]
    if not values:
        return f"{Path(stage_dir).name}: no steps logged"
    n = max(1, min(window, len(values) // 2))
    first, last = sum(values[:n]) / n, sum(values[-n:]) / n
    return (f"{Path(stage_dir).name}: {key} {first:.3f} (first {n} steps) -> {last:.3f} (last {n} "
            "steps)")
