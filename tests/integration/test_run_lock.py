"""One writer per run folder, as a user meets it on a laptop (`nemo-cascade run
recipes/tiny.py:math_only`):

- a second `nemo-cascade run` on the folder of a live run refuses in one line naming the
  holder, exit 2;
- a worker SIGKILLed (as by the out-of-memory killer) ends the run with one line naming its rank,
  and no process of the run is left;
- the launcher SIGKILLed at a random moment (`kill -9`, which no handler sees) takes every worker
  with it within seconds (their parent-death signal), and the next run takes over its stale lock
  with one line;
- the run resumed after both ends with the uninterrupted run's bits: both exports, every
  logged number.

A shortened math_only (SFT 8 steps → math GRPO 4 steps); each process start costs most of its
time on CPU.
"""
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.launch import job_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
ARGS = [
    "recipes/tiny.py:math_only", "stages.sft.steps=8", "stages.sft.checkpoint_every=2",
    "stages.math.steps=4", "stages.math.checkpoint_every=1", "stages.math.grpo.prompts_per_step=4",
    "stages.math.grpo.group_size=4"]
MARK = "NEMO_CASCADE_TEST_RUN"
"""An environment variable every process of a run inherits: how the test finds them all."""


def _start(root: Path, mark: str) -> subprocess.Popen:
    env = job_env("NEMO_CASCADE_CRASH_AT", "NEMO_CASCADE_RUN_LOCK", **{MARK: mark})
    return subprocess.Popen(
        [sys.executable, "-m", "nemo_cascade.tooling.cli", "run", *ARGS, f"run_root={root}"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _processes(mark: str) -> list[int]:
    """Live (not zombie) processes whose environment carries ``mark``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"{MARK}={mark}".encode() in (entry / "environ").read_bytes().split(b"\0") and \
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _none_left(mark: str, seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := _processes(mark)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry.name.isdigit()
                    and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid):
                out.append(int(entry.name))
        except OSError:
            continue
    return out


def _wait_for(what, seconds: float, proc: subprocess.Popen):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        assert proc.poll() is None, (
            f"the run ended early (rc {proc.returncode}): {proc.communicate()[1][-3000:]}")
        time.sleep(0.1)
    raise AssertionError(f"waited {seconds} s in vain")


def _metrics(run: Path, stage: str) -> list[dict]:
    path = run / "stages" / stage / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return [{k: v for k, v in json.loads(line).items() if not k.startswith("time/") and k not in
             ("tokens_per_s", "sync_mb_per_s")} for line in lines]


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    _, err = proc.communicate(timeout=900)
    return proc.returncode, err


@pytest.fixture
def marks():
    """The marks of the runs this test starts; whatever of them is left at the end (a failure) is
    SIGKILLed."""
    made = []
    yield lambda: made.append(uuid.uuid4().hex) or made[-1]
    for pid in (pid for mark in made for pid in _processes(mark)):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_one_writer_per_run_folder_and_kills_of_launcher_or_worker_resume_bit_exact(
        tmp_path, marks):
    seed = int(os.environ.get("NEMO_CASCADE_TEST_SEED", time.time_ns() % 10**6))
    moment = random.Random(seed)
    print(f"NEMO_CASCADE_TEST_SEED={seed}")  # a failure's kill moment is reproduced with it

    t0 = time.monotonic()
    rc, err = _finish(_start(tmp_path / "straight", marks()))
    assert rc == 0, err[-3000:]
    whole_run_s = time.monotonic() - t0
    straight, run = tmp_path / "straight" / "tiny-math", tmp_path / "broken" / "tiny-math"

    # 1. A second start on a live run's folder refuses in one line; then a worker dies by
    # SIGKILL mid-SFT.
    mark = marks()
    first = _start(tmp_path / "broken", mark)
    worker = _wait_for(lambda: _children(first.pid), 300, first)[0]
    second = _start(tmp_path / "broken", marks())
    rc, err = _finish(second)
    assert rc == 2 and len(err.strip().splitlines()) == 1, err[-3000:]
    assert (err.startswith(f"nemo-cascade: error: {run} is in use by nemo-cascade run on host ")
            and f"pid {first.pid}, since " in err), err
    _wait_for(lambda: len(_metrics(run, "0-sft")) >= 4, 300, first)  # past its checkpoint of step 1
    os.kill(worker, signal.SIGKILL)
    rc, err = _finish(first)
    last = err.rstrip().splitlines()[-1]
    assert rc == 128 + signal.SIGKILL and last.startswith(
        f"nemo-cascade: error: rank 0 (pid {worker}) was killed by SIGKILL"), err[-3000:]
    assert "Traceback" not in err
    assert _none_left(mark) == [], "no process of the run outlives it"
    assert not (run / "run.lock").exists(), "the launcher ended normally: it released the lock"

    # 2. The resumed run's launcher is SIGKILLed at a random moment: its workers go with it.
    mark = marks()
    launcher = _start(tmp_path / "broken", mark)
    _wait_for(lambda: (run / "run.lock").is_file(), 300, launcher)
    time.sleep(moment.uniform(0.0, 0.5 * whole_run_s))
    assert launcher.poll() is None, "the kill came after the run's end: nothing tested"
    workers = _children(launcher.pid)
    launcher.kill()
    launcher.wait()
    assert _none_left(mark, 10.0) == [], f"workers {workers} outlived their SIGKILLed launcher"
    assert (run / "run.lock").is_file(), "kill -9 leaves the lock behind"

    # 3. The next run takes over the dead launcher's lock and ends where the uninterrupted
    # run ended.
    rc, err = _finish(_start(tmp_path / "broken", marks()))
    assert rc == 0, err[-3000:]
    took = [line for line in err.splitlines() if "took over the lock" in line]
    assert (len(took) == 1 and f"pid {launcher.pid}" in took[0]
            and f"no process {launcher.pid}" in took[0]), took
    for stage in ("0-sft", "1-math"):
        assert _metrics(run, stage) == _metrics(straight, stage), f"{stage}: logged numbers"
        assert (run / "stages" / stage / "hf/model.safetensors").read_bytes() == \
            (straight / "stages" / stage / "hf/model.safetensors").read_bytes(), f"{stage}: weights"
    assert not (run / "run.lock").exists()
