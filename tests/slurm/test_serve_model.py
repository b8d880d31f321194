"""slurm/serve_model.sh on a real Slurm cluster: a tiny reward model served by vLLM in a job of its
own, its URL and token published in the run folder for the stage jobs (a request without the token
refused), the time-limit signal requeueing it, and the URL published again, with a new token, by the
restarted job (the file a stage names instead of a URL)."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from nemo_cascade.runtime.server_token import bearer
from tests.integration._remote_helpers import RM_MAX_LEN, build_tiny_reward_model

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _published(url_file) -> tuple[str, str]:
    """(URL, token): the URL file's two lines."""
    url, token = url_file.read_text().split()
    return url, token


def _classify_status(url: str, token: str, model: str) -> int:
    body = json.dumps({"model": model, "input": ["2 + 2 = 4"]}).encode()
    headers = {"Content-Type": "application/json", **bearer(token)}
    request = urllib.request.Request(f"{url}/classify", body, headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            assert len(json.load(resp)["data"]) == 1
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


def _health(url: str) -> int:
    with urllib.request.urlopen(f"{url}/health", timeout=10) as resp:
        return resp.status


def test_served_model_publishes_its_url_and_comes_back_after_a_requeue(cluster, tmp_path):
    rm = build_tiny_reward_model(tmp_path / "rm")
    runs = tmp_path / "runs"
    runs.mkdir()
    job = cluster.sbatch(
        "--gpus-per-node=1", f"--output={runs}/serve-%j.log", "slurm/serve_model.sh",
        "--max-model-len", str(RM_MAX_LEN),
        env={"MODEL": str(rm), "NAME": "rm", "RUN_DIR": str(runs), "DTYPE": "float32"})
    url_file = runs / "served" / "servers" / "rm.url"
    log_file = runs / f"serve-{job}.log"

    def _wait_for(predicate, timeout: float, what: str, running: bool = True) -> None:
        cluster.wait_for(predicate, timeout, what, job, log_file, running=running)

    _wait_for(url_file.is_file, 300, "the server's URL file")
    first, token = _published(url_file)
    assert _health(first) == 200 and url_file.stat().st_mode & 0o777 == 0o600
    assert _classify_status(first, token, str(rm)) == 200, "it scores with the published token"
    assert _classify_status(first, "", str(rm)) == 401, "and refuses a request without it"

    cluster.cmd("scancel", "--batch", "--signal=USR1", job)  # the time limit is near
    _wait_for(lambda: cluster.restarts(job) == 1, 120, "the requeue")
    # The restarted job's own line first: until then the URL file may still be the stopping
    # server's, and a cancel sent while the job waits to restart can sit in REQUEUED.
    _wait_for(lambda: (f"job {job} (restart 1, at most 2000): serving"
                       in log_file.read_text(errors="replace")), 300, "the restarted job")
    _wait_for(lambda: url_file.is_file() and _health(_published(url_file)[0]) == 200, 300,
              "the restarted server's URL")
    again, new_token = _published(url_file)
    assert new_token != token, "a restart makes a new token"
    assert _classify_status(again, token, str(rm)) == 401
    assert _classify_status(again, new_token, str(rm)) == 200
    cluster.cmd("scancel", job)
    assert cluster.wait_done(job, 120) == "CANCELLED"
    _wait_for(lambda: not url_file.exists(), 30, "the URL file's removal when the server stops",
              running=False)
    log = (runs / f"serve-{job}.log").read_text()
    assert f"SIGUSR1: requeueing job {job} (restart 1 of at most 2000)" in log
    assert f"job {job} (restart 1, at most 2000): serving {rm}" in log
