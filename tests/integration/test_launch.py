"""nemo-run experiments: the task plan and the stage/serve task entry points (launch_tasks.py), the
Slurm experiment (launch.py) rendered in a dry run (tests/slurm submits it to a real cluster), and
the tiny cascade run for real by the local executor."""
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade import config
from nemo_cascade.tooling import launch, launch_tasks
from nemo_cascade.tooling.cli import load_recipe

ROOT = Path(__file__).resolve().parents[2]
TINY = str(ROOT / "recipes" / "tiny.py")
TINY_STAGES = ("sft", "rm", "rlhf", "ifeval", "math", "code", "swe")


def _nemo_run_env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("ACCOUNT", "PARTITION", "CONTAINER_IMAGE", "RUN_DIR")}
    return {**env, "NEMORUN_HOME": str(tmp_path / "nemorun_home"), **extra}


def _launch(tmp_path, *args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "nemo_cascade.tooling.launch", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          env=_nemo_run_env(tmp_path, **(env or {})))


# ----------------------------------------------------------------------------------------- the plan
def test_plan_chains_stages_and_serves_the_cascades_own_rm():
    cfg = load_recipe(TINY)
    tasks = launch_tasks.plan(cfg, "/runs/tiny")
    assert [t.name for t in tasks] == [
        "sft", "rm", "serve-rm", "rlhf", "ifeval", "math", "code", "swe"]
    by = {t.name: t for t in tasks}
    assert by["sft"].after == () and by["rm"].after == ("sft",) and by["swe"].after == ("code",)
    assert by["serve-rm"].after == ("rm",) and by["rlhf"].after == ("rm",), (
        "Slurm: the stage waits for the URL")
    assert by["serve-rm"].serve == launch_tasks.Serve("/runs/tiny/stages/1-rm/hf", "pooling",
                                                      "reward_model_url", ("rlhf",))
    assert by["rlhf"].servers == (("serve-rm", "reward_model_url"),)
    assert by["math"].earlier == ("sft", "rm", "rlhf", "ifeval")
    local = {t.name: t for t in launch_tasks.plan(cfg, "/r", serve_is_dependency=True)}
    assert local["rlhf"].after == ("rm", "serve-rm"), (
        "local: a serve task ends once its server is up")


def test_plan_serves_given_reward_model_and_judge():
    cfg = load_recipe(TINY)
    external = replace(cfg.stages[2], reward=config.Reward(reward_model_url="http://rm:8000"))
    ifeval = replace(cfg.stages[3], reward=replace(cfg.stages[3].reward, if_rm_bonus=True))
    cfg = replace(cfg, stages=(cfg.stages[0], external, ifeval, *cfg.stages[4:]))  # no RM stage
    assert [t.name for t in launch_tasks.plan(cfg, "/r")] == [
        "sft", "rlhf", "ifeval", "math", "code", "swe"]
    tasks = launch_tasks.plan(cfg, "/r", reward_model="/models/rm-72b", judge="/models/judge")
    by = {t.name: t for t in tasks}
    assert [t.name for t in tasks] == [
        "sft", "serve-reward-model", "rlhf", "ifeval", "math", "code", "serve-judge", "swe"]
    assert (by["serve-reward-model"].serve.consumers == ("rlhf", "ifeval")
            and by["serve-reward-model"].after == ("sft",))
    assert by["serve-judge"].serve == launch_tasks.Serve("/models/judge", "generate", "judge_url",
                                                         ("swe",))
    assert (by["serve-judge"].after == ("code",)
            and by["swe"].servers == (("serve-judge", "judge_url"),))


def test_slurm_shape():
    cfg = load_recipe(TINY)
    assert launch.slurm_shape(cfg, 8) == (1, 1)
    big = replace(cfg, parallel=replace(cfg.parallel, tp=4, pp=2, dp=8))
    assert launch.slurm_shape(big, 8) == (8, 8)
    with pytest.raises(config.ConfigError, match="whole nodes"):
        launch.slurm_shape(replace(cfg, parallel=replace(cfg.parallel, tp=4, dp=3)), 8)


