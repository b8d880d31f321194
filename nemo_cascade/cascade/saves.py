"""A stage's resumable state over a job's life: checkpoints, rollout checkpoints, stop requests, the
deadline.
docs/reliability.md tells the whole story; in short, a stage saves a checkpoint every
``Stage.checkpoint_every`` steps and every ``Cascade.checkpoint_every_minutes``, its GRPO steps
write their finished groups as they go (step_rollouts.py), and it stops — saving first — on a stop
request (runtime/stop_request.py) or when the job's end is so near that only the save still fits
(deadline.py). A stop inside a step saves the state the step began with and keeps the step's groups,
so the resumed step generates only what is missing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from nemo_cascade import checkpoint
from nemo_cascade.runtime import ranks, stop_request
from nemo_cascade.runtime.deadline import Deadline
from nemo_cascade.runtime.step_rollouts import StepRollouts

LOOK_EVERY_SECONDS = 1.0
"""The stop-request file is looked at no more often than this by one rank (a stat on a shared
filesystem per few engine steps of every rank would load its metadata server for nothing)."""


@dataclass
class Saves:
    """A stage's resumable checkpoints (checkpoint/) under ``root``, the newest ``keep`` kept:
    every ``every`` steps, once ``every_minutes`` of wall time have passed since the last save,
    and when a stop is due (a request, or the ``deadline``: the run then ends after the save)."""

    root: Path
    every: int
    keep: int
    resume_from: Path | None = None
    every_minutes: float = 0.0
    run_dir: Path | None = None
    """Where a stop request appears (None: requests are not watched)."""
    deadline: Deadline | None = None
    """When the job ends (None: no end watched)."""
    rollouts: StepRollouts | None = None
    """The GRPO steps' rollout checkpoints (None: none are written)."""
    saved_at: float = field(
        default_factory=lambda: time.monotonic()
    )  # looked up at call time: tests set the clock
    saved_step: int = -1
    _looked: tuple[float, bool] = (float("-inf"), False)

    def resume(self, actor, restore_data) -> int:
        """Load the newest checkpoint (weights, optimizer, scheduler, RNG; the data position through
        ``restore_data``); returns the step to continue from (0 without one)."""
        if self.resume_from is None:
            return 0
        step, state = checkpoint.load(self.resume_from, actor)
        restore_data(state["data"])
        if self.deadline is not None:  # the save time the job before measured
            self.deadline.measured_save(state.get("save_seconds", 0.0))
        self.saved_step = step
        return step + 1

    def stop_due(self, work_seconds: float = 0.0) -> bool:
        """This rank's view (callers agree over ranks): a stop was requested, or ``work_seconds``
        more of work would leave too little time to save before the job's end."""
        if self.deadline is not None and self.deadline.due(work_seconds):
            return True
        if self.run_dir is None:
            return False
        at, seen = self._looked
        if time.monotonic() - at >= LOOK_EVERY_SECONDS:
            self._looked = at, seen = time.monotonic(), stop_request.requested(self.run_dir)
        return seen

    def stop_reason(self) -> str:
        """Why the stop is due, for the run's last line: ``on request (…)`` or ``before the job's
        end (…)``."""
        if self.run_dir is not None and stop_request.requested(self.run_dir):
            return f"on request ({stop_request.reason(self.run_dir)})"
        if self.deadline is not None and self.deadline.end is not None:
            end = time.strftime("%F %T", time.localtime(self.deadline.end))
            return f"before the job's end at {end}"
        return "on request"

    def after(
        self,
        step: int,
        total: int,
        actor,
        data_state: dict,
        stage: str = "",
        next_step_seconds: float = 0.0,
    ) -> None:
        """After step ``step``: save if a save is due; raise StopRequested (after saving) when a
        stop is due — also when a next step of ``next_step_seconds`` (one that cannot stop
        midway) would end too late. Every rank calls it and all take the same decision: the wall
        clock is rank 0's, a stop any rank's."""
        timed = (
            bool(self.every_minutes) and time.monotonic() - self.saved_at >= 60 * self.every_minutes
        )
        self._looked = (float("-inf"), False)  # between steps: look at the file now
        parts = ranks.gather_shares([(timed, self.stop_due(next_step_seconds))])
        timed, stop = parts[0][0], any(p[1] for p in parts)
        by_steps = bool(self.every) and (step + 1) % self.every == 0
        # The last step's state is the stage's export: a save there only serves a stop before the
        # export.
        if stop or ((by_steps or timed) and step + 1 < total):
            self._save(step, actor, data_state)
        if stop:
            raise stop_request.StopRequested(
                f"stopped {self.stop_reason()} after step {step} of stage {stage}; "
                f"state saved in {self.root / f'step_{step:06d}'}; "
                "run the same command again to continue"
            )

    def _save(self, step: int, actor, data_state: dict, rng: dict | None = None) -> Path:
        started = time.monotonic()
        measured = self.deadline.save_seconds if self.deadline is not None else 0.0
        path = checkpoint.save(
            self.root,
            step,
            actor,
            {"data": data_state, "save_seconds": measured},
            keep=self.keep,
            rng=rng,
        )
        self.saved_at, self.saved_step = time.monotonic(), step
        if self.deadline is not None:
            self.deadline.measured_save(ranks.most_over_ranks(int(self.saved_at - started) + 1))
        if self.rollouts is not None:
            self.rollouts.remove_through(step)
        return path

    def before_stop(self, step: int, start: int, actor, data_state: dict, rng: dict) -> str:
        """Step ``step`` cannot finish (a stop inside it, or its reward server is gone): save the
        state after step ``step - 1`` — ``data_state`` and ``rng`` as they were when ``step``
        began — unless a checkpoint of it exists already. A resume then repeats ``step`` exactly
        (with the groups it saved, step_rollouts.py); the stop loses no finished step. Returns
        where the state is."""
        if (
            step == start
        ):  # nothing finished since the checkpoint this run resumed from (or since the start)
            return (
                f"resumes from {self.resume_from}"
                if self.resume_from
                else "nothing to save before step 0"
            )
        path = self.root / f"step_{step - 1:06d}"
        if self.saved_step != step - 1:  # no save after step - 1 happened
            path = self._save(step - 1, actor, data_state, rng)
        return f"state after step {step - 1} saved in {path}"
