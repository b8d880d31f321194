"""The actor's GRPO training step alone on CPU: fp32 against bf16 mixed precision, and what the
one-rank collective shortcut saves.

Builds the Megatron actor (TP=1, DP=1, distributed optimizer, as every CPU run) on
SmolLM2-135M-Instruct (or the tiny Qwen3), one process per precision, and times ``train_step`` on a
fixed batch shaped like bench/vs_trl.py's SmolLM2 step (16 rows × 112 tokens, the last 64 trained,
one microbatch). Within a process the steps alternate between the two ways Megatron's grad-buffer
reduce-scatter and parameter all-gather can run over the one-rank data-parallel group: ``shortcut``
(actor/cpu.py: the identity, what runs by default) and ``gloo`` (the collectives as gloo runs them,
copying the whole buffer), so a slow spell of a shared machine falls on both. Prints per-step
seconds, medians and the ratio; appends one record per precision to
``bench/results/train_step.jsonl``.

    .venv/bin/python bench/train_step.py  # SmolLM2, fp32 and bf16, 5 steps per variant
    .venv/bin/python bench/train_step.py --dtypes bfloat16 --steps 8
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.step_breakdown import model_dir  # noqa: E402  (the same models as the other benches)

RESULTS = ROOT / "bench" / "results" / "train_step.jsonl"
ROWS, TOKENS, TRAINED = 16, 112, 64
# Megatron's grad-buffer collectives
COLLECTIVES = ("dist_reduce_scatter_func", "dist_all_gather_func")


def collective_ways() -> dict[str, dict]:
    """The two ways Megatron's grad-buffer collectives can run over one rank, as ``{way: {name:
    function}}``: ``shortcut`` (actor/cpu.py's identity, installed once the compat layer is on) and
    ``gloo`` (what it wraps)."""
    from megatron.core.distributed import param_and_grad_buffer as buffers

    wrapped = {n: getattr(buffers, n) for n in COLLECTIVES}
    return {"shortcut": wrapped, "gloo": {n: f.identity_over_one_rank for n, f in wrapped.items()}}


def use_collectives(funcs: dict) -> None:
    from megatron.core.distributed import param_and_grad_buffer as buffers

    for name, fn in funcs.items():
        setattr(buffers, name, fn)


def measure(model: str, dtype: str, steps: int) -> dict:
    import torch

    from nemo_cascade import config
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.algorithms import grpo

    with tempfile.TemporaryDirectory(prefix="train-step-") as tmp:
        path = model_dir(model, Path(tmp))
        vocab = json.loads((Path(path) / "config.json").read_text())["vocab_size"]
        actor = MegatronActor(path, config.Parallel(micro_batch_size=ROWS), dtype=dtype)
    actor.configure_optimizer(config.Actor(lr=1e-6), total_steps=100)
    g = torch.Generator().manual_seed(0)
    mask = torch.zeros(ROWS, TOKENS)
    mask[:, TOKENS - TRAINED:] = 1.0
    batch = {"tokens": torch.randint(0, vocab, (ROWS, TOKENS), generator=g), "loss_mask": mask,
             "advantages": torch.randn(ROWS, generator=g),
             "rollout_logprobs": torch.zeros(ROWS, TOKENS)}
    loss_fn = partial(grpo.actor_loss, config.GRPO())
    ways = collective_ways()
    actor.train_step(batch, loss_fn)  # warm-up: Adam state, first-touch allocations
    times: dict[str, list[float]] = {way: [] for way in ways}
    for i in range(steps):
        for way, funcs in ways.items():
            use_collectives(funcs)
            t0 = time.perf_counter()
            actor.train_step(batch, loss_fn)
            times[way].append(round(time.perf_counter() - t0, 3))
            print(f"  {dtype} step {i + 1}/{steps} {way}: {times[way][-1]:.2f} s",
                  file=sys.stderr, flush=True)
    medians = {way: statistics.median(ts) for way, ts in times.items()}
    return {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "model": model, "dtype": dtype,
            "rows": ROWS, "tokens": TOKENS, "trained_tokens_per_row": TRAINED, "step_s": times,
            "median_s": medians,
            "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "shortcut_over_gloo": round(medians["shortcut"] / medians["gloo"], 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2", choices=("smollm2", "tiny"))
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--steps", type=int, default=5,
                        help="measured steps per variant, after one warm-up")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # child mode: one precision, print JSON
    args = parser.parse_args()
    if args.one:
        print("RESULT " + json.dumps(measure(args.model, args.one, args.steps)), flush=True)
        return 0
    for dtype in args.dtypes.split(","):
        proc = subprocess.run([sys.executable, __file__, "--model", args.model,
                               "--steps", str(args.steps), "--one", dtype],
                              capture_output=True, text=True, cwd=ROOT)
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if proc.returncode or line is None:
            raise SystemExit(f"{dtype} failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
        record = json.loads(line[len("RESULT "):])
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        with RESULTS.open("a") as f:
            f.write(json.dumps(record) + "\n")
        m = record["median_s"]
        print(f"{args.model} {dtype:<9} train step median: shortcut {m['shortcut']:.2f} s, "
              f"gloo {m['gloo']:.2f} s, ratio {record['shortcut_over_gloo']:.2f}  "
              f"(per step: {record['step_s']})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
