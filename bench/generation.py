"""Generation tokens/s of the colocated vLLM engine per precision and engine setting, against
transformers.generate.

One model (the tiny Qwen3 built in code, or SmolLM2-135M-Instruct) at its recipe's batch shape: tiny
= 16 prompts × 8 samples ≤ 40 tokens (``recipes/tiny.py`` RL stages), smollm2 = 6 prompts × 4
samples ≤ 224 tokens (``recipes/smollm2.py``), temperature 1.0, the prompts of the recipe's math
stage (``synthetic:arithmetic`` / ``benchmark:gsm8k``). Each variant lives in its own worker
process, built once:

    engine:DTYPE[:key=value...]   the project's RolloutEngine (the stage loop's ``generate``, seeded
                                  per step) with extra vLLM ``LLM`` settings (``max_num_seqs=8``,
                                  ``enable_prefix_caching=false``, ...) or ``env.VAR=value`` (e.g.
                                  ``env.VLLM_CPU_OMP_THREADS_BIND=nobind``) on top of the project's
                                  CPU defaults
    hf:DTYPE                      transformers ``generate`` of the same prompts (left-padded batch,
                                  ``num_return_sequences`` = G, same temperature and token budget)

and the variants run INTERLEAVED (v1, v2, ..., v1, v2, ...) for ``--repeats`` rounds after one
warm-up round, so the load of other users of the machine falls on all of them alike: read the ratios
(median of the rounds, each variant over the first), not the absolute tokens/s. ``start s`` is each
variant's start-up (process, model load, engine build and its compilation where the variant
compiles), timed alone. Each engine variant also reports the log-prob gap: mean |engine − fp32
reference| of its sampled tokens' log-probs (vLLM's processed log-probs at the sampling temperature;
the reference is the model in fp32 through transformers, which the actor matches to ~1e-6 — what
``logprob_gap`` measures in training). Results are appended to ``bench/results/generation.jsonl``.

    .venv/bin/python bench/generation.py --model tiny --dtype float32,bfloat16
    .venv/bin/python bench/generation.py --model smollm2 --dtype float32,bfloat16 \\
        --hf float32,bfloat16
    .venv/bin/python bench/generation.py --model smollm2 --dtype bfloat16 --hf "" \\
        --settings "max_num_seqs=8;enable_prefix_caching=false"
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "generation.jsonl"

SHAPES = {  # the recipes' RL batch shapes (module docstring)
    "tiny": dict(prompts=16, group=8, max_tokens=40, max_prompt=96, kv_cache_gib=1.0,
                 source="synthetic:arithmetic"),
    "smollm2": dict(prompts=6, group=4, max_tokens=224, max_prompt=320, kv_cache_gib=2.0,
                    source="benchmark:gsm8k"),
}


def _value(text: str):
    """A setting's value: int, float, bool or string."""
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def parse_variant(spec: str) -> tuple[str, str, dict, dict]:
    """``kind:dtype[:key=value...]`` → (kind, dtype, vLLM settings, environment)."""
    kind, dtype, *rest = spec.split(":")
    settings, env = {}, {}
    for item in rest:
        key, _, value = item.partition("=")
        if key.startswith("env."):
            env[key[4:]] = value
        else:
            settings[key] = _value(value)
    return kind, dtype, settings, env


# ------------------------------------------------------------------------------------------- worker

def _prompts(model: str, path: str):
    from transformers import AutoTokenizer

    from nemo_cascade import config
    from nemo_cascade.data.loader import load_prompts
    from nemo_cascade.rewards import get_domain
    from nemo_cascade.tooling import demo_data

    demo_data.register()  # the synthetic:/benchmark: sets and tiny models this reads

    w = SHAPES[model]
    tok = AutoTokenizer.from_pretrained(path)
    data = config.Data(source=w["source"], split="train", size=w["prompts"] * 4, seed=0)
    return tok, list(load_prompts(data, tok, "no_think", get_domain("math"),
                                  w["max_prompt"]))[:w["prompts"]]


def _reference_logprobs(ref, prompt: list[int], response: list[int],
                        temperature: float) -> list[float]:
    """log p(response[t] | prompt, response[:t]) of the fp32 reference at ``temperature`` (vLLM's
    processed log-probs: the sampled distribution, top-p/top-k off)."""
    import torch

    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = ref(ids).logits[0, len(prompt) - 1:-1].float() / temperature
    lp = torch.log_softmax(logits, -1)
    return lp[torch.arange(len(response)), torch.tensor(response)].tolist()


