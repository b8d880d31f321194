"""bench/plan_check.py: the plan's efficiencies fitted on one model's measured steps predict
another's; a model that the plan describes exactly is predicted exactly."""
from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def check():
    sys.path.insert(0, str(ROOT))
    try:
        spec = importlib.util.spec_from_file_location("plan_check",
                                                      ROOT / "bench" / "plan_check.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(ROOT))


def _row(check, name: str, params: float, mfu: float, iteration_s: float, slower: float = 1.0):
    """A row whose steps take what the plan predicts at ``mfu`` and ``iteration_s`` on a 1e11
    FLOP/s, 1e10 B/s machine (generation ``slower`` times that)."""
    model = {"params": params, "weight_bytes": 4 * params, "kv_bytes_per_token": 1e3,
             "kv_tokens": 10**6, "max_seqs": 256, "samples_per_prompt": 4}
    row = {"model": name, "dtype": "float32", "time": "t", "cpu": check.cpu_model(),
           "matmul_flops_per_s": 1e11, "read_bytes_per_s": 1e10,
           "plan": {"model": model, "steps": []}}
    hw = check.measured_hardware(row, mfu=mfu, bandwidth_share=1.0, decode_iteration_s=iteration_s)
    for tokens, longest in ((900, 30), (1000, 32), (1100, 25)):
        step = {"tokens": tokens, "sequences": 16, "prompt_tokens": 4 * 50, "longest": longest}
        p = check.predict(model, step, hw)
        fb = p["train_s"] - check.plan_time.optimizer_seconds(params, 1, hw)
        row["plan"]["steps"].append({**step, "train_s": p["train_s"],
                                     "generate_s": slower * p["generate_s"],
                                     "forward_backward_s": fb})
    return row


def test_the_fit_recovers_the_efficiencies_a_row_was_made_with(check):
    fit = check.fitted(_row(check, "tiny", 1e6, mfu=0.2, iteration_s=0.01))
    assert fit == pytest.approx({"mfu": 0.2, "decode_iteration_s": 0.01})


def test_each_model_is_predicted_from_the_others_efficiencies(check):
    rows = {("tiny", "float32"): _row(check, "tiny", 1e6, 0.2, 0.01),
            ("big", "float32"): _row(check, "big", 1e8, 0.2, 0.01)}
    checks = check.cross_check(rows)
    assert [(c["model"], c["fitted_on"]) for c in checks] == [("big", "tiny"), ("tiny", "big")]
    for c in checks:
        assert c["error"] == pytest.approx({"train_s": 0, "generate_s": 0, "step_s": 0}, abs=1e-9)
    # the big model's generation twice what the plan says: its error shows it, and the small
    # model, predicted from the big one's larger iteration cost, comes out slow
    rows[("big", "float32")] = _row(check, "big", 1e8, 0.2, 0.01, slower=2.0)
    big, tiny = check.cross_check(rows)
    assert big["error"]["generate_s"] == pytest.approx(-0.5)
    assert tiny["error"]["generate_s"] > 0.5 and tiny["error"]["train_s"] == pytest.approx(0)


def test_rows_of_another_cpu_or_without_the_plans_inputs_are_not_read(check, tmp_path):
    mine = _row(check, "tiny", 1e6, 0.2, 0.01)
    elsewhere = {**mine, "cpu": "another CPU", "model": "big"}
    older_bench = {**mine, "model": "old", "plan": {"mfu": 0.35}}
    path = tmp_path / "roofline.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (mine, elsewhere, older_bench)))
    assert list(check.newest_rows(path)) == [("tiny", "float32")]


def test_measured_hardware_keeps_the_written_efficiencies_unless_given(check):
    row = _row(check, "tiny", 1e6, 0.2, 0.01)
    hw = check.measured_hardware(row)
    assert (hw.peak_flops, hw.hbm_bytes_per_s, hw.max_seqs) == (1e11, 1e10, 256)
    assert hw == replace(check.plan_time.Hardware(name="this CPU"), peak_flops=1e11,
                         hbm_bytes_per_s=1e10)
