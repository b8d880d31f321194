"""A GRPO step longer than its Slurm job (docs/launch.md "Requeue and resume"): jobs of a 2-minute time limit run
an RLHF step whose scoring (a reward model behind a proxy that answers each request after 12 s: 8 groups, 96 s)
outlasts what a job has for work. Each job's run reads its end (squeue, in the batch shell), stops inside the
step before it, keeping the groups scored so far (rollout checkpoints), and the batch shell requeues the job;
the next job scores only the rest. The chain reaches the end, and its export, every logged number and every gate
score equal an uninterrupted run's bit for bit."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_resume import CuttableProxy, _metrics, _scores
from tests.slurm.conftest import ROOT

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

RECIPE = "tests/slurm/recipes.py:rlhf_in_short_jobs"
DELAY_S = 12.0


@pytest.fixture(scope="module")
def reward_model(tmp_path_factory):
    from tests.integration._remote_helpers import tiny_reward_model_server

    server = tiny_reward_model_server(tmp_path_factory.mktemp("rm"))
    try:
        server.start()
        yield CuttableProxy(int(server.url.rsplit(":", 1)[1]))
    finally:
        server.stop()


def test_a_step_longer_than_its_job_finishes_over_requeues_bit_exact(cluster, reward_model, tmp_path):
    url = f"stages.rlhf.reward.reward_model_url={reward_model.url}"
    straight = subprocess.run(
        [sys.executable, "-m", "nemo_cascade.tooling.cli", "run", RECIPE, f"run_root={tmp_path / 'straight'}", url],
        capture_output=True, text=True, cwd=ROOT, timeout=900,
        env={k: v for k, v in cluster.env.items() if k != "SLURM_CONF"})
    assert straight.returncode == 0, straight.stderr[-3000:]

    runs = tmp_path / "runs"
    runs.mkdir()
    reward_model.delay = DELAY_S
    try:
        job = cluster.sbatch("--time=2", "--signal=B:USR1@5", "--gpus-per-node=1", f"--output={runs}/job-%j.log",
                             "slurm/cascade_8b.sh", url, "stop_margin_seconds=20", "rollout_checkpoint_seconds=0",
                             env={"RUN_DIR": str(runs), "RECIPE": RECIPE, "RUN_NAME": "short-jobs"})
        state = cluster.wait_done(job, 1200)
    finally:
        reward_model.delay = 0.0
    log = (runs / f"job-{job}.log").read_text(errors="replace")
    assert state == "COMPLETED", log[-4000:]
    assert cluster.restarts(job) >= 1, log[-4000:]
    stops = [line for line in log.splitlines() if "nemo-cascade: stopped before the job's end" in line]
    assert stops and all(" in step 0 of stage rlhf, during generation; " in s for s in stops), log[-4000:]
    assert f"the run stopped before the job's end (exit 75): requeueing job {job} (restart 1 of" in log
    assert "SIGUSR1" not in log, "each job stopped by itself, before the time-limit signal"
    a, b = tmp_path / "straight" / "short-jobs", runs / "short-jobs"
    assert _metrics(a, "0-rlhf") == _metrics(b, "0-rlhf")
    assert (a / "stages/0-rlhf/hf/model.safetensors").read_bytes() == \
        (b / "stages/0-rlhf/hf/model.safetensors").read_bytes()
    assert _scores(a / "base") == _scores(b / "base")
    assert _scores(a / "stages/0-rlhf") == _scores(b / "stages/0-rlhf")
    assert json.loads((b / "manifest.json").read_text())["stages"]["rlhf"]["status"] == "done"
    assert not (b / "stages/0-rlhf/rollouts").exists()
