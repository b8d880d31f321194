"""The commands docs/launch.md and docs/scaling.md show use the CLI's real flags and the scripts' real settings."""
import re
import shlex
from pathlib import Path

import pytest

from nemo_cascade.cli import main
from nemo_cascade.launch_tasks import _entry_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("docs/launch.md", "docs/scaling.md")


def _bash_lines(doc: str) -> list[str]:
    """Every command line of the doc's ```bash blocks, continuation lines joined."""
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / doc).read_text(), re.S)
    return [line for block in blocks for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def _flags(words: list[str]) -> set[str]:
    return {w.split("=")[0] for w in words if w.startswith("--")}


def _help(sub: str, capsys) -> str:
    with pytest.raises(SystemExit):
        main([sub, "--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("doc", DOCS)
def test_documented_cli_commands_use_real_flags(doc, capsys):
    checked = 0
    for line in _bash_lines(doc):
        words = shlex.split(line)
        if "nemo-cascade" not in words:
            continue
        sub = words[words.index("nemo-cascade") + 1]
        if sub not in ("run", "eval", "plan", "launch", "report", "convert"):
            continue
        text = _help(sub, capsys)
        for flag in _flags(words):
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text), f"{doc}: `{line}`: no {flag} in {sub}"
        checked += 1
    assert checked, f"{doc} shows no nemo-cascade command"


def test_the_serve_script_settings_and_entry_point_flags_exist():
    script = (ROOT / "slurm" / "serve_model.sh").read_text()
    doc = (ROOT / "docs" / "launch.md").read_text()
    lines = [line for line in _bash_lines("docs/launch.md") if "serve_model.sh" in line]
    assert lines
    for line in lines:
        for name in re.findall(r"\b([A-Z_]+)=", line.split("sbatch")[0]):
            assert f"${{{name}" in script or f"{name}=" in script, f"serve_model.sh reads no {name}"
    entry = re.search(r"`python -m nemo_cascade\.launch serve ([^`]*)`", doc).group(1)
    serve = _entry_parser()._subparsers._group_actions[0].choices["serve"]
    known = {s for a in serve._actions for s in a.option_strings}
    assert _flags(entry.split()) <= known
    for flag in _flags(entry.split()):
        assert f"{flag} " in script, f"serve_model.sh does not pass {flag}"
