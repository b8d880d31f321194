"""Processes of a run never outlive the process that started them.

torchrun starts each worker in a session of its own (``start_new_session``), so neither a terminal's
SIGHUP nor a signal to the launcher's process group reaches it, and a launcher killed by ``kill -9``
or the out-of-memory killer — which no handler sees — leaves its workers training, re-parented to
init, writing into the run folder. Every link of the chain is therefore tied to its parent with
Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``, which the kernel delivers however the
parent died):

- a worker (``nemo-cascade run``/``eval`` under torchrun) gets SIGKILL when its torchrun agent dies
  (:func:`bind_worker`) — the agent is the launcher itself for ``nemo-cascade run`` on one machine,
  and ``python -m nemo_cascade.tooling.torchrun`` on each Slurm node. SIGKILL, not SIGTERM: the
  worker may be inside a collective or a library that handles SIGTERM its own way; a SIGKILLed run
  resumes from its last checkpoint like any other kill (docs/reliability.md);
- torchrun on a Slurm node, and a launch task's ``nemo-cascade run``, get SIGTERM when their parent
  dies, so they stop their own workers first.

The signal fires when the parent *thread* that forked the child exits: torchrun's agent starts its
workers from its main thread, so the signal means the agent's death. Setting it races with the
parent's death (it may die between the fork and the prctl), so right after setting it the child
checks that its parent is still the process that started it (:data:`AGENT_PID_ENV`) and exits
otherwise.

A worker's own children close the chain themselves: the reward workers exit when their pipe to the
worker closes (rewards/workers.py), served models get the parent-death signal (rewards/serve.py),
sandboxed programs ``bwrap --die-with-parent`` (rewards/sandbox.py).
"""
from __future__ import annotations

import os
import signal
import sys
import ctypes

AGENT_PID_ENV = "NEMO_CASCADE_AGENT_PID"
"""Set by nemo_cascade.tooling.torchrun to its own PID before it starts workers: the parent a worker
expects."""
_PR_SET_PDEATHSIG = 1


def _load_prctl():
    # Looked up at import, not in a preexec_fn: importing between fork and exec can deadlock on a
    # lock held by another thread of the parent.
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_prctl = _load_prctl() if sys.platform.startswith("linux") else None


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Have the kernel send ``sig`` to this process when its parent (thread) dies. False where not
    supported (not Linux): the caller carries on without it."""
    return _prctl is not None and _prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


def bind_worker() -> None:
    """In a torchrun worker: die (SIGKILL) with the agent; if the agent died before this ran, exit
    now."""
    if not die_with_parent(signal.SIGKILL):
        return
    expected = os.environ.get(AGENT_PID_ENV, "")
    if expected.isdigit() and os.getppid() != int(expected):
        print(f"nemo-cascade: the launcher (pid {expected}) ended before this worker started; "
              "exiting", file=sys.stderr)
        os._exit(128 + signal.SIGKILL)


def die_with_parent_preexec() -> None:
    """``preexec_fn`` for a child that must stop (SIGTERM) when the process starting it dies."""
    die_with_parent(signal.SIGTERM)
