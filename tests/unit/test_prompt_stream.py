"""The prompt stream (data/prompt_stream.py): seeded epochs, exact resume, half-half modes (§4.3.2)
and epoch-level filtering (§4.5.2)."""
import json

import pytest

from nemo_cascade.data.prompt_stream import PromptStream
from nemo_cascade.data.rows import DataError
from nemo_cascade.types import Prompt, PromptGroup


def _prompts(n):
    return [Prompt(prompt_tokens=[i], domain="math", label=str(i), uid=f"u{i}") for i in range(n)]


def test_stream_visits_every_prompt_once_per_epoch():
    stream = PromptStream(_prompts(10), seed=3)
    first, second = stream.next_batch(10), stream.next_batch(10)
    assert (sorted(p.uid for p in first) == sorted(p.uid for p in second)
            == sorted(f"u{i}" for i in range(10)))
    assert [p.uid for p in first] != [p.uid for p in second]  # reshuffled per epoch (seed + epoch)
    assert stream.epoch == 1
    assert ([p.uid for p in PromptStream(_prompts(10), seed=3).next_batch(10)]
            == [p.uid for p in first])
    assert ([p.uid for p in PromptStream(_prompts(10), seed=4).next_batch(10)]
            != [p.uid for p in first])


def test_stream_resume_draws_the_same_batches():
    prompts = _prompts(7)  # batches of 3 cross epoch boundaries
    ref = PromptStream(prompts, seed=11)
    batches = [[p.uid for p in ref.next_batch(3)] for _ in range(5)]
    run = PromptStream(prompts, seed=11)
    run.next_batch(3), run.next_batch(3)
    state = json.loads(json.dumps(run.state_dict()))  # survives a checkpoint round trip
    resumed = PromptStream(prompts, seed=11)
    resumed.load_state_dict(state)
    assert [[p.uid for p in resumed.next_batch(3)] for _ in range(3)] == batches[2:]


def test_stream_refuses_other_data():
    state = PromptStream(_prompts(7), seed=0).state_dict()
    with pytest.raises(DataError, match="resume"):
        PromptStream(_prompts(8), seed=0).load_state_dict(state)
    with pytest.raises(DataError, match="no prompts"):
        PromptStream([], seed=0)


# ------------------------------------------------------------------------ half-half modes (§4.3.2)

def _half_stream(n, seed=0):
    think = [Prompt(prompt_tokens=[i], domain="math", label="", mode="think", uid=f"u{i}")
             for i in range(n)]
    no_think = [Prompt(prompt_tokens=[i, 0], domain="math", label="", mode="no_think", uid=f"u{i}")
                for i in range(n)]
    return PromptStream(think, seed=seed, alternate=no_think)


def test_stream_alternates_modes_so_every_even_batch_is_half_half():
    stream = _half_stream(7, seed=2)
    # odd sizes, across epochs
    draws = stream.next_batch(3) + stream.next_batch(3) + stream.next_batch(8)
    assert [p.mode for p in draws] == ["think", "no_think"] * 7
    for size in (4, 6, 2):  # any even batch, wherever it starts, is exactly half-half
        batch = stream.next_batch(size)
        assert sum(p.mode == "think" for p in batch) == size // 2
    first = _half_stream(7, seed=2).next_batch(7)
    # still every row once per epoch
    assert sorted(p.uid for p in first) == [f"u{i}" for i in range(7)]
    assert all(p.prompt_tokens == ([int(p.uid[1:])] if p.mode == "think" else [int(p.uid[1:]), 0])
               for p in first)
    with pytest.raises(DataError, match="index-aligned"):
        PromptStream(_prompts(3), alternate=_prompts(2))


# ------------------------------------------------------------------- epoch-level filtering (§4.5.2)

def _scored(prompt, rewards):
    return PromptGroup(prompt=prompt, response_tokens_G_T=[[1]] * len(rewards),
                       rollout_logprobs_G_T=[[0.0]] * len(rewards),
                       finish_reason_G=["stop"] * len(rewards), rewards_G=rewards)


# rows 0-2 unsolved (0 %), 3-4 solved (100 %; a -1 penalty is not correct), 5-9 mixed
def _outcome(uid):
    k = int(uid[1:])
    return [0.0, -1.0, 0.0] if k < 3 else [1.0, 1.0, 1.0] if k < 5 else [1.0, 0.0, -1.0]


def _run_epoch(stream, n):
    batch = stream.next_batch(n)
    stream.record([_scored(p, _outcome(p.uid)) for p in batch])
    return batch


