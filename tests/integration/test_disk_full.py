"""A full disk during a run (docs/reliability.md): the run's file system, a size-limited tmpfs,
fills while a checkpoint is written, or just before each of the other writers writes: a GRPO
step's scored groups, a metrics line, an export, the gate's finished suite, the report. The command
ends with one line naming the file system, the writer and what to do (exit 2, no traceback on the
console); nothing half-written is taken, and once there is room the same command resumes and ends
with the uninterrupted run's weights, bit for bit. Skipped where tmpfs cannot be mounted (not
root)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nemo_cascade.runtime import faults

from tests.launch import job_env

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
    env = job_env()
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
    assert f"{writing} (in storage.torch_save)" in errors[0], errors[0]
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


def _metrics(stage: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if not k.startswith("time/") and k not in
             ("tokens_per_s", "sync_mb_per_s")}
            for line in (stage / "metrics.jsonl").read_text().splitlines()]


def _scores(row: Path) -> dict:
    suites = json.loads((row / "eval.json").read_text())["suites"]
    return {name: suite["metrics"] for name, suite in suites.items()}


def _run_grpo(root: Path, fill: str = "") -> subprocess.CompletedProcess:
    env = job_env(faults.FILL_ENV)
    if fill:
        env[faults.FILL_ENV] = fill
    cmd = [sys.executable, "-m", "nemo_cascade.tooling.cli", "run", f"{__file__}:grpo_recipe",
           f"run_root={root}", "rollout_checkpoint_seconds=0"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)


FILLS = (
    ("*/1-math/rollouts/*", "step_rollouts.write_part", "a GRPO step's first scored groups"),
    ("*/1-math/metrics.jsonl", "metrics.log", "math's first metrics line"),
    ("*/1-math/hf", "hf_io.write_shard", "math's export"),
    ("*/1-math/eval_partial/*.json", "row_progress.save_suite", "the gate's finished suite"),
    ("*/report.png", "report.render_png", "the report's plot"),
)
"""(NEMO_CASCADE_FILL_AT: the file about to be written, the writer named in the line, what it
is), in the order the runs reach them."""


def test_a_disk_that_fills_before_each_writer_loses_nothing(tmp_path):
    """The disk fills just before each writer of a run with a GRPO stage and the gate writes
    (faults.fill_point: a real file takes the space), in turn, the run resumed in between with the
    filler gone. Each run ends with one line naming the writer, exit 2; the last one ends as an
    uninterrupted run, bit for bit."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or not _mount(disk, 96):
        pytest.skip("cannot mount a size-limited tmpfs here (needs root)")
    try:
        for fill, writer, what in FILLS:
            proc = _run_grpo(disk, fill)
            (disk / faults.FILLER).unlink(missing_ok=True)
            said = f"{what} ({fill}): rc {proc.returncode}: {proc.stderr[-4000:]}"
            assert proc.returncode == 2, said
            errors = [t for t in proc.stderr.splitlines() if t.startswith("nemo-cascade: error:")]
            assert len(errors) == 1 and "Traceback" not in proc.stderr, said
            assert "no space left on device writing " in errors[0], errors[0]
            assert f"(in {writer}): the file system at {disk} has 0 MiB free" in errors[0], said
        end = _run_grpo(disk)
        assert end.returncode == 0, end.stderr[-4000:]
        straight = _run_grpo(tmp_path / "straight")
        assert straight.returncode == 0, straight.stderr[-4000:]
        for stage in ("0-sft", "1-math"):
            a, b = (root / "full-grpo/stages" / stage for root in (tmp_path / "straight", disk))
            weights = "hf/model.safetensors"
            assert (a / weights).read_bytes() == (b / weights).read_bytes(), stage
            assert _scores(a) == _scores(b), stage
            assert _metrics(a) == _metrics(b), stage
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
