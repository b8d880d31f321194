"""`nemo-cascade launch RECIPE --executor slurm --watch` through nemo-run's SlurmExecutor (its local
tunnel) on a real Slurm cluster: one job per stage chained afterok plus the served reward-model job,
run for real, their states read by nemo-run through Slurm's accounting (sacct); a stage that fails
cancels its dependents and the launcher's last line names it."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration._remote_helpers import build_tiny_reward_model
from tests.slurm.conftest import ROOT

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _launch(cluster, tmp_path, recipe: str, *args: str,
            env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**cluster.env, "ACCOUNT": "acct", "RUN_DIR": str(tmp_path / "runs"), "RETRIES": "0",
           "TIME": "00:30:00", "NEMORUN_HOME": str(tmp_path / "nemorun-home"), **(env or {})}
    proc = subprocess.run([
        sys.executable, "-m", "nemo_cascade.tooling.cli", "launch", recipe, "--executor", "slurm",
        "--watch", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    (tmp_path / "launch.out").write_text(proc.stdout + proc.stderr)  # kept with the test's folder
    return proc


def _job_states(cluster, name_prefix: str) -> dict[str, str]:
    out = cluster.cmd("sacct", "-n", "-X", "-P", "-o", "JobName,State")
    return {
        n[len(name_prefix):]: s.split()[0]
        for n, s in (line.split("|") for line in out.splitlines()) if n.startswith(name_prefix)}


def test_stages_and_served_reward_model_run_as_chained_jobs(cluster, tmp_path):
    """With the nodes' checks on (DOCTOR=1): each stage job checks the servers of its own stage
    only, so the SFT job does not fail on the RLHF stage's placeholder URL, and the RLHF job waits
    for the served model's URL file."""
    rm = build_tiny_reward_model(tmp_path / "rm")
    proc = _launch(cluster, tmp_path, "tests/slurm/recipes.py:sft_then_rlhf", "--reward-model",
                   str(rm), "--serve-gpus", "1", "--vllm-args", "--max-model-len 256",
                   env={"DOCTOR": "1"})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    lines = proc.stdout.splitlines()
    for task in ("sft", "serve-reward-model", "rlhf"):
        assert any(line.endswith(f" {task}: SUCCEEDED") for line in lines), proc.stdout
    assert "every job succeeded (sft, serve-reward-model, rlhf)" in proc.stdout
    run = tmp_path / "runs" / "launched"
    manifest = json.loads((run / "manifest.json").read_text())
    assert {k: v["status"] for k, v in manifest["stages"].items()
            } == {"sft": "done", "rlhf": "done"}
    rlhf = [
        json.loads(x)
        for x in (run / "stages" / "1-rlhf" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in rlhf] == [0, 1] and all(m["num_sequences"]
                                                       for m in rlhf), "scored by the served RM"
    assert _job_states(cluster, "nemo-cascade-launched.") == {
        "sft": "COMPLETED", "serve-reward-model": "COMPLETED", "rlhf": "COMPLETED"}
    logs = {
        p.name: p.read_text(errors="replace")
        for p in (tmp_path / "nemorun-home").rglob("log-*.out")}
    tables = [text for text in logs.values() if "nemo-cascade doctor: " in text]
    assert len(tables) == 2 and all(" 0 FAIL, " in text for text in tables), list(logs)
    rlhf_table = next(text for text in tables if "reward-model server" in text)
    assert "/health answers (stages.rlhf.reward.reward_model_url)" in rlhf_table


def test_a_folder_named_nemo_run_is_refused_before_submitting(cluster, tmp_path):
    proc = _launch(cluster, tmp_path, "recipes/tiny.py:math_only",
                   env={"NEMORUN_HOME": str(tmp_path / "nemo_run")})
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == (
        f"nemo-cascade: error: launch: NEMORUN_HOME={tmp_path / 'nemo_run'}: nemo-run rewrites "
        "'/nemo_run' in job "
        "scripts; use a path without a folder named nemo_run")


def test_a_failed_stage_cancels_its_dependents_and_is_named(cluster, tmp_path):
    # torchrun's stand-in fails at once: the first stage's job fails, the next one's afterok cannot
    # be met
    proc = _launch(cluster, tmp_path, "recipes/tiny.py:math_only", "gate.suites=",
                   env={"TORCHRUN": "false"})
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "nemo-cascade: error: launch: sft failed; cancelled after it: math (its log: "), last
    lines = proc.stdout.splitlines()
    assert any(line.endswith(" sft: FAILED")
               for line in lines) and any(line.endswith(" math: CANCELLED")
                                          for line in lines), proc.stdout
    assert _job_states(cluster, "nemo-cascade-tiny-math.")["sft"] == "FAILED"