def test_site_from_environment():
    site = launch.Site.from_env({
        "ACCOUNT": "a", "RUN_DIR": "/lustre/runs", "DATA_DIR": "/lustre/data",
        "EXTRA_MOUNTS": "/scratch:/scratch", "GPUS_PER_NODE": "4", "CONTAINER": "img"})
    assert site.account == "a" and site.image == "img" and site.gpus_per_node == 4
    assert site.mounts == ((str(ROOT), "/workspace/nemo-cascade"), ("/lustre/runs", "/runs"),
                           ("/lustre/data", "/data"), (f"{ROOT}/models", "/models"),
                           ("/scratch", "/scratch"))
    bare = launch.Site.from_env({"CONTAINER_IMAGE": "none", "RUN_DIR": "/lustre/runs"})
    assert bare.repo_mount == str(ROOT) and bare.runs_mount == "/lustre/runs"


# ------------------------------------------------------------------------------------- task entries
def _manifest(run_dir: Path, **status):
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "manifest.json").write_text(
        json.dumps({"stages": {k: {"status": v} for k, v in status.items()}, "stopped": ""}))


def _task_args(run_dir, stage, command, earlier=(), server=()):
    return SimpleNamespace(run_dir=str(run_dir), id="L1", stage=stage, earlier=list(earlier),
                           server=list(server), wait=5.0, command=command)


def test_task_skips_done_refuses_early_and_passes_the_served_url(tmp_path, capsys):
    run_dir = tmp_path / "run"
    record = tmp_path / "argv.json"
    cmd = [sys.executable, "-c",
           f"import json, sys; json.dump(sys.argv[1:], open({str(record)!r}, 'w'))", "x"]
    _manifest(run_dir, sft="done", rm="running", rlhf="pending")
    assert launch_tasks.run_task(_task_args(run_dir, "sft", cmd)) == 0 and not record.exists()
    assert (launch_tasks.run_task(_task_args(run_dir, "rlhf", cmd, earlier=("sft", "rm"))) == 1
            and not record.exists())
    assert "earlier stage(s) rm not done" in capsys.readouterr().err
    _manifest(run_dir, sft="done", rm="done", rlhf="pending")
    servers = launch_tasks.servers_dir(run_dir, "L1")
    servers.mkdir(parents=True)
    (servers / "serve-rm.url").write_text("http://node7:31234\n")
    args = _task_args(run_dir, "rlhf", cmd, earlier=("sft", "rm"),
                      server=("serve-rm=reward_model_url",))
    assert launch_tasks.run_task(args) == 0
    # the URL file, re-read by the stage's client if the server is requeued onto another node
    assert json.loads(record.read_text()) == [
        "x", f"stages.rlhf.reward.reward_model_url=file:{servers}/serve-rm.url",
        "stages.rlhf.reward.reward_model_stage="]
    assert (servers / "serve-rm.released.rlhf").is_file(), (
        "a server may stop once its stages are through")
    (servers / "serve-rm.url").unlink()
    (servers / "serve-rm.stopped").write_text("the server exited\n")
    assert (launch_tasks.run_task(args) == 1
            and "serve-rm stopped: the server exited" in capsys.readouterr().err)
    (run_dir / "manifest.json").write_text(
        json.dumps({"stages": {"math": {"status": "pending"}}, "stopped": "gate"}))
    assert launch_tasks.run_task(_task_args(run_dir, "math", cmd)) == 3


def test_overrides_the_task_appends_are_accepted_by_the_config():
    cfg = load_recipe(TINY)
    out = apply_overrides(cfg, ["stages.rlhf.reward.reward_model_url=http://node7:31234",
                                       "stages.rlhf.reward.reward_model_stage="])
    assert config.stage_by_name(out, "rlhf").reward.reward_model_url == "http://node7:31234"


class _FakeServer:
    """Stands in for rewards.serve.VLLMServer: a sleeping child process instead of vLLM."""
    made = []

    def __init__(self, model, **kw):
        self.model, self.kw, self.proc, self.stopped = model, kw, None, False
        self.log_path, self.token = kw["log_path"], "t0ken"
        _FakeServer.made.append(self)

    def start(self):
        self.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        return self

    def stop(self):
        self.stopped = True
        self.proc.kill()
        self.proc.wait()


