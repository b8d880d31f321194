"""What huge pages for torch's CPU tensors (``THP_MEM_ALLOC_ENABLE=1``: 2 MiB-aligned, madvise'd
buffers of 2 MiB or more) do to the actor's training step. Not applied: on an AMD EPYC VM they made
SmolLM2's step 1.17x slower (docs/performance.md, "Training step on CPU").

Torch reads the variable once per process, so each variant is its own process: bench/train_step.py's
child (SmolLM2 or the tiny Qwen3, its fixed GRPO batch, the default one-rank collectives), with
``THP_MEM_ALLOC_ENABLE`` 0 and 1, the order swapped every round so that a slow spell of a shared
machine falls on both. Prints each process's median step and peak RSS, then the medians over
rounds and the ratio on / off; appends one record to ``bench/results/huge_pages.jsonl``.

    .venv/bin/python bench/huge_pages.py                 # SmolLM2 fp32, 3 rounds of 5 steps
    .venv/bin/python bench/huge_pages.py --model tiny --rounds 5
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "huge_pages.jsonl"
VARIANTS = {"off": "0", "on": "1"}


def one_process(model: str, dtype: str, steps: int, value: str) -> dict:
    """bench/train_step.py's child record, run with ``THP_MEM_ALLOC_ENABLE=value``."""
    env = {**os.environ, "THP_MEM_ALLOC_ENABLE": value}
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "train_step.py"), "--model",
                           model, "--steps", str(steps), "--one", dtype],
                          capture_output=True, text=True, cwd=ROOT, env=env)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode or line is None:
        raise SystemExit(f"THP_MEM_ALLOC_ENABLE={value} failed (rc {proc.returncode}):\n"
                         f"{proc.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2", choices=("smollm2", "tiny"))
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5, help="measured steps a process")
    args = parser.parse_args()
    step_s: dict[str, list[float]] = {v: [] for v in VARIANTS}
    rss: dict[str, list[int]] = {v: [] for v in VARIANTS}
    for r in range(args.rounds):
        order = list(VARIANTS) if r % 2 == 0 else list(reversed(VARIANTS))
        for variant in order:
            record = one_process(args.model, args.dtype, args.steps, VARIANTS[variant])
            step_s[variant].append(record["median_s"]["shortcut"])
            rss[variant].append(record["max_rss_mib"])
            print(f"round {r + 1}/{args.rounds} huge pages {variant:<3}: median step "
                  f"{step_s[variant][-1]:.2f} s, peak RSS {rss[variant][-1]} MiB", flush=True)
    median = {v: statistics.median(ts) for v, ts in step_s.items()}
    out = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "model": args.model, "dtype": args.dtype,
           "steps": args.steps, "step_s": step_s, "max_rss_mib": rss, "median_s": median,
           "on_over_off": round(median["on"] / median["off"], 3)}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as f:
        f.write(json.dumps(out) + "\n")
    print(f"{args.model} {args.dtype}: median step off {median['off']:.2f} s, on "
          f"{median['on']:.2f} s, on / off {out['on_over_off']:.2f}; peak RSS off "
          f"{statistics.median(rss['off'])} MiB, on {statistics.median(rss['on'])} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
