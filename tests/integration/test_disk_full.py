"""A full disk during a run (docs/reliability.md): the run's file system, a size-limited tmpfs,
fills while a checkpoint is written. The command ends with one line naming the file system and
what to do (exit 2, no traceback on the console); the half-written checkpoint is not taken, and
once there is room the same command resumes from the newest intact one and ends with the
uninterrupted run's weights, bit for bit. Skipped where tmpfs cannot be mounted (not root)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def recipe():
    from nemo_cascade.config import Actor, Cascade, Data, Model, Parallel, Stage

    data = Data(source="synthetic:arithmetic", split="train", seed=1)
    sft = Stage(name="sft", kind="sft", data=data,
                steps=12, checkpoint_every=4, sft_batch_size=16, sft_max_tokens=64,
                actor=Actor(lr=1e-3))
    # one checkpoint kept: while the second is written the first still holds its place
    return Cascade(name="full", model=Model(build="tiny-qwen3"),
                   parallel=Parallel(micro_batch_size=16), stages=(sft,), keep_checkpoints=1)


def _run(root: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    cmd = [sys.executable, "-m", "nemo_cascade.tooling.cli", "run", f"{__file__}:recipe",
           f"run_root={root}"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)


def _mount(path: Path, mib: int, remount: bool = False) -> bool:
    options = f"{'remount,' if remount else ''}size={mib}m"
    return subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                          capture_output=True).returncode == 0


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    # the base model (3.3 MB) and one checkpoint (weights and Adam moments, 10 MB) fit; the second
    # checkpoint beside the first does not
    if os.geteuid() != 0 or not _mount(disk, 18):
        pytest.skip("cannot mount a size-limited tmpfs here (needs root)")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_a_full_disk_is_one_line_and_the_same_command_resumes_bit_exact(tmp_path, small_disk):
    full = _run(small_disk)
    assert full.returncode == 2, full.stderr[-4000:]
    errors = [line for line in full.stderr.splitlines() if line.startswith("nemo-cascade: error:")]
    assert len(errors) == 1, full.stderr[-4000:]
    assert f"no space left on device writing under {small_disk / 'full'}: the file system at " \
           f"{small_disk} has" in errors[0]
    assert "run the same command again, it resumes from the newest intact checkpoint" in errors[0]
    assert "Traceback" not in full.stderr
    checkpoints = small_disk / "full/stages/0-sft/checkpoint"
    kept = sorted(p.name for p in checkpoints.iterdir())
    assert "step_000003" in kept and not [n for n in kept if n.startswith("step_000007")
                                          and not n.endswith(".tmp")], kept

    assert _mount(small_disk, 64, remount=True)
    resumed = _run(small_disk)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert "stage sft: resumed at step 4 of 12" in resumed.stderr, resumed.stderr[-3000:]
    straight = _run(tmp_path / "straight")
    assert straight.returncode == 0, straight.stderr[-4000:]
    model = "full/stages/0-sft/hf/model.safetensors"
    assert (small_disk / model).read_bytes() == (tmp_path / "straight" / model).read_bytes()