def test_serve_publishes_its_url_and_stops_when_its_stages_are_done(tmp_path, monkeypatch):
    monkeypatch.setattr(launch_tasks, "VLLMServer", _FakeServer)
    run_dir = tmp_path / "run"
    _manifest(run_dir, rm="done", rlhf="pending")
    d = launch_tasks.servers_dir(run_dir, "L1")
    args = SimpleNamespace(run_dir=str(run_dir), id="L1", name="serve-rm", model=str(tmp_path),
                           runner="pooling", consumers=["rlhf"], host="127.0.0.1", port=0,
                           dtype="float32", vllm_args="", ready_timeout=30.0, watch_pid=0,
                           poll=0.05, detach=False)
    seen = {}

    def consumer():
        while not (d / "serve-rm.url").is_file():
            time.sleep(0.02)
        seen["url"] = (d / "serve-rm.url").read_text()
        seen["mode"] = (d / "serve-rm.url").stat().st_mode & 0o777
        _manifest(run_dir, rm="done", rlhf="done")

    thread = threading.Thread(target=consumer)
    thread.start()
    assert launch_tasks.run_serve(args) == 0
    thread.join()
    server = _FakeServer.made[-1]
    port = launch_tasks.served_port(str(run_dir), 'serve-rm')
    # its token, for the owner only
    assert seen == {"url": f"http://127.0.0.1:{port}\nt0ken\n", "mode": 0o600}
    assert server.kw["runner"] == "pooling" and server.stopped
    assert (not (d / "serve-rm.url").exists()
            and (d / "serve-rm.stopped").read_text() == "its stages ended\n")
    assert (launch_tasks.run_serve(args) == 0
            and len(_FakeServer.made) == 1), "stages done: nothing to serve"


def test_serve_without_stages_serves_until_stopped_and_refuses_a_missing_folder(
        tmp_path, monkeypatch, capsys):
    """slurm/serve_model.sh's server: no --for, its URL in RUN/servers/NAME.url, served until it
    stops."""
    monkeypatch.setattr(launch_tasks, "VLLMServer", _FakeServer)
    run_dir = tmp_path / "served"
    d = run_dir / "servers"
    d.mkdir(parents=True)
    (d / "rm.stopped").write_text("SIGTERM (an earlier job)\n")
    args = SimpleNamespace(run_dir=str(run_dir), id="", name="rm", model=str(tmp_path),
                           runner="pooling", consumers=[], host="127.0.0.1", port=0,
                           dtype="bfloat16", vllm_args="", ready_timeout=30.0, watch_pid=0,
                           poll=0.05, detach=False)
    seen = {}

    def crash_the_server():
        while not (d / "rm.url").is_file():
            time.sleep(0.02)
        seen["stopped"] = (d / "rm.stopped").exists()
        _FakeServer.made[-1].proc.kill()

    thread = threading.Thread(target=crash_the_server)
    thread.start()
    assert launch_tasks.run_serve(args) == 1, "only the server's end ends it"
    thread.join()
    assert seen == {"stopped": False}, "a restarted server is no longer marked stopped"
    assert not (d / "rm.url").exists() and "the server exited" in (d / "rm.stopped").read_text()
    made = len(_FakeServer.made)
    missing = SimpleNamespace(**{**vars(args), "model": str(tmp_path / "nope")})
    assert launch_tasks.run_serve(missing) == 2 and len(_FakeServer.made) == made
    assert "model folder" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------- nemo-run
