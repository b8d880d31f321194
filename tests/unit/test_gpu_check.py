"""bench/gpu_check.sh: the GPU checks in one script. On this machine its doctor part runs for real
and the GPU-only parts are skipped with the reason; an interpreter stand-in that claims CUDA drives
the GPU branches (torchrun for the doctor over 2 GPUs, pytest's counts and skip reasons, gpu_step's
records, a failing part, a part past its time limit, missing modules) in a second or two, without a
GPU."""
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_check.sh"
STATUSES = {"pass", "fail", "timeout", "skipped"}


def run(tmp_path, *args, python=None, env=None, timeout=300):
    full_env = {**os.environ, "PYTHON": python or sys.executable, **(env or {})}
    full_env.pop("OUT", None)
    out = tmp_path / "gpu_check.json"
    r = subprocess.run(["bash", str(SCRIPT), "--out", str(out),
                        "--logs", str(tmp_path / "logs"), *args],
                       cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=timeout)
    assert out.exists(), r.stdout + r.stderr
    return r, json.loads(out.read_text())


def check_shape(report, names):
    assert report["bench"] == "gpu_check"
    assert ({"time", "machine", "parts", "summary", "exit_code", "seconds", "budget_s", "logs"}
            <= report.keys())
    assert (isinstance(report["machine"]["cuda"], bool)
            and isinstance(report["machine"]["gpus"], list))
    assert [p["name"] for p in report["parts"]] == names
    for p in report["parts"]:
        assert p["status"] in STATUSES, p
        if p["status"] == "skipped" and "rc" not in p:
            assert p["reason"]
        else:
            assert isinstance(p["rc"], (int, type(None))) and isinstance(p["seconds"], float)
            assert isinstance(p["tail"], list) and isinstance(p["json_lines"], list)
            assert Path(p["log"]).is_file()
    assert sum(report["summary"].values()) == len(names)
    assert report["exit_code"] == int(
        bool(report["summary"]["fail"] or report["summary"]["timeout"]))


def summary_lines(stdout):
    return {line.split()[0]: line for line in stdout.splitlines() if line.startswith("  ")}


def test_this_machine_doctor_runs_and_gpu_parts_are_skipped_without_cuda(tmp_path):
    cuda = torch.cuda.is_available()
    # never the GPU tier inside the unit tests
    names = ["doctor"] if cuda else ["doctor", "pytest", "step"]
    r, report = run(tmp_path, env={"GPU_CHECK_PARTS": ",".join(names)})
    check_shape(report, names)
    assert r.returncode == report["exit_code"], r.stderr
    doctor = report["parts"][0]
    assert doctor["status"] in ("pass", "fail") and doctor["rc"] in (0, 2)
    assert doctor["rows"] and {row["status"] for row in doctor["rows"]} <= {"ok", "FAIL", "n/a"}
    assert sum(doctor["counts"].values()) == len(doctor["rows"])
    assert "cuda" in {row["check"] for row in doctor["rows"]}
    lines = summary_lines(r.stdout)
    assert set(lines) == set(names)
    assert re.search(r"\d+ ok, \d+ FAIL, \d+ n/a", lines["doctor"])
    if not cuda:
        for p in report["parts"][1:]:
            assert p["status"] == "skipped" and "no CUDA" in p["reason"]
            assert "no CUDA" in lines[p["name"]]
        assert report["exit_code"] == (1 if doctor["status"] == "fail" else 0)


# ------------------------------------------------------------------ an interpreter that claims CUDA
DOCTOR_TABLE = """\
nemo-cascade doctor: fake, rank 0 of 2, no recipe (recipe rows not applicable)
status  check                   detail
ok      cuda                    NVIDIA H200 (GPU 0 of 2), sm_90, CUDA 13.0, FP8 possible
ok      all-reduce              nccl, 2 ranks, 16 MiB in 3 ms
FAIL    version vllm            not installed; the gpu extra requires it (setup.py)
                                fix: pip install 'vllm==0.32.0'
FAIL    transformer engine      transformer_engine.pytorch does not import (not installed)
                                fix: install the gpu extra (transformer-engine[pytorch]) built for \
this torch and CUDA
2 ok, 2 FAIL, 0 n/a
"""
PYTEST_OUT = """\
.s.s                                                                     [100%]
=========================== short test summary info ============================
SKIPPED [9] tests/gpu/test_te_spec.py:31: needs transformer_engine (pip install the gpu extra)
SKIPPED [2] tests/gpu/test_layouts.py:20: needs 2 GPUs
2 passed, 11 skipped in 4.20s
"""
STEP_RECORDS = [
    {"bench": "gpu_step", "part": "parity", "fp32_max_abs_diff": 9.5e-7, "pass": True},
    {"bench": "gpu_step", "part": "parity", "fp32_max_abs_diff": 9.6e-7, "pass": True},
    {"bench": "gpu_step", "part": "gemm", "tflops": 710.2},
    {"bench": "gpu_step", "part": "train", "layers": 12, "step_s_mean": 2.85,
     "tokens_per_s_per_gpu": 11508.0, "mfu_vs_measured_peak_790": 0.29},
]


