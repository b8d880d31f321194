"""The actor's GRPO training step with each sample's own prompt and with a group's samples sharing
one copy of it.

Builds the Megatron actor (TP=1, as every CPU run) for the tiny Qwen3 or SmolLM2-135M-Instruct in
one precision, and a batch shaped like bench/vs_trl.py's step for that model (its prompts per step,
group size and response budget, or ``--prompts``; prompts of the synthetic arithmetic set's
length, responses of 80-100 % of the budget or ``--shortest`` to 100 %, random tokens), laid out
by ``grpo.make_batch``: one sequence per row (``unpacked``), packed rows with each sample's own
prompt (``packed``: ``grpo.share_prompts=false``), packed rows whose samples share their prompt
(``shared``: the default; ``--pack-tokens`` bounds the rows, 0 = as long as the longest group) and
the same with whole groups only (``shared,whole``: no group split over rows' tails, the layout
before ``packing.fill_rows``). On CPU the actor attends
packed rows block by block (``fused_attention.attend_by_block``) where that computes at most half of
the mask's score cells; ``shared+mask`` runs the shared rows through the block-diagonal mask instead
(torch's fused kernel in fp32, Megatron's unfused attention in bf16), to measure what the blocks
save. ``train_step`` is timed on each layout in turn, ``--repeats`` rounds after a warm-up (lr 0:
the weights stay put), so a slow spell of a shared machine falls on all of them. ``--attention
unfused`` swaps torch's fused attention on CPU back for Megatron's unfused one throughout (masks, no
blocks), to measure what it saves. Prints per layout the tokens laid out, the median step and its
ratio to ``unpacked``, and the loss and gradient norm (equal up to rounding: the layouts compute the
same loss); appends one record to ``bench/results/shared_prompts.jsonl``.

    .venv/bin/python bench/shared_prompts.py                            # tiny, fp32
    .venv/bin/python bench/shared_prompts.py --model smollm2 --dtype bfloat16 --repeats 5
    # tiny, fp32, Megatron's attention only
    .venv/bin/python bench/shared_prompts.py --attention unfused
    # SmolLM2, 8 groups of uneven length: what splitting a group over rows' tails saves, and in
    # how many of 50 such batches it saves positions at all
    .venv/bin/python bench/shared_prompts.py --model smollm2 --prompts 8 --shortest 0.1
    .venv/bin/python bench/shared_prompts.py --model smollm2 --prompts 8 --shortest 0.1 \
        --count-seeds 50
"""
from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.step_breakdown import model_dir  # noqa: E402
# one step's work per model, as the TRL comparison runs it
from bench.vs_trl import WORK  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "shared_prompts.jsonl"
PROMPT_TOKENS = {"tiny": 28, "smollm2": 32}
"""Templated prompt lengths of the synthetic arithmetic test split (bench/vs_trl.py's prompts):
27-29, 31-33."""


def work(model: str, prompts: int = 0) -> dict:
    """bench/vs_trl.py's step for ``model``, with ``prompts`` per step where given."""
    return {**WORK[model], **({"prompts": prompts} if prompts else {})}


def groups_like_vs_trl(model: str, vocab: int, seed: int = 0, shortest: float = 0.8,
                       prompts: int = 0) -> list:
    """:func:`work`'s prompts per step and group size; responses of ``shortest`` to all of its
    response budget, random tokens."""
    from nemo_cascade.types import Prompt, PromptGroup

    w, rng = work(model, prompts), random.Random(seed)
    token = lambda: rng.randrange(3, vocab)  # noqa: E731
    groups = []
    for p in range(w["prompts"]):
        prompt = [token() for _ in range(PROMPT_TOKENS[model] + p % 2)]
        lengths = [rng.randint(max(1, int(shortest * w["max_tokens"])), w["max_tokens"])
                   for _ in range(w["group"])]
        groups.append(PromptGroup(Prompt(prompt_tokens=prompt, domain="math", label="1"),
                                  [[token() for _ in range(n)] for n in lengths],
                                  [[-1.0] * n for n in lengths], ["stop"] * w["group"],
                                  rewards_G=[float(i % 2) for i in range(w["group"])]))
    return groups


