"""Paired tests between report rows (evaluate/paired.py) and where the reports show them: exact
McNemar against direct enumeration, the paired bootstrap's calibration, item pairing by uid, and the
p-values in report.md's matrix and the comparison's final rows."""
from __future__ import annotations

import itertools
import json
import random

import pytest

from nemo_cascade import config
from nemo_cascade.tooling.report import load_run, matrix_text
from nemo_cascade.tooling.compare import comparison_markdown
from nemo_cascade.evaluate.paired import (PairedTest, item_values, mcnemar_exact, p_text,
                                          paired_bootstrap, paired_test)
from nemo_cascade.evaluate.eval_output import write_eval


def _enumerated_mcnemar(b: int, c: int) -> float:
    """Two-sided exact p by listing every way the b + c discordant items could have fallen."""
    n, observed = b + c, min(b, c)
    outcomes = list(itertools.product((0, 1), repeat=n))
    as_extreme = sum(min(sum(o), n - sum(o)) <= observed for o in outcomes)
    return min(1.0, as_extreme / len(outcomes)) if n else 1.0


@pytest.mark.parametrize("b,c", [(0, 0), (0, 6), (1, 9), (3, 3), (2, 7), (5, 1), (0, 12)])
def test_mcnemar_equals_enumeration(b, c):
    assert mcnemar_exact(b, c) == pytest.approx(_enumerated_mcnemar(b, c))


def test_mcnemar_known_values_and_large_counts():
    assert mcnemar_exact(0, 6) == 1 / 32  # 2 · (½)^6
    assert mcnemar_exact(1, 9) == pytest.approx(2 * 11 / 1024)
    assert mcnemar_exact(400, 400) == 1.0
    # thousands of items: exact integers, no overflow to 0 or nan
    assert 0 < mcnemar_exact(200, 300) < 1e-5


def test_bootstrap_is_seeded_and_calibrated():
    # mean 0.25, spread 0.5
    shifted = [0.25 + 0.5 * ((i * 7919) % 11) / 10 - 0.25 for i in range(200)]
    assert paired_bootstrap(shifted) < 0.001
    assert paired_bootstrap(shifted) == paired_bootstrap(shifted)
    # Under no change, p < 0.05 about 5 % of the time: 200 null suites of 60 items.
    rng = random.Random(0)
    rejections = sum(
        paired_bootstrap([rng.gauss(0, 0.3) for _ in range(60)], resamples=400, seed=k) < 0.05
        for k in range(200))
    assert 2 <= rejections <= 22
    assert paired_bootstrap([]) == 1.0 and paired_bootstrap([0.0] * 9) == 1.0
    assert paired_bootstrap([0.5] * 9) < 0.001  # every item moved the same way


def _records(values: dict[str, list[float]]) -> list[dict]:
    return [{"uid": uid, "values": v} for uid, v in values.items()]


def test_pairs_by_uid_and_picks_the_test():
    before = item_values({"records": _records({"a": [1.0], "b": [0.0], "c": [0.0], "x": [1.0]})})
    after = item_values({"records": _records({"c": [1.0], "b": [1.0], "a": [1.0], "y": [0.0]})})
    assert before[1] and after[1]
    t = paired_test(before, after)
    assert (t.items, t.test, t.only_before, t.only_after) == (3, "mcnemar", 0, 2)
    assert t.diff == pytest.approx(2 / 3) and t.p == 0.5 and t.verdict == "no significant change"
    several = item_values({"records": _records({"a": [1.0, 0.0], "b": [0.5]})})
    assert several == ({"a": 0.5, "b": 0.5}, False)
    assert paired_test(several, after).test == "bootstrap"


def test_verdict_needs_p_below_alpha():
    assert PairedTest(100, 0.1, 0.01, "mcnemar").verdict == "gain"
    assert PairedTest(100, -0.1, 0.049, "mcnemar").verdict == "regression"
    assert PairedTest(100, -0.1, 0.05, "mcnemar").verdict == "no significant change"
    assert p_text(0.0004) == "<0.001" and p_text(0.0312) == "0.031"


def _suite(name: str, domain: str, correct: list[int]) -> dict:
    score = sum(correct) / len(correct)
    return {"suite": name, "domain": domain, "metric": "accuracy",
            "decoding": {"temperature": 0.6, "top_p": 0.95, "top_k": -1, "samples": 1,
                         "max_tokens": 64, "mode": "think", "template": "cascade1", "seed": 0,
                         "max_model_len": 128},
            "data": {"path": "x", "sha256": "0", "items": len(correct), "limit": len(correct)},
            "metrics": {"avg@1": score, "stderr": 0.02, "pass@1": score, "mean_reward": score,
                        "prompt_loose": score, "instruction_strict": score,
                        "instruction_loose": score, "truncated": 0.0,
                        "mean_response_tokens": 40.0, "too_long": 0},
            "records": [{"uid": str(i), "values": [float(v)]} for i, v in enumerate(correct)],
            "seconds": {"total": 1.0}, "reward": {}}


