"""slurm/serve_model.sh on a real Slurm cluster: a tiny reward model served by vLLM in a job of its own, its URL
published in the run folder for the stage jobs, the time-limit signal requeueing it, and the URL published
again by the restarted job (the file a stage names instead of a URL)."""
from __future__ import annotations

import json
import time
import urllib.request

import pytest

from tests.integration._remote_helpers import RM_MAX_LEN, build_tiny_reward_model

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _health(url: str) -> int:
    with urllib.request.urlopen(f"{url}/health", timeout=10) as resp:
        return resp.status


def test_served_model_publishes_its_url_and_comes_back_after_a_requeue(cluster, tmp_path):
    rm = build_tiny_reward_model(tmp_path / "rm")
    runs = tmp_path / "runs"
    runs.mkdir()
    job = cluster.sbatch("--gpus-per-node=1", f"--output={runs}/serve-%j.log", "slurm/serve_model.sh",
                         "--max-model-len", str(RM_MAX_LEN),
                         env={"MODEL": str(rm), "NAME": "rm", "RUN_DIR": str(runs), "DTYPE": "float32"})
    url_file = runs / "served" / "servers" / "rm.url"
    log_file = runs / f"serve-{job}.log"

    def _wait_for(predicate, timeout: float, what: str, running: bool = True) -> None:
        cluster.wait_for(predicate, timeout, what, job, log_file, running=running)

    _wait_for(url_file.is_file, 300, "the server's URL file")
    first = url_file.read_text().strip()
    assert _health(first) == 200
    body = json.dumps({"model": str(rm), "input": ["2 + 2 = 4"]}).encode()
    request = urllib.request.Request(f"{first}/classify", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        assert len(json.load(resp)["data"]) == 1, "the reward model scores through the published URL"

    cluster.cmd("scancel", "--batch", "--signal=USR1", job)  # the time limit is near
    _wait_for(lambda: cluster.restarts(job) == 1, 120, "the requeue")
    # The restarted job's own line first: until then the URL file may still be the stopping server's, and a
    # cancel sent while the job waits to restart can sit in REQUEUED.
    _wait_for(lambda: f"job {job} (restart 1, at most 2000): serving" in log_file.read_text(errors="replace"), 300,
              "the restarted job")
    _wait_for(lambda: url_file.is_file() and _health(url_file.read_text().strip()) == 200, 300,
              "the restarted server's URL")
    cluster.cmd("scancel", job)
    assert cluster.wait_done(job, 120) == "CANCELLED"
    _wait_for(lambda: not url_file.exists(), 30, "the URL file's removal when the server stops", running=False)
    log = (runs / f"serve-{job}.log").read_text()
    assert f"SIGUSR1: requeueing job {job} (restart 1 of at most 2000)" in log
    assert f"job {job} (restart 1, at most 2000): serving {rm}" in log
