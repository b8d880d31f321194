"""Crash points: named places where a test makes the process die by SIGKILL, as a node failure
would; and stall points, where it makes a rank hang, as a dead mount or a stuck request would.

A resume is only as good as the worst moment to die, and the interesting moments (half a checkpoint on disk,
a stage marked done but its gate not run) are too short to hit by polling files from outside. So the code
names them, and ``NEMO_CASCADE_CRASH_AT=NAME[:N]`` kills the process the N-th time (default 1) it reaches
point ``NAME`` on any rank. Without the variable a crash point is one dictionary lookup.

The points (tests/integration/test_resume.py kills the tiny cascade at each and checks the resumed run ends
with the uninterrupted run's bits):

=====================  ============================================================================
``generate``           a GRPO step's rollouts are generated, not yet scored or trained on
``train``              an optimizer step is taken, its step not yet logged or checkpointed
``checkpoint.write``   every rank's files of a checkpoint are written, ``meta.json`` and the rename not
``evaluate``           the gate has evaluated one suite of a stage's row, not the others
``stage.done``         a stage is recorded as done, its checkpoints not yet cleaned up nor its gate run
=====================  ============================================================================

``NEMO_CASCADE_STALL_AT=PHASE[:N][@RANK]`` makes rank RANK (default: every rank) sleep for good the
N-th time it enters heartbeat phase PHASE (heartbeat.py: ``generate``, ``score``, ``train``,
``sync``, ``save``, ``gate``, ...), for the stall watchdog to find
(tests/integration/test_stall.py).
"""
from __future__ import annotations

import os
import signal
import time

ENV = "NEMO_CASCADE_CRASH_AT"
STALL_ENV = "NEMO_CASCADE_STALL_AT"
POINTS = ("generate", "train", "checkpoint.write", "evaluate", "stage.done")
_visits: dict[tuple[str, str], int] = {}


def _due(env: str, point: str, known: tuple[str, ...] = ()) -> bool:
    """Whether ``env`` (``NAME[:N][@RANK]``) names ``point``, this rank, and this is its N-th visit
    (default 1); ``known``: the names it may give."""
    spec = os.environ.get(env)
    if not spec:
        return False
    named, _, rank = spec.partition("@")
    name, _, count = named.partition(":")
    if known and name not in known:
        raise ValueError(f"{env}={spec!r}: unknown point {name!r}; expected one of "
                         f"{', '.join(known)}")
    if name != point or (rank and int(rank) != int(os.environ.get("RANK", 0))):
        return False
    _visits[env, point] = _visits.get((env, point), 0) + 1
    return _visits[env, point] == int(count or 1)


def crash_point(name: str) -> None:
    """Die here by SIGKILL if ``NEMO_CASCADE_CRASH_AT`` names this point and this is its N-th
    visit."""
    if _due(ENV, name, POINTS):
        os.kill(os.getpid(), signal.SIGKILL)


def stall_point(phase: str) -> None:
    """Sleep for good if ``NEMO_CASCADE_STALL_AT`` names this phase, this visit and this rank."""
    if _due(STALL_ENV, phase):
        while True:
            time.sleep(3600)
