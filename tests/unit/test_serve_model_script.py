"""slurm/serve_model.sh run for real under the stand-in Slurm commands of test_slurm_scripts.py: the
model check, the srun → container → ``python -m nemo_cascade.tooling.launch serve`` command, and the
requeue at the time limit."""
import signal
import time

# harness: a pytest fixture
from tests.unit.test_slurm_scripts import ROOT, _lines, harness  # noqa: F401

SCRIPT = "serve_model.sh"
FAKE_PYTHON = """#!/bin/bash
printf '%s\\n' "$@" > "$FAKE_LOG/python.argv"
env > "$FAKE_LOG/python.env"
"""


def _model(tmp_path):
    folder = tmp_path / "models" / "rm-72b"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    return folder


def _fake_python(tmp_path):
    path = tmp_path / "bin" / "fake-python"
    path.write_text(FAKE_PYTHON)
    path.chmod(0o755)
    return str(path)


def test_a_missing_model_folder_is_refused_in_one_line(harness, tmp_path):
    run, log = harness
    for job in (False, True):
        code, _, err = run(SCRIPT, job=job,
                           env={"MODEL": "/models/nope", "CONTAINER_IMAGE": "none"})
        assert code == 2 and len(err.strip().splitlines()) == 1 and "MODEL=/models/nope" in err, err
        assert "do not download" in err
    assert not (log / "calls").exists(), "nothing submitted, nothing started"


def test_container_paths_are_checked_on_the_host_and_the_script_submits_itself(harness, tmp_path):
    run, log = harness
    _model(tmp_path)
    env = {"MODEL": "/models/rm-72b", "MODELS_DIR": str(tmp_path / "models"), "NAME": "rm",
           "RECIPE": "recipes/nemotron_cascade_8b.py"}  # exported for a cascade job: not this one's
    code, out, err = run(SCRIPT, "--max-model-len", "8192", job=False, env=env)
    assert code == 0, err
    argv = _lines(log / "sbatch.argv")
    assert argv[-3:] == [str(ROOT / "slurm" / SCRIPT), "--max-model-len", "8192"]


def test_the_job_serves_from_the_container_and_publishes_into_the_run_folder(harness, tmp_path):
    run, log = harness
    model = _model(tmp_path)
    runs = tmp_path / "runs"
    stale = runs / "served" / "servers" / "judge.url"
    stale.parent.mkdir(parents=True)
    stale.write_text("http://dead-node:1234\n")
    env = {"MODEL": str(model), "CONTAINER_IMAGE": "none", "NAME": "judge", "RUNNER": "generate",
           "SERVE_GPUS": "4", "PYTHON": _fake_python(tmp_path), "HF_HUB_OFFLINE": "0"}
    code, _, err = run(SCRIPT, "--max-model-len", "32768", env=env)
    assert code == 0, err
    assert not stale.exists(), "a URL left by a hard-killed job names a dead server"
    srun = _lines(log / "srun.argv")
    assert srun[:3] == ["--nodes=1", "--ntasks=1", "--kill-on-bad-exit=1"]
    argv = _lines(log / "python.argv")
    assert argv[:3] == ["-m", "nemo_cascade.tooling.launch", "serve"]
    opts = dict(zip(argv[3::2], argv[4::2]))
    assert (opts["--run-dir"] == str(runs / "served") and opts["--name"] == "judge"
            and opts["--model"] == str(model))
    assert (opts["--runner"] == "generate" and opts["--host"] == "0.0.0.0"
            and opts["--dtype"] == "bfloat16")
    assert opts["--vllm-args"] == "--tensor-parallel-size 4 --max-model-len 32768"
    assert "--for" not in opts, "no consumers: it serves until stopped"
    penv = dict(x.split("=", 1) for x in _lines(log / "python.env") if "=" in x)
    assert penv["HF_HUB_OFFLINE"] == "1" and penv["TRANSFORMERS_OFFLINE"] == "1"


def test_usr1_requeues_the_server_and_stops_it(harness, tmp_path):
    run, log = harness
    env = {"MODEL": str(_model(tmp_path)), "CONTAINER_IMAGE": "none", "FAKE_SRUN_SLEEP": "60"}
    proc = run.start(SCRIPT, env=env)
    deadline = time.monotonic() + 30
    while not (log / "srun.argv").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(signal.SIGUSR1)
    _, err = proc.communicate(timeout=30)
    calls = _lines(log / "calls")
    assert [c for c in calls if c.startswith("scontrol requeue")] == ["scontrol requeue 777"], calls
    assert "srun got TERM" in calls and proc.returncode == 0, err


def test_dry_run_prints_the_srun_command(harness, tmp_path):
    run, log = harness
    code, out, err = run(
        SCRIPT, env={"MODEL": str(_model(tmp_path)), "DRY_RUN": "1", "CONTAINER_IMAGE": "img"})
    assert (code == 0 and out.startswith("+ srun --nodes=1")
            and "--container-image=img" in out), (out, err)
    assert "serve_model.sh --on-node" in out and not (log / "calls").exists()


def test_term_stops_the_server_without_requeueing(harness, tmp_path):
    run, log = harness
    proc = run.start(SCRIPT, env={"MODEL": str(_model(tmp_path)), "CONTAINER_IMAGE": "none",
                                  "FAKE_SRUN_SLEEP": "60"})
    while not (log / "srun.argv").exists():
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    calls = _lines(log / "calls")
    assert not [c for c in calls if c.startswith("scontrol requeue")] and "srun got TERM" in calls
    assert proc.returncode != 0 and "SIGTERM: stopping the server" in err
