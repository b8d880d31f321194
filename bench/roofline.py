"""Each phase of a GRPO step against what this machine can do: the roofline of the CPU step.

One process per model and trainer precision runs the real stage loop (Megatron actor + colocated
vLLM, the step of ``bench/vs_trl.py``: tiny 16 prompts × 8 ≤ 32 tokens, SmolLM2 4 × 4 ≤ 64) for a
warm-up step and ``--rounds`` measured steps, then measures in the same process, with the trainer's
threads:

- **the matmul limit**: the train step's own GEMMs (each linear layer's forward, input-gradient and
  weight-gradient products, the LM head's over the trained positions; the trainer's dtype, the
  shapes the actor ran) timed alone; the limit is their FLOPs over their time;
- **memory bandwidth**: a 256 MiB read (``sum``) and copy.

The train phase's achieved FLOP/s counts the useful work from the model's shape (6 · parameters per
real token, the LM head's per trained token, attention's two products per sequence) as a fraction of
the matmul limit. Generation is read twice: against the same engine replaying the same ``generate``
calls alone in a process of its own (what colocation costs), and against the decode roofline (each
decode iteration reads the weights once and every running sequence's KV cache, and does 2 FLOPs per
weight and sequence at the matmul limit: the slower of the two). Each row also keeps what
``nemo-cascade plan``'s time model reads of each step, which ``bench/plan_check.py`` predicts.
Rows go to ``bench/results/roofline.jsonl``; docs/performance.md has the table.

    .venv/bin/python bench/roofline.py                        # tiny and SmolLM2, fp32 and bf16
    .venv/bin/python bench/roofline.py --models smollm2 --dtypes bfloat16 --rounds 5
"""
from __future__ import annotations

import argparse
import json
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.grpo_packing import timed  # noqa: E402  (median seconds after a warm-up call)
from bench.plan_check import cpu_model, errors, measured_hardware  # noqa: E402
from bench.step_breakdown import model_dir  # noqa: E402  (the same models as the other benches)
from bench.vs_trl import WORK, _prompts  # noqa: E402  (the same step as the TRL comparison)

RESULTS = ROOT / "bench" / "results" / "roofline.jsonl"
PHASES = ("generate", "score", "train", "sync")
PROBE_BYTES = 256 * 2**20


# ------------------------------------------------------------------------------- counting (pure)
def linear_shapes(shape) -> list[tuple[str, int, int]]:
    """``(name, in, out)`` of one decoder layer's linear layers as Megatron fuses them (QKV, the
    gated MLP's two up projections)."""
    h, q = shape.hidden_size, shape.head_dim
    qkv = (shape.num_attention_heads + 2 * shape.num_key_value_heads) * q
    return [("qkv", h, qkv), ("proj", shape.num_attention_heads * q, h),
            ("fc1", h, 2 * shape.ffn_hidden_size), ("fc2", shape.ffn_hidden_size, h)]


def train_gemms(shape, positions: int, trained: int) -> list[tuple[int, int, int, int]]:
    """``(count, M, K, N)`` of the train step's matrix products (``[M, K] @ [K, N]``): per linear
    layer the forward, the input gradient and the weight gradient over ``positions`` (padding
    included: the actor computes it), and the LM head's three over the ``trained`` positions."""
    linears = [(shape.num_layers, positions, k, n) for _, k, n in linear_shapes(shape)]
    out = []
    for count, m, k, n in linears + [(1, trained, shape.hidden_size, shape.vocab_size)]:
        out += [(count, m, k, n), (count, m, n, k), (count, n, m, k)]
    return [g for g in out if all(g[1:])]


def train_flops(shape, segment_lengths: list[int], trained: int) -> float:
    """The useful FLOPs of one train step (forward + backward): 6 per linear-layer parameter and
    real token, 6 per LM-head parameter and trained token, and 3 × attention's forward products
    (4 · length² · heads · head dim per sequence; the kernel computes the whole square)."""
    linear = shape.num_layers * sum(k * n for _, k, n in linear_shapes(shape))
    head = shape.hidden_size * shape.vocab_size
    squares = sum(length * length for length in segment_lengths)
    attention = 4 * shape.num_layers * shape.num_attention_heads * shape.head_dim * squares
    return 6.0 * linear * sum(segment_lengths) + 6.0 * head * trained + 3.0 * attention


