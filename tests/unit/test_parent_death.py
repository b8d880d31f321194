"""Workers never outlive their launcher (nemo_cascade/runtime/parent_death.py): a process that binds
itself as a torchrun worker dies when its parent is SIGKILLed, even in a session of its own; one
whose parent is already gone exits at once; a worker's SIGKILL is named as out-of-memory when the
kernel's OOM count rose."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nemo_cascade.tooling import torchrun

ROOT = Path(__file__).resolve().parents[2]
# The launcher stand-in: starts a "worker" in a new session (as torchrun does), prints its PID,
# waits forever.
PARENT = """
import os, subprocess, sys, time
env = dict(os.environ, NEMO_CASCADE_AGENT_PID=str(os.getpid()))
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], env=env, start_new_session=True)
print(child.pid, flush=True)
time.sleep(600)
"""
WORKER = ("from nemo_cascade.runtime import parent_death; parent_death.bind_worker(); import time; "
          "time.sleep(600)")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("bind", [True, False], ids=["bound", "unbound control"])
def test_a_bound_worker_dies_with_its_sigkilled_launcher(bind):
    worker = WORKER if bind else "import time; time.sleep(600)"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    parent = subprocess.Popen([sys.executable, "-c", PARENT, worker], stdout=subprocess.PIPE,
                              text=True, env=env)
    child = int(parent.stdout.readline())
    try:
        time.sleep(1.0 if bind else 0.2)  # the worker has bound itself
        assert _alive(child)
        parent.kill()
        parent.wait()
        assert _wait_gone(child, 5.0) is bind, "re-parented to init, the unbound one keeps running"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_worker_whose_launcher_is_already_gone_exits():
    env = dict(os.environ, PYTHONPATH=str(ROOT), NEMO_CASCADE_AGENT_PID=str(2 ** 22 + 1))
    proc = subprocess.run([sys.executable, "-c", WORKER], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 128 + signal.SIGKILL
    assert proc.stderr.strip() == (
        f"nemo-cascade: the launcher (pid {2 ** 22 + 1}) ended before this worker "
        "started; exiting")


def test_a_sigkill_while_the_oom_killer_ran_is_named(tmp_path):
    vmstat = tmp_path / "vmstat"
    vmstat.write_text("pgfault 10\noom_kill 3\n")
    assert torchrun.oom_kills(str(vmstat)) == 3
    assert torchrun.oom_kills(str(tmp_path / "none")) is None
    assert torchrun.killed_why("SIGKILL", 3, 3) == "SIGKILL"
    assert torchrun.killed_why("SIGKILL", 3, None) == "SIGKILL"
    assert torchrun.killed_why("SIGSEGV", 3, 4) == "SIGSEGV"
    assert torchrun.killed_why("SIGKILL", 3, 4) == (
        "SIGKILL, most likely by the kernel's out-of-memory killer "
        "(1 kill counted in /proc/vmstat meanwhile)")
