"""The commands docs/launch.md and docs/scaling.md show use the CLI's real flags and the scripts'
real settings."""
import re
import shlex
from pathlib import Path

import pytest

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade.tooling.cli import main
from nemo_cascade.tooling.launch_tasks import _entry_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("docs/launch.md", "docs/scaling.md")


def _bash_lines(doc: str) -> list[str]:
    """Every command line of the doc's ```bash blocks, continuation lines joined."""
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / doc).read_text(), re.S)
    return [line for block in blocks for line in block.replace("\\\n", " ").splitlines()
            if line.strip()]


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
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text), (
                f"{doc}: `{line}`: no {flag} in {sub}")
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
    entry = re.search(r"`python -m nemo_cascade\.tooling\.launch serve ([^`]*)`", doc).group(1)
    serve = _entry_parser()._subparsers._group_actions[0].choices["serve"]
    known = {s for a in serve._actions for s in a.option_strings}
    assert _flags(entry.split()) <= known
    for flag in _flags(entry.split()):
        assert f"{flag} " in script, f"serve_model.sh does not pass {flag}"


# ----------------------------------------------------------------------- every command in launch.md
SCRIPT_RECIPES = {"cascade_8b.sh": "recipes/nemotron_cascade_8b.py",
                  "cascade_14b.sh": "recipes/nemotron_cascade_14b_thinking.py"}
SETTINGS_READ_BY = ("slurm/common.sh", "slurm/env.sh", "slurm/node.sh", "slurm/serve_model.sh",
                    "nemo_cascade/tooling/launch.py", "nemo_cascade/rewards/endpoints.py",
                    "recipes/nemotron_cascade_8b.py", "recipes/nemotron_cascade_14b_thinking.py",
                    "tools/local_slurm.sh")


def _commands(doc: str) -> list[list[str]]:
    """Every command line in the doc's code blocks (any language): continuation lines joined, a
    leading `$ ` prompt and trailing comments dropped; output lines (a transcript's) are not
    commands."""
    out = []
    for block in re.findall(r"```\w*\n(.*?)```", (ROOT / doc).read_text(), re.S):
        lines = [line.strip() for line in block.replace("\\\n", " ").splitlines()]
        # a transcript: only the prompted lines are commands
        if any(line.startswith("$ ") for line in lines):
            lines = [line for line in lines if line.startswith("$ ")]
        for line in lines:
            line = line.removeprefix("$ ")
            # a command, not an output line that starts with a program's name ("nemo-cascade doctor:
            # vm, …")
            if re.match(r"^([A-Z_]+=\S*\s+)*((\.venv/bin/)?nemo-cascade\s+[a-z-]+(\s|$)|"
                        r"(sbatch|bash|tools/local_slurm\.sh)\s)", line):
                out.append(shlex.split(line, comments=True))
    return out


def _overrides_apply(recipe: str, words: list[str]) -> None:
    from nemo_cascade import config
    from nemo_cascade.tooling.cli import load_recipe

    overrides = [w for w in words if re.match(r"^[a-z_][\w.*]*=", w)]
    # a stage name or key that does not exist: ConfigError
    apply_overrides(load_recipe(recipe), overrides)


def test_every_command_in_launch_md_names_real_scripts_settings_recipes_and_stages(capsys):
    sources = "".join((ROOT / p).read_text() for p in SETTINGS_READ_BY)
    seen = set()
    for words in _commands("docs/launch.md"):
        env = dict(w.split("=", 1) for w in words if re.match(r"^[A-Z_]+=", w))
        for name in env:
            assert re.search(rf"\b{name}\b", sources), (
                f"launch.md sets {name}, which no script or module reads")
        words = [w for w in words if w not in (f"{k}={v}" for k, v in env.items())]
        script = next((w for w in words if w.startswith(("slurm/", "tools/"))), None)
        if script:
            assert (ROOT / script).is_file(), f"launch.md runs {script}, which does not exist"
        if script in (f"slurm/{s}" for s in SCRIPT_RECIPES):
            recipe = env.get("RECIPE", SCRIPT_RECIPES[script.split("/")[1]])
            _overrides_apply(recipe, words[words.index(script) + 1:])
            seen.add("sbatch")
        elif script == "tools/local_slurm.sh":
            assert words[words.index(script) + 1] in ("start", "stop", "env", "status")
            seen.add("local_slurm")
        elif words[0] == "nemo-cascade" and words[1] in ("run", "launch", "doctor", "plan"):
            _overrides_apply(words[2], words[3:])
            seen.add(words[1])
    assert {"sbatch", "local_slurm", "run", "launch", "doctor"} <= seen, seen


