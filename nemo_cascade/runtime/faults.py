"""Crash points: named places where a test makes the process die by SIGKILL, as a node failure
would; stall points, where it makes a rank hang, as a dead mount or a stuck request would; and
fill points, where it fills the disk just before a writer writes.

A resume is only as good as the worst moment to die, and the interesting moments (half a checkpoint
on disk, a stage marked done but its gate not run) are too short to hit by polling files from
outside. So the code names them, and ``NEMO_CASCADE_CRASH_AT=NAME[:N]`` kills the process the N-th
time (default 1) it reaches point ``NAME`` on any rank. Without the variable a crash point is one
dictionary lookup.

The points (tests/integration/test_resume.py kills the tiny cascade at each and checks the resumed
run ends with the uninterrupted run's bits):

=====================  =========================================================================
``generate``           a GRPO step's rollouts are generated, not yet scored or trained on
``train``              an optimizer step is taken, its step not yet logged or checkpointed
``checkpoint.write``   every rank's files of a checkpoint are written, ``meta.json`` and the
                       rename not
``evaluate``           the gate has evaluated one suite of a stage's row, not the others
``stage.done``         a stage is recorded as done, its checkpoints not yet cleaned up nor its
                       gate run
=====================  =========================================================================

``NEMO_CASCADE_STALL_AT=PHASE[:N][@RANK]`` makes rank RANK (default: every rank) sleep for good the
N-th time it enters heartbeat phase PHASE (runtime/heartbeat.py: ``generate``, ``score``, ``train``,
``sync``, ``save``, ``gate``, ...), for the stall watchdog to find
(tests/integration/test_stall.py).

``NEMO_CASCADE_FILL_AT=GLOB[:N]`` fills the file system of the N-th file written whose path matches
GLOB (``fnmatch``; writes through ``files.py`` and the metrics line), to its last byte, just before
it is written: a file ``nemo-cascade-filler`` at the file system's mount point takes the space, so
the writer meets a real ENOSPC (tests/integration/test_disk_full.py).
"""
from __future__ import annotations

import contextlib
import fnmatch
import operator
import os
import signal
import time
from pathlib import Path
from typing import Callable

ENV = "NEMO_CASCADE_CRASH_AT"
STALL_ENV = "NEMO_CASCADE_STALL_AT"
FILL_ENV = "NEMO_CASCADE_FILL_AT"
FILLER = "nemo-cascade-filler"
POINTS = ("generate", "train", "checkpoint.write", "evaluate", "stage.done")
_visits: dict[tuple[str, str], int] = {}


def _due(env: str, point: str, known: tuple[str, ...] = (),
         names: Callable[[str, str], bool] = operator.eq) -> bool:
    """Whether ``env`` (``NAME[:N][@RANK]``) names ``point`` (``names(point, NAME)``), this rank,
    and this is the N-th visit (default 1) of a point it names; ``known``: the names it may give."""
    spec = os.environ.get(env)
    if not spec:
        return False
    named, _, rank = spec.partition("@")
    name, _, count = named.partition(":")
    if known and name not in known:
        raise ValueError(f"{env}={spec!r}: unknown point {name!r}; expected one of "
                         f"{', '.join(known)}")
    if not names(point, name) or (rank and int(rank) != int(os.environ.get("RANK", 0))):
        return False
    _visits[env, name] = _visits.get((env, name), 0) + 1
    return _visits[env, name] == int(count or 1)


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


def fill_point(target: str | Path) -> None:
    """Fill the file system that will hold ``target`` if ``NEMO_CASCADE_FILL_AT`` names it (a glob
    over its absolute path) and this is the N-th such write."""
    path = Path(target).absolute()
    if not os.environ.get(FILL_ENV) or not _due(FILL_ENV, str(path), names=fnmatch.fnmatchcase):
        return
    folder = next(p for p in (path, *path.parents) if p.exists())
    mount = next(p for p in (folder, *folder.parents) if os.path.ismount(p))
    with open(mount / FILLER, "ab", buffering=0) as f:
        for size in (2**20, 2**12, 1):  # down to the last byte a page-granular tmpfs still takes
            with contextlib.suppress(OSError):
                while True:
                    f.write(bytes(size))
