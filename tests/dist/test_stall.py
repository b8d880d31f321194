"""The stall watchdog under torchrun (2 gloo processes, runtime/heartbeat.py): one rank hangs in its
generation, the other waits for it in a collective. Both stop within seconds, not at the
collective's timeout: each dumps its threads' stacks, rank 0 names the stalled rank and phase in one
line, and the job exits 75 (the code the Slurm batch shells requeue on) through the launcher
`nemo-cascade run` uses."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.launch import ROOT, free_port

pytestmark = pytest.mark.dist
WORKER = Path(__file__).with_name("stall_worker.py")


def test_a_stalled_rank_is_named_and_every_rank_stops(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "NEMO_CASCADE_STALL_AT": "generate@1"}
    cmd = [sys.executable, "-m", "nemo_cascade.tooling.torchrun", "--nproc_per_node=2",
           f"--master_port={free_port()}", str(WORKER), str(tmp_path)]
    started = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    took = time.monotonic() - started
    out = proc.stdout + proc.stderr
    assert proc.returncode == 75, out[-5000:]
    lines = [t for t in proc.stderr.splitlines() if t.startswith("nemo-cascade: error: ")]
    assert len(lines) == 1, out[-5000:]
    assert lines[0].startswith("nemo-cascade: error: rank 1 on ") and \
        "stalled in phase generate (stage math, step 1 of 2)" in lines[0], lines[0]
    for rank in (0, 1):  # every rank's threads, the stalled one's stuck at the fault point
        assert f"stalled in generate — every thread of rank {rank} " in out, out[-5000:]
    assert "in stall_point" in out and "in barrier" in out, out[-5000:]
    assert took < 120, f"{took:.0f} s: the collective's timeout (30 min) must not end the job"
