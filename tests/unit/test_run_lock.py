"""One writer per run folder (nemo_cascade/tooling/run_lock.py): a second holder is refused naming
the first, a dead holder's lock is taken over — at once on this machine (its PID), after missed
heartbeats from another host — and contenders for a stale lock never both win."""
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nemo_cascade.tooling import run_lock
from nemo_cascade.tooling.run_lock import LOCK_NAME, RunLocked, acquire, me

ROOT = Path(__file__).resolve().parents[2]


def _forge(run_dir: Path, **fields) -> Path:
    """A lock file as another holder would have written it: this process's identity with ``fields``
    changed."""
    run_dir.mkdir(parents=True, exist_ok=True)
    holder = {**me("nemo-cascade run").__dict__, **fields}
    lock = run_dir / LOCK_NAME
    lock.write_text(json.dumps(holder) + "\n")
    return lock


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_second_holder_is_refused_in_one_line_naming_the_first(tmp_path):
    with acquire(tmp_path / "run", "nemo-cascade run") as lock:
        assert lock.owned and (tmp_path / "run" / LOCK_NAME).is_file()
        with pytest.raises(RunLocked) as e:
            acquire(tmp_path / "run", "nemo-cascade run")
    line = str(e.value)
    assert "\n" not in line and f"pid {os.getpid()}" in line and f"host {me('').host}" in line
    assert "since " + time.strftime("%Y-%m-%d") in line and "nemo-cascade run" in line
    assert not (tmp_path / "run" / LOCK_NAME).exists(), "released on exit"
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [], \
        "no candidate or guard file left"


def test_a_dead_holder_on_this_machine_is_taken_over_at_once(tmp_path):
    dead = _dead_pid()
    _forge(tmp_path, pid=dead, start="", token="old")
    notices = []
    t0 = time.monotonic()
    with acquire(tmp_path, "nemo-cascade run", notice=notices.append) as lock:
        assert json.loads((tmp_path / LOCK_NAME).read_text())["token"] == lock.holder.token
    assert time.monotonic() - t0 < 2.0, "judged by its PID, not by waiting out the lease"
    assert len(notices) == 1 and f"pid {dead}" in notices[0] and f"no process {dead}" in notices[0]


def test_a_reused_pid_is_not_mistaken_for_the_holder(tmp_path):
    # this process's PID, but a process started at boot held it
    _forge(tmp_path, start="1", token="old")
    notices = []
    with acquire(tmp_path, "nemo-cascade run", notice=notices.append):
        pass
    assert "its PID was reused" in notices[0]


def test_a_holder_from_before_a_reboot_is_gone(tmp_path):
    _forge(tmp_path, boot_id="another-boot", token="old")
    notices = []
    with acquire(tmp_path, "nemo-cascade run", notice=notices.append):
        pass
    assert "the machine restarted since" in notices[0]


def test_another_hosts_lock_without_beats_is_taken_over_after_the_lease(tmp_path):
    lock = _forge(tmp_path, host="node-elsewhere", pid=1, token="old")
    old = time.time() - 3600
    os.utime(lock, (old, old))
    notices = []
    with acquire(tmp_path, "nemo-cascade run", notice=notices.append):
        pass
    assert "node-elsewhere" in notices[0] and "no heartbeat for" in notices[0]
    # a fresh lock whose holder then stops beating: taken over once the lease (0.2 s × 3) runs out
    _forge(tmp_path, host="node-elsewhere", pid=1, token="old")
    t0 = time.monotonic()
    with acquire(tmp_path, "nemo-cascade run", beat_s=0.2, missed=3, notice=notices.append):
        waited = time.monotonic() - t0
    assert 0.5 < waited < 5.0 and "no heartbeat for" in notices[1]


def test_another_hosts_lock_that_still_beats_is_refused(tmp_path):
    lock = _forge(tmp_path, host="node-elsewhere", pid=4242, token="alive")
    stop = threading.Event()

    def beat():
        while not stop.wait(0.1):
            os.utime(lock)

    thread = threading.Thread(target=beat)
    thread.start()
    try:
        with pytest.raises(RunLocked, match="node-elsewhere, pid 4242"):
            acquire(tmp_path, "nemo-cascade run", beat_s=0.2, missed=10)
    finally:
        stop.set()
        thread.join()
    assert json.loads(lock.read_text())["token"] == "alive", "a live holder's lock is left alone"


