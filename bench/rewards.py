"""Verifier throughput: samples/s of each reward, the sandbox's isolation overhead, and pool
scaling.

Paper §4.6: verification latency is what the domain-wise design and asynchronous verification work
around, so each verifier is timed on real data through the same batched entry points the stage uses:

- math: MATH-500 reference answers, once written as given (settled by the in-process exact check)
  and once perturbed (every sample goes to math-verify in the killable worker pool), with 1 and 2
  workers;
- ifeval: GPT-4's responses to the 541 IFEval prompts (strict verdicts, all checkers);
- code: the 164 HumanEval canonical solutions under bubblewrap with 1 and 2 workers, and the same
  programs with ``unsafe=True`` (same rlimits, no bwrap) — the ratio is the isolation overhead;
- swe: the 300 SWE-bench Lite golden patches given back as answers, plus an altered fix (lexical
  grade);
- rlhf: HH-RLHF-style conversations scored by a tiny random Bradley–Terry model behind a real ``vllm
  serve`` (the client's batching and concurrency; a real RM's forward pass dominates on a cluster).
  Opt-in (``--only rlhf``): the server takes a minute to start on 2 cores.

Pool scaling is samples/s with 2 workers ÷ with 1 (ideal 2.0 on 2 idle cores). Results are appended
to ``bench/results/rewards.jsonl``. On a shared machine absolute numbers move; the ratios are what
to read.

    .venv/bin/python bench/rewards.py                     # everything (~3 min on 2 cores)
    .venv/bin/python bench/rewards.py --only code --limit 40
"""
from __future__ import annotations

import argparse
import gzip
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# tests/unit/swe_fixtures.py rebuilds SWE-bench files from their patches
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "rewards.jsonl"
MATH500 = ROOT.parent / "shared" / "data" / "math500" / "test.jsonl"


def timed(fn, *args, **kwargs) -> tuple[list, float]:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def row(name: str, n: int, seconds: float, **extra) -> dict:
    return {
        "verifier": name, "samples": n, "seconds": round(seconds, 3),
        "samples_per_s": round(n / seconds, 2), **extra}


def bench_math(limit: int, math500: Path) -> list[dict]:
    from nemo_cascade.rewards.math import MathVerifier

    answers = [json.loads(line)["answer"] for line in math500.open()][:limit]
    exact = [f"The answer is \\boxed{{{a}}}." for a in answers]
    # "+1" keeps the answer well-formed LaTeX but unequal, so the exact check cannot settle it
    perturbed = [f"The answer is \\boxed{{{a}+1}}." for a in answers]
    # in-process: no worker involved
    scores, seconds = timed(MathVerifier().reward_batch, exact, answers)
    out = [row("math exact path", len(answers), seconds, accuracy=sum(scores) / len(scores))]
    for workers in (1, 2):
        verifier = MathVerifier(num_workers=workers)
        verifier.reward_batch(perturbed[:4], answers[:4])  # start and warm the workers (not timed)
        scores, seconds = timed(verifier.reward_batch, perturbed, answers)
        out.append(row("math math-verify", len(answers), seconds, workers=workers,
                       accuracy=sum(scores) / len(scores), pool=dict(verifier.pool().counts)))
        verifier.pool().close()
    return out


def bench_ifeval(limit: int) -> list[dict]:
    from nemo_cascade.rewards.ifeval import ifeval_reward

    data = ROOT / "data" / "ifeval"
    rows = {r["prompt"]: r for r in map(json.loads, gzip.open(data / "input_data.jsonl.gz", "rt"))}
    pairs = []
    for line in gzip.open(data / "input_response_data_gpt4_20231107_145030.jsonl.gz", "rt"):
        r = json.loads(line)
        if r["prompt"] in rows:
            pairs.append((r["response"], rows[r["prompt"]]))
    pairs = pairs[:limit]
    ifeval_reward(*pairs[0])  # NLTK / langdetect load (not timed)
    scores, seconds = timed(lambda: [ifeval_reward(resp, label) for resp, label in pairs])
    return [
        row("ifeval strict", len(pairs), seconds, prompt_level_accuracy=sum(scores) / len(scores))]