@pytest.mark.parametrize("doc", ["docs/launch.md", "docs/release.md"])
def test_stage_folders_named_in_the_docs_are_the_recipes(doc):
    """`runs/NAME/stages/K-STAGE` in the doc is stage K of a recipe the doc names, and NAME that
    recipe's run name or a RUN_NAME the doc sets."""
    from nemo_cascade.tooling.cli import load_recipe

    text = (ROOT / doc).read_text()
    cfgs = [load_recipe(r) for r in set(re.findall(r"recipes/[\w.]+\.py(?::\w+)?", text))]
    names = {cfg.name for cfg in cfgs} | set(re.findall(r"\bRUN_NAME=([\w.-]+)", text))
    folders = {f"{k}-{stage.name}" for cfg in cfgs for k, stage in enumerate(cfg.stages)}
    found = re.findall(r"runs/([\w.-]+)/stages/(\d+-[\w.-]+)", text)
    assert found
    for run, folder in found:
        assert run in names, (
            f"{doc} names run folder {run}: no recipe or RUN_NAME there has that name")
        assert folder in folders, f"{doc} names stage folder {folder}: stage of no recipe it shows"


ALL_DOCS = sorted([*(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")),
                   "README.md"])


def _hf(*argv: str) -> str:
    import subprocess
    import sys

    hf = Path(sys.executable).parent / "hf"
    proc = subprocess.run([str(hf), *argv], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_hub_commands_are_the_installed_hf_cli_s():
    """Every `hf ...` command the docs show exists in the pinned huggingface_hub, with its flags;
    the commands it no longer ships (huggingface-cli) and packages not installed (datasets) appear
    nowhere."""
    checked = 0
    for doc in ALL_DOCS:
        text = (ROOT / doc).read_text()
        assert "huggingface-cli" not in text and "from datasets import" not in text, doc
        for line in _bash_lines(doc):
            words = shlex.split(line.split("#")[0].replace("$", ""))
            if "hf" not in words:
                continue
            words = words[words.index("hf"):]
            sub = words[1:3] if words[1] == "auth" else words[1:2]
            helptext = _help_of_hf(tuple(sub))
            for flag in _flags(words):
                assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", helptext), (
                    f"{doc}: `{line}`: {flag}")
            checked += 1
    assert checked >= 6


_HF_HELP: dict = {}


def _help_of_hf(sub: tuple) -> str:
    if sub not in _HF_HELP:
        _HF_HELP[sub] = _hf(*sub, "--help")
    return _HF_HELP[sub]


def test_the_download_list_is_every_dataset_data_prepare_reads():
    from dataclasses import fields, is_dataclass

    from nemo_cascade.tooling.prepare import STAGES
    from nemo_cascade.tooling.prepare.sources import Source

    found: set[str] = set()

    def walk(obj, depth=0):
        if isinstance(obj, Source):
            found.add(obj.dataset)
        elif is_dataclass(obj) and depth < 8:
            for f in fields(obj):
                walk(getattr(obj, f.name), depth + 1)
        elif isinstance(obj, (list, tuple)) and depth < 8:
            for item in obj:
                walk(item, depth + 1)

    walk(list(STAGES.values()))
    loop = next(line for line in _bash_lines("docs/install.md") if line.startswith("for ds in"))
    listed = set(loop.split(" in ", 1)[1].split(";")[0].split())
    assert listed == found


def _cli_help(words: list[str], capsys) -> str:
    """The help text of the nemo-cascade command ``words`` starts (``convert to-hf``, ``data
    prepare``: the action's own)."""
    sub = words[1]
    argv = [sub, words[2]] if sub in ("convert", "data") and len(words) > 2 else [sub]
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("doc", ALL_DOCS)
def test_every_command_in_the_docs_is_real(doc, capsys):
    """Each `nemo-cascade ...` line in any doc or README.md names a real command and real flags, and
    its KEY=VALUE overrides apply to its recipe; each job script it runs exists, and
    `slurm/tool.sh`'s command is a real one too."""
    for words in _commands(doc):
        words = [w for w in words if not re.match(r"^[A-Z_]+=", w)]
        if words and words[0].endswith("/tool.sh") or "slurm/tool.sh" in words:
            words = ["nemo-cascade", *words[words.index("slurm/tool.sh") + 1:]]
        script = next((w for w in words if w.startswith(("slurm/", "tools/"))), None)
        if script:
            assert (ROOT / script).is_file(), f"{doc} runs {script}, which does not exist"
            continue
        if not words or not words[0].endswith("nemo-cascade"):
            continue
        text = _cli_help(words, capsys)
        # not a quoted value ("--max-model-len 256")
        for flag in _flags([w for w in words if " " not in w]):
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text), (
                f"{doc}: {' '.join(words)}: {flag}")
        if words[1] in ("run", "launch", "doctor", "plan") and words[2].startswith("recipes/"):
            _overrides_apply(words[2], words[3:])
