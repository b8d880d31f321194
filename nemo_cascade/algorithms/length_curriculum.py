"""Which response-length phase a GRPO stage is in (§4.5.2, T17–T19), and when it moves to the next.

Phases run back to back. A phase ends after its ``steps`` steps or, with ``until_clip_ratio`` set,
as soon as the clip ratio (the share of a step's samples truncated at the phase's budget) averaged
over its last :data:`CLIP_RATIO_WINDOW` steps is at most that value — the paper's "until clip-ratio
reaches 10%" read as the ratio falling to 10 % as the model learns to fit the budget
(docs/recipes.md, "Ambiguities, decided"). The stage ends when its last phase ends. Without
``until_clip_ratio`` the phase of a step is a function of the step alone (``config.phase_at``); with
it, the boundaries so far are state, saved with the stage's checkpoints.
"""
from __future__ import annotations

from typing import Optional

from .. import config
from ..data.loader import DataError

CLIP_RATIO_WINDOW = 5
"""Steps the clip ratio is averaged over before it can end a phase: one step's share of 1,024
samples moves by a few points from batch to batch, and a phase should not end on one lucky batch."""


class LengthCurriculum:
    """``at()`` the phase in force for the next step; ``record(step, clip_ratio)`` after each
    step."""

    def __init__(self, stage: config.Stage):
        self.phases = config.length_phases(stage)
        # the step each phase began at, so far (one more entry once the last ends)
        self.starts = [0]
        # the current phase's last clip ratios (at most CLIP_RATIO_WINDOW)
        self.recent: list[float] = []

    @property
    def finished(self) -> bool:
        return len(self.starts) > len(self.phases)

    def at(self) -> tuple[int, config.LengthPhase]:
        """``(index, phase)`` for the next step."""
        k = len(self.starts) - 1
        return k, self.phases[k]

    def record(self, step: int, clip_ratio: float) -> None:
        """Step ``step`` ran in the current phase with ``clip_ratio``; end the phase if it is
        over."""
        k, phase = self.at()
        self.recent = (self.recent + [float(clip_ratio)])[-CLIP_RATIO_WINDOW:]
        full = step + 1 - self.starts[k] >= phase.steps
        clipped_little = (phase.until_clip_ratio > 0 and len(self.recent) == CLIP_RATIO_WINDOW
                          and sum(self.recent) / CLIP_RATIO_WINDOW <= phase.until_clip_ratio)
        if full or clipped_little:
            self.starts.append(step + 1)
            self.recent = []

    def state_dict(self) -> dict:
        return {"starts": list(self.starts), "recent": list(self.recent)}

    def begin(self, step: int, state: Optional[dict]) -> None:
        """The stage starts (or resumes) at ``step``: restore ``state`` (:meth:`state_dict`, saved
        with the checkpoint) or, without it (a checkpoint of phases that all run their steps),
        derive it from ``step``."""
        if state is None:
            self.starts, end = [0], 0
            for phase in self.phases:
                end += phase.steps
                if end > step:
                    break
                self.starts.append(end)
            self.recent = []
            return
        starts = [int(s) for s in state["starts"]]
        if not (starts and starts[0] == 0 and len(starts) <= len(self.phases) + 1
                and starts == sorted(starts)
                and starts[-1] <= step):
            raise DataError(f"resume: length-curriculum state {state!r:.120} does not fit the "
                            f"stage's {len(self.phases)} phases at step {step}")
        self.starts, self.recent = starts, [float(r) for r in state["recent"]][-CLIP_RATIO_WINDOW:]


__all__ = ["LengthCurriculum", "CLIP_RATIO_WINDOW"]
