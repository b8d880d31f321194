"""A distill stage in a real cascade (docs/distill.md): SFT, then on-policy distillation toward the
model the cascade started from (a teacher far from the student, so the signal is large). The
student's reverse KL to its teacher falls, the manifest names the teacher, and a run killed inside
the distill stage resumes to the uninterrupted run's bits (the teacher loaded again from its
folder)."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SFT_STEPS = 20
KILLED_AT = 5
"""The distill step (1-based) the kill lands in: after its checkpoint of step 3 (index 2)."""


def recipe():
    from nemo_cascade.config import (
        GRPO,
        Actor,
        Cascade,
        Data,
        Distill,
        Model,
        Parallel,
        Rollout,
        Stage,
    )

    rl = dict(
        rollout=Rollout(max_prompt_tokens=96, max_response_tokens=24),
        grpo=GRPO(group_size=4, prompts_per_step=8),
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
    repair = Stage(
        name="repair",
        kind="distill",
        domain="math",
        steps=6,
        checkpoint_every=3,
        data=Data(source="synthetic:arithmetic", split="train", seed=3),
        distill=Distill(teachers=("math=base",)),
        actor=Actor(lr=1e-3),
        **rl,
    )
    return Cascade(
        name="distill",
        model=Model(build="tiny-qwen3"),
        parallel=Parallel(micro_batch_size=32),
        stages=(sft, repair),
    )


def _run(root: Path, crash_at: str = "") -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "RANK",
            "WORLD_SIZE",
            "LOCAL_RANK",
            "MASTER_ADDR",
            "MASTER_PORT",
            "NEMO_CASCADE_CRASH_AT",
        )
    }
    if crash_at:
        env["NEMO_CASCADE_CRASH_AT"] = crash_at
    cmd = [
        sys.executable,
        "-m",
        "nemo_cascade.tooling.cli",
        "run",
        f"{__file__}:recipe",
        f"run_root={root}",
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)


def _metrics(run: Path) -> list[dict]:
    return [
        {
            k: v
            for k, v in json.loads(line).items()
            if not k.startswith("time/") and k not in ("tokens_per_s", "sync_mb_per_s")
        }
        for line in (run / "stages/1-repair/metrics.jsonl").read_text().splitlines()
    ]


def test_distill_pulls_the_student_back_and_resumes_bit_exact(tmp_path):
    straight = _run(tmp_path / "a")
    assert straight.returncode == 0, straight.stderr[-6000:]
    a = tmp_path / "a" / "distill"
    manifest = json.loads((a / "manifest.json").read_text())["stages"]["repair"]
    assert manifest["teachers"] == {"math": {"source": "base", "folder": str(a / "base_model")}}
    assert "1 teacher(s)" in straight.stderr and "MB of frozen weights per rank" in straight.stderr
    rows = _metrics(a)
    kl = [r["reverse_kl"] for r in rows]
    assert len(rows) == 6 and kl[0] > 0.5, kl  # SFT moved the student far from its start
    assert sum(kl[-2:]) / 2 < kl[0] / 2, kl  # and distillation pulls it back
    assert all(
        r["logprob_gap"] < 0.05 for r in rows
    ), "the engine samples the weights being trained"
    assert all(r["groups_dropped"] == 0 for r in rows), "every group carries the teacher's signal"

    b = tmp_path / "b"
    killed = _run(b, f"train:{SFT_STEPS + KILLED_AT}")
    assert killed.returncode == 128 + signal.SIGKILL, killed.stderr[-4000:]
    resumed = _run(b)
    assert resumed.returncode == 0, resumed.stderr[-6000:]
    assert "stage repair: resumed at step 3 of 6" in resumed.stderr, resumed.stderr[
        -3000:
    ]  # after step 2
    b = b / "distill"
    assert _metrics(b) == rows
    assert (b / "stages/1-repair/hf/model.safetensors").read_bytes() == (
        a / "stages/1-repair/hf/model.safetensors"
    ).read_bytes()