def _run(tmp_path, name: str, rows: dict[str, tuple[list[int], list[int]]]):
    stages = tuple(config.Stage(name=n, kind="grpo", domain="math", steps=10)
                   for n in rows if n != "base")
    run = tmp_path / name
    run.mkdir()
    (run / "config.json").write_text(config.dumps(config.Cascade(name=name, stages=stages)))
    (run / "manifest.json").write_text(
        json.dumps({"name": name, "stages": {s.name: {"status": "done"} for s in stages}}))
    meta = {"checkpoint": "ckpt", "git": {"sha": "abc", "dirty": False}, "versions": {}}
    for k, (row, (math_items, if_items)) in enumerate(rows.items()):
        write_eval(run / ("base" if row == "base" else f"stages/{k - 1}-{row}"),
                   {"gsm8k": _suite("gsm8k", "math", math_items),
                    "ifeval": _suite("ifeval", "ifeval", if_items)},
                   meta)
    return run


def test_report_and_comparison_show_p_values(tmp_path):
    base_math, base_if = [0] * 300, [1] * 150 + [0] * 150
    # math: 30 items newly right, 5 newly wrong → McNemar p ≈ 1.7e-5; ifeval: 6 newly right, 4 newly
    # wrong.
    after_math = [1] * 30 + [0] * 265 + [0] * 5
    after_math[295:300] = [0] * 5
    base_math[295:300] = [1] * 5
    after_if = base_if[:]
    after_if[150:156] = [1] * 6
    after_if[:4] = [0] * 4
    cascade = _run(tmp_path, "cascade",
                   {"base": (base_math, base_if), "math": (after_math, after_if)})
    text = matrix_text(cascade)
    row = next(line for line in text.splitlines() if line.startswith("| math"))
    assert "(+8.3, p <0.001)*" in row and "(+0.7, p 0.754)" in row
    assert "gsm8k +8.3 (p <0.001, gain)" in text
    assert load_run(cascade).tests()[1]["ifeval"].p == pytest.approx(mcnemar_exact(4, 6))

    mixed = _run(tmp_path, "mixed", {"base": (base_math, base_if), "mixed": (base_math, after_if)})
    md = comparison_markdown([load_run(cascade), load_run(mixed)])
    final = md.split("## Final rows")[1]
    line = next(x for x in final.splitlines() if x.startswith("| gsm8k"))
    assert f"(p {p_text(mcnemar_exact(5, 30))}, 300 items, regression)" in line
    # every step of the per-suite tables pairs the two runs too: the same base (p 1), then the
    # 10-step rows
    steps = md.split("## gsm8k (math)")[1].split("##")[0].splitlines()
    row = {x.split("|")[1].strip(): x for x in steps if x.startswith("| ")}
    assert row["0"].endswith("+0.0 ± 2.8 (p 1.000, 300 items, no significant change) |")
    assert f"(p {p_text(mcnemar_exact(5, 30))}, 300 items, regression)" in row["10"]


def test_report_pairs_each_stages_own_domain_with_the_last_row(tmp_path):
    """Did the later stages keep what a stage learned? Its own-domain suite after it against the
    last row."""
    from nemo_cascade.tooling.report import render_markdown

    base, learned = [0] * 200, [1] * 40 + [0] * 160
    # 30 of the 40 lost, none gained: McNemar p = 2 / 2**30
    forgotten = [0] * 30 + [1] * 10 + [0] * 160
    run = _run(tmp_path, "cascade",
               {"base": (base, base), "math": (learned, base), "later": (forgotten, base)})
    md = render_markdown(load_run(run))
    section = md.split("### Each RL stage's own domain at the end")[1].split("##")[0]
    assert ("- `math` (math) to `later`: gsm8k 20.0 → 5.0 "
            f"(-15.0, p {p_text(mcnemar_exact(30, 0))}, regression)") in section
    # the last row is not compared with itself
    assert "`later`" not in section.split("to `later`")[1]
    # the gate recorded nothing (no manifest regressions here); the paired drop is still listed as
    # one
    drops = md.split("Drops against the row before at p < 0.05")[1].split("##")[0]
    assert f"- after `later`: gsm8k -15.0 (p {p_text(mcnemar_exact(30, 0))})" in drops
    assert "after `math`" not in drops  # a gain is not a drop