def test_epoch_filter_removes_solved_and_unsolved_rows_from_the_next_epoch():
    stream = PromptStream(_prompts(10), seed=1, epoch_filter=(0.0, 0.0))
    _run_epoch(stream, 10)
    assert stream.metrics() == {
        "epoch": 0.0, "epoch_filter/kept": 10.0, "epoch_filter/removed": 0.0,
        "epoch_filter/readmitted": 0.0}
    epoch1 = stream.next_batch(5)
    assert sorted(p.uid for p in epoch1) == [f"u{i}" for i in range(5, 10)]
    assert stream.metrics() == {"epoch": 1.0, "epoch_filter/kept": 5.0, "epoch_filter/removed": 5.0,
                                "epoch_filter/readmitted": 0.0}
    assert stream.next_batch(1)[0].uid in {f"u{i}" for i in range(5, 10)} and stream.epoch == 2
    every = PromptStream(_prompts(10), seed=1, epoch_filter=(1.0, 1.0))  # p = 1: all re-admitted
    _run_epoch(every, 10)
    assert (len({p.uid for p in every.next_batch(10)}) == 10
            and every.metrics()["epoch_filter/readmitted"] == 5)
    plain = PromptStream(_prompts(10), seed=1)  # no filter: record is a no-op, order as before
    _run_epoch(plain, 10)
    assert (len({p.uid for p in plain.next_batch(10)}) == 10
            and "epoch_filter/kept" not in plain.metrics())


def test_epoch_filter_readmission_rates_are_the_configured_probabilities():
    prompts = _prompts(4000)  # 0-1999 all wrong, 2000-3999 all right
    stream = PromptStream(prompts, seed=7, epoch_filter=(0.10, 0.01))
    stream.record([_scored(p, [0.0, 0.0] if int(p.uid[1:]) < 2000 else [1.0, 1.0])
                   for p in stream.next_batch(4000)])
    epoch1 = {int(p.uid[1:]) for p in stream.next_batch(1)} | {
        int(p.uid[1:]) for p in stream.next_batch(int(stream.metrics()["epoch_filter/kept"]) - 1)}
    unsolved, solved = sum(k < 2000 for k in epoch1), sum(k >= 2000 for k in epoch1)
    # Binomial(2000, 0.10): mean 200, sd 13.4; Binomial(2000, 0.01): mean 20, sd 4.4 (seeded:
    # deterministic)
    assert 160 <= unsolved <= 240 and 8 <= solved <= 32, (unsolved, solved)
    again = PromptStream(prompts, seed=7, epoch_filter=(0.10, 0.01))
    again.record([_scored(p, [0.0, 0.0] if int(p.uid[1:]) < 2000 else [1.0, 1.0])
                  for p in again.next_batch(4000)])
    assert {int(p.uid[1:]) for p in again.next_batch(len(epoch1))} == epoch1


def test_epoch_filter_keeps_everything_rather_than_starve():
    stream = PromptStream(_prompts(4), seed=0, epoch_filter=(0.0, 0.0))
    stream.record([_scored(p, [1.0, 1.0]) for p in stream.next_batch(4)])
    assert (len({p.uid for p in stream.next_batch(4)}) == 4
            and stream.metrics()["epoch_filter/kept"] == 4)


def test_epoch_filter_state_resumes_exactly():
    ref = PromptStream(_prompts(10), seed=3, epoch_filter=(0.5, 0.5))
    run = PromptStream(_prompts(10), seed=3, epoch_filter=(0.5, 0.5))
    for s in (ref, run):
        _run_epoch(s, 10)
        _run_epoch(s, 2)  # into epoch 1 (filtered)
    state = json.loads(json.dumps(run.state_dict()))
    assert "outcomes" in state and "active" in state
    resumed = PromptStream(_prompts(10), seed=3, epoch_filter=(0.5, 0.5))
    resumed.load_state_dict(state)
    assert resumed.metrics() == ref.metrics()
    for _ in range(6):  # several epochs: the re-admission draws and the outcomes carry over
        assert [p.uid for p in _run_epoch(resumed, 3)] == [p.uid for p in _run_epoch(ref, 3)]
        assert resumed.metrics() == ref.metrics()


def test_epoch_filter_needs_unique_uids():
    dup = _prompts(3) + [Prompt(prompt_tokens=[9], domain="math", label="", uid="u0")]
    with pytest.raises(DataError, match="uids are not unique"):
        PromptStream(dup, epoch_filter=(0.1, 0.01))
    PromptStream(dup)  # fine without the filter
