"""Evaluating a checkpoint on disk (``nemo-cascade eval``): find the model, build an engine, run,
write.

A checkpoint is an HF model folder (``config.json``, weights, tokenizer) or a run's stage directory
(``runs/<name>/stages/<k>-<name>/``, whose ``hf/`` holds the stage's export; results then go to that
stage directory's ``eval.json``, beside its ``metrics.jsonl``). The engine is the project's
``rollout.vllm.RolloutEngine`` in this process, serving the model with the suites' YaRN factor over
its native positions (App. B: 2 for every benchmark, 3 for the 14B's 64K-input SWE-bench run):
suites that need different factors are evaluated by one engine each, started in turn
(:func:`yarn_groups`, in the order the suites were asked for; the engine before is shut down first).
An engine's context is the longest prompt its suites generate (within each suite's input limit) plus
the largest response budget, capped by the positions the factor gives (and by ``max_model_len`` if
given). A run's stage directory is evaluated with its run's gate settings (thinking mode, per-suite
YaRN and input limits) where the command line leaves them open (:func:`with_run_gate`).

An 8B/14B model uses a node's GPUs: ``tensor_parallel_size`` GPUs per engine and ``data_parallel``
engines, one process per GPU under torchrun (``nemo-cascade eval`` starts it), each engine taking
``gpu_memory_utilization`` of its GPUs (nothing else shares them here, unlike the cascade's
colocated engine). Every rank generates and scores its share of each suite's items; rank 0 writes
the results.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Optional, Sequence
import os
import urllib.error
import urllib.request

import torch
import torch.distributed as dist

from nemo_cascade import config
from nemo_cascade.runtime import ranks
from nemo_cascade.rollout import engine_start
from nemo_cascade.evaluate.eval_output import provenance, write_eval
from nemo_cascade.evaluate.runner import (EvalSettings, Prepared, check_settings, context_needed,
                                          prepare, run_suite)
from nemo_cascade.evaluate.suites import EvalError, get_suite
from nemo_cascade.rewards.serve import VLLMServer
from nemo_cascade.rollout.vllm import RolloutEngine

log = logging.getLogger(__name__)

EXPECTED = ("expected a Hugging Face model folder (config.json, weights, tokenizer) or a run's "
            "stage directory (runs/<name>/stages/<k>-<name>/ holding hf/)")


def resolve_checkpoint(path: str | Path) -> tuple[Path, Optional[Path]]:
    """``(HF model folder, stage directory or None)`` for a checkpoint argument; EvalError (one
    line) otherwise."""
    p = Path(path)
    if not p.exists():
        raise EvalError(f"checkpoint {p}: not found; {EXPECTED}")
    if (p / "config.json").is_file():
        stage = p.parent if p.name == "hf" and (p.parent / "metrics.jsonl").is_file() else None
        return p, stage
    if (p / "hf" / "config.json").is_file():
        return p / "hf", p
    if (p / "manifest.json").is_file() and (p / "stages").is_dir():
        stages = sorted(str(s) for s in (p / "stages").iterdir()
                        if (s / "hf" / "config.json").is_file())
        raise EvalError(f"checkpoint {p}: a run directory; pass one of its stages: "
                        f"{stages or 'none finished yet'}")
    raise EvalError(f"checkpoint {p}: no config.json and no hf/ folder; {EXPECTED}")


def output_folder(checkpoint: str | Path, out: Optional[str | Path] = None) -> Path:
    """Where an evaluation writes: ``out``, else the stage directory evaluated, else
    ``runs/eval/<model folder>``."""
    model_dir, stage = resolve_checkpoint(checkpoint)
    return Path(out) if out else (stage or Path("runs") / "eval" / model_dir.resolve().name)


def run_gate(stage: Optional[Path]) -> Optional[config.Gate]:
    """The forgetting-gate settings of the run a stage directory belongs to (the run's resolved
    config.json, ``runs/<name>/config.json``), or None for a checkpoint outside a run."""
    if stage is None or not (stage.parent.parent / "config.json").is_file():
        return None
    path = stage.parent.parent / "config.json"
    try:
        gate = config.from_dict(config.Gate, json.loads(path.read_text()).get("gate", {}), "gate")
        with_run_gate(EvalSettings(), gate)  # its SUITE=VALUE items parse
        return gate
    except (OSError, ValueError, AttributeError) as e:
        raise EvalError(f"{path}: unreadable run config ({type(e).__name__}: {e})") from None


def with_run_gate(settings: EvalSettings, gate: Optional[config.Gate]) -> EvalSettings:
    """``settings`` with the run's gate deciding what the command line left open: the thinking mode
    (a thinking recipe's ``think``, App. B) and the per-suite YaRN factors and input limits (the
    14B's SWE-bench: 64K input, YaRN 3); options given on the command line win."""
    if gate is None:
        return settings
    pairs = lambda items, kind: {  # noqa: E731
        k: kind(v) for k, _, v in (i.partition("=") for i in items)}
    return replace(
        settings, mode=settings.mode or (None if gate.mode == "suite" else gate.mode),
        yarn={**pairs(gate.yarn, float), **settings.yarn},
        max_input_tokens={**pairs(gate.max_input_tokens, int), **settings.max_input_tokens})


def check_server(url: str) -> None:
    """A served model must answer ``/health`` before the evaluation spends its time generating."""

    # loopback/cluster: no proxy
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url.rstrip("/").removesuffix("/v1") + "/health", timeout=10) as resp:
            if resp.status == 200:
                return
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise EvalError(f"--reward-model-url {url}: no server answers at /health ({e}); expected a "
                        f"reward model served by `vllm serve MODEL --runner pooling`") from None
    raise EvalError(f"--reward-model-url {url}: /health answered {resp.status}")