def decode_bound(shape, *, sequences: int, mean_context: float, dtype_bytes: int,
                 read_bytes_per_s: float, flops_per_s: float) -> dict[str, float]:
    """Tokens/s the decode roofline allows ``sequences`` running at once: each iteration reads the
    weights (layers and LM head) and every sequence's KV cache at ``mean_context`` tokens, and does
    2 FLOPs per weight and token; ``memory``/``compute`` tokens/s and the ``bound`` (the lower)."""
    weights = shape.num_layers * sum(shape.layer_params()) + shape.hidden_size * shape.vocab_size
    kv_cache = sequences * mean_context * shape.kv_bytes_per_token(dtype_bytes)
    memory_s = (weights * dtype_bytes + kv_cache) / read_bytes_per_s
    compute_s = 2.0 * weights * sequences / flops_per_s
    return {"memory": sequences / memory_s, "compute": sequences / compute_s,
            "bound": sequences / max(memory_s, compute_s)}


def batch_counts(batch: dict) -> dict:
    """What a train-step batch asks of the actor: positions computed (rows × columns up to the last
    trained one), the trained positions, and each sequence's real length."""
    mask = batch["loss_mask"]
    columns = int(mask.any(0).nonzero().max()) + 1 if mask.any() else 0
    if "segment_ids" in batch:
        seg = batch["segment_ids"]
        lengths = [int(n) for row in seg for n in row.bincount()[1:] if n > 0]
    else:
        lengths = [int(row.nonzero().max()) + 1 for row in mask if row.any()]
    return {"positions": mask.shape[0] * columns, "trained": int(mask.sum()), "lengths": lengths}


# ---------------------------------------------------------------------------------- probes
def matmul_limit(shape, counts: dict, dtype, repeats: int = 5) -> dict:
    """The train step's GEMMs (:func:`train_gemms`) timed alone in ``dtype``: their FLOPs, seconds
    and FLOP/s."""
    import torch

    flops = seconds = 0.0
    for count, m, k, n in train_gemms(shape, counts["positions"], counts["trained"]):
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        seconds += count * timed(lambda: torch.matmul(a, b), repeats)
        flops += count * 2.0 * m * k * n
    return {"flops": flops, "seconds": seconds, "flops_per_s": flops / seconds}


