"""The forgetting gate's verdicts as the cascade takes them (forgetting.Gate.check): the best
earlier row of each suite, the per-benchmark tolerance overriding gate.min_drop, and the unpaired
rule's noise term (the paired rule: tests/unit/test_gate_rule.py)."""
from dataclasses import replace

import pytest

from nemo_cascade import config
from nemo_cascade.evaluate.eval_output import write_eval
from nemo_cascade.cascade.forgetting import Gate


def _suite(score: float, stderr: float = 0.0, k: int = 4) -> dict:
    return {
        "suite": "s", "domain": "math", "metric": "accuracy", "decoding": {
            "temperature": 0.6, "top_p": 0.95, "top_k": -1, "samples": k, "max_tokens": 32,
            "mode": "no_think", "template": "cascade1", "seed": 0, "max_model_len": 128},
        "data": {"path": "x", "sha256": "0", "items": 10, "limit": 0}, "metrics": {
            f"avg@{k}": score, "stderr": stderr, f"pass@{k}": score, "truncated": 0.0,
            "mean_response_tokens": 10.0, "too_long": 0}, "records": [],
        "seconds": {"generate": 0.1, "score": 0.1, "total": 0.2}, "reward": {}}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

    out = tmp_path_factory.mktemp("tok")
    build_tiny_tokenizer(out)
    return AutoTokenizer.from_pretrained(out)


def _rows(tmp_path, scores: dict[str, dict[str, float]]):
    dirs = []
    for row, suites in scores.items():
        write_eval(tmp_path / row, {name: _suite(v) for name, v in suites.items()},
                   {"checkpoint": row})
        dirs.append(tmp_path / row)
    return dirs


def test_regression_against_the_best_earlier_row_with_per_suite_tolerance(tmp_path, tokenizer):
    gate_cfg = config.Gate(suites=("tiny-math", "tiny-code"), min_drop=0.05,
                           tolerance=("tiny-code=0.20", ), rule="unpaired")
    gate = Gate(config.Cascade(gate=gate_cfg), tokenizer)
    rows = _rows(tmp_path, {
        "base": {"tiny-math": 0.10, "tiny-code": 0.10},
        "sft": {"tiny-math": 0.60, "tiny-code": 0.70},
        # math −0.10 vs best (sft): > 0.05 → regression
        "math": {"tiny-math": 0.50, "tiny-code": 0.40},
        # math −0.02: within 0.05; code −0.15 within 0.20
        "code": {"tiny-math": 0.58, "tiny-code": 0.55},
    })
    found = gate.check(rows[:2], rows[2])
    assert [(r.suite, r.best_stage, r.best, r.now) for r in found] == [
        ("tiny-math", "sft", 0.60, 0.50), ("tiny-code", "sft", 0.70, 0.40)]
    assert gate.check(rows[:3], rows[3]) == []
    strict = Gate(config.Cascade(gate=replace(gate_cfg, min_drop=0.01, tolerance=())), tokenizer)
    assert [r.suite for r in strict.check(rows[:3], rows[3])] == ["tiny-math", "tiny-code"]


def test_the_gate_sizes_the_engine_for_its_suites(tmp_path, tokenizer):
    gate = Gate(config.Cascade(gate=config.Gate(suites=("tiny-swe",), max_tokens=50)), tokenizer)
    longest = max(len(p.prompt_tokens) for p in gate.prepared["tiny-swe"].prompts)
    assert gate.context_tokens() == longest + 50
    assert not Gate(config.Cascade(), tokenizer).enabled
