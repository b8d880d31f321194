"""A process that gathered Python objects over gloo ends without aborting (runtime/process_exit.py).

Ended by the interpreter's own exit, the worker below aborted in 8 of 20 processes on a quiet
2-core machine ("terminate called without an active exception", docs/testing.md); ended as
``nemo-cascade`` ends, none may.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launch import ROOT, free_port

pytestmark = pytest.mark.dist
WORKER = Path(__file__).with_name("exit_worker.py")
PAIRS = 12


def run_pair(mode: str) -> list[subprocess.CompletedProcess]:
    port = free_port()
    procs = []
    for rank in range(2):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "RANK": str(rank),
               "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        procs.append(subprocess.Popen([sys.executable, str(WORKER), mode], env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    done = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return done


def test_gloo_ranks_end_cleanly_every_time():
    for attempt in range(PAIRS):
        for proc in run_pair("end"):
            assert proc.returncode == 0 and "terminate called" not in proc.stderr, (
                f"attempt {attempt}: exit status {proc.returncode}\n{proc.stderr[-2000:]}")
            assert proc.stdout.strip().endswith("done")  # the output printed before the end is kept
