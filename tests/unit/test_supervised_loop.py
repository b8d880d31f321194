"""stage.run_supervised, the one loop of SFT and reward-model stages: one step per batch of shuffled
epochs, the step's metrics and its phase times logged per step, the data position returned and
continued from."""
from __future__ import annotations

import json

from nemo_cascade import config
from nemo_cascade.cascade.stage import StageContext, run_supervised
from nemo_cascade.cascade.metrics import MetricsLog


def _run(tmp_path, steps: int, data_state: dict | None = None):
    stage = config.Stage(name="sup", kind="sft", steps=steps, data=config.Data(seed=7))
    seen = []

    def step_fn(batch, timer):
        with timer("train"):
            seen.append(list(batch))
        return {"loss": float(sum(batch)), "rows": len(batch)}, {"loss": float(sum(batch))}

    log = MetricsLog(tmp_path, stage.name, stage.steps)
    ctx = StageContext(actor=None, engine=None, pad_id=0, stage_dir=tmp_path, log=log,
                       data_state=data_state)
    state = run_supervised(ctx, stage, list(range(10)), 4, step_fn)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    return state, seen, rows


def test_one_logged_step_per_batch_of_shuffled_epochs(tmp_path):
    state, seen, rows = _run(tmp_path, steps=5)
    assert state == {"batches": 5}
    drawn = [x for batch in seen for x in batch]
    # whole epochs
    assert sorted(drawn[:10]) == list(range(10)) and sorted(drawn[10:20]) == list(range(10))
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4]
    # step's, then times
    assert list(rows[0]) == ["stage", "step", "loss", "rows", "time/train", "time/step"]
    assert [r["loss"] for r in rows] == [float(sum(b)) for b in seen]


def test_a_continued_position_draws_the_next_batches(tmp_path):
    _, whole, _ = _run(tmp_path / "whole", steps=6)
    state, rest, rows = _run(tmp_path / "rest", steps=3, data_state={"batches": 3})
    assert rest == whole[3:] and state == {"batches": 6} and [r["step"] for r in rows] == [0, 1, 2]
