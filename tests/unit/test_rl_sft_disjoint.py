"""RL prompt sets strictly disjoint from the SFT sets (paper §4.1.2), and §4.6.1's difficulty filter
of the code RL set from recorded pass rates, at `nemo-cascade data prepare`
(nemo_cascade/tooling/prepare: disjoint.py, difficulty.py, run.py). Fixture rows:
tests/data/prepare, copied and extended per test."""
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nemo_cascade.data.mbpp_tasks import CODE_INSTRUCTION
from nemo_cascade.tooling.prepare import PrepareError, prepare_command
from nemo_cascade.tooling.prepare.code_sources import code_row, statement
from nemo_cascade.tooling.prepare.disjoint import prompt_keys

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "data" / "prepare"
S1 = "nvidia/Nemotron-Cascade-SFT-Stage-1"
BOXED = "Please reason step by step, and put your final answer within \\boxed{}."
ADD = "Given two integers a and b on one line, print their sum."  # TACO's and APPS's first problem


@pytest.fixture
def src(tmp_path) -> Path:
    out = tmp_path / "src"
    shutil.copytree(FIXTURES, out)
    return out


def _append(path: Path, *rows: dict) -> None:
    with open(path, "a") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def _sft(*prompts: str) -> list[dict]:
    answer = {"role": "assistant", "content": "<think>\nok\n</think>\n\nDone."}
    return [{"messages": [{"role": "user", "content": p}, answer]} for p in prompts]


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# -------------------------------------------------------------------------------- keys

def test_an_rl_prompt_matches_an_sft_prompt_whole_or_without_its_trailing_request():
    sft = prompt_keys(f"What is 12 times 12?\n\n{BOXED}")
    assert prompt_keys("what is 12 TIMES 12", heads=False) <= sft  # the bare problem
    assert prompt_keys(f"What is 12 times 12?\n\n{BOXED}", heads=False) <= sft  # whole text
    assert not prompt_keys("What is 12 times 13?", heads=False) & sft


def test_prompts_sharing_only_a_first_paragraph_stay_apart():
    sft = prompt_keys("Translate this into French.\n\nThe cat sat on the mat.")
    assert not prompt_keys("Translate this into French.\n\nI like cheese.", heads=False) & sft
    long_tail = "Summarise the text.\n\n" + " ".join(["word"] * 65)  # the text, not a request
    assert prompt_keys("Summarise the text.", heads=False).isdisjoint(prompt_keys(long_tail))


def test_a_repair_prompt_is_keyed_by_its_issue():
    issue = "add() returns the difference of its arguments instead of their sum."
    sft = prompt_keys(f"Fix.\n--- BEGIN ISSUE ---\n{issue}\n--- END ISSUE ---\n\n### a.py\nx = 1\n")
    assert prompt_keys(issue, heads=False) <= sft


@pytest.mark.parametrize("row", [
    {"question": f"{ADD}\n\nSecond paragraph.",
     "input_output": {"inputs": ["1 2\n"], "outputs": ["3\n"]}},
    {"question": "Return n squared.", "starter_code": "def square(n):\n\t",
     "input_output": {"fn_name": "square", "inputs": [[2]], "outputs": [[4]]}}])
def test_the_code_statement_is_the_source_question_without_what_prepare_added(row):
    question = code_row("x")(row, "x:1")["question"]
    assert question.endswith(CODE_INSTRUCTION) and statement(question) == row["question"].strip()


# -------------------------------------------------------------------------------- prepare

def test_an_rl_prompt_equal_to_an_sft_prompt_is_dropped_and_counted(src, tmp_path):
    remainder = "Find the remainder when 2^10 is divided by 7."  # RL; in SFT with a request
    _append(src / S1 / "math" / "math_1.jsonl", *_sft(f"{remainder}\n\n{BOXED}"))
    _append(src / "nvidia/Nemotron-Cascade-RL-Math/train.jsonl",
            {"problem": "what is 12 TIMES 12", "answer": "144"})  # SFT's "What is 12 times 12?"
    manifest, _ = prepare_command("sft-stage-1,rl-math", tmp_path / "out", source_dir=src,
                                  progress=False)
    entry = manifest["files"]["rl-math/train.jsonl"]
    assert entry["dropped"]["in_sft_set"] == 2 and entry["rows"] == 2
    assert set(entry["sft_disjoint"]) == {f"sft-stage-1/{s}.jsonl"
                                          for s in ("general", "math", "code", "science")}
    problems = [r["problem"] for r in _rows(tmp_path / "out" / "rl-math/train.jsonl")]
    assert remainder not in problems and "what is 12 TIMES 12" not in problems
    assert "in_sft_set" not in manifest["files"]["sft-stage-1/math.jsonl"]["dropped"]  # SFT is kept


def test_a_code_problem_of_an_sft_set_is_dropped_whatever_request_each_adds(src, tmp_path):
    body = f"{ADD}\n\n-----Input-----\nTwo integers a and b.\n\n-----Output-----\nPrint a + b."
    _append(src / S1 / "code" / "code_1.jsonl", *_sft(f"{body}\n\nSolve it in Python 3."))
    manifest, _ = prepare_command("sft-stage-1,rl-code", tmp_path / "out", source_dir=src,
                                  progress=False)
    assert manifest["files"]["rl-code/train.jsonl"]["dropped"] == {
        "duplicate": 1, "in_sft_set": 1, "interactive": 1, "no_tests": 1}  # APPS repeats TACO's
    assert not any(ADD in r["question"] for r in _rows(tmp_path / "out" / "rl-code/train.jsonl"))


