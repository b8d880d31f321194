"""One writer per run folder: how fast the run lock answers and how fast a SIGKILLed launcher's
workers go.

- **workers after a launcher's SIGKILL**: a launcher stand-in starts a worker in a session of its
  own (as torchrun does) that binds itself with ``parent_death.bind_worker``; the launcher is
  SIGKILLed and the time until the worker is gone is measured (``--repeats`` times); the same
  without the binding is the control (the worker must still be alive 3 s later: what the issue saw).
- **lock answers** (``run_lock.acquire`` in a temporary folder): taking a free lock; refusing a live
  holder on this machine; taking over a dead one (its PID); taking over another host's lock whose
  last beat is an hour old; refusing another host's lock that still beats (the default 5 s beat: the
  contender waits for one).

Prints the figures and appends a record to ``bench/results/run_lock.jsonl``; docs/reliability.md
quotes them.

    .venv/bin/python bench/run_lock.py [--repeats 10]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "run_lock.jsonl"
PARENT = """
import os, subprocess, sys, time
env = dict(os.environ, NEMO_CASCADE_AGENT_PID=str(os.getpid()))
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], env=env, start_new_session=True)
print(child.pid, flush=True)
time.sleep(600)
"""
BOUND = ("from nemo_cascade.runtime import parent_death; parent_death.bind_worker(); "
         "print(flush=True); import time; time.sleep(600)")


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def worker_outlives(bind: bool) -> float | None:
    """Seconds from the launcher's SIGKILL until its worker is gone; None if it is still alive after
    3 s."""
    worker = BOUND if bind else "import time; time.sleep(600)"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, worker], stdout=subprocess.PIPE,
                              text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    child = int(parent.stdout.readline())
    time.sleep(1.5)  # bound by now (a start under load takes well under a second)
    t0 = time.perf_counter()
    parent.kill()
    parent.wait()
    while _alive(child) and time.perf_counter() - t0 < 3.0:
        time.sleep(0.001)
    gone = None if _alive(child) else time.perf_counter() - t0
    if gone is None:
        os.kill(child, 9)
    return gone


def lock_answers() -> dict:
    from nemo_cascade.tooling.run_lock import LOCK_NAME, RunLocked, acquire, me

    def timed(fn) -> float:
        t0 = time.perf_counter()
        fn()
        return round((time.perf_counter() - t0) * 1000, 2)

    def forge(d: Path, **fields) -> Path:
        d.mkdir(parents=True, exist_ok=True)
        (d / LOCK_NAME).write_text(json.dumps({**me("nemo-cascade run").__dict__, **fields}))
        return d / LOCK_NAME

    def refused(d: Path) -> None:
        try:
            acquire(d, "bench")
        except RunLocked:
            return
        raise AssertionError("not refused")

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        out["take_free_ms"] = timed(lambda: acquire(tmp / "free", "bench").release())
        held = acquire(tmp / "held", "bench")
        out["refuse_live_here_ms"] = timed(lambda: refused(tmp / "held"))
        held.release()
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        forge(tmp / "dead", pid=dead.pid, start="", token="old")
        out["take_over_dead_here_ms"] = timed(
            lambda: acquire(tmp / "dead", "bench", notice=lambda _: None).release())
        old = time.time() - 3600
        os.utime(forge(tmp / "stale", host="elsewhere", pid=1, token="old"), (old, old))
        out["take_over_stale_elsewhere_ms"] = timed(
            lambda: acquire(tmp / "stale", "bench", notice=lambda _: None).release())
        lock, stop = (forge(tmp / "beating", host="elsewhere", pid=1, token="alive"),
                      threading.Event())
        beats = threading.Thread(
            target=lambda: [os.utime(lock) for _ in iter(lambda: stop.wait(5.0), True)])
        beats.start()
        out["refuse_beating_elsewhere_ms"] = timed(lambda: refused(tmp / "beating"))
        stop.set()
        beats.join()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    bound = [worker_outlives(True) for _ in range(args.repeats)]
    control = [worker_outlives(False) for _ in range(3)]
    ms = [round(s * 1000, 1) for s in bound if s is not None]
    record = {"date": time.strftime("%Y-%m-%d"), "host": platform.node(),
              "load1": round(os.getloadavg()[0], 1),
              "workers": {"bound_gone": len(ms), "bound_tried": len(bound),
                          "gone_ms_median": statistics.median(ms) if ms else None,
                          "gone_ms_max": max(ms, default=None),
                          "unbound_still_alive_after_3s": sum(s is None for s in control),
                          "unbound_tried": len(control)},
              "lock": lock_answers()}
    print(json.dumps(record, indent=1))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as f:
        f.write(json.dumps(record) + "\n")
    return 0 if len(ms) == len(bound) else 1


if __name__ == "__main__":
    sys.exit(main())