@contextlib.contextmanager
def whole_groups_layout():
    """``grpo.make_batch`` laying out whole groups (:func:`whole_groups`) while inside."""
    from nemo_cascade.algorithms import grpo

    split = grpo.pack_rows_of
    grpo.pack_rows_of = whole_groups
    try:
        yield
    finally:
        grpo.pack_rows_of = split


def whole_groups(prompts_S, responses_S, pack_tokens: int, share: bool) -> list[list]:
    """The rows ``packing.pack_rows_of`` laid out before it split a group that fits no row whole:
    first-fit decreasing of whole units."""
    from nemo_cascade.algorithms import packing

    budget = max([pack_tokens, *(len(p) + len(r) for p, r in zip(prompts_S, responses_S))])
    share_budget = (budget if pack_tokens else sys.maxsize) if share else 0
    units, lengths = packing.share_prompts(prompts_S, responses_S, share_budget)
    return [[units[u] for u in row] for row in packing.pack_rows(lengths, max([budget, *lengths]))]


def rows_saved(model: str, seeds: int, shortest: float, prompts: int) -> list[tuple[int, int]]:
    """Per seed of the batch (no actor, no timing): the positions (rows × T) of the shared layout
    with whole groups and with groups split over rows' tails."""
    from nemo_cascade import config
    from nemo_cascade.algorithms import grpo

    cfg = config.GRPO(group_size=WORK[model]["group"], adv_eps=0.0)
    out = []
    for seed in range(seeds):
        groups = groups_like_vs_trl(model, 1000, seed, shortest, prompts)
        with whole_groups_layout():
            whole = grpo.make_batch(groups, cfg, pad_id=0).tokens_B_T.numel()
        out.append((whole, grpo.make_batch(groups, cfg, pad_id=0).tokens_B_T.numel()))
    return out


