"""A real Slurm cluster for the slurm tier: tools/local_slurm.sh brings up munge, MariaDB +
slurmdbd, slurmctld and two slurmd nodes on this machine (as root, under a temporary folder, on
ports of its own), once per session, and stops what it started at the end. Where Slurm cannot be had
(not root, no apt-get), the tier is skipped with one line saying why."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from nemo_cascade.runtime.server_token import TOKEN_ENV

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "local_slurm.sh"
VENV_BIN = Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin"
# Not the tool's default: a developer's own local cluster may be running beside the tests (or a
# second test run).
PORT_BASE = os.environ.get("NEMO_CASCADE_TEST_SLURM_PORT_BASE", "26800")
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")


@dataclass
class Cluster:
    dir: Path
    env: dict[str, str]
    """The environment of a client of this cluster (SLURM_CONF, the venv on PATH, no container, CPU
    sizes)."""

    def cmd(self, *argv: str, check: bool = True, env: dict | None = None, cwd: Path = ROOT) -> str:
        proc = subprocess.run(argv, capture_output=True, text=True, env={**self.env, **(env or {})},
                              cwd=cwd, timeout=120)
        if check and proc.returncode:
            raise AssertionError(
                f"{' '.join(argv)}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout

    def sbatch(self, *argv: str, env: dict | None = None) -> str:
        """Submit; returns the job id."""
        return self.cmd("sbatch", "--parsable", *argv, env=env).strip().split(";")[0]

    def state(self, job: str) -> str:
        """The job's state as slurmctld sees it now (squeue), else as accounting recorded it
        (sacct)."""
        out = self.cmd("squeue", "-h", "-j", job, "-o", "%T", check=False).strip()
        if out:
            return out
        out = self.cmd("sacct", "-n", "-X", "-P", "-j", job, "-o", "State", check=False).strip()
        return out.split()[0] if out else "UNKNOWN"

    def wait_done(self, job: str, timeout: float) -> str:
        """Wait until the job has ended; its final state (COMPLETED, FAILED, CANCELLED, ...)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.state(job)
            if state in ENDED:
                return state
            time.sleep(1.0)
        self.cmd("scancel", job, check=False)
        raise AssertionError(
            f"job {job} did not end within {timeout:.0f}s (last state {self.state(job)})")

    def wait_for(self, predicate, timeout: float, what: str, job: str, log: Path, *,
                 running: bool = True) -> None:
        """Wait until ``predicate()`` holds. While ``running``, a job that ends first fails the test
        at once; either failure shows the end of the job's ``log`` (not ten minutes of waiting on a
        job that died)."""
        deadline = time.monotonic() + timeout
        while not predicate():
            state = self.state(job)
            if (running and state in ENDED) or time.monotonic() > deadline:
                why = (f"job {job} ended ({state})" if state in ENDED
                       else f"not within {timeout:.0f}s ({state})")
                tail = (log.read_text(errors="replace")[-3000:] if log.is_file()
                        else f"{log}: not written")
                raise AssertionError(f"{what}: {why}\n{tail}")
            time.sleep(0.5)

    def restarts(self, job: str) -> int:
        return int(self.cmd("scontrol", "show", "job", job, "-o").split("Restarts=")[1].split()[0])


def _skip_reason() -> str:
    if os.geteuid() != 0:
        return "the slurm tier runs Slurm's daemons as root (tools/local_slurm.sh); not root here"
    have = all(shutil.which(x)
               for x in ("slurmctld", "slurmd", "sbatch", "munged", "slurmdbd", "mariadbd"))
    if not have and not shutil.which("apt-get"):
        return ("Slurm is not installed and apt-get is missing "
                "(tools/local_slurm.sh installs Debian's packages)")
    return ""


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "LOCAL_SLURM_PORT_BASE": PORT_BASE}
    proc = subprocess.run(["bash", str(TOOL), "start", str(folder)], capture_output=True, text=True,
                          env=env, timeout=600)
    if proc.returncode:
        logs = "\n".join(f"{p.name}: {p.read_text()[-1500:]}"
                         for p in (folder / "log").glob("*.log"))
        raise AssertionError(f"local_slurm.sh start failed:\n{proc.stderr}\n{logs}")
    client = {k: v for k, v in os.environ.items()
              if not k.startswith(("SLURM_", "NCCL_", "WANDB_", "NEMO_CASCADE_", "TORCHELASTIC_"))}
    client.update(SLURM_CONF=str(folder / "slurm.conf"), PATH=f"{VENV_BIN}:{os.environ['PATH']}",
                  CONTAINER_IMAGE="none", GPUS_PER_NODE="1", WANDB="0", VLLM_CPU_KVCACHE_SPACE="1",
                  DOCTOR="0")
    # the jobs' clients reach the servers the tests start, with their token (tests/conftest.py)
    client[TOKEN_ENV] = os.environ[TOKEN_ENV]
    try:
        yield Cluster(folder, client)
    finally:
        subprocess.run(["bash", str(TOOL), "stop", str(folder)], env=env, timeout=120)
