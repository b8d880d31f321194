"""Requests to save and stop at the end of the current step, as a file in the run folder.

A Slurm job learns of its time limit from a signal to its batch shell (``--signal=B:USR1@N``);
torchrun would die of that signal, and a container or another node cannot be reached by it. So the
signal is turned into a file, ``RUN_DIR/stop_request``: the batch shell writes it (slurm/common.sh),
and so does ``nemo-cascade run`` when it gets SIGUSR1 itself. Every rank sees the run folder (a
shared filesystem on clusters). After each training step the ranks agree on whether it is there
(:meth:`nemo_cascade.cascade.saves.Saves.after`); the stage then saves a checkpoint and the run ends
with :class:`StopRequested`, so that a requeued job loses no finished step; inside a GRPO step the
engine stops generating (:class:`GenerationStopped`) and the step's finished groups are kept
(runtime/step_rollouts.py). This is Megatron-LM's exit-signal handling (save at the end of the
iteration in which the signal arrived), carried by the filesystem instead of the signal.

A request is removed when a run starts (the batch shell before ``srun``, the CLI before torchrun):
an old one must not stop the run that resumes.
"""
from __future__ import annotations

from pathlib import Path

FILE_NAME = "stop_request"
EXIT_CODE = 75
"""The worker's exit status after a requested stop (EX_TEMPFAIL: "try again later"): the run is
resumable."""


class StopRequested(Exception):
    """The run stopped at a step boundary on request; its state is saved and the same command
    continues it."""


class GenerationStopped(Exception):
    """The rollout engine dropped its outstanding requests because a stop became due (``generate``'s
    ``should_stop``); the groups that had finished were handed to its ``on_group``."""


def path(run_dir: str | Path) -> Path:
    return Path(run_dir) / FILE_NAME


def requested(run_dir: str | Path) -> bool:
    return path(run_dir).exists()


def request(run_dir: str | Path, reason: str) -> None:
    """Ask the run in ``run_dir`` to save and stop after its current step."""
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    path(run_dir).write_text(reason.rstrip("\n") + "\n")


def clear(run_dir: str | Path) -> None:
    path(run_dir).unlink(missing_ok=True)


def reason(run_dir: str | Path) -> str:
    try:
        return path(run_dir).read_text().strip() or "a stop request"
    except OSError:
        return "a stop request"
