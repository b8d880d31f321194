"""Start a job of its own from a test: a script under torchrun on a free loopback port, or any
command in an environment without this process's rendezvous (shared by every tier)."""
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


RENDEZVOUS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
              "TORCHELASTIC_RUN_ID")
"""What torchrun, or an in-process actor test before, puts in the environment: a CLI or bench
started with it would join that process group (or bind its port) instead of making its own."""


def job_env(*dropped: str, **extra: str) -> dict[str, str]:
    """This process's environment for a job of its own: without :data:`RENDEZVOUS` and the
    variables ``dropped`` (a fault point a test sets for one run only), with ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in (*RENDEZVOUS, *dropped)}
    return {**env, **extra}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(script: Path, nproc: int, *args: str,
             timeout: int = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
           f"--master_port={free_port()}", str(script), *map(str, args)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
