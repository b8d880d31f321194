"""``nemo-cascade plan``'s step-time model against measured CPU steps: each model's phases predicted
from the other model's measured efficiencies.

``bench/roofline.py`` records, for each measured GRPO step, what the plan's model reads (tokens
trained, prompt tokens, sequences, the longest response, the model's and engine's sizes) beside the
measured train and generate phases and this machine's limits (matmul FLOP/s, read bandwidth). This
script turns those rows into a check of the model (``tooling/plan_time.py``) that is not fitted to
what it predicts: it takes the model's two machine-dependent efficiencies from one model's row —
the trainer's share of the matmul limit (``mfu``) and a decode iteration's fixed cost
(``decode_iteration_s``), with the memory terms at the measured read bandwidth — and predicts the
other model's phases with them, in the same trainer precision. Rows go to
``bench/results/plan_check.jsonl``; docs/scaling.md has the table.

    .venv/bin/python bench/plan_check.py                 # the newest roofline rows of this machine
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from nemo_cascade.tooling import plan_time  # noqa: E402

ROOFLINE = ROOT / "bench" / "results" / "roofline.jsonl"
RESULTS = ROOT / "bench" / "results" / "plan_check.jsonl"


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name (rows of different machines are not compared)."""
    for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else ():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def measured_hardware(row: dict, **efficiencies) -> plan_time.Hardware:
    """This machine as the plan sees it: the row's matmul limit as the peak, its read bandwidth as
    the memory's (all of it: the probe is what a streaming read gets), the engine's
    ``max_num_seqs``; the efficiencies given, or the model's written assumptions."""
    return replace(plan_time.Hardware(name="this CPU"),
                   peak_flops=row["matmul_flops_per_s"], hbm_bytes_per_s=row["read_bytes_per_s"],
                   max_seqs=row["plan"]["model"]["max_seqs"], **efficiencies)


def predict(model: dict, step: dict, hw: plan_time.Hardware) -> dict:
    """The plan's train and generate phases of one measured step (``step``: its tokens trained,
    prompt tokens of its distinct prompts, sequences and longest response) for the model and engine
    sizes of ``model``."""
    prompts = step["sequences"] / model["samples_per_prompt"]
    train = (plan_time.train_seconds(model["params"], step["tokens"], 1, hw)
             + plan_time.optimizer_seconds(model["params"], 1, hw))
    generate = plan_time.decode_seconds(
        sequences=step["sequences"], prompt=round(step["prompt_tokens"] / prompts),
        response=step["longest"], weight_bytes=model["weight_bytes"],
        kv_bytes_per_token=model["kv_bytes_per_token"], kv_tokens=model["kv_tokens"], hw=hw,
        samples_per_prompt=model["samples_per_prompt"],
        token_flops=2 * model["params"])
    return {"train_s": train, "generate_s": generate}


def fitted(row: dict) -> dict:
    """The two efficiencies the row's own steps imply (medians over them): the forward and
    backward's 6 · params · tokens FLOPs over their time, as a share of the matmul limit; and what a
    decode iteration takes beyond its memory reads and the prefill at that share."""
    model, steps = row["plan"]["model"], row["plan"]["steps"]
    limit = row["matmul_flops_per_s"]
    mfu = statistics.median(6 * model["params"] * s["tokens"] / (s["forward_backward_s"] * limit)
                            for s in steps)
    without = measured_hardware(row, mfu=mfu, bandwidth_share=1.0, decode_iteration_s=0.0)
    costs = [(s["generate_s"] - predict(model, s, without)["generate_s"]) / s["longest"]
             for s in steps]
    return {"mfu": mfu, "decode_iteration_s": max(0.0, statistics.median(costs))}


def errors(row: dict, hw: plan_time.Hardware) -> dict:
    """Predicted / measured − 1 for the train phase, the generate phase and both (medians of the
    row's steps)."""
    model, steps = row["plan"]["model"], row["plan"]["steps"]
    def with_step(phases: dict) -> dict:
        return {**phases, "step_s": phases["train_s"] + phases["generate_s"]}

    predicted = [with_step(predict(model, s, hw)) for s in steps]
    measured = [with_step(s) for s in steps]
    return {k: statistics.median(p[k] for p in predicted)
            / statistics.median(m[k] for m in measured) - 1
            for k in ("train_s", "generate_s", "step_s")}


def newest_rows(path: Path = ROOFLINE) -> dict[tuple[str, str], dict]:
    """The newest row of each (model, trainer dtype) measured on this CPU with the plan's inputs."""
    rows = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row.get("cpu") == cpu_model() and "steps" in row.get("plan", {}):
            rows[row["model"], row["dtype"]] = row
    return rows


def cross_check(rows: dict[tuple[str, str], dict]) -> list[dict]:
    """Per trainer dtype with two models: each model predicted from the other's efficiencies, and
    from the model's written assumptions on the measured limits."""
    out = []
    for (model, dtype), row in sorted(rows.items()):
        others = [r for (m, d), r in rows.items() if d == dtype and m != model]
        for source in others:
            fit = fitted(source)
            hw = measured_hardware(row, bandwidth_share=1.0, **fit)
            out.append({"model": model, "dtype": dtype, "fitted_on": source["model"], **fit,
                        "error": errors(row, hw), "assumed": errors(row, measured_hardware(row)),
                        "measured_at": row["time"]})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--roofline", type=Path, default=ROOFLINE)
    args = parser.parse_args()
    checks = cross_check(newest_rows(args.roofline))
    if not checks:
        raise SystemExit(f"{args.roofline}: no two models measured in one dtype on this CPU "
                         "(run bench/roofline.py)")
    print(f"{'model':<8} {'trainer':<9} {'fitted on':<9} {'mfu':>5} {'iter ms':>7} "
          f"{'train':>6} {'gen.':>6} {'step':>6}   assumed: train / gen. / step")
    for c in checks:
        e, a = c["error"], c["assumed"]
        print(f"{c['model']:<8} {c['dtype']:<9} {c['fitted_on']:<9} {c['mfu']:>5.2f} "
              f"{c['decode_iteration_s'] * 1e3:>7.1f} {e['train_s']:>+6.0%} "
              f"{e['generate_s']:>+6.0%} {e['step_s']:>+6.0%}   {a['train_s']:+.0%} / "
              f"{a['generate_s']:+.0%} / {a['step_s']:+.0%}")
    stamp = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "cpu": cpu_model()}
    with RESULTS.open("a") as f:
        for c in checks:
            f.write(json.dumps({**stamp, **c}) + "\n")
    return 0 if all(math.isfinite(c["error"]["step_s"]) for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
