"""A full disk during a run (docs/reliability.md): the run's file system, a size-limited tmpfs,
fills while a checkpoint is written, while a GRPO step keeps its scored groups, or while the gate
keeps a row's finished suites. The command ends with one line naming the file system and
what to do (exit 2, no traceback on the console); the half-written checkpoint is not taken, and
once there is room the same command resumes from the newest intact one and ends with the
uninterrupted run's weights, bit for bit. Skipped where tmpfs cannot be mounted (not root)."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
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
    writing = f"no space left on device writing under {small_disk / 'full'}"
    assert f"{writing} (in checkpoint._torch_save)" in errors[0], errors[0]
    assert f"): the file system at {small_disk} has" in errors[0]
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


def grpo_recipe():
    """tests/integration/test_stall.py's cascade: SFT, math GRPO keeping each scored group
    (rollout checkpoints), the gate on one suite."""
    from dataclasses import replace

    from tests.integration.test_stall import recipe as stall_recipe

    return replace(stall_recipe(), name="full-grpo")


def _scores(row: Path) -> dict:
    suites = json.loads((row / "eval.json").read_text())["suites"]
    return {name: suite["metrics"] for name, suite in suites.items()}


def _run_grpo(root: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    cmd = [sys.executable, "-m", "nemo_cascade.tooling.cli", "run", f"{__file__}:grpo_recipe",
           f"run_root={root}", "rollout_checkpoint_seconds=0"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)


def _filled_when(appears: Path, disk: Path) -> threading.Thread:
    """A thread that fills ``disk`` to its last byte as soon as ``appears`` exists."""
    def fill() -> None:
        deadline = time.monotonic() + 300
        while not appears.exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        with open(disk / "filler", "ab", buffering=0) as f:
            for size in (2**20, 2**12, 1):
                with contextlib.suppress(OSError):
                    while True:
                        f.write(b"\0" * size)

    thread = threading.Thread(target=fill, daemon=True)
    thread.start()
    return thread


def _filled_run(disk: Path, appears: Path) -> str:
    """Run until the disk, filled once ``appears`` exists, stops it: its one line, which names
    where the run's code met the full disk."""
    filler = _filled_when(appears, disk)
    proc = _run_grpo(disk)
    filler.join(timeout=5)
    (disk / "filler").unlink(missing_ok=True)
    assert proc.returncode == 2, proc.stderr[-4000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("nemo-cascade: error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-4000:]
    assert "no space left on device writing " in errors[0], errors[0]
    return errors[0]


def test_a_disk_that_fills_while_a_step_keeps_its_rollouts_and_while_the_gate_writes(tmp_path):
    """The disk fills as soon as math GRPO's first scored group is kept on disk, and, in the run
    after, as soon as the gate has kept a suite of math's row; the next writer meets it (measured:
    the metrics line, then the report's plot). Each run ends with one line, and the last one ends as
    an uninterrupted run, bit for bit."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or not _mount(disk, 96):
        pytest.skip("cannot mount a size-limited tmpfs here (needs root)")
    try:
        run = disk / "full-grpo"
        lines = [_filled_run(disk, run / "stages/1-math/rollouts"),
                 _filled_run(disk, run / "stages/1-math/eval_partial")]
        print("\n".join(lines))  # which writers met the full disk (pytest -s shows them)
        end = _run_grpo(disk)
        assert end.returncode == 0, end.stderr[-4000:]
        straight = _run_grpo(tmp_path / "straight")
        assert straight.returncode == 0, straight.stderr[-4000:]
        for stage in ("0-sft", "1-math"):
            a, b = (root / "full-grpo/stages" / stage for root in (tmp_path / "straight", disk))
            weights = "hf/model.safetensors"
            assert (a / weights).read_bytes() == (b / weights).read_bytes(), stage
            assert _scores(a) == _scores(b), stage
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