def bandwidth() -> dict:
    """Bytes/s of a 256 MiB fp32 read (``sum``) and copy (read + write counted)."""
    import torch

    src = torch.ones(PROBE_BYTES // 4)
    dst = torch.empty_like(src)
    read = timed(lambda: src.sum(), 5)
    copy = timed(lambda: dst.copy_(src), 5)
    return {"read_bytes_per_s": PROBE_BYTES / read, "copy_bytes_per_s": 2 * PROBE_BYTES / copy}


# ----------------------------------------------------------------------------------- processes
def _stage(model: str, rounds: int):
    from nemo_cascade import config

    w = WORK[model]
    rollout = config.Rollout(temperature=1.0, max_prompt_tokens=128,
                             max_response_tokens=w["max_tokens"])
    return config.Stage(name="bench", kind="grpo", domain="math", steps=rounds + 1,
                        data=config.Data(source="synthetic:arithmetic", split="test"),
                        actor=config.Actor(lr=w["lr"]), rollout=rollout,
                        grpo=config.GRPO(group_size=w["group"], prompts_per_step=w["prompts"],
                                         drop_zero_variance_groups=False))


def _engine(path: str, stage, dtype: str, **kwargs):
    from nemo_cascade import config
    from nemo_cascade.rollout.vllm import RolloutEngine

    engine_dtype = config.engine_dtype(config.Model(dtype=dtype), stage.rollout)
    return RolloutEngine(path, stage.rollout, engine_dtype, seed=0, max_model_len=256, **kwargs)


def _recorded(obj, name: str, before=None, after=None):
    """Wrap ``obj.name`` on the instance: ``before(*args, **kwargs)`` sees each call,
    ``after(result, seconds)`` its result and wall time."""
    method = getattr(obj, name)

    def wrapper(*args, **kwargs):
        if before:
            before(*args, **kwargs)
        start = time.perf_counter()
        result = method(*args, **kwargs)
        if after:
            after(result, time.perf_counter() - start)
        return result
    setattr(obj, name, wrapper)


def _generated(groups) -> int:
    return sum(len(r) for g in groups for r in g.response_tokens_G_T)


def colocated(model: str, dtype: str, rounds: int, calls_file: Path) -> dict:
    """The stage loop's steps with the actor and engine in this process, then the probes; the
    engine's ``generate`` calls go to ``calls_file`` for :func:`alone` to replay."""
    import torch

    from nemo_cascade import config
    from nemo_cascade.actor import cpu
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.convert.shape import read_hf_config
    from nemo_cascade.data.loader import pad_id
    from nemo_cascade.cascade.metrics import MetricsLog, read_metrics
    from nemo_cascade.cascade.stage import StageContext, run_grpo

    stage, w = _stage(model, rounds), WORK[model]
    with tempfile.TemporaryDirectory(prefix="roofline-") as tmp:
        path = model_dir(model, Path(tmp))
        tok, prompts = _prompts(path)
        actor = MegatronActor(path, config.Parallel(micro_batch_size=w["prompts"] * w["group"]),
                              dtype=dtype)
        actor.configure_optimizer(stage.actor, stage.steps)
        engine = _engine(path, stage, dtype, around_generate=cpu.suspended)
        batches, calls, parts = [], [], {"forward_backward": [], "optimizer": []}
        _recorded(actor, "train_step", lambda batch, *a, **k: batches.append(batch_counts(batch)))
        # inside train_step: Megatron's forward-backward schedule, then its optimizer's step
        _recorded(actor, "_run", after=lambda _, s: parts["forward_backward"].append(s))
        _recorded(actor.optimizer, "step", after=lambda _, s: parts["optimizer"].append(s))
        _recorded(engine, "generate", lambda prompts_, n, sampling, **k: calls.append(
            {"prompts": list(prompts_), "n": n, "sampling": sampling, "step": k["step"]}),
            lambda groups, s: calls[-1].update(seconds=s, tokens=_generated(groups), longest=max(
                len(r) for g in groups for r in g.response_tokens_G_T)))
        run = Path(tmp) / "stage"
        log = MetricsLog(run, "bench", stage.steps)
        run_grpo(StageContext(actor, engine, pad_id(tok), run, log), stage, prompts)
        rows = read_metrics(run)[1:]  # the warm-up step is not counted
        engine_dtype = str(engine.llm.llm_engine.model_config.dtype).removeprefix("torch.")
        max_seqs = engine.llm.llm_engine.vllm_config.scheduler_config.max_num_seqs
        engine.shutdown()
        shape = read_hf_config(path)
    calls_file.write_bytes(pickle.dumps([{k: c[k] for k in ("prompts", "n", "sampling", "step")}
                                         for c in calls]))
    probes = {"matmul": matmul_limit(shape, batches[-1], getattr(torch, dtype)), **bandwidth()}
    return {"model": model, "dtype": dtype, "engine_dtype": engine_dtype, "rounds": rounds,
            "threads": torch.get_num_threads(), "counts": {**batches[-1], "lengths": None},
            "phase_s": {p: [r.get(f"time/{p}", 0.0) for r in rows] for p in PHASES},
            "train_parts_s": {k: v[1:] for k, v in parts.items()},
            "step_s": [r["time/step"] for r in rows],
            "train_flops": [train_flops(shape, b["lengths"], b["trained"]) for b in batches[1:]],
            "generate": [{"seconds": c["seconds"], "tokens": c["tokens"],
                          **_decode_roofline(shape, c, engine_dtype, probes)} for c in calls[1:]],
            "plan": plan_inputs(shape, stage, batches[1:], calls[1:],
                                [{p: r.get(f"time/{p}", 0.0) for p in PHASES} for r in rows],
                                parts["forward_backward"][1:], engine_dtype, max_seqs),
            **probes}


def plan_inputs(shape, stage, batches: list[dict], calls: list[dict], phases: list[dict],
                forward_backward_s: list[float], engine_dtype: str, max_seqs: int) -> dict:
    """What ``nemo-cascade plan``'s time model reads, for bench/plan_check.py: the model's and
    engine's sizes (``max_seqs``: the engine's ``max_num_seqs``) and, per measured step, its tokens
    trained, prompts, sequences and longest response beside its measured phases."""
    dtype_bytes = _dtype_bytes(engine_dtype)
    kv = shape.kv_bytes_per_token(dtype_bytes)
    model = {"params": shape.params(), "weight_bytes": shape.params() * dtype_bytes,
             "kv_bytes_per_token": kv, "kv_tokens": int(stage.rollout.kv_cache_gib * 2**30 // kv),
             "max_seqs": max_seqs, "samples_per_prompt": stage.grpo.group_size}
    steps = [{"tokens": sum(b["lengths"]), "sequences": len(c["prompts"]) * c["n"],
              "prompt_tokens": sum(len(p.prompt_tokens) for p in c["prompts"]),
              "longest": c["longest"], "train_s": p["train"], "generate_s": p["generate"],
              "forward_backward_s": fb}
             for b, c, p, fb in zip(batches, calls, phases, forward_backward_s)]
    return {"model": model, "steps": steps}


def _dtype_bytes(engine_dtype: str) -> int:
    return 2 if engine_dtype == "bfloat16" else 4


def _decode_roofline(shape, call: dict, engine_dtype: str, probes: dict) -> dict:
    """:func:`decode_bound` for one ``generate`` call: all its sequences running at once, at their
    mean context (prompt + half the mean response)."""
    sequences = len(call["prompts"]) * call["n"]
    prompt = statistics.mean(len(p.prompt_tokens) for p in call["prompts"])
    context = prompt + call["tokens"] / sequences / 2
    bound = decode_bound(shape, sequences=sequences, mean_context=context,
                         dtype_bytes=_dtype_bytes(engine_dtype),
                         read_bytes_per_s=probes["read_bytes_per_s"],
                         flops_per_s=probes["matmul"]["flops_per_s"])
    return {"sequences": sequences, "bound_tokens_per_s": bound}


def alone(model: str, dtype: str, calls_file: Path) -> dict:
    """The colocated run's ``generate`` calls replayed by the same engine alone in this process."""
    stage = _stage(model, 0)
    calls = pickle.loads(calls_file.read_bytes())
    with tempfile.TemporaryDirectory(prefix="roofline-") as tmp:
        engine = _engine(model_dir(model, Path(tmp)), stage, dtype)
        out = []
        for call in calls:
            start = time.perf_counter()
            groups = engine.generate(call["prompts"], call["n"], call["sampling"],
                                     step=call["step"])
            out.append({"seconds": time.perf_counter() - start, "tokens": _generated(groups)})
        engine.shutdown()
    return {"generate": out[1:]}


# ------------------------------------------------------------------------------------- summary
def _tokens_per_s(calls: list[dict]) -> float:
    return statistics.median(c["tokens"] / c["seconds"] for c in calls)


def summarize(co: dict, al: dict) -> dict:
    """One result row from the colocated run and the replay (medians over the measured steps)."""
    med = statistics.median
    achieved = med(f / s for f, s in zip(co["train_flops"], co["phase_s"]["train"]))
    limit = co["matmul"]["flops_per_s"]
    colocated_tps, alone_tps = _tokens_per_s(co["generate"]), _tokens_per_s(al["generate"])
    bound = {k: med(c["bound_tokens_per_s"][k] for c in co["generate"])
             for k in ("memory", "compute", "bound")}
    cpuinfo = Path("/proc/cpuinfo")
    row = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "cpu": cpu_model(),
            "amx": "amx_bf16" in cpuinfo.read_text() if cpuinfo.exists() else None,
            **{k: co[k] for k in ("model", "dtype", "engine_dtype", "rounds", "threads", "counts")},
            "step_s": med(co["step_s"]), "phase_s": {p: med(v) for p, v in co["phase_s"].items()},
            "train_parts_s": {k: med(v) for k, v in co["train_parts_s"].items()},
            "matmul_s": co["matmul"]["seconds"],
            "matmul_flops_per_s": limit, "read_bytes_per_s": co["read_bytes_per_s"],
            "copy_bytes_per_s": co["copy_bytes_per_s"], "train_flops": med(co["train_flops"]),
            "train_flops_per_s": achieved, "train_of_limit": achieved / limit,
            "generate_tokens_per_s": colocated_tps, "alone_tokens_per_s": alone_tps,
            "colocated_of_alone": colocated_tps / alone_tps, "decode_bound_tokens_per_s": bound,
            "generate_of_bound": colocated_tps / bound["bound"],
            "plan": co["plan"],
            "generate_calls": {"colocated": [{k: c[k] for k in ("seconds", "tokens")}
                                             for c in co["generate"]], "alone": al["generate"]}}
    # the plan's model with its written efficiencies, on this machine's measured limits
    return {**row, "plan": {**row["plan"], "assumed_error": errors(row, measured_hardware(row))}}


COLUMNS = (  # (heading, alignment and width, cell)
    ("model", "<8", "{model}"), ("trainer", "<9", "{dtype}"), ("step s", ">7", "{step_s:.2f}"),
    ("matmul GF/s", ">11", "{matmul:.0f}"), ("train GF/s", ">10", "{train:.0f}"),
    ("of limit", ">8", "{train_of_limit:.2f}"), ("gen tok/s", ">9", "{generate_tokens_per_s:.0f}"),
    ("alone", ">7", "{alone_tokens_per_s:.0f}"), ("coloc.", ">6", "{colocated_of_alone:.2f}"),
    ("bound tok/s", ">11", "{bound:.0f}"), ("of bound", ">8", "{generate_of_bound:.3f}"))


def print_rows(rows: list[dict]) -> None:
    print("\n" + " ".join(f"{name:{align}}" for name, align, _ in COLUMNS))
    for r in rows:
        values = {**r, "matmul": r["matmul_flops_per_s"] / 1e9,
                  "train": r["train_flops_per_s"] / 1e9,
                  "bound": r["decode_bound_tokens_per_s"]["bound"]}
        print(" ".join(f"{cell.format(**values):{align}}" for _, align, cell in COLUMNS))
        phases = ", ".join(f"{p} {s:.2f} s" for p, s in r["phase_s"].items())
        parts = ", ".join(f"{p} {s:.2f} s" for p, s in r["train_parts_s"].items())
        print(f"{'':<8} phases: {phases}; read {r['read_bytes_per_s'] / 1e9:.1f} GB/s, "
              f"{r['threads']} threads")
        print(f"{'':<8} train: {parts}; its GEMMs at the limit {r['matmul_s']:.2f} s")
        e = r["plan"]["assumed_error"]
        print(f"{'':<8} plan (its written efficiencies on the measured limits): train "
              f"{e['train_s']:+.0%}, generate {e['generate_s']:+.0%}, both {e['step_s']:+.0%} "
              f"(bench/plan_check.py: from the other model's)")


def _child(*args: str) -> dict:
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                          cwd=ROOT)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode or line is None:
        raise SystemExit(f"{' '.join(args)} failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def measure(model: str, dtype: str, rounds: int) -> dict:
    """One model and trainer precision: the colocated run, then the replay alone."""
    with tempfile.TemporaryDirectory(prefix="roofline-calls-") as tmp:
        calls = str(Path(tmp) / "calls.pkl")
        co = _child("--one", f"{model}:{dtype}:colocated", "--rounds", str(rounds),
                    "--calls", calls)
        al = _child("--one", f"{model}:{dtype}:alone", "--calls", calls)
    return summarize(co, al)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="tiny,smollm2")
    parser.add_argument("--dtypes", default="float32,bfloat16",
                        help="the trainer's; the engine's follows")
    parser.add_argument("--rounds", type=int, default=3, help="measured steps, after one warm-up")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # child: MODEL:DTYPE:colocated|alone
    parser.add_argument("--calls", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        model, dtype, where = args.one.split(":")
        if where == "colocated":
            out = colocated(model, dtype, args.rounds, args.calls)
        else:
            out = alone(model, dtype, args.calls)
        print("RESULT " + json.dumps(out), flush=True)
        return 0
    rows = []
    for model in args.models.split(","):
        for dtype in args.dtypes.split(","):
            rows.append(measure(model, dtype, args.rounds))
            RESULTS.parent.mkdir(parents=True, exist_ok=True)
            with RESULTS.open("a") as f:
                f.write(json.dumps(rows[-1]) + "\n")
            print(f"{model} {dtype}: done", file=sys.stderr, flush=True)
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
