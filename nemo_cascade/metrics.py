"""Where a stage's numbers go: one ``metrics.jsonl`` line per step (always; tests and reports read it), an
optional Weights & Biases run, a progress bar, and phase timers. Only rank 0 writes."""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from pathlib import Path

from nemo_cascade import ranks


class PhaseTimer:
    """Wall time per named phase of a step (generate / score / logprobs / train / sync)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, phase: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - start

    def as_metrics(self) -> dict[str, float]:
        out = {f"time/{k}": round(v, 4) for k, v in self.seconds.items()}
        out["time/step"] = round(sum(self.seconds.values()), 4)
        return out


class MetricsLog:
    def __init__(self, stage_dir: Path, stage_name: str, total_steps: int, use_wandb: bool = False,
                 run_name: str = "", start_step: int = 0):
        self.main = ranks.is_main()
        self.path = Path(stage_dir) / "metrics.jsonl"
        self.stage = stage_name
        self.bar = None
        self.wandb = None
        if not self.main:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        from tqdm import tqdm

        self.bar = tqdm(total=total_steps, initial=start_step, desc=stage_name, unit="step", dynamic_ncols=True)
        if use_wandb:
            import wandb

            self.wandb = wandb.init(project="nemo-cascade", name=f"{run_name}/{stage_name}", reinit=True)

    def log(self, step: int, metrics: dict, progress: dict | None = None) -> None:
        if not self.main:
            return
        row = {"stage": self.stage, "step": step, **metrics}
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        if self.wandb is not None:
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


def read_metrics(stage_dir: Path) -> list[dict]:
    path = Path(stage_dir) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def summarize(stage_dir: Path, window: int = 10) -> str:
    """One line per stage for the end of a run: how its headline metric moved from the first to the last
    ``window`` steps (GRPO: mean reward; SFT: loss)."""
    rows = read_metrics(stage_dir)
    key = "reward_mean" if rows and "reward_mean" in rows[0] else "loss"
    values = [r[key] for r in rows if key in r]
    if not values:
        return f"{Path(stage_dir).name}: no steps logged"
    n = max(1, min(window, len(values) // 2))
    first, last = sum(values[:n]) / n, sum(values[-n:]) / n
    return f"{Path(stage_dir).name}: {key} {first:.3f} (first {n} steps) -> {last:.3f} (last {n} steps)"