def model_positions(model_dir: Path, yarn_factor: Optional[float] = None) -> int:
    """The positions the model serves (the engine's reading of config.json, after the rescaling to
    ``yarn_factor`` if given: ``engine_start.yarn_overrides``); 2^20 when it names none."""
    shape = engine_start.read_served_shape(str(model_dir))
    if yarn_factor is not None:
        try:
            overrides = engine_start.yarn_overrides(shape, yarn_factor, model_dir / "config.json")
            shape = engine_start.with_overrides(shape, overrides)
        except ValueError as e:
            raise EvalError(str(e)) from None  # names config.json
    return engine_start.model_positions(shape) or 1 << 20


def yarn_groups(prepared: Sequence[Prepared]) -> list[tuple[float, list[Prepared]]]:
    """The engines an evaluation starts: ``(YaRN factor, its suites)`` per distinct factor, in the
    order the suites come (App. B: one engine at factor 2 for every suite but the 14B's SWE-bench,
    which gets its own at 3). One engine serves one rope scaling, so a suite is never evaluated at
    another suite's factor."""
    groups: dict[float, list[Prepared]] = {}
    for prep in prepared:
        groups.setdefault(prep.decoding.yarn_factor, []).append(prep)
    return list(groups.items())


def load_tokenizer(model_dir: Path):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(model_dir))
    except (OSError, ValueError) as e:
        raise EvalError(f"checkpoint {model_dir}: cannot load its tokenizer ({type(e).__name__}: "
                        f"{str(e).splitlines()[0][:200]}); {EXPECTED}") from None


def engine_context(prepared: Sequence[Prepared], positions: int,
                   max_model_len: Optional[int] = None) -> int:
    """:func:`context_needed`, capped by the model's positions and by ``max_model_len``."""
    return max(2, min(context_needed(prepared), positions, max_model_len or positions))


def check_layout(tensor_parallel_size: int = 1, data_parallel: int = 1,
                 gpu_memory_utilization: float = 0.9) -> int:
    """The processes the engines need (TP × DP); EvalError (one line) for a value no engine can
    take."""
    for option, value in (("--tensor-parallel-size", tensor_parallel_size),
                          ("--data-parallel", data_parallel)):
        if not isinstance(value, int) or value < 1:
            raise EvalError(f"{option}: expected an integer >= 1, got {value!r}")
    if not 0 < gpu_memory_utilization <= 1:
        raise EvalError(
            f"--gpu-memory-utilization: expected a share in (0, 1], got {gpu_memory_utilization}")
    return tensor_parallel_size * data_parallel


def init_ranks(world: int) -> None:
    """Join this process's torchrun world (one rank per GPU) before the engines start; a single
    process needs none. The world must be the engines' TP × DP: a mismatch is one line, not a hang
    inside vLLM."""
    started = int(os.environ.get("WORLD_SIZE", "1"))
    if started != world:
        raise EvalError(
            f"the engines need tensor-parallel size × data-parallel = {world} processes, but "
            f"{started} were started (torchrun --nproc_per_node); "
            f"nemo-cascade eval starts them itself")

    if world == 1 or dist.is_initialized():
        return
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")


def build_engine(model_dir: Path, context: int, seed: int = 0, dtype: str = "auto",
                 kv_cache_gib: float = 2.0, *, tensor_parallel_size: int = 1,
                 gpu_memory_utilization: float = 0.9, yarn_factor: Optional[float] = None):
    """The project's rollout engine for evaluation only (no actor in this process): sharded over
    ``tensor_parallel_size`` ranks of the torchrun world (each group of that many ranks one engine),
    serving the model with YaRN ``yarn_factor`` over its native positions (App. B; None:
    config.json's rope)."""
    if dtype == "auto":
        dtype = "bfloat16" if torch.cuda.is_available() else "float32"
    rollout = config.Rollout(max_prompt_tokens=context, max_response_tokens=1,
                             kv_cache_gib=kv_cache_gib, tensor_parallel_size=tensor_parallel_size,
                             gpu_memory_utilization=gpu_memory_utilization)
    try:
        return RolloutEngine(str(model_dir), rollout, dtype, seed=seed, max_model_len=context,
                             distributed=ranks.world()[1] > 1, yarn_factor=yarn_factor)
    except (FileNotFoundError, ValueError) as e:
        raise EvalError(f"checkpoint {model_dir}: {e}") from None


