"""Scoring while generating (paper §4.6.2) on the tiny cascade's code stage: what the overlap saves
per batch.

The code stage's starting policy (the export before it in a finished tiny cascade; ``make run``
first when missing) generates the stage's batch — its prompts, group size, rollout settings — and
the sandboxed code verifier scores it, two ways, alternating, with the same seeds so that both see
the very same samples:

- **after**: ``generate``, then the whole batch scored (``reward.score_while_generating=false``);
- **while**: each group scored in a thread pool as soon as the engine finishes it (the default), the
  rest of the batch still generating; what is left to wait for after generation is the stage's
  ``time/score``.

Prints, per layout, generate s, score s (after generation ends) and their sum, the median of
``--repeats``, and the ratio of the sums; checks that both layouts gave every sample the same
reward. Appends to ``bench/results/async_rewards.jsonl``.

    .venv/bin/python bench/async_rewards.py                    # the code stage of runs/tiny
    .venv/bin/python bench/async_rewards.py --stage swe --repeats 5
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.tiny_run import DEFAULT_RUN, ROOT, ensure_run, policy_before, stage_prompts  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "async_rewards.jsonl"


def one_batch(engine, scorer, stage, prompts, step: int, while_generating: bool) -> dict:
    from nemo_cascade.rewards import ScoreAsFinished

    g = stage.grpo
    with ScoreAsFinished(scorer, while_generating, g.group_size) as scoring:
        start = time.perf_counter()
        groups = engine.generate(prompts, g.group_size, stage.rollout, step=step,
                                 on_group=scoring.on_group)
        generated = time.perf_counter()
        scoring.finish(groups)
        done = time.perf_counter()
    return {"generate_s": generated - start, "score_s": done - generated, "total_s": done - start,
            "rewards": [g.rewards_G for g in groups],
            "tokens": sum(len(t) for g in groups for t in g.response_tokens_G_T)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", default=str(DEFAULT_RUN), help="a finished tiny cascade's folder")
    parser.add_argument("--stage", default="code", help="a GRPO stage of the run")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    run = Path(args.run)
    cfg = ensure_run(run)

    from transformers import AutoTokenizer

    from nemo_cascade.actor import cpu
    from nemo_cascade.rewards import Scorer
    from nemo_cascade.rollout.vllm import RolloutEngine

    k = next((i for i, s in enumerate(cfg.stages) if s.name == args.stage and s.kind == "grpo"),
             None)
    if k is None:
        raise SystemExit(f"{run}: no GRPO stage named {args.stage!r}")
    stage, policy = cfg.stages[k], policy_before(run, cfg, k)
    if stage.domain == "rlhf" or stage.reward.if_rm_bonus:
        raise SystemExit(
            f"stage {stage.name} scores with a served reward model, which this bench does not start"
        )
    tokenizer = AutoTokenizer.from_pretrained(str(policy))
    prompts = stage_prompts(cfg, stage, tokenizer)[:stage.grpo.prompts_per_step]
    r = stage.rollout
    engine = RolloutEngine(str(policy), r, seed=0,
                           max_model_len=r.max_prompt_tokens + r.max_response_tokens,
                           around_generate=cpu.suspended)
    scorer = Scorer(stage.domain, stage.reward)
    # warm-up: sandbox, caches
    one_batch(engine, scorer, stage, prompts, step=0, while_generating=True)
    runs: dict[str, list[dict]] = {"after": [], "while": []}
    for repeat in range(args.repeats):
        for name in ("after", "while") if repeat % 2 == 0 else ("while", "after"):
            runs[name].append(
                one_batch(engine, scorer, stage, prompts, step=1 + repeat,
                          while_generating=name == "while"))
    engine.shutdown()
    for a, b in zip(runs["after"], runs["while"]):
        assert a["rewards"] == b["rewards"], "scoring while generating changed a reward"
    median = {
        name: {
            key: statistics.median(x[key] for x in rows)
            for key in ("generate_s", "score_s", "total_s")} for name, rows in runs.items()}
    rewards = [x for row in runs["after"] for group in row["rewards"] for x in group]
    result = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "stage": stage.name, "prompts": len(prompts),
        "group": stage.grpo.group_size, "repeats": args.repeats, "tokens": statistics.mean(
            x["tokens"] for x in runs["after"]), "reward_mean": sum(rewards) / len(rewards),
        **{name: {
            k_: round(v, 4) for k_, v in m.items()} for name, m in median.items()}, "ratio": round(
            median["while"]["total_s"] / median["after"]["total_s"], 3)}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as f:
        f.write(json.dumps(result) + "\n")
    print(f"\nstage {stage.name}: {len(prompts)} prompts × {stage.grpo.group_size}, "
          f"{result['tokens']:.0f} tokens per batch, mean reward {result['reward_mean']:.2f}, "
          f"median of {args.repeats}")
    print(f"{'scoring':<8} {'generate s':>11} {'score s':>9} {'sum s':>8}")
    for name, m in median.items():
        print(f"{name:<8} {m['generate_s']:11.3f} {m['score_s']:9.3f} {m['total_s']:8.3f}")
    print(f"while / after: {result['ratio']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
