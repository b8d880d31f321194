"""bench/gpu_step.py, the GPU check's actor bench, runs every part on CPU with its tiny preset: a
part that breaks with the code it measures shows here, not first on a lent GPU."""
import json
import subprocess
import sys
from pathlib import Path

from tests.launch import job_env

ROOT = Path(__file__).resolve().parents[2]


def test_every_part_of_the_actor_bench_runs_on_the_tiny_preset(tmp_path):
    out = tmp_path / "gpu_step.jsonl"
    env = job_env()  # its own one-rank group
    proc = subprocess.run([sys.executable, "bench/gpu_step.py", "--preset", "tiny", "--out",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["part"] for r in records] == ["parity", "parity", "gemm", "train", "logprob",
                                            "export"]
    assert all(r["pass"] for r in records if r["part"] == "parity")
    assert records[-1]["tensors"] > 0 and records[-1]["bucket_mb"] > 0