def test_an_swe_instance_of_the_sft_set_is_dropped_by_its_issue(src, tmp_path):
    issue = "add() returns the difference of its arguments instead of their sum."
    repair = f"Solve.\n--- BEGIN ISSUE ---\n{issue}\n--- END ISSUE ---\n\n### b.py\nX = 1\n"
    _append(src / "nvidia/Nemotron-Cascade-SFT-SWE/train.jsonl", *_sft(repair))
    manifest, _ = prepare_command("sft-swe,rl-swe", tmp_path / "out", source_dir=src,
                                  progress=False)
    assert manifest["files"]["rl-swe/train.jsonl"]["dropped"] == {"in_sft_set": 1}
    kept = _rows(tmp_path / "out" / "rl-swe/train.jsonl")
    assert [r["instance_id"] for r in kept] == ["acme__calc-2"]


def test_an_rl_set_entirely_inside_the_sft_set_is_one_line(src, tmp_path):
    problems = ["Compute the sum of the first 10 positive integers.",
                "Find the remainder when 2^10 is divided by 7.",
                "What is 3 + 4?"]  # every RL math row neither a duplicate nor an evaluation item
    _append(src / S1 / "math" / "math_1.jsonl", *_sft(*problems))
    with pytest.raises(PrepareError) as err:
        prepare_command("sft-stage-1,rl-math", tmp_path / "out", source_dir=src,
                        progress=False)
    message = str(err.value)
    assert message.startswith("rl-math/train.jsonl: every prompt of "
                              "nvidia/Nemotron-Cascade-RL-Math left is a prompt of the SFT sets "
                              "prepared in this --out (3 in ")
    assert "§4.1.2" in message and "\n" not in message
    assert not (tmp_path / "out" / "rl-math" / "train.jsonl").exists()


def test_rl_files_prepared_before_the_sft_files_are_prepared_again(src, tmp_path, caplog):
    _append(src / S1 / "math" / "math_1.jsonl", *_sft("What is 3 + 4?"))
    out = tmp_path / "out"
    caplog.set_level(logging.WARNING)
    first, _ = prepare_command("rl-math", out, source_dir=src, progress=False)
    assert "no SFT file prepared here" in caplog.text
    assert first["files"]["rl-math/train.jsonl"]["sft_disjoint"] == {}
    assert "in_sft_set" not in first["files"]["rl-math/train.jsonl"]["dropped"]
    prepare_command("sft-stage-1", out, source_dir=src, progress=False)
    again, _ = prepare_command("rl-math", out, source_dir=src, progress=False)  # redone
    assert again["files"]["rl-math/train.jsonl"]["dropped"]["in_sft_set"] == 1


# -------------------------------------------------------------------------------- §4.6.1

def _rates(path: Path, rows: list[tuple[str, int]]) -> Path:
    lines = [json.dumps({"prompt": p, "solved": k, "samples": 8}) for p, k in rows]
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_code_problems_the_weak_model_always_or_the_strong_one_never_solves_are_dropped(tmp_path):
    src, out = FIXTURES, tmp_path / "out"
    prepare_command("rl-code", out, source_dir=src, progress=False)
    questions = [r["question"] for r in _rows(out / "rl-code/train.jsonl")]
    assert len(questions) == 5
    weak = _rates(tmp_path / "weak.jsonl", [(questions[0], 8), (questions[1], 7), (questions[2], 3),
                                            (questions[3].upper(), 2)])  # normalised
    strong = _rates(tmp_path / "strong.jsonl",
                    [(q, 0 if i == 1 else 5) for i, q in enumerate(questions)])
    manifest, _ = prepare_command("rl-code", out, source_dir=src, progress=False,
                                  always_solved=weak, never_solved=strong)
    entry = manifest["files"]["rl-code/train.jsonl"]
    assert entry["dropped"]["always_solved"] == 1 and entry["dropped"]["never_solved"] == 1
    assert entry["rows"] == 3
    assert entry["difficulty_not_measured"] == {"always_solved": 1}  # the weak file lacks one
    assert entry["difficulty"] == {"always_solved": str(weak), "never_solved": str(strong)}
    assert [r["question"] for r in _rows(out / "rl-code/train.jsonl")] == questions[2:]


@pytest.mark.parametrize("line, message", [
    ('{"prompt": "x", "solved": 9, "samples": 8}',
     "rates.jsonl:1: field 'solved': 9 is more than its 8 samples"),
    ('{"prompt": "x", "solved": 1}', "rates.jsonl:1: field 'samples': expected an integer >= 1"),
    ('{"solved": 1, "samples": 8}', "rates.jsonl:1: field 'prompt': expected the problem's text"),
    ("not json", "rates.jsonl:1: invalid JSON")])
def test_a_bad_pass_rate_file_is_one_line(tmp_path, line, message):
    (tmp_path / "rates.jsonl").write_text(line + "\n")
    with pytest.raises(PrepareError) as err:
        prepare_command("rl-code", tmp_path / "out", source_dir=FIXTURES, progress=False,
                        always_solved=tmp_path / "rates.jsonl")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_pass_rates_need_the_code_stage(tmp_path):
    with pytest.raises(PrepareError, match="the pass rates filter the 'rl-code' stage"):
        prepare_command("rl-math", tmp_path / "out", source_dir=FIXTURES,
                        never_solved=tmp_path / "x.jsonl")


def test_the_command_line_takes_the_pass_rate_files(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    cli = [sys.executable, "-m", "nemo_cascade.tooling.cli", "data", "prepare", "rl-code", "--out",
           str(tmp_path / "out"), "--source-dir", str(FIXTURES), "--drop-never-solved",
           str(tmp_path / "missing.jsonl")]
    proc = subprocess.run(cli, capture_output=True, text=True, env=env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("nemo-cascade: error:") == 1
    assert f"{tmp_path / 'missing.jsonl'}: pass-rate file not found" in proc.stderr
