"""docs/rewards.md "A domain of your own", done exactly as the page says: its code and data blocks
written to a folder as the files they name, then its two commands run there. A reward domain and a
suite defined in the user's file train a GRPO stage, are scored by its gate and by `eval`, with no
file inside the package changed."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launch import job_env

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SECTION = ("### A domain of your own", "## Code-switching")


def _page() -> tuple[dict[str, str], list[str]]:
    """The section's files (a python block named by its first-line comment, a jsonl block by its
    info string) and its shell commands."""
    text = (ROOT / "docs/rewards.md").read_text()
    section = text[text.index(SECTION[0]):text.index(SECTION[1])]
    files = {}
    for _lang, name, body in re.findall(r"```(python|jsonl)(?: (\S+))?\n(.*?)```", section, re.S):
        files[name or body.splitlines()[0].removeprefix("# ")] = body
    commands = re.search(r"```bash\n(.*?)```", section, re.S).group(1).splitlines()
    return files, commands


def test_a_domain_in_the_users_own_file_runs_a_stage_a_gate_suite_and_eval(tmp_path):
    files, commands = _page()
    assert set(files) == {"reverse.py", "recipe.py", "words.jsonl", "reverse_suite.jsonl"}, files
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    env = job_env()
    for command in commands:
        argv = command.split()
        assert argv[0] == "nemo-cascade", command
        proc = subprocess.run([sys.executable, "-m", "nemo_cascade.tooling.cli", *argv[1:]],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{command}: {proc.stderr[-4000:]}"
    run = tmp_path / "runs/reverse"
    steps = [json.loads(line) for line in (run / "stages/0-reverse/metrics.jsonl").read_text()
             .splitlines()]
    assert len(steps) == 2 and all("reverse/exact" in step for step in steps), steps
    gated = json.loads((run / "base/eval.json").read_text())["suites"]  # the gate's row before
    assert len(gated["reverse-words"]["records"]) == 2, "the gate scored the plugin's suite"
    assert "reverse-words" in (run / "report.md").read_text()
    evaluated = json.loads((run / "stages/0-reverse/eval.json").read_text())["suites"]
    assert evaluated["reverse-words"]["domain"] == "reverse"
    assert len(evaluated["reverse-words"]["records"]) == 2