class EngineVariant:
    def __init__(self, model, path, dtype, settings, rollout, tok, prompts):
        from nemo_cascade.rollout.vllm import RolloutEngine

        class Tuned(RolloutEngine):  # the project's CPU settings, then the variant's on top
            def _llm_kwargs(self, dtype_, seed):
                return {**super()._llm_kwargs(dtype_, seed), **settings}

        self.engine = Tuned(path, rollout, dtype, seed=0, max_model_len=rollout.max_prompt_tokens
                            + rollout.max_response_tokens)
        self.prompts, self.group, self.rollout, self.path = (prompts, SHAPES[model]["group"],
                                                             rollout, path)
        self.step = 0

    def run(self) -> dict:
        self.step += 1
        t0 = time.perf_counter()
        groups = self.engine.generate(self.prompts, self.group, step=self.step)
        seconds = time.perf_counter() - t0
        self.last = groups
        return {"tokens": sum(len(r) for g in groups for r in g.response_tokens_G_T),
                "seconds": seconds}

    def gap(self) -> float:
        """Mean |engine − fp32 reference| log-prob over the tokens of the last run (the first sample
        of each group)."""
        import torch
        from transformers import AutoModelForCausalLM

        ref = AutoModelForCausalLM.from_pretrained(self.path, dtype=torch.float32).eval()
        diffs = []
        for g in self.last:
            tokens, lps = g.response_tokens_G_T[0], g.rollout_logprobs_G_T[0]
            if tokens:
                want = _reference_logprobs(ref, list(g.prompt.prompt_tokens), tokens,
                                           self.rollout.temperature)
                diffs += [abs(a - b) for a, b in zip(lps, want)]
        return statistics.fmean(diffs) if diffs else 0.0


class HFVariant:
    def __init__(self, model, path, dtype, rollout, tok, prompts):
        import torch
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype)).eval()
        self.eos = tok.eos_token_id
        pad = tok.pad_token_id if tok.pad_token_id is not None else self.eos
        longest = max(len(p.prompt_tokens) for p in prompts)
        rows = [[pad] * (longest - len(p.prompt_tokens)) + list(p.prompt_tokens) for p in prompts]
        self.ids = torch.tensor(rows)
        self.mask = torch.tensor(
            [[0] * (longest - len(p.prompt_tokens)) + [1] * len(p.prompt_tokens) for p in prompts])
        self.kw = dict(do_sample=True, temperature=rollout.temperature, top_p=rollout.top_p,
                       top_k=0, num_return_sequences=SHAPES[model]["group"],
                       max_new_tokens=rollout.max_response_tokens, pad_token_id=pad,
                       eos_token_id=self.eos)
        self.step = 0

    def run(self) -> dict:
        import torch

        self.step += 1
        torch.manual_seed(self.step)
        t0 = time.perf_counter()
        with torch.no_grad():
            out = self.model.generate(input_ids=self.ids, attention_mask=self.mask, **self.kw)
        seconds = time.perf_counter() - t0
        tokens = 0
        for row in out[:, self.ids.shape[1]:].tolist():  # up to and including the first eos
            tokens += row.index(self.eos) + 1 if self.eos in row else len(row)
        return {"tokens": tokens, "seconds": seconds}


def worker(model: str, spec: str, path: str) -> None:
    """Build one variant, then answer each ``run`` line on stdin with ``RESULT {json}`` (``gap``
    after a run)."""
    from nemo_cascade import config

    kind, dtype, settings, _ = parse_variant(spec)
    w = SHAPES[model]
    rollout = config.Rollout(temperature=1.0, max_prompt_tokens=w["max_prompt"],
                             max_response_tokens=w["max_tokens"], kv_cache_gib=w["kv_cache_gib"])
    tok, prompts = _prompts(model, path)
    v = (EngineVariant(model, path, dtype, settings, rollout, tok, prompts) if kind == "engine"
         else HFVariant(model, path, dtype, rollout, tok, prompts))
    print("READY", flush=True)
    for line in sys.stdin:
        if line.strip() == "run":
            print("RESULT " + json.dumps(v.run()), flush=True)
        elif line.strip() == "gap":
            print("RESULT " + json.dumps({"gap": v.gap() if kind == "engine" else None}),
                  flush=True)
        else:
            break
    if kind == "engine":
        v.engine.shutdown()


# ------------------------------------------------------------------------------------------- parent

PLOT = RESULTS.with_suffix(".png")


