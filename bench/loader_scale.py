"""SFT loading at scale: rows/s and peak memory (RSS) of loading a synthetic SFT file, before and
after the tokenized cache.

Three loads of the same file, each in a fresh process so its peak RSS is its own:

- ``before``: ``Data(cache=False)`` — the path every load took before the cache: the whole file
  read, every row parsed and tokenized one by one into Python lists, in every rank, at every
  restart;
- ``first``: the cached path's first load: the file streamed, tokenized in batches (the fast
  tokenizer's batch encoder) into the cache (``data/sft_cache.py``), then memory-mapped;
- ``second``: a restart or the next stage: the cache entry found by the file's recorded hash and
  mapped.

``--kind rl`` measures an RL prompt file the same way (``load_prompts``, ``data/prompt_cache.py``):
math rows (``problem`` + ``answer``, the released math RL set's fields), adapted, given the math
instruction, templated in think mode and tokenized; ``touch_s`` is then building every row's
``Prompt`` once (an epoch of draws) and ``stream_s`` starting a ``PromptStream`` over the set (every
rank does both at every start).

The SFT rows mix single-turn, multi-turn and tool-calling conversations; the tokenizer is the tiny
byte-level BPE (tooling/demo_data/tiny_tokenizer.py), so the token counts are larger than a
150K-vocabulary tokenizer's. ``touch_s`` is the time to build every row's token lists once from the
loaded result (the reads an epoch of batches makes). One process, so one share: with N ranks each
tokenizes 1/N of the file. Results are appended to ``bench/results/loader_scale.jsonl``.

    .venv/bin/python bench/loader_scale.py [--rows 1000000] [--kind sft|rl]
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
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "loader_scale.jsonl"
TOOLS = [{"type": "function",
          "function": {"name": "add", "description": "Add two integers",
                       "parameters": {"type": "object", "properties": {
                           "a": {"type": "integer"}, "b": {"type": "integer"}}}}}]


def write_rows(path: Path, n: int) -> None:
    with open(path, "w") as f:
        for i in range(n):
            kind = i % 4
            if kind < 2:
                row = {"question": f"What is {i} + {i % 97}? Show the steps.",
                       "response": f"<think>Add {i} and {i % 97}.</think>The sum is "
                                   f"\\boxed{{{i + i % 97}}}."}
            elif kind == 2:
                row = {"messages": [
                    {"role": "system", "content": "Answer briefly."},
                    {"role": "user", "content": f"Count to {i % 9}."},
                    {"role": "assistant", "content": " ".join(map(str, range(i % 9)))},
                    {"role": "user", "content": "And backwards?"},
                    {"role": "assistant", "content": " ".join(map(str, range(i % 9, -1, -1)))}]}
            else:
                row = {"tools": TOOLS, "messages": [
                    {"role": "user", "content": f"Add {i} and 7"},
                    {"role": "assistant", "content": None,
                     "tool_calls": [{"name": "add", "arguments": {"a": i, "b": 7}}]},
                    {"role": "tool", "content": str(i + 7)},
                    {"role": "assistant", "content": f"It is {i + 7}."}]}
            f.write(json.dumps(row) + "\n")


def write_math_rows(path: Path, n: int) -> None:
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"problem": f"Let x = {i} and y = {i % 97}. What is x + 2y? "
                                           "Give the value.",
                                "answer": str(i + 2 * (i % 97))}) + "\n")


def child_rl(path: str, tok_dir: str, cache: bool) -> None:
    """One RL prompt load in this process; prints its measurements as JSON."""
    import resource

    from transformers import AutoTokenizer

    from nemo_cascade.config import Data
    from nemo_cascade.data.loader import PromptStream, load_prompts
    from nemo_cascade.rewards import get_domain

    tok = AutoTokenizer.from_pretrained(tok_dir)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    prompts = load_prompts(Data(source=path, cache=cache), tok, "think", get_domain("math"),
                           1 << 20)
    load_s = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    PromptStream(prompts, 0)
    stream_s = time.perf_counter() - start
    # + the uids the stream tracks rows by
    stream_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    tokens = sum(len(p.prompt_tokens) for p in prompts)
    touch_s = time.perf_counter() - start
    print(json.dumps({"rows": len(prompts), "tokens": tokens, "load_s": load_s, "touch_s": touch_s,
                      "stream_s": stream_s, "peak_rss_mb": peak / 1024,
                      "peak_rss_with_stream_mb": stream_peak / 1024,
                      "rss_before_load_mb": base / 1024}))


def child(path: str, tok_dir: str, cache: bool) -> None:
    """One load in this process; prints its measurements as JSON."""
    import resource

    from transformers import AutoTokenizer

    from nemo_cascade.config import Data
    from nemo_cascade.data.loader import load_sft_examples

    tok = AutoTokenizer.from_pretrained(tok_dir)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    rows = load_sft_examples(Data(source=path, cache=cache), tok, "think", 1 << 20)
    load_s = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    tokens = sum(len(segment) for row in rows for segment in row)  # a row: its token segments
    touch_s = time.perf_counter() - start
    print(json.dumps({"rows": len(rows), "tokens": tokens, "load_s": load_s, "touch_s": touch_s,
                      "peak_rss_mb": peak / 1024, "rss_before_load_mb": base / 1024}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--kind", choices=("sft", "rl"), default="sft",
                    help="an SFT file or an RL prompt file")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return (child_rl if args.kind == "rl" else child)(args.child[0], args.child[1],
                                                          args.child[2] == "1")

    from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        path, tok_dir = Path(tmp) / f"{args.kind}.jsonl", Path(tmp) / "tok"
        (write_math_rows if args.kind == "rl" else write_rows)(path, args.rows)
        build_tiny_tokenizer(tok_dir)
        out = {}
        for name, cache in (("before", False), ("first", True), ("second", True)):
            done = subprocess.run([sys.executable, __file__, "--kind", args.kind, "--child",
                                   str(path), str(tok_dir), "1" if cache else "0"],
                                  check=True, capture_output=True, text=True)
            out[name] = json.loads(done.stdout.strip().splitlines()[-1])
            r = out[name]
            print(f"{name:>6}: {r['rows']} rows in {r['load_s']:.1f} s = "
                  f"{r['rows'] / r['load_s']:,.0f} rows/s, peak RSS {r['peak_rss_mb']:.0f} MB, "
                  f"touch every row {r['touch_s']:.1f} s"
                  + (f", start a PromptStream {r['stream_s']:.2f} s "
                     f"(peak RSS then {r['peak_rss_with_stream_mb']:.0f} MB)"
                     if "stream_s" in r else ""), flush=True)
        assert out["before"]["tokens"] == out["first"]["tokens"] == out["second"]["tokens"]
        b = out["before"]
        for name in ("first", "second"):
            r = out[name]
            print(f"{name} vs before: {b['load_s'] / r['load_s']:.1f}x faster load, "
                  f"{b['peak_rss_mb'] / r['peak_rss_mb']:.1f}x less peak RSS")
        record = {"bench": "loader_scale", "kind": args.kind,
                  "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "rows": args.rows,
                  "file_mb": path.stat().st_size / 2**20, **out}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS, "a") as f:
        f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
