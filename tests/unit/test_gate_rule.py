"""The gate's regression rule (evaluate/stage_scores.py): paired on the items both rows scored
against the best earlier row, or unpaired against the two scores' standard errors; on the kept
SmolLM2 records and on rows built to sit on each side of the rule."""
from __future__ import annotations

from pathlib import Path

import pytest

from nemo_cascade.evaluate import stage_scores
from nemo_cascade.evaluate.eval_output import write_eval
from nemo_cascade.evaluate.paired import mcnemar_exact

KEPT = Path(__file__).resolve().parents[2] / "docs" / "results" / "smollm2" / "filtered-cascade"
SUITES = ("ifeval", "gsm8k", "mbpp", "humaneval", "leg-counting")
META = {"checkpoint": "ckpt", "git": {"sha": "abc", "dirty": False}, "versions": {}}


def test_paired_rule_flags_the_kept_smollm2_ifeval_drop_the_unpaired_rule_misses():
    rows = [KEPT / "base", KEPT / "stages" / "0-ifeval"]
    tolerance = {s: 0.02 for s in SUITES}
    paired = stage_scores.row_regressions(rows, KEPT / "stages" / "1-math", tolerance, "paired")
    assert [(r.suite, r.best_stage, r.rule, r.test, r.items) for r in paired] == [
        ("ifeval", "0-ifeval", "paired", "mcnemar", 250)]
    assert paired[0].best - paired[0].now == pytest.approx(0.04)
    assert round(paired[0].p, 3) == 0.031
    assert "p 0.031 on 250 items" in str(paired[0])
    assert stage_scores.row_regressions(rows, KEPT / "stages" / "1-math", tolerance,
                                        "unpaired") == []
    # the code stage's ifeval (23.2) is 2.8 below its best row, not significant paired (p 0.21)
    later = stage_scores.row_regressions([*rows, KEPT / "stages" / "1-math"],
                                         KEPT / "stages" / "2-code", tolerance, "paired")
    assert later == []


def _suite(values: list[list[float]]) -> dict:
    score = sum(sum(v) / len(v) for v in values) / len(values)
    k = len(values[0])
    return {
        "suite": "x", "domain": "math", "metric": "accuracy", "decoding": {
            "temperature": 0.6, "top_p": 0.95, "top_k": -1, "samples": k, "max_tokens": 64,
            "mode": "think", "template": "cascade1", "seed": 0, "max_model_len": 128},
        "data": {"path": "x", "sha256": "0", "items": len(values),
                 "limit": len(values)}, "metrics": {
                     f"avg@{k}": score, "stderr": 0.01, f"pass@{k}": score, "truncated": 0.0,
                     "mean_response_tokens": 40.0, "too_long": 0},
        "records": [{"uid": str(i), "values": v} for i, v in enumerate(values)
                    ], "seconds": {"total": 1.0}, "reward": {}}


def _rows(tmp_path, *rows: list[list[float]]) -> list[Path]:
    out = []
    for k, values in enumerate(rows):
        write_eval(tmp_path / f"{k}-row", {"x": _suite(values)}, META)
        out.append(tmp_path / f"{k}-row")
    return out


def _binary(right: int, n: int = 200, start: int = 0) -> list[list[float]]:
    return [[1.0 if start <= i < start + right else 0.0] for i in range(n)]


def test_paired_rule_compares_the_best_earlier_row_on_the_same_items(tmp_path):
    # best row: items 0..59 right (30 %); then 0..49 (25 %): ten items lost, none won: p = 2^-9
    best, middle, now = _binary(60), _binary(55), _binary(50)
    rows = _rows(tmp_path, _binary(40), best, middle, now)
    found = stage_scores.row_regressions(rows[:3], rows[3], {"x": 0.02}, "paired")
    assert [(r.best_stage, r.items) for r in found] == [("1-row", 200)]
    assert found[0].p == pytest.approx(mcnemar_exact(10, 0))
    # a drop of the same size, but the items flip both ways: 40 lost, 30 won (p 0.28)
    churn = [[1.0 if 40 <= i < 110 else 0.0] for i in range(200)]
    flipped = _rows(tmp_path / "b", _binary(80), churn)
    assert stage_scores.row_regressions(flipped[:1], flipped[1], {"x": 0.02}, "paired") == []
    # the unpaired rule with tiny standard errors calls the same 5-point drop a regression
    assert len(stage_scores.row_regressions(flipped[:1], flipped[1], {"x": 0.02}, "unpaired")) == 1


def test_paired_rule_needs_the_minimum_effect_and_the_significance(tmp_path):
    rows = _rows(tmp_path, _binary(60), _binary(50))  # ten items lost: 5 points, p ≈ 0.002
    assert len(stage_scores.row_regressions(rows[:1], rows[1], {"x": 0.05}, "paired")) == 1
    assert stage_scores.row_regressions(rows[:1], rows[1], {"x": 0.06}, "paired") == []
    assert stage_scores.row_regressions(rows[:1], rows[1], {"x": 0.02}, "paired", alpha=0.001) == []


def test_paired_rule_with_several_samples_uses_the_bootstrap(tmp_path):
    before = [[1.0, 1.0, 0.0, 0.0] if i < 100 else [0.0] * 4 for i in range(200)]
    after = [[1.0, 0.0, 0.0, 0.0] if i < 100 else [0.0] * 4 for i in range(200)]  # −12.5 points
    rows = _rows(tmp_path, before, after)
    found = stage_scores.row_regressions(rows[:1], rows[1], {"x": 0.02}, "paired")
    assert [(r.test, r.items) for r in found] == [("bootstrap", 200)]
    assert found[0].p < 0.001


def test_rows_without_shared_items_fall_back_to_the_unpaired_rule(tmp_path):
    before = _suite(_binary(100))
    after = _suite(_binary(20))
    after["records"] = [{"uid": f"other-{r['uid']}", "values": r["values"]}
                        for r in after["records"]]
    write_eval(tmp_path / "0-a", {"x": before}, META)
    write_eval(tmp_path / "1-b", {"x": after}, META)
    found = stage_scores.row_regressions([tmp_path / "0-a"], tmp_path / "1-b", {"x": 0.02},
                                         "paired")
    assert [r.rule for r in found] == ["unpaired"]
