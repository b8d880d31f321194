"""GRPO sequence packing on the tiny cascade: the share of padding the actor computes, and what
packing saves.

Two measurements, both on a finished tiny cascade (``make run``; the bench runs it first when
``--run`` has none):

1. **Pad share during the run.** Every GRPO step logs ``pad_share`` (of the rows the actor computed)
   and ``pad_share_unpacked`` (the same sequences one per padded row, the layout without packing);
   the table gives each stage's mean over its steps. Exact, not sampled: both come from the same
   batches.
2. **Time.** The run's final policy generates one batch of each GRPO stage's prompts with that
   stage's rollout settings (real lengths); the batch is laid out one sequence per row and packed
   into rows of each ``--pack-tokens`` length (``grpo.pack_tokens``; 0 = the batch's longest
   sequence), with each sample's own prompt (``packed@``) and with a group's samples sharing one
   (``shared@``, ``grpo.share_prompts``), and the actor's ``train_step`` (lr 0, so the weights stay
   put) and ``logprobs`` are timed on every layout (median of ``--repeats``, after a warm-up), in
   one process.

    .venv/bin/python bench/grpo_packing.py                   # runs/tiny (made first when missing)
    .venv/bin/python bench/grpo_packing.py --run runs/tiny --repeats 5 --pack-tokens 0,384

Appends one JSON line per stage to ``bench/results/grpo_packing.jsonl`` and prints the table.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.tiny_run import DEFAULT_RUN, ROOT, ensure_run, stage_folder, stage_prompts  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "grpo_packing.jsonl"


def pad_shares(run: Path, cfg) -> dict[str, dict]:
    """Per GRPO stage: mean pad share of its logged steps, packed and unpacked."""
    from nemo_cascade.cascade.metrics import read_metrics

    out = {}
    for k, stage in enumerate(cfg.stages):
        rows = [r for r in read_metrics(stage_folder(run, cfg, k)) if "pad_share" in r]
        if stage.kind == "grpo" and rows:
            out[stage.name] = {
                "steps": len(rows), "pad_share": statistics.mean(r["pad_share"] for r in rows),
                "pad_share_unpacked": statistics.mean(r["pad_share_unpacked"] for r in rows)}
    return out


def timed(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_layouts(run: Path, cfg, repeats: int, pack_tokens: list[int],
                 micro_batch: int | None) -> dict[str, dict]:
    """Per GRPO stage: one real rollout batch, train_step and logprobs timed unpacked and packed
    into rows of each of ``pack_tokens`` (``grpo.pack_tokens``; 0 = the longest sequence)."""
    from dataclasses import replace

    from transformers import AutoTokenizer

    from nemo_cascade import config
    from nemo_cascade.actor import cpu
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.algorithms import grpo
    from nemo_cascade.data.loader import pad_id
    from nemo_cascade.rollout.vllm import RolloutEngine

    grpo_stages = [(k, s) for k, s in enumerate(cfg.stages) if s.kind == "grpo"]
    policy = stage_folder(run, cfg, grpo_stages[-1][0]) / "hf"
    tokenizer = AutoTokenizer.from_pretrained(str(policy))
    parallel = cfg.parallel if micro_batch is None else replace(cfg.parallel,
                                                                micro_batch_size=micro_batch)
    actor = MegatronActor(str(policy), parallel)
    actor.configure_optimizer(config.Actor(lr=0.0), 1000)
    longest = max(s.rollout.max_prompt_tokens + s.rollout.max_response_tokens
                  for _, s in grpo_stages)
    engine = RolloutEngine(str(policy), grpo_stages[0][1].rollout, seed=0, max_model_len=longest,
                           around_generate=cpu.suspended)
    out = {}
    for k, stage in grpo_stages:
        prompts = stage_prompts(cfg, stage, tokenizer)
        groups = engine.generate(prompts[:stage.grpo.prompts_per_step], stage.grpo.group_size,
                                 stage.rollout, step=0)
        # rewards only decide advantages here; alternate them so that no group is dropped
        for group in groups:
            group.rewards_G = [float(i % 2) for i in range(group.group_size)]
        layouts = {
            "unpacked": grpo.make_batch(groups, replace(stage.grpo, sequence_packing=False),
                                        pad_id(tokenizer))}
        # 0: rows as long as the batch's longest sequence (or group, shared)
        for budget in pack_tokens:
            # grpo.share_prompts: a group's samples share one copy of their prompt
            for share in (False, True):
                layouts[f"{'shared' if share else 'packed'}@{budget}"] = grpo.make_batch(
                    groups,
                    replace(stage.grpo, sequence_packing=True, pack_tokens=budget,
                            share_prompts=share), pad_id(tokenizer))
        row = {"sequences": layouts["unpacked"].num_sequences}
        for name, batch in layouts.items():
            loss = partial(grpo.actor_loss, stage.grpo)
            computed = actor.train_step(batch.tensors(), loss).metrics["computed_tokens"]
            row[name] = {
                "rows": int(batch.tokens_B_T.shape[0]),
                "T": int(batch.tokens_B_T.shape[1]),
                # of the positions the actor ran: microbatches of packed rows are cut to their
                # longest row
                "pad_share": round(1 - float((batch.segment_ids_B_T > 0).sum()) / computed, 4),
                "train_s": round(timed(lambda: actor.train_step(batch.tensors(), loss), repeats),
                                 4),
                "logprobs_s": round(
                    timed(lambda: actor.logprobs(batch.tokens_B_T, 1.0, batch.layout()), repeats),
                    4), }
        out[stage.name] = row
        print(f"timed {stage.name}", file=sys.stderr, flush=True)
    engine.shutdown()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", default=str(DEFAULT_RUN), help="a finished tiny cascade's folder")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--pack-tokens", default="0,256,512",
        help="row lengths to time (grpo.pack_tokens; 0 = the batch's longest sequence)")
    parser.add_argument("--micro-batch", type=int, help="rows per microbatch (default: the run's "
                        "parallel.micro_batch_size)")
    args = parser.parse_args()
    budgets = [int(x) for x in args.pack_tokens.split(",")]
    run = Path(args.run)
    cfg = ensure_run(run)
    shares = pad_shares(run, cfg)
    if not shares:
        print(f"{run}: no GRPO step logged pad_share (a run from before packing); run it again",
              file=sys.stderr)
        return 1
    times = time_layouts(run, cfg, args.repeats, budgets, args.micro_batch)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as f:
        for name in times:
            f.write(
                json.dumps({
                    "time": stamp, "stage": name, "run": shares.get(name), "micro_batch": args.
                    micro_batch or cfg.parallel.micro_batch_size, **times[name]}) + "\n")
    print(
        f"\n{'stage':<8} {'run pad share':>18} {'seqs':>5} {'layout':<12} {'rows':>5} {'T':>5} "
        f"{'pad share':>10} "
        f"{'train s':>8} {'÷ unp':>6} {'logprobs s':>10} {'÷ unp':>6}")
    for name, t in times.items():
        s = shares.get(name)
        run_cell = f"{s['pad_share_unpacked']:.1%} → {s['pad_share']:.1%}" if s else "—"
        u = t["unpacked"]
        for k, layout in enumerate(x for x in t if x not in ("sequences",)):
            r = t[layout]
            print(
                f"{name if k == 0 else '':<8} {run_cell if k == 0 else '':>18} "
                f"{t['sequences'] if k == 0 else '':>5} "
                f"{layout:<12} {r['rows']:>5} {r['T']:>5} {r['pad_share']:>10.1%} "
                f"{r['train_s']:>8.3f} "
                f"{r['train_s'] / u['train_s']:>6.2f} {r['logprobs_s']:>10.3f} "
                f"{r['logprobs_s'] / u['logprobs_s']:>6.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