def bench_code(limit: int) -> list[dict]:
    from nemo_cascade.rewards.code import reward_batch

    with gzip.open(ROOT / "data" / "humaneval" / "HumanEval.jsonl.gz", "rt") as f:
        problems = [json.loads(line) for line in f][:limit]
    responses = [f"```python\n{p['prompt']}{p['canonical_solution']}\n```" for p in problems]
    labels = [{"test_code": p["test"], "entry_point": p["entry_point"]} for p in problems]
    reward_batch(responses[:2], labels[:2], workers=2)  # sandbox probe (not timed)
    out, rates = [], {}
    for unsafe in (False, True):
        for workers in (1, 2):
            scores, seconds = timed(reward_batch, responses, labels, workers=workers, unsafe=unsafe)
            name = "code unsandboxed" if unsafe else "code bubblewrap"
            rates[(unsafe, workers)] = len(responses) / seconds
            out.append(
                row(name, len(responses), seconds, workers=workers,
                    passed=sum(scores) / len(scores)))
    for workers in (1, 2):
        out.append({
            "verifier": "code isolation overhead", "workers": workers,
            "sandbox_time_ratio": round(rates[(True, workers)] / rates[(False, workers)], 3)})
    return out


def bench_swe(limit: int) -> list[dict]:
    from nemo_cascade.rewards.swe import SWEReward
    from tests.unit.swe_fixtures import alternative_fix_answer, has_added_line, load_instances

    instances = load_instances()[:limit]
    reward = SWEReward()
    golden = [f"```diff\n{i.patch}```" for i in instances]
    labels = [i.label() for i in instances]
    scores, seconds = timed(reward.reward_batch, golden, labels)
    out = [row("swe golden", len(golden), seconds, mean_reward=sum(scores) / len(scores))]
    alt = [(alternative_fix_answer(i), i.label()) for i in instances if has_added_line(i)]
    scores, seconds = timed(reward.reward_batch, [a for a, _ in alt], [lbl for _, lbl in alt])
    out.append(row("swe lexical grade", len(alt), seconds, mean_reward=sum(scores) / len(scores)))
    return out


def bench_rlhf(limit: int) -> list[dict]:
    import tempfile

    from nemo_cascade.rewards.remote import RewardModelClient
    from nemo_cascade.rewards.rlhf import RLHFReward
    from nemo_cascade.rewards.serve import VLLMServer
    from tests.integration._remote_helpers import RM_MAX_LEN, build_tiny_reward_model

    with gzip.open(ROOT / "data" / "ifeval" / "input_response_data_gpt4_20231107_145030.jsonl.gz",
                   "rt") as f:
        pairs = [json.loads(line) for line in f][:min(limit, 256)]
    # the tiny RM serves 256 tokens; longer inputs keep their tail
    responses = [p["response"][:400] for p in pairs]
    labels = [{"prompt": p["prompt"][:300]} for p in pairs]
    with tempfile.TemporaryDirectory() as scratch:
        model = build_tiny_reward_model(Path(scratch) / "rm")
        with VLLMServer(model, runner="pooling", max_model_len=RM_MAX_LEN,
                        single_engine_process=True) as server:
            reward = RLHFReward(RewardModelClient(server.url, token=server.token))
            reward.batch(responses[:4], labels[:4])  # warm-up (not timed)
            scores, seconds = timed(reward.batch, responses, labels)
    return [
        row("rlhf served RM (tiny)", len(scores), seconds,
            server_start_s=round(server.start_seconds, 1))]


def scaling(rows: list[dict]) -> list[dict]:
    """samples/s with 2 workers ÷ with 1, per verifier that ran with both."""
    by = {
        (r["verifier"], r.get("workers")): r["samples_per_s"] for r in rows if "samples_per_s" in r}
    return [{
        "verifier": f"{name} pool scaling 1->2", "speedup": round(by[(name, 2)] / by[(name, 1)], 3)}
            for (name, w) in by if w == 1 and (name, 2) in by]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["math", "ifeval", "code", "swe", "rlhf"], action="append")
    ap.add_argument("--limit", type=int, default=10_000, help="items per verifier (default: all)")
    ap.add_argument("--math500", type=Path, default=MATH500,
                    help="MATH-500 test.jsonl (answers are used)")
    args = ap.parse_args()
    chosen = args.only or ["math", "ifeval", "code", "swe"]
    if "math" in chosen and not args.math500.is_file():
        sys.exit(
            f"bench/rewards.py: {args.math500}: no such file (pass --math500 PATH or "
            "--only without math)"
        )
    benches = {
        "math": lambda: bench_math(args.limit, args.math500),
        "ifeval": lambda: bench_ifeval(args.limit), "code": lambda: bench_code(args.limit),
        "swe": lambda: bench_swe(args.limit), "rlhf": lambda: bench_rlhf(args.limit)}
    rows = []
    for name in chosen:
        rows += benches[name]()
    rows += scaling(rows)
    stamp = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "host": platform.node()}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as f:
        for r in rows:
            f.write(json.dumps({**stamp, **r}) + "\n")
    for r in rows:
        rest = {k: v for k, v in r.items() if k != "verifier"}
        print(f"{r['verifier']:<34} " + "  ".join(f"{k}={v}" for k, v in rest.items()))


if __name__ == "__main__":
    main()