def fake_python(tmp_path, modules=None, gpus=2, doctor_sleep=0.0, step_rc=0):
    """A stand-in interpreter: runs the script's own runner (`python -`) with this Python, answers
    the machine probe with CUDA and `gpus` GPUs, and prints canned output for the parts."""
    mods = {m: True for m in ("torch", "megatron", "transformers", "pytest", "nemo_cascade")}
    mods.update(modules or {})
    probe = {"python": "3.12", "modules": mods,
             "versions": {"torch": "2.11.0+cu130", "transformer-engine": None}, "cuda": True,
             "gpus": [{"name": "NVIDIA H200", "capability": [9, 0], "memory_gib": 139.8}] * gpus}
    step_out = "\n".join(json.dumps(r) for r in STEP_RECORDS)
    shim = tmp_path / "fake_python"
    shim.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import os, sys, time
        args = sys.argv[1:]
        if args[:1] == ["-"]:
            os.execv({sys.executable!r}, [{sys.executable!r}, *args])
        with open({str(tmp_path / "calls.txt")!r}, "a") as f:
            f.write(" ".join(args) + "\\n")
        if args[:1] == ["-c"]:
            print({json.dumps(probe)!r})
        elif "nemo_cascade.tooling.cli" in args:
            time.sleep({doctor_sleep})
            print({DOCTOR_TABLE!r}, end="")
            sys.exit(2)
        elif args[:2] == ["-m", "pytest"]:
            print({PYTEST_OUT!r}, end="")
        elif args[:1] == ["bench/gpu_step.py"]:
            print("[gpu_step    0.1s] preset 8b on cuda:0", file=sys.stderr)
            print({step_out!r})
            sys.exit({step_rc})
        else:
            sys.exit(99)
        """))
    shim.chmod(0o755)
    return str(shim)


def test_gpu_branches_read_each_parts_output(tmp_path):
    r, report = run(tmp_path, "--step-args", "--preset 8b --only parity,gemm,train",
                    python=fake_python(tmp_path))
    names = ["doctor", "doctor-recipe", "pytest", "step"]
    check_shape(report, names)
    parts = {p["name"]: p for p in report["parts"]}
    calls = (tmp_path / "calls.txt").read_text()
    assert ("-m torch.distributed.run --standalone --nproc_per_node=2 "
            "-m nemo_cascade.tooling.cli doctor\n") in calls
    assert "-m nemo_cascade.tooling.cli doctor recipes/tiny.py\n" in calls
    assert "bench/gpu_step.py --preset 8b --only parity,gemm,train\n" in calls

    doctor = parts["doctor"]
    assert (doctor["status"], doctor["rc"]) == ("fail", 2)
    assert doctor["counts"] == {"ok": 2, "FAIL": 2, "n/a": 0}
    assert [row["check"] for row in doctor["rows"]] == ["cuda", "all-reduce", "version vllm",
                                                        "transformer engine"]
    assert (doctor["rows"][2]["fix"] == "pip install 'vllm==0.32.0'"
            and "fix" not in doctor["rows"][0])
    assert doctor["detail"] == "2 ok, 2 FAIL, 0 n/a (FAIL: version vllm, transformer engine)"

    tests = parts["pytest"]
    assert tests["status"] == "pass" and tests["counts"] == {"passed": 2, "skipped": 11}
    assert tests["skipped_tests"][0] == {
        "count": 9, "where": "tests/gpu/test_te_spec.py:31",
        "reason": "needs transformer_engine (pip install the gpu extra)"}

    step = parts["step"]
    assert step["status"] == "pass" and step["json_lines"] == STEP_RECORDS
    assert step["detail"] == ("parity fp32 9.5e-07/9.6e-07 ok; gemm 710 TFLOP/s; "
                              "train 12 layers 2.850 s/step 11508 tok/s MFU 0.29")
    assert report["summary"] == {"pass": 2, "fail": 2, "timeout": 0, "skipped": 0}
    assert r.returncode == 1 == report["exit_code"]
    lines = summary_lines(r.stdout)
    assert lines["doctor"].startswith("  doctor        fail (rc 2, ")
    assert "2 passed, 11 skipped" in lines["pytest"] and "710 TFLOP/s" in lines["step"]
    assert "2 GPU(s): NVIDIA H200" in r.stdout


def test_a_failing_step_and_a_suite_that_only_skipped(tmp_path):
    shim = fake_python(tmp_path, step_rc=1)
    Path(shim).write_text(Path(shim).read_text().replace("2 passed, 11 skipped", "11 skipped"))
    r, report = run(tmp_path, "--parts", "pytest,step", python=shim)
    check_shape(report, ["pytest", "step"])
    tests, step = report["parts"]
    assert tests["status"] == "skipped" and tests["rc"] == 0
    assert tests["reason"].startswith("every test skipped: needs 2 GPUs; needs transformer_engine")
    assert (step["status"], step["rc"]) == ("fail", 1) and len(step["json_lines"]) == 4
    assert r.returncode == 1


def test_missing_modules_skip_their_parts(tmp_path):
    shim = fake_python(tmp_path, modules={"megatron": False, "pytest": False}, gpus=1)
    r, report = run(tmp_path, "--parts", "doctor,pytest,step", python=shim)
    check_shape(report, ["doctor", "pytest", "step"])
    doctor, tests, step = report["parts"]
    assert (doctor["command"].endswith("-m nemo_cascade.tooling.cli doctor")
            and "torch.distributed.run" not in doctor["command"])
    assert tests["status"] == "skipped" and "pytest is not importable" in tests["reason"]
    assert step["status"] == "skipped" and step["reason"].startswith("megatron-core not importable")


def test_a_part_past_its_limit_is_ended_and_the_rest_still_run(tmp_path):
    start = time.monotonic()
    r, report = run(tmp_path, "--parts", "doctor,pytest", "--timeout-doctor", "2",
                    python=fake_python(tmp_path, doctor_sleep=120))
    assert time.monotonic() - start < 60
    check_shape(report, ["doctor", "pytest"])
    doctor, tests = report["parts"]
    assert (doctor["status"] == "timeout" and "2 s limit" in doctor["reason"]
            and doctor["rc"] is not None)
    assert tests["status"] == "pass"
    assert r.returncode == 1


def test_budget_spent_skips_the_remaining_parts(tmp_path):
    r, report = run(tmp_path, "--parts", "pytest,step", "--budget", "15",
                    python=fake_python(tmp_path))
    check_shape(report, ["pytest", "step"])
    assert all(p["status"] == "skipped" and "budget spent" in p["reason"] for p in report["parts"])
    assert r.returncode == 0


def test_unknown_part_is_a_usage_error(tmp_path):
    r = subprocess.run(["bash", str(SCRIPT), "--parts", "doctor,nope"], cwd=ROOT,
                       capture_output=True, text=True,
                       env={**os.environ, "PYTHON": sys.executable}, timeout=60)
    assert r.returncode == 2 and "unknown part(s) ['nope']" in r.stderr


def test_documented_commands_use_the_scripts_flags():
    text = subprocess.run(["bash", str(SCRIPT), "--help"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHON": sys.executable}, timeout=60).stdout
    assert "--parts" in text
    checked = 0
    for doc in ("docs/performance.md", "docs/scaling.md"):
        blocks = re.findall(r"```bash\n(.*?)```", (ROOT / doc).read_text(), re.S)
        for line in (line for block in blocks for line in block.splitlines()
                     if "bench/gpu_check.sh" in line):
            words = shlex.split(line.split("#")[0])
            for i, word in enumerate(words):
                # not gpu_step's own flags
                if word.startswith("--") and words[i - 1] != "--step-args":
                    flag = word.split("=")[0]
                    assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text), (
                        f"{doc}: `{line}`: no {flag}")
            checked += 1
    assert checked
