"""When a stage saves: every N steps, after checkpoint_every_minutes of wall time, and on a stop
request (the file a Slurm job's time-limit signal becomes), after which the run ends; and how
`nemo-cascade run` turns its own SIGUSR1 into that request. The saves themselves are
checkpoint.save's (its own tests); here they are recorded."""
import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from nemo_cascade import config
from nemo_cascade.cascade import stage
from nemo_cascade.cascade.saves import Saves
from nemo_cascade.cascade.saves import time as saves_time
from nemo_cascade.runtime import stop_request
from nemo_cascade.rewards.http_endpoint import RewardServerError


@pytest.fixture
def saved(monkeypatch):
    steps = []

    def save(root, step, actor, state, keep=2, rng=None):
        steps.append(step)
        return Path(root) / f"step_{step:06d}"

    monkeypatch.setattr(stage.checkpoint, "save", save)
    return steps


def _run(saves: Saves, total: int, before_step=lambda step: None) -> list[int]:
    for step in range(total):
        before_step(step)
        saves.after(step, total, actor=None, data_state={"pos": step}, stage="1-math")


def test_saves_every_n_steps_but_not_after_the_last(tmp_path, saved):
    _run(Saves(tmp_path, every=3, keep=2, run_dir=tmp_path), total=9)
    assert saved == [2, 5], "step 8 is the last: the stage's export follows it"


def test_saves_by_wall_time(tmp_path, saved, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(saves_time, "monotonic", lambda: clock[0])
    saves = Saves(tmp_path, every=0, keep=2, every_minutes=10, run_dir=tmp_path)

    def tick(step):  # each step takes 4 minutes
        clock[0] += 240

    _run(saves, total=12, before_step=tick)
    assert saved == [2, 5, 8], \
        "a save once 10 minutes have passed since the last one (12, 12, 12 min)"
    assert saves.saved_step == 8


def test_a_stop_request_saves_that_step_and_stops(tmp_path, saved):
    def request_at_3(step):
        if step == 3:
            stop_request.request(tmp_path, "SIGUSR1 to job 7")

    with pytest.raises(stop_request.StopRequested) as e:
        _run(Saves(tmp_path / "checkpoint", every=2, keep=2, run_dir=tmp_path), total=10,
             before_step=request_at_3)
    assert saved == [1, 3]
    assert str(e.value) == (
        f"stopped on request (SIGUSR1 to job 7) after step 3 of stage 1-math; state saved in "
        f"{tmp_path / 'checkpoint' / 'step_000003'}; run the same command again to continue")


def test_a_stop_request_at_the_last_step_still_saves(tmp_path, saved):
    """Without the save the last step's work would be lost: the export comes after the check."""
    stop_request.request(tmp_path, "x")
    with pytest.raises(stop_request.StopRequested):
        Saves(tmp_path, every=0, keep=2, run_dir=tmp_path).after(4, 5, None, {})
    assert saved == [4]


def test_before_stop_saves_only_what_is_not_saved_yet(tmp_path, saved):
    saves = Saves(tmp_path, every=2, keep=2, run_dir=tmp_path)
    _run(saves, total=4)  # saves step 1
    assert "state after step 1 saved in" in saves.before_stop(2, 0, None, {}, {}) and saved == [1]
    assert ("state after step 2 saved in" in saves.before_stop(3, 0, None, {}, {})
            and saved == [1, 2])


def test_a_failed_reward_server_saves_the_state_its_step_began_with(tmp_path, saved):
    """A reward server gone after its retries in step 4 (stage._stop_for_server): the state after
    step 3 is saved, the metrics log closed, and the run ends with one line saying where the state
    is and how to resume."""
    closed = []
    ctx = stage.StageContext(None, None, 0, tmp_path,
                             SimpleNamespace(close=lambda: closed.append(True)),
                             Saves(tmp_path / "checkpoint", every=0, keep=2))
    error = stage._stop_for_server(ctx, SimpleNamespace(name="rlhf"),
                                   RewardServerError("http://rm/classify: gone"), 4, 0,
                                   ({"pos": 4}, {}))
    assert isinstance(error, stage.ServerStop) and saved == [3] and closed == [True]
    assert str(error) == (
        f"http://rm/classify: gone; stopped in step 4 of stage rlhf, state after step 3 saved in "
        f"{tmp_path / 'checkpoint' / 'step_000003'}; run the same command again to resume once the "
        "server answers")


def test_the_launcher_turns_sigusr1_into_a_request_and_drops_an_old_one(tmp_path, monkeypatch):
    from nemo_cascade.tooling import cli

    cfg = config.Cascade(name="r", run_root=str(tmp_path))
    stop_request.request(tmp_path / "r", "an earlier job's")
    previous = signal.getsignal(signal.SIGUSR1)
    try:
        cli._stop_on_usr1(cfg)
        assert not stop_request.requested(tmp_path / "r"), \
            "an old request must not stop the resumed run"
        os.kill(os.getpid(), signal.SIGUSR1)
        deadline = time.monotonic() + 5
        while not stop_request.requested(tmp_path / "r"):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert stop_request.reason(tmp_path / "r") == "SIGUSR1 to nemo-cascade run"
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_stop_inside_a_gate_row_ends_the_run_as_after_a_step(tmp_path):
    """forgetting.Gate.evaluate_row: the row's finished items are kept (row_progress.py) and the run
    ends with StopRequested, naming why and where the items are."""
    from nemo_cascade.runtime.deadline import Deadline
    from nemo_cascade.evaluate.runner import GateStopped
    from nemo_cascade.cascade.forgetting import Gate

    gate, seen = object.__new__(Gate), []

    def evaluate(engine, row, weights, rm_url, only_pairwise, should_stop):
        seen.append(should_stop())
        raise GateStopped("suite gsm8k, after 64 of its 128 items here")

    gate.evaluate = evaluate
    stop_request.request(tmp_path, "SIGUSR1 to job 9")
    with pytest.raises(stop_request.StopRequested) as e:
        gate.evaluate_row(None, tmp_path / "stages/0-sft", "w", "", False, tmp_path,
                          Deadline(None, 0))
    assert seen == [True] and str(e.value) == (
        "stopped on request (SIGUSR1 to job 9) in the gate of 0-sft, suite gsm8k, after 64 of its "
        "128 items here; its finished items are kept in "
        f"{tmp_path / 'stages/0-sft/eval_partial'}; run the same command again to continue")
    stop_request.clear(tmp_path)
    with pytest.raises(stop_request.StopRequested,
                       match=r"stopped before the job.s end at 19\d\d-"):
        gate.evaluate_row(None, tmp_path / "base", "w", "", False, tmp_path, Deadline(10.0, 0))
