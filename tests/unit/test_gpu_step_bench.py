"""bench/gpu_step.py, the GPU check's actor bench, runs every part on CPU with its tiny preset: a
part that breaks with the code it measures shows here, not first on a lent GPU."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_part_of_the_actor_bench_runs_on_the_tiny_preset(tmp_path):
    out = tmp_path / "gpu_step.jsonl"
    # its own one-rank group: not the rendezvous this test process may have set up for itself
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    proc = subprocess.run([sys.executable, "bench/gpu_step.py", "--preset", "tiny", "--out",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["part"] for r in records] == ["parity", "parity", "gemm", "train", "logprob",
                                            "export"]
    assert all(r["pass"] for r in records if r["part"] == "parity")
    assert records[-1]["tensors"] > 0 and records[-1]["bucket_mb"] > 0
