"""The stall watchdog (heartbeat.py): a rank whose phase has not advanced for its limit is found,
the rank with the oldest beat of all is named, every rank stops for it; a process stalled by the
fault point dumps its threads' stacks into its log, says the stall in one console line and exits 75.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from nemo_cascade import config
from nemo_cascade.runtime import heartbeat
from nemo_cascade.runtime.heartbeat import STALL_EXIT, Heartbeat


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_phase_is_stalled_past_its_limit_and_its_limit_grows_with_what_it_has_shown(tmp_path):
    clock = Clock()
    hb = Heartbeat(tmp_path, 0, limit_seconds=60, poll_seconds=1, clock=clock)
    hb.enter("generate", "stage math, step 1 of 4")
    clock.now += 50
    assert hb.check() is None
    hb.advance()  # a finished group
    clock.now += 59
    assert hb.check() is None
    hb.enter("score")
    clock.now += 40
    hb.enter("generate")
    clock.now += 30
    hb.advance()
    # each phase's longest gap, tripled
    assert hb.limit_of("generate") == 3 * 59 and hb.limit_of("score") == 3 * 40
    assert hb.limit_of("train") == 60  # none seen yet: the setting
    clock.now += 177
    assert hb.check() is None
    clock.now += 1
    stall = hb.check()
    assert stall["rank"] == 0 and stall["phase"] == "generate" and stall["seconds"] == 178
    assert stall["detail"] == "stage math, step 1 of 4"


def test_a_beat_on_a_full_disk_is_skipped_and_the_stall_still_found(tmp_path, monkeypatch):
    import errno
    from pathlib import Path

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    clock = Clock()
    hb = Heartbeat(tmp_path, 0, limit_seconds=60, poll_seconds=1, clock=clock)
    monkeypatch.setattr(Path, "write_text", full)
    hb.enter("save", "stage sft, step 8 of 12")  # no beat written, no error
    assert not (tmp_path / "heartbeats" / "rank0.json").exists()
    clock.now += 61
    stall = hb.check()
    assert (stall["rank"], stall["phase"], stall["seconds"]) == (0, "save", 61)


def test_the_oldest_beat_of_all_ranks_is_the_stalled_rank_and_every_rank_stops_for_it(tmp_path):
    clock = Clock()
    ranks = [Heartbeat(tmp_path, r, limit_seconds=60, poll_seconds=1, clock=clock)
             for r in range(3)]
    for hb in ranks:
        hb.enter("generate", "stage math, step 3 of 8")
    clock.now += 10
    ranks[0].enter("score")  # ranks 0 and 2 generated and wait in the scoring exchange ...
    ranks[2].enter("score")
    clock.now += 61  # ... for rank 1, whose generation never returns
    stall = ranks[0].check()  # rank 0's own wait is past its limit: it names rank 1
    assert (stall["rank"], stall["phase"], stall["seconds"]) == (1, "generate", 71)
    assert json.loads((tmp_path / "heartbeats" / "stall.json").read_text())["rank"] == 1
    assert ranks[2].check()["rank"] == 1 and ranks[1].check()["rank"] == 1  # the others read it
    line = heartbeat.stall_line(stall, tmp_path)
    assert line.startswith("rank 1 on ")
    assert "stalled in phase generate (stage math, step 3 of 8)" in line
    assert f"exit {STALL_EXIT}" in line and "\n" not in line


def test_a_rank_waiting_for_one_that_still_advances_is_not_stalled(tmp_path):
    """Rank 0 generated its share and waits in a collective while rank 1 still decodes its longest
    answers: rank 0's own beat is past the limit, but rank 1's is fresh, so nothing stops. When rank
    1 stops beating, every beat grows old and rank 1 (the oldest) is named."""
    clock = Clock()
    waiting, decoding = (Heartbeat(tmp_path, r, limit_seconds=60, poll_seconds=1, clock=clock)
                         for r in (0, 1))
    waiting.enter("generate", "stage math, step 2 of 8")
    decoding.enter("generate", "stage math, step 2 of 8")
    waiting.enter("score")  # done generating: waits for rank 1's groups
    for _ in range(30):  # rank 1's engine steps, 10 s apart: 300 s
        clock.now += 10
        decoding.advance()
    assert waiting.check() is None and decoding.check() is None
    assert not (tmp_path / "heartbeats" / "stall.json").exists()
    clock.now += 61  # rank 1's engine hangs
    stall = waiting.check()
    assert (stall["rank"], stall["phase"], stall["seconds"]) == (1, "generate", 61)


def test_a_stall_of_an_earlier_job_is_not_this_jobs(tmp_path):
    clock = Clock()
    old = Heartbeat(tmp_path, 0, limit_seconds=1, poll_seconds=1, clock=clock)
    clock.now += 5
    assert old.check()["rank"] == 0
    clock.now += 600
    new = Heartbeat(tmp_path, 0, limit_seconds=60, poll_seconds=1, clock=clock)
    assert new.check() is None
    new.enter("train", "stage sft, step 5 of 12")
    clock.now += 61
    assert new.check()["detail"] == "stage sft, step 5 of 12"  # its own stall, not the old record


def test_a_stalled_process_dumps_its_stacks_says_so_in_one_line_and_exits_75(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from nemo_cascade.runtime import heartbeat
        from nemo_cascade.cascade.metrics import PhaseTimer
        with heartbeat.watching(Path({str(tmp_path)!r}), 0, stall_minutes=1.5 / 60):
            timer = PhaseTimer()
            with timer("generate"):
                pass
            with timer("score"):  # NEMO_CASCADE_STALL_AT=score: sleeps for good
                pass
        sys.exit(1)
    """)
    log = tmp_path / "rank0.log"
    with open(log, "w") as err:
        proc = subprocess.run([sys.executable, "-c", code], stderr=err, stdout=subprocess.PIPE,
                              text=True, timeout=120,
                              env={**_env(), "NEMO_CASCADE_STALL_AT": "score"})
    assert proc.returncode == STALL_EXIT
    text = log.read_text()
    line = [t for t in text.splitlines() if t.startswith("nemo-cascade: error: ")]
    assert len(line) == 1 and "rank 0 on " in line[0] and "stalled in phase score" in line[0], text
    assert "Thread 0x" in text and "stall_point" in text and "stall-watchdog" not in line[0], text


def _env() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if k not in ("RANK", "NEMO_CASCADE_STALL_AT")}


def test_the_watchdog_must_end_a_stall_before_the_collective_timeout():
    from nemo_cascade.config.checks import validate_parallel_settings

    for minutes in (0, 20, 119.5):
        validate_parallel_settings(config.Model(), config.Parallel(stall_minutes=minutes))
    for minutes in (120, -1, float("nan")):
        with pytest.raises(config.ConfigError, match=r"parallel.stall_minutes: expected minutes"):
            validate_parallel_settings(config.Model(), config.Parallel(stall_minutes=minutes))


def test_a_fault_point_fires_on_its_visit_and_rank_only(monkeypatch):
    from nemo_cascade.runtime import faults

    monkeypatch.setattr(faults, "_visits", {})
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv(faults.STALL_ENV, "score:2@1")
    assert [faults._due(faults.STALL_ENV, "score") for _ in range(3)] == [False, True, False]
    assert not faults._due(faults.STALL_ENV, "train")
    monkeypatch.setenv("RANK", "0")
    assert not any(faults._due(faults.STALL_ENV, "score") for _ in range(3))
    monkeypatch.setenv(faults.ENV, "nowhere")
    with pytest.raises(ValueError, match="unknown point 'nowhere'; expected one of generate"):
        faults.crash_point("train")
