"""Exact resume (issue 5, DESIGN.md "Failure modes": resume that skips or repeats data after a dataset switch).

A two-stage cascade (SFT → math GRPO that carries SFT's optimizer, with KL to the stage's start and
epoch-level prompt filtering over a small prompt set, so a resume crosses epochs) runs once uninterrupted, and
once SIGKILLed three times — in the middle of SFT once its first checkpoint is on disk, in GRPO's first step
(before its first checkpoint: the restart must carry SFT's kept optimizer state), and in the middle of GRPO
once a checkpoint of it is on disk — and re-run after each kill.
On CPU the resumed run's final weights must equal the uninterrupted run's bit for bit, and so must every
logged reward and loss (same data order, same samples).
"""
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def recipe():
    from nemo_cascade.config import GRPO, Actor, Boundary, Cascade, Data, Model, Parallel, Rollout, Stage

    sft = Stage(name="sft", kind="sft", data=Data(source="synthetic:arithmetic", split="train", seed=1), steps=30,
                sft_batch_size=32, sft_max_tokens=96, checkpoint_every=10,
                actor=Actor(lr=2e-3, min_lr=2e-4, lr_schedule="cosine", warmup_steps=5))
    math = Stage(name="math", kind="grpo", domain="math", steps=6, checkpoint_every=3,
                 boundary=Boundary(optimizer="carry"),
                 data=Data(source="synthetic:arithmetic", split="test", size=16, seed=2),
                 actor=Actor(lr=1e-4, lr_schedule="cosine", warmup_steps=1),
                 rollout=Rollout(max_prompt_tokens=64, max_response_tokens=24),
                 grpo=GRPO(group_size=4, prompts_per_step=8, kl_coef=0.01, epoch_filter=True))
    return Cascade(name="resume", model=Model(build="tiny-qwen3"), parallel=Parallel(micro_batch_size=32),
                   stages=(sft, math), keep_checkpoints=2)


def _cmd(root):
    return [sys.executable, "-m", "nemo_cascade.cli", "run", f"{__file__}:recipe", f"run_root={root}"]


def _run(root):
    proc = subprocess.run(_cmd(root), capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return proc


def _kill_when(root, ready, what: str, timeout: float = 600) -> None:
    """Start the cascade and SIGKILL its whole process group as soon as ``ready()`` holds."""
    proc = subprocess.Popen(_cmd(root), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    deadline = time.monotonic() + timeout
    try:
        while not ready():
            assert proc.poll() is None, f"the run ended (rc {proc.returncode}) before {what}"
            assert time.monotonic() < deadline, f"no {what} after {timeout} s"
            time.sleep(0.1)
    finally:
        _kill_tree(proc)


def _kill_tree(proc) -> None:
    """SIGKILL the launcher and every descendant, as a node failure would: torchrun starts its workers in
    sessions of their own, so killing the launcher's process group alone would leave the worker training."""
    import psutil

    family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    for p in family:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    proc.wait()
    psutil.wait_procs(family, timeout=30)


def _checkpointed(stage_dir: Path):
    return lambda: any((p / "meta.json").is_file() for p in (stage_dir / "checkpoint").glob("step_*")
                       if not p.name.endswith(".tmp"))


def _status(run):
    return {k: v["status"] for k, v in json.loads((run / "manifest.json").read_text())["stages"].items()}


def _metrics(run, stage):
    return [{k: v for k, v in json.loads(line).items() if not k.startswith("time/") and k not in
             ("tokens_per_s", "sync_mb_per_s")}
            for line in (run / "stages" / stage / "metrics.jsonl").read_text().splitlines()]


def test_killed_and_resumed_cascade_equals_uninterrupted(tmp_path):
    straight, broken = tmp_path / "straight", tmp_path / "broken"
    _run(straight)
    run = broken / "resume"
    _kill_when(broken, _checkpointed(run / "stages/0-sft"), "an SFT checkpoint")
    assert _status(run) == {"sft": "running", "math": "pending"}
    math_log = run / "stages/1-math/metrics.jsonl"
    _kill_when(broken, lambda: math_log.is_file() and math_log.read_text().count("\n") >= 1, "a math step")
    assert _status(run) == {"sft": "done", "math": "running"}
    assert (run / "stages/0-sft/checkpoint").is_dir(), "SFT keeps its final optimizer state for the carry"
    _kill_when(broken, _checkpointed(run / "stages/1-math"), "a math checkpoint")
    proc = _run(broken)
    assert "stage sft: skipped (done)" in proc.stderr
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["stages"]["math"]["resumed_from"], "the math stage must have resumed from a checkpoint"

    a, b = straight / "resume", run
    for stage in ("0-sft", "1-math"):
        assert _metrics(a, stage) == _metrics(b, stage), f"{stage}: the resumed run logged other numbers"
        assert (a / "stages" / stage / "hf" / "model.safetensors").read_bytes() == \
            (b / "stages" / stage / "hf" / "model.safetensors").read_bytes(), f"{stage}: weights differ"
        assert not (b / "stages" / stage / "checkpoint").exists(), "finished stages' checkpoints are removed"
