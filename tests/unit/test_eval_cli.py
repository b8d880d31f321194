"""`nemo-cascade eval` user errors (one line on stderr naming what was expected, exit code 2, before
any engine starts), checkpoint resolution, and the report files (eval.json merge, markdown table,
SVG plot)."""
from __future__ import annotations

import json

import pytest

from nemo_cascade.tooling.cli import main
from nemo_cascade.evaluate import EvalError
from nemo_cascade.tooling.standalone import resolve_checkpoint
from nemo_cascade.evaluate.eval_output import markdown, svg_bars, write_eval


def _error_line(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("argv, expected", [
    (["--suite", "nope"], "--suite nope: unknown suite; expected one of ["),
    (["--suite", "gsm8k", "--limit", "0"], "--limit: expected an integer >= 1, got '0'"),
    (["--suite", "gsm8k", "--limit", "ten"], "--limit: expected an integer >= 1, got 'ten'"),
    (["--suite", "gsm8k", "--samples", "-2"], "--samples: expected an integer >= 1"),
    (["--suite", "gsm8k", "--max-tokens", "0"], "--max-tokens: expected an integer >= 1"),
    (["--suite", "gsm8k", "--data", "gsm8k"], "--data gsm8k: expected SUITE=PATH"),
    (["--suite", "gsm8k", "--data", "gsm8k=/no/such.jsonl"], "no such file /no/such.jsonl"),
    (["--suite", "gsm8k", "--data", "nope=x"], "unknown suite"),
    (["--suite", "rlhf"], "suite rlhf: needs a served reward model (--reward-model-url URL"),
    (["--suite", "rlhf", "--reward-model-url", "http://127.0.0.1:9"
      ], "no server answers at /health"),
    (["--suite", "rlhf", "--reward-model", "/no/rm"], "--reward-model /no/rm: no config.json"),
    (["--suite", "gsm8k", "--answer-pattern", "no group"
      ], "--answer-pattern: answer_pattern 'no group' needs a group"), ])
def test_bad_options_are_one_line_and_exit_2(capsys, hf_folder, argv, expected):
    err = _error_line(capsys, ["eval", str(hf_folder), *argv])
    assert err.startswith("nemo-cascade: error: ") and expected in err


def test_missing_or_wrong_checkpoint(capsys, tmp_path):
    err = _error_line(capsys, ["eval", str(tmp_path / "missing"), "--suite", "gsm8k"])
    assert "not found; expected a Hugging Face model folder" in err
    err = _error_line(capsys, ["eval", str(tmp_path), "--suite", "gsm8k"])
    assert "no config.json and no hf/ folder; expected" in err


def test_checkpoint_resolution(tmp_path, hf_folder):
    assert resolve_checkpoint(hf_folder) == (hf_folder, None)
    stage = tmp_path / "runs" / "r" / "stages" / "1-math"
    (stage / "hf").mkdir(parents=True)
    (stage / "hf" / "config.json").write_text("{}")
    (stage / "metrics.jsonl").write_text("")
    assert resolve_checkpoint(stage) == (stage / "hf", stage)
    assert resolve_checkpoint(stage / "hf") == (stage / "hf", stage)
    run = stage.parents[1]
    (run / "manifest.json").write_text("{}")
    with pytest.raises(EvalError, match="a run directory; pass one of its stages: .*1-math"):
        resolve_checkpoint(run)


def _result(suite: str, score: float, k: int = 2) -> dict:
    return {
        "suite": suite, "domain": "math", "metric": "accuracy", "decoding": {
            "temperature": 0.6, "top_p": 0.95, "top_k": -1, "samples": k, "max_tokens": 64,
            "mode": "think", "template": "cascade1", "seed": 0, "max_model_len": 128},
        "data": {"path": "x", "sha256": "0", "items": 3, "limit": 3}, "metrics": {
            f"avg@{k}": score, "stderr": 0.1, f"pass@{k}": score, "mean_reward": score,
            "truncated": 0.25, "mean_response_tokens": 40.0, "too_long": 1}, "records": [],
        "seconds": {"generate": 1.0, "score": 0.1, "total": 1.2}, "reward": {}}


def test_write_eval_merges_suites_and_writes_table_and_plot(tmp_path):
    meta = {"checkpoint": "ckpt", "git": {"sha": "abc", "dirty": False}, "versions": {"torch": "2"}}
    write_eval(tmp_path, {"gsm8k": _result("gsm8k", 0.5)}, meta)
    path = write_eval(tmp_path, {"math500": _result("math500", 0.25)},
                      {**meta, "checkpoint": "ckpt2"})
    doc = json.loads(path.read_text())
    assert list(doc["suites"]) == ["gsm8k", "math500"]
    assert doc["suites"]["gsm8k"]["provenance"]["checkpoint"] == "ckpt"
    assert doc["checkpoint"] == "ckpt2"
    table = (tmp_path / "eval.md").read_text()
    assert ("| gsm8k | math | think | 2 | 0.6 / 0.95 | 64 | 3 | accuracy | "
            "50.0 | 10.0 | 50.0 |") in table
    assert "1 prompts too long (scored 0)" in table and "truncated 25.0%" in table
    svg = (tmp_path / "eval.svg").read_text()
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert ">gsm8k (K=2)</text>" in svg and ">50.0</text>" in svg and ">25.0</text>" in svg
    # background + 2 bars
    assert markdown(doc).count("\n| ") == 3 and svg_bars(doc).count("<rect") == 3
