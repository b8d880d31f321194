"""Killable worker pool: results in order, hard timeouts, crashed and killed workers replaced, no
zombies.

The functions run in the workers are from the standard library (``operator.add``, ``time.sleep``,
``os._exit``, ``int``), so each behaviour is produced exactly, with no test helper module to import.
"""
import operator
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from nemo_cascade.rewards.workers import ItemResult, WorkerPool

pytestmark = pytest.mark.timeout(120)


def _alive(pid: int) -> bool:
    """True while ``pid`` runs or lingers unreaped (a zombie is exactly what must not remain)."""
    return os.path.exists(f"/proc/{pid}")


def _running(pid: int) -> bool:
    """True while ``pid`` runs; a zombie no longer does (its reaper may be outside our control)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_until(condition, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.fixture
def add_pool():
    pool = WorkerPool(operator.add, num_workers=2, timeout_s=30)
    yield pool
    pool.close()


def test_results_in_input_order(add_pool):
    assert add_pool.pids == []  # lazily started
    results = add_pool.map([(i, 1000) for i in range(50)])
    assert [r.value for r in results] == [i + 1000 for i in range(50)]
    assert all(r.ok and r.status == "ok" for r in results)
    assert len(add_pool.pids) == 2
    assert add_pool.map([]) == []


def test_timeout_kills_and_replaces_the_worker():
    with WorkerPool(time.sleep, num_workers=1, timeout_s=0.5) as pool:
        assert pool.map([(0,)])[0].ok
        (old_pid,) = pool.pids
        results = pool.map([(60,), (0,)])  # the second item must wait for the replacement worker
        assert results[0].status == "timeout" and not results[0].ok
        assert results[1] == ItemResult("ok", None)
        (new_pid,) = pool.pids
        assert new_pid != old_pid and not _alive(old_pid)  # killed and reaped
        assert pool.counts["timeout"] == 1


def test_per_call_timeout_overrides_the_pool_default():
    with WorkerPool(time.sleep, num_workers=1, timeout_s=0.3) as pool:
        assert pool.map([(1.0,)], timeout_s=30)[0].ok
        assert pool.map([(1.0,)])[0].status == "timeout"


def test_crash_mid_item_is_reported_and_the_next_item_still_runs():
    with WorkerPool(os._exit, num_workers=1, timeout_s=30) as pool:
        results = pool.map([(3,), (4,)])
        assert [r.status for r in results] == ["crashed", "crashed"]
        assert len(pool.pids) == 1 and _alive(pool.pids[0])


def test_worker_killed_while_idle_is_replaced_and_the_item_runs(add_pool):
    add_pool.map([(1, 1)])
    victim = add_pool.pids[0]
    os.kill(victim, signal.SIGKILL)
    assert _wait_until(lambda: not _running(victim))
    # the dead worker is found on send: not the item's fault
    results = add_pool.map([(i, i) for i in range(6)])
    assert [r.value for r in results] == [2 * i for i in range(6)]
    assert victim not in add_pool.pids and not _alive(victim)


def test_exception_is_an_error_result_and_the_worker_survives():
    with WorkerPool(int, num_workers=1, timeout_s=30) as pool:
        assert pool.map([("1",)])[0].value == 1
        first = pool.pids
        bad, good = pool.map([("not a number",), ("42",)])
        assert bad.status == "error" and "ValueError" in bad.detail
        assert good == ItemResult("ok", 42)
        assert pool.pids == first  # no replacement for an ordinary exception


def test_memory_limit_turns_a_huge_allocation_into_an_error():
    with WorkerPool(bytearray, num_workers=1, timeout_s=30, memory_limit_mb=512) as pool:
        big, small = pool.map([(4 << 30,), (16,)])
        assert big.status == "error" and "MemoryError" in big.detail
        assert small.ok and small.value == bytearray(16)


def test_close_reaps_every_worker_and_the_pool_restarts(add_pool):
    add_pool.map([(1, 2)] * 4)
    pids = add_pool.pids
    add_pool.close()
    assert add_pool.pids == [] and not any(_alive(p) for p in pids)
    assert add_pool.map([(2, 3)])[0].value == 5  # usable again: new workers


def test_concurrent_maps_from_threads(add_pool):
    outputs = {}

    def run(offset):
        outputs[offset] = [r.value for r in add_pool.map([(offset, i) for i in range(20)])]

    threads = [threading.Thread(target=run, args=(k * 100,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outputs == {k * 100: [k * 100 + i for i in range(20)] for k in range(3)}


def test_rejects_functions_defined_in_main_and_bad_sizes():
    def local():
        pass
    local.__module__ = "__main__"
    with pytest.raises(ValueError, match="__main__"):
        WorkerPool(local)
    with pytest.raises(ValueError, match="timeout_s"):
        WorkerPool(operator.add, timeout_s=0)


def test_failing_initializer_is_a_clear_error():
    # no children: ChildProcessError
    pool = WorkerPool(operator.add, num_workers=1, initializer=os.wait)
    with pytest.raises(RuntimeError, match="setup failed: ChildProcessError"):
        pool.map([(1, 1)])
    pool.close()


def _run_child(code: str) -> list[int]:
    """Run ``code`` in a fresh interpreter; it prints worker pids on its last line."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=90, cwd=os.getcwd())
    assert out.returncode in (0, -signal.SIGKILL), out.stderr
    return [int(p) for p in out.stdout.split()]


def test_no_worker_outlives_an_interpreter_that_exits_without_closing():
    pids = _run_child("""
        import operator
        from nemo_cascade.rewards.workers import WorkerPool
        pool = WorkerPool(operator.add, num_workers=2)
        assert pool.map([(1, 2)])[0].value == 3
        print(*pool.pids)
    """)
    assert len(pids) == 2
    assert _wait_until(lambda: not any(_alive(p) for p in pids))


def test_workers_exit_when_their_parent_is_killed():
    pids = _run_child("""
        import operator, os, signal, sys
        from nemo_cascade.rewards.workers import WorkerPool
        pool = WorkerPool(operator.add, num_workers=2)
        pool.map([(1, 2)])
        print(*pool.pids, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no atexit, no finalizers: only the pipes tell the \
workers
    """)
    assert len(pids) == 2
    assert _wait_until(lambda: not any(_running(p) for p in pids))
