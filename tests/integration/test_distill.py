"""Repair on demand in a real cascade (docs/distill.md): SFT, then a GRPO stage with a step far too
large, which the gate flags (gate.on_regression = repair); the gate inserts a distill stage that
pulls the student back toward the best row. The student's reverse KL to its teacher falls, the
manifest and report record the insertion and the teacher, and a retrain of the inserted stage
killed inside it resumes (the stage list rebuilt from the manifest) to the first run's bits."""
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launch import job_env

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SFT_STEPS = 60
BLUNDER_STEPS = 2
KILLED_AT = 5
"""The repair step (1-based) the kill lands in: after its checkpoint of step 3 (index 2)."""


def recipe():
    from nemo_cascade.config import (
        GRPO,
        Actor,
        Cascade,
        Data,
        Gate,
        Model,
        Parallel,
        Repair,
        Rollout,
        Stage,
    )

    sft = Stage(
        name="sft",
        kind="sft",
        data=Data(source="synthetic:arithmetic", split="train", seed=1),
        steps=SFT_STEPS,
        sft_batch_size=32,
        sft_max_tokens=96,
        actor=Actor(lr=2e-3, min_lr=2e-4, lr_schedule="cosine", warmup_steps=5),
    )
    # a GRPO step far too large: the gate flags its own domain, and inserts the repair
    blunder = Stage(
        name="math",
        kind="grpo",
        domain="math",
        steps=BLUNDER_STEPS,
        checkpoint_every=3,
        data=Data(source="synthetic:arithmetic", split="train", seed=3),
        actor=Actor(lr=3e-2),
        rollout=Rollout(max_prompt_tokens=96, max_response_tokens=24),
        grpo=GRPO(group_size=4, prompts_per_step=8),
    )
    gate = Gate(suites=("tiny-math",), samples=2, limit=64, min_drop=0.0, alpha=0.2,
                on_regression="repair", repair=Repair(steps=6, lr=1e-3))
    return Cascade(
        name="distill",
        model=Model(build="tiny-qwen3"),
        parallel=Parallel(micro_batch_size=32),
        stages=(sft, blunder),
        gate=gate,
    )


def _run(root: Path, *args: str, crash_at: str = "") -> subprocess.CompletedProcess:
    env = job_env("NEMO_CASCADE_CRASH_AT")
    if crash_at:
        env["NEMO_CASCADE_CRASH_AT"] = crash_at
    cmd = [sys.executable, "-m", "nemo_cascade.tooling.cli", "run", f"{__file__}:recipe",
           f"run_root={root}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)


def _metrics(run: Path) -> list[dict]:
    return [
        {
            k: v
            for k, v in json.loads(line).items()
            if not k.startswith("time/") and k not in ("tokens_per_s", "sync_mb_per_s")
        }
        for line in (run / "stages/2-math-repair/metrics.jsonl").read_text().splitlines()
    ]


def test_the_gate_inserts_a_repair_that_pulls_the_student_back_and_resumes_bit_exact(tmp_path):
    straight = _run(tmp_path / "a")
    assert straight.returncode == 0, straight.stderr[-6000:]
    a = tmp_path / "a" / "distill"
    stages = json.loads((a / "manifest.json").read_text())["stages"]
    assert list(stages) == ["sft", "math", "math-repair"]
    assert stages["math"]["gate"]["repair"] == {"stage": "math-repair", "domains": ["math"]}
    assert stages["math-repair"]["teachers"] == {
        "math": {"source": "best", "folder": str(a / "stages/0-sft/hf"), "row": "0-sft"}
    }
    written = json.loads((a / "config.json").read_text())["stages"]
    assert [s["name"] for s in written] == list(stages)
    assert "stage math: inserted stage math-repair (distill: math=best)" in straight.stderr
    assert "1 teacher(s)" in straight.stderr and "MB of frozen weights per rank" in straight.stderr
    report = (a / "report.md").read_text()
    assert "- `math`: repair stage `math-repair` inserted for math" in report
    taught = "- `math-repair` (inserted by the gate after `math`): math ← `best` (row `0-sft`)"
    assert taught in report
    rows = _metrics(a)
    kl = [r["reverse_kl"] for r in rows]
    assert len(rows) == 6 and kl[0] > 0.5, kl  # the blunder moved the student far from its best row
    assert kl[-1] < 0.85 * kl[0], kl  # and distillation pulls it back
    assert all(
        r["logprob_gap"] < 0.05 for r in rows
    ), "the engine samples the weights being trained"
    assert all(r["groups_dropped"] == 0 for r in rows), "every group carries the teacher's signal"

    # the inserted stage trained again from a copy of the run: the recipe names no such stage, the
    # manifest does
    b = tmp_path / "b"
    shutil.copytree(tmp_path / "a", b)
    again = ("--stage", "math-repair", "--retrain")
    killed = _run(b, *again, crash_at=f"train:{KILLED_AT}")
    assert killed.returncode == 128 + signal.SIGKILL, killed.stderr[-4000:]
    resumed = _run(b, *again)
    assert resumed.returncode == 0, resumed.stderr[-6000:]
    assert "stage math-repair: resumed at step 3 of 6" in resumed.stderr, resumed.stderr[-3000:]
    b = b / "distill"
    assert _metrics(b) == rows
    assert (b / "stages/2-math-repair/hf/model.safetensors").read_bytes() == (
        a / "stages/2-math-repair/hf/model.safetensors"
    ).read_bytes()
