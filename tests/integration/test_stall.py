"""A rank that stalls in each phase of a run (docs/reliability.md, "A stalled rank"): the stall
watchdog (heartbeat.py) ends the run within seconds of the phase's limit, not at the collective's
timeout: one console line naming the rank and phase, every thread's stack in the rank's log, exit 75
(the code the Slurm batch shells requeue on). Run again after each, the run resumes, and it ends
with the uninterrupted run's weights and logged numbers, bit for bit.

A reduced cascade — SFT, then math GRPO, the gate on one suite — is stalled in turn
(``NEMO_CASCADE_STALL_AT``, faults.py) in each phase: the gate's base row, an SFT step, an SFT
checkpoint, and a GRPO step's scoring (the groups finished so far are written first), weight push
and generation."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launch import job_env

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
STALLS = (
    ("gate:1", "the gate's base row"),
    ("train:5", "SFT's 5th step, after its checkpoint of step 3"),
    ("save:1", "SFT's checkpoint of step 7"),
    ("score:1", "math's first scoring, after SFT and its gate row"),
    ("sync:1", "math's first weight push"),
    ("generate:2", "math's second generation"),
)
"""(NEMO_CASCADE_STALL_AT, where the run is then), in the order the runs reach them; the
uninterrupted run shows that each phase is entered."""
PHASES = ("gate", "train", "save", "generate", "score", "sync")
LIMIT_MINUTES = 0.5
"""Start-up on 2 cores (imports, the actor, the engine) is the longest gap between beats: about
15 s."""


def recipe():
    from nemo_cascade.config import (GRPO, Actor, Cascade, Data, Gate, Model, Parallel, Rollout,
                                     Stage)

    sft = Stage(name="sft", kind="sft",
                data=Data(source="synthetic:arithmetic", split="train", seed=1),
                steps=12, checkpoint_every=4, sft_batch_size=16, sft_max_tokens=64,
                actor=Actor(lr=1e-3))
    # every step updates (and pushes) even when 12 SFT steps leave all answers wrong
    math = Stage(name="math", kind="grpo", domain="math", steps=4, checkpoint_every=2,
                 data=Data(source="synthetic:arithmetic", split="test", size=16, seed=2),
                 actor=Actor(lr=1e-4),
                 rollout=Rollout(max_prompt_tokens=64, max_response_tokens=16),
                 grpo=GRPO(group_size=4, prompts_per_step=4,
                           drop_zero_variance_groups=False))
    return Cascade(name="stall", model=Model(build="tiny-qwen3"),
                   parallel=Parallel(micro_batch_size=16), stages=(sft, math),
                   gate=Gate(suites=("tiny-math",), limit=8, samples=1))


def _run(root: Path, stall: str = "") -> subprocess.CompletedProcess:
    env = job_env("NEMO_CASCADE_STALL_AT")
    if stall:
        env["NEMO_CASCADE_STALL_AT"] = stall
    cmd = [sys.executable, "-m", "nemo_cascade.tooling.cli", "run", f"{__file__}:recipe",
           f"run_root={root}", f"parallel.stall_minutes={LIMIT_MINUTES}",
           "rollout_checkpoint_seconds=0"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)


def _weights(run: Path, stage: str) -> bytes:
    return (run / "stages" / stage / "hf/model.safetensors").read_bytes()


def _metrics(run: Path, stage: str) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if not k.startswith("time/") and k not in
             ("tokens_per_s", "sync_mb_per_s")}
            for line in (run / "stages" / stage / "metrics.jsonl").read_text().splitlines()]


def test_a_stall_in_every_phase_is_named_and_the_resumed_run_equals_the_uninterrupted_one(tmp_path):
    straight = _run(tmp_path / "straight")
    assert straight.returncode == 0, straight.stderr[-4000:]
    beats = json.loads((tmp_path / "straight/stall/heartbeats/rank0.json").read_text())
    visits, advances = beats["visits"], beats["advances"]
    assert all(visits.get(phase) for phase in PHASES), visits
    # the long phases beat within: each engine step (answers of up to 16 tokens), each micro-batch
    # (one a step: 12 SFT steps, 4 GRPO steps)
    assert advances["generate"] >= 8 * visits["generate"], beats
    assert advances["train"] >= 12 + 4, beats
    log = tmp_path / "broken/stall/logs/rank0.log"
    for stall, where in STALLS:
        proc = _run(tmp_path / "broken", stall)
        said = f"{stall} ({where}): rc {proc.returncode}: {proc.stderr[-4000:]}"
        assert proc.returncode == 75, said
        last = proc.stderr.rstrip().splitlines()[-1]
        phase = stall.split(":")[0]
        assert last.startswith("nemo-cascade: error: rank 0 on "), said
        assert f"stalled in phase {phase}" in last, said
        assert "Traceback" not in proc.stderr
        dumped = log.read_text().rsplit("=== stall watchdog", 1)[-1]
        assert f"stopping; rank 0 stalled in {phase}" in dumped, dumped[-3000:]
        assert "in stall_point" in dumped, dumped[-3000:]
    end = _run(tmp_path / "broken")
    assert end.returncode == 0, end.stderr[-4000:]
    a, b = tmp_path / "straight/stall", tmp_path / "broken/stall"
    for stage in ("0-sft", "1-math"):
        assert _weights(a, stage) == _weights(b, stage), stage
        assert _metrics(a, stage) == _metrics(b, stage), stage
