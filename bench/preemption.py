"""Work lost per preemption of a GRPO step, against the interval between rollout flushes.

A step's generation is stopped (the job's end, a stop request) or killed (a node failure) part way;
the resumed step generates only the prompts with no group on disk
(nemo_cascade/runtime/step_rollouts.py), with the seeds of their places. Work lost = time generated
before the preemption + the resumed step's generation − an uninterrupted step's generation: seconds
of generation done twice.

- **stop**: the run writes every finished group before it ends — only sequences still generating are
  lost; the flush interval does not matter.
- **kill**: groups wait up to ``rollout_checkpoint_seconds`` in memory; what was not yet written is
  lost. The writes are replayed from the uninterrupted step's measured group finish times with the
  flush rule of ``StepRollouts.keep`` (a write once the interval has passed since the last, of every
  group kept since).

For each model the uninterrupted step runs with the real engine (the colocated RolloutEngine, its
recipe's sampling) and each resumed step too: the timings are measured, only the moment of the kill
is chosen (at 25, 50 and 75 % of the step). The resumed groups are checked to equal the
uninterrupted ones (tokens and log-probs). Results are appended to
``bench/results/preemption.jsonl``; docs/performance.md quotes them.

    .venv/bin/python bench/preemption.py --model tiny
    .venv/bin/python bench/preemption.py --model smollm2
"""
from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "preemption.jsonl"

SHAPES = {  # prompts × samples × response budget of one step, and the flush intervals tried
    "tiny": dict(prompts=128, group=8, max_tokens=96, max_prompt=64, kv_cache_gib=1.0,
                 flush=(0.0, 0.5, 2.0, 10.0)),
    "smollm2": dict(prompts=16, group=4, max_tokens=160, max_prompt=96, kv_cache_gib=2.0,
                    flush=(0.0, 2.0, 10.0, 60.0)),
}
AT = (0.25, 0.5, 0.75)


def build(model: str, folder: Path):
    from nemo_cascade.tooling.demo_data.tiny_models import build_smollm2, build_tiny_qwen3

    return (build_tiny_qwen3 if model == "tiny" else build_smollm2)(folder)


def prompts_for(path: Path, n: int):
    from transformers import AutoTokenizer

    from nemo_cascade.types import Prompt

    tok, rng = AutoTokenizer.from_pretrained(str(path)), random.Random(0)
    out = []
    for k in range(n):
        a, b = rng.randrange(10, 99), rng.randrange(10, 99)
        ids = tok(f"Question {k}: what is {a} plus {b}? Think, then answer.")["input_ids"]
        out.append(Prompt(ids, "math", str(a + b), uid=f"q{k}"))
    return out


def timed_generate(engine, prompts, group, rollout, positions=None):
    """``(groups, seconds, finish time of each group from the call's start)``."""
    finished: dict[int, float] = {}
    t0 = time.perf_counter()
    groups = engine.generate(prompts, group, rollout, step=7, positions=positions,
                             on_group=lambda i, g: finished.setdefault(i, time.perf_counter() - t0))
    return groups, time.perf_counter() - t0, finished


def written_by(finish: dict[int, float], flush_s: float, at_s: float) -> set[int]:
    """Groups on disk at ``at_s`` under StepRollouts' flush rule: a group kept once ``flush_s`` have
    passed since the last write is written with every group waiting, and a waiting group is written
    by a timer at the last write + ``flush_s`` at the latest."""
    on_disk, pending, last = set(), set(), 0.0
    for i, t in sorted(finish.items(), key=lambda kv: kv[1]):
        if pending and last + flush_s <= min(t, at_s):  # the timer fired first
            on_disk, pending, last = on_disk | pending, set(), last + flush_s
        if t > at_s:
            break
        pending.add(i)
        if t - last >= flush_s:
            on_disk, pending, last = on_disk | pending, set(), t
    if pending and last + flush_s <= at_s:
        on_disk |= pending
    return on_disk


def measure(model: str) -> dict:
    from nemo_cascade import config
    from nemo_cascade.rollout.vllm import RolloutEngine

    shape = SHAPES[model]
    with tempfile.TemporaryDirectory() as tmp:
        path = build(model, Path(tmp) / model)
        rollout = config.Rollout(max_prompt_tokens=shape["max_prompt"],
                                 max_response_tokens=shape["max_tokens"],
                                 kv_cache_gib=shape["kv_cache_gib"], temperature=1.0)
        engine = RolloutEngine(str(path), rollout)
        try:
            prompts = prompts_for(path, shape["prompts"])
            timed_generate(engine, prompts[:4], shape["group"], rollout)  # warm-up
            full, full_s, finish = timed_generate(engine, prompts, shape["group"], rollout)
            rows = []
            for at in AT:
                at_s = at * full_s
                kept = {"stop": {i for i, t in finish.items() if t <= at_s}}
                kept.update({f"kill, flush {f:g} s": written_by(finish, f, at_s)
                             for f in shape["flush"]})
                for how, saved in kept.items():
                    todo = [i for i in range(len(prompts)) if i not in saved]
                    again, again_s, _ = timed_generate(engine, [prompts[i] for i in todo],
                                                       shape["group"], rollout, positions=todo)
                    same = all(a.response_tokens_G_T == full[i].response_tokens_G_T
                               and a.rollout_logprobs_G_T == full[i].rollout_logprobs_G_T
                               for i, a in zip(todo, again))
                    rows.append({"at": at, "how": how, "kept": len(saved), "regenerated": len(todo),
                                 "lost_s": round(at_s + again_s - full_s, 3),
                                 "lost_share": round((at_s + again_s - full_s) / full_s, 3),
                                 "same": same})
        finally:
            engine.shutdown()
    return {"model": model, **shape, "step_generate_s": round(full_s, 3), "rows": rows}


def render(result: dict) -> str:
    lines = [f"{result['model']}: {result['prompts']} prompts × {result['group']} samples ≤ "
             f"{result['max_tokens']} tokens; uninterrupted generation "
             f"{result['step_generate_s']:.2f} s",
             "| preempted at | how | groups kept | regenerated | generation lost | of the step "
             "| same samples |",
             "|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['at']:.0%} | {r['how']} | {r['kept']} | {r['regenerated']} | "
                     f"{r['lost_s']:.2f} s | {r['lost_share']:.0%} | "
                     f"{'yes' if r['same'] else 'NO'} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(SHAPES), default="tiny")
    args = parser.parse_args()
    result = measure(args.model)
    print(render(result))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as f:
        f.write(json.dumps({"time": time.strftime("%F %T"), "machine": platform.node(), **result})
                + "\n")
    return 0 if all(r["same"] for r in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
