"""A GRPO step longer than its Slurm job (docs/launch.md "Requeue and resume"): jobs of a 2-minute
time limit run an RLHF step whose scoring (a reward model behind a proxy that answers each request
after 10 s: 8 groups, 80 s) outlasts what a job has for work (2 minutes less start-up, the base row
of the gate and a 50 s stop margin — Slurm sends its time-limit signal up to half a minute early,
and the run must stop before it). Each job's run reads its end (squeue, in the batch shell), stops
inside the step before it, keeping the groups scored so far (rollout checkpoints), and the batch
shell requeues the job; the next job scores only the rest. The chain reaches the end, and its
export, every logged number and every gate score equal an uninterrupted run's bit for bit. The same
for a gate row longer than a job: its finished chunks are kept, and the row the next job finishes
equals the uninterrupted one."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.integration._remote_helpers import RM_MAX_LEN
from tests.integration.test_resume import _metrics, _scores, served_reward_model
from tests.slurm.conftest import ROOT
from tests.tolerance import Net, bound

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

RECIPE = "tests/slurm/recipes.py:rlhf_in_short_jobs"
DELAY_S = 10.0


@pytest.fixture(scope="module")
def rm_folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("rm")


@pytest.fixture(scope="module")
def reward_model(rm_folder):
    with served_reward_model(rm_folder) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def straight(cluster, reward_model, tmp_path_factory) -> Path:
    """The uninterrupted run (no Slurm, no delay): the reference."""
    root = tmp_path_factory.mktemp("straight")
    _straight_run(cluster, RECIPE, root, f"stages.rlhf.reward.reward_model_url={reward_model.url}")
    return root / "short-jobs"


def _straight_run(cluster, recipe: str, root: Path, *overrides: str) -> None:
    argv = ["run", recipe, f"run_root={root}", *overrides]
    proc = subprocess.run(
        [sys.executable, "-m", "nemo_cascade.tooling.cli", *argv], capture_output=True, text=True,
        cwd=ROOT, timeout=900, env={k: v for k, v in cluster.env.items() if k != "SLURM_CONF"})
    assert proc.returncode == 0, proc.stderr[-3000:]


def _equal_within(a, b, limit: float) -> bool:
    """Equal, but for floats within ``limit``: nested dicts and lists compared leaf by leaf."""
    if isinstance(a, float) or isinstance(b, float):
        return (isinstance(a, (int, float)) and isinstance(b, (int, float))
                and abs(a - b) <= limit)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal_within(a[k], b[k], limit) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal_within(x, y, limit) for x, y in zip(a, b))
    return a == b


def _equal_to_straight(a: Path, b: Path) -> None:
    assert _metrics(a, "0-rlhf") == _metrics(b, "0-rlhf")
    assert (a / "stages/0-rlhf/hf/model.safetensors").read_bytes() == \
        (b / "stages/0-rlhf/hf/model.safetensors").read_bytes()
    assert _scores(a / "base") == _scores(b / "base")
    assert _scores(a / "stages/0-rlhf") == _scores(b / "stages/0-rlhf")
    assert json.loads((b / "manifest.json").read_text())["stages"]["rlhf"]["status"] == "done"
    assert not (b / "stages/0-rlhf/rollouts").exists()


def test_a_step_longer_than_its_job_finishes_over_requeues_bit_exact(cluster, reward_model,
                                                                     straight, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    reward_model.delay = 20.0  # 160 s of scoring: three jobs of about a minute's work each
    try:
        job = cluster.sbatch("--time=2", "--signal=B:USR1@5", "--gpus-per-node=1",
                             f"--output={runs}/job-%j.log", "slurm/cascade_8b.sh",
                             f"stages.rlhf.reward.reward_model_url={reward_model.url}",
                             "stop_margin_seconds=50", "rollout_checkpoint_seconds=0",
                             env={"RUN_DIR": str(runs), "RECIPE": RECIPE, "RUN_NAME": "short-jobs"})
        state = cluster.wait_done(job, 1200)
    finally:
        reward_model.delay = 0.0
    log = (runs / f"job-{job}.log").read_text(errors="replace")
    assert state == "COMPLETED", log[-4000:]
    assert cluster.restarts(job) >= 2, log[-4000:]
    stops = [line for line in log.splitlines()
             if line.startswith("nemo-cascade: stopped before the job's end at")]
    assert len(stops) >= 2 and all(" in step 0 of stage rlhf, during generation; " in s
                                   for s in stops), log[-4000:]
    assert (f"the run stopped before the job's end (exit 75): requeueing job {job} "
            "(restart 2 of") in log
    assert "SIGUSR1" not in log, "each job stopped by itself, before the time-limit signal"
    _equal_to_straight(straight, runs / "short-jobs")


def test_a_launched_stage_job_saves_before_its_end_and_is_requeued(cluster, reward_model,
                                                                   straight, tmp_path):
    """The same through `nemo-cascade launch --executor slurm`: nemo-run's batch shell hands the
    job's end to the run and requeues the job when it stops (exit 75); the launcher sees the job
    succeed in the end."""
    reward_model.delay = DELAY_S
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "nemo_cascade.tooling.cli", "launch", RECIPE, "--executor",
             "slurm", "--watch", f"stages.rlhf.reward.reward_model_url={reward_model.url}",
             "stop_margin_seconds=50", "rollout_checkpoint_seconds=0"],
            capture_output=True, text=True, cwd=ROOT, timeout=1200,
            env={**cluster.env, "ACCOUNT": "acct", "RUN_DIR": str(tmp_path / "runs"),
                 "TIME": "00:02:00", "NEMORUN_HOME": str(tmp_path / "nemorun-home")})
    finally:
        reward_model.delay = 0.0
    (tmp_path / "launch.out").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "every job succeeded (rlhf)" in proc.stdout
    jobs = [line.split("|")[0]
            for line in cluster.cmd("sacct", "-n", "-X", "-P", "-o", "JobID,JobName").splitlines()
            if line.endswith("|nemo-cascade-short-jobs.rlhf")]
    assert len(jobs) == 1 and cluster.restarts(jobs[0]) >= 1, proc.stdout
    logs = "".join(p.read_text(errors="replace")
                   for p in (tmp_path / "nemorun-home").rglob("log-*.out"))
    assert ("nemo-cascade: stopped before the job's end at" in logs
            and " in step 0 of stage rlhf, " in logs)
    _equal_to_straight(straight, tmp_path / "runs" / "short-jobs")


def test_a_gate_row_longer_than_its_job_resumes_mid_suite(cluster, reward_model, rm_folder,
                                                          tmp_path):
    """Each chunk of 8 items waits 12 s for its reward-model scores: the row (8 chunks and the
    reference answers, about 110 s) outlasts what a 2-minute job has for work (about a minute: the
    stop is due 50 s before the end), so a job stops between chunks of the suite; the next scores
    only the chunks not kept."""
    recipe = "tests/slurm/recipes.py:gate_in_short_jobs"
    rm = f"gate.reward_model_url={reward_model.url}"
    _straight_run(cluster, recipe, tmp_path / "straight", rm)
    runs = tmp_path / "runs"
    runs.mkdir()
    reward_model.delay = 12.0
    try:
        job = cluster.sbatch("--time=2", "--signal=B:USR1@5", "--gpus-per-node=1",
                             f"--output={runs}/job-%j.log", "slurm/cascade_8b.sh", rm,
                             "stop_margin_seconds=50",
                             env={"RUN_DIR": str(runs), "RECIPE": recipe, "RUN_NAME": "short-gate"})
        state = cluster.wait_done(job, 1200)
    finally:
        reward_model.delay = 0.0
    log = (runs / f"job-{job}.log").read_text(errors="replace")
    assert state == "COMPLETED", log[-4000:]
    assert cluster.restarts(job) >= 1, log[-4000:]
    stops = [line for line in log.splitlines()
             if line.startswith("nemo-cascade: stopped before the job's end")]
    mid_suite = [s for s in stops if " in the gate of 0-sft, suite tiny-rlhf, after " in s
                 and " after 0 of " not in s]
    assert mid_suite, log[-4000:]
    a, b = tmp_path / "straight" / "short-gate", runs / "short-gate"
    assert _metrics(a, "0-sft") == _metrics(b, "0-sft")
    rows = [json.loads((run / "stages/0-sft/eval.json").read_text())["suites"] for run in (a, b)]
    records = [{name: suite["records"] for name, suite in row.items()} for row in rows]
    # Within tests/tolerance.py's bound for one forward pass, not bit for bit: before the servers
    # ran unsplit attention (docs/rewards.md, "A score depends on its input alone") a served RM's
    # score of the same text moved in the last bits between calls. Unsplit, no trial has shown it
    # since, but not enough runs of this test have been made to hold it to the bit.
    limit = bound(torch.float32, Net.of(rm_folder, RM_MAX_LEN).forward_terms())
    assert _equal_within(records[0], records[1], limit), (records[0], records[1])
    assert _equal_within(_scores(a / "stages/0-sft"), _scores(b / "stages/0-sft"), limit)
    assert not (b / "stages/0-sft/eval_partial").exists()


def test_a_stalled_reward_request_is_named_and_the_requeued_job_finishes_bit_exact(
        cluster, reward_model, straight, tmp_path):
    """The reward model stops answering (its requests hang) while the first job scores RLHF's first
    step: the stall watchdog (runtime/heartbeat.py, a minute here) names rank 0 and its phase in one
    line, the run exits 75 and the batch shell requeues the job, long before the collective's or the
    request's timeout. The server answers again; the requeued job finishes the run, equal to the
    uninterrupted one."""
    runs = tmp_path / "runs"
    runs.mkdir()
    log_file = runs / "stall.log"

    def said() -> bool:
        return log_file.is_file() and "stalled in phase" in log_file.read_text(errors="replace")

    reward_model.delay = 3600.0  # every /classify hangs
    try:
        job = cluster.sbatch("--time=10", "--gpus-per-node=1", f"--output={log_file}",
                             "slurm/cascade_8b.sh",
                             f"stages.rlhf.reward.reward_model_url={reward_model.url}",
                             "parallel.stall_minutes=1", "rollout_checkpoint_seconds=0",
                             env={"RUN_DIR": str(runs), "RECIPE": RECIPE, "RUN_NAME": "short-jobs"})
        cluster.wait_for(said, 900, "the stall's line", job, log_file)
    finally:
        reward_model.delay = 0.0
    state = cluster.wait_done(job, 1200)
    log = log_file.read_text(errors="replace")
    assert state == "COMPLETED", log[-4000:]
    assert cluster.restarts(job) >= 1, log[-4000:]
    [line] = [t for t in log.splitlines()
              if "stalled in phase" in t and t.startswith("nemo-cascade: error: ")]
    assert line.startswith("nemo-cascade: error: rank 0 on "), line
    assert "stage rlhf, step 1 of " in line, line
    assert f"(exit 75): requeueing job {job} (restart 1 of" in log, log[-4000:]
    rank_log = (runs / "short-jobs/logs/rank0.log").read_text(errors="replace")
    assert "stall watchdog: stopping" in rank_log
    _equal_to_straight(straight, runs / "short-jobs")
