"""The job's end (runtime/deadline.py): read from the environment or Slurm, and a stop due when only
the save fits."""
import os
import stat
import time
from datetime import datetime

import pytest

from nemo_cascade.runtime import deadline
from nemo_cascade.runtime.deadline import Deadline, job_end_time
from nemo_cascade.errors import CascadeError
from nemo_cascade.cascade.saves import Saves


@pytest.fixture
def no_job(monkeypatch):
    for name in ("NEMO_CASCADE_JOB_END", "SLURM_JOB_END_TIME", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_no_job_no_end(no_job):
    assert job_end_time() is None
    assert Deadline(None, 60).describe().startswith("no job end known")
    assert not Deadline(None, 60).due(1e9)


def test_the_end_from_the_environment_first(no_job):
    no_job.setenv("SLURM_JOB_END_TIME", "2000")
    assert job_end_time() == 2000.0
    no_job.setenv("NEMO_CASCADE_JOB_END", "1000.5")
    assert job_end_time() == 1000.5
    no_job.setenv("NEMO_CASCADE_JOB_END", "tomorrow")
    with pytest.raises(CascadeError,
                       match="NEMO_CASCADE_JOB_END='tomorrow': expected seconds since the epoch"):
        job_end_time()


def _fake_squeue(tmp_path, monkeypatch, prints: str):
    script = tmp_path / "squeue"
    script.write_text(f"#!/bin/sh\n[ \"$3\" = 42 ] && [ \"$5\" = %e ] && echo '{prints}'\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


def test_a_slurm_job_s_end_from_squeue(no_job, tmp_path):
    no_job.setenv("SLURM_JOB_ID", "42")
    _fake_squeue(tmp_path, no_job, "2026-12-05T14:59:30")
    assert job_end_time() == datetime(2026, 12, 5, 14, 59, 30).timestamp()
    _fake_squeue(tmp_path, no_job, "N/A")  # no time limit
    assert job_end_time() is None


def test_the_stop_is_due_when_work_plus_save_plus_margin_reach_the_end():
    end = time.time() + 1000
    d = Deadline(end, margin_seconds=100)
    assert not d.due() and not d.due(800) and d.due(950)
    d.measured_save(300)
    d.measured_save(200)  # the longest save counts
    assert d.save_seconds == 300 and d.due(650) and not d.due(500)
    assert ("save 300 s measured + margin 100 s" in d.describe("90")
            and "(STOP_GRACE)" in d.describe("90"))
    assert Deadline(time.time() - 1, 0).due()


def test_saves_stop_when_the_deadline_is_near_and_say_why(tmp_path, monkeypatch):
    saves = Saves(tmp_path, every=0, keep=1, run_dir=tmp_path,
                  deadline=Deadline(time.time() + 50, 60))
    assert saves.stop_due() and saves.stop_reason().startswith("before the job's end at 20")
    later = Saves(tmp_path, every=0, keep=1, run_dir=tmp_path,
                  deadline=Deadline(time.time() + 500, 60))
    assert not later.stop_due() and later.stop_due(work_seconds=450), \
        "an update that would end too late"


def test_a_save_is_timed_and_its_time_travels_with_the_checkpoint(tmp_path, monkeypatch):
    written = {}

    def save(root, step, actor, state, keep, rng):
        written.update(state)
        time.sleep(0.01)
        return root / f"step_{step:06d}"

    monkeypatch.setattr(deadline.time, "time", time.time)  # the real clock
    from nemo_cascade.cascade import saves as saves_module

    monkeypatch.setattr(saves_module.checkpoint, "save", save)
    d = Deadline(time.time() + 1e6, 60, save_seconds=7)
    Saves(tmp_path, every=0, keep=1, deadline=d)._save(3, None, {"pos": 1})
    assert written == {"data": {"pos": 1}, "save_seconds": 7} and d.save_seconds == 7
    fresh = Deadline(time.time() + 1e6, 60)
    Saves(tmp_path, every=0, keep=1, deadline=fresh)._save(4, None, {})
    assert fresh.save_seconds == 1, "whole seconds, rounded up"


def test_a_supervised_step_that_would_end_too_late_is_not_started(tmp_path, monkeypatch):
    """SFT and RM steps cannot stop midway: after a step, the run stops (saving) if the next one, as
    long as this one, would end past the time to save."""
    from nemo_cascade.cascade import saves as saves_module
    from nemo_cascade.runtime.stop_request import StopRequested

    saved = []
    monkeypatch.setattr(saves_module.checkpoint, "save",
                        lambda root, step, actor, state, keep, rng: saved.append(step) or root)
    s = Saves(tmp_path, every=0, keep=1, deadline=Deadline(time.time() + 1000, margin_seconds=100))
    s.after(3, 10, None, {}, "0-sft", next_step_seconds=600)  # 600 s more still leaves the margin
    assert saved == []
    with pytest.raises(StopRequested,
                       match=r"stopped before the job's end at [-\d]+ [:\d]+ after step 4 of"):
        s.after(4, 10, None, {}, "0-sft", next_step_seconds=950)
    assert saved == [4]
