"""metrics.jsonl lines, phase timers, the SFT batch order, and the optional wandb sink (offline); a
resumed stage continues both logs."""
import json

import pytest

from nemo_cascade.cascade.metrics import MetricsLog, PhaseTimer, read_metrics
from nemo_cascade.data.loader import sft_batches


def test_phase_timer_accumulates_and_totals():
    t = PhaseTimer()
    with t("train"):
        pass
    with t("train"):
        pass
    with t("sync"):
        pass
    m = t.as_metrics()
    assert set(m) == {"time/train", "time/sync", "time/step"}
    assert abs(m["time/step"] - (m["time/train"] + m["time/sync"])) < 1e-3


@pytest.fixture
def offline_wandb(tmp_path, monkeypatch):
    """W&B offline, writing under tmp_path. wandb reads the environment once per process (its setup
    singleton): tear it down afterwards, so that the next test's WANDB_DIR counts."""
    import wandb

    for k, v in {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path),
                 "WANDB_SILENT": "true"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("WANDB_RUN_ID", raising=False)
    wandb.teardown()
    yield
    wandb.teardown()


def test_metrics_jsonl_and_wandb_offline(tmp_path, offline_wandb):
    log = MetricsLog(tmp_path / "stage", "math", total_steps=2, use_wandb=True, run_name="t")
    log.log(0, {"reward_mean": 0.25, "note": "x"}, progress={"reward": 0.25})
    log.log(1, {"reward_mean": 0.5})
    log.close()
    rows = read_metrics(tmp_path / "stage")
    assert ([r["step"] for r in rows] == [0, 1] and rows[1]["reward_mean"] == 0.5
            and rows[0]["stage"] == "math")
    assert list(tmp_path.glob("wandb/offline-run-*")), "an offline wandb run directory must exist"


def test_a_resumed_stage_continues_its_jsonl_and_its_wandb_run(tmp_path, offline_wandb):
    """Killed after logging step 3 with its newest checkpoint after step 1, a stage resumes at step
    2: the jsonl loses steps 2-3 (logged again), and W&B gets the same run id with resume="allow" —
    offline, a second run folder of that id, which `wandb sync` uploads into the same run. Starting
    over (step 0) is a new W&B run."""
    stage = tmp_path / "stages" / "4-math"
    log = MetricsLog(stage, "math", total_steps=6, use_wandb=True, run_name="r")
    for step in range(4):
        log.log(step, {"reward_mean": step / 10})
    run_id = log.wandb.id
    log.close()
    assert (stage / "wandb_id").read_text().strip() == run_id
    log = MetricsLog(stage, "math", total_steps=6, use_wandb=True, run_name="r", start_step=2)
    assert [r["step"] for r in read_metrics(stage)] == [0, 1], \
        "steps past the checkpoint are logged again"
    assert (log.wandb.id == run_id and log.wandb.settings.resume == "allow"
            and log.wandb.name == "r/math")
    for step in range(2, 6):
        log.log(step, {"reward_mean": step / 10})
    log.close()
    rows = read_metrics(stage)
    assert [r["step"] for r in rows] == list(range(6)) and rows[5]["reward_mean"] == 0.5
    folders = sorted(tmp_path.glob("wandb/offline-run-*"))
    assert len(folders) == 2 and all((f / f"run-{run_id}.wandb").is_file() for f in folders)
    log = MetricsLog(stage, "math", total_steps=6, use_wandb=True, run_name="r", start_step=0)
    assert log.wandb.id != run_id and (stage / "wandb_id").read_text().strip() == log.wandb.id
    log.close()
    assert read_metrics(stage) == [], "a stage that starts over logs from step 0 into an empty file"


def test_sft_batches_cover_each_epoch_once_in_seeded_order():
    examples = list(range(10))
    a = sft_batches(examples, 4, seed=3)
    first_epoch = [x for _ in range(2) for x in next(a)] + next(a)[:2]
    assert sorted(first_epoch) == examples
    b, c = sft_batches(examples, 4, seed=3), sft_batches(examples, 4, seed=3)
    assert [next(b) for _ in range(5)] == [next(c) for _ in range(5)], "same seed, same order"
    assert next(sft_batches(examples, 4, seed=4)) != next(sft_batches(examples, 4, seed=3))


def test_summary_reports_first_and_last_window(tmp_path):
    from nemo_cascade.cascade.metrics import summarize

    stage = tmp_path / "1-math"
    stage.mkdir()
    rows = [{"step": i, "reward_mean": 0.1 if i < 4 else 0.5} for i in range(8)]
    (stage / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert summarize(stage, window=4) == \
        "1-math: reward_mean 0.100 (first 4 steps) -> 0.500 (last 4 steps)"
