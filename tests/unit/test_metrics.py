"""metrics.jsonl lines, phase timers, the SFT batch order, and the optional wandb sink (offline)."""
import json

from nemo_cascade.metrics import MetricsLog, PhaseTimer, read_metrics
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


def test_metrics_jsonl_and_wandb_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    log = MetricsLog(tmp_path / "stage", "math", total_steps=2, use_wandb=True, run_name="t")
    log.log(0, {"reward_mean": 0.25, "note": "x"}, progress={"reward": 0.25})
    log.log(1, {"reward_mean": 0.5})
    log.close()
    rows = read_metrics(tmp_path / "stage")
    assert [r["step"] for r in rows] == [0, 1] and rows[1]["reward_mean"] == 0.5 and rows[0]["stage"] == "math"
    assert list(tmp_path.glob("wandb/offline-run-*")), "an offline wandb run directory must exist"


def test_sft_batches_cover_each_epoch_once_in_seeded_order():
    examples = list(range(10))
    a = sft_batches(examples, 4, seed=3)
    first_epoch = [x for _ in range(2) for x in next(a)] + next(a)[:2]
    assert sorted(first_epoch) == examples
    b, c = sft_batches(examples, 4, seed=3), sft_batches(examples, 4, seed=3)
    assert [next(b) for _ in range(5)] == [next(c) for _ in range(5)], "same seed, same order"
    assert next(sft_batches(examples, 4, seed=4)) != next(sft_batches(examples, 4, seed=3))


def test_summary_reports_first_and_last_window(tmp_path):
    from nemo_cascade.metrics import summarize

    stage = tmp_path / "1-math"
    stage.mkdir()
    rows = [{"step": i, "reward_mean": 0.1 if i < 4 else 0.5} for i in range(8)]
    (stage / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert summarize(stage, window=4) == "1-math: reward_mean 0.100 (first 4 steps) -> 0.500 (last 4 steps)"
