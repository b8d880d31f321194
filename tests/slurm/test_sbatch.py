"""slurm/cascade_8b.sh and cascade_14b.sh on a real Slurm cluster (two slurmd nodes on this
machine), with the scripts' no-container path and a CPU recipe: torchrun's c10d rendezvous across
the two nodes, gloo, a TP=2 tiny cascade (SFT → math GRPO) with a gate, run to the end; the
time-limit signal in the middle of a stage, the save it triggers, the requeue and the resume, bit
for bit against the uninterrupted run; MAX_REQUEUES; bad input."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.integration.test_resume import _metrics, _scores
from tests.slurm.conftest import ROOT

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

RECIPE = "recipes/tiny.py:two_ranks"  # SFT → math GRPO, TP=2: one rank on each node
# checkpoint_every=100: no step-interval save, so a resume can only start from the save the signal
# triggered
ARGS = ("stages.sft.steps=30", "stages.math.steps=6", "stages.math.checkpoint_every=100",
        "gate.suites=tiny-math", "gate.limit=8", "gate.samples=1")
STAGES = ("0-sft", "1-math")


def _submit(cluster, script: str, runs: Path, *sbatch: str, env: dict | None = None,
            args=ARGS) -> str:
    runs.mkdir(parents=True, exist_ok=True)
    return cluster.sbatch(
        *sbatch, f"--output={runs}/job-%j.log", f"slurm/{script}", *args,
        env={"RUN_DIR": str(runs), "RECIPE": RECIPE, "RUN_NAME": "tiny", **(env or {})})


def _log(runs: Path, job: str) -> str:
    return (runs / f"job-{job}.log").read_text(errors="replace")


def _worker_logs(runs: Path) -> str:
    """What the ranks wrote to their run folders' logs (runtime/console.py: a worker's chatter goes
    there)."""
    return "".join(p.read_text(errors="replace") for p in sorted(runs.glob("*/logs/rank*.log")))


@pytest.fixture(scope="module")
def straight(cluster, tmp_path_factory):
    """cascade_8b.sh over two nodes (-N 2 instead of its one), not interrupted: the reference run.
    The nodes' checks (nemo-cascade doctor) run first, as on a cluster; the other jobs here skip
    them (DOCTOR=0)."""
    runs = tmp_path_factory.mktemp("straight")
    job = _submit(cluster, "cascade_8b.sh", runs, "-N2", "--gpus-per-node=1", env={"DOCTOR": "1"})
    return job, cluster.wait_done(job, 900), runs


def test_cascade_8b_runs_the_cascade_over_two_nodes(straight):
    job, state, runs = straight
    log = _log(runs, job)
    assert state == "COMPLETED", log[-3000:]
    run = runs / "tiny"
    manifest = json.loads((run / "manifest.json").read_text())
    assert {k: v["status"] for k, v in manifest["stages"].items()} == \
        {"sft": "done", "math": "done"}
    assert all(v["gated"] for v in manifest["stages"].values())
    for stage in STAGES:
        assert (run / "stages" / stage / "hf" / "model.safetensors").is_file()
        assert set(_scores(run / "stages" / stage)) == {"tiny-math"}
    assert [m["step"] for m in _metrics(run, "1-math")] == list(range(6))
    assert (run / "report.md").is_file()
    assert (f"job {job} (restart 0, at most 2000): {RECIPE}" in log
            and "on 2 node(s) × 1 GPUs" in log)
    # a worker's own chatter goes to its log (runtime/console.py)
    second = (run / "logs" / "rank1.log").read_text()
    assert "vLLM engine ready" in second and "rank 1)" in second, \
        "the second node's rank started its engine"
    # the nodes' checks run under torchrun over both nodes, as the job does: one table, from rank 0,
    # after an all-reduce across the nodes
    doctors = [line for line in log.splitlines() if line.startswith("nemo-cascade doctor: ")]
    assert (len(doctors) == 1
            and "rank 0 of 2, recipe recipes/tiny.py:two_ranks (tiny)" in doctors[0]), log[-3000:]
    assert "ok      all-reduce                gloo, 2 ranks, 16 MiB in " in log
    assert log.count("ok      vLLM reload API") == 1 and log.count(" ok, 0 FAIL, ") == 1
    assert log.rstrip().endswith("srun ended (exit 0)")


def test_time_limit_signal_saves_requeues_and_resumes_bit_exact(cluster, straight, tmp_path):
    """cascade_14b.sh (two nodes): USR1 to the batch shell in the middle of the math stage — as
    Slurm sends it before the time limit — makes the ranks save at the end of the current step and
    stop; the job requeues itself and the rerun resumes from that save. Everything it produces
    equals the uninterrupted run's."""
    _, straight_state, straight_runs = straight
    assert straight_state == "COMPLETED"
    runs = tmp_path / "runs"
    job = _submit(cluster, "cascade_14b.sh", runs)
    metrics = runs / "tiny" / "stages" / "1-math" / "metrics.jsonl"
    cluster.wait_for(lambda: metrics.is_file() and metrics.read_text().count("\n") >= 1, 600,
                     "the math stage's first step", job, runs / f"job-{job}.log")
    cluster.cmd("scancel", "--batch", "--signal=USR1", job)
    state = cluster.wait_done(job, 900)
    log = _log(runs, job)
    assert state == "COMPLETED", log[-3000:]
    assert cluster.restarts(job) == 1
    assert "SIGUSR1: the run saves at the end of its current step and stops" in log
    assert f"requeueing job {job} (restart 1 of at most 2000)" in log
    stopped = next(line for line in log.splitlines() if "nemo-cascade: stopped on request" in line)
    assert f"(SIGUSR1 to job {job})" in stopped, stopped
    # the ranks stop after the step, or inside it keeping its finished groups (rollout checkpoints)
    saved = re.search(
        r" (?:after step \d+ of stage 1-math; state saved in|in step \d+ of stage math, "
        r"\w[\w ]*; state after step \d+ saved in) ([^;,]+)[;,]", stopped)
    assert saved, stopped
    assert "no step ended within" not in log, \
        "the ranks stopped when asked, not by the grace timeout"
    assert f"job {job} (restart 1, at most 2000)" in log and "continuing the existing run" in log
    a, b = straight_runs / "tiny", runs / "tiny"
    resumed = json.loads((b / "manifest.json").read_text())["stages"]["math"]["resumed_from"]
    assert resumed and resumed == saved.group(1)
    assert _scores(a / "base") == _scores(b / "base")
    for stage in STAGES:
        assert _metrics(a, stage) == _metrics(b, stage), stage
        assert (a / "stages" / stage / "hf/model.safetensors").read_bytes() == \
            (b / "stages" / stage / "hf/model.safetensors").read_bytes(), stage
        assert _scores(a / "stages" / stage) == _scores(b / "stages" / stage), stage