def test_the_holder_beats_and_stops_when_its_lock_is_taken(tmp_path):
    lost = []
    lock = acquire(tmp_path, "nemo-cascade run", beat_s=0.1, on_lost=lost.append)
    try:
        path = tmp_path / LOCK_NAME
        past = time.time() - 100
        os.utime(path, (past, past))
        time.sleep(0.5)
        assert path.stat().st_mtime > past + 50, "the heartbeat refreshes the lock's mtime"
        # taken over while this one was frozen
        _forge(tmp_path, host="node-elsewhere", pid=7, token="thief")
        deadline = time.monotonic() + 5
        while not lost and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(lost) == 1 and "node-elsewhere" in lost[0] and "stopping" in lost[0]
    finally:
        lock.release()
    assert json.loads((tmp_path / LOCK_NAME).read_text())["token"] == "thief", \
        "release leaves another's lock"


def test_contenders_for_a_stale_lock_never_both_win(tmp_path):
    """Eight threads of this process race to take over a stale lock; exactly one holds it, the
    others are refused (they then see a live holder: this process)."""
    for round_ in range(5):
        run = tmp_path / str(round_)
        lock = _forge(run, host="node-elsewhere", pid=1, token="old")
        os.utime(lock, (0, 0))
        won, refused, start = [], [], threading.Barrier(8)

        def contend():
            start.wait()
            try:
                won.append(acquire(run, "nemo-cascade run", notice=lambda _: None))
            except RunLocked as e:
                refused.append(str(e))

        threads = [threading.Thread(target=contend) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(won) == 1 and len(refused) == 7, (won, refused)
        assert json.loads(lock.read_text())["token"] == won[0].holder.token
        won[0].release()


def test_the_runs_own_processes_inherit_the_lock(tmp_path, monkeypatch):
    with acquire(tmp_path, "nemo-cascade run") as lock:
        monkeypatch.setenv(run_lock.ENV, lock.env_value)
        child = acquire(tmp_path, "nemo-cascade run")
        assert not child.owned and child.holder.token == lock.holder.token
        child.release()
        assert (tmp_path / LOCK_NAME).is_file(), "an inherited lock is not the child's to remove"
        monkeypatch.setenv(run_lock.ENV, f"{tmp_path / LOCK_NAME}:not-the-holders-token")
        with pytest.raises(RunLocked):
            acquire(tmp_path, "nemo-cascade run")


def _cli(*args, env=None):
    env = {k: v for k, v in {**os.environ, **(env or {})}.items()
           if k not in ("RANK", "TORCHELASTIC_RUN_ID")}
    return subprocess.run([sys.executable, "-m", "nemo_cascade.tooling.cli", *args],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)


def test_run_launch_and_eval_into_a_held_folder_refuse_in_one_line(tmp_path):
    run = tmp_path / "tiny-math"
    stage = run / "stages" / "1-math"
    (stage / "hf").mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    with acquire(run, "nemo-cascade run"):
        for args in (("run", "recipes/tiny.py:math_only", f"run_root={tmp_path}"),
                     ("launch", "recipes/tiny.py:math_only", f"run_root={tmp_path}",
                      "--executor", "local"),
                     ("eval", str(ROOT / "data" / "tiny"), "--suite", "tiny-math",
                      "--out", str(stage))):
            proc = _cli(*args)
            lines = proc.stderr.strip().splitlines()
            assert proc.returncode == 2 and len(lines) == 1, (args, proc.stderr[-3000:])
            assert lines[0].startswith(
                f"nemo-cascade: error: {run} is in use by nemo-cascade run on host "
                f"{me('').host}, pid {os.getpid()}, since "), lines
    assert sorted(p.name for p in run.iterdir()) == ["manifest.json", "stages"], \
        "the refused wrote nothing"
    assert sorted(p.name for p in stage.iterdir()) == ["hf"]
