"""bench/cascade_seeds.py's repair table: what each repair the gate inserted won back, read from
the runs' manifests and gate rows."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from nemo_cascade.tooling.report_run import Run, StageInfo

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def seeds():
    spec = importlib.util.spec_from_file_location("cascade_seeds",
                                                  ROOT / "bench" / "cascade_seeds.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT))
    return module


def _flag(suite: str, best: float, now: float, p: float) -> dict:
    return {"suite": suite, "best_stage": "0-sft", "best": best, "now": now, "p": p}


def _run(repair_gate: dict, repaired: dict) -> Run:
    def stage(k, name, domain, gate, inserted_by=""):
        return StageInfo(k, name, "grpo" if domain else "sft", domain, 10, "done", 1.0, gate,
                         Path(name), inserted_by=inserted_by)

    flagged = {"flagged": [_flag("tiny-code", 0.50, 0.44, 0.01)],
               "repair": {"stage": "rlhf-repair", "domains": ["code"]}}
    stages = [stage(0, "sft", None, {}), stage(1, "rlhf", "rlhf", flagged),
              stage(2, "rlhf-repair", "rlhf+code", repair_gate, inserted_by="rlhf")]
    history = [("sft", {"tiny-code": (0.50, 0.02), "tiny-rlhf": (0.60, 0.02)}),
               ("rlhf", {"tiny-code": (0.44, 0.02), "tiny-rlhf": (0.80, 0.02)}),
               ("rlhf-repair", repaired)]
    return Run("tiny", "abc", stages, history, {"tiny-code": "code", "tiny-rlhf": "rlhf"},
               {"sft": None, "rlhf": "rlhf", "rlhf-repair": "rlhf+code"}, [])


def test_a_repair_whose_row_is_not_flagged_again_recovered_its_suite(seeds):
    run = _run({"flagged": []}, {"tiny-code": (0.49, 0.02), "tiny-rlhf": (0.79, 0.02)})
    [row] = seeds.repair_rows({1: seeds.Seeded(run)})
    assert row["recovered"] and (row["stage"], row["suite"]) == ("rlhf", "tiny-code")
    assert (row["best"], row["after_stage"], row["after_repair"]) == pytest.approx((50, 44, 49))
    [(suite, before, moved)] = row["own"]  # the stage's own suite, kept or not
    assert suite == "tiny-rlhf" and before == pytest.approx(80)
    assert moved[0] == pytest.approx(-1)
    text = seeds.repairs_table([row])
    assert "tiny-code 50.0 (0-sft) → 44.0 (0.010) → 49.0" in text and "within noise" in text
    assert "tiny-rlhf 80.0 → 79.0" in text
    assert text.splitlines()[-1].rstrip(" |").endswith("–")  # nothing newly flagged


def test_a_suite_the_repair_costs_is_shown_beside_the_one_it_won_back(seeds):
    side = {"flagged": [{**_flag("tiny-rlhf", 0.80, 0.75, 0.02), "best_stage": "1-rlhf"}]}
    run = _run(side, {"tiny-code": (0.49, 0.02), "tiny-rlhf": (0.75, 0.02)})
    [row] = seeds.repair_rows({1: seeds.Seeded(run)})
    assert row["recovered"] and [f["suite"] for f in row["new_flags"]] == ["tiny-rlhf"]
    assert "tiny-rlhf 80.0 (1-rlhf) → 75.0 (0.020)" in seeds.repairs_table([row])


def test_a_suite_the_repairs_row_flags_again_is_not_recovered(seeds):
    again = {"flagged": [_flag("tiny-code", 0.50, 0.45, 0.03)]}
    run = _run(again, {"tiny-code": (0.45, 0.02), "tiny-rlhf": (0.80, 0.02)})
    [row] = seeds.repair_rows({1: seeds.Seeded(run)})
    assert not row["recovered"] and row["p_again"] == 0.03
    assert "still flagged, -5.0 (0.030)" in seeds.repairs_table([row])


def test_a_repair_without_its_row_yet_is_not_counted(seeds):
    run = _run({"flagged": []}, {})
    run.history.pop()
    assert seeds.repair_rows({1: seeds.Seeded(run)}) == []