FAKE_TORCHRUN = r"""#!/bin/bash
# torchrun's stand-in: a long step that honours the run folder's stop request like the ranks do
echo "fake torchrun on $(hostname) node $SLURM_NODEID"
for i in $(seq 600); do
  if [[ -f $RUN_DIR/$RUN_NAME/stop_request ]]; then echo "stop request seen"; exit 75; fi
  sleep 0.1
done
"""


@pytest.fixture
def fake_torchrun(tmp_path) -> Path:
    path = tmp_path / "torchrun"
    path.write_text(FAKE_TORCHRUN)
    path.chmod(0o755)
    return path


def test_max_requeues_is_honoured_with_a_clear_last_line(cluster, tmp_path, fake_torchrun):
    runs = tmp_path / "runs"
    job = _submit(cluster, "cascade_8b.sh", runs, "--gpus-per-node=1",
                  env={"TORCHRUN": str(fake_torchrun), "MAX_REQUEUES": "0"},
                  args=(*ARGS, "parallel.tp=1"))  # one GPU: the batch shell checks the layout
    cluster.wait_for(
        lambda: (runs / f"job-{job}.log").is_file() and "fake torchrun" in _log(runs, job), 60,
        "the step", job, runs / f"job-{job}.log")
    cluster.cmd("scancel", "--batch", "--signal=USR1", job)
    assert cluster.wait_done(job, 120) == "FAILED"
    log = _log(runs, job)
    assert "stop request seen" in log, "the request reaches the step before the job ends"
    assert cluster.restarts(job) == 0
    assert log.rstrip().splitlines()[-1].endswith(
        f"srun ended (exit 75); not requeued: job {job} was restarted 0 times (MAX_REQUEUES=0); "
        "resubmit the script to continue the run")


@pytest.mark.parametrize("setting, env, expected", [
    ("RECIPE", {"RECIPE": "recipes/missing.py"},
     f"error: RECIPE=recipes/missing.py: no such file {ROOT}/recipes/missing.py"),
    ("MODELS_DIR", {"MODELS_DIR": "/nonexistent/models"},
     "error: MODELS_DIR=/nonexistent/models: no such folder"),
    ("DATA_DIR", {"DATA_DIR": "/nonexistent/data"},
     "error: DATA_DIR=/nonexistent/data: no such folder"),
])
def test_bad_setting_fails_at_once_in_one_line(cluster, tmp_path, setting, env, expected):
    runs = tmp_path / "runs"
    started = time.monotonic()
    job = _submit(cluster, "cascade_8b.sh", runs, "--gpus-per-node=1", env=env)
    assert cluster.wait_done(job, 60) == "FAILED"
    assert time.monotonic() - started < 30
    lines = _log(runs, job).strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], lines