def plot(rows: list[dict], out: Path = PLOT) -> None:
    """Bar chart of the latest run per model: each variant's median tokens/s over the run's first
    variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    latest: dict[str, str] = {}
    for r in rows:
        latest[r["model"]] = max(latest.get(r["model"], ""), r["time"])
    runs = [[r for r in rows if r["model"] == m and r["time"] == t]
            for m, t in sorted(latest.items())]
    fig, axes = plt.subplots(1, len(runs), figsize=(5.5 * len(runs), 3.6), squeeze=False)
    for ax, run in zip(axes[0], runs):
        names = [r["variant"].replace("env.VLLM_CPU_OMP_THREADS_BIND", "bind") for r in run]
        ratios = [r["ratio_to_first"] for r in run]
        ax.barh(names[::-1], ratios[::-1],
                color=["C1" if n.startswith("hf") else "C0" for n in names[::-1]])
        ax.axvline(1.0, color="k", lw=0.8)
        r0 = run[0]
        ax.set_title(f"{r0['model']}: {r0['prompts']}x{r0['group']}, <= {r0['max_tokens']} tokens "
                     f"({r0['time'][:10]})", fontsize=9)
        ax.set_xlabel(f"tokens/s over {names[0]} (median of interleaved rounds)", fontsize=8)
        ax.tick_params(labelsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


class Worker:
    def __init__(self, model: str, spec: str, path: str, log: Path):
        env = {**os.environ, **parse_variant(spec)[3], "PYTHONPATH": str(ROOT)}
        self.spec, self.log = spec, log
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", spec, "--model", model, "--path", path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log.open("w"), text=True,
            env=env, cwd=ROOT)
        self._expect("READY")

    def _expect(self, prefix: str) -> str:
        for line in self.proc.stdout:
            if line.startswith(prefix):
                return line[len(prefix):].strip()
        raise RuntimeError(f"worker {self.spec} died:\n{self.log.read_text()[-4000:]}")

    def ask(self, command: str) -> dict:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return json.loads(self._expect("RESULT "))

    def close(self) -> None:
        self.proc.stdin.write("quit\n")
        self.proc.stdin.close()
        self.proc.wait(timeout=300)


def measure(model: str, specs: list[str], repeats: int) -> list[dict]:
    """Start every variant, run one warm-up round and ``repeats`` interleaved rounds; tokens/s per
    round."""
    from bench.step_breakdown import model_dir

    with tempfile.TemporaryDirectory() as tmp:
        path = model_dir(model, Path(tmp))
        workers, start_s = [], {}
        try:
            # built one after another, so each start-up is timed alone
            for i, spec in enumerate(specs):
                started = time.perf_counter()
                workers.append(Worker(model, spec, path, Path(tmp) / f"worker{i}.log"))
                start_s[spec] = round(time.perf_counter() - started, 1)
            for w in workers:
                w.ask("run")  # warm-up
            rates = {w.spec: [] for w in workers}
            tokens = {w.spec: [] for w in workers}
            for k in range(repeats):
                for w in workers:
                    r = w.ask("run")
                    rates[w.spec].append(r["tokens"] / r["seconds"])
                    tokens[w.spec].append(r["tokens"])
                    print(f"round {k + 1}/{repeats} {w.spec}: {r['tokens']} tokens in "
                          f"{r['seconds']:.1f} s", file=sys.stderr, flush=True)
            gaps = {w.spec: w.ask("gap")["gap"] for w in workers}
        finally:
            for w in workers:
                if w.proc.poll() is None:
                    w.close()
    base = statistics.median(rates[specs[0]])
    return [{"model": model, **{k: v for k, v in SHAPES[model].items() if k != "kv_cache_gib"},
             "variant": s, "tokens_per_s": [round(x, 1) for x in rates[s]],
             "median_tokens_per_s": round(statistics.median(rates[s]), 1), "tokens": tokens[s],
             "ratio_to_first": round(statistics.median(rates[s]) / base, 3),
             "logprob_gap": gaps[s], "start_s": start_s[s]} for s in specs]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(SHAPES), default="tiny")
    parser.add_argument("--dtype", default="float32,bfloat16",
                        help="engine dtypes, comma-separated")
    parser.add_argument("--hf", default="float32",
                        help="transformers.generate dtypes, comma-separated ('' = none)")
    parser.add_argument("--settings", default="", help="engine settings variants ';'-separated, "
                        "each 'key=value[:key=value]', measured at the first --dtype")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--plot", action="store_true",
                        help=f"only redraw {PLOT.name} from the results")
    args = parser.parse_args()
    if args.plot:
        plot([json.loads(x) for x in RESULTS.read_text().splitlines() if x.strip()])
        return 0
    if args.worker:
        worker(args.model, args.worker, args.path)
        return 0
    dtypes = [d for d in args.dtype.split(",") if d]
    specs = [f"engine:{d}" for d in dtypes]
    specs += [f"engine:{dtypes[0]}:{s}" for s in args.settings.split(";") if s]
    specs += [f"hf:{d}" for d in args.hf.split(",") if d]
    try:
        rows = measure(args.model, specs, args.repeats)
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as f:
        for r in rows:
            f.write(json.dumps({"time": stamp, "load1": round(os.getloadavg()[0], 2), **r}) + "\n")
    print(f"\n{args.model}: {SHAPES[args.model]['prompts']} prompts x "
          f"{SHAPES[args.model]['group']} samples, <= {SHAPES[args.model]['max_tokens']} tokens; "
          f"{args.repeats} interleaved rounds (median)")
    print(f"{'variant':<58} {'tok/s':>8} {'x first':>8} {'logprob gap':>12} {'start s':>8}")
    for r in rows:
        gap = "—" if r["logprob_gap"] is None else f"{r['logprob_gap']:.2e}"
        print(f"{r['variant']:<58} {r['median_tokens_per_s']:8.1f} {r['ratio_to_first']:8.3f} "
              f"{gap:>12} {r['start_s']:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