def measure(model: str, dtype: str, repeats: int, pack_tokens: int,
            attention: str = "plan", shortest: float = 0.8, prompts: int = 0) -> dict:
    from nemo_cascade import config
    from nemo_cascade.actor import precision
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.algorithms import grpo, packing

    # what an fp32 actor on CPU ran before torch's fused attention (for comparison)
    if attention == "unfused":
        planned = precision.plan
        precision.plan = lambda *a, **k: replace(planned(*a, **k), fused_attention=False)

    w = work(model, prompts)
    with tempfile.TemporaryDirectory(prefix="shared-prompts-") as tmp:
        path = model_dir(model, Path(tmp))
        vocab = json.loads((Path(path) / "config.json").read_text())["vocab_size"]
        actor = MegatronActor(path, config.Parallel(micro_batch_size=w["prompts"] * w["group"]),
                              dtype=dtype)
    actor.configure_optimizer(config.Actor(lr=0.0), total_steps=1000)
    cfg = config.GRPO(group_size=w["group"], prompts_per_step=w["prompts"], adv_eps=0.0,
                      pack_tokens=pack_tokens)
    groups = groups_like_vs_trl(model, vocab, shortest=shortest, prompts=prompts)
    layouts = {"unpacked": replace(cfg, sequence_packing=False),
               "packed": replace(cfg, share_prompts=False), "shared": cfg}
    # the shared rows through the block-diagonal mask, as on the GPU local spec
    if actor.plan.fused_attention:
        layouts["shared+mask"] = cfg
    batches = {name: grpo.make_batch(groups, c, pad_id=0) for name, c in layouts.items()}
    with whole_groups_layout():  # the shared rows as laid out before groups were split
        batches["shared,whole"] = grpo.make_batch(groups, cfg, pad_id=0)
    loss_fn = partial(grpo.actor_loss, cfg)
    seconds: dict[str, list[float]] = {name: [] for name in batches}
    last = {}

    def step(name: str):
        packing.BLOCK_CELLS_AT_MOST = 0.0 if name.endswith("+mask") else by_block
        return actor.train_step(batches[name].tensors(), loss_fn)

    by_block = packing.BLOCK_CELLS_AT_MOST
    for name in batches:  # warm-up: first-touch allocations of each shape
        step(name)
    for i in range(repeats):
        for name in batches:
            t0 = time.perf_counter()
            last[name] = step(name)
            seconds[name].append(round(time.perf_counter() - t0, 4))
        print(f"  round {i + 1}/{repeats}: "
              + ", ".join(f"{n} {s[-1]:.3f} s" for n, s in seconds.items()),
              file=sys.stderr, flush=True)
    median = {name: statistics.median(s) for name, s in seconds.items()}
    packing.BLOCK_CELLS_AT_MOST = by_block
    fused = actor.plan.fused_attention
    return {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "model": model, "dtype": dtype,
            "pack_tokens": pack_tokens, "shortest": shortest,
            "attention": "torch fused, blocks" if fused else "megatron unfused", "work": w,
            "layouts": {name: {
                "rows": int(b.tokens_B_T.shape[0]), "T": int(b.tokens_B_T.shape[1]),
                "tokens": int((b.segment_ids_B_T > 0).sum()), "step_s": seconds[name],
                "median_s": median[name],
                "vs_unpacked": round(median[name] / median["unpacked"], 3),
                "loss": last[name].loss, "grad_norm": last[name].grad_norm}
                for name, b in batches.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny", choices=tuple(WORK))
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pack-tokens", type=int, default=0,
                        help="grpo.pack_tokens (0: rows as long as the longest group)")
    parser.add_argument(
        "--attention", default="plan", choices=("plan", "unfused"),
        help="the actor's plan (torch's fused attention on CPU), or Megatron's unfused throughout")
    parser.add_argument("--shortest", type=float, default=0.8,
                        help="the shortest response, as a share of the budget (real groups vary "
                             "more than the default)")
    parser.add_argument("--prompts", type=int, default=0,
                        help="prompts per step; 0 = bench/vs_trl.py's")
    parser.add_argument("--count-seeds", type=int, default=0,
                        help="only count, over this many seeds of the batch, the positions with "
                             "whole groups and split (no timing, no record)")
    args = parser.parse_args()
    if args.count_seeds:
        counts = rows_saved(args.model, args.count_seeds, args.shortest, args.prompts)
        saved = [split / whole for whole, split in counts if split < whole]
        mean = statistics.mean(split / whole for whole, split in counts)
        print(f"{len(saved)} of {len(counts)} batches laid out in fewer positions split"
              + (f" ({min(saved):.2f}-{max(saved):.2f} of whole groups')" if saved else "")
              + f"; all {len(counts)}: {mean:.3f} of whole groups' positions on average")
        return 0
    record = measure(args.model, args.dtype, args.repeats, args.pack_tokens, args.attention,
                     args.shortest, args.prompts)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as f:
        f.write(json.dumps(record) + "\n")
    print(f"\n{args.model} {args.dtype}, {record['attention']} attention, pack_tokens "
          f"{args.pack_tokens}: {args.repeats} rounds")
    print(f"{'layout':<11} {'rows':>5} {'T':>5} {'tokens':>7} {'median s':>9} {'÷ unpacked':>10} "
          f"{'loss':>12} {'grad norm':>12}")
    for name, r in record["layouts"].items():
        print(f"{name:<11} {r['rows']:>5} {r['T']:>5} {r['tokens']:>7} {r['median_s']:>9.3f} "
              f"{r['vs_unpacked']:>10.2f} {r['loss']:>12.6g} {r['grad_norm']:>12.6g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