def test_layout_that_does_not_fill_the_nodes_fails_before_a_model_loads(cluster, tmp_path):
    """TP=2 on one node with one GPU: the batch shell stops the job before srun, in one line naming
    both numbers; with its check out of the way (a python3 that cannot read recipes), every rank
    does."""
    runs = tmp_path / "runs"
    started = time.monotonic()
    job = _submit(cluster, "cascade_8b.sh", runs, "--gpus-per-node=1")
    assert cluster.wait_done(job, 120) == "FAILED"
    assert time.monotonic() - started < 60
    lines = _log(runs, job).strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(
        "error: parallel: tp × pp × cp × dp = 2×1×1×1 = 2 GPUs, but the job has 1; "
        "no parallel.dp fills them (tp × pp × cp = 2 does not divide 1)"), lines
    job = _submit(cluster, "cascade_8b.sh", runs, "--gpus-per-node=1", env={"NC_PYTHON": "false"})
    assert cluster.wait_done(job, 120) == "FAILED"
    log = _log(runs, job)
    errors = {line for line in log.splitlines() if "error" in line.lower() and "srun" not in line}
    assert any("parallel" in e and "world size 1" in e for e in errors), log[-2000:]
    assert "vLLM engine ready" not in log + _worker_logs(runs) and "Traceback" not in log


def test_unreachable_reward_model_fails_on_the_nodes_before_a_model_loads(cluster, tmp_path):
    """The nodes' checks (DOCTOR=1, the default) see the RM URL dead; the cascade's first stage
    (SFT) does not need it, so that is a warning, and the run's own check of every server then ends
    the job in one line naming the field, before a model loads."""
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    runs = tmp_path / "runs"
    started = time.monotonic()
    job = _submit(cluster, "cascade_8b.sh", runs, "--gpus-per-node=1",
                  env={"DOCTOR": "1", "RECIPE": "tests/slurm/recipes.py:sft_then_rlhf"},
                  args=(f"stages.rlhf.reward.reward_model_url=http://127.0.0.1:{port}",))
    assert cluster.wait_done(job, 180) == "FAILED"
    assert time.monotonic() - started < 150
    log = _log(runs, job)
    assert ("warn    reward-model server       needed later (stages.rlhf.reward.reward_model_url), "
            f"not answering now: http://127.0.0.1:{port}: no answer at /health") in log, log[-3000:]
    assert ("nemo-cascade: error: stages.rlhf.reward.reward_model_url: "
            f"http://127.0.0.1:{port}: no answer at /health") in log
    assert "vLLM engine ready" not in log + _worker_logs(runs) and "Traceback" not in log


def test_a_tool_job_runs_one_command_on_a_node(cluster, tmp_path):
    """slurm/tool.sh: a nemo-cascade command (here the plan of the 8B cascade for 4-hour jobs) as a
    job."""
    runs = tmp_path / "runs"
    runs.mkdir()
    job = cluster.sbatch("--gpus-per-node=1", f"--output={runs}/job-%j.log", "slurm/tool.sh",
                         "plan", "recipes/nemotron_cascade_8b.py", "--time-limit", "04:00:00",
                         env={"RUN_DIR": str(runs)})
    assert cluster.wait_done(job, 300) == "COMPLETED", _log(runs, job)[-3000:]
    log = _log(runs, job)
    assert (f"job {job}: nemo-cascade plan recipes/nemotron_cascade_8b.py "
            "--time-limit 04:00:00") in log
    assert "| swe_24k | grpo |" in log and "jobs of 04:00:00" in log, log[-3000:]


def test_the_defaults_a_user_runs_name_the_run_and_the_missing_release(cluster, tmp_path):
    """With the nodes' checks on (DOCTOR=1) and no RUN_NAME: the run folder is the recipe's own
    name, and a base that was never released stops the job in one line naming the recipe that makes
    it."""
    runs = tmp_path / "runs"
    runs.mkdir()
    recipe = "tests/slurm/recipes.py:from_an_unreleased_base"
    job = cluster.sbatch("--gpus-per-node=1", f"--output={runs}/job-%j.log", "slurm/cascade_8b.sh",
                         env={"RUN_DIR": str(runs), "RECIPE": recipe, "DOCTOR": "1"})
    assert cluster.wait_done(job, 300) == "FAILED"
    log = _log(runs, job)
    assert f"{recipe} → {runs}/from-unreleased on 1 node(s)" in log, log[-3000:]
    assert "nemo-cascade doctor: " in log
    assert ("nemo-cascade: error: model.hf_path: /nonexistent/models/Unreleased-SFT is not there, "
            "and it is no release: run tests/slurm/recipes.py:sft_then_rlhf (which trains it "
            "first), or set model.hf_path to your own checkpoint") in log, log[-3000:]
    assert "Traceback" not in log
