"""The same stage started in several fresh processes on this machine gives the same bits: every
logged number of its steps (times aside) and every byte of its export. This is what makes a resumed
run equal the uninterrupted one; whatever the CPU family, the process's first computations must take
the same path as any later ones (docs/testing.md, "Tolerances, and what is bit-exact")."""
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
RUNS = 4


def sft_stage(run_root: Path) -> tuple[list[dict], str]:
    """``recipes/tiny.py:math_only``'s SFT stage, 3 steps, in a fresh process: its logged numbers
    and the hash of its HF export."""
    cmd = [
        sys.executable, "-m", "nemo_cascade.tooling.cli", "run", "recipes/tiny.py:math_only",
        "--stage", "sft", "stages.sft.steps=3", f"run_root={run_root}"]
    # a fresh job, not this process's group (an actor test's)
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    stage = run_root / "tiny-math" / "stages" / "0-sft"
    rows = [{k: v for k, v in json.loads(line).items() if not k.startswith("time/")}
            for line in (stage / "metrics.jsonl").read_text().splitlines()]
    digest = hashlib.sha256()
    for f in sorted((stage / "hf").glob("*.safetensors")):
        digest.update(f.read_bytes())
    return rows, digest.hexdigest()


def test_fresh_processes_give_the_same_bits(tmp_path):
    first_rows, first_export = sft_stage(tmp_path / "0")
    assert len(first_rows) == 3 and first_rows[0]["loss"] != first_rows[1]["loss"]
    for k in range(1, RUNS):
        rows, export = sft_stage(tmp_path / str(k))
        for step, (row, want) in enumerate(zip(rows, first_rows)):
            assert row == want, f"run {k}, step {step}: {row} differs from the first run's {want}"
        assert export == first_export, f"run {k}: the export differs from the first run's"
