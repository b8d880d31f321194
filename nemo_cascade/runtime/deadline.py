"""The job's end, and when the run must stop so that its save is done before it.

A Slurm job is killed at its time limit; the signal that warns of it may come late
(``--signal=B:USR1@120`` before a 5-minute save), or never (a site, or a scheduler, that sends
none). So the run reads its job's end time itself — ``NEMO_CASCADE_JOB_END`` (seconds since the
epoch; for other schedulers and for tests), else ``SLURM_JOB_END_TIME`` (Slurm 23.02 and later),
else ``squeue -j $SLURM_JOB_ID -o %e`` — and asks itself to stop once the time left is no more than
its save time plus a margin. The save time is the longest measured (this job's saves, or the one
recorded in the checkpoint it resumed from); the margin covers leaving the process and, before any
save was measured, the save itself (``Cascade.stop_margin_seconds``). docs/reliability.md.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime

from nemo_cascade.errors import CascadeError

ENV = "NEMO_CASCADE_JOB_END"


def job_end_time() -> float | None:
    """This job's end (seconds since the epoch), or None outside a job with a known limit."""
    for name in (ENV, "SLURM_JOB_END_TIME"):
        value = os.environ.get(name, "").strip()
        if value:
            try:
                return float(value)
            except ValueError:
                raise CascadeError(f"{name}={value!r}: expected seconds since the epoch") from None
    job = os.environ.get("SLURM_JOB_ID")
    return _squeue_end(job) if job else None


def _squeue_end(job: str) -> float | None:
    """Slurm's planned end of ``job`` (its local time, as squeue prints it); None if squeue
    cannot say (no limit: ``N/A``, ``Unknown``; no squeue on this node)."""
    try:
        out = subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%e"], capture_output=True, text=True, timeout=60
        ).stdout.strip()
        return datetime.fromisoformat(out.splitlines()[0]).timestamp()
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


@dataclass
class Deadline:
    """When a run that ends at ``end`` (None: no known end) stops: ``save_seconds`` (the longest
    save measured) plus ``margin_seconds`` before it."""

    end: float | None
    margin_seconds: float
    save_seconds: float = 0.0

    def stop_at(self) -> float | None:
        return None if self.end is None else self.end - self.margin_seconds - self.save_seconds

    def due(self, work_seconds: float = 0.0) -> bool:
        """Whether ``work_seconds`` more of work (e.g. a step's update) would leave too little
        time to save."""
        at = self.stop_at()
        return at is not None and time.time() + work_seconds >= at

    def measured_save(self, seconds: float) -> None:
        self.save_seconds = max(self.save_seconds, seconds)

    def describe(self, grace: str = "") -> str:
        """One line for the start of a run: when the job ends and when the run will stop itself."""
        if self.end is None:
            return ("no job end known (not in a Slurm job, NEMO_CASCADE_JOB_END unset): "
                    "stops only on request")
        clock = datetime.fromtimestamp
        save = f"{self.save_seconds:.0f} s measured" if self.save_seconds else "not measured yet"
        return (
            f"job ends {clock(self.end):%F %T}; "
            f"the run saves and stops by {clock(self.stop_at()):%F %T} "
            f"(save {save} + margin {self.margin_seconds:g} s, stop_margin_seconds)"
            + (
                f"; after the time-limit signal the job waits {grace} s (STOP_GRACE)"
                if grace
                else ""
            )
        )