def test_slurm_dry_run_renders_one_sbatch_per_task_with_dependencies(tmp_path):
    pytest.importorskip("nemo_run")
    out = tmp_path / "rendered"
    proc = _launch(tmp_path, TINY, "--executor", "slurm", "--dryrun", "--out", str(out),
                   "stages.math.steps=3",
                   env={"ACCOUNT": "acct", "PARTITION": "batch",
                        "CONTAINER_IMAGE": "nvcr.io/nvidia/nemo:25.09", "RUN_DIR": "/lustre/runs",
                        "DATA_DIR": "/lustre/data", "GPUS_PER_NODE": "8"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = {p.stem: p.read_text() for p in out.glob("*.sh")}
    assert sorted(text) == sorted((*TINY_STAGES, "serve-rm"))
    for k, stage in enumerate(TINY_STAGES):
        t = text[stage]
        assert (t.startswith("#!/bin/bash") and "#SBATCH --account=acct" in t
                and "#SBATCH --partition=batch" in t)
        assert f"#SBATCH --job-name=nemo-cascade-tiny.{stage}" in t
        assert ("#SBATCH --nodes=1" in t and "#SBATCH --gpus-per-node=1" in t
                and "#SBATCH --ntasks-per-node=1" in t)
        assert ("#SBATCH --dependency" in t) == (k > 0)
        if k:
            assert f"#SBATCH --dependency='afterok:<{TINY_STAGES[k - 1]}>'" in t
        assert "--container-image nvcr.io/nvidia/nemo:25.09" in t
        assert ("/lustre/runs:/runs" in t and "/lustre/data:/data" in t
                and f"{ROOT}:/workspace/nemo-cascade" in t)
        assert 'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)' in t
        # requeued until done: the run saves before its end (exit 75), nemo-run's batch shell
        # requeues it
        assert "export TORCHX_MAX_RETRIES=2000" in t
        assert (f"source {ROOT}/slurm/progress.sh\nset -x\n"
                "nc_requeue_guard /lustre/runs/tiny 3 || exit 1\nnc_job_end") in t
        assert "cd /workspace/nemo-cascade\nsource slurm/env.sh\n" in t
        task = next(line for line in t.splitlines()
                    if line.startswith("exec python -m nemo_cascade.tooling.launch task"))
        assert f"--stage {stage} " in task and ("--earlier" not in task if k == 0 else
                                                f"--earlier {','.join(TINY_STAGES[:k])} " in task)
        assert task.endswith(
            f"-- bash slurm/node.sh /workspace/nemo-cascade/recipes/tiny.py --stage {stage} "
            f"stages.math.steps=3 run_root=/runs wandb=true")
    assert "--server serve-rm=reward_model_url" in text["rlhf"]
    serve = text["serve-rm"]
    assert "#SBATCH --dependency='afterok:<rm>'" in serve and "#SBATCH --gpus-per-node=8" in serve
    assert ("exec python -m nemo_cascade.tooling.launch serve --run-dir /runs/tiny" in serve and
            "--model /runs/tiny/stages/1-rm/hf --runner pooling --for rlhf --host 0.0.0.0" in serve)
    assert "--vllm-args '--tensor-parallel-size 8'" in serve
    assert "export TORCHX_MAX_RETRIES=1" in serve and "nc_requeue_guard" not in serve
    assert not list((tmp_path / "nemorun_home").glob("experiments/*/*")), (
        "a dry run leaves no experiment behind")


def test_slurm_without_account_is_one_line(tmp_path):
    proc = _launch(tmp_path, f"{TINY}:math_only", "--executor", "slurm")
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "nemo-cascade: error: launch: set ACCOUNT (the Slurm account) for --executor slurm"]


@pytest.mark.integration
@pytest.mark.slow
def test_local_executor_runs_the_tiny_cascade(tmp_path):
    """math_only (SFT → math GRPO) through nemo-run's local executor, a task per stage; a second
    launch of the same run finds every stage done and runs nothing."""
    pytest.importorskip("nemo_run")
    args = (f"{TINY}:math_only", "--executor", "local", f"run_root={tmp_path / 'runs'}",
            "stages.*.steps=2", "stages.math.grpo.prompts_per_step=4",
            "stages.math.grpo.group_size=4",
            # the chain of tasks is under test here, not the gate (test_tiny_cascade.py)
            "gate.suites=")
    proc = _launch(tmp_path, *args, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    run_dir = tmp_path / "runs" / "tiny-math"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert ({k: v["status"] for k, v in manifest["stages"].items()}
            == {"sft": "done", "math": "done"})
    assert manifest["stages"]["math"]["parent"] == manifest["stages"]["sft"]["hf"]
    metrics = (run_dir / "stages" / "1-math" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in metrics] == [0, 1]
    assert f"run {run_dir}: sft done, math done" in proc.stdout
    again = _launch(tmp_path, *args, timeout=600)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    logs = "".join(p.read_text() for p in (tmp_path / "nemorun_home").rglob("*combined.log"))
    assert logs.count("is done in") == 2, "the relaunch's tasks found their stages done"
