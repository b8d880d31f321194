"""SFT sequence packing against its peer, one example per row: tokens computed, rows, seconds per
step.

The same 32 examples of the tiny cascade's SFT blend (arithmetic, IF, code and bug-fix tasks,
recipes/tiny.py) go through the real Megatron actor's ``train_step`` twice: packed into rows of
``--max-tokens`` (``algorithms.packing.pack_sft_batch``: block-diagonal attention, positions
restarting per example) and each in a row of its own padded to the longest (what packing replaces).
Both compute the same loss (tests/unit/test_sft_packing_parity.py); the ratio of their step times is
what packing buys. Results are appended to ``bench/results/sft_packing.jsonl``.

    .venv/bin/python bench/sft_packing.py [--steps 5] [--max-tokens 256]
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "sft_packing.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()

    import torch
    from transformers import AutoTokenizer

    from nemo_cascade import config
    from nemo_cascade.actor import cpu
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.algorithms.packing import pack_sft_batch
    from nemo_cascade.tooling.demo_data.tiny_models import BUILDERS
    from nemo_cascade.data.loader import load_sft_examples
    from nemo_cascade.cascade.stage import sft_loss
    from nemo_cascade.tooling import demo_data

    demo_data.register()  # the synthetic:/benchmark: sets and tiny models this reads

    cpu.enable()
    model = BUILDERS["tiny-qwen3-cascade"](Path(tempfile.mkdtemp()) / "tiny")
    tok = AutoTokenizer.from_pretrained(model)
    examples = [
        e for name in ("arithmetic", "if_arithmetic", "code_arithmetic", "bugfix_arithmetic")
        for e in load_sft_examples(config.Data(source=f"synthetic:{name}"), tok, "no_think",
                                   args.max_tokens)]
    random.Random(0).shuffle(examples)
    actor = MegatronActor(str(model), config.Parallel(micro_batch_size=64))
    actor.configure_optimizer(config.Actor(lr=1e-4), 1000)
    batches = [examples[i * args.batch:(i + 1) * args.batch] for i in range(args.steps + 1)]

    def timed(make) -> tuple[float, int, int]:
        seconds, rows, tokens = [], 0, 0
        for i, batch in enumerate(batches):
            tensors = make(batch)
            start = time.perf_counter()
            actor.train_step(tensors, sft_loss)
            if i:  # the first step warms up
                seconds.append(time.perf_counter() - start)
            rows, tokens = tensors["tokens"].shape[0], tensors["tokens"].numel()
        return statistics.mean(seconds), rows, tokens

    def unpacked(batch):  # one example per row: the rows of the single-example packs, right-padded
        rows = [pack_sft_batch([e], args.max_tokens, 0).tensors() for e in batch]
        T = max(r["tokens"].shape[1] for r in rows)
        pad = lambda t: torch.nn.functional.pad(t, (0, T - t.shape[1]))  # noqa: E731
        return {k: torch.cat([pad(r[k]) for r in rows]) for k in rows[0]}

    packed_s, packed_rows, packed_tokens = timed(
        lambda b: pack_sft_batch(b, args.max_tokens, 0).tensors())
    plain_s, plain_rows, plain_tokens = timed(unpacked)
    row = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "examples": args.batch,
           "max_tokens": args.max_tokens,
           "packed": {"rows": packed_rows, "tokens": packed_tokens, "step_s": round(packed_s, 3)},
           "one_per_row": {"rows": plain_rows, "tokens": plain_tokens, "step_s": round(plain_s, 3)},
           "speedup": round(plain_s / packed_s, 2)}
    print(json.dumps(row))
    RESULTS.parent.mkdir(exist_ok=True)
    with RESULTS.open("a") as f:
        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
