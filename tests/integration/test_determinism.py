"""The same stage started in several fresh processes on this machine gives the same bits: every
logged number of its steps (times aside) and every byte of its export. This is what makes a resumed
run equal the uninterrupted one; whatever the CPU family, the process's first computations must take
the same path as any later ones (docs/testing.md, "Tolerances, and what is bit-exact")."""
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launch import job_env

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
RUNS = 4


def start(run_root: Path, *args: str) -> subprocess.Popen:
    """``recipes/tiny.py:math_only`` with ``args`` in a fresh process."""
    cmd = [sys.executable, "-m", "nemo_cascade.tooling.cli", "run", "recipes/tiny.py:math_only",
           *args, f"run_root={run_root}"]
    # a fresh job, not this process's group (an actor test's)
    env = job_env()
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env)


def _timed(metric: str) -> bool:
    """A wall-clock metric: phase times and rates."""
    return metric.startswith("time/") or metric.endswith("_per_s")


def finished(proc: subprocess.Popen, stage: Path) -> tuple[list[dict], str]:
    """A run's stage once it ended: its logged numbers (times and rates aside) and the hash of
    its HF export."""
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-4000:]
    rows = [{k: v for k, v in json.loads(line).items() if not _timed(k)}
            for line in (stage / "metrics.jsonl").read_text().splitlines()]
    digest = hashlib.sha256()
    for f in sorted((stage / "hf").glob("*.safetensors")):
        digest.update(f.read_bytes())
    return rows, digest.hexdigest()


def assert_same(rows: list[dict], export: str, want_rows: list[dict], want_export: str, run: str):
    for step, (row, want) in enumerate(zip(rows, want_rows)):
        assert row == want, f"{run}, step {step}: {row} differs from the first run's {want}"
    assert export == want_export, f"{run}: the export differs from the first run's"


def test_fresh_processes_give_the_same_bits(tmp_path):
    """The SFT stage, 3 steps, run after run."""
    args = ("--stage", "sft", "stages.sft.steps=3")
    stage = Path("tiny-math", "stages", "0-sft")
    first_rows, first_export = finished(start(tmp_path / "0", *args), tmp_path / "0" / stage)
    assert len(first_rows) == 3 and first_rows[0]["loss"] != first_rows[1]["loss"]
    for k in range(1, RUNS):
        rows, export = finished(start(tmp_path / str(k), *args), tmp_path / str(k) / stage)
        assert_same(rows, export, first_rows, first_export, f"run {k}")


def test_two_grpo_runs_side_by_side_give_the_same_bits(tmp_path):
    """Two GRPO stages at once, each one's threads slowed by the other's: the timing of every
    thread differs between them. The backward of the packed rows' attention once added some key
    gradients with atomic adds from both threads (``fused_attention.gather_rows``), and such a pair
    then differed from its second or third step in nearly every try."""
    args = ("stages.sft.steps=2", "stages.math.steps=5", "gate.suites=")
    stage = Path("tiny-math", "stages", "1-math")
    procs = [start(tmp_path / str(k), *args) for k in range(2)]
    try:
        (first_rows, first_export), (rows, export) = (
            finished(proc, tmp_path / str(k) / stage) for k, proc in enumerate(procs))
    finally:
        for proc in procs:
            proc.kill()  # a no-op for one that ended; the other's workers die with it
    assert len(first_rows) == 5
    assert_same(rows, export, first_rows, first_export, "the second run")