def _checked_settings(checkpoint: str | Path, suites: Sequence[str], settings: EvalSettings,
                      reward_model: Optional[str]) -> tuple[Path, EvalSettings, EvalSettings]:
    """The model folder, the settings completed by the run's gate (:func:`with_run_gate`), and
    ``pending``: the same settings as they are checked and suites prepared before a reward model to
    serve has its URL. Every mistake (options, checkpoint, reward-model server or folder) is one
    line here, before anything loads."""
    # until it is served, a reward model to start stands in for the server URL it will have
    pending = replace(settings, reward_model_url=settings.reward_model_url or
                      ("http://127.0.0.1:1" if reward_model else ""))
    check_settings(suites, pending)
    model_dir, stage = resolve_checkpoint(checkpoint)
    gate = run_gate(stage)
    settings, pending = with_run_gate(settings, gate), with_run_gate(pending, gate)
    check_settings(suites, pending)
    if settings.reward_model_url and any(get_suite(n).pairwise for n in suites):
        check_server(settings.reward_model_url)
    if reward_model and not (Path(reward_model) / "config.json").is_file():
        raise EvalError(
            f"--reward-model {reward_model}: no config.json; expected an HF reward-model folder")
    return model_dir, settings, pending


def evaluate_checkpoint(checkpoint: str | Path, suites: Sequence[str],
                        settings: EvalSettings = EvalSettings(), *, out_dir: Optional[Path] = None,
                        reward_model: Optional[str] = None, max_model_len: Optional[int] = None,
                        dtype: str = "auto", kv_cache_gib: float = 2.0,
                        tensor_parallel_size: int = 1, data_parallel: int = 1,
                        gpu_memory_utilization: float = 0.9) -> tuple[dict, Path]:
    """Run ``suites`` on a checkpoint and write eval.json / eval.md / eval.svg into ``out_dir``
    (default: the stage directory, else ``runs/eval/<model folder name>``). ``reward_model``: an HF
    folder of a reward model to serve for the RLHF suite for the duration of the run (else
    ``settings.reward_model_url``; rank 0 serves it). Engines: see the module docstring. Returns
    ``(results by suite, eval.json path)``."""
    world = check_layout(tensor_parallel_size, data_parallel, gpu_memory_utilization)
    model_dir, settings, pending = _checked_settings(checkpoint, suites, settings, reward_model)
    tokenizer = load_tokenizer(model_dir)
    prepared = [prepare(name, pending, tokenizer) for name in suites]
    # one engine per rope scaling (App. B), each sized for its suites; a model that cannot be
    # rescaled is one line
    engines = [
        (factor, group, engine_context(group, model_positions(model_dir, factor), max_model_len))
        for factor, group in yarn_groups(prepared)]
    out_dir = output_folder(checkpoint, out_dir)
    init_ranks(world)
    serve_rm = bool(reward_model) and any(p.suite.pairwise for p in prepared)
    server = _launch_rm_server(reward_model, out_dir) if serve_rm and ranks.is_main() else None
    engine = None
    results = {}
    try:
        for factor, group, context in engines:
            engine = build_engine(model_dir, context, settings.seed, dtype, kv_cache_gib,
                                  tensor_parallel_size=tensor_parallel_size,
                                  gpu_memory_utilization=gpu_memory_utilization, yarn_factor=factor)
            if serve_rm:  # loaded while the first engine started
                # the URL file carries the server's token (runtime/server_token.py)
                published = out_dir / "reward_model_server.url"
                url = ranks.from_main(server.wait_ready().publish(published) if server else "")
                settings = replace(settings, reward_model_url=url)
                serve_rm = False
            started = time.perf_counter()
            results.update({p.suite.name: run_suite(engine, p, settings) for p in group})
            log.info("evaluated %s with YaRN %g in %.1f s", ", ".join(p.suite.name for p in group),
                     factor, time.perf_counter() - started)
            engine.shutdown()
            engine = None
        results = {name: results[name] for name in suites}
    finally:
        if engine is not None:
            engine.shutdown()
        if server is not None:
            server.stop()
    meta = provenance(str(checkpoint), str(model_dir))
    meta["settings"] = {k: v for k, v in vars(settings).items() if k != "progress"}
    meta["engines"] = {"tensor_parallel_size": tensor_parallel_size, "data_parallel": data_parallel,
                       "gpu_memory_utilization": gpu_memory_utilization}
    if not ranks.is_main():  # every rank holds every record; one writes them
        return results, out_dir / "eval.json"
    path = write_eval(out_dir, {name: r.to_json() for name, r in results.items()}, meta)
    return results, path


def _launch_rm_server(reward_model: str, out_dir: Path):
    """The RLHF suite's reward model, served while the policy engine starts (rank 0 only)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    server = VLLMServer(reward_model, runner="pooling",
                        log_path=out_dir / "reward_model_server.log")
    return server.launch()


__all__ = ["resolve_checkpoint", "build_engine", "check_layout", "init_ranks", "engine_context",
           "evaluate_checkpoint", "load_tokenizer", "model_positions", "yarn_groups", "run_gate",
           "with_run_gate"]
