"""torchrun in this process, for `nemo-cascade run` on one machine and for slurm/node.sh on each
node of a job.

`python -m nemo_cascade.tooling.torchrun TORCHRUN_ARGS...` is torchrun with the job's outcome said
in one line instead of torchrun's failure report (a launcher traceback and a table, printed once per
node): a worker's user error has printed its own line already; a worker killed by a signal, or the
launcher stopped by one, is named.
"""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
import logging

from nemo_cascade.runtime import parent_death
from nemo_cascade.tooling import worker_log


def run_torchrun(argv: list[str], run_dir: Path | None = None) -> int:
    """torchrun in this process, returning the job's exit code: 0, a failed worker's own code (a
    user error has printed its one line; torchrun's report of the failure — a launcher traceback and
    a table — is left out), or 128 + N for a worker killed by signal N, or the launcher stopped by
    it (Slurm's SIGTERM), said in one line — naming the dead worker's log file when the workers
    write theirs into ``run_dir`` (worker_log.py)."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    # each worker checks it still has this parent
    os.environ[parent_death.AGENT_PID_ENV] = str(os.getpid())
    oom_before = oom_kills()
    try:
        run(parse_args(argv))
    except ChildFailedError as e:
        # A worker that exited by itself is the cause; the others torchrun then stopped by SIGTERM
        # are not.
        own = {r: f for r, f in e.failures.items() if f.exitcode >= 0}
        rank, failure = min((own or e.failures).items())
        if failure.exitcode >= 0:
            return failure.exitcode
        # torchrun has stopped the other ranks by now. On a line of its own: the dead worker's
        # progress bar may have left the cursor mid-line.
        why = killed_why(failure.signal_name(), oom_before, oom_kills())
        where = f" (its output: {worker_log.log_path(run_dir, rank)})" if run_dir else ""
        print(f"\nnemo-cascade: error: rank {rank} (pid {failure.pid}) was killed by {why}{where}; "
              "run the same command again to resume from its last checkpoint", file=sys.stderr)
        return 128 - failure.exitcode
    except SignalException as e:
        print(f"\nnemo-cascade: error: stopped by {signal.Signals(e.sigval).name}; run the same "
              "command again to resume", file=sys.stderr)
        return 128 + int(e.sigval)
    return 0


def oom_kills(vmstat: str = "/proc/vmstat") -> int | None:
    """The kernel's count of processes its out-of-memory killer has killed (``oom_kill`` in
    /proc/vmstat, Linux 4.13+; machine-wide, also inside containers); None where it is not
    available."""
    try:
        with open(vmstat) as f:
            for line in f:
                name, _, value = line.partition(" ")
                if name == "oom_kill":
                    return int(value)
    except (OSError, ValueError):
        pass
    return None


def killed_why(signal_name: str, oom_before: int | None, oom_after: int | None) -> str:
    """Why a worker died of ``signal_name``, for its one line: a SIGKILL while the OOM killer's
    count rose is named as (very likely) out of memory."""
    if (signal_name == "SIGKILL" and oom_before is not None and oom_after is not None
            and oom_after > oom_before):
        n = oom_after - oom_before
        return (f"SIGKILL, most likely by the kernel's out-of-memory killer "
                f"({n} kill{'s' if n > 1 else ''} counted in /proc/vmstat meanwhile)")
    return signal_name


if __name__ == "__main__":
    # On a Slurm node (slurm/node.sh execs this): stop, and so stop the workers, when the step's
    # process dies.
    parent_death.die_with_parent(signal.SIGTERM)
    sys.exit(run_torchrun(sys.argv[1:]))
